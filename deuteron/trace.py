"""The tracer: one tile loop nest of a ``@dt.kernel`` -> a tile ``Program``.

It reads the loop's AST (the user's source) and evaluates it abstractly:
host values (the tensors, sizes and numbers the host code computed before
the loop) are real Python objects; values inside the kernel are ``Node``
objects with dims and a dtype that follow PyTorch's semantics (broadcasting,
type promotion).  Nothing of the loop body runs as Python.
"""

from __future__ import annotations

import ast
import types

import torch

from . import language as L
from . import ops
from .errors import (
    BlockDecision,
    BlockSizeValue,
    BranchShapes,
    CompileTimeAssert,
    ConditionOn,
    ForeignTile,
    HostValueOperand,
    ItemAssignment,
    JaggedTile,
    LoopCarried,
    LoopOver,
    LoopShape,
    NotAValue,
    NotCompileTime,
    RaiseInTileLoop,
    RangeLoop,
    TensorDevice,
    TileAsNumber,
    TileAttribute,
    TileLoopArguments,
    TraceError,
    Unpack,
    UnsupportedStatement,
)
from .ops.elementwise import binop, cast
from .ops.memory import index_items, load, store
from .ops.reduce import reduce
from .ops.shape import expand_dims
from .optable import BOUND, PURE, TILE_ATTR, has
from .program import (
    Block,
    BlockDim,
    Carried,
    IfStmt,
    LoopStmt,
    Merged,
    Node,
    Program,
    RInfo,
    ScalarArg,
    TensorArg,
    TileInfo,
)
from .trace_common import (
    _BINOPS,
    SHAPE_CODE,
    BlockSizeInt,
    HostTensor,
    SpecializedInt,
    TunableValue,
    _broadcast_dims,
    _cse_key,
    _describe,
    _dims_text,
    _guard_value,
    _is_int_dtype,
    _is_library,
    _is_pow2,
    _Return,
    result_type,
)
from .trace_expr import Evaluator
from .trace_finalize import finalize

__all__ = ["Tracer", "HostTensor", "BlockSizeInt", "SpecializedInt", "TunableValue", "SHAPE_CODE"]



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
        self._block_dims: dict = {}  # register slot -> BlockDim
        self._tile_attr_cache: dict = {}
        self._guard_names: set = set()
        self.current_src = None
        self._inline_depth = 0
        self._foreign_call = None  # the call of a helper of another file being inlined (where its code is placed)
        self.sites_seen: dict = {}  # site index -> info recorded for discovery
        self._node_names: dict = {}
        self._cse: dict = {}
        self.constexpr_params: set = set()  # parameters annotated dt.constexpr
        self._fn_origin: dict = {}  # id(function) -> the host name it was passed as
        self._captured: dict = {}  # name -> source, for the names an inlined callable argument captures
        # the same for a function reached through the kernel's globals (a module-level helper): name -> source
        self._gcaptured: dict = {}
        self._fn_gorigin: dict = {}  # id(function) -> (the function, the source it was reached through)
        self._global_cache: dict = {}  # source -> the traced value of a global (one guard or parameter each)
        try:
            allow_tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
        except Exception:
            allow_tf32 = False
        self.prog.dot_precision = getattr(kernel, "dot_precision", None) or ("tf32" if allow_tf32 else "ieee")
        self.ev = Evaluator(self)  # expressions and calls (their op entries get this tracer as context)

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
        finalize(self.prog, self.rdim_slots)
        return self.prog

    # ------------------------------------------------------------------ nodes
    def emit(self, node: Node) -> Node:
        node.src = node.src or self.current_src
        if has(node, PURE):  # equal pure values in this block or its parents are one
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
        if not isinstance(value, (bool, int, float)):
            raise HostValueOperand(self.current_src, use="a constant of the kernel", got=_describe(value))
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
        raise NotAValue(src if src is not None else self.current_src, got=_describe(v))

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
            raise ForeignTile(node, name=name)
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
            if name in self.constexpr_params:
                self.guard(name, v)
                return v
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
        if isinstance(v, types.FunctionType):
            # a callable argument (an epilogue, a score modifier): the program holds for this code only; what
            # it captures is read through its name (tensors become kernel arguments, numbers guards)
            self.guard(name, v)
            if not _is_library(v):
                self._fn_origin[id(v)] = name
            return v
        return v

    def tensor_arg(self, name, t, source) -> HostTensor:
        for ta in self.prog.tensors.values():
            if ta.tensor is t:
                if source not in ta.sources:
                    ta.sources.append(source)
                return HostTensor(ta.name, t, ta)
        if t.device.type not in ("cuda", "cpu"):
            raise TensorDevice(self.current_src, name=name, device=str(t.device))
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

    def scalar_param(self, name, v, source=None) -> Node:
        """A run-time scalar argument of the kernel: host variable ``name`` (or, with ``source``, a value fetched
        from there at each launch: a global, a captured value)."""
        if isinstance(v, float):
            dt = torch.float32
        else:
            dt = torch.int32 if -2 ** 31 <= v < 2 ** 31 else torch.int64
        pname = self.kernel_name_for(name)
        sa = ScalarArg(pname, v, dt)
        sa.source = name if source is None else source
        self.prog.scalars[pname] = sa
        n = Node("param", dims=(), dtype=dt, attrs={"name": pname}, weak=True)
        n.host_value = v
        n.guards = ((("local", name) if source is None else source, v),)
        n.src = self.current_src
        return n

    def size_of(self, ht: HostTensor, d: int, what: str = "size"):
        val = ht.t.shape[d] if what == "size" else ht.t.stride(d)
        if self.static:
            return int(val)
        pname = f"{ht.name}_{what}_{d}"
        if pname not in self.prog.size_params:
            self.prog.size_params[pname] = (ht.name, what, d)
        n = Node("param", dims=(), dtype=torch.int32 if val < 2 ** 31 else torch.int64,
                 attrs={"name": pname, "nonneg": True}, weak=True)  # a size or a stride: never negative
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
            raise TileAsNumber(node, what=what, hint="use tile.block_size or index with it")
        raise NotCompileTime(node, what=what, got=_describe(v))

    # ------------------------------------------------------------------ tiles
    def make_tiles(self, site, call: ast.Call, target, depth: int):
        if site.jagged:
            return self.make_jagged_tile(site, call, target, depth)
        kind = site.kind
        args = [self.ev.eval(a) for a in call.args]
        kwargs = {k.arg: self.ev.eval(k.value) for k in call.keywords}
        first = args[0] if args else kwargs.pop("begin_or_sizes", kwargs.pop("sizes", None))
        end = args[1] if len(args) > 1 else kwargs.pop("end", None)
        third = args[2] if len(args) > 2 else None
        block_size = step = None
        if kind == "tile":
            block_size = third if third is not None else kwargs.pop("block_size", None)
        else:
            step = third if third is not None else kwargs.pop("step", None)
        for k in kwargs:
            raise TileLoopArguments(call, op=kind, problem=f"no argument {k!r}")
        if first is None:
            raise TileLoopArguments(call, op=kind, problem="the size of the loop is missing")
        as_list = isinstance(first, (list, tuple, torch.Size))
        if as_list:
            begins = [0] * len(first) if end is None else list(first)
            ends = list(first) if end is None else list(end)
            if end is not None and not isinstance(end, (list, tuple, torch.Size)):
                raise TileLoopArguments(call, op=kind, problem="(begins, ends): both must be lists")
            if len(begins) != len(ends):
                raise TileLoopArguments(call, op=kind, problem=f"{len(begins)} begins but {len(ends)} ends")
        else:
            begins, ends = ([0], [first]) if end is None else ([first], [end])
        ndim = len(ends)
        if ndim == 0:
            raise TileLoopArguments(call, op=kind, problem="a loop over zero dimensions")
        if isinstance(block_size, (list, tuple)):
            bss = list(block_size)
            if len(bss) != ndim:
                raise BlockSizeValue(call, problem=f"dt.tile over {ndim} dimension(s) with {len(bss)} block sizes")
        else:
            bss = [block_size] * ndim
        names = self._tile_names(target, ndim, as_list, kind)
        tiles = []
        for d in range(ndim):
            b, e = begins[d], ends[d]
            for v, what in ((b, "begin"), (e, "end")):
                if isinstance(v, TileInfo):
                    raise TileAsNumber(call, what=f"the {what} of dt.{kind}",
                                     hint="use tile.begin / tile.end")
                if depth == 0 and isinstance(v, Node) and v.host_value is None:
                    raise TileLoopArguments(call, op=kind, problem=f"the {what} of the grid loop must be a host value")
                if isinstance(v, Node) and v.dims:
                    raise TileLoopArguments(call, op=kind, problem=f"the {what} must be a scalar, not a block")
                if not isinstance(v, (int, Node)):
                    raise TileLoopArguments(call, op=kind, problem=f"the {what} must be an int, got {_describe(v)}")
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
                        raise BlockSizeValue(call, problem=f"block size {int(bs)} is not a power of two")
                    fixed = int(bs)
                    self.slot_of(site, d, fixed)
                else:
                    fixed = self.static_int(bs, call, "a block size")
                    if not _is_pow2(fixed):
                        raise BlockSizeValue(call, problem=f"block size {fixed} is not a power of two")
                    self.slot_of(site, d, fixed)
            t = TileInfo(len(self.prog.tiles), names[d], kind, depth, b, e, slot, fixed, site.index, d, src=call)
            if kind != "grid" and isinstance(bss[d], BlockSizeInt):
                t.known_block = int(bss[d])
            if kind == "grid" and step is not None:
                t.step = self.static_int(step, call, "the step of dt.grid")
                if t.step < 1:
                    raise TileLoopArguments(call, op=kind, problem="the step must be positive")
            self.prog.tiles.append(t)
            tiles.append(t)
        if kind == "grid":
            vals = [self.grid_index_node(t) for t in tiles]
        else:
            vals = tiles
        bound = tuple(vals) if as_list else vals[0]
        return tiles, bound

    def make_jagged_tile(self, site, call: ast.Call, target, depth: int):
        """``dt.jagged_tile(lengths)``: a tile loop over ``[0, max(lengths))`` whose lane ``k`` of parent lane
        ``b`` is masked off where ``k >= lengths[b]`` (Helion's jagged_tile)."""
        args = [self.ev.eval(a) for a in call.args] + [self.ev.eval(k.value) for k in call.keywords]
        parent = args[0] if len(args) == 1 else None
        if not isinstance(parent, Node) or not parent.dims:
            raise JaggedTile(call, problem=f"the lengths must be a block over enclosing tiles, got "
                                           f"{_describe(parent) if args else 'no argument'}")
        bad = [d for d in parent.dims if not isinstance(d, TileInfo)]
        if bad:
            raise JaggedTile(call, problem=f"every dimension of the lengths must be an enclosing tile, not "
                                           f"{_dims_text(parent.dims)}")
        if not _is_int_dtype(parent.dtype):
            raise JaggedTile(call, problem=f"the lengths must be integers, not {str(parent.dtype)[6:]}")
        end = reduce(self, "amax", parent, None, False, call)
        slot = self.slot_of(site, 0, None)
        names = self._tile_names(target, 1, False, "tile")
        t = TileInfo(len(self.prog.tiles), names[0], "tile", depth, 0, end, slot, None, site.index, 0, src=call)
        t.jagged_parent = parent
        self.prog.tiles.append(t)
        return [t], t

    def jagged_mask(self, t: TileInfo, src) -> Node:
        """``t.index < lengths`` with dims (the lengths' tiles..., t): which lanes of a jagged tile exist."""
        idx = self.tile_attr(t, "index", src)
        par = expand_dims(self, t.jagged_parent, len(t.jagged_parent.dims), src)
        return binop(self, "lt", idx, par, src)

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
            if attr == "block_size" and t.known_block is not None:
                n.host_value = t.known_block
        else:
            sugg = ", ".join("." + a for a in ops.TILE_ATTRS)
            raise TileAttribute(node, attr=attr, attrs=sugg)
        n.src = node
        self._tile_attr_cache[key] = n
        return n

    def block_dim(self, v: BlockSizeInt, node) -> BlockDim:
        """The dimension of a registered block size used before any tile of that size (one per register)."""
        r = self._block_dims.get(v.slot)
        if r is None:
            r = BlockDim(len(self.prog.rdims), int(v), v.slot, src=node)
            self.prog.rdims.append(r)
            self._block_dims[v.slot] = r
        return r

    def rdim(self, size: int, size_expr, node) -> RInfo:
        r = self._rdims_by_size.get(size)
        if r is None:
            r = RInfo(len(self.prog.rdims), size, size_expr, src=node)
            self.prog.rdims.append(r)
            self._rdims_by_size[size] = r
        return r

    # ------------------------------------------------------------------ statements
    def stmts(self, body):
        if any(_has_continue(s) for s in body):
            body = _lower_continue(body)
        for s in body:
            self.stmt(s)

    def stmt(self, s):
        prev = self.current_src
        self.current_src = s if self._foreign_call is None else self._foreign_call
        try:
            m = getattr(self, "stmt_" + type(s).__name__, None)
            if m is None:
                raise UnsupportedStatement(s, what=f"{type(s).__name__} statements")
            m(s)
        except TraceError as err:
            if err.node is None:  # raised where the node was not known: the statement
                err.node = s
            raise
        finally:
            self.current_src = prev

    def stmt_Pass(self, s):
        pass

    def stmt_Expr(self, s):
        if isinstance(s.value, ast.Constant):
            return
        self.ev.eval(s.value)

    def stmt_Assign(self, s):
        v = self.ev.eval(s.value)
        for t in s.targets:
            self.assign(t, v)

    def stmt_AnnAssign(self, s):
        if s.value is not None:
            self.assign(s.target, self.ev.eval(s.value))

    def stmt_AugAssign(self, s):
        op = _BINOPS.get(type(s.op))
        if isinstance(s.target, ast.Name):
            cur = self.ev.eval(s.target)
            self.assign(s.target, binop(self, op, cur, self.ev.eval(s.value), s))
        elif isinstance(s.target, ast.Subscript):
            base = self.ev.eval(s.target.value)
            if not isinstance(base, HostTensor):
                raise ItemAssignment(s.target)
            items = index_items(self, base, s.target.slice, s.target)
            cur = load(self, base, items, s.target)
            store(self, base, items, binop(self, op, cur, self.ev.eval(s.value), s), s.target)
        else:
            raise UnsupportedStatement(s.target, what="this augmented assignment target")

    def stmt_Assert(self, s):
        v = self.ev.eval(s.test)
        if isinstance(v, Node):
            return  # a device-side check: ignored in the kernel (kernel.ref checks it)
        if not v:
            msg = self.ev.eval(s.msg) if s.msg is not None else "assertion failed"
            raise CompileTimeAssert(s, msg=msg)

    def stmt_Return(self, s):
        if self._inline_depth:
            raise _Return(self.ev.eval(s.value) if s.value is not None else None)
        raise UnsupportedStatement(s, what="return",
                         hint="return after the outermost tile loop (the host code)")

    def stmt_Raise(self, s):
        raise RaiseInTileLoop(s)

    def stmt_If(self, s):
        cond = self.ev.eval(s.test)
        if isinstance(cond, Node):
            if cond.dims:
                raise BlockDecision(s.test, what="an `if`", dims=_dims_text(cond.dims),
                                    hint="use torch.where(cond, a, b) for elementwise choices")
            if cond.host_value is not None:
                for g in cond.guards:
                    self.guard(*g)
                cond = cond.host_value
            else:
                self.ev.check_not_per_tile(cond, s.test, "an `if`")
                self.device_if(s, cond)
                return
        if isinstance(cond, (HostTensor, TileInfo)):
            raise ConditionOn(s.test, what=_describe(cond))
        self.stmts(s.body if cond else s.orelse)

    def stmt_For(self, s):
        it = s.iter
        site = self.kernel.structure.site_by_node.get(id(it)) if isinstance(it, ast.Call) else None
        if site is not None:
            self.tile_loop(s, site)
            return
        if s.orelse:
            raise UnsupportedStatement(s.orelse[0], what="for/else")
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and self.ev.lookup(it.func.id, it.func) is range:
            args = [self.ev.eval(a) for a in it.args]
            if all(isinstance(a, int) for a in args) and len(range(*args)) <= 0:
                return
            self.range_loop(s, args)
            return
        seq = self.ev.eval(it)
        if isinstance(seq, (list, tuple, range)):
            for v in seq:
                self.assign(s.target, v)
                self.stmts(s.body)
            return
        raise LoopOver(it, what=_describe(seq))

    def stmt_While(self, s):
        raise UnsupportedStatement(s, what="while loops",
                         hint="use dt.tile / dt.grid / range loops")

    # ------------------------------------------------------------------ assignment
    def assign(self, target, v):
        if isinstance(target, ast.Name):
            if isinstance(v, Node) and v.name is None and not has(v, BOUND) and not has(v, TILE_ATTR):
                v.name = target.id
            self.env[target.id] = v
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(v, TileInfo) or isinstance(v, Node):
                raise Unpack(target, what=_describe(v))
            try:
                vals = list(v)
            except TypeError:
                raise Unpack(target, what=_describe(v)) from None
            if len(vals) != len(target.elts):
                raise Unpack(target, what=f"{len(vals)} values into {len(target.elts)} names")
            for t, x in zip(target.elts, vals):
                self.assign(t, x)
        elif isinstance(target, ast.Subscript):
            base = self.ev.eval(target.value)
            if not isinstance(base, HostTensor):
                raise ItemAssignment(target)
            items = index_items(self, base, target.slice, target)
            store(self, base, items, v, target)
        elif isinstance(target, ast.Attribute):
            raise UnsupportedStatement(target, what="assigning to an attribute")
        else:
            raise UnsupportedStatement(target, what="this assignment target")

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
            raise UnsupportedStatement(s.orelse[0], what="for/else on a tile loop")
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
        if any(t.jagged_parent is not None for t in tiles):
            def bind():
                self.assign(s.target, bound)
                for t in tiles:
                    t.jagged_mask = self.jagged_mask(t, s.iter)
            self.loop_body(loop, s.body, bind, s)
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
            raise RangeLoop(s.iter, problem="it takes 1 to 3 arguments")
        for a in args:
            if not isinstance(a, (int, Node)) or (isinstance(a, Node) and (a.dims or
                                                                          not _is_int_dtype(a.dtype))):
                raise RangeLoop(s.iter, problem=f"a bound that is {_describe(a)}")
        start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
        if isinstance(step, Node):
            step = self.static_int(step, s.iter, "the step of range()")
        if step == 0:
            raise RangeLoop(s.iter, problem="the step must not be zero")
        idx = Node("loop_index", dims=(), dtype=torch.int32, weak=True, attrs={"range": (start, end, step)})
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
                    raise LoopCarried(s, name=n, problem=f"is reassigned inside a loop but holds {_describe(init)}")
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
                    raise LoopCarried(s, name=c.name, problem="is deleted inside the loop")
                if not isinstance(res, Node):
                    res = self.as_node(res, s) if isinstance(res, (bool, int, float)) else res
                if not isinstance(res, Node):
                    raise LoopCarried(s, name=c.name, problem=f"becomes {_describe(res)} inside the loop")
                if res.dims != c.arg.dims or res.dtype != c.arg.dtype or (res.weak != c.arg.weak and res.weak):
                    # grow the init to the joined type and trace again
                    dims = _broadcast_dims(c.arg.dims, res.dims)
                    if dims is None or dims != res.dims and _broadcast_dims(res.dims, c.arg.dims) != dims:
                        raise LoopShape(s, name=c.name, before=_dims_text(c.arg.dims), after=_dims_text(res.dims))
                    dtype = result_type(c.arg, res) if not (c.arg.weak and not res.weak) else res.dtype
                    if c.arg.weak and not res.weak:
                        dtype = res.dtype
                    new_init = self.materialize(inits[c.name], dims, dtype, s)
                    if new_init.dims == c.arg.dims and new_init.dtype == c.arg.dtype and not c.arg.weak:
                        res = cast(self, res, c.arg.dtype)
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
            raise LoopCarried(s, name=", ".join(c.name for c in loop.carried), problem="do not settle on one type")
        # after the loop: carried variables hold the loop's results; loop-locals are gone
        self.env = saved_env
        for c in loop.carried:
            if c.init.block is None and not has(c.init, BOUND) and not has(c.init, TILE_ATTR):
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
            return cast(self, v, dtype) if v.dtype != dtype else v
        n = Node("expand", [cast(self, v, dtype) if v.dtype != dtype else v], dims=dims, dtype=dtype, pad=v.pad)
        n.src = src
        return n

    def device_if(self, s, cond: Node):
        if cond.dtype != torch.bool:
            cond = binop(self, "ne", cond, 0, s.test)
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
                raise BranchShapes(s, name=n, then=_dims_text(a.dims), other=_dims_text(b.dims))
            dtype = result_type(a, b)
            out = Node("phi", dims=dims, dtype=dtype, attrs={"name": n})
            out.src = s
            ifs.merged.append(Merged(n, (a, dims, dtype), (b, dims, dtype), out))
            self.env[n] = out
        parent.add(ifs)

    # ------------------------------------------------------------------ finishing


def _has_continue(s) -> bool:
    """A ``continue`` of the enclosing loop in statement ``s`` (not one of a loop nested in it)."""
    if isinstance(s, ast.Continue):
        return True
    if isinstance(s, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(_has_continue(c) for c in ast.iter_child_nodes(s) if isinstance(c, ast.stmt))


def _lower_continue(stmts: list) -> list:
    """A loop body without ``continue``: what follows an ``if`` that continues goes into its branches
    (``if c: A; continue`` then ``B`` becomes ``if c: A else: B``), what follows a ``continue`` is dropped."""
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Continue):
            return out or [ast.copy_location(ast.Pass(), s)]
        if isinstance(s, ast.If) and _has_continue(s):
            rest = stmts[i + 1:]
            new = ast.If(test=s.test, body=_lower_continue(s.body + rest) or [ast.Pass()],
                         orelse=_lower_continue(s.orelse + rest))
            ast.copy_location(new, s)
            new.end_lineno, new.end_col_offset = s.end_lineno, s.end_col_offset
            for b in new.body:
                if not hasattr(b, "lineno"):
                    ast.copy_location(b, s)
            out.append(new)
            return out
        out.append(s)
    return out
