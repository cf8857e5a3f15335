"""Type rule of the libdevice functions (``newt.language.extra.libdevice``): one rule for the whole table.

As in Triton, an argument's dtype must be exactly one of a variant's (no promotion; a Python ``int`` is
``int32``, a ``float`` ``fp32``); the shapes broadcast.  Where the generic analysis does not know a dtype
(an unknown constexpr, a parameter of unknown type) any variant may apply and nothing is reported.
"""

from __future__ import annotations

from newt.ir.types import ANY_DTYPE, block_of
from newt.language import core as lc
from newt.language.extra.cuda.libdevice import LIBDEVICE

from ..ops import Bound, _poison, rule
from ..semantic import SemError, broadcast_shapes
from ..values import Sym, TensorV


def _fmt(types) -> str:
    return "(" + ", ".join(types) + ")"


@rule(*(f"libdevice.{n}" for n in LIBDEVICE))
def _libdevice(b, a: Bound, node):
    name = a.name.split(".", 1)[1]
    vs = LIBDEVICE[name]
    keys = [f"arg{i}" for i in range(len(vs[0][0]))]
    avs = [a[k] for k in keys]
    _poison(*avs)
    infos = []
    shape: tuple = ()
    for k, av in zip(keys, avs):
        try:
            t, s, _ = b.operand_info(av)
        except SemError as e:
            e.node = e.node or a.node(k)
            raise
        if t.is_ptr():
            raise SemError("N023", f"libdevice.{name} takes numbers, not pointers (argument {k} is {t!r})",
                           node=a.node(k))
        infos.append((t, isinstance(av, Sym) or t.is_symbolic()))
        shape = broadcast_shapes(shape, s)
    cands = [v for v in vs if all(wild or t.name == want for (t, wild), want in zip(infos, v[0]))]
    if not cands:
        got = _fmt(t.name for t, _ in infos)
        takes = " or ".join(_fmt(v[0]) for v in vs)
        bad = next((k for k, (t, wild) in zip(keys, infos)
                    if not wild and all(t.name != v[0][keys.index(k)] for v in vs)), keys[0])
        raise SemError("N023", f"libdevice.{name} has no variant for {got}; it takes {takes}",
                       hint="convert the arguments first, e.g. x.to(nl.float32) (libdevice functions do not "
                            "promote their arguments)", data={"function": name, "got": got}, node=a.node(bad))
    if len(cands) == 1:
        arg_types = [lc.dtype_from_name(t) for t in cands[0][0]]
        ret = lc.dtype_from_name(cands[0][1])
    else:  # an argument of unknown dtype: any of these variants may be the one
        arg_types = [ANY_DTYPE if wild else t for t, wild in infos]
        rets = {v[1] for v in cands}
        ret = lc.dtype_from_name(rets.pop()) if len(rets) == 1 else ANY_DTYPE
    vals = [b.as_tensor(av, t, shape, node) for av, t in zip(avs, arg_types)]
    return TensorV(b.emit("libdevice", vals, [block_of(ret, shape)], {"fn": name}, node=node).result)
