"""The compiled launcher (``_launch.c``): built on first use, optional.

``module()`` returns the extension module, compiling ``_launch.c`` with the system C compiler the
first time (into the newt cache directory -- or ``$TMPDIR/newt-<uid>`` with the disk cache off --, each
directory checked to be private to this user; content-addressed by the source, the Python version and
the platform; written to a temporary file and moved into place; its owner and mode checked before it is
loaded), or None when it cannot be had: no
compiler or Python headers, a failed build, ``NEWT_C_LAUNCHER=0``.  ``status()`` says which and why.
Everything works without it: ``driver.Launcher`` then launches through ``cuda.bindings`` from Python.

Besides the ``Launcher`` (pack the arguments, call ``cuLaunchKernel``) the extension holds the launch hot
path: ``Dispatcher`` (``jit.c_fast_path``: binding, the specialization key, the cache lookup and the launch
of a cached specialization, everything else handed to the generated Python fast path), ``TuneDispatcher``
(``autotuner._c_tuner``: the tuning key and the winning config's dispatcher) and ``GridGetItem`` /
``Bound`` (``kernel[grid]``).  Their keys are tested against the Python path's in
tests/runtime/test_clauncher_dispatch.py, with no GPU: ``fake_driver`` gives stand-ins for the driver entry
points.

The extension needs no CUDA headers or libraries: ``driver.launch_entry()`` asks the driver, through
``cuda.bindings``' ``cuGetProcAddress``, for the address of ``cuLaunchKernel`` (and of
``cuLaunchCooperativeKernel``), the same entry points ``cuda.bindings`` itself calls.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path

SOURCE = Path(__file__).with_name("_launch.c")
MODULE_NAME = "_newt_launch"

#: the extension's code of a by-value byte blob of ``8 * k`` bytes is ``BLOB + k`` (struct code ``"<8k>s"``)
BLOB = 128
BLOB_MAX = (255 - BLOB) * 8


class _Codes(dict):
    """struct codes (``driver.struct_code``) -> the extension's parameter codes; ``"<n>s"`` (``n`` a multiple
    of 8 up to ``BLOB_MAX``: a parameter passed by value as ``n`` bytes, e.g. ``"128s"`` for a
    ``__grid_constant__ CUtensorMap``, given as a ``bytes`` object of that size) maps to ``BLOB + n // 8``.
    Any other code raises ``KeyError``: that kernel launches through the pure-Python launcher."""

    def __missing__(self, code):
        if isinstance(code, str) and code.endswith("s") and code[:-1].isdigit():
            n = int(code[:-1])
            if 0 < n <= BLOB_MAX and n % 8 == 0:
                return BLOB + n // 8
        raise KeyError(code)


CODES = _Codes({"?": 0, "b": 1, "B": 2, "h": 3, "H": 4, "i": 5, "I": 6, "q": 7, "Q": 8, "f": 9, "d": 10, "e": 11,
                "bf16": 12})

_lock = threading.Lock()
_state: dict = {}  # "module" -> module or None, "reason" -> why None


def enabled() -> bool:
    """``NEWT_C_LAUNCHER`` is not 0 / false / off."""
    return os.environ.get("NEWT_C_LAUNCHER", "1").strip().lower() not in ("0", "false", "no", "off")


_session_dir: list = []  # a private directory of this process (made when the shared one is not safe)


def _private_session_dir() -> Path:
    """A fresh ``mkdtemp`` directory (mode 0700, removed at exit), made once per process."""
    if not _session_dir:
        import atexit
        d = tempfile.mkdtemp(prefix="newt-launcher-")
        atexit.register(shutil.rmtree, d, True)
        _session_dir.append(Path(d))
    return _session_dir[0]


def _build_dir() -> Path:
    """Where the extension is built and loaded from: ``<cache>/launcher``, or with the disk cache off
    ``$TMPDIR/newt-<uid>/launcher``; each directory of the two levels must be private to this user
    (``cache.private_dir``: owned by the user, not writable by group or others, not a link -- a shared
    object found there is loaded into this process; newt's own ``newt-<uid>`` and ``launcher`` directories
    lose group/other write bits, the cache directory itself is left as it is).  When one is not (another user
    created it first, a cache directory others may write), the extension is built in a private ``mkdtemp``
    directory of this process instead, with a warning."""
    from .cache import UnsafePathError, default_cache_dir, private_dir
    d = default_cache_dir()
    root = d if d is not None else Path(tempfile.gettempdir()) / f"newt-{os.geteuid()}"
    try:
        private_dir(root, tighten=d is None)
        return private_dir(root / "launcher")
    except UnsafePathError as e:
        import warnings
        warnings.warn(f"newt: not building the compiled launcher in {root / 'launcher'} ({e}); using a private "
                      "temporary directory instead (a directory of yours: chmod go-w it)", RuntimeWarning,
                      stacklevel=2)
    except OSError:
        pass  # cannot create it (a read-only cache directory...): a private directory
    return _private_session_dir()


def _tag(src: bytes) -> str:
    h = hashlib.sha256(src)
    h.update(sys.version.encode())
    h.update(sysconfig.get_platform().encode())
    return h.hexdigest()[:16]


def compiler_command(src: Path, out: Path) -> list[str] | None:
    """The command that builds the extension, or None when there is no C compiler or no Python.h."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc_argv = cc.split()
    if not cc_argv or shutil.which(cc_argv[0]) is None:
        for alt in ("cc", "gcc", "clang"):
            if shutil.which(alt):
                cc_argv = [alt]
                break
        else:
            return None
    inc = sysconfig.get_paths().get("include")
    if not inc or not (Path(inc) / "Python.h").exists():
        return None
    return [*cc_argv, "-O2", "-shared", "-fPIC", "-std=c99", f"-I{inc}", str(src), "-o", str(out)]


def build(out_dir: Path | None = None) -> Path:
    """Compile ``_launch.c`` (if not already there) and return the shared object's path; raises on failure."""
    from .cache import check_private_file, private_dir
    src = SOURCE.read_bytes()
    out_dir = private_dir(out_dir if out_dir is not None else _build_dir())
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    so = out_dir / f"{MODULE_NAME}_{_tag(src)}{suffix}"
    if os.path.lexists(so):
        try:
            check_private_file(so)
            return so
        except OSError:  # another user's file (planted before the directory was private), a link: replace it
            os.unlink(so)
    fd, tmp = tempfile.mkstemp(prefix=so.name + ".", suffix=".tmp", dir=out_dir)
    os.close(fd)
    try:
        cmd = compiler_command(SOURCE, Path(tmp))
        if cmd is None:
            raise RuntimeError("no C compiler or no Python headers (Python.h) on this machine")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
        os.chmod(tmp, 0o755)  # (whatever the umask: load() refuses a file its group could change)
        os.replace(tmp, so)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return so


def load(path: Path):
    """Import the extension from ``path``, which must be a regular file owned by this user and writable by
    no one else (``cache.check_private_file``; ``UnsafePathError`` otherwise)."""
    from .cache import check_private_file
    check_private_file(path)
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
    spec = importlib.util.spec_from_file_location(MODULE_NAME, str(path), loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def module():
    """The extension module, built on first use; None when it is disabled or cannot be built."""
    if not enabled():
        return None
    if "module" in _state:
        return _state["module"]
    with _lock:
        if "module" not in _state:
            try:
                _state["module"] = load(build())
                _state["reason"] = None
            except Exception as e:  # any failure: the pure-Python launcher is used
                _state["module"] = None
                _state["reason"] = f"{type(e).__name__}: {e}"
    return _state["module"]


def status() -> str:
    """Whether launches go through the compiled launcher, and if not, why."""
    if not enabled():
        return "pure Python (NEWT_C_LAUNCHER=0)"
    m = module()
    return "compiled (_launch.c)" if m is not None else f"pure Python ({_state.get('reason')})"

