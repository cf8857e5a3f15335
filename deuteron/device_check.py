"""The static checks inside a tile loop nest (D002..D004 seen from the AST alone): statements, expressions,
calls against ``deuteron.ops``, and indexing."""

from __future__ import annotations

import ast
import difflib

from . import ops
from .structure_base import (
    DeviceLoop,
    TileSite,
    _targets,
)

# ---------------------------------------------------------------------------
# inside a tile loop
# ---------------------------------------------------------------------------

_UNSUPPORTED_STMT = {
    ast.Try: "try/except", ast.With: "with", ast.AsyncWith: "async with", ast.Return: "return",
    ast.Delete: "del", ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Import: "import",
    ast.ImportFrom: "import", ast.FunctionDef: "a nested def", ast.AsyncFunctionDef: "a nested def",
    ast.ClassDef: "a class", ast.Break: "break", ast.While: "a while loop",
    ast.AsyncFor: "async for", ast.Raise: "raise",
}
if hasattr(ast, "TryStar"):
    _UNSUPPORTED_STMT[ast.TryStar] = "try/except*"
if hasattr(ast, "Match"):
    _UNSUPPORTED_STMT[ast.Match] = "match"

_UNSUPPORTED_EXPR = {
    ast.Lambda: "lambda", ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression", ast.Yield: "yield",
    ast.YieldFrom: "yield from", ast.Await: "await", ast.NamedExpr: "the walrus operator",
    ast.Set: "a set literal", ast.JoinedStr: "an f-string",
}


#: operators where a tile operand stands for its indices
_TILE_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)

class DeviceChecker:
    """Walks the body of one tile loop nest."""

    def __init__(self, st, loop: DeviceLoop):  # st: the KernelStructure
        self.st = st
        self.loop = loop
        # dt.grid loop variables are plain ints: only dt.tile ones are tiles
        self.tiles: dict[str, TileSite] = {n: loop.site for n in loop.site.target_names} \
            if loop.site.kind == "tile" else {}
        self.tile_tuples: dict[str, int] = {}
        if loop.site.kind == "tile" and loop.site.as_list and len(loop.site.target_names) == 1 and \
                loop.site.static_ndim:
            self.tile_tuples[loop.site.target_names[0]] = loop.site.static_ndim
        self.device_names = set(loop.assigned)

    # statements
    def visit(self, s):
        st = self.st
        kind = _UNSUPPORTED_STMT.get(type(s))
        if kind is not None:
            node = s
            hint = None
            if isinstance(s, ast.Return):
                hint = "return after the outermost tile loop (the host code)"
            elif isinstance(s, ast.Break):
                hint = "use a mask or torch.where instead"
            st.problem("D004", node, f"{kind} is not supported inside a tile loop", hint=hint)
            return
        if isinstance(s, ast.For):
            site = st.site_by_node.get(id(s.iter)) if isinstance(s.iter, ast.Call) else None
            if site is not None:
                saved = dict(self.tiles), dict(self.tile_tuples)
                for n in site.target_names:
                    if site.kind == "tile":
                        self.tiles[n] = site
                    else:
                        self.tiles.pop(n, None)
                if site.kind == "tile" and site.as_list and len(site.target_names) == 1 and site.static_ndim:
                    self.tile_tuples[site.target_names[0]] = site.static_ndim
                self.expr(s.iter)
                for b in s.body:
                    self.visit(b)
                self.tiles, self.tile_tuples = saved
                if s.orelse:
                    st.problem("D004", s.orelse[0], "a for/else on a tile loop is not supported")
                return
            self.expr(s.iter)
            for b in s.body + s.orelse:
                self.visit(b)
            return
        if isinstance(s, ast.If):
            self.expr(s.test)
            for b in s.body + s.orelse:
                self.visit(b)
            return
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                for nm in _targets(t):
                    if nm in self.tiles:
                        st.problem("D003", t, f"{nm!r} is a tile of an enclosing loop and cannot be reassigned")
                self.target(t)
            if s.value is not None:
                self.expr(s.value)
            return
        if isinstance(s, ast.AugAssign):
            if isinstance(s.target, ast.Name) and s.target.id in self.tiles:
                st.problem("D003", s.target, f"arithmetic on tile {s.target.id!r}",
                           hint="use tile.index (a tensor) or tile.begin / tile.end")
            self.target(s.target)
            self.expr(s.value)
            return
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant):
                return  # a docstring / comment string
            self.expr(s.value)
            return
        if isinstance(s, (ast.Pass, ast.Continue)):  # continue: the rest of the loop body goes into the branches
            return
        if isinstance(s, ast.Assert):
            self.expr(s.test)
            return
        st.problem("D004", s, f"{type(s).__name__} statements are not supported inside a tile loop")

    def target(self, t):
        if isinstance(t, ast.Subscript):
            self.subscript(t, store=True)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self.target(e)
        elif isinstance(t, ast.Attribute):
            self.st.problem("D004", t, "assigning to an attribute is not supported inside a tile loop")

    # expressions
    def expr(self, e, parent=None):
        st = self.st
        if e is None:
            return
        kind = _UNSUPPORTED_EXPR.get(type(e))
        if kind is not None:
            st.problem("D004", e, f"{kind} is not supported inside a tile loop")
            return
        if isinstance(e, ast.Name):
            if e.id in self.tiles:
                st._tile_uses.append((e, self.tiles[e.id], e.id))
            if e.id in self.tiles and parent not in ("index", "shape", "arg", "tuple"):
                st.problem("D003", e, f"tile {e.id!r} used as a value",
                           hint="index a tensor with it, or use tile.index / tile.begin / tile.end / "
                                "tile.block_size")
            return
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id in self.tiles and e.value.id not in self.tile_tuples:
                if e.attr not in ops.TILE_ATTRS:
                    sugg = difflib.get_close_matches(e.attr, list(ops.TILE_ATTRS), n=1)
                    st.problem("D003", e, f"a tile has no attribute {e.attr!r}",
                               hint=(f"did you mean .{sugg[0]}? " if sugg else "")
                               + "tiles have " + ", ".join("." + a for a in ops.TILE_ATTRS))
                else:
                    st.note(e, "tile", f"{e.value.id}.{e.attr}: {ops.TILE_ATTRS[e.attr]}")
                return
            self.expr(e.value, parent="attr")
            return
        if isinstance(e, ast.Subscript):
            self.subscript(e, store=False)
            return
        if isinstance(e, ast.BinOp):
            both = all(isinstance(x, ast.Name) and x.id in self.tiles for x in (e.left, e.right))
            for side in (e.left, e.right):
                if isinstance(side, ast.Name) and side.id in self.tiles:
                    if isinstance(e.op, _TILE_ARITH) and not both and side.id not in self.tile_tuples:
                        # a tile in + - * // % is its indices (Helion's `k[tile_n + start, :]`)
                        st._tile_uses.append((side, self.tiles[side.id], side.id))
                        st.note(side, "tile", f"{side.id} here is {side.id}.index (its indices, a tensor)")
                        continue
                    st.problem("D003", side, f"arithmetic on tile {side.id!r}",
                               hint="a tile in + - * // % stands for tile.index; otherwise use tile.index "
                                    "(a tensor) or tile.begin / tile.end")
                else:
                    self.expr(side)
            return
        if isinstance(e, ast.UnaryOp):
            if isinstance(e.operand, ast.Name) and e.operand.id in self.tiles and isinstance(
                    e.op, (ast.USub, ast.UAdd)):
                st._tile_uses.append((e.operand, self.tiles[e.operand.id], e.operand.id))
                return
            if isinstance(e.operand, ast.Name) and e.operand.id in self.tiles:
                st.problem("D003", e.operand, f"arithmetic on tile {e.operand.id!r}",
                           hint="use tile.index (a tensor) or tile.begin / tile.end")
                return
            self.expr(e.operand)
            return
        if isinstance(e, ast.Compare):
            for side in [e.left] + e.comparators:
                if isinstance(side, ast.Name) and side.id in self.tiles:
                    st.problem("D003", side, f"comparing tile {side.id!r}",
                               hint="compare tile.index (a tensor) or tile.begin / tile.end")
                else:
                    self.expr(side)
            return
        if isinstance(e, ast.Call):
            self.call(e)
            return
        if isinstance(e, (ast.Tuple, ast.List)):
            for x in e.elts:
                if isinstance(x, ast.Starred):
                    self.expr(x.value, parent="tuple")
                else:
                    self.expr(x, parent="tuple" if parent in ("arg", "tuple", "shape", "index") else None)
            return
        if isinstance(e, ast.Starred):
            self.expr(e.value, parent="tuple")
            return
        if isinstance(e, ast.IfExp):
            self.expr(e.test)
            self.expr(e.body, parent=parent)
            self.expr(e.orelse, parent=parent)
            return
        if isinstance(e, ast.BoolOp):
            for v in e.values:
                self.expr(v)
            return
        if isinstance(e, ast.Dict):
            st.problem("D004", e, "a dict is not supported inside a tile loop")
            return
        if isinstance(e, ast.Slice):
            for x in (e.lower, e.upper, e.step):
                self.expr(x)
            return
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                self.expr(child)

    def call(self, e: ast.Call):
        st = self.st
        dtn = st.dt(e.func)
        if dtn is not None:
            if dtn in ops.HELION_UNSUPPORTED:
                st.problem("D004", e.func, f"dt.{dtn} is not supported by deuteron: {ops.HELION_UNSUPPORTED[dtn]}",
                           hint="see docs/deuteron.md for what tile loops support")
            elif dtn not in ops.DT_DEVICE and dtn not in ops.DT_HOST_ONLY and dtn not in ("Config", "Tile"):
                st.problem("D004", e.func, f"dt.{dtn} cannot be used inside a tile loop")
            o = ops.OPS.get(f"dt.{dtn}")
            self._op_check(o, e, f"dt.{dtn}")
            for a in e.args:
                self.expr(a, parent="shape" if o is not None and o.tile_args else "arg")
            for k in e.keywords:
                self.expr(k.value, parent="arg")
            return
        tn = st.torch_name(e.func)
        if tn is not None:
            kind, fname = tn
            table = ops.FUNCTIONAL if kind == "F" else ops.TORCH_FUNCTIONS
            if fname[:1].isupper() or fname in ("float16", "float32", "bfloat16", "float64", "int32", "int64"):
                pass
            elif not ops.supported(table, fname):
                prefix = "torch.nn.functional." if kind == "F" else "torch."
                st.problem("D004", e.func, f"{prefix}{fname} is not supported inside a tile loop",
                           hint="see docs/deuteron.md for the supported ops")
            else:
                self._op_check(ops.find(("torch.nn.functional." if kind == "F" else "torch.") + fname), e,
                               ("torch.nn.functional." if kind == "F" else "torch.") + fname)
            shape_call = fname in ("zeros", "ones", "full", "empty")
            for a in e.args:
                self.expr(a, parent="shape" if shape_call else None)
            for k in e.keywords:
                self.expr(k.value)
            return
        if isinstance(e.func, ast.Name):
            fname = e.func.id
            if fname in ("int", "float", "range", "len", "bool") and any(
                    isinstance(a, ast.Name) and a.id in self.tiles for a in e.args):
                a = next(a for a in e.args if isinstance(a, ast.Name) and a.id in self.tiles)
                st.problem("D003", a, f"tile {a.id!r} used as a Python number",
                           hint="use tile.begin, tile.end or tile.block_size")
                return
            if fname in ("print", "input", "open", "exec", "eval"):
                st.problem("D004", e.func, f"{fname}() cannot run inside a tile loop (it is compiled, not run)")
                return
            # user helpers in the same module are inlined: tiles may be passed to them
            for a in e.args:
                self.expr(a, parent="arg")
            for k in e.keywords:
                self.expr(k.value, parent="arg")
            return
        if isinstance(e.func, ast.Attribute):
            recv = e.func.value
            m = e.func.attr
            device_value = isinstance(recv, ast.Subscript) or (
                isinstance(recv, ast.Name) and recv.id in self.device_names and recv.id not in self.tiles)
            if device_value and m not in ops.TENSOR_METHODS and m not in ops.HOST_METHOD_OK:
                st.problem("D004", e.func, f".{m}() is not supported inside a tile loop",
                           hint="see docs/deuteron.md for the supported ops")
            elif device_value and m in ops.TENSOR_METHODS and ops.TENSOR_METHODS[m] is None:
                st.problem("D004", e.func, f".{m}() is not supported inside a tile loop",
                           hint="in-place methods cannot be compiled; assign the result instead")
            elif device_value and m in ops.TENSOR_METHODS:
                self._op_check(ops.find(f"Tensor.{m}"), e, f"Tensor.{m}")
            if isinstance(recv, ast.Name) and recv.id in self.tiles and recv.id not in self.tile_tuples:
                st.problem("D003", e.func, f"a tile has no method {m!r}",
                           hint="tiles have " + ", ".join("." + a for a in ops.TILE_ATTRS))
                return
            self.expr(recv, parent="attr")
            mo = ops.find(f"Tensor.{m}")  # (a method whose op reads tiles as sizes: x.new_zeros([tile, C]))
            for a in e.args:
                self.expr(a, parent="shape" if mo is not None and mo.tile_args else None)
            for k in e.keywords:
                self.expr(k.value)
            return
        self.expr(e.func)
        for a in e.args:
            self.expr(a)

    def _op_check(self, o, e: ast.Call, spelling: str):
        """The op entry's static check (``deuteron.optable.Op.check``: by default, the arguments bind)."""
        if o is not None:
            o.check(o, e, spelling, lambda node, message, hint: self.st.problem("D004", node, message, hint=hint))

    def subscript(self, e: ast.Subscript, store: bool):
        st = self.st
        base = e.value
        items = list(e.slice.elts) if isinstance(e.slice, ast.Tuple) else [e.slice]
        for it in items:
            if isinstance(it, ast.Slice):
                for x in (it.lower, it.upper, it.step):
                    if x is not None:
                        self.expr(x)  # bounds known when compiling are checked by the tracer (SliceBound)
            elif isinstance(it, ast.Starred):
                self.expr(it.value, parent="index")
            else:
                self.expr(it, parent="index")
        if isinstance(base, ast.Name) and base.id in self.tile_tuples:
            return
        if isinstance(base, ast.Name) and base.id in self.tiles:
            st.problem("D003", base, f"tile {base.id!r} cannot be indexed",
                       hint="index a tensor with the tile instead: x[tile]")
            return
        if not isinstance(base, ast.Name):
            self.expr(base)
            return
        name = base.id
        if name in self.device_names:
            return  # a block computed in the kernel
        count = 0
        unknown = False
        for it in items:
            if isinstance(it, ast.Constant) and it.value is None:
                continue
            if isinstance(it, ast.Constant) and it.value is Ellipsis:
                unknown = True
                continue
            if isinstance(it, ast.Name) and it.id in self.tile_tuples:
                count += self.tile_tuples[it.id]
                continue
            if isinstance(it, ast.Name) and it.id in self.tiles and self.tiles[it.id].as_list and \
                    len(self.tiles[it.id].target_names) == 1 and self.tiles[it.id].static_ndim is None:
                unknown = True
                continue
            if isinstance(it, ast.Starred):
                unknown = True
                continue
            count += 1
        rank = st.ranks.get(name)
        desc = ", ".join(_index_desc(it) for it in items)
        if rank is not None and not unknown and count != rank:
            what = "stored into" if store else "indexed"
            st.problem("D002", e, f"{name} has rank {rank} but is {what} with {count} "
                                  f"ind{'ex' if count == 1 else 'ices'}",
                       hint="index every dimension, e.g. " + _example_index(name, rank, items))
        elif not unknown:
            r = f" of rank {rank}" if rank is not None else ""
            st.note(e, "load" if not store else "store", f"{'store into' if store else 'load of'} {name}[{desc}]"
                    f" (tensor{r})")


def _index_desc(it) -> str:
    if isinstance(it, ast.Slice):
        return ":"
    try:
        return ast.unparse(it)
    except Exception:
        return "?"


def _example_index(name, rank, items) -> str:
    parts = [_index_desc(it) for it in items if not (isinstance(it, ast.Constant) and it.value is None)]
    parts = parts[:rank] + [":"] * (rank - len(parts))
    return f"{name}[{', '.join(parts)}]"
