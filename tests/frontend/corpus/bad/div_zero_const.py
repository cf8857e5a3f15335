import newt
import newt.language as nl

@newt.jit
def k(x_ptr, B: nl.constexpr):
    v = B // 0

def h(x):
    k[(1,)](x, B=4)
