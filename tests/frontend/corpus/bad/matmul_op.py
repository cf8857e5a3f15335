import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*i32'):
    o = nl.arange(0, 16)[:, None] * 16 + nl.arange(0, 16)[None, :]
    a = nl.load(x_ptr + o)
    c = a @ a
