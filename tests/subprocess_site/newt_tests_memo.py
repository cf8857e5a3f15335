"""One NVRTC compile (and one cuobjdump run) per distinct input in a test run, for the test processes and for
the processes they start. tests/conftest.py installs it in each test process; ``sitecustomize.py`` of this folder,
which tests/conftest.py puts on ``PYTHONPATH`` for the run, installs it in every Python process started with that
environment (a language server, its compile processes and workers) once ``newt.backend.cuda.compiler`` is
imported. It imports nothing of pytest: a subprocess pays only for what it uses."""

from __future__ import annotations

import os

#: the folder of the run's NVRTC results (tests/conftest.py): every file is written whole under a temporary name and
#: renamed into place, so that the run's processes can share it
NVRTC_MEMO_VAR = "NEWT_TESTS_NVRTC_MEMO"


def _nvrtc_memo_key(cc, module, target, extra_options, lineinfo) -> str | None:
    """A digest of everything ``_compile_once`` reads from its arguments and of NVRTC's version (None: not a
    module it knows)."""
    import hashlib
    try:
        h = hashlib.sha256()
        for part in (module.source, repr(list(module.headers.items())), module.kernel or module.name, module.name,
                     module.shared_bytes, module.num_warps, cc.get_target(target or module.target).name,
                     list(extra_options), bool(lineinfo), cc.nvrtc_version()):
            h.update(repr(part).encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return h.hexdigest()
    except Exception:  # (a stand-in module of a test: compiled as it is)
        return None


def install_nvrtc_memo(folder: str) -> None:
    """Many tests compile the same generated CUDA (the examples' matmul and attention at the same configs) with
    ``cache=False`` or in a fresh cache; NVRTC and ptxas cost 0.3-3 CPU seconds each time. Within a test run an
    identical input (source, headers, target, options: see ``_nvrtc_memo_key``) is compiled once and later calls
    get a copy of that result, the one NVRTC gives again. A test that replaces any part of the compile path
    (NVRTC's entry point, the ptxas report's parser, the cache options: ``monkeypatch``) gets real compiles
    while it does. Failures are not kept. ``NEWT_TESTS_NVRTC_MEMO=off`` turns it off."""
    import dataclasses
    import pickle
    try:
        from cuda.bindings import nvrtc

        from newt.backend.cuda import compiler as cc
    except Exception:  # (no backend or no NVRTC: nothing to keep)
        return
    if getattr(cc._compile_once, "_newt_test_memo", False):
        return
    real = cc._compile_once
    own = {name: getattr(cc, name) for name in ("parse_ptxas_report", "cubin_register_count", "cache_options",
                                                "nvrtc_version", "get_target")}
    own_nvrtc = nvrtc.nvrtcCompileProgram

    def untouched() -> bool:
        return nvrtc.nvrtcCompileProgram is own_nvrtc and all(getattr(cc, n) is f for n, f in own.items())

    def compile_once(module, target, extra_options, lineinfo):
        key = _nvrtc_memo_key(cc, module, target, extra_options, lineinfo) if untouched() else None
        if key is None:
            return real(module, target, extra_options, lineinfo)
        path = os.path.join(folder, key + ".pickle")
        try:
            with open(path, "rb") as f:
                kept = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            kept = None
        if isinstance(kept, cc.CompiledBinary):
            return dataclasses.replace(kept, module=module)
        b = real(module, target, extra_options, lineinfo)
        _keep(path, "wb", lambda f: pickle.dump(dataclasses.replace(b, module=None), f))
        return b

    compile_once._newt_test_memo = True
    cc._compile_once = compile_once
    _install_sass_memo(folder)


def _keep(path: str, mode: str, write) -> None:
    """Write a memo file whole: under a temporary name, then renamed into place (the run's workers share the
    folder; a reader sees the old file or the whole new one). A failure keeps nothing."""
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as f:
            write(f)
        os.replace(tmp, path)
    except OSError:
        pass


def _install_sass_memo(folder: str) -> None:
    """The same for ``asm["sass"]``: cuobjdump runs once per distinct cubin in a test run."""
    import hashlib
    import importlib
    try:
        disasm = importlib.import_module("newt.backend.cuda.disasm")
        sass_module = importlib.import_module("newt.backend.cuda.sass")  # (the package attribute is a function)
    except Exception:
        return
    real = disasm.sass
    if getattr(real, "_newt_test_memo", False):
        return

    def sass(cubin: bytes) -> str:
        tool = disasm.find_cuobjdump()
        if tool is None:
            return real(cubin)
        path = os.path.join(folder, hashlib.sha256(repr(tool).encode() + bytes(cubin)).hexdigest() + ".sass")
        try:
            with open(path, encoding="utf-8", newline="") as f:
                return f.read()
        except OSError:
            pass
        text = real(cubin)
        _keep(path, "w", lambda f: f.write(text))
        return text

    sass._newt_test_memo = True
    disasm.sass = sass
    sass_module.sass = sass  # (bound there at its import)
