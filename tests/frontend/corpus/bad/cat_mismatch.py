import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*fp16'):
    a = nl.load(x_ptr + nl.arange(0, 16))
    b = nl.cat(a, nl.arange(0, 16))
