"""Running generated kernels: the module cache on disk and the launch.

Generated source is written to ``<cache>/gen/<hash>.py`` (atomically) and
imported from there, so newt's front end reads it like any kernel file and
error messages point at a real file.  CUDA tensors launch through newt's
runtime (``kernel[grid](...)``); CPU tensors run through newt's interpreter.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["cache_dir", "load_module", "launch", "has_gpu", "num_sms", "get_num_sm", "device_name"]

_MODULES: dict = {}
_LOCK = threading.Lock()


def cache_dir() -> Path:
    d = os.environ.get("DEUTERON_CACHE_DIR")
    if d:
        p = Path(d)
    else:
        base = os.environ.get("NEWT_CACHE_DIR")
        if base:
            p = Path(base) / "deuteron"
        else:
            p = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "deuteron"
    p.mkdir(parents=True, exist_ok=True)
    return p


def atomic_write(path: Path, data: str | bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:24]


def load_module(source: str, stem: str = "kernel", interpret: bool = False):
    """Import generated source (identical source: one module, compiled once).

    ``interpret``: a separate module object whose kernels run through newt's interpreter (CPU tensors).
    """
    h = source_hash(source)
    with _LOCK:
        mod = _MODULES.get((h, interpret))
        # the file must still exist: tuning workers import it by path (a cleared or changed cache dir
        # leaves the in-memory module pointing at a deleted file)
        if mod is not None and os.path.exists(mod.__file__ or ""):
            return mod
        path = cache_dir() / "gen" / f"{stem}_{h}.py"
        if not path.exists() or path.read_text(encoding="utf-8") != source:
            atomic_write(path, source)
        name = f"deuteron_gen_{stem}_{h}" + ("_interp" if interpret else "")
        spec = importlib.util.spec_from_file_location(name, str(path))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        import linecache
        linecache.checkcache(str(path))
        spec.loader.exec_module(mod)
        if interpret:
            for v in vars(mod).values():
                if getattr(v, "__newt_jit__", False) and hasattr(v, "interpret"):
                    v.interpret = True
        _MODULES[(h, interpret)] = mod
        return mod


def has_gpu() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:
        return False


_SMS: dict = {}


def num_sms(device) -> int:
    import torch
    if device.type != "cuda":
        return 4
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx]


def get_num_sm(device) -> int:
    """The number of SMs of ``device`` (a torch.device or its name), Helion's ``runtime.get_num_sm``: the
    program count of a persistent kernel.  On the CPU (the interpreter) it is 4."""
    import torch
    return num_sms(torch.device(device) if not isinstance(device, torch.device) else device)


def device_name(device) -> str:
    import torch
    if device.type != "cuda":
        return "cpu"
    idx = device.index if device.index is not None else torch.cuda.current_device()
    p = torch.cuda.get_device_properties(idx)
    return f"{p.name} sm_{p.major}{p.minor}"


def launch(gen, module, args: list, constexprs: dict, device, num_sms_value: int | None = None):
    """Launch the generated kernel with its run-time arguments (in the kernel's parameter order)."""
    fn = getattr(module, gen.launch_name)
    kernel = getattr(module, gen.kernel_name)
    kw = dict(constexprs)
    kw["num_warps"] = gen.num_warps
    kw["num_stages"] = gen.num_stages
    if gen.needs_num_sms:
        kw["_NUM_SMS"] = num_sms_value or num_sms(device)
    del kernel
    fn(*args, **kw)
