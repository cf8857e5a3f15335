"""A dot whose A operand is gathered (rows picked by indices loaded in the kernel), in a K loop of fewer,
as many or more iterations than ``num_stages``, alone or inside outer loops: the shape of Helion's
``gather_gemv`` example, which gave wrong numbers on the H100 through deuteron (2026-12-07, 10 of 256 outputs) at
its default config (3 stages, 2 K iterations) while passing on the interpreter, and the loop nest of
``moe_matmul_ogs`` (whose own wrong rows are the example's race: one store writes two values to one address)."""

from __future__ import annotations

import re

import pytest

import newt
import newt.language as nl


@newt.jit
def gather_dot_kernel(idx, a, b, c, M, N, K, sa, sb, sc, BM: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    offs_m = nl.program_id(0) * BM + nl.arange(0, BM)
    offs_n = nl.program_id(1) * BN + nl.arange(0, BN)
    rows = nl.load(idx + offs_m, mask=offs_m < M, other=0)
    acc = nl.zeros((BM, BN), dtype=nl.float32)
    for k0 in range(0, K, BK):
        offs_k = k0 + nl.arange(0, BK)
        x = nl.load(a + rows[:, None] * sa + offs_k[None, :], mask=(offs_m[:, None] < M) & (offs_k[None, :] < K),
                    other=0)
        y = nl.load(b + offs_k[:, None] * sb + offs_n[None, :], mask=(offs_k[:, None] < K) & (offs_n[None, :] < N),
                    other=0)
        acc = nl.dot(x, y, acc)
    nl.store(c + offs_m[:, None] * sc + offs_n[None, :], acc.to(c.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@newt.jit
def grouped_gather_kernel(starts, counts, idx, a, w, c, N, K, max_t, sa, sw0, sw1, sc,
                          BT: nl.constexpr, BN: nl.constexpr, BK: nl.constexpr):
    """Each program one group (an expert): its rows gathered through ``idx``, tiles over rows and columns,
    a K loop inside (moe_matmul_ogs's loop nest)."""
    e = nl.program_id(0)
    start = nl.load(starts + e)
    n_rows = nl.load(counts + e)
    if n_rows != 0:
        for t0 in range(0, max_t, BT):
            offs_t = t0 + nl.arange(0, BT)
            valid = offs_t < n_rows
            rows = nl.load(idx + start + nl.where(valid, offs_t, 0), mask=offs_t < max_t, other=0)
            for n0 in range(0, N, BN):
                offs_n = n0 + nl.arange(0, BN)
                acc = nl.zeros((BT, BN), dtype=nl.float32)
                for k0 in range(0, K, BK):
                    offs_k = k0 + nl.arange(0, BK)
                    x = nl.load(a + rows[:, None] * sa + offs_k[None, :], mask=valid[:, None] & (offs_k[None, :] < K),
                                other=0)
                    y = nl.load(w + e * sw0 + offs_k[:, None] * sw1 + offs_n[None, :],
                                mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0)
                    acc = nl.dot(x, y, acc)
                nl.store(c + rows[:, None] * sc + offs_n[None, :], acc.to(c.dtype.element_ty),
                         mask=valid[:, None] & (offs_n[None, :] < N))


@newt.jit
def gather_index_in_loop_kernel(idx, w, x, out, S: nl.constexpr, BR: nl.constexpr, BK: nl.constexpr,
                                R: nl.constexpr):
    """``out[r] = w[idx[r // S] * S + r % S, :] . x``, the gathered row index computed inside the K loop, as
    deuteron generates Helion's gather_gemv (its default config: 128 x 64 blocks, the column padded to R):
    each copy of the pipeline converts the index vector to the copy's layout through shared memory."""
    offs_r = nl.program_id(0) * BR + nl.arange(0, BR)
    col = nl.arange(0, R)
    base = nl.load(idx + offs_r // S) * S
    acc = nl.zeros((BR, R), dtype=nl.float32)
    for k0 in range(0, S, BK):
        offs_k = k0 + nl.arange(0, BK)
        row = base + offs_r % S
        a = nl.load(w + row[:, None] * S + offs_k[None, :], mask=(row[:, None] >= 0) & (row[:, None] < 8 * S),
                    other=0)
        b = nl.load(x + offs_k[:, None], mask=col[None, :] < 1, other=0)
        acc = acc + nl.dot(a, b)
    nl.store(nl.broadcast_to(out + offs_r[:, None], (BR, R)), acc.to(nl.float16), mask=col[None, :] < 1)


def _offsets(cuda: str) -> dict:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"constexpr int (SMEM_\w+) = (\d+);", cuda)}


@pytest.mark.parametrize("num_warps", [4, 8])
def test_the_staged_operand_shares_no_bytes_with_a_layout_conversion(num_warps):
    """Offline (NVRTC, sm_90a): the gathered rows' index vector changes layout through shared memory inside the
    K loop, and the gathered tile is staged there for wgmma; the staging area starts after the conversion's
    buffer instead of at the same offset (session 13's suspect for gather_gemv's wrong rows; the cause was the
    ring overlap that ``test_the_copies_own_scratch_shares_no_bytes_with_the_ring`` checks)."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.runtime.compiler import compile as ncompile
    k = ncompile(gather_dot_kernel, signature={"idx": "*i32", "a": "*fp16", "b": "*fp16", "c": "*fp16", "M": "i32",
                                               "N": "i32", "K": "i32", "sa": "i32", "sb": "i32", "sc": "i32"},
                 constexprs={"BM": 128, "BN": 16, "BK": 64}, num_warps=num_warps, num_stages=3, cache=False)
    cuda = k.asm["cuda"]
    assert "wgmma.mma_async" in cuda
    offs = _offsets(cuda)
    conv = set(re.findall(r"reinterpret_cast<int\*>\(smem \+ (SMEM_\w+)\)", cuda))
    staged = set(re.findall(r"\(smem \+ (SMEM_\w+) \+ \d+\) \+ \(\(r\)", cuda))
    assert conv and staged, "expected a layout conversion of int indices and a staged wgmma operand"
    # the conversion holds 128 indices (plus a padding word every 32): 528 bytes
    assert all(offs[s] >= offs[c] + 528 for s in staged for c in conv), (offs, conv, staged)
    assert k.metadata.shared >= max(offs[s] for s in staged) + 128 * 64 * 2


@pytest.mark.parametrize("num_stages", [2, 3, 4])
def test_the_copies_own_scratch_shares_no_bytes_with_the_ring(num_stages):
    """Offline (NVRTC, sm_90a): the code that issues a pipeline's copies -- the prologue's and each iteration's
    -- runs while earlier copies are landing in the ring, so the scratch it uses (here the conversion of the
    gathered rows' indices to the copy's layout) starts after the ring's buffers.  Before, it started at 0, in
    stage 0 of the A ring: on the H100 and the H200 deuteron's gather_gemv came out wrong in tile rows 0-4 (the
    conversion's 528 bytes) while the interpreter was right."""
    pytest.importorskip("cuda.bindings.nvrtc")
    from newt.runtime.compiler import compile as ncompile
    k = ncompile(gather_index_in_loop_kernel, signature={"idx": "*i32", "w": "*fp16", "x": "*fp16", "out": "*fp16"},
                 constexprs={"S": 128, "BR": 128, "BK": 32, "R": 16}, num_warps=4, num_stages=num_stages, cache=False,
                 hints={"idx": 16, "w": 16, "x": 16, "out": 16})
    cuda = k.asm["cuda"]
    offs = _offsets(cuda)
    ring = {n: o for n, o in offs.items() if n.startswith("SMEM_PIPE")}
    # the ring: A's buffers (128 x 32 fp16 a stage) at 0, then the padded column's (32 x 16 fp16 a stage)
    assert sorted(ring.values())[0] == 0 and len(ring) == 2
    ring_end = max(ring.values()) + num_stages * 32 * 16 * 2
    issuing = re.findall(r"// (?:prologue: iteration \d+|issue the loads of iteration it \+ \d+)\n(.*?)"
                         r"cp_async_commit\(\);", cuda, re.S)
    assert len(issuing) == num_stages, "the prologue's copies and the loop's"
    used = {m for block in issuing for m in re.findall(r"reinterpret_cast<int\*>\(smem \+ (SMEM_SCRATCH\d+)\)", block)}
    assert used, "expected the index conversion in the copies' code"
    assert all(offs[u] >= ring_end for u in used), (offs, used)
    assert k.metadata.shared >= max(offs[u] for u in used) + 528


def test_async_proxy_areas_start_after_their_class_plain_areas():
    from newt.backend.cuda.codegen import _scratch_offsets
    from newt.backend.cuda.emitter import SmemUse
    uses = [SmemUse("P", 8192, True, False), SmemUse("A", 1024, False, True),
            SmemUse("B", 16384, False, True, async_proxy=True), SmemUse("C", 5120, False, True),
            SmemUse("D", 4096, False, False), SmemUse("E", 2048, False, False, async_proxy=True)]
    base, (end_in, end_out) = _scratch_offsets(uses, pers=8192, beside=False)
    assert base == {"A": 8192, "C": 8192, "B": 8192 + 5120, "D": 0, "E": 4096}
    assert (end_in, end_out) == (8192 + 5120 + 16384, 4096 + 2048)
    # without async-proxy areas nothing moves: every area of a class at the class's start
    plain = [u for u in uses if not u.async_proxy]
    base, (end_in, end_out) = _scratch_offsets(plain, pers=8192, beside=False)
    assert base == {"A": 8192, "C": 8192, "D": 0} and (end_in, end_out) == (8192 + 5120, 4096)
    # beside a producer's ring every area is of the inside class
    base, _ = _scratch_offsets(uses, pers=8192, beside=True)
    assert base["D"] == 8192 and base["E"] == 8192 + 5120


@pytest.mark.gpu
@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
@pytest.mark.parametrize("K", [64, 128, 320])
@pytest.mark.parametrize("BN", [16, 128])
def test_gathered_rows_dot(num_stages, K, BN):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(K + BN)
    M, N, rows_a = 256, (1 if BN == 16 else 200), 1024
    a = torch.randn(rows_a, K, generator=g).half().cuda()
    b = torch.randn(K, N, generator=g).half().cuda()
    idx = torch.randint(0, rows_a, (M,), generator=g, dtype=torch.int32).cuda()
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    BM, BK = 128, 64
    gather_dot_kernel[(triton_cdiv(M, BM), triton_cdiv(N, BN))](idx, a, b, c, M, N, K, a.stride(0), b.stride(0),
                                                                 c.stride(0), BM=BM, BN=BN, BK=BK, num_warps=4,
                                                                 num_stages=num_stages)
    ref = (a[idx.long()].float() @ b.float()).half()
    torch.testing.assert_close(c, ref, atol=0.1, rtol=0.01)


@pytest.mark.gpu
@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
@pytest.mark.parametrize("S", [128, 1024])
def test_gathered_index_in_loop_dot(num_stages, S):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(S + num_stages)
    w = torch.randn(8 * S, S, generator=g).half().cuda()
    idx = torch.tensor([1, 6], dtype=torch.int32).cuda()
    x = torch.randn(S, generator=g).half().cuda()
    out = torch.full((2 * S,), float("nan"), dtype=torch.float16, device="cuda")
    gather_index_in_loop_kernel[(2 * S // 128,)](idx, w, x, out, S=S, BR=128, BK=64, R=16, num_warps=4,
                                                 num_stages=num_stages)
    ref = torch.cat([w.view(8, S, S)[i].float() @ x.float() for i in idx.tolist()]).half()
    torch.testing.assert_close(out, ref, atol=0.1, rtol=0.01)


@pytest.mark.gpu
@pytest.mark.parametrize("num_stages", [1, 3])
@pytest.mark.parametrize("K", [64, 192])
def test_grouped_gathered_dot_in_outer_loops(num_stages, K):
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(K)
    T, N, E = 300, 96, 4
    a = torch.randn(T, K, generator=g).half().cuda()
    w = torch.randn(E, K, N, generator=g).half().cuda()
    expert = torch.randint(0, E, (T,), generator=g)
    order = torch.argsort(expert, stable=True)
    counts = torch.bincount(expert, minlength=E)
    starts = torch.cumsum(counts, 0) - counts
    c = torch.full((T, N), float("nan"), dtype=torch.float16, device="cuda")
    grouped_gather_kernel[(E,)](starts.int().cuda(), counts.int().cuda(), order.int().cuda(), a, w, c, N, K,
                                int(counts.max()), a.stride(0), w.stride(0), w.stride(1), c.stride(0),
                                BT=128, BN=64, BK=64, num_warps=8, num_stages=num_stages)
    ref = torch.bmm(a.float().unsqueeze(1), w.float()[expert.cuda()]).squeeze(1).half()
    torch.testing.assert_close(c, ref, atol=0.1, rtol=0.01)


def triton_cdiv(a, b):
    return (a + b - 1) // b
