"""Reductions and scans: in registers, then across lanes with shuffles, then across warps
through shared memory.  The layout says which hardware bits run along the reduced axis."""

from __future__ import annotations

from newt.ir.ops import is_commutative_combine
from newt.ir.types import is_block, scalar_of, shape_of

from .ctypes import const_literal, ctype, from_compute, is_lowp_float, to_compute
from .elementwise import scalar_expr
from .emitter import BackendError, Chunk, lowers
from .layout import Layout, bit_index_expr
from .plan import compact


def _work_type(t, combine):
    t = scalar_of(t)
    if combine in ("add", "max", "min", "mul", "argmax", "argmin") and is_lowp_float(t):
        return "float"
    return ctype(t)


def combine_helper(em, op, in_types) -> tuple[str, list[str]]:
    """A device function ``comb(a..., b..., &r...)`` for the op's combine; returns (name, work types)."""
    kind = op.attrs["combine"]
    n = len(in_types)
    em.counter += 1
    name = f"combine{em.counter}_{em.fn.name}"
    if kind == "region":
        region = op.regions[0]
        wts = [ctype(a.type) for a in region.args[:n]]
        params = ", ".join([f"{w} a{k}" for k, w in enumerate(wts)] + [f"{w} b{k}" for k, w in enumerate(wts)] +
                           [f"{w}& r{k}" for k, w in enumerate(wts)])
        chunk = Chunk(1)
        saved = (em.cur, em.last_line)
        for k, a in enumerate(region.args):
            em.scalars[a] = f"a{k}" if k < n else f"b{k - n}"
        em.yield_stack.append([(f"r{k}", None, region.args[k].type) for k in range(n)])
        pending = list(em.reduce_pending)
        try:
            em.emit_region(region, chunk)
        finally:
            em.yield_stack.pop()
            em.cur, em.last_line = saved
            em.reduce_pending = pending  # the helper is a separate function: the kernel's state is unchanged
        lines: list[str] = []
        chunk.render(lines, [])
        text = f"__device__ __forceinline__ void {name}({params}) {{\n" + "\n".join(lines) + "\n}\n"
        em.helper(name, text)
        return name, wts
    t = scalar_of(in_types[0])
    w = _work_type(t, kind)
    if kind in ("argmax", "argmin"):
        it = ctype(in_types[1])
        tie = bool(op.attr("tie_break_left"))
        cmp = ">" if kind == "argmax" else "<"
        tie_e = "(a0 == b0 && a1 < b1)" if tie else "false"
        body = (f"  const bool take_a = (a0 {cmp} b0) || {tie_e};\n"
                f"  r0 = take_a ? a0 : b0;\n  r1 = take_a ? a1 : b1;\n")
        text = (f"__device__ __forceinline__ void {name}({w} a0, {it} a1, {w} b0, {it} b1, {w}& r0, {it}& r1) {{\n"
                f"{body}}}\n")
        em.helper(name, text)
        return name, [w, it]
    wt = _dtype_for_work(t, w)
    ir_name = {"add": "add", "mul": "mul", "max": "maximum", "min": "minimum", "xor": "xor"}[kind]
    e = scalar_expr(ir_name, ["a0", "b0"], [wt, wt], wt, {})
    text = f"__device__ __forceinline__ void {name}({w} a0, {w} b0, {w}& r0) {{ r0 = {e}; }}\n"
    em.helper(name, text)
    return name, [w]


def _dtype_for_work(t, w):
    from newt.language import core as lc
    return lc.float32 if w == "float" and t.name != "fp32" else t


def _in_layout(em, v):
    lay = em.layout_of(v)
    if lay is None:
        lay = em.plan.access.get(("input", v))
    return compact(lay)


def _positions(lay: Layout, axis: int):
    """(axis register positions sorted by coordinate bit, other register positions,
    axis lane bits, axis warp bits) -- each sorted by the coordinate bit they carry."""
    def on_axis(b):
        return b != 0 and lay.dim_of_bit(b)[0] == axis
    ar = sorted((j for j, b in enumerate(lay.reg) if on_axis(b)), key=lambda j: lay.reg[j])
    orr = [j for j, b in enumerate(lay.reg) if not on_axis(b)]
    al = sorted((k for k, b in enumerate(lay.lane) if on_axis(b)), key=lambda k: lay.lane[k])
    aw = sorted((k for k, b in enumerate(lay.warp) if on_axis(b)), key=lambda k: lay.warp[k])
    return ar, orr, al, aw


def _call(fn, a, b, r):
    return f"{fn}({', '.join(a)}, {', '.join(b)}, {', '.join(r)});"


@lowers("reduce")
def _reduce(em, op):
    xs = op.operands
    axis = op.attrs["axis"]
    lay = _in_layout(em, xs[0])
    srcs = [em.get(x, lay) for x in xs]
    fn, wts = combine_helper(em, op, [x.type for x in xs])
    n = len(xs)
    ar, orr, al, aw = _positions(lay, axis)
    nout = 1 << len(orr)
    nk = 1 << len(ar)
    out_lay = compact(lay.drop_dims([axis])) if lay.rank > 1 else None
    kind = op.attrs["combine"]

    def conv_in(k, e):
        t = xs[k].type
        return to_compute(e, t) if wts[k] == "float" and is_lowp_float(t) else e

    accs = [em.tmp("acc") for _ in range(n)]
    c = em.cur
    c.line(f"// reduce along axis {axis}: {nk} per thread, {1 << len(al)} lanes, {1 << len(aw)} warps")
    for a, w in zip(accs, wts):
        c.line(f"{w} {a}[{nout}];")
    base = bit_index_expr("r", [1 << j for j in orr]) if orr else "0"
    dep = [1 << j for j in ar]
    c.line("#pragma unroll")
    c.line(f"for (int r = 0; r < {nout}; ++r) {{")
    b = c.sub(1)
    b.line(f"const int b = {base};")
    for k in range(n):
        b.line(f"{wts[k]} x{k} = {conv_in(k, f'{srcs[k]}[b]')};")
    if nk > 1:
        b.line("#pragma unroll")
        b.line(f"for (int k = 1; k < {nk}; ++k) {{")
        kk = b.sub(1)
        kk.line(f"const int j = b | {bit_index_expr('k', dep)};")
        ys = []
        for k in range(n):
            y = f"y{k}"
            kk.line(f"const {wts[k]} {y} = {conv_in(k, f'{srcs[k]}[j]')};")
            ys.append(y)
        kk.line(_call(fn, [f"x{k}" for k in range(n)], ys, [f"x{k}" for k in range(n)]))
        b.line("}")
    for k in range(n):
        b.line(f"{accs[k]}[r] = x{k};")
    c.line("}")
    if al:
        c.line("#pragma unroll")
        c.line(f"for (int r = 0; r < {nout}; ++r) {{")
        _butterfly(c.sub(1), fn, [f"{a}[r]" for a in accs], wts, kind, al, "o")
        c.line("}")
    if aw:
        nwa = 1 << len(aw)
        nout_el = out_lay.numel if out_lay is not None else 1
        wpos = bit_index_expr("warp_id", [(1 << aw.index(k)) if k in aw else 0 for k in range(len(lay.warp))])
        offs = []
        size = 0
        for w in wts:
            offs.append(size)
            size += nwa * nout_el * _wbytes(w)
            size = (size + 15) // 16 * 16
        off, lead = em.reduce_buffer(size)
        fo = em.flat_expr(out_lay, "r") if out_lay is not None else "0"
        lane_axis_mask = sum(1 << k for k in al)
        c.line("{")
        b = c.sub(1)
        ptrs = []
        for k, w in enumerate(wts):
            p = em.tmp("red")
            b.line(f"{w}* {p} = reinterpret_cast<{w}*>(smem + {off} + {offs[k]});")
            ptrs.append(p)
        if lead:
            b.line("__syncthreads();")
        else:
            b.line("// (no barrier first: nothing can still be reading this buffer)")
        b.line(f"const int wp = {wpos};")
        cond = f"if ((lane_id & {lane_axis_mask}) == 0) " if lane_axis_mask else ""
        b.line("#pragma unroll")
        b.line(f"for (int r = 0; r < {nout}; ++r) {cond}{{ const int f = {fo}; "
               + " ".join(f"{p}[wp * {nout_el} + f] = {a}[r];" for p, a in zip(ptrs, accs)) + " }")
        b.line("__syncthreads();")
        if nout == 1 and nout_el == 1 and nwa >= 4:
            # One value per warp: lane l of every warp reads warp (l mod nwa)'s value and a butterfly over
            # log2(nwa) lanes combines them (one shared load and a few shuffles instead of nwa loads, and
            # fewer registers live; every warp ends with the total, so no third barrier is needed).
            for p, a in zip(ptrs, accs):
                b.line(f"{a}[0] = {p}[lane_id & {nwa - 1}];")
            _butterfly(b, fn, [f"{a}[0]" for a in accs], wts, kind, range(len(aw)), "v")
            c.line("}")
            _reduce_results(em, op, accs, wts, out_lay)
            return
        b.line("#pragma unroll")
        b.line(f"for (int r = 0; r < {nout}; ++r) {{")
        bb = b.sub(1)
        bb.line(f"const int f = {fo};")
        for p, a in zip(ptrs, accs):
            bb.line(f"{a}[r] = {p}[f];")
        bb.line("#pragma unroll")
        bb.line(f"for (int q = 1; q < {nwa}; ++q) {{")
        q = bb.sub(1)
        for k, p in enumerate(ptrs):
            q.line(f"const {wts[k]} z{k} = {p}[q * {nout_el} + f];")
        q.line(_call(fn, [f"{a}[r]" for a in accs], [f"z{k}" for k in range(n)], [f"{a}[r]" for a in accs]))
        bb.line("}")
        b.line("}")
        c.line("}")
    _reduce_results(em, op, accs, wts, out_lay)


def _butterfly(b, fn, vals, wts, kind, bits, tag):
    """``shfl.xor`` steps over the lane ``bits``, combining into ``vals`` (C lvalues, one per operand).
    Commutative combines take the two values in either order (same bits, no selects); the others put
    the lower lane's value first (region combines, argmax ties)."""
    n = len(vals)
    for bit in bits:
        m = 1 << bit
        for k in range(n):
            b.line(f"const {wts[k]} {tag}{k}_{bit} = shfl_xor({vals[k]}, {m});")
        if is_commutative_combine(kind):
            lo = list(vals)
            hi = [f"{tag}{k}_{bit}" for k in range(n)]
        else:
            lo = [f"((lane_id & {m}) ? {tag}{k}_{bit} : {vals[k]})" for k in range(n)]
            hi = [f"((lane_id & {m}) ? {vals[k]} : {tag}{k}_{bit})" for k in range(n)]
        b.line(_call(fn, lo, hi, list(vals)))


def _reduce_results(em, op, accs, wts, out_lay):
    for k, res in enumerate(op.results):
        t = res.type
        fin = (lambda e, t=t, k=k: from_compute(e, t) if wts[k] == "float" and is_lowp_float(t) else e)
        if not is_block(t):
            em.bind_scalar(res, fin(f"{accs[k]}[0]"))
        else:
            olay = compact(em.layout_of(res))
            if olay != out_lay:
                raise BackendError(f"internal: reduce result layout {olay} != {out_lay}", op)
            name = em.declare_block(res, olay)
            em.for_regs(olay.nregs, f"{name}[i] = {fin(f'{accs[k]}[i]')};")


def _wbytes(w: str) -> int:
    return {"float": 4, "double": 8, "int": 4, "unsigned int": 4, "long long": 8, "unsigned long long": 8,
            "short": 2, "unsigned short": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "half_t": 2,
            "bf16_t": 2, "fp8e4_t": 1, "fp8e5_t": 1, "fp8e4b15_t": 1, "fp8e4b8_t": 1,
            "fp8e5b16_t": 1}.get(w, 8)


@lowers("scan")
def _scan(em, op):
    xs = op.operands
    axis = op.attrs["axis"]
    rev = bool(op.attr("reverse"))
    lay = compact(em.layout_of(op.results[0]))
    srcs = [em.get(x, lay) for x in xs]
    fn, wts = combine_helper(em, op, [x.type for x in xs])
    n = len(xs)
    ar, orr, al, aw = _positions(lay, axis)
    nout = 1 << len(orr)
    nk = 1 << len(ar)
    nl = 1 << len(al)
    nwa = 1 << len(aw)

    def conv_in(k, e):
        t = xs[k].type
        return to_compute(e, t) if wts[k] == "float" and is_lowp_float(t) else e

    c = em.cur
    c.line(f"// scan along axis {axis}{' (reverse)' if rev else ''}: {nk} per thread, {nl} lanes, {nwa} warps")
    work = [em.tmp("scan") for _ in range(n)]
    for w, wt, s in zip(work, wts, srcs):
        c.line(f"{wt} {w}[{lay.nregs}];")
        em.for_regs(lay.nregs, f"{w}[i] = {conv_in(work.index(w), f'{s}[i]')};", c)
    base = bit_index_expr("r", [1 << j for j in orr]) if orr else "0"
    dep = [1 << j for j in ar]
    kexpr = f"({nk - 1} - k)" if rev else "k"
    kprev = f"({nk} - k)" if rev else "(k - 1)"
    # 1. in registers
    if nk > 1:
        c.line("#pragma unroll")
        c.line(f"for (int r = 0; r < {nout}; ++r) {{")
        b = c.sub(1)
        b.line(f"const int b = {base};")
        b.line("#pragma unroll")
        b.line(f"for (int k = 1; k < {nk}; ++k) {{")
        kk = b.sub(1)
        kk.line(f"const int j = b | {bit_index_expr(kexpr, dep)};")
        kk.line(f"const int jp = b | {bit_index_expr(kprev, dep)};")
        kk.line(_call(fn, [f"{w}[jp]" for w in work], [f"{w}[j]" for w in work], [f"{w}[j]" for w in work]))
        b.line("}")
        c.line("}")
    if nl == 1 and nwa == 1:
        _scan_results(em, op, work, wts, lay)
        return
    last_k = 0 if rev else nk - 1
    last = bit_index_expr(str(last_k), dep) if dep else "0"
    # 2. lanes: Hillis-Steele over the thread totals
    lane_mask = sum(1 << k for k in al)
    pos = bit_index_expr("lane_id", [(1 << al.index(k)) if k in al else 0 for k in range(5)])
    c.line("{")
    b = c.sub(1)
    b.line(f"const int lp = {f'{nl - 1} - ' if rev else ''}({pos});  // this lane's position along the axis")
    dep_lane = [1 << k for k in al]

    def lane_of(p):
        q = f"({nl - 1} - ({p}))" if rev else f"({p})"
        return f"((lane_id & ~{lane_mask}) | {bit_index_expr(q, dep_lane)})"

    pre = [em.tmp("pre") for _ in range(n)]
    has = em.tmp("has")
    for p_, wt in zip(pre, wts):
        b.line(f"{wt} {p_}[{nout}];")
    b.line(f"bool {has} = false;")
    b.line("#pragma unroll")
    b.line(f"for (int r = 0; r < {nout}; ++r) {{")
    rb = b.sub(1)
    rb.line(f"const int b = {base};")
    tots = [f"t{k}" for k in range(n)]
    for k in range(n):
        rb.line(f"{wts[k]} t{k} = {work[k]}[b | {last}];")
    if nl > 1:
        d = 1
        while d < nl:
            for k in range(n):
                rb.line(f"const {wts[k]} u{k}_{d} = shfl_idx(t{k}, {lane_of(f'lp - {d}')});")
            rb.line(f"if (lp >= {d}) " + _call(fn, [f"u{k}_{d}" for k in range(n)], tots, tots))
            d *= 2
        for k in range(n):
            rb.line(f"const {wts[k]} e{k} = shfl_idx(t{k}, {lane_of('lp - 1')});")
    if nwa > 1:
        rb.line(f"const int f = {em.flat_expr(compact(lay.drop_dims([axis])), 'r')};")
        offs, size = [], 0
        nout_el = compact(lay.drop_dims([axis])).numel
        for w in wts:
            offs.append(size)
            size += nwa * nout_el * _wbytes(w)
            size = (size + 15) // 16 * 16
        off = em.smem_scratch(size, c)
        wpos = bit_index_expr("warp_id", [(1 << aw.index(k)) if k in aw else 0 for k in range(len(lay.warp))])
        rb.line(f"const int wp = {f'{nwa - 1} - ' if rev else ''}({wpos});")
        ptrs = []
        for k, w in enumerate(wts):
            p_ = f"sp{k}"
            rb.line(f"{w}* {p_} = reinterpret_cast<{w}*>(smem + {off} + {offs[k]});")
            ptrs.append(p_)
        rb.line("__syncthreads();")
        rb.line(f"if (lp == {nl - 1}) {{ " + " ".join(f"{p_}[wp * {nout_el} + f] = t{k};"
                                                     for k, p_ in enumerate(ptrs)) + " }")
        rb.line("__syncthreads();")
        ws_ = [f"wsum{k}" for k in range(n)]
        for k in range(n):
            rb.line(f"{wts[k]} wsum{k} = {ptrs[k]}[f];")
        rb.line("for (int q = 1; q < wp; ++q) { " +
                " ".join(f"const {wts[k]} z{k} = {ptrs[k]}[q * {nout_el} + f];" for k in range(n)) + " " +
                _call(fn, ws_, [f"z{k}" for k in range(n)], ws_) + " }")
        if nl > 1:
            rb.line("if (wp > 0 && lp > 0) {")
            rb.line("  " + _call(fn, ws_, [f"e{k}" for k in range(n)], [f"{pre[k]}[r]" for k in range(n)]))
            rb.line(f"  {has} = true;")
            rb.line("} else if (wp > 0) {")
            rb.line("  " + " ".join(f"{pre[k]}[r] = wsum{k};" for k in range(n)) + f" {has} = true;")
            rb.line("} else if (lp > 0) {")
            rb.line("  " + " ".join(f"{pre[k]}[r] = e{k};" for k in range(n)) + f" {has} = true;")
            rb.line("}")
        else:
            rb.line("if (wp > 0) { " + " ".join(f"{pre[k]}[r] = wsum{k};" for k in range(n)) + f" {has} = true; }}")
    else:
        rb.line("if (lp > 0) { " + " ".join(f"{pre[k]}[r] = e{k};" for k in range(n)) + f" {has} = true; }}")
    b.line("}")
    # 3. add the prefix to every element
    b.line(f"if ({has}) {{")
    hb = b.sub(1)
    hb.line("#pragma unroll")
    hb.line(f"for (int r = 0; r < {nout}; ++r) {{")
    h2 = hb.sub(1)
    h2.line(f"const int b = {base};")
    h2.line("#pragma unroll")
    h2.line(f"for (int k = 0; k < {nk}; ++k) {{")
    h3 = h2.sub(1)
    h3.line(f"const int j = b | {bit_index_expr('k', dep) if dep else '0'};")
    h3.line(_call(fn, [f"{p_}[r]" for p_ in pre], [f"{w}[j]" for w in work], [f"{w}[j]" for w in work]))
    h2.line("}")
    hb.line("}")
    b.line("}")
    c.line("}")
    _scan_results(em, op, work, wts, lay)


def _scan_results(em, op, work, wts, lay):
    for k, res in enumerate(op.results):
        t = res.type
        name = em.declare_block(res, lay)
        e = f"{work[k]}[i]"
        if wts[k] == "float" and is_lowp_float(t):
            e = from_compute(e, t)
        em.for_regs(lay.nregs, f"{name}[i] = {e};")


del const_literal, shape_of
