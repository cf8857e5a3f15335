"""The range of an index the kernel computes (``tile.index + start``, ``tile.begin + 1``, a loaded offset), for the
bounds check of an access (issue 25).

``x[tile_q.index + starts, h, :]`` indexes ``x``'s first dimension with a block the kernel computes: nothing says its
lanes stay inside that dimension (Helion's jagged HSTU attention reads past ``q`` for its last sequence, lanes it
masks out of the result later).  ``deuteron.ops.memory`` asks :func:`bound_check` whether such an index is
provably in ``[0, size)``; where it is not, the access is masked with ``0 <= i < size`` as well, so an
out-of-bounds lane reads ``other`` (a store lane is dropped) instead of touching memory past the tensor.

The ranges are those of the lanes the access keeps: a tile's indices are ``begin .. end - 1`` (lanes past its end
are masked by the tile's own mask, which every access along the tile carries).  A bound is an int, ``(name, c)``
(the run-time size parameter ``name`` plus ``c``: ``static_shapes=False``) or None (unknown).  Loads, reductions,
parameters and loop-carried values are unknown, so an index built from them is checked.
"""

from __future__ import annotations

from .program import Node, TileInfo

__all__ = ["value_range", "bound_check"]


def _add(a, b):
    if a is None or b is None:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, tuple) and isinstance(b, int):
        return (a[0], a[1] + b)
    if isinstance(b, tuple) and isinstance(a, int):
        return (b[0], b[1] + a)
    return None  # two symbols


def _neg(a):
    return -a if isinstance(a, int) else None


def _int(a):
    return a if isinstance(a, int) else None


def value_range(v, memo: dict | None = None) -> tuple:
    """``(lo, hi)``, inclusive bounds of the values ``v`` (an int or an int Node) takes in the lanes an access
    keeps; either side None where it is not known."""
    if isinstance(v, bool):
        return int(v), int(v)
    if isinstance(v, int):
        return v, v
    if not isinstance(v, Node):
        return None, None
    memo = {} if memo is None else memo
    hit = memo.get(v.id)
    if hit is None:
        memo[v.id] = (None, None)  # (a cycle through carried values cannot happen, but stays unknown if it does)
        hit = memo[v.id] = _range(v, memo)
    return hit


def _range(n: Node, memo) -> tuple:
    op = n.op
    if n.dtype is not None and (n.dtype.is_floating_point or n.dtype.is_complex):
        return None, None
    if op == "const":
        val = n.attrs.get("value")
        return value_range(val, memo) if isinstance(val, int) else (None, None)
    if op == "param":
        if n.attrs.get("nonneg"):  # a tensor's size or stride passed at run time
            return 0, (n.attrs["name"], 0)
        return None, None
    t = n.attrs.get("tile")
    if op in ("tile_index", "tile_begin", "grid_index") and isinstance(t, TileInfo):
        lo, _ = value_range(t.begin, memo)
        _, hi = value_range(t.end, memo)
        return lo, _add(hi, -1)
    if op == "tile_end" and isinstance(t, TileInfo):
        lo, _ = value_range(t.begin, memo)
        _, hi = value_range(t.end, memo)
        return _add(lo, 1), hi
    if op in ("tile_id", "tile_count") and isinstance(t, TileInfo):
        ext = t.extent  # (known when begin and end are ints)
        block = t.fixed or t.known_block  # (None: the config's, at least 1)
        count = None if ext is None else (-(-ext // block) if block else ext)
        if op == "tile_id":
            return 0, None if count is None else count - 1
        return (count if block else min(1, ext)) if count is not None else 0, count
    if op == "tile_block_size":
        return 1, None
    if op == "loop_index":
        rng = n.attrs.get("range")
        if rng is None:
            return None, None
        start, end, step = rng
        slo, shi = value_range(start, memo)
        elo, ehi = value_range(end, memo)
        if step > 0:
            return slo, _add(ehi, -1)
        return _add(elo, 1), shi
    if op == "arange":
        r = n.attrs.get("rdim")
        start = n.attrs.get("start", 0)
        if r is None:
            return start, start
        size = getattr(r, "size", None)
        return (start, start + size - 1) if isinstance(size, int) and size > 0 else (start, None)
    if op in ("cast", "expand", "expand_dims", "reshape", "permute") and n.args:
        src = n.args[0]
        if isinstance(src, Node) and src.dtype is not None and src.dtype.is_floating_point:
            return None, None
        return value_range(src, memo)
    if op == "where" and len(n.args) == 3:
        a = value_range(n.args[1], memo)
        b = value_range(n.args[2], memo)
        lo = min(a[0], b[0]) if isinstance(a[0], int) and isinstance(b[0], int) else None
        hi = max(a[1], b[1]) if isinstance(a[1], int) and isinstance(b[1], int) else \
            (a[1] if a[1] == b[1] else None)
        return lo, hi
    if op == "binary" and len(n.args) == 2:
        return _binary(n.attrs.get("op"), value_range(n.args[0], memo), value_range(n.args[1], memo))
    return None, None


def _binary(o, a, b) -> tuple:
    (alo, ahi), (blo, bhi) = a, b
    if o == "add":
        return _add(alo, blo), _add(ahi, bhi)
    if o == "sub":
        return _add(alo, _neg(bhi)), _add(ahi, _neg(blo))
    if o == "minimum":
        lo = min(alo, blo) if isinstance(alo, int) and isinstance(blo, int) else None
        his = [h for h in (ahi, bhi) if h is not None]
        ints = [h for h in his if isinstance(h, int)]
        return lo, (min(ints) if ints else (his[0] if his else None))
    if o == "maximum":
        hi = max(ahi, bhi) if isinstance(ahi, int) and isinstance(bhi, int) else None
        los = [x for x in (alo, blo) if isinstance(x, int)]
        return (max(los) if los else None), hi
    vals = [_int(x) for x in (alo, ahi, blo, bhi)]
    if any(x is None for x in vals):
        return None, None
    alo, ahi, blo, bhi = vals
    if o == "mul":
        prods = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return min(prods), max(prods)
    if o in ("floordiv", "mod") and alo >= 0 and blo > 0:  # newt's // and % truncate: non-negative operands
        if o == "floordiv":
            return alo // bhi, ahi // blo
        return 0, min(ahi, bhi - 1)
    return None, None


def bound_check(v, size) -> tuple | None:
    """Whether an index ``v`` (an int Node, a scalar or a block) into a dimension of ``size`` elements (an int,
    or with ``static_shapes=False`` the name of its run-time size parameter) needs a check: None where ``0 <= v <
    size`` is proven, else ``(check_lower, check_upper)``, the sides not proven."""
    lo, hi = value_range(v)
    low_ok = (isinstance(lo, int) and lo >= 0) or (isinstance(lo, tuple) and lo[1] >= 0)
    if isinstance(size, int):
        high_ok = isinstance(hi, int) and hi < size
    else:
        high_ok = isinstance(hi, tuple) and hi[0] == size and hi[1] <= -1
    if low_ok and high_ok:
        return None
    return (not low_ok, not high_ok)
