import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*fp32'):
    nl.atomic_and(x_ptr, 1.0)
