"""The descriptor form (``indexing="tensor_descriptor"``): which tile loads and stores become tensor descriptors.

In the descriptor form the generated kernel makes one ``nl.make_tensor_descriptor`` per tensor and access shape at
its top, before the loops, and a tile load or store that can take one becomes ``x_desc.load([begin_m, begin_k])`` /
``out_desc.store([begin_m, begin_n], v)``: the tiles' starts as offsets.  newt tags these as descriptor tiles and,
under its default ``NEWT_TMA=desc`` on sm_90a, copies them with TMA (``newt/backend/cuda/tma.py``); its warp
specialization then has a producer to give them to (``newt/backend/cuda/warpspec.py``).

The choice is made per access (:func:`plan_access`).  A descriptor is used only where its block equals the pointer
form's value exactly, loads reading 0 and stores writing nothing outside the bounds the pointer form masks:

* every index is a plain tile (``x[tile_m, tile_k]``: the tile's start is the offset, the tile's end the
  descriptor's bound along that dimension) or a whole dimension (``x[tile, :]``: offset 0, or the chunk's start in
  a looped reduction; the dimension's size is the bound); each bound is a literal or a tensor's size (what the
  kernel's key pins down; not an int argument or a value computed in the kernel) -- not a gather (a computed
  index), ``tile.index + k``, a scalar index, a new axis (``None``), a slice ``a:b``, a jagged tile, a tile of
  block size 1 (a scalar in the generated code) or a ``dt.load`` tile that may run past the tensor's end;
* the tensor has rank 2 to 5 (newt keeps rank-1 boxes on the pointer path; TMA stops at 5) and an element type
  TMA moves; its last dimension is contiguous (stride 1) and every other stride a positive multiple of 16 bytes;
  each block dimension is at most 256 elements, the last at least 16 bytes, and none larger than its bound
  (Helion's rule: a box larger than the tensor made invalid tensor maps); offsets fit in 32 bits;
* a store's last bound is a multiple of 16 bytes (TMA stores write whole 16-byte chunks of a row: a bound of
  another size would be overrun, into the next elements of a wider buffer);
* no ``extra_mask=`` or ``eviction_policy=``; a store's value has the access's own shape (no broadcast);
  atomics always use pointers (``atomic_indexing``).

With ``static_shapes=False`` the rules read the binding's strides and sizes, so the kernel's key
(``Kernel._key``) holds what they depend on: which strides are 1, which are positive multiples of 16 bytes, the
next power of two of each size (a box is taken only if it is at most half of that, so at most any size of the
key) and the power-of-two divisor (up to 16) of each tensor's last size (a store's last bound must be one).

The base pointer's 16-byte alignment is newt's to check: newt specializes every pointer argument on it and keeps
a misaligned base on the pointer path (the descriptor's masked loads and stores are exact either way).

Every other access keeps the pointer form's code, with every tile's bounds mask (newt's ``NEWT_TMA=1`` may still
send those through TMA).  The generated kernel lists, in a comment above the descriptors, which accesses use one
and why the others do not.
"""

from __future__ import annotations

import re
import textwrap

from ._torch import torch
from .codegen_expr import _atom, _dt
from .program import Node, same_dim

__all__ = ["DescriptorForm", "plan_access", "access_ordinals", "TMA_DTYPES", "MAX_BOX", "desc_comment",
           "drop_unused_masks", "place_descriptors"]

#: torch dtypes whose tiles TMA moves (newt/backend/cuda/tma.py ``_TYPES``)
TMA_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
              "uint32", "uint64", "float8_e4m3fn", "float8_e5m2")
#: the largest box dimension TMA copies (elements)
MAX_BOX = 256


class DescriptorForm:
    """What the generator decided in the descriptor form (``_Gen.desc``)."""

    def __init__(self):
        self.ordinal: dict | None = None  # load/store node id -> its entry of a list ``indexing``
        self.plans: dict = {}  # load/store node id -> (descriptor name, offsets), or False: pointers
        self.names: dict = {}  # (tensor, shape, block) -> the descriptor's name
        self.lines: list[str] = []  # the descriptors' definitions (at the top of the kernel)
        self.notes: dict = {}  # load/store node id -> (the access, None or why it keeps pointers)


def _tma_dtype(dtype) -> bool:
    return any(getattr(torch, n, None) == dtype for n in TMA_DTYPES)


def access_ordinals(prog) -> dict:
    """node id -> the ordinal of each plain load and store of ``prog`` in source order (statement order of the
    traced program): the index of its entry when ``config.indexing`` is a list."""
    from .program import IfStmt, LoopStmt
    out: dict = {}

    def walk(block):
        for s in block.stmts:
            if isinstance(s, Node):
                if s.op in ("load", "store"):
                    out[s.id] = len(out)
            elif isinstance(s, LoopStmt):
                walk(s.body)
            elif isinstance(s, IfStmt):
                walk(s.then_block)
                walk(s.else_block)

    walk(prog.body)
    return out


def access_mode(g, n: Node) -> str:
    """The ``indexing`` entry of access ``n``: the config's value, or its entry for ``n`` when it is a list
    (entries past the list's end: ``"pointer"``)."""
    v = g.cfg.indexing
    if v is None or isinstance(v, str):
        return v or "pointer"
    if g.desc.ordinal is None:
        g.desc.ordinal = access_ordinals(g.prog)
    i = g.desc.ordinal.get(n.id)
    return v[i] if i is not None and i < len(v) else "pointer"


def access_text(n: Node, items) -> str:
    """``x[tile_m, tile_k]`` (line 20): the access as the user wrote it, roughly."""
    parts = []
    for it in items:
        k = it[0]
        if k == "none":
            parts.append("None")
        elif k == "tile":
            parts.append(it[1].name)
        elif k == "red":
            parts.append(":" if len(it) == 3 else "a:b")
        elif k == "vec":
            parts.append(it[1].name or "<index>")
        else:
            parts.append(str(it[1]) if isinstance(it[1], int) else (it[1].name or "<index>"))
    line = getattr(n.src, "lineno", None)
    return f"{n.attrs['tensor'].name}[{', '.join(parts)}]" + (f" (line {line})" if line else "")


def plan_access(g, n: Node, store: bool):
    """``(descriptor name, offsets)`` for load/store ``n`` in the descriptor form, or None (the pointer form).
    Records the decision and its reason for the kernel's comment (``g.desc.notes``)."""
    if not g.descriptor_form or access_mode(g, n) != "tensor_descriptor":
        return None
    hit = g.desc.plans.get(n.id)
    if hit is not None:
        return hit or None
    plan = _plan(g, n, store)
    if isinstance(plan, str):
        g.desc.notes.setdefault(n.id, (access_text(n, n.attrs["items"]), plan))
        g.desc.plans[n.id] = False
        return None
    g.desc.notes.setdefault(n.id, (access_text(n, n.attrs["items"]), None))
    g.desc.plans[n.id] = plan
    return plan


def _plan(g, n: Node, store: bool):
    ta = n.attrs["tensor"]
    items = n.attrs["items"]
    dims = n.attrs["dims"] if store else n.dims
    if store and len(n.args) > 1 or not store and n.args:
        return "an extra_mask"
    if not store and n.attrs.get("eviction"):
        return "an eviction policy"
    rank = len(ta.shape)
    if rank < 2:
        return "rank 1 (newt keeps rank-1 boxes on the pointer path)"
    if rank > 5:
        return f"rank {rank} (TMA boxes have at most 5 dimensions)"
    if not _tma_dtype(ta.dtype):
        return f"{str(ta.dtype).replace('torch.', '')} elements (TMA does not move them)"
    if ta.int64:
        return "64-bit offsets (a tensor of 2^31 elements or more)"
    eb = ta.dtype.itemsize
    shape, offsets, block = [], [], []
    for it in items:
        k = it[0]
        if k == "none":
            return "a new axis (None)"
        if k == "vec":
            return "a gathered index"
        if k == "scalar":
            return "a scalar index"
        d = it[2]
        if k == "tile":
            t = it[1]
            if len(it) > 3:
                return f"tile {t.name} may run past the end of {ta.name}"
            if t.kind != "tile":
                return f"{t.name} is a grid index"
            if t.jagged_mask is not None:
                return f"the jagged tile {t.name}"
            if g.is_unit(t):
                return f"tile {t.name} has block size 1"
            bound = _host_bound(g, t.end)
            if bound is None:
                return f"the end of tile {t.name} is not a literal or a tensor's size"
            shape.append(bound)
            offsets.append(g.tile_names[t.id]["begin"])
            block.append((g.block_expr(t), g.block_vals[t.id]))
        else:  # "red"
            r = it[1]
            if len(it) > 3:
                return "a slice a:b"
            if r.broadcast_as_one:
                return "a broadcast dimension of size 1"
            bound = _host_bound(g, r.size_expr)
            if bound is None:
                return "a dimension whose size is not a literal or a tensor's size"
            shape.append(bound)
            offsets.append(g.rd_names[r.id]["off"] if r.id in g.looped else "0")
            block.append((g.block_expr(r), g.rblock[r.id]))
    strides = ta.strides  # (static_shapes=False: the key holds which are 1 and which are 16-byte multiples)
    static = g.prog.static_shapes
    if strides[-1] != 1:
        return "the last dimension is not contiguous" + (f" (stride {strides[-1]})" if static else "")
    for d, st in enumerate(strides[:-1]):
        if st <= 0 or (st * eb) % 16:
            return (f"the stride of dimension {d}" + (f" ({st} elements)" if static else "") +
                    " is not a positive multiple of 16 bytes")
    for d, (_, b) in enumerate(block):
        if b > MAX_BOX:
            return f"a block of {b} elements along dimension {d} (TMA boxes stop at {MAX_BOX})"
    if block[-1][1] * eb < 16:
        return f"the block's last dimension is {block[-1][1] * eb} bytes (TMA needs at least 16)"
    for d, ((_, b), (text, value)) in enumerate(zip(block, shape)):
        # a box no larger than the tensor (Helion's rule: a larger one made invalid tensor maps); with
        # static_shapes=False the key holds the next power of two of each size, so sizes down to half of it
        fits = b <= value if static else 2 * b <= _np2(value)
        if not fits:
            return (f"a block of {b} elements along dimension {d}, more than the bound {text}" +
                    ("" if static else " may be"))
    if store:
        inner_text, inner = shape[-1]
        # TMA stores write whole 16-byte chunks of a row: an inner bound of another size would be overrun
        if not static:  # the key holds the power-of-two divisor (up to 16) of each tensor's last size only
            spec = g.prog.size_params.get(inner_text)
            if spec is None or spec[2] != len(g.prog.tensors[spec[0]].shape) - 1:
                return f"a store whose last bound ({inner_text}) is not a tensor's last size"
        if (inner * eb) % 16 if static else min(16, inner & -inner) * eb < 16:
            return (f"a store whose last bound ({inner_text}) is not a multiple of 16 bytes (TMA stores write "
                    "whole 16-byte chunks)")
    if store:
        v = n.args[0]
        if not (isinstance(v, Node) and len(g.rd(v.dims)) == len(g.rd(dims)) and len(v.dims) == len(dims) and
                all(same_dim(a, b) for a, b in zip(v.dims, dims))):
            return "a broadcast value"
    if static:
        st_text = [str(s) for s in strides[:-1]]
    else:
        st_text = [f"{ta.name}_stride_{d}" for d in range(rank - 1)]
    key = (ta.name, tuple(t for t, _ in shape), tuple(b for b, _ in block))
    name = g.desc.names.get(key)
    if name is None:
        name = g.names.fresh(f"{ta.name}_desc")
        g.desc.names[key] = name
        g.desc.lines.append(f"{name} = nl.make_tensor_descriptor({ta.name}, shape=[{', '.join(t for t, _ in shape)}], "
                            f"strides=[{', '.join(st_text + ['1'])}], "
                            f"block_shape=[{', '.join(b for b, _ in block)}])")
    return name, offsets


def _host_bound(g, v):
    """``(text, value)`` of a bound the descriptor can take before the loops and the kernel's key pins down: a
    literal, or a tensor's size (a parameter with ``static_shapes=False``: its value at this binding); None
    otherwise (a value computed in the kernel, an int argument: the key does not hold ints' values)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v), v
    if isinstance(v, Node) and v.op == "param" and isinstance(v.host_value, int):
        spec = g.prog.size_params.get(v.attrs["name"])
        if spec is not None and spec[1] == "size":
            return g.expr(v), v.host_value
    return None


def _np2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def render_desc_load(g, plan) -> str:
    name, offsets = plan
    return f"{name}.load([{', '.join(offsets)}])"


def emit_desc_store(g, n: Node, plan, indent: int):
    name, offsets = plan
    ta = n.attrs["tensor"]
    dims = n.attrs["dims"]
    v = n.args[0]
    val = g.aligned(v, len(g.rd(dims)), dims)
    if v.dtype != ta.dtype:
        val = f"{_atom(val)}.to({_dt(ta.dtype)})"
    g.w(indent, f"{name}.store([{', '.join(offsets)}], {val})")


def desc_comment(g) -> list:
    """The comment above the descriptors: which accesses use one, which keep pointers and why."""
    used = [t for t, why in g.desc.notes.values() if why is None]
    kept = [(t, why) for t, why in g.desc.notes.values() if why is not None]
    out = []
    if used:
        out += textwrap.wrap("# tensor descriptors (indexing='tensor_descriptor'; TMA copies on sm_90a): " +
                             ", ".join(used), width=112, subsequent_indent="#   ", break_long_words=False,
                             break_on_hyphens=False)
    if kept:
        out.append("# pointers with every tile's bounds mask where a descriptor would not be exact:")
        out += [f"#   {t}: {why}" for t, why in kept]
    return out


def place_descriptors(g, kname: str):
    """The descriptors' comment and definitions at the top of kernel ``kname``'s body (before the loops); then
    the masks no access reads any more go."""
    at = next(i for i, ln in enumerate(g.lines) if ln.startswith(f"def {kname}(")) + 1
    g.lines[at:at] = ["    " + x for x in desc_comment(g) + g.desc.lines]
    drop_unused_masks(g)


def drop_unused_masks(g):
    """The descriptor form: the bounds masks (then the offsets) of tiles and whole dimensions that no pointer
    access reads any more (every access along them took a descriptor)."""
    names = [(d["mask"], d["offs"]) for d in g.tile_names.values() if "mask" in d]
    names += [(d["mask"], d["offs"]) for d in g.rd_names.values()]
    for group in (0, 1):
        for pair in names:
            nm = pair[group]
            defs = [i for i, ln in enumerate(g.lines) if ln.strip().startswith(f"{nm} = ")]
            if not defs:
                continue
            pat = re.compile(rf"\b{re.escape(nm)}\b")
            if sum(len(pat.findall(ln)) for ln in g.lines) == len(defs):
                for i in reversed(defs):
                    del g.lines[i]
