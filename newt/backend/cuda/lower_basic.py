"""Lowerings of indices, elementwise ops, shapes, control flow and debugging ops."""

from __future__ import annotations

from newt.ir.types import is_block, numel, scalar_of, shape_of

from .ctypes import const_literal, ctype
from .elementwise import ELEMENTWISE, scalar_expr
from .emitter import BackendError, lowers
from .layout import Layout, bit_index_expr, blocked_for
from .loops import assign as _assign
from .loops import bind_var as _bind_var
from .loops import declare_var as _declare_var
from .loops import loop_condition, loop_header
from .pipeline import emit_pipelined_for
from .plan import compact

_AXIS = "xyz"


@lowers("program_id")
def _program_id(em, op):
    em.bind_scalar(op.result, f"(int)blockIdx.{_AXIS[op.attrs['axis']]}")


@lowers("num_programs")
def _num_programs(em, op):
    em.bind_scalar(op.result, f"(int)gridDim.{_AXIS[op.attrs['axis']]}")


@lowers("constant")
def _constant(em, op):
    v = op.result
    if not is_block(v.type):
        em.bind_scalar(v, const_literal(op.attrs["value"], v.type), declare=False)
        return
    lay = compact(em.layout_of(v))
    name = em.declare_block(v, lay)
    em.for_regs(lay.nregs, f"{name}[i] = {const_literal(op.attrs['value'], scalar_of(v.type))};")


def _elementwise(em, op):
    res = op.result
    args_t = [o.type for o in op.operands]
    if not is_block(res.type):
        args = [em.scalar(o) for o in op.operands]
        em.bind_scalar(res, scalar_expr(op.name, args, args_t, res.type, op.attrs))
        return
    name, lay = em.result_block(res)
    ri = em.const_reg_index(res, lay)
    args = [em.operand(o, lay.with_shape(shape_of(o.type)) if is_block(o.type) else None, ri)
            for o in op.operands]
    em.for_regs(lay.nregs, f"{name}[i] = {scalar_expr(op.name, args, args_t, res.type, op.attrs)};")


lowers(*sorted(ELEMENTWISE))(_elementwise)


@lowers("splat", "arange", "expand_dims", "broadcast", "reshape", "permute", "hint")
def _view_scalar(em, op):
    # blocks of these are polymorphic (materialized on use); only scalar forms reach here
    res = op.result
    if op.name == "hint" and not is_block(res.type):
        em.bind_scalar(res, em.scalar(op.operands[0]), declare=False)
        return
    src = op.operands[0] if op.operands else None
    if op.name in ("reshape", "permute") and not is_block(res.type) and src is not None and is_block(src.type) \
            and numel(shape_of(src.type)) == 1:
        # a one-element block read as a scalar (``reshape(x, ())``; deuteron's ``squeeze`` of a [1] block, as in
        # Helion's cross_entropy at one row a program): every thread holds its one element
        lay = em.layout_of(src) or blocked_for(shape_of(src.type), em.nw)
        em.bind_scalar(res, f"{em.get(src, lay)}[0]")
        return
    raise BackendError(f"internal: {op.name} of {res!r} should have been materialized on use", op)


@lowers("join")
def _join(em, op):
    res = op.result
    name, lay = em.result_block(res)
    assert lay.reg and lay.reg[-1] == 1, lay
    base = Layout(lay.shape[:-1], tuple(b >> 1 for b in lay.reg[:-1]), tuple(b >> 1 for b in lay.lane),
                  tuple(b >> 1 for b in lay.warp), lay.kind)
    a = em.get(op.operands[0], base)
    b = em.get(op.operands[1], base)
    n = base.nregs
    em.for_regs(n, f"{{ {name}[i] = {a}[i]; {name}[{n} + i] = {b}[i]; }}")


@lowers("split")
def _split(em, op):
    lay = compact(em.plan.access[op])
    x = em.get(op.operands[0], lay)
    j = list(lay.reg).index(1)
    out_lay = compact(em.layout_of(op.results[0]))
    mapping = [1 << (k if k < j else k + 1) for k in range(len(lay.reg) - 1)]
    idx = bit_index_expr("i", mapping)
    for r, sel in zip(op.results, (0, 1 << j)):
        name = em.declare_block(r, out_lay)
        em.for_regs(out_lay.nregs, f"{name}[i] = {x}[{idx}{' | ' + str(sel) if sel else ''}];")


@lowers("cat")
def _cat(em, op):
    res = op.result
    name, lay = em.result_block(res)
    base = Layout(op.operands[0].type.shape, lay.reg[:-1], lay.lane, lay.warp, lay.kind)
    a = em.get(op.operands[0], base)
    b = em.get(op.operands[1], base)
    n = base.nregs
    em.for_regs(n, f"{{ {name}[i] = {a}[i]; {name}[{n} + i] = {b}[i]; }}")


# ---------------------------------------------------------------------------
# control flow
# ---------------------------------------------------------------------------


class _Targets:
    """Where a region's terminator writes its values."""

    def __init__(self, items):
        self.items = items  # list of (value-like type, name, layout or None)


@lowers("scf.for")
def _for(em, op):
    if op in em.pipelines:
        emit_pipelined_for(em, op, em.pipelines[op])
        return
    if getattr(em.pipes, "ws_outer", None) is op:  # the producer/consumer split goes before it (warpspec.py)
        from .warpspec import emit_ws_split
        emit_ws_split(em, op)
    emit_for(em, op)


def emit_for(em, op):
    body = op.regions[0]
    lb, ub, step = op.operands[:3]
    offsets = any(d.name == "wgmma" for d in em.plan.dot.values())
    targets = loop_header(em, op, offsets=offsets)
    ivv = body.args[0]
    iv = em.vname(ivv)
    ivt = ctype(ivv.type)
    unroll = op.attrs.get("loop_unroll_factor")
    if unroll:
        em.line(f"#pragma unroll {int(unroll)}")
    em.line(f"for ({ivt} {iv} = {em.scalar(lb)}; {loop_condition(em, op, iv)}; {iv} += {em.scalar(step)}) {{")
    inner = em.cur.sub(1)
    em.scalars[ivv] = iv
    for a, (name, lay, _) in zip(body.args[1:], targets):
        _bind_var(em, a, name, lay, inner)
    _emit_yielding_to(em, body, inner.sub(0), targets)
    em.line("}")
    for r, (name, lay, _) in zip(op.results, targets):
        _bind_var(em, r, name, lay, em.cur)


def _emit_yielding_to(em, region, cursor, targets):
    """Emit ``region`` at ``cursor``; its ``yield``/``condition`` assign to ``targets``."""
    em.yield_stack.append(targets)
    try:
        em.emit_region(region, cursor)
    finally:
        em.yield_stack.pop()


@lowers("yield")
def _yield(em, op):
    targets = em.yield_stack[-1]
    if targets is None:
        return
    _assign(em, targets, op.operands, em.cur)


@lowers("condition")
def _condition(em, op):
    targets = em.yield_stack[-1]
    cond = em.scalar(op.operands[0])
    em.cond_value = cond
    _assign(em, targets, op.operands[1:], em.cur)


@lowers("return")
def _return(em, op):
    return


@lowers("scf.if")
def _if(em, op):
    targets = []
    for r in op.results:
        name, lay = _declare_var(em, r, em.cur)
        targets.append((name, lay, r.type))
    em.line(f"if ({em.scalar(op.operands[0])}) {{")
    _emit_yielding_to(em, op.regions[0], em.cur.sub(1), targets)
    if len(op.regions) > 1 and op.regions[1].ops:
        em.line("} else {")
        _emit_yielding_to(em, op.regions[1], em.cur.sub(1), targets)
    em.line("}")
    for r, (name, lay, _) in zip(op.results, targets):
        _bind_var(em, r, name, lay, em.cur)


@lowers("scf.while")
def _while(em, op):
    before, after = op.regions
    args = []
    for a, v in zip(before.args, op.operands):
        name, lay = _declare_var(em, a, em.cur, init=v)
        args.append((name, lay, a.type))
    results = []
    for r in op.results:
        name, lay = _declare_var(em, r, em.cur)
        results.append((name, lay, r.type))
    unroll = op.attrs.get("loop_unroll_factor")
    if unroll:  # a for loop with break/return, lowered as a while loop
        em.line(f"#pragma unroll {int(unroll)}")
    em.line("while (true) {")
    body = em.cur.sub(1)
    for a, (name, lay, _) in zip(before.args, args):
        _bind_var(em, a, name, lay, body)
    _emit_yielding_to(em, before, body.sub(0), results)
    cond = em.cond_value
    body.line(f"if (!({cond})) break;")
    # the after region's arguments are the condition's values (now in `results`)
    for a, (name, lay, _) in zip(after.args, results):
        _bind_var(em, a, name, lay, body)
    _emit_yielding_to(em, after, body.sub(0), args)
    em.line("}")
    for r, (name, lay, _) in zip(op.results, results):
        _bind_var(em, r, name, lay, em.cur)


# ---------------------------------------------------------------------------
# debugging and hints
# ---------------------------------------------------------------------------


@lowers("barrier")
def _barrier(em, op):
    em.line("__syncthreads();")


@lowers("assume")
def _assume(em, op):
    em.line(f"__builtin_assume({em.scalar(op.operands[0])});")


def _fmt_of(t, hexa: bool):
    t = scalar_of(t)
    if t.is_ptr():
        return "%p", lambda e: f"(const void*)({e})"
    if t.is_floating():
        if hexa:
            bits = t.primitive_bitwidth
            if bits == 64:
                return "0x%llx", lambda e: f"__double_as_longlong({e})"
            from .ctypes import to_compute
            return "0x%x", lambda e: f"__float_as_uint({to_compute(e, t) if t.name != 'fp32' else e})"
        from .ctypes import to_compute
        return "%f", lambda e: f"(double)({to_compute(e, t)})"
    if t.primitive_bitwidth == 64:
        f = "%llx" if hexa else ("%lld" if t.is_int_signed() else "%llu")
        ct = "long long" if t.is_int_signed() else "unsigned long long"
        return ("0x" + f if hexa else f), lambda e: f"({ct})({e})"
    f = "%x" if hexa else ("%d" if t.is_int_signed() or t.is_bool() else "%u")
    return ("0x" + f if hexa else f), lambda e: f"({'int' if t.is_int_signed() or t.is_bool() else 'unsigned'})({e})"


def _cstr(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("%", "%%") + '"'


@lowers("print")
def _print(em, op):
    prefix = op.attr("prefix")
    hexa = bool(op.attr("hex"))
    vals = op.operands
    if not vals:
        em.line(f'if (threadIdx.x == 0) printf("pid (%d, %d, %d) " {_cstr(prefix)} "\\n", blockIdx.x, blockIdx.y, '
                f"blockIdx.z);")
        return
    blocks = [v for v in vals if is_block(v.type)]
    if not blocks:
        fmts, args = [], []
        for v in vals:
            f, conv = _fmt_of(v.type, hexa)
            fmts.append(f)
            args.append(conv(em.scalar(v)))
        label = prefix if len(vals) == 1 else prefix
        em.line(f'if (threadIdx.x == 0) printf("pid (%d, %d, %d) idx () " {_cstr(label)} "{" ".join(fmts)}\\n", '
                f"blockIdx.x, blockIdx.y, blockIdx.z, {', '.join(args)});")
        return
    shape = shape_of(blocks[0].type)
    lay = compact(em.layout_of(blocks[0]) or em.plan.access.get(("input", blocks[0])) or _print_layout(em, shape))
    fe = em.flat_expr(lay)
    own = em.owner_pred(lay)
    coords = []
    idx_fmt = ", ".join(["%d"] * len(shape))
    rest = 1
    for d in reversed(range(len(shape))):
        coords.append(f"(f / {rest}) % {shape[d]}" if rest > 1 else f"f % {shape[d]}")
        rest *= shape[d]
    coords.reverse()
    for k, v in enumerate(vals):
        f, conv = _fmt_of(v.type, hexa)
        x = conv(em.operand(v, lay.with_shape(shape_of(v.type)) if is_block(v.type) else None))
        label = prefix + (f"(operand {k}) " if len(vals) > 1 else "")
        stmt = (f'{{ const int f = {fe}; printf("pid (%d, %d, %d) idx ({idx_fmt}) " {_cstr(label)} "{f}\\n", '
                f"blockIdx.x, blockIdx.y, blockIdx.z, {', '.join(coords)}, {x}); }}")
        if own:
            stmt = f"if ({own}) {stmt}"
        em.for_regs(lay.nregs, stmt)


def _print_layout(em, shape):
    from .plan import default_layout
    return default_layout(shape, em.nw)


@lowers("assert")
def _assert(em, op):
    if not em.device_asserts:
        em.line("// device_assert compiled out")
        return
    cond = op.operands[0]
    mask = op.operand("mask")
    msg = op.attr("msg")
    loc = op.loc
    file = loc.file if loc else "<unknown>"
    line = loc.line if loc else 0
    fn = em.fn.name
    if not is_block(cond.type):
        c = em.scalar(cond)
        m = f" && {em.scalar(mask)}" if mask is not None else ""
        em.line(f"if (!({c}){m}) __assertfail({_cstr(msg)}, {_cstr(file)}, {line}, {_cstr(fn)}, 1);")
        return
    lay = compact(em.layout_of(cond) or _print_layout(em, shape_of(cond.type)))
    c = em.get(cond, lay)
    m = f" && {em.get(mask, lay.with_shape(shape_of(mask.type)))}[i]" if mask is not None else ""
    em.for_regs(lay.nregs, f"if (!{c}[i]{m}) __assertfail({_cstr(msg)}, {_cstr(file)}, {line}, {_cstr(fn)}, 1);")
