import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    v = nl.load((x_ptr, x_ptr))
