import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    a = nl.arange(0, 16.0)
