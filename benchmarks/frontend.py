"""Front-end speed: parse + check every discovered specialization of a 1,000-line file with 20 kernels.

    python benchmarks/frontend.py [--repeat 20]

Prints the median and p95 of ``analyze_source`` and the cold import time of
``newt.language`` + ``newt.frontend`` (measured in a fresh interpreter).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
CORPUS = os.path.join(ROOT, "tests", "frontend", "corpus", "good")


HOST_CODE = """
def host_helper_{i}(x, y, n_rows, n_cols):
    \"\"\"Host-side code of the kind real kernel files carry (argument checks, allocation, launch glue).\"\"\"
    assert x.is_contiguous() and y.is_contiguous()
    assert x.shape == y.shape, f"shape mismatch: {{x.shape}} vs {{y.shape}}"
    out = torch.empty_like(x)
    block = newt.next_power_of_2(n_cols)
    num_warps = 4
    if block >= 2048:
        num_warps = 8
    if block >= 4096:
        num_warps = 16
    grid = (n_rows,)
    stats = {{"rows": n_rows, "cols": n_cols, "block": block, "warps": num_warps}}
    return out, grid, stats
"""


def make_big_file(n_kernels: int = 20, target_lines: int = 1000) -> str:
    """n_kernels @newt.jit functions from the test corpus (renamed per copy), padded with host code to
    target_lines lines, like a real module of kernels."""
    header = "import newt\nimport newt.language as nl\nimport torch\n\n"
    chunks = []
    for p in sorted(glob.glob(os.path.join(CORPUS, "*.py"))):
        text = open(p).read()
        body = "\n".join(ln for ln in text.splitlines() if not ln.startswith(("import ", "from ")))
        # split into top-level definitions, keeping each function with its decorators
        parts = re.split(r"\n(?=@|def |[A-Za-z_]+ = )", body)
        chunks.append([pt for pt in parts if pt.strip()])
    out, kernels, copy = [header], 0, 0
    while kernels < n_kernels:
        for parts in chunks:
            names = [m for pt in parts for m in re.findall(r"^def (\w+)\(", pt, re.M)]
            text = "\n\n".join(parts)
            for nm in sorted(names, key=len, reverse=True):
                text = re.sub(rf"\b{nm}\b", f"{nm}_{copy}", text)
            n = text.count("@newt.jit")
            if kernels + n > n_kernels:
                continue
            out.append(text + "\n\n")
            kernels += n
            if kernels == n_kernels:
                break
        copy += 1
        if copy > 50:
            break
    i = 0
    while sum(s.count("\n") for s in out) < target_lines:
        out.append(HOST_CODE.format(i=i))
        i += 1
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    from newt.frontend import analyze_source
    text = make_big_file()
    n_lines = text.count("\n")
    fa = analyze_source(text, "big.py")
    n_kernels = len(fa.kernels)
    n_specs = sum(len(k.results) for k in fa.kernels)
    errors = [d for d in fa.diagnostics if d.severity == 1]
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        analyze_source(text, "big.py")
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
    code = ("import time; t=time.perf_counter(); import newt.language, newt.frontend; "
            "import sys; print((time.perf_counter()-t)*1e3, 'torch' in sys.modules)")
    imp = []
    for _ in range(5):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=ROOT))
        ms, torch_loaded = r.stdout.split()
        imp.append(float(ms))
    print(f"file: {n_lines} lines, {n_kernels} kernels, {n_specs} checks (generic + specializations), "
          f"{len(errors)} errors")
    print(f"analyze_source: median {statistics.median(times):.1f} ms, p95 {p95:.1f} ms (target < 100 ms)")
    print(f"import newt.language + newt.frontend: median {statistics.median(imp):.1f} ms "
          f"(target < 200 ms), torch imported: {torch_loaded}")


if __name__ == "__main__":
    main()
