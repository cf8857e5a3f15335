"""The tile program: what the tracer builds from one tile loop nest, and the
code generator turns into newt source.

A small structured IR.  Values are ``Node`` objects with *dims* (a tuple of
``TileInfo`` (a tile dimension), ``RInfo`` (a whole dimension: ``x[tile, :]``)
or ``ONE`` (a broadcast dimension of size 1)) and a torch dtype.  Statements
live in ``Block`` lists: nodes in program order, ``LoopStmt`` for nested
tile / grid / range loops (with their loop-carried variables) and ``IfStmt``
for conditions on device scalars.
"""

from __future__ import annotations

import itertools

__all__ = ["ONE", "TileInfo", "RInfo", "BlockDim", "same_dim", "Node", "Block", "LoopStmt", "IfStmt", "Carried",
           "Merged", "TensorArg", "ScalarArg", "Program"]


class _One:
    """A broadcast dimension of size 1."""

    def __repr__(self):
        return "1"

    label = "1"


ONE = _One()

_ids = itertools.count()


class TileInfo:
    """One dimension of a ``dt.tile`` (or ``dt.grid``) loop."""

    def __init__(self, id: int, name: str, kind: str, depth: int, begin, end, slot, fixed, site_index: int,
                 dim: int, src=None):
        self.id = id
        self.name = name  # user's loop variable (for generated names)
        self.kind = kind  # "tile" | "grid"
        self.depth = depth  # 0: a grid dimension
        self.begin = begin  # int or Node
        self.end = end  # int or Node
        self.slot = slot  # index into config.block_sizes, or None when fixed
        self.fixed = fixed  # the fixed block size (int) or None
        self.site_index = site_index
        self.dim = dim
        self.src = src
        self.used_in_dot = False
        self.dot_role = None  # "mn" | "k"
        self.step = 1  # dt.grid step
        self.grid_axis = None
        self.jagged_parent = None  # dt.jagged_tile(lengths): the lengths (a Node over enclosing tiles)
        self.jagged_mask = None  # index < lengths, dims (parent tiles..., this tile): set in the loop body
        # the block size when the program is traced for it: fixed, or a dt.register_block_size value the host code
        # passed (its name is a guard of the program); None when the config alone decides
        self.known_block = fixed

    @property
    def extent(self):
        if isinstance(self.begin, int) and isinstance(self.end, int):
            return max(0, self.end - self.begin)
        return None

    @property
    def label(self) -> str:
        return self.name

    def __repr__(self):
        return f"Tile({self.name})"


class RInfo:
    """A whole dimension (``:``) of ``size`` elements: one block (persistent) or a loop over chunks."""

    def __init__(self, id: int, size: int, size_expr, src=None):
        self.id = id
        self.size = size
        self.size_expr = size_expr  # int literal or a Node (a run-time size)
        self.src = src
        self.rollable = True
        self.why_not_rollable = None
        self.used_in_dot = False
        self.exact_block = False  # split / merged by a reshape or made by dt.join: its block is exactly its size
        self.broadcast_as_one = False  # a size-1 dimension broadcast like torch's (trace_common._size_one)
        self.slot = None  # index into config.reduction_loops
        self.name = f"r{id}"
        self.merged_tiles: list = []  # tiles a reshape merged into this dimension (a matmul over it needs them big)

    def not_rollable(self, why: str):
        if self.rollable:
            self.rollable = False
            self.why_not_rollable = why

    @property
    def label(self) -> str:
        return f":{self.size}"

    def __repr__(self):
        return f"R{self.id}({self.size})"


class BlockDim(RInfo):
    """A dimension of a ``dt.register_block_size`` value's size used before (or without) a tile of that size
    (``dt.zeros([tile_m, block_size_n])``, ``dt.arange(BLOCK_M)``): one block of exactly that many lanes, no mask.
    It broadcasts with a tile whose block size is that register (Helion: the same block-size symbol); values
    combining the two keep this dimension."""

    def __init__(self, id: int, size: int, block_slot: int, src=None):
        super().__init__(id, size, size, src)
        self.block_slot = block_slot
        self.exact_block = True
        self.not_rollable("a registered block size (one block of exactly that size)")
        self.name = f"bs{block_slot}"

    @property
    def label(self) -> str:
        return f"block_size[{self.block_slot}]"

    def same_as(self, d) -> bool:
        """``d`` is a tile whose block size is this register (the same lanes in the generated code)."""
        return d is self or (isinstance(d, TileInfo) and d.slot == self.block_slot and d.fixed is None)

    def __repr__(self):
        return f"B{self.id}(slot {self.block_slot})"


def same_dim(a, b) -> bool:
    """Two dims that are the same lanes: identical, or a registered block size and a tile of that size."""
    if a is b:
        return True
    if isinstance(a, BlockDim):
        return a.same_as(b)
    if isinstance(b, BlockDim):
        return b.same_as(a)
    return False


class Node:
    """A value inside the kernel."""

    __slots__ = ("id", "op", "args", "attrs", "dims", "dtype", "weak", "pad", "src", "name", "host_value",
                 "block", "users", "guards")

    def __init__(self, op: str, args=(), dims=(), dtype=None, attrs=None, weak=False, pad=None, src=None):
        self.id = next(_ids)
        self.op = op
        self.args = list(args)
        self.attrs = attrs or {}
        self.dims = tuple(dims)
        self.dtype = dtype
        self.weak = weak  # behaves like a Python number in type promotion
        self.pad = pad  # the value held in masked-off lanes, when known
        self.src = src  # the AST node it came from
        self.name = None  # the user's variable name, when assigned
        self.host_value = None  # known on the host (a run-time scalar parameter)
        self.block = None
        self.users = []
        self.guards = ()

    @property
    def is_scalar(self) -> bool:
        return not self.dims

    def operands(self):
        for a in self.args:
            if isinstance(a, Node):
                yield a
        for k in ("items",):
            for it in self.attrs.get(k, ()):
                if it[0] in ("scalar", "vec") and isinstance(it[1], Node):
                    yield it[1]
                    if len(it) > 3 and isinstance(it[3][1], Node):  # checked against a run-time size
                        yield it[3][1]
                elif it[0] == "red" and len(it) > 3:  # a slice whose start moves: its start and the bound
                    yield from (x for x in it[3:] if isinstance(x, Node))

    def __repr__(self):
        return f"%{self.id}:{self.op}[{','.join(d.label for d in self.dims)}]{self.dtype}"


class Block:
    def __init__(self, parent=None):
        self.stmts: list = []
        self.parent = parent

    def add(self, s):
        self.stmts.append(s)
        if isinstance(s, Node):
            s.block = self
        return s


class Carried:
    """A variable carried around a loop: ``init`` before, ``arg`` inside, ``result`` at the end, ``out`` after."""

    def __init__(self, name, init, arg, result=None, out=None):
        self.name = name
        self.init = init
        self.arg = arg
        self.result = result
        self.out = out


class LoopStmt:
    def __init__(self, kind: str, tiles=(), index=None, start=None, end=None, step=None, src=None):
        self.kind = kind  # "tile" | "grid" | "range"
        self.tiles = list(tiles)
        self.index = index  # Node (op "grid_index") for grid / range loops
        self.start = start
        self.end = end
        self.step = step
        self.body = Block()
        self.carried: list[Carried] = []
        self.src = src


class Merged:
    def __init__(self, name, then_val, else_val, out):
        self.name = name
        self.then_val = then_val
        self.else_val = else_val
        self.out = out


class IfStmt:
    def __init__(self, cond, src=None):
        self.cond = cond
        self.then_block = Block()
        self.else_block = Block()
        self.merged: list[Merged] = []
        self.src = src


class TensorArg:
    """A host tensor the kernel reads or writes (a pointer parameter)."""

    def __init__(self, name: str, tensor, index: int):
        self.name = name
        self.tensor = tensor
        self.index = index
        self.sources: list = []  # where the host code holds it: ("local", name) | ("item", name, i) | ...
        self.dtype = tensor.dtype
        self.shape = tuple(tensor.shape)
        self.strides = tuple(tensor.stride())
        self.loaded = False
        self.stored = False
        self.atomic = False
        span = sum((s - 1) * abs(st) for s, st in zip(self.shape, self.strides)) if all(self.shape) else 0
        self.int64 = span >= 2 ** 31 - 1

    @property
    def write_only(self) -> bool:
        return self.stored and not self.loaded and not self.atomic


class ScalarArg:
    """A host number passed to the kernel at run time."""

    def __init__(self, name: str, value, dtype):
        self.name = name
        self.value = value
        self.source = name
        self.dtype = dtype  # torch dtype


class Program:
    """One tile loop nest, traced: everything code generation needs."""

    def __init__(self, name: str, loop_index: int):
        self.name = name
        self.loop_index = loop_index
        self.grid_tiles: list[TileInfo] = []
        self.tiles: list[TileInfo] = []
        self.rdims: list[RInfo] = []
        self.tensors: dict[str, TensorArg] = {}
        self.scalars: dict[str, ScalarArg] = {}
        self.size_params: dict[str, tuple] = {}  # name -> (tensor name, "size"|"stride", dim)
        self.body = Block()
        self.guards: list = []  # (name, value) of host values baked into the code
        self.static_shapes = True
        self.dot_precision = "tf32"
        self.src = None  # SourceInfo
        self.loop_src = None  # the ast.For of the tile loop
        self.multi_grid_ordinal = None  # index into config.loop_orders / l2_groupings
        self.has_dot = False
        self.has_atomic = False
        self.dims_used: set = set()  # tuples of dims that appear together in a block value
        # why kernel.ref cannot be this program's oracle: TraceError causes (D004 TileBoundDecision: an `if` on
        # where a tile of tunable block size starts), raised by kernel.ref; the autotuner then checks configs
        # against the default config's output (Helion's rule)
        self.oracle_gaps: list = []

    def block_slots(self) -> list:
        return sorted({t.slot for t in self.tiles if t.slot is not None})
