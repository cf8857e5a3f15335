import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*fp32'):
    v = nl.load(x_ptr) + 'a'
