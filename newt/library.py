"""newt and deuteron kernels as PyTorch custom ops, so that ``torch.compile`` calls them without a graph break.

In the spirit of ``torch.library.triton_op``: decorate the Python function that allocates the outputs and
launches the kernel, launch through :func:`wrap`, and the same function serves as the op's fake (meta)
implementation -- under ``torch.compile`` it runs on fake tensors with the launches skipped, which gives the
outputs' shapes, dtypes and strides::

    import newt, newt.library

    @newt.library.custom_op("mylib::add", mutates_args=())
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        newt.library.wrap(add_kernel)[(newt.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out

    torch.compile(model, fullgraph=True)   # model calls add(x, y): one graph, the op a leaf in it

A deuteron kernel (``@dt.kernel``) is registered as it is -- ``newt.library.custom_op("mylib::softmax",
softmax, mutates_args=())`` -- and its fake is its eager reference (``kernel.ref``) run on the fake tensors.
Anything else may pass ``fake=`` (a function of the same arguments that only allocates the outputs).

The result is torch's ``CustomOpDef``: ``register_autograd``, ``register_kernel`` and ``register_fake``
work as documented for ``torch.library.custom_op``.  Importing this module does not import torch; torch loads
when an op is registered.  See docs/runtime.md ("torch.compile").
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["custom_op", "wrap", "in_fake_mode"]

#: True while an op's fake implementation runs: :func:`wrap`'s launches do nothing then
_FAKE: contextvars.ContextVar[bool] = contextvars.ContextVar("newt_library_fake", default=False)


def in_fake_mode() -> bool:
    """Whether the caller runs inside a custom op's fake implementation (shape propagation, no data)."""
    return _FAKE.get()


class _Skipped:
    """What ``wrap(kernel)[grid](...)`` returns under a fake implementation: nothing was launched."""

    def __repr__(self):
        return "<newt launch skipped: fake tensors>"


_SKIPPED = _Skipped()


class WrappedKernel:
    """``wrap(kernel)``: launches like the kernel (``[grid](...)``, ``.run(..., grid=)``), except inside a custom
    op's fake implementation, where it launches nothing (the tensors have no data)."""

    __slots__ = ("kernel",)

    def __init__(self, kernel):
        if not (hasattr(kernel, "__getitem__") and callable(getattr(kernel, "run", None))):
            raise TypeError(f"newt.library.wrap() takes a @newt.jit or @newt.autotune kernel, "
                            f"not {type(kernel).__name__}")
        self.kernel = kernel

    def __getitem__(self, grid):
        if _FAKE.get():
            return lambda *args, **kwargs: _SKIPPED
        return self.kernel[grid]

    def run(self, *args, **kwargs):
        if _FAKE.get():
            return _SKIPPED
        return self.kernel.run(*args, **kwargs)

    def __repr__(self):
        return f"newt.library.wrap({self.kernel!r})"


def wrap(kernel) -> WrappedKernel:
    """The kernel, launched as usual, but not while its custom op only propagates shapes (the counterpart of
    ``torch.library.wrap_triton``)."""
    return kernel if isinstance(kernel, WrappedKernel) else WrappedKernel(kernel)


def _signature_source(fn):
    """The plain function behind ``fn`` (a ``@dt.kernel`` keeps it as ``__wrapped__``), for the schema."""
    return inspect.unwrap(fn) if not inspect.isfunction(fn) else fn


def _fake_for(fn, fake):
    if fake is not None:
        if not callable(fake):
            raise TypeError(f"fake= must be callable, not {type(fake).__name__}")
        return fake
    eager = getattr(fn, "__dt_eager__", None)  # a deuteron kernel: its eager reference gives the outputs
    if eager is not None:
        return eager

    @functools.wraps(fn)
    def fake_from_fn(*args, **kwargs):
        token = _FAKE.set(True)
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # a launch that did not go through wrap() sees fake tensors
            raise RuntimeError(
                f"newt.library: {getattr(fn, '__qualname__', fn)!r} failed while computing its outputs' shapes "
                f"on fake tensors ({type(e).__name__}: {e}); launch newt kernels through "
                "newt.library.wrap(kernel)[grid](...) so that the launch is skipped there, or pass fake= "
                "(a function of the same arguments that only allocates the outputs)") from e
        finally:
            _FAKE.reset(token)

    return fake_from_fn


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args: str | Iterable[str],
              fake: Callable | None = None, device_types: str | Iterable[str] | None = None,
              schema: str | None = None) -> Any:
    """Register ``fn`` (a function that launches newt kernels, or a ``@dt.kernel``) as the PyTorch operator
    ``name`` ("namespace::op"), with a fake implementation, and return torch's ``CustomOpDef``.

    ``mutates_args``: the names of the tensor arguments the op writes (``()`` for none; ``"unknown"`` is
    accepted as in torch).  ``fake``: the fake (meta) implementation; by default ``fn`` itself with the
    launches made through :func:`wrap` skipped, or, for a deuteron kernel, its eager reference.  The schema is
    inferred from ``fn``'s annotations unless ``schema`` is given.  Usable as ``@custom_op(name, mutates_args=())``.
    """
    if not isinstance(name, str) or "::" not in name:
        raise ValueError(f"newt.library.custom_op: the name must be 'namespace::op', not {name!r}")
    if isinstance(mutates_args, str) and mutates_args != "unknown":
        raise TypeError("mutates_args must be an iterable of argument names (or 'unknown'); "
                        f"got the string {mutates_args!r} -- did you mean ({mutates_args!r},)?")

    def register(fn):
        if not callable(fn):
            raise TypeError(f"newt.library.custom_op: {type(fn).__name__} is not callable")
        import torch

        src = _signature_source(fn)
        if schema is None:
            op_schema = torch.library.infer_schema(src, mutates_args=mutates_args)
        else:
            op_schema = schema

        def impl(*args, **kwargs):
            return fn(*args, **kwargs)

        # the impl carries fn's signature (custom_op binds arguments by it), not the Kernel object's
        impl.__signature__ = inspect.signature(src)
        impl.__name__ = getattr(src, "__name__", "newt_op")
        impl.__qualname__ = getattr(src, "__qualname__", impl.__name__)
        impl.__module__ = getattr(src, "__module__", __name__)
        op = torch.library.custom_op(name, impl, mutates_args=mutates_args, device_types=device_types,
                                     schema=op_schema)
        op.register_fake(_fake_for(fn, fake))
        return op

    return register if fn is None else register(fn)
