"""The builder is collaborating parts over one BuildContext: the surface rules use, the links, no cycles."""

import gc
import inspect
import weakref

import newt
import newt.language as nl
from newt.frontend.builder import Builder, Spec
from newt.frontend.builder_api import BuilderAPI
from newt.frontend.calls import CallBinder
from newt.frontend.context import BuildContext, BuilderPart
from newt.frontend.exprs import ExpressionBuilder
from newt.frontend.loops import LoopBuilder
from newt.frontend.stmts import StatementBuilder

P32 = nl.pointer_type(nl.float32)


@newt.jit
def _helper(x):
    return x * 2


@newt.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    acc = nl.zeros([BLOCK], dtype=nl.float32)
    for i in range(0, n, BLOCK):
        x = nl.load(x_ptr + i + offs, mask=i + offs < n, other=0.0)
        if n > 4:
            acc += _helper(x)
    nl.store(out_ptr + offs, acc, mask=offs < n)


def _spec():
    return Spec(label="concrete", constexprs={"BLOCK": 64}, arg_types={"x_ptr": P32, "out_ptr": P32, "n": nl.int32},
                launched=True, concrete=True)


def _protocol_members():
    names = set(BuilderAPI.__annotations__)
    for name, member in vars(BuilderAPI).items():
        if not name.startswith("__") and (inspect.isfunction(member) or isinstance(member, property)):
            names.add(name)
    return names


def test_the_builder_provides_the_surface_rules_use():
    b = Builder(_spec())
    missing = sorted(n for n in _protocol_members() if not hasattr(type(b), n) and not hasattr(b, n))
    assert missing == []
    assert {"emit", "as_tensor", "cast_value", "broadcast_value", "call_builtin", "report", "scope"} <= \
        _protocol_members()


def test_parts_share_one_context_and_link_to_each_other():
    b = Builder(_spec())
    parts = {"exprs": ExpressionBuilder, "statements": StatementBuilder, "loops": LoopBuilder,
             "calls": CallBinder}
    assert isinstance(b.ctx, BuildContext)
    for attr, cls in parts.items():
        part = getattr(b, attr)
        assert type(part) is cls and isinstance(part, BuilderPart)
        assert part.ctx is b.ctx
        for sib in parts:
            # the (weak) link reaches the builder's own sibling object
            link = getattr(part, sib)
            assert isinstance(link, parts[sib]) and link == getattr(b, sib) and link.ctx is b.ctx
    # no part is a mixin of another: each is its own class deriving only from BuilderPart
    for cls in parts.values():
        assert cls.__bases__ == (BuilderPart,)


def test_the_surface_forwards_to_the_owning_part():
    b = Builder(_spec())
    b.build_function(_kernel.jit_source())
    assert b.region is b.ctx.region and b.frames is b.ctx.frames and b.static_prints is b.ctx.static_prints
    before = len(b.region.ops)
    v = b.constant(3, nl.int32)
    assert len(b.ctx.region.ops) == before + 1 and b.ctx.region.ops[-1].result is v
    b.speculative += 1
    assert b.ctx.speculative == 1
    b.report("N023", "probe", None)  # muted while speculative
    assert not any(d.message == "probe" for d in b.ctx.diags)


def test_a_build_leaves_no_reference_cycle():
    gc.collect()
    gc.disable()
    try:
        b = Builder(_spec(), notes={})
        fn = b.build_function(_kernel.jit_source())
        assert any(op.name == "scf.for" for op in fn.walk())
        refs = [weakref.ref(x) for x in (b, b.ctx, b.exprs, b.statements, b.loops, b.calls)]
        del b
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()
