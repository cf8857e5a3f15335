"""Global memory: vectorized loads and stores, atomics with memory order and scope.

A load/store's layout puts ``v`` consecutive elements in consecutive registers
of one thread; when the axis analysis proves the run contiguous, the address
``v * size``-aligned and the mask constant over it, the run becomes one
predicated ``ld.global.v4.b32`` (or v2/b32/b16/b8).  Masked-off lanes keep the
``other`` value that was packed into the destination registers beforehand.
"""

from __future__ import annotations

from newt.ir.types import is_block, scalar_of

from .ctypes import const_literal, ctype
from .emitter import BackendError, lowers
from .pipeline import emit_pipelined_load_value, emit_ring_row_value
from .plan import compact
from .tma import barrier_available, emit_tma_load, emit_tma_store, match_access, tma_enabled
from .vectors import from_bits, pack_words, to_bits, unpack_words, vector_width, vector_width_of  # noqa: F401
from .vectors import nbytes as _nbytes

# ---------------------------------------------------------------------------
# PTX helpers, generated once per variant
# ---------------------------------------------------------------------------


def _cache_suffix(cache: str, evict: str) -> str:
    s = ""
    if cache:
        s += cache if cache.startswith(".") else "." + cache
    if evict and evict != "evict_normal":
        s += ".L1::" + evict
    return s


def _word_plan(total: int):
    """(ptx type, constraint, c type, count) for moving ``total`` bytes."""
    if total >= 4:
        return ".b32", "r", "unsigned", total // 4
    if total == 2:
        return ".b16", "h", "unsigned short", 1
    return ".b8", "h", "unsigned short", 1


def ld_helper(em, total: int, cache: str, evict: str, volatile: bool) -> str:
    ptx_t, cons, ct, nw = _word_plan(total)
    if total == 1:
        ptx_t = ".u8"
    vec = f".v{nw}" if nw > 1 else ""
    mods = ".volatile" if volatile else ""
    suffix = "" if volatile else _cache_suffix(cache, evict)
    name = f"ld_global{'_volatile' if volatile else ''}{suffix.replace('.', '_').replace('::', '_')}_{total}B"
    outs = ", ".join(f"%{k}" for k in range(nw))
    regs = "{" + outs + "}" if nw > 1 else outs
    params = ", ".join(f"{ct}& w{k}" for k in range(nw))
    cons_out = ", ".join(f'"+{cons}"(w{k})' for k in range(nw))
    text = (f"__device__ __forceinline__ void {name}({params}, const void* p, bool pred) {{\n"
            f"  asm volatile(\"{{\\n .reg .pred p;\\n setp.ne.b32 p, %{nw + 1}, 0;\\n"
            f" @p ld{mods}.global{suffix}{vec}{ptx_t} {regs}, [%{nw}];\\n}}\"\n"
            f"               : {cons_out} : \"l\"(p), \"r\"((int)pred) : \"memory\");\n}}\n")
    return em.helper(name, text)


def st_helper(em, total: int, cache: str, evict: str) -> str:
    ptx_t, cons, ct, nw = _word_plan(total)
    if total == 1:
        ptx_t = ".u8"
    vec = f".v{nw}" if nw > 1 else ""
    suffix = _cache_suffix(cache, evict)
    name = f"st_global{suffix.replace('.', '_').replace('::', '_')}_{total}B"
    ins = ", ".join(f"%{k + 1}" for k in range(nw))
    regs = "{" + ins + "}" if nw > 1 else ins
    params = ", ".join(f"{ct} w{k}" for k in range(nw))
    cons_in = ", ".join(f'"{cons}"(w{k})' for k in range(nw))
    text = (f"__device__ __forceinline__ void {name}(void* p, {params}, bool pred) {{\n"
            f"  asm volatile(\"{{\\n .reg .pred p;\\n setp.ne.b32 p, %{nw + 1}, 0;\\n"
            f" @p st.global{suffix}{vec}{ptx_t} [%0], {regs};\\n}}\"\n"
            f"               :: \"l\"(p), {cons_in}, \"r\"((int)pred) : \"memory\");\n}}\n")
    return em.helper(name, text)


# ---------------------------------------------------------------------------
# load / store
# ---------------------------------------------------------------------------


@lowers("load")
def _load(em, op):
    ptr, mask, other = op.operand("ptr"), op.operand("mask"), op.operand("other")
    res = op.result
    t = scalar_of(res.type)
    cache, evict, vol = op.attr("cache"), op.attr("evict"), bool(op.attr("volatile"))
    if op in em.pipelined_loads:
        emit_pipelined_load_value(em, op)
        return
    if op in getattr(em.pipes, "rows", {}):  # a 1-D load read from its cp.async ring (NEWT_RING_1D=1)
        emit_ring_row_value(em, op)
        return
    if not is_block(res.type):
        total = _nbytes(t)
        fn = ld_helper(em, total, cache, evict, vol)
        _, _, wct, nw = _word_plan(total)
        init = pack_words([em.scalar(other) if other is not None else const_literal(0, t)], t, total)
        ws = [em.tmp("w") for _ in range(nw)]
        em.line(f"{ctype(t)} {em.vname(res)};")
        em.line("{")
        for w, i in zip(ws, init):
            em.line(f"  {wct} {w} = {i};")
        pred = em.scalar(mask) if mask is not None else "true"
        if vol:  # one thread reads; see below
            pred = "threadIdx.x == 0" + ("" if mask is None else f" && ({pred})")
        em.line(f"  {fn}({', '.join(ws)}, {em.scalar(ptr)}, {pred});")
        em.line(f"  {em.vname(res)} = {unpack_words(ws, t, 1)[0]};")
        em.line("}")
        if vol:
            # A volatile scalar may change between the reads of different threads, but a scalar must be
            # the same in every thread (control flow depends on it: `while cas(p, cur, cur + 1) != cur`
            # would diverge and deadlock at the next barrier), so thread 0's value is broadcast.
            broadcast_scalar(em, em.vname(res), ctype(t))
        em.scalars[res] = em.vname(res)
        return
    if tma_enabled(em.target) and barrier_available(em):  # a descriptor tile (tma.py)
        acc = match_access(em.fn, op, em.axis)
        if acc is not None:
            emit_tma_load(em, op, acc)
            return
    lay = compact(em.plan.access[op])
    emit_block_load(em, res, lay, ptr, mask, other, cache, evict, vol)


def emit_block_load(em, res, lay, ptr, mask, other, cache="", evict="", vol=False, name=None):
    t = scalar_of(res.type)
    eb = _nbytes(t)
    v = vector_width(em, lay, ptr, mask)
    total = v * eb
    fn = ld_helper(em, total, cache, evict, vol)
    _, _, wct, nw = _word_plan(total)
    name = name or em.declare_block(res, lay)
    p = em.get(ptr, lay)
    m = em.get(mask, lay) if mask is not None else None
    o = em.get(other, lay) if other is not None and is_block(other.type) else None
    os_ = em.scalar(other) if other is not None and not is_block(other.type) else None
    n = lay.nregs
    c = em.cur
    c.line("#pragma unroll")
    c.line(f"for (int i = 0; i < {n}; i += {v}) {{" if n > 1 else "{ const int i = 0;")
    b = c.sub(1)
    if o is not None:
        oth = [f"{o}[i + {j}]" for j in range(v)]
    else:
        lit = os_ if os_ is not None else const_literal(0, t)
        oth = [lit] * v
    init = pack_words(oth, t, total)
    ws = [em.tmp("w") for _ in range(nw)]
    for w, e in zip(ws, init):
        b.line(f"{wct} {w} = {e};")
    b.line(f"{fn}({', '.join(ws)}, {p}[i], {m + '[i]' if m else 'true'});")
    for j, e in enumerate(unpack_words(ws, t, v)):
        b.line(f"{name}[i + {j}] = {e};")
    c.line("}")
    return name


@lowers("store")
def _store(em, op):
    ptr, val, mask = op.operand("ptr"), op.operand("value"), op.operand("mask")
    t = scalar_of(val.type)
    cache, evict = op.attr("cache"), op.attr("evict")
    if not is_block(ptr.type):
        total = _nbytes(t)
        fn = st_helper(em, total, cache, evict)
        words = pack_words([em.scalar(val)], t, total)
        pred = "threadIdx.x == 0" + (f" && {em.scalar(mask)}" if mask is not None else "")
        em.line(f"{fn}({em.scalar(ptr)}, {', '.join(words)}, {pred});")
        return
    if tma_enabled(em.target):  # a tensor-descriptor tile: one bulk copy (tma.py)
        acc = match_access(em.fn, op, em.axis)
        if acc is not None:
            emit_tma_store(em, op, acc)
            return
    lay = compact(em.plan.access[op])
    emit_block_store(em, lay, ptr, val, mask, cache, evict)


def emit_block_store(em, lay, ptr, val, mask, cache="", evict=""):
    t = scalar_of(val.type)
    eb = _nbytes(t)
    v = vector_width(em, lay, ptr, mask)
    total = v * eb
    fn = st_helper(em, total, cache, evict)
    p = em.get(ptr, lay)
    x = em.get(val, lay) if is_block(val.type) else None
    xs = em.scalar(val) if x is None else None
    m = em.get(mask, lay) if mask is not None else None
    own = em.owner_pred(lay)
    n = lay.nregs
    c = em.cur
    c.line("#pragma unroll")
    c.line(f"for (int i = 0; i < {n}; i += {v}) {{" if n > 1 else "{ const int i = 0;")
    b = c.sub(1)
    elems = [f"{x}[i + {j}]" if x else xs for j in range(v)]
    words = pack_words(elems, t, total)
    pred = " && ".join(p_ for p_ in (f"{m}[i]" if m else None, f"({own})" if own else None) if p_) or "true"
    b.line(f"{fn}({p}[i], {', '.join(words)}, {pred});")
    c.line("}")


# ---------------------------------------------------------------------------
# atomics
# ---------------------------------------------------------------------------

_SEM = {"acq_rel": ".acq_rel", "acquire": ".acquire", "release": ".release", "relaxed": ".relaxed"}
_SCOPE = {"gpu": ".gpu", "cta": ".cta", "sys": ".sys"}


def _asm_cons(t) -> str:
    t = scalar_of(t)
    if t.name == "fp32":
        return "f"
    if t.name == "fp64":
        return "d"
    b = _nbytes(t)
    return {2: "h", 4: "r", 8: "l"}.get(b, "r")


def _atom_type(kind: str, t) -> str | None:
    n = t.name
    b = t.primitive_bitwidth
    if kind == "add":
        return {"int32": ".u32", "uint32": ".u32", "int64": ".u64", "uint64": ".u64", "fp32": ".f32",
                "fp64": ".f64", "fp16": ".noftz.f16"}.get(n)
    if kind in ("max", "min"):
        return {"int32": ".s32", "uint32": ".u32", "int64": ".s64", "uint64": ".u64"}.get(n)
    if kind in ("and", "or", "xor"):
        return {32: ".b32", 64: ".b64"}.get(b)
    if kind == "xchg":
        return {32: ".b32", 64: ".b64"}.get(b)
    return None


def atomic_helper(em, kind: str, t, sem: str, scope: str, need_result: bool) -> str:
    """``old = f(ptr, val)`` performing the atomic with the given order and scope."""
    s, sc = _SEM[sem], _SCOPE[scope]
    ct = ctype(t)
    op = {"xchg": "exch"}.get(kind, kind)
    ty: str | None
    if kind == "add" and t.name == "bf16" and em.target.bf16_atomic_add:
        ty = ".noftz.bf16"
    else:
        ty = _atom_type(kind, t)
    tag = f"{kind}_{t.name}{s.replace('.', '_')}{sc.replace('.', '_')}"
    if ty is not None:
        use_red = not need_result and s in (".relaxed", ".release") and kind != "xchg"  # PTX has no red.exch
        name = f"atomic_{'red_' if use_red else ''}{tag}"
        if t.name in ("fp16", "bf16"):
            if use_red:
                body = (f'  asm volatile("red{s}{sc}.global.{op}{ty} [%0], %1;" :: "l"(p), "h"(v.x) : "memory");\n'
                        f"  return {ct}{{0}};\n")
            else:
                body = (f"  unsigned short r;\n"
                        f'  asm volatile("atom{s}{sc}.global.{op}{ty} %0, [%1], %2;" : "=h"(r) : "l"(p), "h"(v.x) '
                        f': "memory");\n  return {ct}{{r}};\n')
        else:
            c = _asm_cons(t)
            if use_red:
                body = (f'  asm volatile("red{s}{sc}.global.{op}{ty} [%0], %1;" :: "l"(p), "{c}"(v) : "memory");\n'
                        f"  return ({ct})0;\n")
            else:
                body = (f"  {ct} r;\n"
                        f'  asm volatile("atom{s}{sc}.global.{op}{ty} %0, [%1], %2;" : "={c}"(r) : "l"(p), "{c}"(v) '
                        f': "memory");\n  return r;\n')
        text = f"__device__ __forceinline__ {ct} {name}({ct}* p, {ct} v) {{\n{body}}}\n"
        return em.helper(name, text)
    if kind in ("max", "min") and t.name in ("fp32", "fp64"):
        # IEEE order of non-negative floats is the signed-int order of their bits; of negative ones
        # the reversed unsigned order
        si, ui, it, ut, c = ((".s32", ".u32", "int", "unsigned", "r") if t.name == "fp32" else
                             (".s64", ".u64", "long long", "unsigned long long", "l"))
        tob = "__float_as_int" if t.name == "fp32" else "__double_as_longlong"
        fromb = "__int_as_float" if t.name == "fp32" else "__longlong_as_double"
        other = "min" if kind == "max" else "max"
        name = f"atomic_{tag}"
        text = (f"__device__ __forceinline__ {ct} {name}({ct}* p, {ct} v) {{\n"
                f"  {it} r;\n"
                f"  if (!(v < 0)) {{\n"
                f'    asm volatile("atom{s}{sc}.global.{kind}{si} %0, [%1], %2;" : "={c}"(r) : "l"(p), '
                f'"{c}"({tob}(v)) : "memory");\n'
                f"  }} else {{\n"
                f'    asm volatile("atom{s}{sc}.global.{other}{ui} %0, [%1], %2;" : "={c}"(r) : "l"(p), '
                f'"{c}"(({ut}){tob}(v)) : "memory");\n'
                f"  }}\n  return {fromb}(r);\n}}\n")
        return em.helper(name, text)
    if t.primitive_bitwidth == 16:
        # compare-and-swap loop on the 16-bit word
        name = f"atomic_cas_loop_{tag}"
        from .elementwise import scalar_expr
        f = {"add": "add", "max": "maximum", "min": "minimum"}.get(kind)
        if kind == "xchg":
            newv = "v"
        elif f is not None:
            newv = scalar_expr(f, ["old", "v"], [t, t], t, {})
        else:
            raise BackendError(f"atomic_{kind} on {t} is not supported")
        text = (f"__device__ __forceinline__ {ct} {name}({ct}* p, {ct} v) {{\n"
                f"  unsigned short cur, seen = *reinterpret_cast<volatile unsigned short*>(p);\n"
                f"  do {{\n"
                f"    cur = seen;\n"
                f"    {ct} old = bit_cast<{ct}>(cur);\n"
                f"    {ct} nv = {newv};\n"
                f'    asm volatile("atom{s}{sc}.global.cas.b16 %0, [%1], %2, %3;" : "=h"(seen) : "l"(p), '
                f'"h"(cur), "h"(bit_cast<unsigned short>(nv)) : "memory");\n'
                f"  }} while (seen != cur);\n"
                f"  return bit_cast<{ct}>(cur);\n}}\n")
        return em.helper(name, text)
    raise BackendError(f"atomic_{kind} on {t} is not supported by the CUDA backend")


def cas_helper(em, t, sem, scope) -> str:
    s, sc = _SEM[sem], _SCOPE[scope]
    ct = ctype(t)
    b = t.primitive_bitwidth
    ty = {16: ".b16", 32: ".b32", 64: ".b64"}[b]
    c = {16: "h", 32: "r", 64: "l"}[b]
    ut = {16: "unsigned short", 32: "unsigned", 64: "unsigned long long"}[b]
    name = f"atomic_cas_{t.name}{s.replace('.', '_')}{sc.replace('.', '_')}"
    text = (f"__device__ __forceinline__ {ct} {name}({ct}* p, {ct} cmp, {ct} v) {{\n"
            f"  {ut} r;\n"
            f'  asm volatile("atom{s}{sc}.global.cas{ty} %0, [%1], %2, %3;" : "={c}"(r) : "l"(p), '
            f'"{c}"(bit_cast<{ut}>(cmp)), "{c}"(bit_cast<{ut}>(v)) : "memory");\n'
            f"  return bit_cast<{ct}>(r);\n}}\n")
    return em.helper(name, text)


def _has_uses(em, v) -> bool:
    return v in em.used_values


def broadcast_scalar(em, name: str, ct: str):
    """Give every thread thread 0's value of the scalar variable ``name`` (through shared memory)."""
    off = em.smem_scratch(16, em.cur)
    em.line("__syncthreads();")  # nobody still reads the slot from an earlier trip through a loop
    em.line(f"if (threadIdx.x == 0) *reinterpret_cast<{ct}*>(smem + {off}) = {name};")
    em.line("__syncthreads();")
    em.line(f"{name} = *reinterpret_cast<{ct}*>(smem + {off});")


@lowers("atomic_rmw", "atomic_cas")
def _atomic(em, op):
    res = op.result
    t = scalar_of(res.type)
    sem, scope = op.attr("sem"), op.attr("scope")
    need = _has_uses(em, res)
    if op.name == "atomic_rmw":
        ptr, val, mask = op.operand("ptr"), op.operand("val"), op.operand("mask")
        fn = atomic_helper(em, op.attr("kind"), t, sem, scope, need)
        args_v = [val]
    else:
        ptr, cmp, val, mask = op.operand("ptr"), op.operand("cmp"), op.operand("val"), op.operand("mask")
        fn = cas_helper(em, t, sem, scope)
        args_v = [cmp, val]
    ct = ctype(t)
    if not is_block(res.type):
        name = em.vname(res)
        em.line(f"{ct} {name} = {const_literal(0, t)};")
        m = f" && {em.scalar(mask)}" if mask is not None else ""
        call = f"{fn}({em.scalar(ptr)}, {', '.join(em.scalar(a) for a in args_v)})"
        em.line(f"if (threadIdx.x == 0{m}) {name} = {call};")
        if need:  # every thread sees the old value
            broadcast_scalar(em, name, ct)
        em.scalars[res] = name
        return
    lay = compact(em.plan.access[op])
    p = em.get(ptr, lay)
    vs = [em.get(a, lay) + "[i]" if is_block(a.type) else em.scalar(a) for a in args_v]
    m = em.get(mask, lay) if mask is not None else None
    own = em.owner_pred(lay)
    dup = own is not None and need
    name = em.tmp(em.vname(res) + "_own") if dup else em.vname(res)
    em.line(f"{ct} {name}[{lay.nregs}];")
    pred = " && ".join(x for x in (f"{m}[i]" if m else None, f"({own})" if own else None) if x)
    call = f"{fn}({p}[i], {', '.join(vs)})"
    if pred:
        em.for_regs(lay.nregs, f"{name}[i] = ({pred}) ? {call} : {const_literal(0, t)};")
    else:
        em.for_regs(lay.nregs, f"{name}[i] = {call};")
    if dup:
        final = em.vname(res)
        em.smem_convert(name, lay, final, lay, res.type, em.cur, what=final, owner_only=True)
        name = final
    em.blocks[(res, lay)] = name
    em.used_names.add(name)
