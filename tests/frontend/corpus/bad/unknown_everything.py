import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    a = foo(bar)
    b = nl.nothing(a)
    c = a.b.c.d
