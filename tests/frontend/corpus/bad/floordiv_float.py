import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*fp32'):
    a = nl.load(x_ptr)
    c = a // 2.0
