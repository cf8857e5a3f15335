import newt
import newt.language as nl


@newt.jit
def histogram_kernel(x_ptr, hist_ptr, n, NUM_BINS: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask, other=0)
    bins = nl.minimum(nl.maximum(x, 0), NUM_BINS - 1)
    nl.atomic_add(hist_ptr + bins, 1, mask=mask)


@newt.jit
def cumsum_kernel(x_ptr, y_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    nl.store(y_ptr + offs, nl.cumsum(x, axis=0))


@newt.jit
def _pair_max(a, ai, b, bi):
    take_a = (a > b) | ((a == b) & (ai < bi))
    return nl.where(take_a, a, b), nl.where(take_a, ai, bi)


@newt.jit
def argmax_rows(x_ptr, out_ptr, stride, N: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, N)
    x = nl.load(x_ptr + row * stride + cols)
    v, i = nl.reduce((x, cols), 0, _pair_max)
    nl.store(out_ptr + row, i)
    nl.store(out_ptr + row, nl.argmax(x, axis=0))


@newt.jit
def first_negative(x_ptr, out_ptr, n):
    i = 0
    found = -1
    while i < n:
        v = nl.load(x_ptr + i)
        if v < 0:
            found = i
            break
        i += 1
    nl.store(out_ptr, found)


@newt.jit
def early_exit(x_ptr, n, BLOCK: nl.constexpr):
    pid = nl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + nl.arange(0, BLOCK)
    for j in nl.static_range(4):
        if j == 2:
            continue
        nl.store(x_ptr + offs, j, mask=offs < n)


@newt.jit
def grid3d(x_ptr, BLOCK: nl.constexpr):
    a = nl.program_id(0)
    b = nl.program_id(1)
    c = nl.program_id(2)
    base = (a * nl.num_programs(1) + b) * nl.num_programs(2) + c
    offs = base * BLOCK + nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, offs.to(nl.float32) * 0.5)


def launch(x, y, h, n):
    histogram_kernel[(4,)](x, h, n, NUM_BINS=16, BLOCK=256)
    cumsum_kernel[(1,)](x, y, BLOCK=128)
    argmax_rows[(4,)](x, y, 64, N=64)
    early_exit[(4,)](x, n, BLOCK=64)
    grid3d[(2, 3, 4)](x, BLOCK=32)
