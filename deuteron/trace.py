"""The tracer: one tile loop nest of a ``@dt.kernel`` -> a tile ``Program``.

It reads the loop's AST (the user's source) and evaluates it abstractly:
host values (the tensors, sizes and numbers the host code computed before
the loop) are real Python objects; values inside the kernel are ``Node``
objects with dims and a dtype that follow PyTorch's semantics (broadcasting,
type promotion).  Nothing of the loop body runs as Python.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import operator
import textwrap
import types

import torch

from . import language as L
from . import ops
from .errors import TraceError
from .program import (
    ONE, Block, Carried, IfStmt, LoopStmt, Merged, Node, Program, RInfo, ScalarArg, TensorArg, TileInfo,
)

__all__ = ["Tracer", "HostTensor", "BlockSizeInt", "SpecializedInt", "TunableValue", "SHAPE_CODE"]

#: the code of shape errors (blocks that do not broadcast, a value stored into a differently shaped index)
SHAPE_CODE = "D006"

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_LOW_PRECISION = (torch.float16, torch.bfloat16)


class BlockSizeInt(int):
    """The value of a ``dt.register_block_size`` (an int that remembers its config slot)."""

    slot: int

    def __new__(cls, value, slot):
        o = int.__new__(cls, value)
        o.slot = slot
        return o


class SpecializedInt(int):
    """An int passed through ``dt.specialize``: always a compile-time constant."""


class TunableValue:
    """Marker base for user tunables (their values are plain Python values)."""


class HostTensor:
    """A tensor of the host code, seen from inside the kernel (a pointer parameter)."""

    __slots__ = ("name", "t", "arg")

    def __init__(self, name, t, arg):
        self.name = name
        self.t = t
        self.arg = arg

    def __repr__(self):
        return f"HostTensor({self.name}: {tuple(self.t.shape)} {self.t.dtype})"


class _MaxResult(tuple):
    """``torch.max(x, dim)``: (values, indices) with ``.values`` / ``.indices``."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


class _Method:
    __slots__ = ("recv", "name")

    def __init__(self, recv, name):
        self.recv = recv
        self.name = name


class _HostMethod:
    __slots__ = ("recv", "name")

    def __init__(self, recv, name):
        self.recv = recv
        self.name = name


class _Return(Exception):
    def __init__(self, value):
        self.value = value


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor",
           ast.LShift: "shl", ast.RShift: "shr", ast.MatMult: "matmul"}
_PYOPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
          "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow, "and": operator.and_,
          "or": operator.or_, "xor": operator.xor, "shl": operator.lshift, "shr": operator.rshift,
          "matmul": operator.matmul, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
          "eq": operator.eq, "ne": operator.ne}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}

_IDENTITY = {"sum": 0, "max": float("-inf"), "min": float("inf"), "prod": 1}


def _is_pow2(v):
    return isinstance(v, int) and v > 0 and v & (v - 1) == 0


def _is_py_number(v) -> bool:
    return isinstance(v, (int, float, bool)) and not isinstance(v, Node)


def _dummy(v):
    """A stand-in for torch.result_type: 0-dim tensors for scalars, 1-element ones for blocks."""
    if isinstance(v, Node):
        if v.weak:
            if v.dtype == torch.bool:
                return True
            return 1.0 if v.dtype.is_floating_point else 1
        return torch.empty((1,) if v.dims else (), dtype=v.dtype)
    return v


def result_type(*vals) -> torch.dtype:
    if len(vals) == 1:
        v = vals[0]
        return v.dtype if isinstance(v, Node) else torch.tensor(v).dtype
    d = _dummy(vals[0])
    for v in vals[1:]:
        d2 = _dummy(v)
        if not isinstance(d, torch.Tensor) and not isinstance(d2, torch.Tensor):
            # two Python numbers: Python promotion
            d = d + d2 if not isinstance(d, bool) or not isinstance(d2, bool) else d
            continue
        rt = torch.result_type(d, d2)
        is_dim = (isinstance(d, torch.Tensor) and d.dim() > 0) or (isinstance(d2, torch.Tensor) and d2.dim() > 0)
        d = torch.empty((1,) if is_dim else (), dtype=rt)
    if isinstance(d, torch.Tensor):
        return d.dtype
    return torch.tensor(d).dtype if not isinstance(d, float) else torch.get_default_dtype()


def _all_weak(*vals) -> bool:
    return all((isinstance(v, Node) and v.weak) or _is_py_number(v) for v in vals)


class Tracer:
    """Traces one outermost tile loop (``loop.node``) into a ``Program``."""

    def __init__(self, kernel, loop, host_locals: dict, fn_globals: dict, src, *, static_shapes: bool,
                 scalar_params: set, slot_of, rdim_slots: dict | None, discovery: bool = False,
                 name: str = "kernel"):
        self.kernel = kernel  # the deuteron Kernel (for names, structure)
        self.loop = loop
        self.host = host_locals
        self.globals = fn_globals
        self.src = src
        self.static = static_shapes
        self.scalar_params = scalar_params
        self.slot_of = slot_of  # (site_index, dim) -> slot or None; also records in discovery
        self.rdim_slots = rdim_slots
        self.discovery = discovery
        self.prog = Program(name, loop.index)
        self.prog.static_shapes = static_shapes
        self.prog.src = src
        self.prog.loop_src = loop.node
        self.env: dict = {}
        self.block = self.prog.body
        self._host_cache: dict = {}
        self._tiles_by_site: dict = {}
        self._rdims_by_size: dict = {}
        self._tile_attr_cache: dict = {}
        self._guard_names: set = set()
        self.current_src = None
        self._inline_depth = 0
        self.sites_seen: dict = {}  # site index -> info recorded for discovery
        self._node_names: dict = {}
        self._cse: dict = {}
        try:
            allow_tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
        except Exception:  # noqa: BLE001
            allow_tf32 = False
        self.prog.dot_precision = "tf32" if allow_tf32 else "ieee"

    # ------------------------------------------------------------------ entry
    def run(self) -> Program:
        node = self.loop.node
        site = self.loop.site
        self.current_src = node
        tiles, bound = self.make_tiles(site, node.iter, node.target, depth=0)
        self.prog.grid_tiles = tiles
        for ax, t in enumerate(tiles):
            t.grid_axis = ax
        self.assign(node.target, bound)
        self.stmts(node.body)
        self.finalize()
        return self.prog

    def error(self, code, node, message, hint=None):
        return TraceError(code, node if node is not None else self.current_src, message, hint)

    # ------------------------------------------------------------------ nodes
    _PURE = ("binary", "unary", "cast", "where", "expand_dims", "reshape", "permute", "expand", "reduce", "full",
             "arange", "scan")

    def emit(self, node: Node) -> Node:
        node.src = node.src or self.current_src
        if node.op in self._PURE:
            key = _cse_key(node)
            if key is not None:
                b = self.block
                while b is not None:
                    hit = self._cse.get((id(b), key))
                    if hit is not None:
                        return hit
                    b = b.parent
                self._cse[(id(self.block), key)] = node
        self.block.add(node)
        return node

    def const_node(self, value, dtype=None) -> Node:
        if dtype is None:
            dtype = torch.bool if isinstance(value, bool) else (torch.int64 if isinstance(value, int)
                                                                   else torch.float32)
            n = Node("const", dims=(), dtype=dtype, attrs={"value": value}, weak=True, pad=value)
        else:
            n = Node("const", dims=(), dtype=dtype, attrs={"value": value}, pad=value)
        n.src = self.current_src
        return n

    def as_node(self, v, src=None) -> Node:
        if isinstance(v, Node):
            return v
        if isinstance(v, (bool, int, float)):
            return self.const_node(v)
        raise self.error("D004", src, f"expected a value inside the kernel, got {_describe(v)}")

    # ------------------------------------------------------------------ host values
    def guard(self, name, value):
        """Record a host value baked into the code: the program is reused only while it holds.

        ``name`` is a host variable name or a ("size"|"stride", tensor source, dim) tuple."""
        key = name if isinstance(name, tuple) else ("local", name)
        if key not in self._guard_names:
            self._guard_names.add(key)
            self.prog.guards.append((key, _guard_value(value)))

    def host_value(self, name: str, v, node):
        key = name
        if key in self._host_cache:
            return self._host_cache[key]
        out = self._host_value(name, v, node)
        self._host_cache[key] = out
        return out

    def _host_value(self, name, v, node):
        if isinstance(v, torch.Tensor):
            return self.tensor_arg(name, v, ("local", name))
        if isinstance(v, L.Tile):
            raise self.error("D003", node, f"{name!r} is a tile of kernel.ref, not of this kernel")
        if isinstance(v, bool):
            self.guard(name, v)
            return v
        if isinstance(v, (BlockSizeInt, SpecializedInt)):
            self.guard(name, int(v))
            return v
        if isinstance(v, int):
            if self.static and name not in self.scalar_params:
                self.guard(name, v)
                return v
            return self.scalar_param(name, v)
        if isinstance(v, float):
            return self.scalar_param(name, v)
        if isinstance(v, (list, tuple)):
            if all(isinstance(x, torch.Tensor) for x in v) and v:
                return type(v)(self.tensor_arg(f"{name}_{i}", x, ("item", name, i)) for i, x in enumerate(v))
            if all(isinstance(x, (int, float, bool, str, type(None))) or isinstance(x, torch.dtype) for x in v):
                self.guard(name, tuple(v))
            return v
        if isinstance(v, (str, torch.dtype, type(None))):
            self.guard(name, v)
            return v
        return v

    def tensor_arg(self, name, t, source) -> HostTensor:
        for ta in self.prog.tensors.values():
            if ta.tensor is t:
                if source not in ta.sources:
                    ta.sources.append(source)
                return HostTensor(ta.name, t, ta)
        if t.device.type not in ("cuda", "cpu"):
            raise self.error("D004", None, f"tensor {name!r} is on {t.device}; deuteron runs on CUDA (or the CPU "
                                           "interpreter)")
        pname = self.kernel_name_for(name)
        ta = TensorArg(pname, t, len(self.prog.tensors))
        ta.sources.append(source)
        self.prog.tensors[pname] = ta
        return HostTensor(pname, t, ta)

    def kernel_name_for(self, name: str) -> str:
        base = name if name.isidentifier() and not name.startswith("_") else "arg"
        out = base
        i = 1
        taken = set(self.prog.tensors) | set(self.prog.scalars) | set(self.prog.size_params)
        while out in taken:
            out = f"{base}_{i}"
            i += 1
        return out

    def scalar_param(self, name, v) -> Node:
        if isinstance(v, float):
            dt = torch.float32
        else:
            dt = torch.int32 if -2 ** 31 <= v < 2 ** 31 else torch.int64
        pname = self.kernel_name_for(name)
        sa = ScalarArg(pname, v, dt)
        sa.source = name
        self.prog.scalars[pname] = sa
        n = Node("param", dims=(), dtype=dt, attrs={"name": pname}, weak=True)
        n.host_value = v
        n.guards = ((("local", name), v),)
        n.src = self.current_src
        return n

    def size_of(self, ht: HostTensor, d: int, what: str = "size"):
        val = ht.t.shape[d] if what == "size" else ht.t.stride(d)
        if self.static:
            return int(val)
        pname = f"{ht.name}_{what}_{d}"
        if pname not in self.prog.size_params:
            self.prog.size_params[pname] = (ht.name, what, d)
        n = Node("param", dims=(), dtype=torch.int32 if val < 2 ** 31 else torch.int64, attrs={"name": pname},
                 weak=True)
        n.host_value = int(val)
        n.guards = (((what, ht.name, d), int(val)),)
        n.src = self.current_src
        return n

    def static_int(self, v, node, what: str) -> int:
        """A value that must be known when the kernel is compiled (shapes, block sizes)."""
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, int):
            return int(v)
        if isinstance(v, Node) and v.host_value is not None and isinstance(v.host_value, int):
            for g in v.guards:
                self.guard(*g)
            return int(v.host_value)
        if isinstance(v, TileInfo):
            raise self.error("D003", node, f"a tile used as {what}", hint="use tile.block_size or index with it")
        raise self.error("D004", node, f"{what} must be known when the kernel is compiled, got {_describe(v)}")

    # ------------------------------------------------------------------ tiles
    def make_tiles(self, site, call: ast.Call, target, depth: int):
        kind = site.kind
        args = [self.eval(a) for a in call.args]
        kwargs = {k.arg: self.eval(k.value) for k in call.keywords}
        first = args[0] if args else kwargs.pop("begin_or_sizes", kwargs.pop("sizes", None))
        end = args[1] if len(args) > 1 else kwargs.pop("end", None)
        third = args[2] if len(args) > 2 else None
        block_size = step = None
        if kind == "tile":
            block_size = third if third is not None else kwargs.pop("block_size", None)
        else:
            step = third if third is not None else kwargs.pop("step", None)
        for k in kwargs:
            raise self.error("D004", call, f"dt.{kind} has no argument {k!r}")
        if first is None:
            raise self.error("D004", call, f"dt.{kind} needs the size of the loop")
        as_list = isinstance(first, (list, tuple, torch.Size))
        if as_list:
            begins = [0] * len(first) if end is None else list(first)
            ends = list(first) if end is None else list(end)
            if end is not None and not isinstance(end, (list, tuple, torch.Size)):
                raise self.error("D004", call, f"dt.{kind}(begins, ends): both must be lists")
            if len(begins) != len(ends):
                raise self.error("D004", call, f"dt.{kind}: {len(begins)} begins but {len(ends)} ends")
        else:
            begins, ends = ([0], [first]) if end is None else ([first], [end])
        ndim = len(ends)
        if ndim == 0:
            raise self.error("D004", call, f"dt.{kind} over zero dimensions")
        if depth == 0 and ndim > 3:
            raise self.error("D003", call, f"the grid loop has {ndim} dimensions; a launch grid has at most 3",
                             hint="tile the outer dimensions in a nested dt.tile loop")
        if isinstance(block_size, (list, tuple)):
            bss = list(block_size)
            if len(bss) != ndim:
                raise self.error("D005", call, f"dt.tile over {ndim} dimension(s) with {len(bss)} block sizes")
        else:
            bss = [block_size] * ndim
        names = self._tile_names(target, ndim, as_list, kind)
        tiles = []
        for d in range(ndim):
            b, e = begins[d], ends[d]
            for v, what in ((b, "begin"), (e, "end")):
                if isinstance(v, TileInfo):
                    raise self.error("D003", call, f"a tile used as the {what} of dt.{kind}",
                                     hint="use tile.begin / tile.end")
                if depth == 0 and isinstance(v, Node) and v.host_value is None:
                    raise self.error("D004", call, f"the {what} of the grid loop must be a host value")
                if isinstance(v, Node) and v.dims:
                    raise self.error("D004", call, f"the {what} of dt.{kind} must be a scalar, not a block")
                if not isinstance(v, (int, Node)):
                    raise self.error("D004", call, f"the {what} of dt.{kind} must be an int, got {_describe(v)}")
            slot, fixed = None, None
            if kind == "grid":
                fixed = 1
            else:
                bs = bss[d]
                if bs is None:
                    slot = self.slot_of(site, d, None)
                elif isinstance(bs, BlockSizeInt):
                    slot = self.slot_of(site, d, bs)
                elif isinstance(bs, int) and not isinstance(bs, bool):
                    if not _is_pow2(int(bs)):
                        raise self.error("D005", call, f"block size {int(bs)} is not a power of two")
                    fixed = int(bs)
                    self.slot_of(site, d, fixed)
                else:
                    fixed = self.static_int(bs, call, "a block size")
                    if not _is_pow2(fixed):
                        raise self.error("D005", call, f"block size {fixed} is not a power of two")
                    self.slot_of(site, d, fixed)
            t = TileInfo(len(self.prog.tiles), names[d], kind, depth, b, e, slot, fixed, site.index, d, src=call)
            if kind == "grid" and step is not None:
                t.step = self.static_int(step, call, "the step of dt.grid")
                if t.step < 1:
                    raise self.error("D004", call, "the step of dt.grid must be positive")
            self.prog.tiles.append(t)
            tiles.append(t)
        if kind == "grid":
            vals = [self.grid_index_node(t) for t in tiles]
        else:
            vals = tiles
        bound = tuple(vals) if as_list else vals[0]
        return tiles, bound

    def _tile_names(self, target, ndim, as_list, kind):
        if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts) \
                and len(target.elts) == ndim:
            return [e.id for e in target.elts]
        base = target.id if isinstance(target, ast.Name) else kind
        if ndim == 1 and not as_list:
            return [base]
        return [f"{base}{d}" for d in range(ndim)]

    def grid_index_node(self, t: TileInfo) -> Node:
        n = Node("grid_index", dims=(), dtype=torch.int32, attrs={"tile": t}, weak=True)
        n.src = t.src
        return n

    def tile_attr(self, t: TileInfo, attr: str, node) -> Node:
        key = (t.id, attr)
        if key in self._tile_attr_cache:
            return self._tile_attr_cache[key]
        if attr == "index":
            n = Node("tile_index", dims=(t,), dtype=torch.int32, attrs={"tile": t})
        elif attr in ("begin", "end", "id", "count", "block_size"):
            n = Node(f"tile_{attr}", dims=(), dtype=torch.int32, attrs={"tile": t}, weak=True)
            if attr == "block_size" and t.fixed is not None:
                n.host_value = t.fixed
        else:
            sugg = ", ".join("." + a for a in ops.TILE_ATTRS)
            raise self.error("D003", node, f"a tile has no attribute {attr!r}", hint=f"tiles have {sugg}")
        n.src = node
        self._tile_attr_cache[key] = n
        return n

    def rdim(self, size: int, size_expr, node) -> RInfo:
        r = self._rdims_by_size.get(size)
        if r is None:
            r = RInfo(len(self.prog.rdims), size, size_expr, src=node)
            self.prog.rdims.append(r)
            self._rdims_by_size[size] = r
        return r

    # ------------------------------------------------------------------ statements
    def stmts(self, body):
        for s in body:
            self.stmt(s)

    def stmt(self, s):
        prev = self.current_src
        self.current_src = s
        try:
            m = getattr(self, "stmt_" + type(s).__name__, None)
            if m is None:
                raise self.error("D004", s, f"{type(s).__name__} statements are not supported inside a tile loop")
            m(s)
        finally:
            self.current_src = prev

    def stmt_Pass(self, s):
        pass

    def stmt_Expr(self, s):
        if isinstance(s.value, ast.Constant):
            return
        self.eval(s.value)

    def stmt_Assign(self, s):
        v = self.eval(s.value)
        for t in s.targets:
            self.assign(t, v)

    def stmt_AnnAssign(self, s):
        if s.value is not None:
            self.assign(s.target, self.eval(s.value))

    def stmt_AugAssign(self, s):
        op = _BINOPS.get(type(s.op))
        if isinstance(s.target, ast.Name):
            cur = self.eval(s.target)
            self.assign(s.target, self.binop(op, cur, self.eval(s.value), s))
        elif isinstance(s.target, ast.Subscript):
            base = self.eval(s.target.value)
            if not isinstance(base, HostTensor):
                raise self.error("D004", s.target, "item assignment to a value computed in the kernel",
                                 hint="assign a new value instead (torch.where for a masked update)")
            items = self.index_items(base, s.target.slice, s.target)
            cur = self.load(base, items, s.target)
            self.store(base, items, self.binop(op, cur, self.eval(s.value), s), s.target)
        else:
            raise self.error("D004", s.target, "unsupported augmented assignment target")

    def stmt_Assert(self, s):
        v = self.eval(s.test)
        if isinstance(v, Node):
            return  # a device-side check: ignored in the kernel (kernel.ref checks it)
        if not v:
            msg = self.eval(s.msg) if s.msg is not None else "assertion failed"
            raise self.error("D004", s, f"assertion failed while compiling the kernel: {msg}")

    def stmt_Return(self, s):
        if self._inline_depth:
            raise _Return(self.eval(s.value) if s.value is not None else None)
        raise self.error("D004", s, "return is not supported inside a tile loop",
                         hint="return after the outermost tile loop (the host code)")

    def stmt_Raise(self, s):
        raise self.error("D004", s, "raise inside a tile loop (reached while compiling the kernel)")

    def stmt_If(self, s):
        cond = self.eval(s.test)
        if isinstance(cond, Node):
            if cond.dims:
                raise self.error("D004", s.test, "an `if` on a block (a tensor with tile dimensions)",
                                 hint="use torch.where(cond, a, b) for elementwise choices")
            if cond.host_value is not None:
                for g in cond.guards:
                    self.guard(*g)
                cond = cond.host_value
            else:
                self.device_if(s, cond)
                return
        if isinstance(cond, (HostTensor, TileInfo)):
            raise self.error("D004", s.test, f"an `if` on {_describe(cond)}")
        self.stmts(s.body if cond else s.orelse)

    def stmt_For(self, s):
        it = s.iter
        site = self.kernel.structure.site_by_node.get(id(it)) if isinstance(it, ast.Call) else None
        if site is not None:
            self.tile_loop(s, site)
            return
        if s.orelse:
            raise self.error("D004", s.orelse[0], "for/else is not supported inside a tile loop")
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and self.lookup(it.func.id, it.func) is range:
            args = [self.eval(a) for a in it.args]
            if all(isinstance(a, int) for a in args) and len(range(*args)) <= 0:
                return
            self.range_loop(s, args)
            return
        seq = self.eval(it)
        if isinstance(seq, (list, tuple, range)):
            for v in seq:
                self.assign(s.target, v)
                self.stmts(s.body)
            return
        raise self.error("D004", it, f"a for loop over {_describe(seq)} inside a tile loop",
                         hint="loop with dt.tile(...), dt.grid(...) or range(...)")

    def stmt_While(self, s):
        raise self.error("D004", s, "while loops are not supported inside a tile loop",
                         hint="use dt.tile / dt.grid / range loops")

    # ------------------------------------------------------------------ assignment
    def assign(self, target, v):
        if isinstance(target, ast.Name):
            if isinstance(v, Node) and v.name is None and v.op not in ("param", "const", "carried", "loopout",
                                                                        "phi") and not v.op.startswith("tile_"):
                v.name = target.id
            self.env[target.id] = v
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(v, TileInfo) or isinstance(v, Node):
                raise self.error("D004", target, f"cannot unpack {_describe(v)}")
            try:
                vals = list(v)
            except TypeError:
                raise self.error("D004", target, f"cannot unpack {_describe(v)}") from None
            if len(vals) != len(target.elts):
                raise self.error("D004", target, f"cannot unpack {len(vals)} values into {len(target.elts)} names")
            for t, x in zip(target.elts, vals):
                self.assign(t, x)
        elif isinstance(target, ast.Subscript):
            base = self.eval(target.value)
            if not isinstance(base, HostTensor):
                raise self.error("D004", target, "item assignment to a value computed in the kernel",
                                 hint="assign a new value instead (torch.where for a masked update)")
            items = self.index_items(base, target.slice, target)
            self.store(base, items, v, target)
        elif isinstance(target, ast.Attribute):
            raise self.error("D004", target, "assigning to an attribute is not supported inside a tile loop")
        else:
            raise self.error("D004", target, "unsupported assignment target")

    # ------------------------------------------------------------------ loops and conditions
    def _assigned_in(self, body) -> list:
        out = []
        for st in body:
            for n in ast.walk(st):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in out:
                    out.append(n.id)
        return out

    def tile_loop(self, s, site):
        if s.orelse:
            raise self.error("D004", s.orelse[0], "for/else is not supported on a tile loop")
        tiles, bound = self.make_tiles(site, s.iter, s.target, depth=site.depth)
        loop = LoopStmt("grid" if site.kind == "grid" else "tile", tiles, src=s)
        if site.kind == "grid":
            if len(tiles) > 1:
                # a nest of scalar loops, one per dimension
                self._nested_grid(s, tiles, bound, 0)
                return
            loop.index = bound if not isinstance(bound, tuple) else bound[0]
        if len(tiles) > 1 and site.kind == "tile":
            # a multi-dimensional inner tile loop: a nest, outermost dimension first
            self._nested_tiles(s, tiles, bound, 0)
            return
        self.loop_body(loop, s.body, lambda: self.assign(s.target, bound), s)

    def _nested_tiles(self, s, tiles, bound, d):
        loop = LoopStmt("tile", [tiles[d]], src=s)
        if d == len(tiles) - 1:
            self.loop_body(loop, s.body, lambda: self.assign(s.target, bound), s)
        else:
            self.loop_body(loop, None, None, s, inner=lambda: self._nested_tiles(s, tiles, bound, d + 1))

    def _nested_grid(self, s, tiles, bound, d):
        loop = LoopStmt("grid", [tiles[d]], index=bound[d], src=s)
        if d == len(tiles) - 1:
            self.loop_body(loop, s.body, lambda: self.assign(s.target, bound), s)
        else:
            self.loop_body(loop, None, None, s, inner=lambda: self._nested_grid(s, tiles, bound, d + 1))

    def range_loop(self, s, args):
        if not 1 <= len(args) <= 3:
            raise self.error("D004", s.iter, "range() takes 1 to 3 arguments")
        for a in args:
            if not isinstance(a, (int, Node)) or (isinstance(a, Node) and (a.dims or
                                                                          not _is_int_dtype(a.dtype))):
                raise self.error("D004", s.iter, f"range() over {_describe(a)}")
        start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
        if isinstance(step, Node):
            step = self.static_int(step, s.iter, "the step of range()")
        if step == 0:
            raise self.error("D004", s.iter, "range() step must not be zero")
        idx = Node("loop_index", dims=(), dtype=torch.int32, weak=True)
        idx.src = s
        loop = LoopStmt("range", index=idx, start=start, end=end, step=step, src=s)
        self.loop_body(loop, s.body, lambda: self.assign(s.target, idx), s)

    def loop_body(self, loop: LoopStmt, body, bind, s, inner=None):
        """Trace a loop body with its loop-carried variables (retrying when a variable's type grows)."""
        names = self._assigned_in(body if body is not None else s.body)
        carried_names = [n for n in names if n in self.env]
        overrides: dict = {}
        parent = self.block
        for _attempt in range(4):
            saved_env = dict(self.env)
            saved_cache = dict(self._tile_attr_cache)
            loop.body = Block(parent)
            loop.carried = []
            inits = {}
            for n in carried_names:
                init = overrides.get(n, self.env[n])
                if isinstance(init, (HostTensor, TileInfo)) or not isinstance(init, (Node, bool, int, float)):
                    raise self.error("D004", s, f"{n!r} is reassigned inside a loop but holds {_describe(init)}")
                init = self.as_node(init, s)
                inits[n] = init
                arg = Node("carried", dims=init.dims, dtype=init.dtype, attrs={"name": n}, weak=init.weak)
                arg.src = s
                loop.carried.append(Carried(n, init, arg))
                self.env[n] = arg
            self.block = loop.body
            try:
                if inner is not None:
                    inner()
                else:
                    bind()
                    self.stmts(body)
            finally:
                self.block = parent
            retry = False
            for c in loop.carried:
                res = self.env.get(c.name)
                if res is None:
                    raise self.error("D004", s, f"{c.name!r} is deleted inside the loop")
                if not isinstance(res, Node):
                    res = self.as_node(res, s) if isinstance(res, (bool, int, float)) else res
                if not isinstance(res, Node):
                    raise self.error("D004", s, f"{c.name!r} becomes {_describe(res)} inside the loop")
                if res.dims != c.arg.dims or res.dtype != c.arg.dtype or (res.weak != c.arg.weak and res.weak):
                    # grow the init to the joined type and trace again
                    dims = _broadcast_dims(c.arg.dims, res.dims)
                    if dims is None or dims != res.dims and _broadcast_dims(res.dims, c.arg.dims) != dims:
                        raise self.error(SHAPE_CODE, s, f"{c.name!r} changes shape inside the loop: "
                                                        f"{_dims_text(c.arg.dims)} before, {_dims_text(res.dims)} "
                                                        "after one iteration")
                    dtype = result_type(c.arg, res) if not (c.arg.weak and not res.weak) else res.dtype
                    if c.arg.weak and not res.weak:
                        dtype = res.dtype
                    new_init = self.materialize(inits[c.name], dims, dtype, s)
                    if new_init.dims == c.arg.dims and new_init.dtype == c.arg.dtype and not c.arg.weak:
                        res = self.cast(res, c.arg.dtype)
                        c.result = res
                        continue
                    overrides[c.name] = new_init
                    retry = True
                c.result = res
            if retry:
                self.env = saved_env
                self._tile_attr_cache = saved_cache
                continue
            break
        else:
            raise self.error("D004", s, "the types of the loop's variables do not settle")
        # after the loop: carried variables hold the loop's results; loop-locals are gone
        self.env = saved_env
        for c in loop.carried:
            if c.init.block is None and c.init.op not in ("const", "param", "carried", "loopout", "phi") \
                    and not c.init.op.startswith("tile_"):
                self.emit(c.init)
            out = Node("loopout", dims=c.arg.dims, dtype=c.arg.dtype, attrs={"name": c.name, "carried": c})
            out.src = s
            c.out = out
            self.env[c.name] = out
        self._tile_attr_cache = saved_cache
        parent.add(loop)

    def materialize(self, v: Node, dims, dtype, src) -> Node:
        """``v`` as a value of exactly ``dims`` and ``dtype`` (for loop-carried inits)."""
        if v.op == "const" and not dims:
            return self.const_node(v.attrs["value"], dtype)
        if v.dims == tuple(dims):
            return self.cast(v, dtype) if v.dtype != dtype else v
        n = Node("expand", [self.cast(v, dtype) if v.dtype != dtype else v], dims=dims, dtype=dtype, pad=v.pad)
        n.src = src
        return n

    def device_if(self, s, cond: Node):
        if cond.dtype != torch.bool:
            cond = self.binop("ne", cond, 0, s.test)
        ifs = IfStmt(cond, src=s)
        saved = dict(self.env)
        parent = self.block
        self.block = ifs.then_block
        ifs.then_block.parent = parent
        try:
            self.stmts(s.body)
        finally:
            self.block = parent
        then_env = self.env
        self.env = dict(saved)
        self.block = ifs.else_block
        ifs.else_block.parent = parent
        try:
            self.stmts(s.orelse)
        finally:
            self.block = parent
        else_env = self.env
        self.env = dict(saved)
        names = [n for n in list(then_env) + list(else_env) if then_env.get(n) is not saved.get(n)
                 or else_env.get(n) is not saved.get(n)]
        seen = set()
        for n in names:
            if n in seen:
                continue
            seen.add(n)
            a, b = then_env.get(n), else_env.get(n)
            if a is None or b is None:
                self.env.pop(n, None)  # defined on one path only
                continue
            if not isinstance(a, Node) and not isinstance(b, Node) and a == b:
                self.env[n] = a
                continue
            a = self.as_node(a, s)
            b = self.as_node(b, s)
            dims = _broadcast_dims(a.dims, b.dims)
            if dims is None:
                raise self.error(SHAPE_CODE, s, f"{n!r} has shape {_dims_text(a.dims)} on one branch and "
                                                f"{_dims_text(b.dims)} on the other")
            dtype = result_type(a, b)
            out = Node("phi", dims=dims, dtype=dtype, attrs={"name": n})
            out.src = s
            ifs.merged.append(Merged(n, (a, dims, dtype), (b, dims, dtype), out))
            self.env[n] = out
        parent.add(ifs)

    # ------------------------------------------------------------------ expressions
    def eval(self, e):
        m = getattr(self, "ex_" + type(e).__name__, None)
        if m is None:
            kind = {ast.Lambda: "lambda", ast.ListComp: "a list comprehension", ast.GeneratorExp:
                    "a generator expression", ast.DictComp: "a dict comprehension", ast.SetComp:
                    "a set comprehension", ast.NamedExpr: "the walrus operator", ast.Await: "await",
                    ast.Yield: "yield", ast.JoinedStr: "an f-string"}.get(type(e), type(e).__name__)
            raise self.error("D004", e, f"{kind} is not supported inside a tile loop")
        return m(e)

    def ex_Constant(self, e):
        return e.value

    def lookup(self, name, node):
        if name in self.env:
            return self.env[name]
        if name in self.host:
            return self.host_value(name, self.host[name], node)
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error("D004", node, f"name {name!r} is not defined")

    def ex_Name(self, e):
        return self.lookup(e.id, e)

    def ex_Tuple(self, e):
        out = []
        for x in e.elts:
            if isinstance(x, ast.Starred):
                out.extend(self.eval(x.value))
            else:
                out.append(self.eval(x))
        return tuple(out)

    def ex_List(self, e):
        return list(self.ex_Tuple(e))

    def ex_Slice(self, e):
        lo = self.eval(e.lower) if e.lower is not None else None
        hi = self.eval(e.upper) if e.upper is not None else None
        st = self.eval(e.step) if e.step is not None else None
        return slice(lo, hi, st)

    def ex_Attribute(self, e):
        base = self.eval(e.value)
        a = e.attr
        if isinstance(base, TileInfo):
            return self.tile_attr(base, a, e)
        if isinstance(base, HostTensor):
            return self.host_tensor_attr(base, a, e)
        if isinstance(base, Node):
            if a == "dtype":
                return base.dtype
            if a == "shape":
                return tuple(self.dim_value(d) for d in base.dims)
            if a == "ndim":
                return len(base.dims)
            if a in ("T", "mT"):
                return self.permute(base, list(range(len(base.dims)))[::-1] if a == "T" else
                                    list(range(len(base.dims) - 2)) + [len(base.dims) - 1, len(base.dims) - 2], e)
            if a in ops.TENSOR_METHODS:
                return _Method(base, a)
            raise self.error("D004", e, f".{a} is not supported on a value inside a tile loop",
                             hint="see docs/deuteron.md for the supported ops")
        if isinstance(base, _MaxResult) and a in ("values", "indices"):
            return getattr(base, a)
        try:
            return getattr(base, a)
        except AttributeError:
            raise self.error("D004", e, f"{_describe(base)} has no attribute {a!r}") from None

    def dim_value(self, d):
        if isinstance(d, TileInfo):
            return d
        if isinstance(d, RInfo):
            return d.size
        return 1

    def host_tensor_attr(self, ht: HostTensor, a, e):
        t = ht.t
        if a == "shape":
            return tuple(self.size_of(ht, d) for d in range(t.dim()))
        if a == "dtype":
            return t.dtype
        if a == "device":
            return t.device
        if a == "ndim":
            return t.dim()
        if a in ("size", "stride", "dim", "numel"):
            return _HostMethod(ht, a)
        raise self.error("D004", e, f"{ht.name}.{a} inside a tile loop: index the tensor with tiles first",
                         hint=f"e.g. {ht.name}[tile].{a}" if a in ops.TENSOR_METHODS else None)

    def ex_Subscript(self, e):
        base = self.eval(e.value)
        if isinstance(base, HostTensor):
            items = self.index_items(base, e.slice, e)
            return self.load(base, items, e)
        if isinstance(base, Node):
            return self.block_index(base, e.slice, e)
        if isinstance(base, TileInfo):
            raise self.error("D003", e, "a tile cannot be indexed", hint="index a tensor with the tile: x[tile]")
        idx = self.eval(e.slice)
        if isinstance(idx, Node):
            idx = self.static_int(idx, e.slice, "an index into a Python sequence")
        try:
            return base[idx]
        except Exception as ex:  # noqa: BLE001
            raise self.error("D004", e, f"cannot index {_describe(base)}: {ex}") from None

    def ex_BinOp(self, e):
        op = _BINOPS.get(type(e.op))
        a = self.eval(e.left)
        b = self.eval(e.right)
        return self.binop(op, a, b, e)

    def ex_UnaryOp(self, e):
        v = self.eval(e.operand)
        if isinstance(v, TileInfo):
            raise self.error("D003", e, "arithmetic on a tile", hint="use tile.index, tile.begin or tile.end")
        if not isinstance(v, Node):
            if isinstance(e.op, ast.Not):
                return not v
            if isinstance(e.op, ast.USub):
                return -v
            if isinstance(e.op, ast.UAdd):
                return +v
            return ~v
        if isinstance(e.op, ast.UAdd):
            return v
        if isinstance(e.op, ast.USub):
            return self.unary("neg", v, e)
        if isinstance(e.op, ast.Not):
            if v.dims:
                raise self.error("D004", e, "`not` on a block", hint="use ~mask or torch.logical_not")
            return self.binop("eq", v, 0 if v.dtype != torch.bool else False, e)
        if v.dtype == torch.bool:
            return self.binop("eq", v, False, e)
        if v.dtype.is_floating_point:
            raise self.error("D004", e, "~ on floating-point values")
        n = Node("unary", [v], dims=v.dims, dtype=v.dtype, attrs={"fn": "invert"}, weak=v.weak)
        return self.emit(n)

    def ex_Compare(self, e):
        left = self.eval(e.left)
        result = None
        for op, right_node in zip(e.ops, e.comparators):
            right = self.eval(right_node)
            if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                if isinstance(left, Node) or isinstance(right, Node):
                    raise self.error("D004", e, "is / in on values inside the kernel")
                r = {ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
                     ast.NotIn: lambda a, b: a not in b}[type(op)](left, right)
            else:
                r = self.binop(_CMPOPS[type(op)], left, right, e)
            result = r if result is None else self.logical("and", result, r, e)
            left = right
        return result

    def ex_BoolOp(self, e):
        is_and = isinstance(e.op, ast.And)
        vals = []
        for x in e.values:
            v = self.eval(x)
            if not isinstance(v, Node):
                if is_and and not v:
                    return v
                if not is_and and v:
                    return v
                if not vals:
                    vals.append(v)
                continue
            vals.append(v)
        nodes = [v for v in vals if isinstance(v, Node)]
        if not nodes:
            return vals[-1] if vals else (True if is_and else False)
        out = nodes[0]
        for v in nodes[1:]:
            out = self.logical("and" if is_and else "or", out, v, e)
        return out

    def logical(self, kind, a, b, src):
        if not isinstance(a, Node) and not isinstance(b, Node):
            return (a and b) if kind == "and" else (a or b)
        a = self.to_bool(a, src)
        b = self.to_bool(b, src)
        return self.binop(kind, a, b, src)

    def to_bool(self, v, src):
        if isinstance(v, Node):
            return v if v.dtype == torch.bool else self.binop("ne", v, 0, src)
        return bool(v)

    def ex_IfExp(self, e):
        c = self.eval(e.test)
        if isinstance(c, Node) and c.host_value is not None:
            for g in c.guards:
                self.guard(*g)
            c = c.host_value
        if not isinstance(c, Node):
            return self.eval(e.body) if c else self.eval(e.orelse)
        return self.where(c, self.eval(e.body), self.eval(e.orelse), e)

    def ex_Call(self, e):
        func = self.eval(e.func)
        args = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value)
                if isinstance(v, (Node, TileInfo)):
                    raise self.error("D004", a, f"cannot unpack {_describe(v)}")
                args.extend(v)
            else:
                args.append(self.eval(a))
        kwargs = {}
        for k in e.keywords:
            if k.arg is None:
                raise self.error("D004", k, "**kwargs is not supported inside a tile loop")
            kwargs[k.arg] = self.eval(k.value)
        return self.call(func, args, kwargs, e)

    # ------------------------------------------------------------------ calls
    def call(self, func, args, kwargs, e):
        if isinstance(func, _Method):
            return self.method(func.recv, func.name, args, kwargs, e)
        if isinstance(func, _HostMethod):
            return self.host_method(func.recv, func.name, args, kwargs, e)
        dt_name = _DT_FUNCS.get(id(func))
        if dt_name is not None:
            return self.dt_call(dt_name, args, kwargs, e)
        tname = _torch_name(func)
        if tname is not None:
            return self.torch_call(tname, args, kwargs, e)
        if func in (min, max) and any(isinstance(a, Node) for a in args):
            vals = list(args[0]) if len(args) == 1 else list(args)
            out = vals[0]
            for v in vals[1:]:
                out = self.binop("minimum" if func is min else "maximum", out, v, e)
            return out
        if func is abs and args and isinstance(args[0], Node):
            return self.unary("abs", args[0], e)
        if func in (float, int, bool) and args and isinstance(args[0], Node):
            return self.cast(args[0], {float: torch.float32, int: torch.int32, bool: torch.bool}[func])
        if func is len and args and isinstance(args[0], TileInfo):
            raise self.error("D003", e, "len() of a tile", hint="use tile.end - tile.begin or tile.block_size")
        if isinstance(func, type) and issubclass(func, BaseException):
            return func(*args, **kwargs)
        if any(isinstance(a, TileInfo) for a in args) and func in (int, float, range, len, bool, str):
            raise self.error("D003", e, "a tile used as a Python number", hint="use tile.begin / tile.end")
        if isinstance(func, types.FunctionType) and not _is_library(func):
            return self.inline(func, args, kwargs, e)
        if any(isinstance(a, (Node, TileInfo, HostTensor)) for a in list(args) + list(kwargs.values())):
            name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
            raise self.error("D004", e, f"{name}() cannot be called on values inside a tile loop",
                             hint="only torch ops, dt.* and your own helper functions are compiled")
        try:
            return func(*args, **kwargs)
        except TraceError:
            raise
        except Exception as ex:  # noqa: BLE001
            raise self.error("D004", e, f"calling {getattr(func, '__name__', func)!r} while compiling the "
                                        f"kernel failed: {type(ex).__name__}: {ex}") from None

    def inline(self, fn, args, kwargs, e):
        """A user helper: its body is traced at the call site."""
        try:
            src_lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            raise self.error("D004", e, f"cannot read the source of {fn.__name__}() to compile it") from None
        if self._inline_depth > 16:
            raise self.error("D004", e, "helper functions nest too deeply (recursion?)")
        text = textwrap.dedent("".join(src_lines))
        tree = ast.parse(text)
        fdef = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if fdef is None:
            raise self.error("D004", e, f"{fn.__name__} is not a plain function")
        ast.increment_lineno(tree, start - 1)
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as ex:
            raise self.error("D004", e, f"{fn.__name__}(): {ex}") from None
        bound.apply_defaults()
        saved_env, saved_host, saved_globals, saved_cache = self.env, self.host, self.globals, self._host_cache
        self.env = dict(bound.arguments)
        self.host = {}
        self.globals = dict(fn.__globals__)
        if fn.__closure__:
            for nm, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.globals[nm] = cell.cell_contents
                except ValueError:
                    pass
        self._host_cache = {}
        self._inline_depth += 1
        body = fdef.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        result = None
        try:
            self.stmts(body)
        except _Return as r:
            result = r.value
        finally:
            self._inline_depth -= 1
            self.env, self.host, self.globals, self._host_cache = saved_env, saved_host, saved_globals, saved_cache
        return result

    def host_method(self, ht: HostTensor, name, args, kwargs, e):
        t = ht.t
        if name == "size":
            if not args:
                return tuple(self.size_of(ht, d) for d in range(t.dim()))
            d = self.static_int(args[0], e, "a dimension")
            return self.size_of(ht, d % t.dim())
        if name == "stride":
            if not args:
                return tuple(self.size_of(ht, d, "stride") for d in range(t.dim()))
            d = self.static_int(args[0], e, "a dimension")
            return self.size_of(ht, d % t.dim(), "stride")
        if name == "dim":
            return t.dim()
        if name == "numel":
            return t.numel()
        raise self.error("D004", e, f"{ht.name}.{name}() inside a tile loop")

    # ------------------------------------------------------------------ indexing
    def index_items(self, ht: HostTensor, slice_node, e):
        raw = self.eval(slice_node)
        idx = list(raw) if isinstance(raw, tuple) else [raw]
        flat = []
        for it in idx:
            if isinstance(it, (tuple, list)) and all(isinstance(x, (TileInfo, Node, int, slice, type(None)))
                                                     for x in it):
                flat.extend(it)
            else:
                flat.append(it)
        return self.items_for(ht, flat, e)

    def items_for(self, ht: HostTensor, flat: list, e):
        rank = ht.t.dim()
        n_real = sum(1 for it in flat if it is not None and it is not Ellipsis)
        if any(it is Ellipsis for it in flat):
            pos = flat.index(Ellipsis)
            flat = flat[:pos] + [slice(None)] * (rank - n_real) + flat[pos + 1:]
            n_real = rank
        if n_real != rank:
            parts = []
            for it in flat:
                parts.append(_index_text(it))
            raise self.error("D002", e, f"{ht.name} has rank {rank} (shape {tuple(ht.t.shape)}) but is indexed with "
                                        f"{n_real} ind{'ex' if n_real == 1 else 'ices'} [{', '.join(parts)}]",
                             hint="index every dimension (`:` for a whole one)")
        items = []
        d = 0
        for it in flat:
            if it is None:
                items.append(("none",))
                continue
            size = ht.t.shape[d]
            if isinstance(it, TileInfo):
                items.append(("tile", it, d))
            elif isinstance(it, slice):
                if it.start is not None or it.stop is not None or it.step is not None:
                    raise self.error("D004", e, "only `:` (the whole dimension) is supported as a slice",
                                     hint="tile the range: `for t in dt.tile(begin, end)` then x[t]")
                sz = self.size_of(ht, d)
                r = self.rdim(int(ht.t.shape[d]), sz, e)
                items.append(("red", r, d))
            elif isinstance(it, bool):
                raise self.error("D004", e, "indexing with a bool")
            elif isinstance(it, int):
                if not -size <= it < max(size, 1):
                    raise self.error("D004", e, f"index {it} is out of range for dimension {d} of {ht.name} "
                                                f"(size {size})")
                items.append(("scalar", it % size if size else it, d))
            elif isinstance(it, Node):
                if not _is_int_dtype(it.dtype):
                    raise self.error("D004", e, f"indexing {ht.name} with a {it.dtype} value (indices must be ints)")
                if it.op == "tile_index":
                    items.append(("tile", it.attrs["tile"], d))
                elif it.dims:
                    items.append(("vec", it, d))
                else:
                    items.append(("scalar", it, d))
            elif isinstance(it, HostTensor):
                raise self.error("D004", e, f"indexing with the tensor {it.name}: load it with tiles first")
            else:
                raise self.error("D004", e, f"cannot index {ht.name} with {_describe(it)}")
            d += 1
        return items

    def _strides(self, ht: HostTensor, items):
        """Dynamic shapes: the strides the access uses are run-time parameters."""
        if self.static:
            return
        for it in items:
            if it[0] != "none":
                self.size_of(ht, it[2], "stride")

    def _items_dims(self, items):
        dims = []
        for it in items:
            k = it[0]
            if k == "none":
                dims.append(ONE)
            elif k in ("tile", "red"):
                dims.append(it[1])
            elif k == "vec":
                dims.extend(it[1].dims)
        return tuple(dims)

    def load(self, ht: HostTensor, items, e) -> Node:
        dims = self._items_dims(items)
        self._check_unique_dims(dims, e)
        ht.arg.loaded = True
        self._strides(ht, items)
        n = Node("load", dims=dims, dtype=ht.t.dtype, attrs={"tensor": ht.arg, "items": items}, pad=0)
        self.prog.dims_used.add(dims)
        return self.emit(n)

    def _check_unique_dims(self, dims, e):
        seen = set()
        for d in dims:
            if isinstance(d, TileInfo):
                if d.id in seen:
                    raise self.error("D003", e, f"tile {d.name!r} indexes two dimensions of the same access")
                seen.add(d.id)

    def store(self, ht: HostTensor, items, v, e):
        dims = self._items_dims(items)
        if isinstance(v, TileInfo):
            raise self.error("D003", e, "storing a tile", hint="store tile.index")
        if isinstance(v, HostTensor):
            raise self.error("D004", e, f"storing the whole tensor {v.name}: index it with tiles")
        if not isinstance(v, (Node, bool, int, float)):
            raise self.error("D004", e, f"cannot store {_describe(v)}")
        if isinstance(v, Node):
            self._check_store_dims(v.dims, dims, ht, e)
        ht.arg.stored = True
        self._strides(ht, items)
        n = Node("store", [v], dims=(), dtype=None, attrs={"tensor": ht.arg, "items": items, "dims": dims})
        self.prog.dims_used.add(dims)
        self.emit(n)

    def _check_store_dims(self, vdims, dims, ht, e):
        if len(vdims) > len(dims):
            raise self.error(SHAPE_CODE, e, f"storing a value of shape {_dims_text(vdims)} into "
                                            f"{ht.name}[{_dims_text(dims)[1:-1]}]",
                             hint="the value has more dimensions than the indexed region")
        for a, b in zip(reversed(vdims), reversed(dims)):
            if a is ONE or a is b:
                continue
            raise self.error(SHAPE_CODE, e, f"storing a value of shape {_dims_text(vdims)} into "
                                            f"{ht.name}[{_dims_text(dims)[1:-1]}]",
                             hint="the dimensions must match (transpose with .T / permute if needed)")

    def block_index(self, v: Node, slice_node, e):
        raw = self.eval(slice_node)
        idx = list(raw) if isinstance(raw, tuple) else [raw]
        real = [it for it in idx if it is not None and it is not Ellipsis]
        if any(not (isinstance(it, slice) and it == slice(None)) for it in real):
            raise self.error("D004", e, "indexing a block inside the kernel: only `:` and None are supported",
                             hint="e.g. v[:, None]")
        if Ellipsis in idx:
            pos = idx.index(Ellipsis)
            idx = idx[:pos] + [slice(None)] * (len(v.dims) - len(real)) + idx[pos + 1:]
            real = [it for it in idx if it is not None]
        if len(real) > len(v.dims):
            raise self.error("D002", e, f"a block of rank {len(v.dims)} indexed with {len(real)} indices")
        idx = idx + [slice(None)] * (len(v.dims) - len(real))
        out = v
        pos = 0
        for it in idx:
            if it is None:
                out = self.expand_dims(out, pos, e)
            pos += 1
        return out

    # ------------------------------------------------------------------ elementwise
    def binop(self, op, a, b, src):
        if op is None:
            raise self.error("D004", src, "unsupported operator")
        for v in (a, b):
            if isinstance(v, TileInfo):
                raise self.error("D003", src, f"arithmetic on tile {v.name!r}",
                                 hint="use tile.index (a tensor) or tile.begin / tile.end")
            if isinstance(v, HostTensor):
                raise self.error("D004", src, f"{v.name} used whole inside a tile loop",
                                 hint=f"index it with tiles: {v.name}[tile, ...]")
        if not isinstance(a, Node) and not isinstance(b, Node):
            try:
                return _PYOPS[op](a, b)
            except Exception as ex:  # noqa: BLE001
                raise self.error("D004", src, f"{type(ex).__name__}: {ex}") from None
        if op == "matmul":
            return self.matmul(a, b, None, src)
        if op in ("minimum", "maximum"):
            return self.minmax(op, a, b, src)
        for v in (a, b):
            if not isinstance(v, (Node, bool, int, float)):
                raise self.error("D004", src, f"cannot combine {_describe(v)} with a value inside the kernel")
        dims = _broadcast_dims(_dims(a), _dims(b))
        if dims is None:
            raise self.error(SHAPE_CODE, src, f"shapes {_dims_text(_dims(a))} and {_dims_text(_dims(b))} do not "
                                              "broadcast together")
        weak = _all_weak(a, b)
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            ct = result_type(a, b)
            a2, b2 = self.coerce(a, ct), self.coerce(b, ct)
            n = Node("binary", [a2, b2], dims=dims, dtype=torch.bool, attrs={"op": op}, weak=weak)
            n.pad = _fold_pad(op, a2, b2)
            return self.emit(n)
        if op in ("and", "or", "xor"):
            rt = result_type(a, b)
            if rt.is_floating_point:
                raise self.error("D004", src, "bitwise operators on floating-point values")
            a2, b2 = self.coerce(a, rt), self.coerce(b, rt)
            n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=weak)
            return self.emit(n)
        if op in ("shl", "shr"):
            rt = result_type(a, b)
            if rt.is_floating_point:
                raise self.error("D004", src, "shifts on floating-point values")
            n = Node("binary", [self.coerce(a, rt), self.coerce(b, rt)], dims=dims, dtype=rt, attrs={"op": op},
                     weak=weak)
            return self.emit(n)
        rt = result_type(a, b)
        if weak and isinstance(a, Node) and isinstance(b, Node) or weak and (isinstance(a, Node) or
                                                                         isinstance(b, Node)):
            # scalars on both sides (tile.begin, parameters, literals): newt's scalar promotion, no casts
            nodes = [v for v in (a, b) if isinstance(v, Node)]
            floating = any(v.dtype.is_floating_point for v in nodes) or any(isinstance(v, float) for v in (a, b))
            wide = any(v.dtype == torch.int64 for v in nodes)
            rt = torch.float32 if floating or op == "truediv" else (torch.int64 if wide else torch.int32)
            if op == "pow":
                rt = torch.float32
        elif op == "truediv" and not rt.is_floating_point:
            rt = torch.get_default_dtype()
        if op == "pow":
            if isinstance(b, (int, float)) and not isinstance(b, bool) and float(b) == 2.0 and isinstance(a, Node):
                a2 = self.coerce(a, rt)
                return self.emit(Node("binary", [a2, a2], dims=dims, dtype=rt, attrs={"op": "mul"}, weak=weak))
            if isinstance(b, (int, float)) and float(b) == 0.5 and isinstance(a, Node):
                return self.unary("sqrt", self.coerce(a, rt if rt.is_floating_point else torch.float32), src)
            if not rt.is_floating_point:
                raise self.error("D004", src, "** on integer values inside the kernel (use a float exponent)")
        a2, b2 = self.coerce(a, rt), self.coerce(b, rt)
        if op in ("floordiv", "mod") and rt.is_floating_point:
            q = self.unary("floor", self.emit(Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": "truediv"},
                                                   weak=weak)), src)
            if op == "floordiv":
                return q
            prod = self.emit(Node("binary", [q, b2], dims=dims, dtype=rt, attrs={"op": "mul"}, weak=weak))
            return self.emit(Node("binary", [a2, prod], dims=dims, dtype=rt, attrs={"op": "sub"}, weak=weak))
        n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=weak)
        n.pad = _fold_pad(op, a2, b2)
        if isinstance(a2, Node) and isinstance(b2, Node) and a2.host_value is not None and \
                b2.host_value is not None and op in ("add", "sub", "mul", "floordiv", "mod"):
            try:
                n.host_value = _PYOPS[op](a2.host_value, b2.host_value)
                n.guards = tuple(a2.guards) + tuple(b2.guards)
            except Exception:  # noqa: BLE001
                pass
        elif isinstance(a2, Node) and a2.host_value is not None and _is_py_number(b2) and \
                op in ("add", "sub", "mul", "floordiv", "mod"):
            try:
                n.host_value = _PYOPS[op](a2.host_value, b2)
                n.guards = tuple(a2.guards)
            except Exception:  # noqa: BLE001
                pass
        elif isinstance(b2, Node) and b2.host_value is not None and _is_py_number(a2) and \
                op in ("add", "sub", "mul", "floordiv", "mod"):
            try:
                n.host_value = _PYOPS[op](a2, b2.host_value)
                n.guards = tuple(b2.guards)
            except Exception:  # noqa: BLE001
                pass
        if n.host_value is not None and n.dims == ():
            return n  # a run-time scalar computed from parameters: rendered inline
        return self.emit(n)

    def coerce(self, v, dtype):
        """Cast a node operand to ``dtype`` (Python numbers stay weak literals)."""
        if isinstance(v, Node):
            if v.dtype == dtype:
                return v
            if v.weak and dtype in (torch.int32, torch.int64) and v.dtype in (torch.int32, torch.int64) and \
                    not v.dims:
                return v  # newt widens int scalars by itself
            if v.weak and v.op == "const":
                return v.attrs["value"] if not dtype.is_floating_point else float(v.attrs["value"])
            return self.cast(v, dtype)
        if isinstance(v, bool) and dtype != torch.bool:
            return int(v)
        if dtype.is_floating_point and isinstance(v, int):
            return float(v)
        return v

    def cast(self, v, dtype) -> Node:
        if not isinstance(v, Node):
            return self.const_node(v, dtype)
        if v.dtype == dtype:
            return v
        n = Node("cast", [v], dims=v.dims, dtype=dtype, weak=False)
        if v.pad is not None:
            n.pad = v.pad
        if v.host_value is not None:
            n.host_value = v.host_value
            n.guards = v.guards
        if v.op == "const":
            return self.const_node(v.attrs["value"], dtype)
        return self.emit(n)

    def minmax(self, op, a, b, src):
        dims = _broadcast_dims(_dims(a), _dims(b))
        if dims is None:
            raise self.error(SHAPE_CODE, src, f"shapes {_dims_text(_dims(a))} and {_dims_text(_dims(b))} do not "
                                              "broadcast together")
        rt = result_type(a, b)
        a2, b2 = self.coerce(a, rt), self.coerce(b, rt)
        n = Node("binary", [a2, b2], dims=dims, dtype=rt, attrs={"op": op}, weak=_all_weak(a, b))
        n.pad = _fold_pad(op, a2, b2)
        return self.emit(n)

    def unary(self, fn, v, src, **kw):
        if isinstance(v, TileInfo):
            raise self.error("D003", src, "a tile used as a value", hint="use tile.index")
        if not isinstance(v, Node):
            if isinstance(v, (int, float)):
                v = self.const_node(v)
            else:
                raise self.error("D004", src, f"{fn}() of {_describe(v)}")
        dtype = v.dtype
        if fn in ("floor", "ceil") and not dtype.is_floating_point:
            return v  # torch: identity on integers
        if fn in ops.FLOAT_UNARY and not dtype.is_floating_point:
            v = self.cast(v, torch.get_default_dtype())
            dtype = v.dtype
        compute = dtype
        if dtype in _LOW_PRECISION and fn in ops.FLOAT_UNARY:
            compute = torch.float32
            v = self.cast(v, compute)
        if fn == "gelu":
            out = self._gelu(v, kw.get("approximate", "none"), src)
        elif fn == "softplus":
            beta = kw.get("beta", 1.0)
            threshold = kw.get("threshold", 20.0)
            bx = self.binop("mul", v, beta, src) if beta != 1.0 else v
            soft = self.binop("truediv", self.unary("log1p", self.unary("exp", bx, src), src), beta, src)
            out = self.where(self.binop("gt", bx, threshold, src), v, soft, src)
        elif fn == "elu":
            alpha = kw.get("alpha", 1.0)
            out = self.where(self.binop("gt", v, 0, src), v,
                             self.binop("mul", alpha, self.unary("expm1", v, src), src), src)
        elif fn == "sign":
            pos = self.cast(self.binop("gt", v, 0, src), v.dtype)
            neg = self.cast(self.binop("lt", v, 0, src), v.dtype)
            out = self.binop("sub", pos, neg, src)
        elif fn == "isnan":
            out = self.binop("ne", v, v, src)
        elif fn == "isinf":
            out = self.binop("eq", self.unary("abs", v, src), float("inf"), src)
        else:
            if fn not in ops.UNARY:
                raise self.error("D004", src, f"{fn} is not supported inside a tile loop")
            n = Node("unary", [v], dims=v.dims, dtype=torch.bool if fn == "logical_not" else compute,
                     attrs={"fn": fn}, weak=v.weak)
            if v.pad is not None and not isinstance(v.pad, bool):
                n.pad = _fold_unary(fn, v.pad)
            out = self.emit(n)
        if compute != dtype and isinstance(out, Node) and out.dtype == compute:
            out = self.cast(out, dtype)
        return out

    def _gelu(self, v, approximate, src):
        if approximate == "tanh":
            x3 = self.binop("mul", self.binop("mul", v, v, src), v, src)
            inner = self.binop("mul", 0.7978845608028654, self.binop("add", v, self.binop("mul", 0.044715, x3, src),
                                                                     src), src)
            return self.binop("mul", self.binop("mul", 0.5, v, src),
                              self.binop("add", 1.0, self.unary("tanh", inner, src), src), src)
        return self.binop("mul", self.binop("mul", 0.5, v, src),
                          self.binop("add", 1.0, self.unary("erf", self.binop("mul", v, 0.7071067811865476, src),
                                                            src), src), src)

    def where(self, c, a, b, src):
        if isinstance(c, (bool, int)) and not isinstance(c, Node):
            return a if c else b
        c = self.to_bool(c, src)
        dims = _broadcast_dims(_dims(c), _broadcast_dims(_dims(a), _dims(b)) or ())
        if dims is None or _broadcast_dims(_dims(a), _dims(b)) is None:
            raise self.error(SHAPE_CODE, src, f"torch.where operands do not broadcast: {_dims_text(_dims(c))}, "
                                              f"{_dims_text(_dims(a))}, {_dims_text(_dims(b))}")
        rt = result_type(a, b)
        a2, b2 = self.coerce(a, rt), self.coerce(b, rt)
        n = Node("where", [c, a2, b2], dims=dims, dtype=rt, weak=_all_weak(a, b))
        if isinstance(c, Node) and c.pad is False and isinstance(b2, Node) and b2.pad is not None:
            n.pad = b2.pad
        elif isinstance(c, Node) and c.pad is False and _is_py_number(b2):
            n.pad = b2
        return self.emit(n)

    # ------------------------------------------------------------------ shapes
    def expand_dims(self, v: Node, axis: int, src) -> Node:
        dims = list(v.dims)
        if axis < 0:
            axis += len(dims) + 1
        if not 0 <= axis <= len(dims):
            raise self.error("D004", src, f"unsqueeze axis {axis} out of range for rank {len(dims)}")
        dims.insert(axis, ONE)
        n = Node("expand_dims", [v], dims=dims, dtype=v.dtype, attrs={"axis": axis}, weak=v.weak, pad=v.pad)
        return self.emit(n)

    def squeeze(self, v: Node, axis, src) -> Node:
        dims = list(v.dims)
        if axis is None:
            new = [d for d in dims if d is not ONE]
        else:
            axis = _norm_axis(axis, len(dims), self, src)
            if dims[axis] is not ONE:
                return v
            new = dims[:axis] + dims[axis + 1:]
        if len(new) == len(dims):
            return v
        return self.emit(Node("reshape", [v], dims=new, dtype=v.dtype, weak=v.weak, pad=v.pad))

    def permute(self, v: Node, order, src) -> Node:
        if sorted(order) != list(range(len(v.dims))):
            raise self.error("D004", src, f"permute order {order} does not fit a block of rank {len(v.dims)}")
        if list(order) == list(range(len(v.dims))):
            return v
        dims = [v.dims[i] for i in order]
        return self.emit(Node("permute", [v], dims=dims, dtype=v.dtype, attrs={"order": list(order)},
                              weak=v.weak, pad=v.pad))

    def shape_dims(self, shape, src, what="a shape") -> tuple:
        """Dims from a list of tiles / block sizes / ints (dt.zeros([tile_m, tile_n]))."""
        if isinstance(shape, (TileInfo, int, Node)):
            shape = [shape]
        if not isinstance(shape, (list, tuple, torch.Size)):
            raise self.error("D004", src, f"{what} must be a list of tiles and ints, got {_describe(shape)}")
        dims = []
        for s in shape:
            if isinstance(s, (list, tuple)):
                dims.extend(self.shape_dims(s, src, what))
                continue
            if isinstance(s, TileInfo):
                dims.append(s)
            elif isinstance(s, Node) and s.op == "tile_block_size":
                dims.append(s.attrs["tile"])
            elif isinstance(s, BlockSizeInt):
                t = next((t for t in self.prog.tiles if t.slot == s.slot), None)
                if t is None:
                    raise self.error("D004", src, "a registered block size used as a dimension before any tile "
                                                  "uses it", hint="use the tile itself: dt.zeros([tile, ...])")
                dims.append(t)
            else:
                n = self.static_int(s, src, "a dimension size")
                if n == 1:
                    dims.append(ONE)
                elif n < 1:
                    raise self.error("D004", src, f"a dimension of size {n}")
                else:
                    dims.append(self.rdim(n, n, src))
        return tuple(dims)

    def full(self, shape, value, dtype, src) -> Node:
        dims = self.shape_dims(shape, src)
        if isinstance(value, Node):
            if value.dims:
                raise self.error("D004", src, "the fill value must be a scalar")
            dt = dtype or value.dtype
            v = self.cast(value, dt) if value.dtype != dt else value
            n = Node("expand", [v], dims=dims, dtype=dt)
            return self.emit(n)
        dt = dtype or torch.float32
        n = Node("full", dims=dims, dtype=dt, attrs={"value": value}, pad=value)
        self.prog.dims_used.add(dims)
        return self.emit(n)

    def arange(self, args, kwargs, src) -> Node:
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("device", None)
        if kwargs:
            raise self.error("D004", src, f"arange: unsupported arguments {sorted(kwargs)}")
        vals = [self.static_int(a, src, "an arange bound") for a in args]
        if len(vals) == 1:
            lo, hi = 0, vals[0]
        elif len(vals) == 2:
            lo, hi = vals
        else:
            raise self.error("D004", src, "arange with a step is not supported inside a tile loop")
        r = self.rdim(hi - lo, hi - lo, src) if hi - lo != 1 else None
        dims = (r,) if r is not None else (ONE,)
        n = self.emit(Node("arange", dims=dims, dtype=torch.int32, attrs={"start": lo, "rdim": r}))
        if dtype is not None and dtype != torch.int32:
            return self.cast(n, dtype)
        return n

    # ------------------------------------------------------------------ reductions
    def reduce(self, kind, v, dim, keepdim, src, dtype=None):
        if not isinstance(v, Node):
            raise self.error("D004", src, f"{kind}() of {_describe(v)}")
        nd = len(v.dims)
        if dim is None:
            axes = list(range(nd))
        elif isinstance(dim, (list, tuple)):
            axes = [_norm_axis(self.static_int(d, src, "a dimension"), nd, self, src) for d in dim]
        else:
            axes = [_norm_axis(self.static_int(dim, src, "a dimension"), nd, self, src)]
        axes = sorted(set(axes), reverse=True)
        if kind in ("mean", "var", "std"):
            if not v.dtype.is_floating_point:
                raise self.error("D004", src, f"{kind}() of integer values (torch requires a float tensor)")
        if kind == "mean":
            s = self.reduce("sum", v, axes, keepdim, src, dtype=torch.float32 if v.dtype in _LOW_PRECISION else None)
            cnt = self.count(v, axes, src)
            out = self.binop("truediv", s, cnt, src)
            return self.cast(out, dtype or v.dtype) if out.dtype != (dtype or v.dtype) else out
        out = v
        if kind in ("sum", "prod") and dtype is None:
            if v.dtype in _LOW_PRECISION:
                acc_dtype, res_dtype = torch.float32, v.dtype
            elif not v.dtype.is_floating_point:
                acc_dtype = res_dtype = torch.int64
            else:
                acc_dtype = res_dtype = v.dtype
        elif kind in ("sum", "prod"):
            acc_dtype = res_dtype = dtype
        else:
            acc_dtype = res_dtype = v.dtype
        if out.dtype != acc_dtype:
            out = self.cast(out, acc_dtype)
        for ax in axes:
            d = out.dims[ax]
            if keepdim:
                dims = out.dims[:ax] + (ONE,) + out.dims[ax + 1:]
            else:
                dims = out.dims[:ax] + out.dims[ax + 1:]
            if d is ONE:
                out = self.emit(Node("reshape", [out], dims=dims, dtype=out.dtype, pad=out.pad)) \
                    if not keepdim else out
                continue
            rk = {"sum": "sum", "prod": "prod", "amax": "max", "amin": "min", "max": "max", "min": "min",
                  "argmax": "argmax", "argmin": "argmin"}[kind]
            rdt = torch.int64 if rk in ("argmax", "argmin") else out.dtype
            out = self.emit(Node("reduce", [out], dims=dims, dtype=rdt,
                                 attrs={"kind": rk, "axis": ax, "dim": d, "keepdim": keepdim}))
            if rk in ("argmax", "argmin"):
                break
        if out.dtype != res_dtype and kind not in ("argmax", "argmin"):
            out = self.cast(out, res_dtype)
        return out

    def count(self, v: Node, axes, src):
        total = 1
        for ax in axes:
            d = v.dims[ax]
            if isinstance(d, RInfo):
                total = self.binop("mul", total, d.size_expr if isinstance(d.size_expr, int) else d.size_expr, src)
            elif isinstance(d, TileInfo):
                ext = self.binop("sub", self.tile_attr(d, "end", src), self.tile_attr(d, "begin", src), src)
                if d.kind == "grid":
                    ext = 1
                total = self.binop("mul", total, ext, src)
        return total

    def var(self, v, dim, correction, keepdim, src, std=False):
        if not v.dtype.is_floating_point:
            raise self.error("D004", src, "var() of integer values")
        x = self.cast(v, torch.float32) if v.dtype in _LOW_PRECISION else v
        nd = len(v.dims)
        axes = list(range(nd)) if dim is None else (
            [_norm_axis(self.static_int(d, src, "a dimension"), nd, self, src) for d in dim]
            if isinstance(dim, (list, tuple)) else [_norm_axis(self.static_int(dim, src, "a dimension"), nd, self,
                                                               src)])
        mean = self.reduce("mean", x, axes, True, src)
        d = self.binop("sub", x, mean, src)
        ssq = self.reduce("sum", self.binop("mul", d, d, src), axes, keepdim, src)
        n = self.count(v, axes, src)
        denom = self.binop("sub", n, correction, src) if correction else n
        out = self.binop("truediv", ssq, denom, src)
        if std:
            out = self.unary("sqrt", out, src)
        return self.cast(out, v.dtype) if out.dtype != v.dtype else out

    def softmax(self, v, dim, src, log=False, dtype=None):
        if dim is None:
            raise self.error("D004", src, "softmax needs dim=")
        x = v
        if dtype is not None:
            x = self.cast(x, dtype)
        out_dtype = x.dtype
        if not x.dtype.is_floating_point:
            x = self.cast(x, torch.float32)
            out_dtype = torch.float32
        if x.dtype in _LOW_PRECISION:
            x = self.cast(x, torch.float32)
        m = self.reduce("amax", x, dim, True, src)
        z = self.binop("sub", x, m, src)
        e = self.unary("exp", z, src)
        s = self.reduce("sum", e, dim, True, src)
        if log:
            out = self.binop("sub", z, self.unary("log", s, src), src)
        else:
            out = self.binop("truediv", e, s, src)
        return self.cast(out, out_dtype) if out.dtype != out_dtype else out

    def logsumexp(self, v, dim, keepdim, src):
        x = self.cast(v, torch.float32) if v.dtype in _LOW_PRECISION or not v.dtype.is_floating_point else v
        m = self.reduce("amax", x, dim, True, src)
        mz = self.where(self.unary("isinf", m, src), 0.0, m, src)
        s = self.reduce("sum", self.unary("exp", self.binop("sub", x, mz, src), src), dim, True, src)
        out = self.binop("add", self.unary("log", s, src), mz, src)
        if not keepdim:
            out = self.squeeze(out, dim if not isinstance(dim, (list, tuple)) else dim[0], src)
        return self.cast(out, v.dtype) if v.dtype.is_floating_point and out.dtype != v.dtype else out

    # ------------------------------------------------------------------ matmul
    def matmul(self, a, b, acc, src, out_dtype=None):
        for v in (a, b):
            if not isinstance(v, Node):
                raise self.error("D004", src, f"matmul of {_describe(v)}")
        if len(a.dims) not in (2, 3) or len(b.dims) not in (2, 3) or len(a.dims) != len(b.dims):
            raise self.error("D004", src, f"matmul of blocks of rank {len(a.dims)} and {len(b.dims)}: "
                                          "2-D (or batched 3-D) operands are supported")
        ka, kb = a.dims[-1], b.dims[-2]
        if ka is not kb:
            raise self.error(SHAPE_CODE, src, f"matmul inner dimensions differ: {_dims_text(a.dims)} @ "
                                              f"{_dims_text(b.dims)}",
                             hint="index both operands with the same tile (x[tile_m, tile_k] @ y[tile_k, tile_n])")
        if len(a.dims) == 3 and a.dims[0] is not b.dims[0] and ONE not in (a.dims[0], b.dims[0]):
            raise self.error(SHAPE_CODE, src, "batched matmul with different batch dimensions")
        dims = tuple(a.dims[:-2]) + (a.dims[-2], b.dims[-1]) if len(a.dims) == 2 else \
            (a.dims[0] if a.dims[0] is not ONE else b.dims[0], a.dims[-2], b.dims[-1])
        for d in (a.dims[-2], ka, b.dims[-1]):
            if isinstance(d, (TileInfo, RInfo)):
                d.used_in_dot = True
                if isinstance(d, TileInfo):
                    d.dot_role = "k" if d is ka else (d.dot_role or "mn")
            if d is ONE:
                raise self.error("D004", src, "a matmul dimension of size 1 (tensor cores need at least 16)")
        if isinstance(ka, RInfo):
            ka.not_rollable("used as the inner dimension of a matmul")
        in_dtype = result_type(a, b)
        if in_dtype == torch.float64:
            raise self.error("D004", src, "fp64 matmul is not supported on the tensor cores")
        if a.dtype != in_dtype:
            a = self.cast(a, in_dtype)
        if b.dtype != in_dtype:
            b = self.cast(b, in_dtype)
        if in_dtype.is_floating_point:
            acc_dtype = torch.float32
        elif in_dtype in (torch.int8, torch.uint8):
            acc_dtype = torch.int32
        else:
            raise self.error("D004", src, f"matmul of {in_dtype} values")
        self.prog.has_dot = True
        acc_node = None
        if acc is not None:
            if not isinstance(acc, Node):
                acc = self.full(list(dims), acc, acc_dtype, src)
            if _broadcast_dims(acc.dims, dims) != dims:
                raise self.error(SHAPE_CODE, src, f"the accumulator has shape {_dims_text(acc.dims)} but the "
                                                  f"product {_dims_text(dims)}")
            acc_node = acc if acc.dtype == acc_dtype and acc.dims == dims else \
                self.materialize(self.cast(acc, acc_dtype) if acc.dtype != acc_dtype else acc, dims, acc_dtype, src)
            if acc_node.block is None and acc_node.op == "expand":
                self.emit(acc_node)
        n = self.emit(Node("dot", [a, b] + ([acc_node] if acc_node is not None else []), dims=dims,
                           dtype=acc_dtype, attrs={"precision": self.prog.dot_precision if in_dtype == torch.float32
                                                   else None}))
        self.prog.dims_used.add(dims)
        if acc is not None:
            target = acc.dtype
        elif out_dtype == "acc":
            target = acc_dtype
        else:
            target = out_dtype or in_dtype
        return self.cast(n, target) if target != n.dtype else n

    # ------------------------------------------------------------------ dt.* calls
    def dt_call(self, name, args, kwargs, e):
        if name in ("zeros", "full"):
            if name == "zeros":
                shape = args[0] if args else kwargs.pop("shape")
                dtype = args[1] if len(args) > 1 else kwargs.pop("dtype", None)
                value = 0
            else:
                shape = args[0] if args else kwargs.pop("shape")
                value = args[1] if len(args) > 1 else kwargs.pop("value")
                dtype = args[2] if len(args) > 2 else kwargs.pop("dtype", None)
            return self.full(shape, value, dtype, e)
        if name == "arange":
            return self.arange(list(args), dict(kwargs), e)
        if name == "dot":
            a, b = args[0], args[1]
            acc = args[2] if len(args) > 2 else kwargs.get("acc")
            return self.matmul(a, b, acc, e, out_dtype=kwargs.get("out_dtype") or "acc")
        if name == "atomic_add":
            target = args[0] if args else kwargs.get("target")
            index = args[1] if len(args) > 1 else kwargs.get("index")
            value = args[2] if len(args) > 2 else kwargs.get("value")
            sem = args[3] if len(args) > 3 else kwargs.get("sem", "relaxed")
            if not isinstance(target, HostTensor):
                raise self.error("D004", e, "dt.atomic_add needs a tensor of the host code as its target")
            idx = list(index) if isinstance(index, (list, tuple)) else [index]
            items = self.items_for(target, idx, e)
            dims = self._items_dims(items)
            if isinstance(value, Node):
                self._check_store_dims(value.dims, dims, target, e)
            if sem not in ("relaxed", "acquire", "release", "acq_rel"):
                raise self.error("D004", e, f"dt.atomic_add: unknown sem {sem!r}")
            target.arg.atomic = True
            self._strides(target, items)
            self.prog.has_atomic = True
            self.emit(Node("atomic_add", [value], dims=(), attrs={"tensor": target.arg, "items": items,
                                                                   "dims": dims, "sem": sem}))
            return None
        if name in ("relu", "sigmoid", "silu", "tanh", "exp"):
            return self.unary(name, args[0], e)
        if name == "gelu":
            return self.unary("gelu", args[0], e, approximate=kwargs.get("approximate", "none"))
        if name in ("cdiv", "next_power_of_2"):
            if any(isinstance(a, Node) for a in args):
                if name == "cdiv":
                    a, b = args
                    return self.binop("floordiv", self.binop("sub", self.binop("add", a, b, e), 1, e), b, e)
                raise self.error("D004", e, "dt.next_power_of_2 needs a value known when compiling")
            return getattr(L, name)(*args)
        if name in ("tile", "grid"):
            raise self.error("D003", e, f"dt.{name}(...) must be the iterable of a for loop")
        if name in ops.DT_HOST_ONLY:
            raise self.error("D004", e, f"dt.{name} belongs in the host code, before the tile loops")
        raise self.error("D004", e, f"dt.{name} cannot be used inside a tile loop")

    # ------------------------------------------------------------------ torch functions and methods
    def torch_call(self, tname, args, kwargs, e):
        kind, name = tname
        table = ops.FUNCTIONAL if kind == "F" else ops.TORCH_FUNCTIONS
        op = table.get(name)
        if op is None:
            prefix = "torch.nn.functional." if kind == "F" else "torch."
            raise self.error("D004", e, f"{prefix}{name} is not supported inside a tile loop",
                             hint="see docs/deuteron.md for the supported ops")
        if any(isinstance(a, HostTensor) for a in list(args) + list(kwargs.values())) and op not in (
                "zeros", "ones", "full", "arange"):
            ht = next(a for a in list(args) + list(kwargs.values()) if isinstance(a, HostTensor))
            raise self.error("D004", e, f"{ht.name} used whole inside a tile loop",
                             hint=f"index it with tiles: {ht.name}[tile, ...]")
        if op in ("zeros", "ones", "full"):
            dtype = kwargs.pop("dtype", None)
            kwargs.pop("device", None)
            kwargs.pop("layout", None)
            if op == "full":
                shape = args[0] if args else kwargs.pop("size")
                value = args[1] if len(args) > 1 else kwargs.pop("fill_value")
            else:
                shape = args[0] if len(args) == 1 else list(args)
                value = 0 if op == "zeros" else 1
            return self.full(shape, value, dtype, e)
        if op in ("zeros_like", "ones_like", "full_like"):
            x = args[0]
            value = 0 if op == "zeros_like" else (1 if op == "ones_like" else (args[1] if len(args) > 1
                                                                               else kwargs.pop("fill_value")))
            dtype = kwargs.get("dtype") or x.dtype
            return self.full(list(self.dim_value(d) for d in x.dims), value, dtype, e) if x.dims else \
                self.cast(value, dtype)
        if op == "arange":
            return self.arange(list(args), dict(kwargs), e)
        x = args[0] if args else kwargs.pop("input", None)
        return self.method(x, op, list(args[1:]), kwargs, e, canonical=True)

    def method(self, x, name, args, kwargs, e, canonical=False):
        """A tensor op on ``x`` (a Node) by canonical name or method name."""
        op = name if canonical else ops.TENSOR_METHODS.get(name)
        if op is None:
            raise self.error("D004", e, f".{name}() is not supported inside a tile loop")
        if isinstance(x, TileInfo):
            raise self.error("D003", e, f"{name}() of a tile", hint="use tile.index")
        if not isinstance(x, Node) and op not in ("where", "maximum", "minimum", "add", "sub", "mul", "truediv"):
            if isinstance(x, (int, float)):
                x = self.const_node(x)
            else:
                raise self.error("D004", e, f"{name}() of {_describe(x)}")

        def kw(key, pos, default=None):
            if len(args) > pos:
                return args[pos]
            return kwargs.get(key, default)

        if op in ops.UNARY and op not in ("abs",) or op in ("abs",):
            return self.unary(op, x, e)
        if op in ("gelu", "softplus", "elu", "sign", "isnan", "isinf"):
            extra = {k: v for k, v in kwargs.items() if k in ("approximate", "beta", "threshold", "alpha")}
            return self.unary(op, x, e, **extra)
        if op == "leaky_relu":
            slope = kw("negative_slope", 0, 0.01)
            return self.where(self.binop("ge", x, 0, e), x, self.binop("mul", x, slope, e), e)
        if op == "relu6":
            return self.clamp(x, 0, 6, e)
        if op in ("add", "sub", "mul", "truediv", "fmod", "mod", "floordiv", "eq", "ne", "lt", "le", "gt", "ge",
                  "logical_and", "logical_or"):
            other = kw("other", 0)
            if op in ("add", "sub") and "alpha" in kwargs:
                other = self.binop("mul", other, kwargs["alpha"], e)
            if op == "div" or op == "truediv":
                rm = kwargs.get("rounding_mode")
                if rm == "floor":
                    return self.binop("floordiv", x, other, e)
                if rm == "trunc":
                    q = self.binop("truediv", x, other, e)
                    return self.cast(self.cast(q, torch.int64), result_type(x, other)) \
                        if not result_type(x, other).is_floating_point else self.where(
                            self.binop("lt", q, 0, e), self.unary("ceil", q, e), self.unary("floor", q, e), e)
            if op == "logical_and":
                return self.logical("and", x, other, e)
            if op == "logical_or":
                return self.logical("or", x, other, e)
            if op == "fmod":
                rt = result_type(x, other)
                if rt.is_floating_point:
                    q = self.binop("truediv", x, other, e)
                    tq = self.where(self.binop("lt", q, 0, e), self.unary("ceil", q, e), self.unary("floor", q, e), e)
                    return self.binop("sub", x, self.binop("mul", tq, other, e), e)
                return self.binop("mod", x, other, e)
            return self.binop(op, x, other, e)
        if op == "div":
            return self.method(x, "truediv", args, kwargs, e, canonical=True)
        if op == "pow":
            return self.binop("pow", x, kw("exponent", 0), e)
        if op in ("maximum", "minimum"):
            return self.minmax(op, x, kw("other", 0), e)
        if op == "where":
            if canonical:
                cond, a, b = x, kw("input", 0), kw("other", 1)
            else:
                cond, a, b = kw("condition", 0), x, kw("other", 1)
            return self.where(cond, a, b, e)
        if op == "masked_fill":
            return self.where(kw("mask", 0), kw("value", 1), x, e)
        if op == "clamp":
            return self.clamp(x, kw("min", 0), kw("max", 1), e)
        if op == "lerp":
            end, w = kw("end", 0), kw("weight", 1)
            return self.binop("add", x, self.binop("mul", w, self.binop("sub", end, x, e), e), e)
        if op in ("addcmul",):
            t1, t2 = kw("tensor1", 0), kw("tensor2", 1)
            val = kwargs.get("value", 1)
            return self.binop("add", x, self.binop("mul", val, self.binop("mul", t1, t2, e), e), e)
        if op == "fma":
            return self.binop("add", self.binop("mul", x, kw("b", 0), e), kw("c", 1), e)
        if op in ("sum", "amax", "amin", "mean", "prod"):
            dim = kw("dim", 0, None)
            keepdim = kw("keepdim", 1, False)
            dtype = kwargs.get("dtype")
            return self.reduce(op, x, dim, keepdim, e, dtype=dtype)
        if op in ("max", "min"):
            other = kw("dim", 0, None)
            if isinstance(other, Node) and (other.dims or "dim" not in kwargs and not _is_int_dtype(other.dtype)):
                return self.minmax("maximum" if op == "max" else "minimum", x, other, e)
            if other is None:
                return self.reduce(op, x, None, False, e)
            keepdim = kw("keepdim", 1, False)
            vals = self.reduce(op, x, other, keepdim, e)
            idx = self.reduce("argmax" if op == "max" else "argmin", x, other, keepdim, e)
            return _MaxResult((vals, idx))
        if op in ("argmax", "argmin"):
            dim = kw("dim", 0, None)
            keepdim = kw("keepdim", 1, False)
            if dim is None:
                raise self.error("D004", e, f"{op}() without dim= inside a tile loop")
            return self.reduce(op, x, dim, keepdim, e)
        if op in ("var", "std"):
            dim = kw("dim", 0, None)
            correction = kwargs.get("correction")
            unbiased = kwargs.get("unbiased")
            if correction is None:
                correction = 1 if unbiased is None or unbiased else 0
            keepdim = kw("keepdim", 1, False) if "unbiased" not in kwargs or len(args) < 2 else kwargs.get(
                "keepdim", False)
            if isinstance(dim, bool):  # x.var(False): unbiased positional
                correction, dim = (1 if dim else 0), None
            return self.var(x, dim, correction, keepdim, e, std=op == "std")
        if op in ("softmax", "log_softmax"):
            return self.softmax(x, kw("dim", 0, None), e, log=op == "log_softmax", dtype=kwargs.get("dtype"))
        if op == "logsumexp":
            return self.logsumexp(x, kw("dim", 0, None), kw("keepdim", 1, False), e)
        if op in ("cumsum", "cumprod"):
            dim = _norm_axis(self.static_int(kw("dim", 0), e, "a dimension"), len(x.dims), self, e)
            d = x.dims[dim]
            if isinstance(d, RInfo):
                d.not_rollable(f"used by {op}")
            dtype = kwargs.get("dtype") or (torch.int64 if not x.dtype.is_floating_point else x.dtype)
            xx = self.cast(x, torch.float32) if x.dtype in _LOW_PRECISION else self.cast(x, dtype)
            n = self.emit(Node("scan", [xx], dims=x.dims, dtype=xx.dtype, attrs={"kind": op, "axis": dim}))
            return self.cast(n, dtype) if n.dtype != dtype else n
        if op in ("matmul",):
            other = kw("other", 0)
            return self.matmul(x, other, None, e)
        if op == "addmm":
            m1, m2 = kw("mat1", 0), kw("mat2", 1)
            beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
            if beta != 1 or alpha != 1:
                prod = self.matmul(m1, m2, None, e, out_dtype=torch.float32)
                return self.cast(self.binop("add", self.binop("mul", x, beta, e), self.binop("mul", prod, alpha, e),
                                            e), x.dtype)
            return self.matmul(m1, m2, x, e)
        if op in ("to", "type_as"):
            target = None
            if op == "type_as":
                target = args[0].dtype
            else:
                for a in list(args) + [kwargs.get("dtype")]:
                    if isinstance(a, torch.dtype):
                        target = a
                    elif isinstance(a, Node):
                        target = a.dtype
            if target is None:
                return x  # a device move: nothing to do in the kernel
            return self.cast(x, target)
        if op in ("float", "half", "bfloat16", "double", "int", "long", "bool"):
            return self.cast(x, {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16,
                                 "double": torch.float64, "int": torch.int32, "long": torch.int64,
                                 "bool": torch.bool}[op])
        if op == "t":
            if len(x.dims) != 2:
                raise self.error("D004", e, f".t() of a block of rank {len(x.dims)}")
            return self.permute(x, [1, 0], e)
        if op == "transpose":
            d0 = _norm_axis(self.static_int(kw("dim0", 0), e, "a dimension"), len(x.dims), self, e)
            d1 = _norm_axis(self.static_int(kw("dim1", 1), e, "a dimension"), len(x.dims), self, e)
            order = list(range(len(x.dims)))
            order[d0], order[d1] = order[d1], order[d0]
            return self.permute(x, order, e)
        if op == "permute":
            order = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
            order = [_norm_axis(self.static_int(o, e, "a dimension"), len(x.dims), self, e) for o in order]
            return self.permute(x, order, e)
        if op == "unsqueeze":
            return self.expand_dims(x, self.static_int(kw("dim", 0), e, "a dimension"), e)
        if op == "squeeze":
            d = kw("dim", 0, None)
            return self.squeeze(x, None if d is None else self.static_int(d, e, "a dimension"), e)
        if op == "reshape":
            shape = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size)) else list(args)
            return self.reshape(x, shape, e)
        if op in ("expand", "expand_as"):
            if op == "expand_as":
                dims = args[0].dims
            else:
                shape = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
                shape = [x.dims[i - (len(shape) - len(x.dims))] if (isinstance(s, int) and s == -1) else s
                         for i, s in enumerate(shape)]
                dims = self.shape_dims([self.dim_value(s) if not isinstance(s, (int, Node, TileInfo)) else s
                                        for s in shape], e)
            if _broadcast_dims(x.dims, dims) != tuple(dims):
                raise self.error(SHAPE_CODE, e, f"cannot expand {_dims_text(x.dims)} to {_dims_text(dims)}")
            return self.emit(Node("expand", [x], dims=dims, dtype=x.dtype, pad=x.pad))
        if op == "identity":
            return x
        if op == "size":
            d = kw("dim", 0, None)
            shape = tuple(self.dim_value(dd) for dd in x.dims)
            return shape if d is None else shape[_norm_axis(self.static_int(d, e, "a dimension"), len(x.dims), self,
                                                            e)]
        if op == "dim":
            return len(x.dims)
        if op == "numel":
            raise self.error("D004", e, ".numel() of a block inside a tile loop")
        if op in ("new_zeros", "new_ones", "new_full"):
            shape = args[0] if args else kwargs.get("size")
            value = 0 if op == "new_zeros" else (1 if op == "new_ones" else (args[1] if len(args) > 1
                                                                             else kwargs.get("fill_value")))
            return self.full(shape, value, kwargs.get("dtype") or x.dtype, e)
        raise self.error("D004", e, f"{name}() is not supported inside a tile loop")

    def clamp(self, x, lo, hi, e):
        out = x
        if lo is not None:
            out = self.minmax("maximum", out, lo, e)
        if hi is not None:
            out = self.minmax("minimum", out, hi, e)
        return out

    def reshape(self, x: Node, shape, e):
        """Reshapes that only add or remove size-1 dimensions (tile shapes cannot be merged)."""
        real_in = [d for d in x.dims if d is not ONE]
        out = []
        infer = None
        for s in shape:
            if isinstance(s, TileInfo) or (isinstance(s, Node) and s.op == "tile_block_size"):
                out.append(s if isinstance(s, TileInfo) else s.attrs["tile"])
            elif isinstance(s, int) and s == -1:
                if infer is not None:
                    raise self.error("D004", e, "reshape with two -1")
                infer = len(out)
                out.append(None)
            else:
                n = self.static_int(s, e, "a reshape size")
                out.append(ONE if n == 1 else self.rdim(n, n, e))
        if infer is not None:
            known = [d for d in out if d is not None and d is not ONE]
            rest = [d for d in real_in if d not in known]
            if len(rest) != 1:
                raise self.error("D004", e, "reshape: cannot infer the -1 dimension")
            out[infer] = rest[0]
        if [d for d in out if d is not ONE] != real_in:
            raise self.error("D004", e, f"reshape from {_dims_text(x.dims)} to {_dims_text(tuple(out))}: only size-1 "
                                        "dimensions can be added or removed inside a tile loop")
        if tuple(out) == x.dims:
            return x
        return self.emit(Node("reshape", [x], dims=out, dtype=x.dtype, pad=x.pad, weak=x.weak))

    # ------------------------------------------------------------------ finishing
    def finalize(self):
        prog = self.prog
        for n, _blk in _all_nodes(prog.body):
            for o in n.operands():
                o.users.append(n)
        # whole dimensions that can be looped over (reduction_loops)
        for n, _blk in _all_nodes(prog.body):
            rd = [d for d in n.dims if isinstance(d, RInfo)]
            seen = set()
            for r in rd:
                if r.id in seen:
                    r.not_rollable("appears twice in one value")
                seen.add(r.id)
            if len(seen) > 1:
                for r in rd:
                    r.not_rollable("appears together with another whole dimension")
            if n.op in ("full", "expand") and rd:
                for r in rd:
                    r.not_rollable("a block is created with it (dt.zeros / expand)")
        for stmt, _blk in _all_structured(prog.body):
            vals = []
            if isinstance(stmt, LoopStmt):
                vals = [c.init for c in stmt.carried] + [c.result for c in stmt.carried]
            elif isinstance(stmt, IfStmt):
                vals = [stmt.cond] + [m.then_val[0] for m in stmt.merged] + [m.else_val[0] for m in stmt.merged]
            for v in vals:
                if isinstance(v, Node):
                    for d in v.dims:
                        if isinstance(d, RInfo):
                            d.not_rollable("carried through a loop or an if")
        seg_of = {}

        def number(block):
            seg = 0
            for st in block.stmts:
                if isinstance(st, Node):
                    seg_of[st.id] = seg
                else:
                    seg += 1
                    for sub in ([st.body] if isinstance(st, LoopStmt) else [st.then_block, st.else_block]):
                        number(sub)
        number(prog.body)
        for n, blk in _all_nodes(prog.body):
            for o in n.operands():
                if o.block is blk and seg_of.get(o.id) != seg_of.get(n.id):
                    for d in o.dims:
                        if isinstance(d, RInfo):
                            d.not_rollable("used after a nested loop or if")
                if o.block is not None and o.block is not blk:
                    for d in o.dims:
                        if isinstance(d, RInfo):
                            d.not_rollable("used inside a nested loop or if")
            if n.op in ("scan", "permute", "reshape", "expand_dims"):
                pass
            if n.op == "reduce" and n.attrs["kind"] in ("argmax", "argmin") and isinstance(n.attrs["dim"], RInfo):
                n.attrs["dim"].not_rollable("argmax/argmin over it")
        if self.rdim_slots is not None:
            for r in prog.rdims:
                if r.rollable:
                    r.slot = self.rdim_slots.get(r.id)
        for t in prog.tiles:
            if t.kind == "tile" and t.slot is None and t.fixed is None:
                t.fixed = 1


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def _cse_key(n: Node):
    def conv(v):
        if isinstance(v, Node):
            return ("n", v.id)
        if isinstance(v, (TileInfo, RInfo)):
            return ("d", type(v).__name__, v.id)
        if isinstance(v, (list, tuple)):
            return tuple(conv(x) for x in v)
        if isinstance(v, float) and v != v:
            return ("nan",)
        if isinstance(v, (bool, int, float, str, type(None))):
            return (type(v).__name__, v)
        if isinstance(v, torch.dtype):
            return ("dt", str(v))
        raise TypeError
    try:
        return (n.op, conv(n.args), tuple(sorted((k, conv(v)) for k, v in n.attrs.items())),
                tuple(("1",) if d is ONE else conv(d) for d in n.dims), str(n.dtype), n.weak)
    except TypeError:
        return None


def _all_nodes(block):
    for s in block.stmts:
        if isinstance(s, Node):
            yield s, block
        elif isinstance(s, LoopStmt):
            yield from _all_nodes(s.body)
            for c in s.carried:
                if isinstance(c.result, Node) and c.result.block is None:
                    pass
        elif isinstance(s, IfStmt):
            yield from _all_nodes(s.then_block)
            yield from _all_nodes(s.else_block)


def _all_structured(block):
    for s in block.stmts:
        if isinstance(s, LoopStmt):
            yield s, block
            yield from _all_structured(s.body)
        elif isinstance(s, IfStmt):
            yield s, block
            yield from _all_structured(s.then_block)
            yield from _all_structured(s.else_block)


def all_nodes(block):
    return _all_nodes(block)


def _is_int_dtype(dt) -> bool:
    return dt is not None and not dt.is_floating_point and not dt.is_complex and dt != torch.bool


def _dims(v):
    return v.dims if isinstance(v, Node) else ()


def _broadcast_dims(a, b):
    a, b = tuple(a), tuple(b)
    n = max(len(a), len(b))
    a = (ONE,) * (n - len(a)) + a
    b = (ONE,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x is y:
            out.append(x)
        elif x is ONE:
            out.append(y)
        elif y is ONE:
            out.append(x)
        else:
            return None
    return tuple(out)


def _dims_text(dims) -> str:
    return "[" + ", ".join(d.label for d in dims) + "]"


def _norm_axis(ax, nd, tracer, src):
    if not isinstance(ax, int):
        raise tracer.error("D004", src, f"a dimension must be an int, got {_describe(ax)}")
    if not -nd <= ax < max(nd, 1):
        raise tracer.error("D004", src, f"dimension {ax} is out of range for a block of rank {nd}")
    return ax % nd if nd else 0


def _fold_pad(op, a, b):
    pa = a.pad if isinstance(a, Node) else (a if _is_py_number(a) else None)
    pb = b.pad if isinstance(b, Node) else (b if _is_py_number(b) else None)
    # only when both operands have the same masked dims (or one is a constant)
    if isinstance(a, Node) and isinstance(b, Node) and _masked(a) != _masked(b):
        return None
    if pa is None or pb is None:
        if op == "mul" and (pa == 0 or pb == 0) and False:
            return 0
        return None
    try:
        if op in ("minimum", "maximum"):
            return min(pa, pb) if op == "minimum" else max(pa, pb)
        if op == "truediv":
            return pa / pb if pb != 0 else None
        if op in ("floordiv", "mod") and pb == 0:
            return None
        return _PYOPS[op](pa, pb)
    except Exception:  # noqa: BLE001
        return None


def _masked(n: Node):
    return tuple(d.id for d in n.dims if isinstance(d, (TileInfo, RInfo)))


def _fold_unary(fn, p):
    try:
        if fn == "neg":
            return -p
        if fn == "abs":
            return abs(p)
        if fn == "relu":
            return max(p, 0)
        if fn == "exp":
            return math.exp(p)
        if fn == "square":
            return p * p
        if fn in ("sqrt",) and p >= 0:
            return math.sqrt(p)
        if fn == "sigmoid":
            return 1 / (1 + math.exp(-p))
        if fn == "silu":
            return p / (1 + math.exp(-p))
        if fn in ("tanh", "sin", "erf", "floor", "ceil"):
            return getattr(math, fn)(p)
    except (OverflowError, ValueError):
        return None
    return None


def _describe(v) -> str:
    if isinstance(v, Node):
        return f"a {'scalar' if not v.dims else 'block'} of {str(v.dtype).replace('torch.', '')}"
    if isinstance(v, TileInfo):
        return f"tile {v.name!r}"
    if isinstance(v, HostTensor):
        return f"the tensor {v.name}"
    if isinstance(v, types.ModuleType):
        return f"module {v.__name__}"
    return f"{type(v).__name__} {v!r}"[:80]


def _index_text(it) -> str:
    if it is None:
        return "None"
    if it is Ellipsis:
        return "..."
    if isinstance(it, slice):
        return ":"
    if isinstance(it, TileInfo):
        return it.name
    if isinstance(it, Node):
        return "<value>"
    return repr(it)


def _guard_value(v):
    if isinstance(v, torch.dtype):
        return ("dtype", str(v))
    if isinstance(v, (list, tuple)):
        return tuple(_guard_value(x) for x in v)
    if isinstance(v, torch.Size):
        return tuple(v)
    return (type(v).__name__, v)


def _is_library(fn) -> bool:
    mod = getattr(fn, "__module__", "") or ""
    return mod.split(".")[0] in ("torch", "deuteron", "newt", "math", "builtins", "numpy", "triton", "functools")


_DT_FUNCS: dict = {}


def _init_dt_funcs():
    for name in ("zeros", "full", "arange", "dot", "atomic_add", "relu", "sigmoid", "silu", "gelu", "tanh", "exp",
                 "cdiv", "next_power_of_2", "tile", "grid", "register_block_size", "register_tunable", "specialize"):
        _DT_FUNCS[id(getattr(L, name))] = name


_init_dt_funcs()

_TORCH_NAMES: dict = {}


def _init_torch_names():
    import torch.nn.functional as F
    for name in ops.TORCH_FUNCTIONS:
        f = getattr(torch, name, None)
        if f is not None:
            _TORCH_NAMES.setdefault(id(f), ("torch", name))
    for name in ops.FUNCTIONAL:
        f = getattr(F, name, None)
        if f is not None:
            _TORCH_NAMES.setdefault(id(f), ("F", name))
    for name in ops.TENSOR_METHODS:
        f = getattr(torch.Tensor, name, None)
        if f is not None and name in ops.TORCH_FUNCTIONS:
            _TORCH_NAMES.setdefault(id(f), ("torch", name))


_init_torch_names()


def _torch_name(func):
    r = _TORCH_NAMES.get(id(func))
    if r is not None:
        return r
    mod = getattr(func, "__module__", None) or ""
    name = getattr(func, "__name__", None)
    if name and (mod.startswith("torch") or mod == "torch._C._nn" or mod == "torch._C._VariableFunctions"):
        if mod.startswith("torch.nn.functional") or mod == "torch._C._nn":
            return ("F", name)
        if name in ops.TORCH_FUNCTIONS:
            return ("torch", name)
        return ("torch", name)
    return None
