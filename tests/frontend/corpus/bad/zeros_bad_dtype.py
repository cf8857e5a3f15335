import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    a = nl.zeros((16,), dtype='float32')
