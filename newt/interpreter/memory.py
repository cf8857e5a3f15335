"""Global memory of an interpreted launch: the argument tensors, addressed by byte.

Pointer values are int64 byte addresses.  CPU tensors are used in place (the
address of an element is its real address); tensors on another device are
copied to the host once per storage before the launch and copied back after
it when the kernel wrote to them.  Every access is checked: an address whose
lane is active (mask true, program active) must fall inside the span of some
argument tensor, or the access raises :class:`OutOfBoundsError`.

Each access first tries the one region that holds the smallest and the
largest active address (a couple of reductions); only accesses that straddle
regions or leave them take the per-lane path.
"""

from __future__ import annotations

import bisect

import torch

from . import dtypes as D
from .errors import MisalignedAddressError, OutOfBoundsError

__all__ = ["Memory", "ArgInfo"]


class ArgInfo:
    """A pointer argument: its name, address and extent (for error messages)."""

    __slots__ = ("name", "address", "numel", "dtype", "nbytes", "device")

    def __init__(self, name, address, numel, dtype, nbytes, device):
        self.name = name
        self.address = address
        self.numel = numel
        self.dtype = dtype
        self.nbytes = nbytes
        self.device = device


class _Storage:
    __slots__ = ("flat", "base", "views", "dirty", "device_flat")

    def __init__(self, flat: torch.Tensor, device_flat=None):
        self.flat = flat  # uint8 CPU tensor over the whole storage
        self.base = flat.data_ptr()
        self.views: dict = {}
        self.dirty = False
        self.device_flat = device_flat  # the original (non-CPU) storage, to copy back

    def view(self, sdt: torch.dtype):
        """The storage as a flat tensor of ``sdt`` and the address of its element 0 (naturally aligned)."""
        v = self.views.get(sdt)
        if v is None:
            isz = torch.empty((), dtype=sdt).element_size()
            start = (-self.base) % isz
            n = (self.flat.numel() - start) // isz
            v = (self.flat[start: start + n * isz].view(sdt), self.base + start)
            self.views[sdt] = v
        return v


class _Region:
    __slots__ = ("lo", "hi", "storage")

    def __init__(self, lo, hi, storage):
        self.lo = lo
        self.hi = hi
        self.storage = storage


def _extent_bytes(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return span * t.element_size()


def _gather(flat: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``flat[idx]`` through index_select (advanced indexing is 100x slower on a busy machine)."""
    return flat.index_select(0, idx.reshape(-1)).view(idx.shape)


_BYTE_FLOATS = D.FP8_TORCH


def _scatter(flat: torch.Tensor, idx: torch.Tensor, vals: torch.Tensor):
    """``flat[idx] = vals`` (1-D); where indices repeat, one of the values lands."""
    if flat.dtype in _BYTE_FLOATS:
        flat, vals = flat.view(torch.uint8), vals.contiguous().view(torch.uint8)
    flat.index_copy_(0, idx, vals)


def _flat_bytes(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _to_host(flat: torch.Tensor) -> torch.Tensor:
    """A CPU copy of a device storage (bytes)."""
    return flat.to("cpu", copy=True)


def _copy_back(device_flat: torch.Tensor, host_flat: torch.Tensor):
    device_flat.copy_(host_flat)


def needs_host_copy(t: torch.Tensor) -> bool:
    """Whether a tensor lives off the CPU (CUDA ...) and must be staged through host memory."""
    return t.device.type != "cpu"


class Memory:
    def __init__(self):
        self._storages: dict = {}
        self._spans: list = []  # (lo, hi, storage)
        self.regions: list[_Region] = []
        self._los: list[int] = []
        self._los_t = None
        self._his_t = None
        self.args: list[ArgInfo] = []
        self.by_name: dict[str, ArgInfo] = {}
        self.epoch = 0  # bumped by every write: lets loops detect that nothing changes
        self.check_alignment = False

    # ------------------------------------------------------------------ setup
    def add_tensor(self, name: str, t: torch.Tensor) -> tuple[int, torch.Tensor]:
        """Register a pointer argument; returns its address and the tensor the kernel works on."""
        host = t
        if needs_host_copy(t):
            st = t.untyped_storage()
            key = (str(t.device), st.data_ptr())
            s = self._storages.get(key)
            if s is None:
                dflat = _flat_bytes(t)
                s = _Storage(_to_host(dflat), device_flat=dflat)
                self._storages[key] = s
            host = torch.empty(0, dtype=t.dtype).set_(s.flat.untyped_storage(), t.storage_offset(), t.size(),
                                                       t.stride())
        else:
            key = ("cpu", t.untyped_storage().data_ptr())
            s = self._storages.get(key)
            if s is None:
                s = _Storage(_flat_bytes(t))
                self._storages[key] = s
        lo = host.data_ptr()
        nb = _extent_bytes(host)
        if nb:
            self._spans.append((lo, lo + nb, s))
        info = ArgInfo(name, lo, t.numel(), t.dtype, nb, t.device)
        self.args.append(info)
        self.by_name[name] = info
        return lo, host

    def finalize(self):
        spans = sorted(self._spans, key=lambda x: x[0])
        regions: list[_Region] = []
        for lo, hi, s in spans:
            if regions and lo <= regions[-1].hi and regions[-1].storage is s:
                regions[-1].hi = max(regions[-1].hi, hi)
            else:
                regions.append(_Region(lo, hi, s))
        self.regions = regions
        self._los = [r.lo for r in regions]
        if regions:
            self._los_t = torch.tensor(self._los, dtype=torch.int64)
            self._his_t = torch.tensor([r.hi for r in regions], dtype=torch.int64)

    def write_back(self):
        """Copy staged storages back to their device when the kernel wrote to them."""
        for s in self._storages.values():
            if s.device_flat is not None and s.dirty:
                _copy_back(s.device_flat, s.flat)

    # ------------------------------------------------------------------ lookup
    def _region_of(self, addr: int):
        i = bisect.bisect_right(self._los, addr) - 1
        if i >= 0:
            r = self.regions[i]
            if addr < r.hi:
                return r
        return None

    def resolve(self, ex, op, ptr: torch.Tensor, mask, isz: int, access: str):
        """Find the storages that active lanes address; raise on a lane outside every argument.

        ``ptr`` and ``mask`` (None = every lane) have the same shape.  Returns a
        list of ``(storage, part mask or None)``; empty when no lane is active.
        """
        if ptr.numel() == 0:
            return []
        if mask is None:
            lo_t, hi_t = torch.aminmax(ptr)
        else:
            lo_t = torch.where(mask, ptr, D.INT64_MAX).amin()
            hi_t = torch.where(mask, ptr, D.INT64_MIN).amax()
        lo, hi = int(lo_t), int(hi_t)
        if lo > hi:
            return []  # no active lane
        r = self._region_of(lo)
        if r is not None and hi + isz <= r.hi:
            return [(r.storage, mask)]
        return self._resolve_slow(ex, op, ptr, mask, isz, access)

    def _resolve_slow(self, ex, op, ptr, mask, isz, access):
        if not self.regions:
            bad = torch.ones_like(ptr, dtype=torch.bool) if mask is None else mask
            self._raise_oob(ex, op, ptr, bad, isz, access)
        flat = ptr.reshape(-1).contiguous()
        rid = torch.searchsorted(self._los_t, flat, right=True) - 1
        rc = rid.clamp(min=0)
        ok = (rid >= 0) & (flat + isz <= self._his_t[rc])
        ok = ok.view(ptr.shape)
        rid = rid.view(ptr.shape)
        bad = ~ok if mask is None else (mask & ~ok)
        if bool(bad.any()):
            self._raise_oob(ex, op, ptr, bad, isz, access)
        active_rids = torch.unique(rid if mask is None else rid[mask]).tolist()
        parts = []
        for i in active_rids:
            m = rid == i
            parts.append((self.regions[i].storage, m if mask is None else m & mask))
        return parts

    def _index(self, ex, op, s, ptr, mask, sdt, isz, access):
        """Element indices of ``ptr`` in storage ``s`` viewed as ``sdt`` (masked-off lanes: 0)."""
        flat, abase = s.view(sdt)
        if self.check_alignment and isz > 1:
            self._check_align(ex, op, ptr, mask, isz, access)
        off = ptr - abase
        shift = isz.bit_length() - 1
        idx = off >> shift if shift else off
        if mask is not None:
            idx = torch.where(mask, idx, 0)
        return flat, idx

    def _check_align(self, ex, op, ptr, mask, isz, access):
        mis = (ptr & (isz - 1)) != 0
        if mask is not None:
            mis = mis & mask
        if bool(mis.any()):
            lane = int(torch.nonzero(mis.reshape(-1))[0])
            pid, index = ex.lane_position(lane, ptr.shape)
            addr = int(ptr.reshape(-1)[lane])
            raise MisalignedAddressError(
                f"{access} of {isz}-byte elements at address {addr:#x}, which is not a multiple of {isz} "
                f"(block index {index})", kernel=ex.kernel_name, loc=op.loc, pid=pid)

    # ------------------------------------------------------------------ errors
    def describe_address(self, addr: int, isz: int, prefer: str | None):
        """(argument, element offset, text) relating ``addr`` to the nearest pointer argument."""
        info = self.by_name.get(prefer) if prefer else None
        if info is None:
            best = None
            for a in self.args:
                if a.address == 0:
                    continue
                d = addr - a.address
                key = (0, d) if d >= 0 else (1, -d)
                if best is None or key < best[0]:
                    best = (key, a)
            info = best[1] if best else None
        if info is None:
            return None, None, f"address {addr:#x} is not inside any argument tensor"
        if info.dtype is None:
            return info, None, f"'{info.name}' is a null pointer (None was passed)"
        d = addr - info.address
        esz = torch.empty((), dtype=info.dtype).element_size() if info.dtype is not None else isz
        if d % esz == 0:
            off = d // esz
            where = (f"element offset {off} from '{info.name}'" if off >= 0 else
                     f"element offset {off} from '{info.name}' (before its first element)")
        else:
            off = d / esz
            where = f"byte offset {d} from '{info.name}'"
        dt = str(info.dtype).replace("torch.", "")
        text = f"{where}, a {dt} tensor of {info.numel} element{'s' if info.numel != 1 else ''}"
        if isinstance(off, int) and off >= info.numel and info.numel:
            text += f" ({off - info.numel + 1} past the last one)"
        return info, off, text

    def _raise_oob(self, ex, op, ptr, bad, isz, access):
        lane = int(torch.nonzero(bad.reshape(-1))[0])
        pid, index = ex.lane_position(lane, ptr.shape)
        addr = int(ptr.reshape(-1)[lane])
        prefer = ex.provenance_of(op)
        info, off, text = self.describe_address(addr, isz, prefer)
        nbad = int(bad.sum())
        what = {"load": "load", "store": "store", "atomic": "atomic"}[access]
        detail = f"{what} at block index {index}: {text}"
        if nbad > 1:
            detail += f"; {nbad} lanes of this access are out of bounds"
        hint = ("mask the access (mask=offsets < n) or check the grid and the offsets"
                if access != "atomic" else "mask the atomic (mask=...) or check the offsets")
        raise OutOfBoundsError(detail, access=what, address=addr, index=index,
                               arg=info.name if info else None, offset=off,
                               numel=info.numel if info else None, kernel=ex.kernel_name, loc=op.loc, pid=pid,
                               hint=hint)

    # ------------------------------------------------------------------ access
    def load(self, ex, op, ptr, mask, dt):
        """Gather ``dt`` values at ``ptr`` (lanes where ``mask`` is False read garbage, never memory)."""
        isz = D.itemsize(dt)
        sdt = D.storage_dtype(dt)
        parts = self.resolve(ex, op, ptr, mask, isz, "load")
        if not parts:
            return None
        out = None
        for s, m in parts:
            flat, idx = self._index(ex, op, s, ptr, m, sdt, isz, "load")
            vals = _gather(flat, idx)
            out = vals if out is None else torch.where(m, vals, out)
        return D.from_storage(out, dt)

    def store(self, ex, op, ptr, val, mask, dt):
        isz = D.itemsize(dt)
        sdt = D.storage_dtype(dt)
        parts = self.resolve(ex, op, ptr, mask, isz, "store")
        if not parts:
            return
        sv = D.to_storage(val, dt)
        if sv.shape != ptr.shape:
            sv = sv.expand(ptr.shape)
        for s, m in parts:
            flat, idx = self._index(ex, op, s, ptr, m, sdt, isz, "store")
            if m is None:
                _scatter(flat, idx.reshape(-1), sv.reshape(-1))
            else:
                _scatter(flat, idx[m], sv[m])
            s.dirty = True
        self.epoch += 1

    def atomic(self, ex, op, kind, ptr, val, cmp, mask, dt, need_old):
        """Atomic read-modify-write (or compare-and-swap when ``kind == "cas"``) on every active lane.

        Lanes are applied one at a time per address in program order (program
        id, then row-major lane index), so contention gives the result of that
        serial order and the old values each lane would see.  ``ptr``, ``val``,
        ``cmp`` and ``mask`` have the full shape (programs x block).
        Returns the old values (masked-off lanes: 0) when ``need_old``.  The
        memory epoch advances only when some value actually changed, so a loop
        polling with atomics that change nothing is recognised as stuck.
        """
        isz = D.itemsize(dt)
        sdt = D.storage_dtype(dt)
        rd = D.rep_dtype(dt)
        old = torch.zeros(ptr.shape, dtype=rd) if need_old else None
        parts = self.resolve(ex, op, ptr, mask, isz, "atomic")
        if not parts:
            return old
        pf = ptr.reshape(-1)
        vf = val.reshape(-1)
        cf = cmp.reshape(-1) if cmp is not None else None
        of = old.view(-1) if need_old else None
        wrote = False
        for s, m in parts:
            flat, abase = s.view(sdt)
            if self.check_alignment and isz > 1:
                self._check_align(ex, op, ptr, m, isz, "atomic")
            shift = isz.bit_length() - 1
            if m is None:
                lanes = None
                keys = (pf - abase) >> shift
                v = vf
                c = cf
            else:
                lanes = torch.nonzero(m.reshape(-1)).squeeze(1)
                keys = (pf[lanes] - abase) >> shift
                v = vf[lanes]
                c = cf[lanes] if cf is not None else None
            if keys.numel() == 0:
                continue
            o, w = _apply_atomic(flat, keys, v, c, kind, dt, need_old)
            wrote = wrote or w
            if need_old:
                if lanes is None:
                    of.copy_(o)
                else:
                    of[lanes] = o
            if w:
                s.dirty = True
        if wrote:
            self.epoch += 1
        return old


def _combine(kind, dt):
    f = dt.is_floating()
    if kind == "add":
        if dt.name in D.NARROW_UNSIGNED_MASK:
            m = D.NARROW_UNSIGNED_MASK[dt.name]
            return lambda a, b: (a + b) & m
        return torch.add
    if kind in ("max", "min"):
        if f:
            return torch.fmax if kind == "max" else torch.fmin
        if dt.name == "uint64":
            if kind == "max":
                return lambda a, b: torch.where(D.ucmp_key(b) > D.ucmp_key(a), b, a)
            return lambda a, b: torch.where(D.ucmp_key(b) < D.ucmp_key(a), b, a)
        return torch.maximum if kind == "max" else torch.minimum
    if kind == "and":
        return torch.bitwise_and
    if kind == "or":
        return torch.bitwise_or
    if kind == "xor":
        return torch.bitwise_xor
    if kind == "xchg":
        return lambda a, b: b
    raise ValueError(f"unknown atomic kind {kind!r}")


def _segments(keys):
    """Stable sort of ``keys``: (order, sorted keys, rank of each sorted lane within its key)."""
    order = torch.argsort(keys, stable=True)
    sk = keys[order]
    n = sk.numel()
    newseg = torch.ones(n, dtype=torch.bool)
    if n > 1:
        newseg[1:] = sk[1:] != sk[:-1]
    pos = torch.arange(n)
    start = torch.cummax(torch.where(newseg, pos, 0), 0).values
    return order, sk, pos - start, start


def _apply_atomic(flat, keys, v, c, kind, dt, need_old):
    """Apply one atomic to the lanes ``keys``/``v`` in order; returns (old values or None, wrote)."""
    storage_ok = flat.dtype == D.rep_dtype(dt) or dt.name in D.NARROW_UNSIGNED_MASK
    sv = D.to_storage(v, dt)
    if kind == "add" and not need_old and storage_ok:
        flat.index_add_(0, keys, sv)
        return None, bool((v != 0).any())
    if kind in ("max", "min") and not need_old and dt.is_int_signed():
        before = flat.index_select(0, keys)
        flat.scatter_reduce_(0, keys, sv, "amax" if kind == "max" else "amin", include_self=True)
        return None, not torch.equal(before, flat.index_select(0, keys))
    if kind == "add" and dt.is_int():
        # ticket-style contention: exclusive prefix sums per address, exact with wraparound
        order, sk, _, start = _segments(keys)
        sv64 = v[order].to(torch.int64)
        excl = torch.cumsum(sv64, 0) - sv64
        excl = excl - excl[start]
        init = D.from_storage(flat.index_select(0, sk), dt).to(torch.int64)
        old = torch.empty_like(v)
        old[order] = D.wrap_int(init + excl, dt)
        flat.index_add_(0, keys, sv)
        return old, bool((v != 0).any())
    order, sk, rank, _ = _segments(keys)
    maxr = int(rank.max())
    if maxr == 0:
        rounds = [order]
    else:
        o2 = torch.argsort(rank, stable=True)
        counts = torch.bincount(rank).tolist()
        rounds = torch.split(order[o2], counts)
    old = torch.empty_like(v) if need_old else None
    wrote = False
    comb = None if kind == "cas" else _combine(kind, dt)
    for lanes in rounds:
        k = keys[lanes]
        cur = D.from_storage(flat.index_select(0, k), dt)
        if kind == "cas":
            hit = D.bits_of(cur, dt) == D.bits_of(c[lanes], dt)
            new = torch.where(hit, v[lanes], cur)
            wrote = wrote or bool(hit.any())
        else:
            new = comb(cur, v[lanes])
            wrote = wrote or not torch.equal(D.bits_of(new, dt), D.bits_of(cur, dt))
        _scatter(flat, k, D.to_storage(new, dt))
        if need_old:
            old[lanes] = cur
    return old, wrote
