"""Atomics: ``dt.atomic_add`` / ``and`` / ``or`` / ``xor`` / ``max`` / ``min`` / ``xchg`` / ``cas`` and the
``dt.wait`` / ``dt.signal`` spin loops on signal pads.

Node kinds ``atomic`` (a statement) and ``atomic_old`` (the values before the update).
"""

from __future__ import annotations

from .. import language as L
from .._torch import torch
from ..codegen_expr import _dt
from ..errors import MemoryTarget, OperandDtype, UnknownOption
from ..optable import EFFECT, MEMORY, PRODUCED_BY_EFFECT, node, op
from ..program import Node
from ..trace_common import (
    HostTensor,
)
from .memory import _check_store_dims, _items_dims, _strides, check_not_aliased, emit_store, items_for

# ---------------------------------------------------------------------------- node kinds


def emit_atomic(g, n, indent: int):
    if n.attrs.get("kind") in ("wait", "signal"):
        ptr, mask = g.pointer(n.attrs["tensor"], n.attrs["items"], n.attrs["dims"], keep_shape=True)
        emit_sync(g, n, ptr, mask, indent)
        return
    emit_store(g, n, indent, atomic=True)


def emit_sync(g, n: Node, ptr: str, mask, indent: int):
    """``dt.wait`` / ``dt.signal``: spin loops of newt's (masked) ``atomic_cas``, or one ``atomic_xchg``."""
    a = n.attrs
    ta = a["tensor"]
    order = f"sem={a['sem']!r}" + (f", scope={a['scope']!r}" if a["scope"] != "gpu" else "")
    old = a.get("old")
    keep = old is not None and g.use_count.get(old.id, 0) > 0
    nm = g.names.fresh(f"old_{ta.name}") if keep else None
    if a["kind"] == "signal" and a["sync"]:
        g.w(indent, "nl.debug_barrier()  # the block's earlier stores come before the signal")
    if a["kind"] == "signal" and a["expect"] is None:
        call = f"nl.atomic_xchg({ptr}, {a['new']}" + (f", mask={mask}" if mask else "") + f", {order})"
        g.w(indent, f"{nm} = {call}" if keep else call)
    else:
        expect, new = a["expect"], a["new"]
        rank = len(g.rd(a["dims"]))
        if rank == 0:
            m = f"({mask}) & " if mask else ""
            cas = f"nl.atomic_cas({ptr}, {expect}, {new}, {order}" + (f", mask={mask}" if mask else "") + ")"
            g.w(indent, f"while {m}({cas} != {expect}):")
            g.w(indent + 1, "pass")
        else:
            p = g.names.fresh("pending")
            o = g.names.fresh("seen")
            shape = g.shape_tuple(a["dims"])
            g.w(indent, f"{p} = " + (f"nl.broadcast_to({mask}, {shape})" if mask else
                                        f"nl.full({shape}, True, nl.int1)"))
            g.w(indent, f"while nl.max({p}.to(nl.int32)) > 0:")
            g.w(indent + 1, f"{o} = nl.atomic_cas({ptr}, {expect}, {new}, {order}, mask={p})")
            g.w(indent + 1, f"{p} = {p} & ({o} != {expect})")
        if keep:  # a signal that waited: every flag held wait_for
            g.w(indent, f"{nm} = nl.full({g.shape_tuple(a['dims'])}, {expect}, {_dt(ta.dtype)})")
    if a["kind"] == "wait" and a["sync"]:
        g.w(indent, "nl.debug_barrier()  # the block's later loads come after the wait")
    if keep:
        g.var[old.id] = nm


def render_atomic_old(g, n) -> str:
    raise AssertionError(f"{n}: named by its atomic")


node("atomic", MEMORY, EFFECT, emit=emit_atomic, family="atomics",
     doc="an atomic update, dt.wait or dt.signal (attrs: tensor, items, dims, kind, sem, scope, old)")
node("atomic_old", PRODUCED_BY_EFFECT, render=render_atomic_old, family="atomics",
     doc="the values an atomic found (named by its atomic where the kernel uses them)")


# ---------------------------------------------------------------------------- ops


_SEMS = ("relaxed", "acquire", "release", "acq_rel")


_SCOPES = ("gpu", "cta", "sys")


@op("dt.atomic_add", family="atomics", stub=L.atomic_add, nodes=("atomic", "atomic_old"), share_op=True, tile_args=True)
@op("dt.atomic_and", family="atomics", stub=L.atomic_and, nodes=("atomic", "atomic_old"), share_op=True, tile_args=True)
@op("dt.atomic_or", family="atomics", stub=L.atomic_or, nodes=("atomic", "atomic_old"), share_op=True, tile_args=True)
@op("dt.atomic_xor", family="atomics", stub=L.atomic_xor, nodes=("atomic", "atomic_old"), share_op=True, tile_args=True)
@op("dt.atomic_max", family="atomics", stub=L.atomic_max, nodes=("atomic", "atomic_old"), share_op=True, tile_args=True)
@op("dt.atomic_min", family="atomics", stub=L.atomic_min, nodes=("atomic", "atomic_old"), share_op=True, tile_args=True)
@op("dt.atomic_xchg", family="atomics", stub=L.atomic_xchg, nodes=("atomic", "atomic_old"), share_op=True,
    tile_args=True)
def _dt_atomic(tr, e, op, target, index, value, sem="relaxed", scope="gpu"):
    kind = op.split("_", 1)[1]

    def check(dt):
        if kind in ("and", "or", "xor") and (dt.is_floating_point or dt == torch.bool):
            raise OperandDtype(e, op=f"dt.{op}", dtype=str(dt), why=" (bitwise atomics need an integer tensor)")
    return _atomic(tr, e, op, kind, target, index, [value], sem, scope, check)


@op("dt.atomic_cas", family="atomics", stub=L.atomic_cas, nodes=("atomic", "atomic_old"), tile_args=True)
def _dt_atomic_cas(tr, e, target, index, expected, value, sem="relaxed", scope="gpu"):
    def check(dt):
        if dt.itemsize not in (2, 4, 8):
            raise OperandDtype(e, op="dt.atomic_cas", dtype=str(dt),
                               why=" (compare-and-swap works on 16-, 32- or 64-bit elements)")
    # args: the new value first (as every atomic), then the expected one (deuteron.codegen_expr.emit_store)
    return _atomic(tr, e, "atomic_cas", "cas", target, index, [value, expected], sem, scope, check)


def _atomic(tr, e, op, kind, target, index, values, sem, scope, check):
    """The atomic node of ``dt.<op>`` on ``target[index]`` and the values before the update (exact where
    positions do not repeat; assigned only where the kernel uses them); ``check(dtype)``: the op's own rule on the
    target's dtype."""
    if not isinstance(target, HostTensor):
        raise MemoryTarget(e, op=op, what=" as its target")
    idx = list(index) if isinstance(index, (list, tuple)) else [index]
    items = items_for(tr, target, idx, e)
    dims = _items_dims(tr, items)
    for v in values:
        if isinstance(v, Node):
            _check_store_dims(tr, v.dims, dims, target, e)
    if sem not in _SEMS:
        raise UnknownOption(e, op=f"dt.{op}", option="sem", value=sem, choices=", ".join(_SEMS))
    if scope not in _SCOPES:
        raise UnknownOption(e, op=f"dt.{op}", option="scope", value=scope, choices=", ".join(_SCOPES))
    check(target.t.dtype)
    check_not_aliased(target, e)
    target.arg.atomic = True
    _strides(tr, target, items)
    tr.prog.has_atomic = True
    at = tr.emit(Node("atomic", list(values), dims=(), attrs={"tensor": target.arg, "items": items, "dims": dims,
                                                              "sem": sem, "scope": scope, "kind": kind}))
    old = tr.emit(Node("atomic_old", [at], dims=tuple(dims), dtype=target.t.dtype))
    at.attrs["old"] = old
    return old


def _sync_target(tr, e, op, signal_pad, index, scope, ints):
    if not isinstance(signal_pad, HostTensor):
        raise MemoryTarget(e, op=op, what=" as its signal pad")
    if signal_pad.t.dtype not in (torch.int32, torch.uint32):
        raise OperandDtype(e, op=f"dt.{op}", dtype=str(signal_pad.t.dtype), why=" (signal pads are int32 or uint32)")
    if scope not in ("gpu", "sys"):
        raise UnknownOption(e, op=f"dt.{op}", option="scope", value=scope, choices="gpu, sys")
    vals = {k: None if v is None else tr.static_int(v, e, f"the {k} of dt.{op}") for k, v in ints.items()}
    idx = [] if index is None else (list(index) if isinstance(index, (list, tuple)) else [index])
    items = items_for(tr, signal_pad, idx, e)
    dims = _items_dims(tr, items)
    signal_pad.arg.atomic = True
    _strides(tr, signal_pad, items)
    tr.prog.has_atomic = True
    return items, dims, vals


@op("dt.wait", family="atomics", stub=L.wait, nodes=("atomic",))
def _dt_wait(tr, e, signal_pad, index=None, signal=1, update=None, scope="gpu", hasSubsequentMemAccess=True):
    items, dims, v = _sync_target(tr, e, "wait", signal_pad, index, scope, {"signal": signal, "update": update})
    sync = bool(tr.static_int(hasSubsequentMemAccess, e, "hasSubsequentMemAccess"))
    tr.emit(Node("atomic", [], dims=(), attrs={"tensor": signal_pad.arg, "items": items, "dims": dims,
                                               "kind": "wait", "sem": "acquire" if sync else "relaxed",
                                               "scope": scope, "expect": v["signal"],
                                               "new": v["signal"] if v["update"] is None else v["update"],
                                               "sync": sync}))
    return None


@op("dt.signal", family="atomics", stub=L.signal, nodes=("atomic", "atomic_old"))
def _dt_signal(tr, e, signal_pad, index=None, signal=1, wait_for=None, scope="gpu", hasPreviousMemAccess=True):
    items, dims, v = _sync_target(tr, e, "signal", signal_pad, index, scope, {"signal": signal, "wait_for": wait_for})
    sync = bool(tr.static_int(hasPreviousMemAccess, e, "hasPreviousMemAccess"))
    at = tr.emit(Node("atomic", [], dims=(), attrs={"tensor": signal_pad.arg, "items": items, "dims": dims,
                                                    "kind": "signal", "sem": "release" if sync else "relaxed",
                                                    "scope": scope, "expect": v["wait_for"], "new": v["signal"],
                                                    "sync": sync}))
    old = tr.emit(Node("atomic_old", [at], dims=tuple(dims), dtype=signal_pad.t.dtype))
    at.attrs["old"] = old
    return old
