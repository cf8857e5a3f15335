"""``newt check`` over the kernel files of Triton libraries (checkouts kept outside the project), per library.

    python benchmarks/newt_check_corpus.py [--root /work/ext] [--only fla,flaggems] [--show errors|all|none]

Each library is a checkout under ROOT (its commit in a ``COMMIT`` file or its ``.git``); its kernel files are
the ``.py`` files under the listed folders (for the newer corpora, those that contain ``triton.jit``).  One
``python -m newt check`` per library; printed per library: files, kernels, errors, warnings (the CLI's
summary line) and, with ``--show``, the diagnostics.  A library whose checkout is missing is reported as
such, never counted.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

#: name -> (folder under ROOT, kernel folders inside it, how deep: "**" for every level, "*" for one, which
#: files: "all" the .py files (the first corpus, as measured on 2026-12-06) or "jit" those naming triton.jit)
CORPORA = {
    "Liger-Kernel": ("Liger-Kernel", ["src/liger_kernel/ops"], "*", "all"),
    "attorch": ("attorch", ["attorch"], "*", "all"),
    "unsloth": ("unsloth", ["unsloth/kernels"], "**", "all"),
    "ml-cross-entropy": ("ml-cross-entropy", ["cut_cross_entropy"], "**", "all"),
    "triton-tutorials": ("triton-tutorials", ["."], "*", "all"),
    "fla": ("fla", ["fla/ops"], "**", "jit"),
    "flaggems": ("flaggems", ["src/flag_gems/ops", "src/flag_gems/fused"], "**", "jit"),
}

_SUMMARY = re.compile(r"checked (\d+) files?, (\d+) kernels?: (\d+) errors?, (\d+) warnings?")


def kernel_files(base: str, folders: list, depth: str, which: str) -> list:
    out = []
    for f in folders:
        top = os.path.join(base, f)
        for dirpath, dirnames, files in os.walk(top):
            if depth == "*":
                dirnames[:] = []
            dirnames.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    p = os.path.join(dirpath, name)
                    with open(p, encoding="utf-8", errors="replace") as fh:
                        if which == "all" or "triton.jit" in fh.read():
                            out.append(p)
    return out


def commit_of(base: str) -> str:
    p = os.path.join(base, "COMMIT")
    if os.path.exists(p):
        return open(p).read().split()[0][:12]
    try:
        return subprocess.run(["git", "-C", base, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()[:12]
    except Exception:
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="/work/ext")
    ap.add_argument("--only", default="", help="comma-separated names of CORPORA")
    ap.add_argument("--show", choices=["errors", "all", "none"], default="errors")
    ap.add_argument("--smoke", action="store_true", help="the project's own examples/ as the one corpus")
    a = ap.parse_args(argv)
    corpora = dict(CORPORA)
    names = [n for n in a.only.split(",") if n] or list(CORPORA)
    if a.smoke:
        a.root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        corpora, names = {"examples": ("examples", ["."], "*", "all")}, ["examples"]
    total = [0, 0, 0, 0]
    for name in names:
        folder, sub, depth, which = corpora[name]
        base = os.path.join(a.root, folder)
        if not os.path.isdir(base):
            print(f"{name}: no checkout at {base}; not counted")
            continue
        files = kernel_files(base, sub, depth, which)
        r = subprocess.run([sys.executable, "-m", "newt", "check", "--no-hints", *files], capture_output=True,
                           text=True)
        lines = r.stdout.splitlines()
        m = _SUMMARY.search(r.stdout)
        if m is None:
            print(f"{name}: newt check gave no summary (rc {r.returncode})\n{r.stderr[-2000:]}")
            if a.smoke:
                return 1
            continue
        counts = [int(x) for x in m.groups()]
        total = [t + c for t, c in zip(total, counts)]
        print(f"{name} @ {commit_of(base)}: {counts[0]} files, {counts[1]} kernels: "
              f"{counts[2]} errors, {counts[3]} warnings")
        for ln in lines:
            if (a.show == "all" and ("error[" in ln or "warning[" in ln)) or (a.show == "errors" and "error[" in ln):
                print("  " + ln.replace(base + "/", ""))
    print(f"total: {total[0]} files, {total[1]} kernels: {total[2]} errors, {total[3]} warnings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
