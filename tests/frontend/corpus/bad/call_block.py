import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*fp32'):
    x = nl.load(x_ptr)
    x(1)
