import newt
import newt.language as nl


@newt.jit
def seeded_dropout(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: nl.constexpr):
    pid = nl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + nl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = nl.load(x_ptr + offsets, mask=mask)
    random = nl.rand(seed, offsets)
    x_keep = random > p
    output = nl.where(x_keep, x / (1 - p), 0.0)
    nl.store(output_ptr + offsets, output, mask=mask)


def dropout(x, out, p, seed):
    n = x.numel()
    seeded_dropout[(newt.cdiv(n, 1024),)](x, out, n, p, seed, BLOCK_SIZE=1024)
