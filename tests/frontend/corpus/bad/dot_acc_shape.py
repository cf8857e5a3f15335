import newt
import newt.language as nl

@newt.jit
def k(x_ptr: '*fp16'):
    o = nl.arange(0, 16)[:, None] * 16 + nl.arange(0, 16)[None, :]
    a = nl.load(x_ptr + o)
    acc = nl.zeros((32, 16), dtype=nl.float32)
    c = nl.dot(a, a, acc)
