import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    for i in range(3):
        pass
    else:
        pass
