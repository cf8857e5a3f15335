import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    for i in nl.range(0, 10, num_stage=2):
        pass
