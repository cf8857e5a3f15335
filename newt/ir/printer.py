"""Text form of the tile IR (``str(function)``)."""

from __future__ import annotations

from .types import type_str


def _attr(v) -> str:
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    if hasattr(v, "name") and hasattr(v, "short_name"):
        return str(v)
    if hasattr(v, "name") and hasattr(v, "value") and type(v).__module__.endswith("core"):
        return v.name  # enums
    return str(v)


def _v(x) -> str:
    return f"%{x.name}" if x.name else f"%{x.id}"


def format_function(fn, locs: bool = False) -> str:
    fn.number()
    lines = []
    params = []
    for p in fn.params:
        if p.constexpr:
            params.append(f"{p.name}: constexpr = {p.const_value!r}")
        else:
            params.append(f"%{p.name}: {type_str(p.type)}")
    for a, p in zip(fn.body.args, [p for p in fn.params if not p.constexpr]):
        a.name = a.name or p.name
    lines.append(f"func @{fn.name}(" + ", ".join(params) + ") {")
    _region(fn.body, lines, 1, locs)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _region(region, lines, depth, locs):
    ind = "  " * depth
    for op in region.ops:
        res = ", ".join(_v(r) for r in op.results)
        head = f"{res} = " if op.results else ""
        args = ", ".join(_v(o) for o in op.operands)
        attrs = ""
        if op.attrs:
            attrs = " {" + ", ".join(f"{k}={_attr(v)}" for k, v in sorted(op.attrs.items())) + "}"
        tys = ""
        if op.results:
            tys = " : " + ", ".join(type_str(r.type) for r in op.results)
        loc = f"  // {op.loc.line}:{op.loc.col}" if locs and op.loc else ""
        if op.regions:
            lines.append(f"{ind}{head}{op.name} {args}{attrs}{tys} {{{loc}")
            for i, r in enumerate(op.regions):
                rargs = ", ".join(f"{_v(a)}: {type_str(a.type)}" for a in r.args)
                lines.append(f"{ind}  ^{i}({rargs}):")
                _region(r, lines, depth + 2, locs)
            lines.append(f"{ind}}}")
        else:
            lines.append(f"{ind}{head}{op.name} {args}{attrs}{tys}".rstrip() + loc)
