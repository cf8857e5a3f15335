"""``sass(cubin)``: disassemble a cubin with cuobjdump (from the nvidia-cuda-cuobjdump wheel, or PATH)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile

__all__ = ["sass", "find_cuobjdump"]


def _wheel_bins() -> list:
    out = []
    for base in sys.path:
        if not base or not os.path.isdir(base):
            continue
        out += glob.glob(os.path.join(base, "nvidia", "*", "bin"))
        out += glob.glob(os.path.join(base, "nvidia", "cuda_cuobjdump", "bin"))
    return out


def find_cuobjdump() -> str | None:
    for d in _wheel_bins():
        p = os.path.join(d, "cuobjdump")
        if os.access(p, os.X_OK):
            return p
    found = shutil.which("cuobjdump")
    if found:
        return found
    for p in ("/usr/local/cuda/bin/cuobjdump",):
        if os.access(p, os.X_OK):
            return p
    return None


def sass(cubin: bytes) -> str:
    """The SASS of a cubin as text.  Raises ``RuntimeError`` when cuobjdump is not available."""
    tool = find_cuobjdump()
    if tool is None:
        raise RuntimeError("cuobjdump not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    env = dict(os.environ)
    extra = [os.path.dirname(tool)] + [d for d in _wheel_bins() if os.access(os.path.join(d, "nvdisasm"), os.X_OK)]
    env["PATH"] = os.pathsep.join(extra + [env.get("PATH", "")])
    for d in extra:
        if os.access(os.path.join(d, "nvdisasm"), os.X_OK):
            env.setdefault("NVDISASM_PATH", d)
            break
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        r = subprocess.run([tool, "--dump-sass", path], capture_output=True, text=True, env=env, timeout=120)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout
