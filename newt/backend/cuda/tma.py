"""TMA on sm_90a: tile loads and stores through ``cp.async.bulk.tensor`` and mbarriers.

**Which accesses.**  A block ``load``/``store`` whose pointer is ``base + sum_d (arange_d + o_d) * s_d``
and whose mask is the conjunction of ``0 <= arange_d + o_d`` (optional) and ``arange_d + o_d < n_d``
for every dimension ``d`` -- exactly what a tensor descriptor's ``load``/``store`` becomes in the IR
(``newt/frontend/rules/memory.py: desc_address``) -- is a TMA box at coordinates ``o_d`` of the tensor
``(base, n, s)``: TMA's bounds check is that mask (out-of-bounds elements of a load are filled with
zeros, or NaN for ``padding_option="nan"``; a store skips them).  :func:`match_access` reads this off
the IR with a small polynomial evaluator (:class:`Poly`) and checks the identity symbolically.  The
tensor ``(base, n, s)`` must come from the kernel's parameters (or constants): the launch encodes its
``CUtensorMap`` on the host (``newt/runtime/tensormap.py``) and passes it as a ``const
__grid_constant__`` parameter after the ordinary ones (``metadata["tensormaps"]``).  The last stride
must be 1, the base provably 16-byte aligned and every other stride a proven multiple of 16 bytes (the
specialization's divisibility); other accesses keep the pointer path.  ``NEWT_TMA=1`` turns it on,
``NEWT_TMA=desc`` for tensor descriptors' tiles only, ``NEWT_TMA=0`` off (unset: ``_DEFAULT_MODE``).

**Shared tiles.**  A box lands as ``rows = prod(block[:-1])`` rows of ``inner = block[-1]`` elements in
the wgmma canonical layout (``dot/wgmma.py: GmmaShared``): rows of ``W = min(128, inner bytes)`` bytes
with TMA's W-byte swizzle (no swizzle for 16-byte rows), wider rows as W-byte atoms one after another,
each atom one TMA copy -- the same bytes the cp.async pipeline writes, so a TMA-loaded tile feeds wgmma
descriptors unchanged.

**Loads in software-pipelined loops** (``pipeline.py``): the ring keeps its buffers; each buffer gets an
mbarrier.  Thread 0 issues the copies of iteration ``it + S - 1`` after the loop-top barrier, preceded by
``mbarrier.arrive.expect_tx`` with the bytes of all of that iteration's boxes; every thread waits with
``mbarrier.try_wait.parity`` on the buffer it reads.  Phases are bits of one kernel-wide ``unsigned``
(each fill is waited for exactly once, so the bit of a buffer is its parity, also across re-entries of
the loop).  **Stores**: every thread writes its registers into the swizzled tile, ``fence.proxy.async``,
a barrier, thread 0 issues the bulk copies, ``commit_group`` and ``wait_group.read 0`` (the tile may be
reused afterwards).  Other loads keep the pointer path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from newt.ir.core import Region
from newt.ir.types import is_block, scalar_of, shape_of

from .layout import log2

__all__ = ["tma_enabled", "tma_mode", "match_access", "TmaAccess", "Poly", "tile_plan", "TilePlan", "kernel_params",
           "emit_tma_load", "emit_tma_store", "standalone_loads"]

#: newt element types TMA moves (fp8/int8 as bytes)
_TYPES = {"fp16", "bf16", "fp32", "fp64", "int32", "uint32", "int64", "uint64", "int16", "uint16", "int8",
          "uint8", "fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16"}
_NAN_OK = {"fp16", "bf16", "fp32", "fp64"}


#: what sm_90a sends through TMA when NEWT_TMA is unset: ``"off"``, ``"desc"`` (the tiles of tensor descriptors
#: only: ``tl.make_tensor_descriptor`` / host ``TensorDescriptor`` loads and stores, which the frontend tags
#: ``descriptor``) or ``"all"`` (also pointer-form accesses of the descriptor shape).  The pointer form stays off:
#: benchmarks/results_tma_2026-12-06.md (it lost in 6 of 16 matmul cells).
_DEFAULT_MODE = "desc"

_MODES = {"0": "off", "false": "off", "off": "off", "no": "off", "1": "all", "true": "all", "on": "all",
          "yes": "all", "all": "all", "desc": "desc", "descriptor": "desc", "descriptors": "desc"}


def tma_mode(target) -> str:
    """``"off"``, ``"desc"`` or ``"all"`` on this target: ``NEWT_TMA`` (``0``, ``desc`` or ``1``), unset
    ``_DEFAULT_MODE``; always ``"off"`` without TMA (before sm_90a)."""
    if not getattr(target, "tma", False):
        return "off"
    return _env_mode()


def _env_mode() -> str:
    v = os.environ.get("NEWT_TMA", "").strip().lower()
    if not v:
        return _DEFAULT_MODE
    if v not in _MODES:
        raise ValueError(f"NEWT_TMA={v!r}: expected 0, desc or 1")
    return _MODES[v]


def tma_enabled(target) -> bool:
    """Whether any access may go through TMA on this target (:func:`tma_mode` is not ``"off"``)."""
    return tma_mode(target) != "off"


# ---------------------------------------------------------------------------
# polynomials over the IR's integers
# ---------------------------------------------------------------------------


class Poly:
    """An integer polynomial: monomials are sorted tuples of atoms -- ``("i", d)`` (the index along
    dimension ``d`` of the block) or ``("v", id)`` (an opaque scalar IR value) -- with int coefficients."""

    __slots__ = ("terms", "atoms")

    def __init__(self, terms=None, atoms=None):
        self.terms: dict = {k: c for k, c in (terms or {}).items() if c}
        self.atoms: dict = dict(atoms or {})   # ("v", id) -> Value

    @staticmethod
    def const(c: int) -> "Poly":
        return Poly({(): int(c)})

    @staticmethod
    def index(d: int) -> "Poly":
        return Poly({(("i", d),): 1})

    @staticmethod
    def atom(v) -> "Poly":
        k = ("v", id(v))  # (the object: IR ids are assigned only by fn.number())
        return Poly({(k,): 1}, {k: v})

    def __add__(self, o: "Poly") -> "Poly":
        t = dict(self.terms)
        for k, c in o.terms.items():
            t[k] = t.get(k, 0) + c
        return Poly(t, {**self.atoms, **o.atoms})

    def scale(self, c: int) -> "Poly":
        return Poly({k: v * c for k, v in self.terms.items()}, self.atoms)

    def __sub__(self, o: "Poly") -> "Poly":
        return self + o.scale(-1)

    def __mul__(self, o: "Poly") -> "Poly":
        t: dict = {}
        for k1, c1 in self.terms.items():
            for k2, c2 in o.terms.items():
                k = tuple(sorted(k1 + k2))
                t[k] = t.get(k, 0) + c1 * c2
        return Poly(t, {**self.atoms, **o.atoms})

    def remap(self, f) -> "Poly":
        """Renumber the index atoms' dimensions with ``f``."""
        t: dict = {}
        for k, c in self.terms.items():
            nk = tuple(sorted(("i", f(a[1])) if a[0] == "i" else a for a in k))
            t[nk] = t.get(nk, 0) + c
        return Poly(t, self.atoms)

    def index_dims(self) -> set:
        return {a[1] for k in self.terms for a in k if a[0] == "i"}

    def without_index(self) -> "Poly":
        return Poly({k: c for k, c in self.terms.items() if not any(a[0] == "i" for a in k)}, self.atoms)

    def is_zero(self) -> bool:
        return not self.terms

    def single_atom(self):
        """The Value when this is exactly one atom (coefficient 1), else None."""
        if len(self.terms) == 1:
            (k, c), = self.terms.items()
            if c == 1 and len(k) == 1 and k[0][0] == "v":
                return self.atoms[k[0]]
        return None

    def constant(self):
        if not self.terms:
            return 0
        if len(self.terms) == 1 and () in self.terms:
            return self.terms[()]
        return None

    def render(self, scalar) -> str:
        """C++ (int arithmetic) for a polynomial without index atoms; ``scalar(v)`` names a value."""
        parts = []

        def akey(a):  # deterministic: by the atoms' IR ids (a term's atoms are sorted by id(), a memory address)
            return (a[0], a[1] if a[0] == "i" else getattr(self.atoms[a], "id", 0))

        def order(kc):
            return sorted(akey(a) for a in kc[0])
        for k, c in sorted(self.terms.items(), key=order):
            fs = [f"(int)({scalar(self.atoms[a])})" for a in sorted(k, key=akey)]
            if c != 1 or not fs:
                fs.insert(0, str(c))
            parts.append(" * ".join(fs))
        return "(" + " + ".join(parts) + ")" if parts else "0"


_MAX_TERMS = 64


def _shift(p: Poly, axis: int) -> Poly:
    return p.remap(lambda d: d + 1 if d >= axis else d)


def int_poly(v, depth: int = 0):
    """The polynomial of integer value ``v`` (a scalar or a block), or None if it is not one."""
    if depth > 64:
        return None
    t = v.type
    st = scalar_of(t)
    if st.is_ptr() or getattr(st, "name", "") == "int1":
        return None
    o = v.owner
    if isinstance(o, Region) or o is None:
        return Poly.atom(v) if not is_block(t) else None
    n = o.name
    if n == "constant":
        val = o.attrs.get("value")
        if isinstance(val, bool) or not isinstance(val, int):
            return None
        return Poly.const(val)
    if n == "arange":
        return Poly.index(0) + Poly.const(int(o.attrs.get("start", 0)))
    if n == "splat":
        return int_poly(o.operands[0], depth + 1)
    if n == "expand_dims":
        p = int_poly(o.operands[0], depth + 1)
        return None if p is None else _shift(p, int(o.attrs["axis"]))
    if n == "broadcast":
        src = o.operands[0]
        p = int_poly(src, depth + 1)
        if p is None:
            return None
        k = len(shape_of(t)) - len(shape_of(src.type)) if is_block(src.type) else 0
        return p.remap(lambda d: d + k) if k else p
    if n in ("add", "sub", "mul"):
        a, b = (int_poly(x, depth + 1) for x in o.operands[:2])
        if a is None or b is None:
            return Poly.atom(v) if not is_block(t) else None
        r = a + b if n == "add" else a - b if n == "sub" else a * b
        return r if len(r.terms) <= _MAX_TERMS else None
    return Poly.atom(v) if not is_block(t) else None


def ptr_poly(v, depth: int = 0):
    """``(base pointer Value, offset Poly in elements)`` of a pointer value, or None."""
    if depth > 64:
        return None
    o = v.owner
    if isinstance(o, Region) or o is None:
        return (v, Poly()) if not is_block(v.type) else None
    n = o.name
    if n == "splat":
        return ptr_poly(o.operands[0], depth + 1)
    if n == "addptr":
        b = ptr_poly(o.operands[0], depth + 1)
        off = int_poly(o.operands[1], depth + 1)
        if b is None or off is None:
            return None
        return b[0], b[1] + off
    if n == "expand_dims":
        b = ptr_poly(o.operands[0], depth + 1)
        return None if b is None else (b[0], _shift(b[1], int(o.attrs["axis"])))
    if n == "broadcast":
        src = o.operands[0]
        b = ptr_poly(src, depth + 1)
        if b is None:
            return None
        k = len(shape_of(v.type)) - len(shape_of(src.type)) if is_block(src.type) else 0
        return (b[0], b[1].remap(lambda d: d + k)) if k else b
    return None


def mask_terms(v, depth: int = 0):
    """The conjunction ``v`` as a list of ``(cmp, lhs Poly, rhs Poly)``, or None."""
    if depth > 64:
        return None
    o = v.owner
    if isinstance(o, Region) or o is None:
        return None
    n = o.name
    if n == "and":
        a, b = (mask_terms(x, depth + 1) for x in o.operands[:2])
        return None if a is None or b is None else a + b
    if n == "splat" and not is_block(o.operands[0].type):
        return None
    if n in ("expand_dims", "broadcast"):
        src = o.operands[0]
        ts = mask_terms(src, depth + 1)
        if ts is None:
            return None
        if n == "expand_dims":
            ax = int(o.attrs["axis"])
            return [(c, _shift(a, ax), _shift(b, ax)) for c, a, b in ts]
        k = len(shape_of(v.type)) - len(shape_of(src.type)) if is_block(src.type) else 0
        return [(c, a.remap(lambda d: d + k), b.remap(lambda d: d + k)) for c, a, b in ts] if k else ts
    if n in ("lt", "ge", "gt", "le"):
        a, b = (int_poly(x, depth + 1) for x in o.operands[:2])
        if a is None or b is None:
            return None
        if n == "gt":      # a > b  <=>  b < a
            return [("lt", b, a)]
        if n == "le":      # a <= b  <=>  b >= a
            return [("ge", b, a)]
        return [(n, a, b)]
    if n == "constant" and o.attrs.get("value") is True:
        return []
    return None


# ---------------------------------------------------------------------------
# matching an access
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TmaAccess:
    """A tile access TMA can do: the tensor ``(base, dims, strides)`` -- each entry a scalar Value (a
    kernel parameter) or an int -- and the box's coordinates (Polys without index atoms)."""
    op: object
    base: object
    dims: tuple
    strides: tuple
    coords: tuple
    box: tuple
    dtype: str
    elem_bytes: int
    fill: str = "zero"

    def coord_values(self) -> list:
        """The scalar IR values the coordinates are computed from."""
        out: list = []
        for c in self.coords:
            out.extend(c.atoms[k] for m in c.terms for k in m)
        return out


def _param_index(fn, v):
    rt = [p.value for p in fn.params if not p.constexpr]
    for i, pv in enumerate(rt):
        if pv is v:
            return i
    return None


def _entry(fn, p: Poly):
    """("c", int) or ("v", Value) for a host-computable size or stride, else None."""
    c = p.constant()
    if c is not None:
        return c
    a = p.single_atom()
    if a is not None and _param_index(fn, a) is not None:
        return a
    return None


def _div(axis, v) -> int:
    info = axis.get(v) if axis is not None else None
    return int(getattr(info, "scalar_div", 1) or 1) if info is not None else 1


def match_access(fn, op, axis):
    """The :class:`TmaAccess` of block load/store ``op``, or None (see the module docstring)."""
    if op.name not in ("load", "store"):
        return None
    if not op.attrs.get("descriptor") and _env_mode() == "desc":  # the pointer form stays on the pointer path
        return None
    ptr, mask = op.operand("ptr"), op.operand("mask")
    if ptr is None or mask is None or not is_block(ptr.type) or op.attrs.get("volatile"):
        return None
    shape = tuple(shape_of(ptr.type))
    r = len(shape)
    # rank 1 stays on the pointer path: on the H200 (driver 580.159.04, cuda-bindings 13.3.1, 2026-12-02)
    # cuTensorMapEncodeTiled answered CUDA_ERROR_INVALID_VALUE for every rank-1 map (no global strides)
    if not 2 <= r <= 5:
        return None
    et = scalar_of(ptr.type).element_ty
    dtype = getattr(et, "name", "")
    if dtype not in _TYPES:
        return None
    eb = max(1, et.primitive_bitwidth // 8)
    fill = "zero"
    if op.name == "load":
        other = op.operand("other")
        if other is not None:
            ov = _constant_value(other)
            if ov is None:
                return None
            if ov != ov:  # NaN
                if dtype not in _NAN_OK:
                    return None
                fill = "nan"
            elif ov != 0:
                return None
    pp = ptr_poly(ptr)
    terms = mask_terms(mask)
    if pp is None or terms is None:
        return None
    base, off = pp
    if _param_index(fn, base) is None:
        return None
    idx: dict = {}
    bounds: dict = {}
    lowers: list = []
    for cmp, a, b in terms:
        if cmp == "lt":
            dims_a = a.index_dims()
            if len(dims_a) != 1 or b.index_dims():
                return None
            (d,) = dims_a
            if a.terms.get((("i", d),)) != 1 or len([k for k in a.terms if any(x[0] == "i" for x in k)]) != 1:
                return None
            if d in idx and not (idx[d] - a).is_zero():
                return None
            idx[d] = a
            e = _entry(fn, b)
            if e is None or d in bounds:
                return None
            bounds[d] = e
        elif cmp == "ge":
            lowers.append((a, b))
        else:
            return None
    if sorted(idx) != list(range(r)):
        return None
    for a, b in lowers:  # 0 <= idx_d: the bound TMA checks too
        if b.constant() != 0 or not any((a - idx[d]).is_zero() for d in idx):
            return None
    # the pointer: base + sum_d idx_d * stride_d
    strides = []
    expect = Poly()
    for d in range(r):
        ms = [(k, c) for k, c in off.terms.items() if ("i", d) in k]
        if len(ms) != 1:
            return None
        k, c = ms[0]
        rest = tuple(x for x in k if x != ("i", d))
        if rest:
            if c != 1 or len(rest) != 1 or rest[0][0] != "v":
                return None
            sv = off.atoms[rest[0]]
            if _param_index(fn, sv) is None:
                return None
            strides.append(sv)
            expect = expect + idx[d] * Poly.atom(sv)
        else:
            strides.append(int(c))
            expect = expect + idx[d].scale(int(c))
    if not (off - expect).is_zero():
        return None
    if strides[-1] != 1:
        return None
    # alignment the launch cannot fail: a 16-byte aligned base, strides multiples of 16 bytes
    if _div(axis, base) % 16:
        return None
    for s in strides[:-1]:
        if isinstance(s, int):
            if s <= 0 or (s * eb) % 16:
                return None
        elif (_div(axis, s) * eb) % 16:
            return None
    for d in range(r):
        bd = bounds[d]
        if isinstance(bd, int) and bd <= 0:
            return None
    coords = tuple(idx[d] - Poly.index(d) for d in range(r))
    if any(c.index_dims() for c in coords):
        return None
    if tile_plan(shape, eb) is None:
        return None
    return TmaAccess(op, base, tuple(bounds[d] for d in range(r)), tuple(strides), coords, shape, dtype, eb, fill)


def _constant_value(v):
    o = v.owner
    while getattr(o, "name", None) in ("splat", "broadcast", "expand_dims"):
        o = o.operands[0].owner
    if getattr(o, "name", None) != "constant":
        return None
    val = o.attrs.get("value")
    return val if isinstance(val, (int, float)) and not isinstance(val, bool) else None


# ---------------------------------------------------------------------------
# shared tiles
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TilePlan:
    """How a box lands in shared memory: ``atoms`` copies of ``rows`` x ``swizzle`` bytes (or, without a
    swizzle, one copy of 16-byte rows), each ``atom_bytes`` apart; ``box`` the tensor map's box."""
    rows: int
    inner: int
    elem_bytes: int
    swizzle: int        # 0, 32, 64, 128
    atoms: int
    atom_cols: int      # elements of the inner dimension per copy
    box: tuple          # the tensor map's box (outermost first)

    @property
    def row_bytes(self) -> int:
        return self.swizzle or self.inner * self.elem_bytes

    @property
    def atom_bytes(self) -> int:
        return self.rows * self.row_bytes

    @property
    def size_bytes(self) -> int:
        return self.rows * self.inner * self.elem_bytes

    @property
    def align(self) -> int:
        """The swizzle pattern repeats every 8 rows (1024 bytes at 128): tiles start there."""
        return max(128, 8 * self.swizzle)

    def offset(self, row: int, col: int) -> int:
        W = self.row_bytes
        atom, c = divmod(col, self.atom_cols)
        byte = c * self.elem_bytes
        phase = (row // (128 // W)) % (W // 16) if self.swizzle else 0
        return atom * self.atom_bytes + row * W + ((byte // 16) ^ phase) * 16 + byte % 16

    def offset_expr(self, row: str, col: str) -> str:
        W = self.row_bytes
        ac, eb = self.atom_cols, self.elem_bytes
        c = f"(({col}) & {ac - 1})" if ac < self.inner else f"({col})"
        byte = f"({c} * {eb})" if eb != 1 else c
        atom = f"(({col}) / {ac}) * {self.atom_bytes} + " if ac < self.inner else ""
        if not self.swizzle:
            return f"({atom}({row}) * {W} + {byte})"
        per = 128 // W
        phase = f"((({row}) / {per}) % {W // 16})" if per > 1 else f"(({row}) % {W // 16})"
        return f"({atom}({row}) * {W} + ((({byte} >> 4) ^ {phase}) << 4) + ({byte} & 15))"


def tile_plan(block, eb: int):
    """The :class:`TilePlan` of a box of shape ``block`` (or None: TMA cannot land it so)."""
    block = tuple(int(b) for b in block)
    inner = block[-1]
    rows = 1
    for b in block[:-1]:
        rows *= b
    ib = inner * eb
    if ib < 16 or ib % 16 or any(b > 256 for b in block[:-1]):
        return None
    swz = 0 if ib == 16 else min(128, ib)
    if swz and ib % swz:
        return None
    if swz and inner * eb > swz and rows % 8:
        swz = 0  # the next atom would not start on the swizzle pattern's period: plain rows, one copy
    atom_cols = (swz // eb) if swz else inner
    atoms = inner // atom_cols
    if atom_cols > 256:
        return None
    box = block[:-1] + (atom_cols,)
    return TilePlan(rows, inner, eb, swz, atoms, atom_cols, box)


def same_layout(plan: TilePlan, tile) -> bool:
    """Whether ``tile`` (a ``SwizzledShared``/``GmmaShared`` of the pipeline) stores every element
    where the TMA box puts it."""
    if tile.rows != plan.rows or tile.inner != plan.inner or tile.elem_bytes != plan.elem_bytes:
        return False
    # both are XOR swizzles over row bits below 8 and atom/chunk bits: the first 16 rows, the middle and
    # the last rows with every column decide it
    rows = sorted(set(range(min(16, plan.rows))) | {plan.rows // 2, plan.rows // 2 + 7, plan.rows - 1} &
                  set(range(plan.rows)))
    return all(tile.offset(r, c) == plan.offset(r, c) for r in rows for c in range(plan.inner))


# ---------------------------------------------------------------------------
# kernel state: tensor maps, barriers
# ---------------------------------------------------------------------------


@dataclass
class _State:
    recipes: list = field(default_factory=list)     # JSON recipes, one per tensor-map parameter
    keys: list = field(default_factory=list)
    bars: str = ""                                  # the barriers' shared-memory offset name
    nbars: int = 0
    used_bars: int = 0


def _state(em) -> _State:
    st = em.__dict__.get("_tma_state")
    if st is None:
        st = em.__dict__["_tma_state"] = _State()
    return st


def tensor_map(em, acc: TmaAccess, plan: TilePlan) -> str:
    """The C++ name of the ``__grid_constant__`` tensor map of ``acc`` (a parameter added on first use)."""
    fn = em.fn
    st = _state(em)

    def ent(x):
        return ["c", int(x)] if isinstance(x, int) else ["p", _param_index(fn, x)]
    arg = _user_arg(fn, acc.base)
    rec = {"arg": arg, "dtype": acc.dtype, "elem_bytes": acc.elem_bytes, "base": _param_index(fn, acc.base),
           "dims": [ent(x) for x in acc.dims], "strides": [ent(x) for x in acc.strides], "box": list(plan.box),
           "swizzle": plan.swizzle, "fill": acc.fill}
    key = repr(sorted(rec.items()))
    if key not in st.keys:
        st.keys.append(key)
        st.recipes.append(rec)
    return f"newt_tmap{st.keys.index(key)}"


def _user_arg(fn, v) -> str:
    for p in fn.params:
        if p.value is v:
            return p.name.split(".", 1)[0]
    return ""


def kernel_params(em) -> tuple[list[str], list[dict]]:
    """(C++ parameter declarations, recipes) of the tensor maps the kernel uses (codegen appends them)."""
    st = em.__dict__.get("_tma_state")
    if st is None:
        return [], []
    return ([f"    const __grid_constant__ NewtTensorMap newt_tmap{k}" for k in range(len(st.recipes))],
            list(st.recipes))


def barriers(em, n: int) -> int:
    """Index of the first of ``n`` fresh mbarriers (initialized at the kernel's start)."""
    st = _state(em)
    if not st.bars:
        total = int(getattr(em.pipes, "tma_barriers", 0) or 0)
        st.nbars = max(total, 1)
        if st.nbars > 32:
            raise ValueError("more than 32 TMA barriers")
        st.bars = em.smem_reserved(8 * st.nbars)
        t = em.top
        t.line(f"// {st.nbars} mbarrier(s) for the TMA copies; tma_phase bit b: the parity barrier b waits for next")
        t.line("if (threadIdx.x == 0) {")
        t.line(f"  for (int b = 0; b < {st.nbars}; ++b) mbar_init(smem_u32(smem + {st.bars}) + 8 * b, 1);")
        t.line("  mbar_fence_init();")
        t.line("}")
        t.line("__syncthreads();")
        t.line("unsigned tma_phase = 0;")
    first = st.used_bars
    st.used_bars += n
    if st.used_bars > st.nbars:
        raise ValueError(f"internal: {st.used_bars} TMA barriers used, {st.nbars} planned")
    return first


def barrier_available(em) -> bool:
    """Whether a planned mbarrier is left for one more standalone TMA load (else: the pointer path)."""
    st = _state(em)
    return st.used_bars < int(getattr(em.pipes, "tma_barriers", 0) or 0)


def bar_addr(em, index: str) -> str:
    return f"(smem_u32(smem + {_state(em).bars}) + 8 * ({index}))"


def issue_copies(em, chunk, acc: TmaAccess, plan: TilePlan, dst: str, bar: str):
    """Lines (into ``chunk``, run by one thread) that copy ``acc``'s box to shared address ``dst``."""
    tm = tensor_map(em, acc, plan)
    r = len(acc.box)
    cs = [c.render(em.scalar) for c in acc.coords]  # outermost first
    for a in range(plan.atoms):
        inner = cs[-1] if a == 0 else f"{cs[-1]} + {a * plan.atom_cols}"
        coords = [inner] + list(reversed(cs[:-1]))
        d = dst if a == 0 else f"{dst} + {a * plan.atom_bytes}"
        chunk.line(f"tma_load_{r}d({d}, &{tm}, {', '.join(coords)}, {bar});")


def emit_tma_store(em, op, acc: TmaAccess):
    """A tile store through TMA (see the module docstring)."""
    from .plan import compact
    from .vectors import pack_words
    val = op.operand("value")
    plan = tile_plan(acc.box, acc.elem_bytes)
    assert plan is not None
    have = em.layout_of(val) if is_block(val.type) else None
    lay = compact(have if have is not None and val not in em.plan.poly else em.plan.access[op])
    x = em.get(val, lay) if is_block(val.type) else None
    t = scalar_of(val.type)
    eb = acc.elem_bytes
    inner = acc.box[-1]
    lc = log2(inner)
    v = _vector_run(lay, inner, eb)
    tm = tensor_map(em, acc, plan)
    c = em.cur
    off = em.smem_scratch(plan.size_bytes + plan.align, c, async_proxy=True)
    base = em.tmp("tile")
    c.line(f"// TMA store of a {'x'.join(map(str, acc.box))} box ({plan.swizzle}-byte swizzle)")
    c.line("{")
    b = c.sub(1)
    # the swizzle follows the shared address: the tile starts on its period (the scratch has room for that)
    b.line(f"const int {base} = (int)(((smem_u32(smem + {off}) + {plan.align - 1}) & ~{plan.align - 1}u) - "
           "smem_u32(smem));")
    b.line("__syncthreads();  // the scratch tile is free")
    fe = em.flat_expr(lay)
    addr = plan.offset_expr(f"(f >> {lc})", f"(f & {inner - 1})")
    elems = [f"{x}[i + {j}]" if x else em.scalar(val) for j in range(v)]
    words = pack_words(elems, t, v * eb)
    if v * eb >= 4:
        n = len(words)
        vt = {1: "unsigned", 2: "uint2", 4: "uint4"}[n]
        w = words[0] if n == 1 else f"make_{vt}({', '.join(words)})"
        st = f"*reinterpret_cast<{vt}*>(smem + {base} + {addr}) = {w};"
    else:
        ct = "unsigned short" if v * eb == 2 else "unsigned char"
        st = f"*reinterpret_cast<{ct}*>(smem + {base} + {addr}) = ({ct})({words[0]});"
    n = lay.nregs
    b.line("#pragma unroll")
    b.line(f"for (int i = 0; i < {n}; i += {v}) {{ const int f = {fe}; {st} }}" if n > 1 else
           f"{{ const int i = 0; const int f = {fe}; {st} }}")
    b.line("tma_fence_proxy_async();  // the tile is read by the bulk copy (async proxy)")
    b.line("__syncthreads();")
    b.line("if (threadIdx.x == 0) {")
    cs = [cc.render(em.scalar) for cc in acc.coords]
    r = len(acc.box)
    for a in range(plan.atoms):
        inner_c = cs[-1] if a == 0 else f"{cs[-1]} + {a * plan.atom_cols}"
        coords = [inner_c] + list(reversed(cs[:-1]))
        src = f"smem_u32(smem) + {base}" + (f" + {a * plan.atom_bytes}" if a else "")
        b.line(f"  tma_store_{r}d(&{tm}, {src}, {', '.join(coords)});")
    b.line("  tma_store_commit();")
    b.line("  tma_store_wait_read();")
    b.line("}")
    c.line("}")


def _vector_run(lay, inner: int, eb: int) -> int:
    """Elements of the run of low registers along the inner dimension (one vector access each)."""
    v = 1
    for b in lay.reg:
        if b == v and v * eb < 16 and v < inner:
            v *= 2
        else:
            break
    return v


def emit_tma_load(em, op, acc: TmaAccess):
    """A tile load outside a software-pipelined loop: thread 0 copies the box into a scratch tile on an
    mbarrier of its own, every thread waits for it and reads its registers."""
    from .ctypes import ctype
    from .plan import compact
    from .vectors import unpack_words
    res = op.result
    plan = tile_plan(acc.box, acc.elem_bytes)
    assert plan is not None
    lay = compact(em.plan.access[op])
    t = scalar_of(res.type)
    eb = acc.elem_bytes
    inner = acc.box[-1]
    lc = log2(inner)
    v = _vector_run(lay, inner, eb)
    name = em.declare_block(res, lay)
    c = em.cur
    off = em.smem_scratch(plan.size_bytes + plan.align, c, async_proxy=True)
    bi = barriers(em, 1)
    bar = bar_addr(em, str(bi))
    base = em.tmp("tile")
    c.line(f"// TMA load of a {'x'.join(map(str, acc.box))} box ({plan.swizzle}-byte swizzle), mbarrier {bi}")
    c.line("{")
    b = c.sub(1)
    b.line(f"const int {base} = (int)(((smem_u32(smem + {off}) + {plan.align - 1}) & ~{plan.align - 1}u) - "
           "smem_u32(smem));")
    b.line("tma_fence_proxy_async();  // plain accesses to the scratch before the async-proxy copy")
    b.line("__syncthreads();  // the scratch tile is free")
    b.line("if (threadIdx.x == 0) {")
    b.line(f"  mbar_expect_tx({bar}, {plan.size_bytes});")
    issue_copies(em, b.sub(1), acc, plan, f"smem_u32(smem) + {base}", bar)
    b.line("}")
    b.line(f"mbar_wait({bar}, (tma_phase >> {bi}) & 1u);")
    b.line(f"tma_phase ^= 1u << {bi};")
    fe = em.flat_expr(lay)
    addr = plan.offset_expr(f"(f >> {lc})", f"(f & {inner - 1})")
    if v * eb >= 4:
        nw = v * eb // 4
        vt = {1: "unsigned", 2: "uint2", 4: "uint4"}[nw]
        ws = ["w"] if nw == 1 else [f"w.{x}" for x in "xyzw"[:nw]]
        outs = unpack_words(ws, t, v)
        body = " ".join(f"{name}[i + {j}] = {e};" for j, e in enumerate(outs))
        stmt = f"const int f = {fe}; const {vt} w = *reinterpret_cast<const {vt}*>(smem + {base} + {addr}); {body}"
    else:
        stmt = f"const int f = {fe}; {name}[i] = *reinterpret_cast<const {ctype(t)}*>(smem + {base} + {addr});"
    n = lay.nregs
    b.line("#pragma unroll")
    b.line(f"for (int i = 0; i < {n}; i += {v}) {{ {stmt} }}" if n > 1 else f"{{ const int i = 0; {stmt} }}")
    c.line("}")


def standalone_loads(fn, axis, pipelined) -> int:
    """How many block loads outside software-pipelined loops go through TMA (one mbarrier each)."""
    n = 0
    for op in fn.walk():
        if op.name == "load" and op not in pipelined and match_access(fn, op, axis) is not None:
            n += 1
    return n
