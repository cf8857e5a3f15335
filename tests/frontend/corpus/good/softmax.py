import torch

import newt
import newt.language as nl


@newt.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: nl.constexpr, num_stages: nl.constexpr):
    row_start = nl.program_id(0)
    row_step = nl.num_programs(0)
    for row_idx in nl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_ptr = in_ptr + row_idx * in_row_stride
        cols = nl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        row = nl.load(row_ptr + cols, mask=mask, other=-float("inf"))
        row_minus_max = row - nl.max(row, axis=0)
        numerator = nl.exp(row_minus_max)
        denominator = nl.sum(numerator, axis=0)
        out = numerator / denominator
        nl.store(out_ptr + row_idx * out_row_stride + cols, out, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = newt.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=BLOCK_SIZE,
                              num_stages=2, num_warps=8)
    return y
