import newt
import newt.language as nl

@newt.jit
def k(x_ptr):
    if (y := 3) > 2:
        pass
