import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*fp32'):
    a, b, c = 1, 2
