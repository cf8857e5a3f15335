"""Drop-in mode: run an unmodified Triton (or Helion) project on newt.

    python -m newt.dropin script.py [args]          # a script
    python -m newt.dropin -m pytest tests/          # a module (its test suite)
    python -m newt.dropin -c "import triton; ..."   # a command

or, from Python, ``newt.dropin.install()`` before the project's first ``import triton``.

``install()`` puts one import hook (a meta-path finder) in front of ``sys.meta_path``: from then on
``import triton`` and every ``triton.*`` module come from newt (``triton.language`` holds
``newt.language``'s objects; ``triton.jit`` makes a newt kernel; ``triton.runtime.driver.active``,
``triton.testing``, ``triton.backends.compiler`` ... answer what torch and libraries ask of them), even
when Triton itself is installed.  Nothing is written anywhere: ``uninstall()`` removes the hook and the
modules it served.

The same hook serves the other foreign languages a package built on newt implements: such a package
registers a module alias for its kernel kind (``newt.frontend.register_module_alias(foreign, own)``, the
alias the editor already reads files through) and serves the foreign package at run time from its own
``<own>.dropin`` module (a ``module_for(fullname)`` function).  ``install()`` loads the installed kernel
kinds (entry-point group ``newt.kernel_kinds``), so ``import helion`` works the same way as
``import triton`` once the Helion-like package is installed.

Where kernels run: a kernel of the drop-in runs on newt's interpreter when ``NEWT_INTERPRET`` or
``TRITON_INTERPRET`` is set to 1 or when torch sees no CUDA device (decided at its first launch);
otherwise it is compiled to CUDA as ``@newt.jit`` kernels are.  See docs/triton-compat.md.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
import sys
import threading

__all__ = ["install", "uninstall", "is_installed", "register_provider", "providers", "TRITON_API_VERSION",
           "DropinFinder", "install_inherited", "ENV_VAR", "inductor_decided_without_triton"]

#: set in the environment while the drop-in mode is on, so that newt's own worker processes (the autotuner's
#: compile workers) turn it on too before they import the project's kernel modules: ``"1"``, or the emulated
#: compute capability (``"9.0"``) where ``install(capability=...)`` asked for one
ENV_VAR = "NEWT_DROPIN"

#: the Triton API level newt implements (what ``triton.__version__`` reports in drop-in mode)
TRITON_API_VERSION = "3.4.0"

#: foreign top-level package -> the module that serves it (``module_for(fullname)``)
_PROVIDERS: dict[str, str] = {"triton": "newt.dropin.triton"}
_lock = threading.RLock()
_finder: DropinFinder | None = None
#: what install() forgot of a real package imported before it (name -> module), and the references it rebound
#: (rebind.py); uninstall() puts both back
_real_modules: dict = {}
_rebound: list = []


def register_provider(foreign: str, provider: str) -> None:
    """Serve the top-level package ``foreign`` (and its submodules) from module ``provider``, which defines
    ``module_for(fullname) -> module`` (raising ``ModuleNotFoundError`` for a module it does not have)."""
    if not foreign or "." in foreign:
        raise ValueError(f"register_provider: a top-level package name expected, got {foreign!r}")
    with _lock:
        _PROVIDERS[foreign] = provider


def providers() -> dict[str, str]:
    """The registered ``{foreign package: provider module}`` (a copy); after ``install()`` this includes the
    packages built on newt that registered a module alias for their kernel kind."""
    return dict(_PROVIDERS)


class _AliasLoader(importlib.abc.Loader):
    """Loads a foreign module by asking its provider; the module the provider returns replaces the
    placeholder in ``sys.modules`` (so an alias such as ``triton.language`` is ``newt.language`` itself,
    its own ``__spec__`` untouched)."""

    def __init__(self, provider: str):
        self.provider = provider

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__
        prov = importlib.import_module(self.provider)
        target = prov.module_for(name)
        if getattr(target, "__spec__", None) is None:
            # a facade built in memory: it keeps the spec it was found by, so ``importlib.util.find_spec`` on an
            # imported name answers (torch's CUDA initialisation asks ``find_spec("triton")``; None there raises)
            target.__spec__ = module.__spec__
        sys.modules[name] = target


class DropinFinder(importlib.abc.MetaPathFinder):
    """The meta-path finder of the drop-in mode (first in ``sys.meta_path`` while installed)."""

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        provider = _PROVIDERS.get(top)
        if provider is None:
            if fullname in _AFTER_IMPORT:
                return _spec_with_after_hook(self, fullname, path, target)
            return None
        prov = importlib.import_module(provider)
        has = getattr(prov, "has_module", None)
        if has is not None and not has(fullname):
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: newt's drop-in {top!r} ({provider}) does not provide it",
                name=fullname)
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(provider), is_package=True)
        spec.submodule_search_locations = []
        return spec

    def find_distributions(self, context=None):
        """``importlib.metadata.version("triton")`` (libraries gate code on it, e.g. ml-cross-entropy's
        ``is_package_greater_or_equal("triton", "3.2.0")``): a served package answers with the version its
        facade reports, ahead of an installed Triton's own metadata; nothing is listed for other names."""
        name = getattr(context, "name", None)
        if not name:
            return iter(())
        top = name.lower().replace("-", "_").replace(".", "_")
        if top not in _PROVIDERS:
            return iter(())
        version = TRITON_API_VERSION if top == "triton" else None
        if version is None:
            try:
                version = getattr(importlib.import_module(_PROVIDERS[top]).module_for(top), "__version__", None)
            except ImportError:
                version = None
        return iter((_ServedDistribution(top, str(version)),) if version else ())


#: modules the drop-in adjusts once they are loaded: ``{name: "module:function"}``, the function called with
#: the loaded module (inductor's config: the settings of newt.dropin.inductor)
_AFTER_IMPORT: dict[str, str] = {"torch._inductor.config": "newt.dropin.inductor:configure"}


class _AfterLoader(importlib.abc.Loader):
    """The module's own loader, then the drop-in's adjustment of the loaded module; any other attribute
    (``get_source``, ``is_package`` ...) is the original loader's."""

    def __init__(self, loader, hook: str):
        self._loader, self._hook = loader, hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        modname, _, func = self._hook.partition(":")
        getattr(importlib.import_module(modname), func)(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def _spec_with_after_hook(finder, fullname, path, target):
    """The spec the other finders give ``fullname``, its loader wrapped by :class:`_AfterLoader`."""
    for f in sys.meta_path:
        if f is finder or not hasattr(f, "find_spec"):
            continue
        spec = f.find_spec(fullname, path, target)
        if spec is not None:
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _AfterLoader(spec.loader, _AFTER_IMPORT[fullname])
            return spec
    return None


class _ServedDistribution(importlib.metadata.Distribution):
    """The metadata of a package the drop-in serves: its name and version, no files."""

    def __init__(self, name: str, version: str):
        self._text = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"

    def read_text(self, filename):
        return self._text if filename in ("METADATA", "PKG-INFO") else None

    def locate_file(self, path):
        return path


def _load_kind_providers() -> None:
    """The foreign packages that installed kernel kinds read (``register_module_alias``) are served by the
    kind's own ``<own>.dropin`` module."""
    from newt.frontend import load_installed_kinds
    from newt.frontend.kinds import module_aliases
    load_installed_kinds()
    for foreign, own in module_aliases().items():
        if foreign in _PROVIDERS:
            continue
        name = own + ".dropin"
        if importlib.util.find_spec(name) is not None:
            _PROVIDERS[foreign] = name


def _forget(top: str) -> dict:
    """Drop ``top`` and its submodules from ``sys.modules``; returns them by name."""
    gone = {m: sys.modules[m] for m in list(sys.modules) if m == top or m.startswith(top + ".")}
    for m in gone:
        del sys.modules[m]
    return gone


def install(capability: tuple[int, int] | None = None) -> DropinFinder:
    """Activate the drop-in mode in this process (idempotent): put the finder first in ``sys.meta_path``
    and forget any module already imported under a served name (a real ``triton`` torch may have imported),
    so the next import comes from newt.  Returns the finder.

    ``capability=(9, 0)`` (``python -m newt.dropin --capability 9.0``), on a machine where torch sees no
    GPU, makes ``torch.cuda.get_device_capability()`` answer that compute capability, the one kernels are
    built for, so code that picks its path by the GPU generation (``capability[0] >= 9``) runs its branch
    for that GPU on the interpreter; nothing else of ``torch.cuda`` changes (``is_available()`` stays
    False).  With a GPU it is ignored."""
    global _finder
    with _lock:
        emulated = capability is not None and _emulate_capability((int(capability[0]), int(capability[1])))
        _load_kind_providers()
        if emulated or not os.environ.get(ENV_VAR):
            # (with a GPU the capability is the GPU's: a compile worker takes it from its target)
            os.environ[ENV_VAR] = f"{int(capability[0])}.{int(capability[1])}" if emulated and capability else "1"
        if _finder is None:
            _finder = DropinFinder()
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        sys.meta_path.insert(0, _finder)
        real: dict = {}
        for top in _PROVIDERS:
            mod = sys.modules.get(top)
            if mod is not None and not getattr(mod, "__newt_dropin__", False):
                real.update(_forget(top))
        if real:  # (modules that imported the real package first: torch's inductor holds its objects)
            from .rebind import rebind
            _real_modules.update(real)
            _rebound.extend(rebind(real, tuple(_PROVIDERS)))
        _reset_torch_probes()
        from . import inductor
        inductor.configure()  # (inductor imported before install(): its settings now; else at its import)
        if inductor_decided_without_triton():
            import warnings
            warnings.warn("torch's inductor was imported before newt.dropin.install() in a process where no "
                          "`triton` could be imported, and decided then that there is none: torch.compile in this "
                          "process will not generate kernels through the drop-in (\"triton package is not "
                          "installed\"). Install the drop-in first: `python -m newt.dropin ...`, or "
                          "newt.dropin.install() before torch.compile or any torch._inductor import.",
                          RuntimeWarning, stacklevel=2)
        return _finder


_saved_capability = None
_inherited: tuple | None = None  # what install_inherited last acted on


def install_inherited(target: str | None = None) -> bool:
    """In a worker process newt started (an autotuner's compile worker): turn the drop-in mode on when the
    process that started it had it on (``NEWT_DROPIN`` in the environment), before the worker imports the
    project's kernel module.  Without it the worker's ``import triton`` finds no module (or, where Triton is
    installed, Triton itself, whose kernels newt cannot compile), every config fails there and the main process
    compiles them again one after another.  The capability the main process emulated is emulated here too; a
    compile worker sees no GPU (``CUDA_VISIBLE_DEVICES=""``), so without one the capability of ``target``
    (``"sm_90a"`` -> 9.0) answers ``torch.cuda.get_device_capability()``, as the main process's GPU did:
    libraries call it while their kernel modules are imported (attorch's ``get_n_stages``).  Returns whether the
    mode is on."""
    global _inherited
    val = os.environ.get(ENV_VAR, "")
    if not val:
        return is_installed()
    if _inherited == (val, target) and is_installed():  # (every compile task asks: once is enough)
        return True
    cap = None
    m = re.fullmatch(r"(\d+)\.(\d+)", val)
    if m:
        cap = (int(m.group(1)), int(m.group(2)))
    elif target:
        t = re.fullmatch(r"sm_(\d+?)(\d)a?", str(target))
        if t:
            cap = (int(t.group(1)), int(t.group(2)))
    if not is_installed() or cap is not None:
        install(capability=cap)
    _inherited = (val, target)
    return True


def _emulate_capability(cap: tuple[int, int]) -> bool:
    """Make ``torch.cuda.get_device_capability()`` answer ``cap`` where there is no GPU; False (nothing
    done) with a GPU."""
    global _saved_capability
    from newt.runtime.driver import has_gpu
    if has_gpu():
        return False
    import torch
    if _saved_capability is None:
        _saved_capability = torch.cuda.get_device_capability

    def get_device_capability(device=None) -> tuple[int, int]:
        return cap

    get_device_capability.__doc__ = f"(newt drop-in, no GPU: the emulated compute capability {cap})"
    torch.cuda.get_device_capability = get_device_capability
    return True


def uninstall() -> None:
    """Leave the drop-in mode: remove the finder and the modules it served (and an emulated capability)."""
    global _finder, _saved_capability
    with _lock:
        os.environ.pop(ENV_VAR, None)
        if _saved_capability is not None:
            import torch
            torch.cuda.get_device_capability = _saved_capability
            _saved_capability = None
        if _finder is not None and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        for top in _PROVIDERS:
            mod = sys.modules.get(top)
            if mod is not None and getattr(mod, "__newt_dropin__", False):
                _forget(top)
        if _rebound:
            from .rebind import restore
            restore(_rebound)
        for name, mod in _real_modules.items():  # (the real package install() found, back as it was)
            sys.modules.setdefault(name, mod)
        _real_modules.clear()
        _reset_torch_probes()
        from . import inductor
        inductor.restore()
        if "newt.dropin.triton" in sys.modules:
            sys.modules["newt.dropin.triton"].reset_driver()


def is_installed() -> bool:
    return _finder is not None and _finder in sys.meta_path


def inductor_decided_without_triton() -> bool:
    """Whether torch's inductor was imported in this process while no ``triton`` could be imported: its
    ``torch._inductor.runtime.triton_compat`` then binds fallbacks once (``HAS_TRITON = False``,
    ``triton_key`` raising "triton package is not installed"), and modules imported after it keep them, so the
    drop-in installed later cannot serve torch.compile in this process."""
    mod = sys.modules.get("torch._inductor.runtime.triton_compat")
    return mod is not None and getattr(mod, "HAS_TRITON", True) is False


def _reset_torch_probes() -> None:
    """torch caches what it learnt of ``triton`` (``functools.cache`` on its probes): forget it, so torch
    asks again and sees the package now served."""
    mod = sys.modules.get("torch.utils._triton")
    if mod is None:
        return
    for name in dir(mod):
        f = getattr(mod, name, None)
        clear = getattr(f, "cache_clear", None)
        if callable(clear):
            clear()
