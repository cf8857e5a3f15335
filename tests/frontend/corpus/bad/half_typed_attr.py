import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    x = nl.
