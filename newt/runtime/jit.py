"""``@newt.jit``: the kernel object users decorate functions with.

The front end reads the function's source through ``jit_source()``; the
launch path (``kernel[grid](...)``) specializes on the arguments, builds the IR
with ``newt.frontend.build_ir`` and compiles it (or interprets it when
``NEWT_INTERPRET=1`` or ``interpret=True``).
"""

from __future__ import annotations

import functools
import inspect

from newt.language import core as lc


class JITFunction:
    """A ``@newt.jit`` function."""

    __newt_jit__ = True

    def __init__(self, fn, *, do_not_specialize=(), interpret=None, debug=None, noinline=False, **options):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.__module__ = getattr(fn, "__module__", None)
        functools.update_wrapper(self, fn)
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.constexpr_names = {n for n, p in self.signature.parameters.items() if _is_constexpr(p.annotation)}
        dns = set()
        for d in do_not_specialize:
            dns.add(self.arg_names[d] if isinstance(d, int) else d)
        self.do_not_specialize = dns
        self.interpret = interpret
        self.debug = debug
        self.noinline = noinline
        self.options = options
        self._jit_source = None

    def jit_source(self):
        """The front end's view of this function (source text, AST, globals)."""
        if self._jit_source is None:
            from newt.frontend.values import jit_source_from_function
            self._jit_source = jit_source_from_function(self.fn)
        return self._jit_source

    def __call__(self, *args, **kwargs):
        raise lc.NewtUsageError(
            f"{self.__name__} is a @newt.jit function: launch it with {self.__name__}[grid](...) "
            "or call it from another @newt.jit function")

    def __repr__(self):
        return f"JITFunction({self.__module__}:{self.__qualname__})"


def _is_constexpr(ann) -> bool:
    if ann is lc.constexpr:
        return True
    if isinstance(ann, str):
        return ann.strip() in ("constexpr", "nl.constexpr", "tl.constexpr", "newt.language.constexpr")
    return False


def jit(fn=None, **kwargs):
    """Decorate a kernel: ``@newt.jit`` or ``@newt.jit(do_not_specialize=[...], interpret=True)``."""
    if fn is None:
        return lambda f: JITFunction(f, **kwargs)
    return JITFunction(fn, **kwargs)
