"""Static, symbolic tile-shape inference over a deuteron kernel's tile loops (torch-free, from the AST alone).

Each tile-loop variable is a symbolic size (``tile_m``); a whole dimension ``:`` is a size of its own (named after
the host's ``m, n = x.shape`` where the file says); indexing a host tensor with tiles, ``:``, ``None`` and ints
gives a block shape of these symbols; elementwise ops broadcast them; reductions, ``.T`` / ``permute`` and matmuls
(``@``, ``torch.matmul``, ``dt.dot``) transform them; a store compares the value's shape with the target region's.

The tracer (``deuteron.trace_common._broadcast_dims``, ``ops.memory._check_store_dims``) treats two tiles of
different loops as different sizes even when their block sizes coincide at run time (Helion does the same), so
a tile against another tile in one position is D006 here too, with the tracer's message (``errors.Broadcast``,
``errors.StoreShape``, ``errors.MatmulShapes``).  Everything else the inference cannot settle (a whole dimension
against a tile: it may have size 1; a registered block size; a helper call; an op it does not know) is *unknown*
and never reported: valid code never gets an error from here.

The inferred shapes and dtypes also become the editor's value hovers and inlay hints (``ValueNote``).
"""

from __future__ import annotations

import ast

from .errors import Broadcast, IndexRank, MatmulDtypes, MatmulShapes, StoreShape
from .structure_base import Note

__all__ = ["ValueNote", "infer_loop_shapes", "Dim", "Block"]


class Dim:
    """One symbolic dimension: a tile (``kind="tile"``, one per loop variable), a whole dimension (``"whole"``,
    ``key`` its size's symbol when the file names it, ``("size", n)`` when a launch gives it; ``"whole1"``: one of
    a single element), the broadcast 1 (``"one"``) or an unknown size."""

    __slots__ = ("kind", "key", "label")

    def __init__(self, kind: str, key, label: str):
        self.kind, self.key, self.label = kind, key, label

    def same(self, other: "Dim") -> bool:
        return self.kind == other.kind and self.key is not None and self.key == other.key

    def __repr__(self):
        return self.label


ONE = Dim("one", "1", "1")


def _unknown_dim() -> Dim:
    return Dim("unknown", None, "?")


def _size_dim(n) -> Dim:
    """A whole dimension of ``n`` elements that a launch of the file gives (the tracer's ``RInfo``: one per size,
    named ``:n``)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        # one element: the same dimension wherever it meets itself (``:1``), broadcast or refused elsewhere as the
        # trace decides (never definite)
        return Dim("whole1", ("size", 1), ":1") if n == 1 and not isinstance(n, bool) else _unknown_dim()
    return Dim("whole", ("size", n), f":{n}")


def _definite(d: Dim) -> bool:
    """A dimension the tracer never broadcasts: a tile, or a whole dimension of a known size above one."""
    return d.kind == "tile" or (d.kind == "whole" and isinstance(d.key, tuple) and d.key[0] == "size")


class Block:
    """A value of the kernel: its dims (``None``: unknown rank) and dtype (``None``: unknown)."""

    __slots__ = ("dims", "dtype")

    def __init__(self, dims, dtype=None):
        self.dims = None if dims is None else tuple(dims)
        self.dtype = dtype

    def text(self) -> str:
        return "[" + ", ".join(d.label for d in self.dims) + "]" if self.dims is not None else "?"


class Tile:
    __slots__ = ("dim",)

    def __init__(self, dim: Dim):
        self.dim = dim


class TileTuple:
    __slots__ = ("tiles",)

    def __init__(self, tiles):
        self.tiles = tiles


class HostTensor:
    __slots__ = ("name", "rank")

    def __init__(self, name: str, rank):
        self.name, self.rank = name, rank


class Scalar:
    """A number of the host code, a grid index or a tile attribute: rank 0, broadcasts with anything."""

    __slots__ = ("dtype",)

    def __init__(self, dtype=None):
        self.dtype = dtype


UNKNOWN = None


class ValueNote(Note):
    """What the editor shows for a deuteron value: ``block fp32[tile_m, tile_n]`` (inlay hint: ``: fp32[...]``)."""

    __slots__ = ("dims", "dtype")

    def __init__(self, dims: tuple, dtype: str | None):
        self.dims = tuple(dims)
        self.dtype = dtype
        super().__init__("value", self._text())

    def shape_text(self) -> str:
        return "[" + ", ".join(self.dims) + "]"

    def _text(self) -> str:
        if not self.dims:
            return f"scalar {self.dtype}" if self.dtype else "scalar"
        return f"block {self.dtype or ''}{self.shape_text()}"


_DTYPES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
           "float64": "fp64", "double": "fp64", "i32": "i32", "int": "i32", "i64": "i64", "long": "i64",
           "int8": "i8", "int16": "i16", "uint8": "u8", "bool": "i1", "float8_e4m3fn": "fp8e4nv",
           "float8_e5m2": "fp8e5"}
_TORCH_NAMES = {"fp32": "torch.float32", "fp16": "torch.float16", "bf16": "torch.bfloat16", "fp64": "torch.float64"}
_FLOAT_RANK = {"fp64": 4, "fp32": 3, "fp16": 2, "bf16": 2, "fp8e4nv": 1, "fp8e5": 1}

_UNARY = {"exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "abs", "neg", "sigmoid", "tanh", "relu",
          "sin", "cos", "erf", "floor", "ceil", "round", "trunc", "reciprocal", "square", "sign", "gelu", "silu",
          "softplus", "logsigmoid", "leaky_relu", "elu", "hardtanh", "hardsigmoid", "hardswish", "mish", "clamp",
          "clip", "nan_to_num", "contiguous", "clone", "detach", "isnan", "isinf", "isfinite", "logical_not",
          "bitwise_not", "signbit"}
_BOOL_UNARY = {"isnan", "isinf", "isfinite", "logical_not", "signbit"}
_BINARY = {"add", "sub", "mul", "div", "true_divide", "maximum", "minimum", "pow", "fmod", "remainder",
           "atan2", "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor"}
_REDUCE = {"sum", "amax", "amin", "mean", "prod", "argmax", "argmin", "logsumexp", "any", "all", "var", "std"}
_CONVERT = {"float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64", "int": "i32", "long": "i64",
            "bool": "i1"}
_ALLOC = {"zeros", "ones", "full", "empty"}


def _binop_dtype(a, b):
    da = a.dtype if isinstance(a, (Block, Scalar)) else None
    db = b.dtype if isinstance(b, (Block, Scalar)) else None
    if da == db:
        return da
    if isinstance(a, Scalar) and isinstance(b, Block) and a.dtype in (None, "i32"):
        return db if db in _FLOAT_RANK else None
    if isinstance(b, Scalar) and isinstance(a, Block) and b.dtype in (None, "i32"):
        return da if da in _FLOAT_RANK else None
    return None


class _Inference:
    def __init__(self, st, loop, concrete=None):
        self.st = st
        self.loop = loop
        # the shapes and dtypes one launch of the file gives (``deuteron.frontend.LaunchShapes``), or None
        self.concrete = concrete
        self.env: dict = {}
        self.problems: list = []
        self.notes: list = []
        self._reported: set = set()
        self._sizes = self._host_sizes()
        self._tile_ids = 0
        self._maybe_tuple: set = set()  # loop variables bound as one tile that may be a tuple of them

    # -- host facts ----------------------------------------------------------------------
    def _host_sizes(self) -> dict:
        """tensor name -> the host names of its sizes (``m, n = x.shape`` / ``x.size()``)."""
        out: dict = {}
        for stmt in self.st._host_stmts(self.st.fdef.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                    isinstance(stmt.targets[0], (ast.Tuple, ast.List)):
                src = self.st._shape_source(stmt.value)
                if src is not None and all(isinstance(e, ast.Name) for e in stmt.targets[0].elts):
                    out.setdefault(src, [e.id for e in stmt.targets[0].elts])
        return out

    def _whole(self, tensor: str, d: int | None) -> Dim:
        if self.concrete is not None and d is not None:
            shape = self.concrete.shape(tensor)
            if shape is not None and d < len(shape) and shape[d] is not None:
                return _size_dim(shape[d])
        names = self._sizes.get(tensor)
        if d is not None and names and d < len(names):
            return Dim("whole", names[d], ":" + names[d])
        return Dim("whole", None, ":")

    def _rank(self, name: str):
        r = self.st.ranks.get(name)
        if r is None and self.concrete is not None:
            r = self.concrete.rank(name)
        return r

    def _name(self, n: ast.Name):
        if n.id in self.env:
            return self.env[n.id]
        if n.id in self.loop.assigned:  # a device local read before this analysis bound it (loops, branches)
            return UNKNOWN
        if n.id in self.st.ranks:
            return HostTensor(n.id, self.st.ranks[n.id])
        if self.concrete is not None and self.concrete.rank(n.id) is not None:
            return HostTensor(n.id, self.concrete.rank(n.id))
        ann = self.st.param_annotations.get(n.id)
        if ann is not None:
            text = ast.unparse(ann)
            if text.endswith("Tensor"):
                return HostTensor(n.id, None)
            if text in ("int", "float", "bool"):
                return Scalar({"int": "i32", "float": "fp32", "bool": "i1"}[text] if text != "float" else None)
        if n.id in self.st.host_assigned:
            return Scalar(None)
        return UNKNOWN

    # -- problems --------------------------------------------------------------------------
    def _report(self, cls, node, **fields):
        key = (id(node), cls.__name__)
        if key in self._reported:
            return
        self._reported.add(key)
        hint = fields.pop("hint", None)
        message = cls.template.format(**fields)
        if hint is None and cls.hint_template:
            hint = cls.hint_template.format(**fields)
        self.problems.append((cls.code, node, message, hint))

    def _note(self, node, v):
        if isinstance(v, Block) and v.dims is not None and all(d.kind != "unknown" for d in v.dims):
            self.notes.append((node, ValueNote(tuple(d.label for d in v.dims), v.dtype)))

    # -- broadcasting --------------------------------------------------------------------
    def broadcast(self, a, b, node, report=True):
        """The shape of ``a op b``; reports D006 when two different tiles meet in one position."""
        if a is UNKNOWN or b is UNKNOWN or isinstance(a, (HostTensor, TileTuple)) or \
                isinstance(b, (HostTensor, TileTuple)):
            return UNKNOWN
        da = () if isinstance(a, Scalar) else a.dims
        db = () if isinstance(b, Scalar) else b.dims
        if da is None or db is None:
            return Block(None, _binop_dtype(a, b))
        n = max(len(da), len(db))
        pa = (ONE,) * (n - len(da)) + da
        pb = (ONE,) * (n - len(db)) + db
        out = []
        for x, y in zip(pa, pb):
            if x.same(y):
                out.append(x)
            elif x.kind == "one":
                out.append(y)
            elif y.kind == "one":
                out.append(x)
            elif _definite(x) and _definite(y):  # two tiles, or sizes a launch gives: the tracer's D006
                if report:
                    self._report(Broadcast, node, shapes=f"{Block(da).text()} and {Block(db).text()}")
                return UNKNOWN
            else:
                # a tile against a whole dimension (the tracer accepts size 1 only), a registered block size...:
                # the trace decides, and may fail here; nothing after it is reported from this value
                return UNKNOWN
        return Block(out, _binop_dtype(a, b))

    # -- statements ------------------------------------------------------------------------
    def run(self):
        self.bind_site(self.loop.node)
        self.stmts(self.loop.node.body)

    def bind_site(self, for_node: ast.For) -> bool:
        site = self.st._site_of(for_node)
        if site is None:
            return False
        names = site.target_names
        tgt = for_node.target
        if site.kind == "grid":
            for nm in names:
                self.env[nm] = Scalar("i32")
            return True
        ndim = site.static_ndim
        if isinstance(tgt, ast.Name) and (not site.as_list or ndim == 1 and not site.as_list):
            self.env[tgt.id] = Tile(self._tile(tgt.id))
            if site.as_list is None:  # dt.tile(x.size()) of a rank the AST does not say: maybe a tuple of tiles
                self._maybe_tuple.add(tgt.id)
        elif isinstance(tgt, ast.Name) and site.as_list and ndim:
            self.env[tgt.id] = TileTuple([Tile(self._tile(f"{tgt.id}{d}")) for d in range(ndim)])
        elif isinstance(tgt, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in tgt.elts) and \
                (ndim is None or ndim == len(tgt.elts)):
            for e in tgt.elts:
                self.env[e.id] = Tile(self._tile(e.id))
        else:
            for nm in names:
                self.env[nm] = UNKNOWN
        return True

    def _tile(self, label: str) -> Dim:
        self._tile_ids += 1
        return Dim("tile", ("tile", self._tile_ids), label)

    def stmts(self, body):
        for s in body:
            self.stmt(s)

    def stmt(self, s):
        if isinstance(s, ast.Assign):
            v = self.expr(s.value)
            for t in s.targets:
                self.assign(t, v, s.value)
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            self.assign(s.target, self.expr(s.value), s.value)
        elif isinstance(s, ast.AugAssign):
            self.augassign(s)
        elif isinstance(s, ast.Expr):
            self.expr(s.value)
        elif isinstance(s, ast.For):
            self.for_loop(s)
        elif isinstance(s, ast.If):
            self.expr(s.test)
            before = dict(self.env)
            self.stmts(s.body)
            then = self.env
            self.env = dict(before)
            self.stmts(s.orelse)
            self.env = _merge(then, self.env)
        else:
            for n in _assigned(s):  # anything else: what it binds is unknown from here on
                self.env[n] = UNKNOWN

    def for_loop(self, s: ast.For):
        before = dict(self.env)
        if not self.bind_site(s):
            self.expr(s.iter)
            for n in _names_of(s.target):
                self.env[n] = Scalar("i32") if _is_range(s.iter) else UNKNOWN
        self.stmts(s.body)
        self.stmts(s.orelse)
        # a loop-carried value keeps its shape only if one iteration did not change it (else: LoopShape, traced)
        self.env = _merge(before, self.env, keep_new=True)

    def assign(self, t, v, value_node):
        if isinstance(t, ast.Name):
            self.env[t.id] = v
            self._note(t, v)
        elif isinstance(t, (ast.Tuple, ast.List)):
            items = v.tiles if isinstance(v, TileTuple) else None
            for i, e in enumerate(t.elts):
                self.assign(e, items[i] if items is not None and i < len(items) and
                            not any(isinstance(x, ast.Starred) for x in t.elts) else UNKNOWN, value_node)
        elif isinstance(t, ast.Subscript):
            base = self.expr_base(t.value)
            if isinstance(base, HostTensor):
                region = self.index(base, t.slice, t)
                self.store(base, region, v, t)
            else:
                self.expr(t.slice)
        else:
            for n in _names_of(t):
                self.env[n] = UNKNOWN

    def augassign(self, s: ast.AugAssign):
        v = self.expr(s.value)
        if isinstance(s.target, ast.Name):
            cur = self.env.get(s.target.id, UNKNOWN) if s.target.id in self.env else self._name(s.target)
            r = self.binop(s.op, cur, v, s)
            self.env[s.target.id] = r
            self._note(s.target, r)
        elif isinstance(s.target, ast.Subscript):
            base = self.expr_base(s.target.value)
            if isinstance(base, HostTensor):
                region = self.index(base, s.target.slice, s.target)
                r = self.binop(s.op, region, v, s)
                self.store(base, region, r, s.target)

    def store(self, ht: HostTensor, region, v, target_node):
        """``ht[items] = v``: the tracer's ``_check_store_dims`` on symbols."""
        if not isinstance(region, Block) or region.dims is None or not isinstance(v, Block) or v.dims is None:
            return
        target = f"{ht.name}[{region.text()[1:-1]}]"
        if len(v.dims) > len(region.dims):
            if ht.rank is None:  # the tensor may have more dimensions: the tracer's D002 (partial indexing) then
                return
            self._report(StoreShape, target_node, value=v.text(), target=target,
                         hint="the value has more dimensions than the indexed region")
            return
        for a, b in zip(reversed(v.dims), reversed(region.dims)):
            if _definite(a) and _definite(b) and not a.same(b):
                self._report(StoreShape, target_node, value=v.text(), target=target)
                return

    # -- expressions -------------------------------------------------------------------------
    def expr_base(self, e):
        if isinstance(e, ast.Name):
            v = self._name(e)
            if v is UNKNOWN and e.id not in self.env and e.id not in self.loop.assigned and \
                    e.id in self.st.host_assigned | set(self.st.params):
                return HostTensor(e.id, self._rank(e.id))
            if isinstance(v, Scalar) and e.id not in self.env:
                return HostTensor(e.id, self._rank(e.id))
            return v
        return self.expr(e)

    def expr(self, e):
        v = self._expr(e)
        if not isinstance(e, ast.Name):
            self._note(e, v)
        return v

    def _expr(self, e):
        if isinstance(e, ast.Constant):
            if isinstance(e.value, bool):
                return Scalar("i1")
            if isinstance(e.value, (int, float)):
                return Scalar("i32" if isinstance(e.value, int) else None)
            return UNKNOWN
        if isinstance(e, ast.Name):
            v = self._name(e)
            self._note(e, v)
            return v
        if isinstance(e, ast.Subscript):
            base = self.expr_base(e.value)
            if isinstance(base, HostTensor):
                return self.index(base, e.slice, e)
            if isinstance(base, TileTuple) and isinstance(e.slice, ast.Constant) and isinstance(e.slice.value, int):
                i = e.slice.value
                return base.tiles[i] if -len(base.tiles) <= i < len(base.tiles) else UNKNOWN
            if isinstance(base, Block):
                return self.index_block(base, e.slice)
            self.expr(e.slice)
            return UNKNOWN
        if isinstance(e, ast.Attribute):
            base = self.expr(e.value) if not isinstance(e.value, ast.Name) else self._name(e.value)
            if isinstance(base, Tile):
                if e.attr == "index":
                    return Block((base.dim,), "i32")
                if e.attr in ("begin", "end", "id", "count", "block_size"):
                    return Scalar("i32")
                return UNKNOWN
            if isinstance(base, Block) and base.dims is not None:
                if e.attr == "T" and len(base.dims) <= 2:
                    return Block(tuple(reversed(base.dims)), base.dtype)
            return UNKNOWN
        if isinstance(e, ast.BinOp):
            a, b = self.expr(e.left), self.expr(e.right)
            return self.binop(e.op, a, b, e)
        if isinstance(e, ast.UnaryOp):
            v = self.expr(e.operand)
            if isinstance(v, Tile):
                v = Block((v.dim,), "i32")
            if isinstance(e.op, ast.Not):
                return UNKNOWN
            return v if isinstance(v, (Block, Scalar)) else UNKNOWN
        if isinstance(e, ast.Compare):
            vals = [self.expr(e.left)] + [self.expr(c) for c in e.comparators]
            if len(vals) != 2:
                return UNKNOWN
            a, b = (Block((v.dim,), "i32") if isinstance(v, Tile) else v for v in vals)
            r = self.broadcast(a, b, e)
            return Block(r.dims, "i1") if isinstance(r, Block) else r
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.IfExp):
            self.expr(e.test)
            a, b = self.expr(e.body), self.expr(e.orelse)
            return a if _same_value(a, b) else UNKNOWN
        for sub in ast.iter_child_nodes(e):
            if isinstance(sub, ast.expr):
                self.expr(sub)
        return UNKNOWN

    def binop(self, op, a, b, node):
        if isinstance(a, Tile):
            a = Block((a.dim,), "i32")
        if isinstance(b, Tile):
            b = Block((b.dim,), "i32")
        if isinstance(op, ast.MatMult):
            return self.matmul(a, b, node)
        return self.broadcast(a, b, node)

    def matmul(self, a, b, node, acc=UNKNOWN, form="torch"):
        """``a @ b`` (``form="torch"``: ``@``, torch.matmul / mm / bmm), ``dt.dot`` (``"dot"``) or addmm."""
        if not isinstance(a, Block) or not isinstance(b, Block):
            return UNKNOWN
        if a.dims is None or b.dims is None:
            return UNKNOWN
        if len(a.dims) != len(b.dims) or len(a.dims) not in (2, 3):
            return UNKNOWN
        ka, kb = a.dims[-1], b.dims[-2]
        if any(d.kind in ("one", "whole1") for d in (a.dims[-2], ka, kb, b.dims[-1])):
            return UNKNOWN  # a matmul over a dimension of one element: the tracer's D004, not modelled here
        if not ka.same(kb):
            if _definite(ka) and _definite(kb):
                self._report(MatmulShapes, node, problem=f"inner dimensions differ: {a.text()} @ {b.text()}")
            return UNKNOWN  # (two whole dimensions of unknown sizes: the trace decides)
        if len(a.dims) == 3:
            ba, bb = a.dims[0], b.dims[0]
            if not ba.same(bb):
                if _definite(ba) and _definite(bb):
                    self._report(MatmulShapes, node, problem="batches differ (a batched matmul with different "
                                                             "batch dimensions)")
                return UNKNOWN
            dims = (ba, a.dims[1], b.dims[2])
        else:
            dims = (a.dims[0], b.dims[1])
        if form == "torch" and a.dtype in _TORCH_NAMES and b.dtype in _TORCH_NAMES and a.dtype != b.dtype and \
                all(d.kind in ("tile", "whole") for d in (a.dims[-2], ka, b.dims[-1])):
            # the tracer's MatmulDtypes (eager torch.matmul refuses two dtypes; dt.dot accumulates them in fp32),
            # checked as the tracer does: after the shapes, and only where no size-1 dimension fails first
            self._report(MatmulDtypes, node, a=_TORCH_NAMES[a.dtype], b=_TORCH_NAMES[b.dtype])
            return UNKNOWN
        dtype = a.dtype if form == "torch" and a.dtype == b.dtype and a.dtype in _FLOAT_RANK else None
        if isinstance(acc, Block):
            dtype = acc.dtype
        return Block(dims, dtype)

    def index(self, ht: HostTensor, sl, node):
        """The block ``ht[items]`` (or its region, for a store)."""
        items = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        if any(isinstance(it, ast.Constant) and it.value is Ellipsis for it in items):
            for it in items:
                if not (isinstance(it, ast.Constant) and it.value is Ellipsis):
                    self.expr(it)
            return UNKNOWN
        dims: list = []
        d = 0  # the tensor's dimension the next item indexes
        unknown = False
        for it in items:
            if isinstance(it, ast.Constant) and it.value is None:
                dims.append(ONE)
                continue
            if isinstance(it, ast.Slice):
                for part in (it.lower, it.upper, it.step):
                    if part is not None:
                        self.expr(part)
                if it.lower is None and it.upper is None and it.step is None:
                    dims.append(self._whole(ht.name, d))
                else:
                    dims.append(_unknown_dim())
                d += 1
                continue
            v = self.expr(it)
            if isinstance(v, Tile):
                dims.append(v.dim)
            elif isinstance(v, Scalar) or isinstance(v, Block) and v.dims == ():
                pass
            elif isinstance(v, Block) and v.dims is not None:
                dims.extend(v.dims)  # a gather: the index block's dims
            else:
                unknown = True
            d += 1
        if not unknown and ht.rank is not None and d != ht.rank and self.concrete is not None and \
                ht.name not in self.st.ranks:
            self._index_rank(ht, items, node)  # (a rank the host code gives: the structure's own D002)
        if unknown or (ht.rank is not None and d != ht.rank):
            return UNKNOWN
        tiles = [x.key for x in dims if x.kind == "tile"]
        if len(tiles) != len(set(tiles)):  # a tile indexing two dimensions: the tracer's D003 (TileIndexing)
            return UNKNOWN
        return Block(dims, self.concrete.dtype(ht.name) if self.concrete is not None else None)

    def _index_rank(self, ht: HostTensor, items, node):
        """The tracer's ``IndexRank`` (D002) for a tensor whose rank only the launch gives, in the tracer's words:
        said only where every index reads as the tracer writes it (a tile, ``:``, ``None``, an int)."""
        shape = self.concrete.shape(ht.name)
        if shape is None or None in shape:
            return
        parts = []
        for it in items:
            if isinstance(it, ast.Constant) and (it.value is None or isinstance(it.value, int)) and \
                    not isinstance(it.value, bool):
                parts.append(repr(it.value))
            elif isinstance(it, ast.Slice):
                parts.append(":")
            else:
                v = self.env.get(it.id) if isinstance(it, ast.Name) else None
                if not isinstance(v, Tile) or it.id in self._maybe_tuple:
                    return
                parts.append(v.dim.label)
        count = sum(1 for it in items if not (isinstance(it, ast.Constant) and it.value is None))
        self._report(IndexRank, node, what=ht.name, rank=len(shape), shape=f" (shape {tuple(shape)})", count=count,
                     plural="ex" if count == 1 else "ices", items=f" [{', '.join(parts)}]")

    def index_block(self, b: Block, sl):
        items = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        if b.dims is None:
            return UNKNOWN
        dims, src = [], list(b.dims)
        for it in items:
            if isinstance(it, ast.Constant) and it.value is None:
                dims.append(ONE)
            elif isinstance(it, ast.Slice) and it.lower is None and it.upper is None and it.step is None and src:
                dims.append(src.pop(0))
            else:
                return UNKNOWN
        if src:
            return UNKNOWN
        return Block(dims, b.dtype)

    # -- calls -----------------------------------------------------------------------------
    def call(self, e: ast.Call):
        f = e.func
        dtn = self.st.dt(f)
        tn = self.st.torch_name(f)
        args = e.args
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        if dtn in _ALLOC or (tn is not None and tn[0] == "torch" and tn[1] in _ALLOC):
            return self.alloc(dtn or tn[1], e, kw)
        if dtn in ("dot",) or (tn is not None and tn[0] == "torch" and tn[1] in ("matmul", "mm", "bmm")):
            vals = [self.expr(a) for a in args]
            acc = self.expr(kw["acc"]) if "acc" in kw else (vals[2] if len(vals) > 2 else UNKNOWN)
            for k, v in kw.items():
                if k != "acc":
                    self.expr(v)
            if len(vals) < 2:
                return UNKNOWN
            form = "dot" if dtn == "dot" or "out_dtype" in kw else "torch"
            return self.matmul(vals[0], vals[1], e, acc, form)
        if tn is not None and tn[0] == "torch" and tn[1] == "addmm" and len(args) == 3:
            acc, a, b = (self.expr(x) for x in args)
            r = self.matmul(a, b, e, acc, "addmm")
            return self.broadcast(acc, r, e) if isinstance(r, Block) else r
        if isinstance(f, ast.Attribute) and tn is None and dtn is None:
            return self.method(e, f)
        vals = [self.expr(a) for a in args]
        kwvals = [self.expr(v) for v in kw.values()]
        name = tn[1] if tn is not None else None
        if name in _UNARY and vals:
            v = vals[0]
            if not isinstance(v, Block):
                return UNKNOWN
            r = Block(v.dims, "i1" if name in _BOOL_UNARY else v.dtype)
            for other in vals[1:] + kwvals:  # clamp(x, lo, hi): blocks broadcast
                if isinstance(other, Block) and isinstance(r, Block):
                    r = self.broadcast(r, other, e, report=False)
                    if isinstance(r, Block):
                        r.dtype = None
            return r
        if name in ("maximum", "minimum") and len(vals) == 2 and tn[0] == "torch":
            return self.broadcast(*vals, e)
        if name in _BINARY and len(vals) == 2:
            return self.broadcast(*vals, e, report=False)
        if name == "where" and len(vals) == 3:
            r = self.broadcast(vals[1], vals[2], e, report=False)
            r = self.broadcast(vals[0], r, e, report=False) if r is not UNKNOWN else UNKNOWN
            return r
        if name in _REDUCE and vals:
            return self.reduce(name, vals[0], args[1:], kw)
        if name in ("softmax", "log_softmax") and vals and isinstance(vals[0], Block):
            return Block(vals[0].dims, vals[0].dtype)
        if name in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like") and vals:
            v = vals[0]
            if isinstance(v, Block):
                return Block(v.dims, _dtype_of(self.st, kw.get("dtype")) or v.dtype)
        return UNKNOWN

    def method(self, e: ast.Call, f: ast.Attribute):
        recv = self.expr(f.value) if not isinstance(f.value, ast.Name) else self._name(f.value)
        for a in e.args:
            self.expr(a)
        kw = {k.arg: k.value for k in e.keywords if k.arg}
        for v in kw.values():
            self.expr(v)
        m = f.attr
        if not isinstance(recv, Block):
            return UNKNOWN
        if m in _UNARY:
            return Block(recv.dims, "i1" if m in _BOOL_UNARY else recv.dtype)
        if m in _CONVERT and not e.args:
            return Block(recv.dims, _CONVERT[m])
        if m == "to":
            target = e.args[0] if e.args else kw.get("dtype")
            return Block(recv.dims, _dtype_of(self.st, target))
        if m in _REDUCE:
            return self.reduce(m, recv, e.args, kw)
        if recv.dims is None:
            return UNKNOWN
        if m == "t" and len(recv.dims) <= 2 and not e.args:
            return Block(tuple(reversed(recv.dims)), recv.dtype)
        if m == "permute":
            perm = _ints(e.args[0].elts if len(e.args) == 1 and isinstance(e.args[0], (ast.List, ast.Tuple))
                         else e.args)
            if perm is None or sorted(p % max(len(recv.dims), 1) for p in perm) != list(range(len(recv.dims))):
                return UNKNOWN
            return Block(tuple(recv.dims[p] for p in perm), recv.dtype)
        if m == "transpose" and len(e.args) == 2:
            ij = _ints(e.args)
            n = len(recv.dims)
            if ij is None or not all(-n <= x < n for x in ij):
                return UNKNOWN
            dims = list(recv.dims)
            i, j = ij[0] % n, ij[1] % n
            dims[i], dims[j] = dims[j], dims[i]
            return Block(dims, recv.dtype)
        if m == "unsqueeze" and len(e.args) == 1:
            ij = _ints(e.args)
            n = len(recv.dims) + 1
            if ij is None or not -n <= ij[0] < n:
                return UNKNOWN
            dims = list(recv.dims)
            dims.insert(ij[0] % n, ONE)
            return Block(dims, recv.dtype)
        return UNKNOWN

    def reduce(self, name, v, rest_args, kw):
        if not isinstance(v, Block) or v.dims is None:
            return UNKNOWN
        dim_node = rest_args[0] if rest_args else kw.get("dim")
        keep = kw.get("keepdim")
        keepdim = isinstance(keep, ast.Constant) and keep.value is True
        if keep is not None and not isinstance(keep, ast.Constant):
            return UNKNOWN
        if len(rest_args) > 1 and name not in ("var", "std"):
            return UNKNOWN
        dtype = "i64" if name in ("argmax", "argmin") else ("i1" if name in ("any", "all") else v.dtype)
        if dim_node is None:
            return Block((ONE,) * len(v.dims) if keepdim else (), dtype)
        axes = _ints(dim_node.elts if isinstance(dim_node, (ast.List, ast.Tuple)) else [dim_node])
        n = len(v.dims)
        if axes is None or not all(-n <= a < n for a in axes) or n == 0:
            return UNKNOWN
        axes = {a % n for a in axes}
        dims = [ONE if i in axes else d for i, d in enumerate(v.dims)] if keepdim else \
            [d for i, d in enumerate(v.dims) if i not in axes]
        return Block(dims, dtype)

    def alloc(self, fn, e: ast.Call, kw):
        shape = e.args[0] if e.args else kw.get("shape") or kw.get("size")
        for a in e.args[1:]:
            self.expr(a)
        dtype_node = kw.get("dtype")
        if dtype_node is None and fn == "full" and len(e.args) > 2:
            dtype_node = e.args[2]
        dtype = _dtype_of(self.st, dtype_node) if dtype_node is not None else "fp32"
        if not isinstance(shape, (ast.List, ast.Tuple)):
            return UNKNOWN
        dims = []
        for s in shape.elts:
            v = self.expr(s) if not isinstance(s, ast.Name) else self._name(s)
            if isinstance(v, Tile):
                dims.append(v.dim)
            elif self.concrete is not None and isinstance(v, Scalar) and not (
                    isinstance(s, ast.Name) and (s.id in self.env or s.id in self.loop.assigned)):
                # an int size (a literal; a host size where shapes are static): the tracer's whole dimension
                n = self.concrete.int_value(s)
                dims.append(ONE if n == 1 else _size_dim(n))
            else:
                dims.append(_unknown_dim())
        return Block(dims, dtype)


def _ints(nodes):
    out = []
    for n in nodes:
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            out.append(n.value)
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant) \
                and isinstance(n.operand.value, int):
            out.append(-n.operand.value)
        else:
            return None
    return out


def _dtype_of(st, node) -> str | None:
    if node is None:
        return None
    q = st.resolver.qualname(node)
    if q and q.startswith("torch."):
        return _DTYPES.get(q[len("torch."):])
    return None


def _same_value(a, b) -> bool:
    if isinstance(a, Block) and isinstance(b, Block) and a.dims is not None and b.dims is not None:
        return len(a.dims) == len(b.dims) and all(x.same(y) for x, y in zip(a.dims, b.dims)) and a.dtype == b.dtype
    return a is b


def _merge(a: dict, b: dict, keep_new: bool = False) -> dict:
    out = {}
    for k in set(a) | set(b):
        x, y = a.get(k, UNKNOWN), b.get(k, UNKNOWN)
        if k not in a and keep_new:
            out[k] = y
        elif k in a and k in b and (x is y or _same_value(x, y)):
            out[k] = y
        else:
            out[k] = UNKNOWN
    return out


def _names_of(t) -> list:
    return [n.id for n in ast.walk(t) if isinstance(n, ast.Name)]


def _assigned(s) -> set:
    return {n.id for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _is_range(it) -> bool:
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("range", "static_range")


def infer_loop_shapes(st, loop, concrete=None):
    """(problems, notes) of one outermost tile loop: problems as ``(code, node, message, hint)``, notes as
    ``(node, ValueNote)``.  Never raises: an unexpected form ends the inference of that loop silently.
    ``concrete``: the sizes and dtypes of one launch of the file (``deuteron.frontend.LaunchShapes``): whole
    dimensions get their sizes (the tracer's ``:64``) and loads their dtypes, so what only those reveal is reported
    too, with the tracer's message."""
    inf = _Inference(st, loop, concrete)
    try:
        inf.run()
    except (RecursionError, ValueError, TypeError, AttributeError, IndexError, KeyError):
        return inf.problems, inf.notes
    return inf.problems, inf.notes
