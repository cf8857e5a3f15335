import newt
import newt.language as nl

@newt.jit
def a(x):
    return b(x)

@newt.jit
def b(x):
    return a(x)

@newt.jit
def k(x_ptr):
    a(x_ptr)
