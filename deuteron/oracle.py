"""The eager oracle: what every candidate config must reproduce before it is timed.

``kernel.ref`` runs on clones of the arguments; its return value and the
arguments it changed are the expected outputs.  A candidate runs on fresh
clones whose freshly allocated outputs (``torch.empty*`` in the host code) and
write-only tensor arguments are filled with NaN first, so an element the
kernel forgets to write fails the comparison.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["nan_allocations", "clone_args", "fill_poison", "Expected", "compare", "tolerance"]

#: dtype -> (atol, rtol) for the comparison with the oracle
TOLERANCES = {
    torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
}
#: fp32 results of matmuls on tf32 tensor cores are compared like this
TF32_TOLERANCE = (1e-2, 1e-2)


def tolerance(dtype, tf32: bool = False):
    if dtype == torch.float32 and tf32:
        return TF32_TOLERANCE
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point:
        return (1e-1, 1e-1)  # fp8
    return (0, 0)


def fill_poison(t: torch.Tensor):
    """NaN for floats, an unlikely value for ints, True for bools."""
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    elif not t.dtype.is_complex:
        t.fill_(torch.iinfo(t.dtype).min)
    return t


_EMPTY = {torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty,
          torch.Tensor.new_empty_strided}


class _NaNMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in _EMPTY and isinstance(out, torch.Tensor):
            fill_poison(out)
        return out


@contextlib.contextmanager
def nan_allocations():
    """Inside: every ``torch.empty*`` allocation is filled with NaN (or a poison value)."""
    with _NaNMode():
        yield


def clone_args(args, kwargs, poison_names=()):
    """Deep clones of tensors (strides kept); parameters named in ``poison_names`` are poisoned."""
    def c(v, name=None):
        if isinstance(v, torch.Tensor):
            out = torch.empty_strided(v.size(), v.stride(), dtype=v.dtype, device=v.device)
            if name in poison_names:
                fill_poison(out)
            else:
                out.copy_(v)
            return out
        if isinstance(v, list):
            return [c(x) for x in v]
        if isinstance(v, tuple):
            return tuple(c(x) for x in v)
        return v
    return args, kwargs, c


def flatten(v, prefix="out") -> list:
    """(name, tensor) pairs of a nested return value."""
    if isinstance(v, torch.Tensor):
        return [(prefix, v)]
    if isinstance(v, (list, tuple)):
        out = []
        for i, x in enumerate(v):
            out.extend(flatten(x, f"{prefix}[{i}]"))
        return out
    if isinstance(v, dict):
        out = []
        for k, x in v.items():
            out.extend(flatten(x, f"{prefix}[{k!r}]"))
        return out
    return []


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


class Expected:
    """The oracle's outputs for one set of arguments."""

    def __init__(self, kernel, bound, tf32: bool = False, reference=None, poison=()):
        """``reference``: what computes the expected outputs instead of ``kernel.autotune_reference`` (the default
        config's run, for a kernel with no eager oracle), its write-only arguments named in ``poison`` NaN-filled
        like every candidate's."""
        self.kernel = kernel
        self.tf32 = tf32
        self.bound = bound
        self.what = "the eager reference" if reference is None else "the default config's output"
        args, kwargs = list(bound.args), dict(bound.kwargs)
        self.names = list(bound.signature.parameters)[:len(args)]
        if reference is None:
            poison = ()
        ref_args = [_clone_poison(a, n in poison) for a, n in zip(args, self.names + [None] * len(args))]
        ref_kwargs = {k: _clone_poison(v, k in poison) for k, v in kwargs.items()}
        fn = reference if reference is not None else getattr(kernel, "autotune_reference", kernel.ref)
        result = fn(*ref_args, **ref_kwargs)
        self.returned = flatten(result)
        self.returned_structure = _structure(result)
        # arguments the function wrote into are outputs too
        self.mutated = []
        for i, (orig, after) in enumerate(zip(args, ref_args)):
            for name, (o, a) in _pairs(orig, after, self.names[i] if i < len(self.names) else f"arg{i}"):
                if not _same(o, a):
                    self.mutated.append((i, name, a))
        for k, v in kwargs.items():
            for name, (o, a) in _pairs(v, ref_kwargs[k], k):
                if not _same(o, a):
                    self.mutated.append((k, name, a))
        if not self.returned and not self.mutated:
            raise RuntimeError(f"{kernel.__name__}: the eager reference neither returns a tensor nor writes into an "
                               "argument; nothing to check configs against")

    @staticmethod
    def _clone(v):
        if isinstance(v, torch.Tensor):
            out = torch.empty_strided(v.size(), v.stride(), dtype=v.dtype, device=v.device)
            out.copy_(v)
            return out
        if isinstance(v, list):
            return [Expected._clone(x) for x in v]
        if isinstance(v, tuple):
            return tuple(Expected._clone(x) for x in v)
        return v

    def fresh_args(self, poison: set):
        """Clones of the arguments for one candidate run (write-only outputs poisoned)."""
        args = []
        for i, a in enumerate(self.bound.args):
            name = self.names[i] if i < len(self.names) else None
            args.append(_clone_poison(a, name in poison))
        kwargs = {k: _clone_poison(v, k in poison) for k, v in self.bound.kwargs.items()}
        return args, kwargs

    def check(self, result, args, kwargs) -> tuple[bool, str, float]:
        """(ok, message, max relative error) of a candidate's outputs."""
        if getattr(self.kernel, "autotune_accuracy_check", True) is False:
            return True, "ok (autotune_accuracy_check=False)", 0.0
        tol = getattr(self.kernel, "autotune_tolerance", None)
        got = flatten(result)
        if _structure(result) != self.returned_structure:
            return False, "returns a different structure than the reference", math.inf
        worst = 0.0
        for (name, exp), (_, act) in zip(self.returned, got):
            ok, msg, err = compare(act, exp, self.tf32, tol)
            worst = max(worst, err)
            if not ok:
                return False, f"{name}: {msg}", err
        for where, name, exp in self.mutated:
            src = args[where] if isinstance(where, int) else kwargs[where]
            act = _pick(src, name)
            ok, msg, err = compare(act, exp, self.tf32, tol)
            worst = max(worst, err)
            if not ok:
                return False, f"{name}: {msg}", err
        return True, "ok", worst


def _clone_poison(v, poison):
    if isinstance(v, torch.Tensor):
        out = torch.empty_strided(v.size(), v.stride(), dtype=v.dtype, device=v.device)
        if poison:
            fill_poison(out)
        else:
            out.copy_(v)
        return out
    if isinstance(v, list):
        return [_clone_poison(x, poison) for x in v]
    if isinstance(v, tuple):
        return tuple(_clone_poison(x, poison) for x in v)
    return v


def _pairs(orig, after, name):
    if isinstance(orig, torch.Tensor):
        return [(name, (orig, after))]
    if isinstance(orig, (list, tuple)):
        out = []
        for i, (o, a) in enumerate(zip(orig, after)):
            out.extend(_pairs(o, a, f"{name}[{i}]"))
        return out
    return []


def _pick(v, name):
    if isinstance(v, torch.Tensor):
        return v
    idx = name[name.index("["):] if "[" in name else ""
    while idx.startswith("["):
        j = idx.index("]")
        v = v[int(idx[1:j])]
        idx = idx[j + 1:]
    return v


def _structure(v):
    if isinstance(v, torch.Tensor):
        return ("T", tuple(v.shape), str(v.dtype))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_structure(x) for x in v))
    if isinstance(v, dict):
        return ("d", tuple((k, _structure(x)) for k, x in v.items()))
    return ("v", type(v).__name__)


def compare(actual: torch.Tensor, expected: torch.Tensor, tf32: bool = False,
            tol: tuple[float, float] | None = None) -> tuple[bool, str, float]:
    if not isinstance(actual, torch.Tensor):
        return False, f"expected a tensor, got {type(actual).__name__}", math.inf
    if actual.shape != expected.shape:
        return False, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}", math.inf
    if actual.dtype != expected.dtype:
        return False, f"dtype {actual.dtype} != {expected.dtype}", math.inf
    if actual.numel() == 0:
        return True, "ok", 0.0
    atol, rtol = tol if tol is not None else tolerance(expected.dtype, tf32)
    if not expected.dtype.is_floating_point:
        bad = actual != expected
        n = int(bad.sum())
        if n:
            return False, f"{n} of {actual.numel()} elements differ", math.inf
        return True, "ok", 0.0
    a = actual.float()
    e = expected.float()
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    if bool((nan_a != nan_e).any()):
        n = int((nan_a & ~nan_e).sum())
        return False, f"{n} element(s) are NaN where the reference is not (unwritten or wrong)", math.inf
    fin = ~nan_e
    diff = (a - e).abs()
    diff = torch.where(fin, diff, torch.zeros_like(diff))
    inf_mismatch = (torch.isinf(a) | torch.isinf(e)) & (a != e) & fin
    if bool(inf_mismatch.any()):
        return False, "infinities differ", math.inf
    diff = torch.where(torch.isinf(e), torch.zeros_like(diff), diff)
    allowed = atol + rtol * e.abs()
    over = diff > allowed
    rel = float((diff / (e.abs() + atol)).max()) if diff.numel() else 0.0
    if bool(over.any()):
        n = int(over.sum())
        return False, (f"{n} of {a.numel()} elements differ beyond atol={atol:g}, rtol={rtol:g} "
                       f"(max abs error {float(diff.max()):.3g})"), rel
    return True, "ok", rel
