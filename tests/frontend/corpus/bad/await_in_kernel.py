import newt
import newt.language as nl

@newt.jit
async def k(x_ptr):
    await x_ptr
