import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    for i in nl.static_range(10**9):
        pass
