import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*i32'):
    nl.atomic_add(x_ptr, 1, sem='strong')
