import newt
import newt.language as nl

@newt.jit
def good(x_ptr):
    offs = nl.arange(0, 100)

@newt.jit
def bad(x_ptr):
    x = (((
