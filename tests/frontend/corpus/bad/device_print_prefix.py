import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*i32'):
    v = nl.load(x_ptr)
    nl.device_print(v)
