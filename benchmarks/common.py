"""Shared helpers of the GPU benchmarks (bench.py, launch_overhead.py).

* :func:`instantiate` writes one kernel template for newt and for Triton (only
  the package and the language alias differ: ``$P``/``$L`` in the template)
  and imports both — the JITs read kernel source from files.
* :func:`median_ms` times with ``newt.testing.do_bench`` (CUDA events, L2
  flushed before every repetition, median) for every implementation alike.
* :func:`environment`, :func:`load_anchors`, :func:`geomean`, writers.
"""

from __future__ import annotations

import datetime
import glob
import importlib.util
import json
import math
import os
import platform
import string
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PACKAGES = {"newt": ("newt", "nl"), "triton": ("triton", "tl")}
_GEN_DIR = None


def instantiate(template: str, impl: str, name: str):
    """Import ``template`` with ``$P`` -> the package (newt/triton) and ``$L`` -> its language alias (nl/tl)."""
    global _GEN_DIR
    if _GEN_DIR is None:
        _GEN_DIR = Path(tempfile.mkdtemp(prefix="newt-bench-"))
    pkg, lang = PACKAGES[impl]
    src = string.Template(template).substitute(P=pkg, L=lang)
    path = _GEN_DIR / f"{name}_{impl}.py"
    path.write_text(src)
    modname = f"_bench_{name}_{impl}"
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return mod


def median_ms(fn, warmup: float = 25, rep: float = 100) -> float:
    """Median time of ``fn()`` in ms, L2 flushed before every repetition (the same timer for every impl)."""
    from newt.testing import do_bench
    return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    if not xs:
        return float("nan")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _version(mod: str) -> str:
    try:
        from importlib.metadata import version
        return version(mod)
    except Exception:
        return "not installed"


def environment() -> dict:
    """GPU, date and versions for the results header."""
    import torch

    import newt
    from newt.runtime import compiler
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(), "python": platform.python_version(),
        "torch": torch.__version__, "triton": _version("triton"), "cuda_bindings": _version("cuda-bindings"),
        "nvrtc": compiler.nvrtc_version(), "newt": newt.__version__,
    }
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, sms=p.multi_processor_count, cc=f"{p.major}.{p.minor}",
                    memory_gb=round(p.total_memory / 2 ** 30, 1), torch_cuda=torch.version.cuda)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit",
                                  "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
            if out.returncode == 0:
                drv, clk, pwr = [s.strip() for s in out.stdout.splitlines()[0].split(",")]
                info.update(driver=drv, max_sm_clock=clk, power_limit=pwr)
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            pass
    # NEWT_GIT_REV: the commit, when the tree was copied to the GPU machine without its history
    info["git"] = os.environ.get("NEWT_GIT_REV", "")
    if not info["git"]:
        try:
            info["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                         cwd=str(ROOT), timeout=10).stdout.strip() or "?"
        except (OSError, subprocess.SubprocessError):
            info["git"] = "?"
    return info


def anchor_dirs(extra=None) -> list:
    dirs = [extra] if extra else []
    if os.environ.get("NEWT_ANCHORS"):
        dirs.append(os.environ["NEWT_ANCHORS"])
    dirs += [str(ROOT.parent / "shared" / "anchors"), str(ROOT / "shared" / "anchors"), "/work/shared/anchors"]
    return dirs


_DTYPE_NAMES = {"fp32": "float32", "float32": "float32", "fp16": "float16", "float16": "float16",
                "bf16": "bfloat16", "bfloat16": "bfloat16", "tf32": "float32"}


def norm_dtype(d: str) -> str:
    return _DTYPE_NAMES.get(str(d).replace("torch.", ""), str(d))


def load_anchors(extra=None):
    """``({(kind, shape, dtype, impl): ms}, path)`` from the H200 anchor file, or ``({}, None)``."""
    for d in anchor_dirs(extra):
        files = sorted(glob.glob(os.path.join(d, "h200_triton_torch_*.json")))
        if not files:
            continue
        data = json.loads(Path(files[-1]).read_text())
        table = {}
        for r in data.get("results", []):
            key = (r["kind"], tuple(r["shape"]), norm_dtype(r["dtype"]), r["impl"])
            table[key] = r["ms"]
        return table, files[-1]
    return {}, None


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
    os.replace(tmp, path)


def fmt_ratio(x) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.2f}x"


def fmt_ms(x) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.4f}"
