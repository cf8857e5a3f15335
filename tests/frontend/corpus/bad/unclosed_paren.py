import newt
import newt.language as nl

@newt.jit
def k(x_ptr, n):
    x = nl.load(x_ptr + nl.arange(0, 16)
    nl.store(x_ptr, x)
