import newt
import newt.language as nl

@newt.jit
