import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*i32'):
    nl.load(x_ptr, cache_modifier='.zz')
