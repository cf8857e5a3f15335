"""newt's CPU interpreter vs Triton's interpreter (TRITON_INTERPRET=1) on the same kernels.

Run: ``PYTHONPATH=. python benchmarks/interpreter.py [--repeat N] [--no-write]``; ``--smoke`` runs every
case once at tiny sizes with newt only and exits 1 on a wrong result (tests/test_benchmarks.py).
Triton is a benchmark-only dependency (``pip install triton``); without it only
newt's timings are printed.  Results go to ``benchmarks/results_interpreter.md``.

The kernels are written once as a template instantiated for each language
(``nl`` <-> ``tl``): a masked vector add (98,000 elements in blocks of 512),
a 67x129x100 fp16 matmul in 32x32x32 tiles, a small causal flash attention
(2 heads x 128 tokens x 64 dims, 32x32 tiles) and a data-dependent while loop
(the Collatz trip count of 300 numbers, one per program).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TRITON_INTERPRET", "1")  # only affects triton, which reads it at import

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import instantiate

import newt
from newt.runtime.interpret import launch_jit

try:
    import triton
    HAVE_TRITON = True
except Exception as e:
    HAVE_TRITON = False
    TRITON_ERROR = f"{type(e).__name__}: {e}"

# ---------------------------------------------------------------------------
# the kernels, written once: $P/$L become newt/nl or triton/tl (benchmarks/common.py)
# ---------------------------------------------------------------------------

TEMPLATE = """
import $P
import $P.language as $L



@$P.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: $L.constexpr):
    pid = $L.program_id(0)
    offs = pid * BLOCK + $L.arange(0, BLOCK)
    mask = offs < n
    x = $L.load(x_ptr + offs, mask=mask)
    y = $L.load(y_ptr + offs, mask=mask)
    $L.store(out_ptr + offs, x + y, mask=mask)


@$P.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: $L.constexpr, BN: $L.constexpr, BK: $L.constexpr):
    pid_m = $L.program_id(0)
    pid_n = $L.program_id(1)
    rm = pid_m * BM + $L.arange(0, BM)
    rn = pid_n * BN + $L.arange(0, BN)
    rk = $L.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = $L.zeros((BM, BN), dtype=$L.float32)
    for k in range(0, K, BK):
        a = $L.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = $L.load(b_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc = $L.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c_ptrs = c_ptr + rm[:, None] * scm + rn[None, :] * scn
    $L.store(c_ptrs, acc.to($L.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@$P.jit
def attn_kernel(Q, K, V, Out, sm_scale, N_CTX, D: $L.constexpr, BM: $L.constexpr, BN: $L.constexpr):
    start_m = $L.program_id(0)
    off_h = $L.program_id(1)
    base = off_h * N_CTX * D
    offs_m = start_m * BM + $L.arange(0, BM)
    offs_n = $L.arange(0, BN)
    offs_d = $L.arange(0, D)
    q = $L.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = $L.zeros([BM], dtype=$L.float32) - float("inf")
    l_i = $L.zeros([BM], dtype=$L.float32)
    acc = $L.zeros([BM, D], dtype=$L.float32)
    qk_scale = sm_scale * 1.44269504
    hi = (start_m + 1) * BM
    for start_n in range(0, hi, BN):
        cols = start_n + offs_n
        k = $L.load(K + base + cols[None, :] * D + offs_d[:, None])
        qk = $L.dot(q, k) * qk_scale
        qk = $L.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))
        m_ij = $L.maximum(m_i, $L.max(qk, 1))
        p = $L.math.exp2(qk - m_ij[:, None])
        alpha = $L.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + $L.sum(p, 1)
        v = $L.load(V + base + cols[:, None] * D + offs_d[None, :])
        acc = acc * alpha[:, None]
        acc = $L.dot(p.to($L.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    $L.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc.to($L.float16))


@$P.jit
def collatz_kernel(x_ptr, out_ptr):
    pid = $L.program_id(0)
    x = $L.load(x_ptr + pid)
    steps = 0
    while x != 1:
        if x % 2 == 0:
            x = x // 2
        else:
            x = 3 * x + 1
        steps += 1
    $L.store(out_ptr + pid, steps)
"""

NEWT_KERNELS = instantiate(TEMPLATE, "newt", "interp")
TRITON_KERNELS = instantiate(TEMPLATE, "triton", "interp") if HAVE_TRITON else None


# ---------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------


def _launch(backend, name, grid, args, kw):
    if backend == "newt":
        return lambda: launch_jit(getattr(NEWT_KERNELS, name), grid, args, kw)
    kernel = getattr(TRITON_KERNELS, name)
    return lambda: kernel[grid](*args, **kw)


#: problem sizes (``--smoke`` shrinks them)
SIZES = {"add": 98_000, "matmul": (67, 129, 100), "attention": (2, 128, 64), "while": 300}
SMOKE_SIZES = {"add": 1_000, "matmul": (33, 35, 40), "attention": (1, 64, 64), "while": 20}


def case_vector_add(backend):
    n = SIZES["add"]
    x, y = torch.randn(n), torch.randn(n)
    out = torch.empty(n)
    run = _launch(backend, "add_kernel", (triton_cdiv(n, 512),), (x, y, out, n),
                  {"BLOCK": 512})
    return run, lambda: torch.equal(out, x + y)


def case_matmul(backend):
    M, N, K = SIZES["matmul"]
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    c = torch.empty(M, N, dtype=torch.float16)
    grid = (triton_cdiv(M, 32), triton_cdiv(N, 32))
    run = _launch(backend, "matmul_kernel", grid,
                  (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)),
                  {"BM": 32, "BN": 32, "BK": 32})
    ref = (a.float() @ b.float())
    return run, lambda: torch.allclose(c.float(), ref, atol=1e-1, rtol=1e-2)


def case_attention(backend):
    H, T, Dh = SIZES["attention"]
    q, k, v = (torch.randn(H, T, Dh).half() for _ in range(3))
    o = torch.empty_like(q)
    scale = 0.125
    run = _launch(backend, "attn_kernel", (T // 32, H), (q, k, v, o, scale, T),
                  {"D": Dh, "BM": 32, "BN": 32})
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    s = (q.float() @ k.float().transpose(1, 2)) * scale
    ref = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v.float()
    return run, lambda: torch.allclose(o.float(), ref, atol=2e-2, rtol=2e-2)


def case_while(backend):
    n = SIZES["while"]
    x = torch.arange(1, n + 1, dtype=torch.int32)
    out = torch.zeros(n, dtype=torch.int32)
    run = _launch(backend, "collatz_kernel", (n,), (x, out), {})

    def ref():
        r = []
        for v in range(1, n + 1):
            s = 0
            while v != 1:
                v = v // 2 if v % 2 == 0 else 3 * v + 1
                s += 1
            r.append(s)
        return torch.tensor(r, dtype=torch.int32)
    return run, lambda: torch.equal(out, ref())


def triton_cdiv(a, b):
    return (a + b - 1) // b


CASES = [
    ("masked vector add, 98k elements, 512-blocks", case_vector_add, 0.375),
    ("fp16 matmul 67x129x100, 32-tiles", case_matmul, 0.460),
    ("causal flash attention 2x128x64, 32-tiles", case_attention, 0.510),
    ("data-dependent while loop, 300 programs", case_while, 2.6),
]


def timeit(run, repeat):
    """Best of ``repeat`` runs after one warm-up run (builds the IR / parses the kernel).

    The best run is reported because the machines are shared: other work only ever adds time.
    """
    run()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        ts.append(time.perf_counter() - t0)
    return min(ts), statistics.median(ts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not update results_interpreter.md")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one run, newt only, no file written; "
                    "exit 1 on a wrong result")
    ns = ap.parse_args(argv)
    if ns.smoke:
        SIZES.update(SMOKE_SIZES)
        ns.repeat, ns.no_write = 1, True
    if ns.threads:
        torch.set_num_threads(ns.threads)
    torch.manual_seed(0)
    load0 = _loadavg()
    rows = []
    for name, case, ref_s in CASES:
        run, check = case("newt")
        t_newt, med_newt = timeit(run, ns.repeat)
        ok_newt = check()
        t_tri = med_tri = ok_tri = None
        if ns.smoke and not ok_newt:
            print(f"{name}: WRONG RESULT", file=sys.stderr)
            return 1
        if HAVE_TRITON and not ns.smoke:
            run, check = case("triton")
            t_tri, med_tri = timeit(run, max(2, ns.repeat // 2))
            ok_tri = check()
        rows.append((name, t_newt, med_newt, ok_newt, t_tri, med_tri, ok_tri, ref_s))
    header = ("| kernel | newt interpreter (best / median) | Triton interpreter (best / median) | speedup (best) "
              "| vs the issue's Triton reference |")
    lines = [header, "|---|---|---|---|---|"]
    for name, tn, mn, okn, tt, mt, okt, ref_s in rows:
        tri = (f"{tt * 1e3:.1f} / {mt * 1e3:.1f} ms{'' if okt else ' (WRONG RESULT)'}" if tt is not None
               else "n/a")
        sp = f"{tt / tn:.1f}x" if tt is not None else "n/a"
        lines.append(f"| {name} | {tn * 1e3:.1f} / {mn * 1e3:.1f} ms{'' if okn else ' (WRONG RESULT)'} | {tri} | "
                     f"{sp} | {ref_s / tn:.0f}x ({ref_s * 1e3:.0f} ms) |")
    table = "\n".join(lines)
    print(table)
    if not ns.no_write:
        info = [
            f"- date: {datetime.date.today().isoformat()}",
            f"- machine: {platform.machine()}, {os.cpu_count()} CPUs ({_cpu_name()}); torch threads "
            f"{torch.get_num_threads()} (Triton), NEWT_INTERPRET_THREADS="
            f"{os.environ.get('NEWT_INTERPRET_THREADS', '1 (default)')} (newt)",
            f"- python {platform.python_version()}, torch {torch.__version__}, newt {newt.__version__}, "
            f"triton {triton.__version__ if HAVE_TRITON else 'not installed: ' + TRITON_ERROR}",
            f"- best and median of {ns.repeat} runs (newt) / {max(2, ns.repeat // 2)} runs (Triton), each after "
            "one warm-up run; speedup = Triton's best / newt's best",
            f"- load average before / after: {load0} / {_loadavg()} (the machine is shared; other work only adds "
            "time, hence the best run)",
        ]
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results_interpreter.md")
        with open(path, "w") as f:
            f.write("# Interpreter speed: newt vs Triton (TRITON_INTERPRET=1)\n\n"
                    "Produced by `PYTHONPATH=. python benchmarks/interpreter.py`.\n\n")
            f.write("\n".join(info) + "\n\n" + table + "\n")
        print(f"\nwritten to {path}")
    return 0


def _loadavg():
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
