"""Triton's tutorials 01-06, unmodified, through newt's drop-in mode, with their own checks.

    python benchmarks/triton_tutorials.py DIR [--only 01,03] [--gpu-section skip|run|auto] [--json out.json]
                                              [--timeout 900]

DIR holds Triton's tutorial files as Triton ships them (``01-vector-add.py`` ... ``06-fused-attention.py``;
nothing of them is kept in this project).  Each file runs in a subprocess of its own under
``python -m newt.dropin --capability 9.0`` (so ``import triton`` is newt's): on a machine without a GPU every
kernel runs on newt's interpreter, and ``torch.cuda.get_device_capability()``, which the tutorials ask to
pick their code path (06 at import), says 9.0 (the sm_90 target kernels are built for); with a GPU they
compile to CUDA and the real capability is used.  The files are executed as they are; this script only
watches: it captures what they print and where an exception leaves them, and judges each tutorial's own
checks from that.

The checks (each is the tutorial's own assert or the claim its printout makes):

* 01 ``add``: the printed maximum difference between torch and Triton is 0.
* 02 ``softmax``: the tutorial's ``assert torch.allclose(y_triton, y_torch)``.
* 03 ``matmul fp16`` / ``matmul fp8``: the tutorial prints "Triton and Torch match" (it compares with
  ``torch.allclose`` itself).
* 04 ``dropout`` / ``seeded dropout``: the printed tables: each output is ``x / (1 - p)`` where kept and 0
  elsewhere (for the baseline, kept where the printed mask is 1); the two runs with seed 123 agree.
* 05 ``layer norm``: ``test_layer_norm(1151, 8192, torch.float16)``, its four asserts (y, dx, db, dw).
* 06 ``attention``: the tutorial's pytest test ``test_op`` at its smallest sizes (Z=1, H=2, N_CTX=128,
  HEAD_DIM 64 and 128, causal and not, fwd with fp8 and bwd with fp16; the tutorial itself skips the other
  two combinations), run as pytest runs it (``PYTEST_VERSION`` set, so the tutorial uses its single
  test config).

The benchmark sections (``benchmark.run(...)``) time kernels on a GPU: ``--gpu-section skip`` (the default
without a GPU) replaces ``Mark.run`` by a note, ``run`` runs them, ``auto`` runs them only with a GPU.
A check covers the module-level statements from the previous check's anchor to its own: it fails with the
exception that stopped the file in them; checks after that are "not reached".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TUTORIALS = ["01-vector-add.py", "02-fused-softmax.py", "03-matrix-multiplication.py", "04-low-memory-dropout.py",
             "05-layer-norm.py", "06-fused-attention.py"]


# ---- judging the checks from the printout --------------------------------------------------------------------

def _max_diff_zero(out: str):
    m = re.search(r"maximum difference between torch and triton is (\S+)", out)
    if not m:
        return False, "no 'maximum difference' line printed"
    return float(m.group(1)) == 0.0, f"maximum difference {m.group(1)}"


def _match_line(k: int):
    def judge(out: str):
        marks = re.findall(r"(✅|❌) Triton and Torch (match|differ)", out)
        if len(marks) <= k:
            return False, "no match/differ line printed"
        return marks[k][0] == "✅", f"printed 'Triton and Torch {marks[k][1]}'"
    return judge


def _tables(out: str) -> list[dict[str, list[float]]]:
    """The tabulate tables 04 prints: {row label: values}."""
    tables, cur = [], None
    for line in out.splitlines():
        if re.fullmatch(r"[- ]+", line.strip() or "x"):
            if cur:
                tables.append(cur)
                cur = None
            else:
                cur = {}
            continue
        if cur is not None:
            m = re.match(r"(\S.*?)\s{2,}(.*)", line)
            if m:
                cur[m.group(1).strip()] = [float(v) for v in m.group(2).split()]
    return tables


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-4 * max(1.0, abs(b))


def _dropout_table(out: str):
    t = [t for t in _tables(out) if "keep mask" in t]
    if not t:
        return False, "no dropout table printed"
    t = t[0]
    x, keep, y = t["input"], t["keep mask"], t["output"]
    bad = [i for i in range(len(x)) if not _close(y[i], x[i] / 0.5 if keep[i] else 0.0)]
    return not bad, "outputs are x/(1-p) where kept, 0 elsewhere" if not bad else f"wrong outputs at {bad}"


def _seeded_table(out: str):
    t = [t for t in _tables(out) if "output (seed = 512)" in t]
    if not t:
        return False, "no seeded-dropout table printed"
    t = t[0]
    x = t["input"]
    o512 = t["output (seed = 512)"]
    # tabulate keeps one row per label in our dict: the two seed-123 rows share a label, so re-read them
    lines = [ln for ln in out.splitlines() if ln.startswith("output (seed = 123)")]
    r1, r2 = ([float(v) for v in ln.split(")", 1)[1].split()] for ln in lines[-2:])
    if r1 != r2:
        return False, "the two runs with seed 123 differ"
    for row in (r1, o512):
        for xi, yi in zip(x, row):
            if yi != 0.0 and not _close(yi, xi / 0.5):
                return False, f"output {yi} is neither 0 nor x/(1-p) = {xi / 0.5}"
    return True, "seed 123 twice agrees; outputs are 0 or x/(1-p)"


#: tutorial -> [(check name, anchor: text of the module-level statement that decides it (or a tuple of the texts
#: it has in different Triton versions), judge(stdout) or None)]
CHECKS = {
    "01-vector-add.py": [("add", "output_triton = add(x, y)", _max_diff_zero)],
    "02-fused-softmax.py": [("softmax", "assert torch.allclose(y_triton, y_torch)", None)],
    "03-matrix-multiplication.py": [("matmul fp16", ("rtol = 1e-2 if is_hip_cdna2() else 0",  # newer versions
                                                     "if torch.allclose(triton_output, torch_output, atol=1e-2"),
                                     _match_line(0)),
                                    ("matmul fp8", "if TORCH_HAS_FP8 and is_cuda():", _match_line(1))],
    "04-low-memory-dropout.py": [("dropout", "output = dropout(x, x_keep=x_keep, p=p)", _dropout_table),
                                 ("seeded dropout", "output = seeded_dropout(x, p=0.5, seed=123)", _seeded_table)],
    "05-layer-norm.py": [("layer norm fwd+bwd", "test_layer_norm(1151, 8192, torch.float16)", None)],
}

#: 06: test_op(Z, H, N_CTX, HEAD_DIM, causal, warp_specialize, mode, provider) at the smallest sizes
ATTENTION_CASES = [(1, 2, 128, d, causal, False, mode, prov) for d in (64, 128) for causal in (False, True)
                   for mode, prov in (("fwd", "triton-fp8"), ("bwd", "triton-fp16"))]


# ---- the child: runs one tutorial under the drop-in -------------------------------------------------------------

class _Tee:
    def __init__(self, stream):
        self.stream = stream
        self.parts: list[str] = []

    def write(self, s):
        self.parts.append(s)
        return self.stream.write(s)

    def flush(self):
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _first_line_in(tb, path: str, module_level: bool):
    """(line, innermost line) of the traceback's frames in ``path``."""
    outer = inner = None
    for fr, line in traceback.walk_tb(tb):
        if os.path.abspath(fr.f_code.co_filename) == path:
            if fr.f_code.co_name == "<module>" and outer is None:
                outer = line
            inner = line
    return outer if module_level else inner


def _cause(exc: BaseException, tb, path: str) -> str:
    inner = _first_line_in(tb, path, False)
    where = f" (tutorial line {inner})" if inner else ""
    diags = getattr(exc, "diagnostics", None)
    msg = f"{diags[0].code} {diags[0].message}" if diags else str(exc)
    m = re.search(r"error\[([A-Z]\d+)\] ([^\n]*)", str(exc))
    if m and not diags:  # a compile error carried by another exception (the autotuner's): its first diagnostic
        msg = f"{m.group(1)} {m.group(2)}"
    return f"{type(exc).__name__}: {(msg.strip().splitlines() or [''])[0][:160]}{where}"


def child(path: str, gpu_section: str) -> dict:
    from newt.dropin import install
    install()
    import triton.testing

    from newt.runtime.driver import has_gpu
    skipped = []
    if gpu_section == "skip" or (gpu_section == "auto" and not has_gpu()):
        def no_run(self, *a, **k):
            skipped.append(getattr(self.fn, "__name__", "benchmark"))
            print(f"[triton_tutorials] benchmark {skipped[-1]}.run(...) skipped (it times kernels on a GPU)")
        triton.testing.Mark.run = no_run
    name = os.path.basename(path)
    path = os.path.abspath(path)
    src = open(path, encoding="utf-8").read()
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    t0 = time.time()
    checks = []
    exc_line, cause = None, None
    if name.startswith("06"):
        os.environ["PYTEST_VERSION"] = "dropin"
    import runpy
    sys.path.insert(0, os.path.dirname(path))
    g = None
    try:
        g = runpy.run_path(path, run_name="__main__" if not name.startswith("06") else "tutorial06")
    except BaseException as e:  # the tutorial's failure is what we measure
        if isinstance(e, KeyboardInterrupt):
            raise
        exc_line = _first_line_in(e.__traceback__, path, True)
        cause = _cause(e, e.__traceback__, path)
    out = "".join(tee.parts)
    lines = src.splitlines()
    prev = 0  # a check covers the module-level statements after the previous check's anchor, up to its own
    for cname, anchor, judge in CHECKS.get(name, []):
        alts = (anchor,) if isinstance(anchor, str) else anchor  # the statement's text in each tutorial version
        at = next((i + 1 for i, ln in enumerate(lines) if ln.startswith(alts)), None)
        section, prev = (prev, at), at or prev
        if at is None:
            checks.append({"check": cname, "ok": False, "cause": f"anchor {anchor!r} not in the file"})
        elif exc_line is not None and section[0] < exc_line <= at:
            checks.append({"check": cname, "ok": False, "cause": cause})
        elif exc_line is not None and exc_line <= section[0]:
            checks.append({"check": cname, "ok": None, "cause": "not reached: " + cause})
        elif judge is None:
            checks.append({"check": cname, "ok": True, "cause": None})
        else:
            ok, why = judge(out)
            checks.append({"check": cname, "ok": bool(ok), "cause": None if ok else why, "note": why})
    if name.startswith("06"):
        import pytest
        if g is None:
            checks += [{"check": f"test_op{c}", "ok": None, "cause": "not reached: " + str(cause)}
                       for c in ATTENTION_CASES]
        for case in ATTENTION_CASES if g is not None else []:
            label = "test_op(Z={}, H={}, N_CTX={}, HEAD_DIM={}, causal={}, ws={}, {}, {})".format(*case)
            t1 = time.time()
            try:
                g["test_op"](*case)
                checks.append({"check": label, "ok": True, "cause": None, "seconds": round(time.time() - t1, 1)})
            except pytest.skip.Exception as e:
                checks.append({"check": label, "ok": None, "cause": f"skipped by the tutorial: {e}"})
            except Exception as e:
                checks.append({"check": label, "ok": False, "cause": _cause(e, e.__traceback__, path),
                               "seconds": round(time.time() - t1, 1)})
    sys.stdout = tee.stream
    return {"file": name, "seconds": round(time.time() - t0, 1), "checks": checks, "benchmarks_skipped": skipped,
            "stopped": cause}


# ---- the parent ---------------------------------------------------------------------------------------------------

# a stand-in for tutorial 01 written for --smoke (Triton's own files are not part of this project); it prints
# a wrong maximum difference on purpose when SMOKE_WRONG is set
_SMOKE_TUTORIAL = """
import os
import torch
import triton
import triton.language as tl

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
             mask=mask)


def add(x, y):
    output = torch.empty_like(x)
    add_kernel[lambda meta: (triton.cdiv(output.numel(), meta['BLOCK_SIZE']), )](x, y, output, output.numel(),
                                                                              BLOCK_SIZE=256)
    return output


x = torch.rand(1000, device=DEVICE)
y = torch.rand(1000, device=DEVICE)
output_torch = x + y
output_triton = add(x, y)
print(f'The maximum difference between torch and triton is '
      f'{torch.max(torch.abs(output_torch - output_triton)) + (1 if os.environ.get("SMOKE_WRONG") else 0)}')


@triton.testing.perf_report(triton.testing.Benchmark(x_names=['size'], x_vals=[2**20], line_arg='provider',
                                                     line_vals=['triton'], line_names=['Triton'], plot_name='p'))
def benchmark(size, provider):
    raise AssertionError("the benchmark section must be skipped without a GPU")


benchmark.run(print_data=True)
"""


def smoke() -> int:
    """The whole runner on a stand-in for tutorial 01: it passes; with a wrong printout it fails."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tut_smoke_") as d:
        path = os.path.join(d, "01-vector-add.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(_SMOKE_TUTORIAL)
        good = run_one(path, "auto", 300)
        os.environ["SMOKE_WRONG"] = "1"
        try:
            bad = run_one(path, "auto", 300)
        finally:
            del os.environ["SMOKE_WRONG"]
    ok = [c["ok"] for c in good["checks"]] == [True] and [c["ok"] for c in bad["checks"]] == [False] \
        and "maximum difference 1.0" in (bad["checks"][0]["cause"] or "")
    if not ok:
        print("smoke: unexpected", good, bad)
    else:
        print("smoke: ok")
    return 0 if ok else 1

def run_one(path: str, gpu_section: str, timeout: int, capability: str = "9.0") -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "newt.dropin", "--capability", capability, os.path.abspath(__file__), "--child",
           path, "--gpu-section", gpu_section]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=os.path.dirname(os.path.abspath(path)))
    except subprocess.TimeoutExpired:
        return {"file": os.path.basename(path), "seconds": timeout, "checks": [],
                "stopped": f"timed out after {timeout} s"}
    m = re.search(r"^@@RESULT (.*)$", p.stdout, re.M)
    if not m:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {"file": os.path.basename(path), "seconds": round(time.time() - t0, 1), "checks": [],
                "stopped": "the child died: " + " | ".join(tail)}
    return json.loads(m.group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", help="folder with Triton's tutorial files")
    ap.add_argument("--only", help="comma-separated prefixes (01,03)")
    ap.add_argument("--gpu-section", choices=("skip", "run", "auto"), default="auto")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per tutorial")
    ap.add_argument("--capability", default="9.0",
                    help="without a GPU, the compute capability torch.cuda.get_device_capability() reports "
                         "(python -m newt.dropin --capability; the tutorials pick their path by it)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="run the runner on a built-in stand-in for tutorial 01")
    a = ap.parse_args(argv)
    if a.smoke:
        return smoke()
    if a.child:
        r = child(a.child, a.gpu_section)
        print("@@RESULT " + json.dumps(r), flush=True)
        return 0
    if a.dir:
        a.dir = os.path.abspath(a.dir)  # the children run in that folder: a relative path would not name it
    if not a.dir or not os.path.isdir(a.dir):
        print(f"triton_tutorials: no tutorial folder at {a.dir!r}; nothing measured")
        return 0
    only = a.only.split(",") if a.only else None
    results = []
    for name in TUTORIALS:
        if only and not any(name.startswith(o) for o in only):
            continue
        path = os.path.join(a.dir, name)
        if not os.path.exists(path):
            print(f"{name}: missing")
            continue
        r = run_one(path, a.gpu_section, a.timeout, a.capability)
        results.append(r)
        ok = sum(1 for c in r["checks"] if c["ok"])
        print(f"{name:30s} {ok}/{len(r['checks'])} checks  ({r['seconds']} s)"
              + (f"  benchmarks skipped: {', '.join(r.get('benchmarks_skipped') or [])}"
                 if r.get("benchmarks_skipped") else ""), flush=True)
        for c in r["checks"]:
            mark = {True: "pass", False: "FAIL", None: "----"}[c["ok"]]
            print(f"    {mark}  {c['check']}" + (f": {c['cause']}" if c.get("cause") else ""))
        if not r["checks"] and r.get("stopped"):
            print(f"    stopped: {r['stopped']}")
    total = [c for r in results for c in r["checks"] if c["ok"] is not None or "not reached" in (c["cause"] or "")]
    passed = [c for c in total if c["ok"]]
    print(f"\n{len(passed)} of {len(total)} checks pass")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"passed": len(passed), "counted": len(total), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
