import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    for i in range(0, 10, 0):
        pass
