"""Code generation: a traced tile ``Program`` + a ``Config`` -> readable newt source.

The output is a small Python module: one ``@newt.jit`` kernel and a
``launch`` function that computes the grid and launches it.  Statements carry
``# line N:`` comments pointing back at the user's source.  Whole-dimension
reductions are either persistent (one block) or looped over chunks (the
computation feeding each reduction is re-materialized inside the chunk loop,
one loop per dependency level, and stores of such values go in a final loop).
"""

from __future__ import annotations

import keyword
import math

import torch

from .config import Config, ConfigError
from .program import ONE, IfStmt, LoopStmt, Node, Program, RInfo, TileInfo

__all__ = ["generate", "Generated", "NL_DTYPE"]

NL_DTYPE = {
    torch.float16: "nl.float16", torch.bfloat16: "nl.bfloat16", torch.float32: "nl.float32",
    torch.float64: "nl.float64", torch.int8: "nl.int8", torch.int16: "nl.int16", torch.int32: "nl.int32",
    torch.int64: "nl.int64", torch.uint8: "nl.uint8", torch.bool: "nl.int1",
}
for _n, _v in (("uint16", "nl.uint16"), ("uint32", "nl.uint32"), ("uint64", "nl.uint64"),
               ("float8_e4m3fn", "nl.float8e4nv"), ("float8_e5m2", "nl.float8e5")):
    if hasattr(torch, _n):
        NL_DTYPE[getattr(torch, _n)] = _v

_BINOP_SYM = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "and": "&",
              "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
              "eq": "==", "ne": "!="}

_RESERVED = set(keyword.kwlist) | {"nl", "newt", "range", "float", "int", "min", "max", "abs", "len", "pid", "grid",
                                   "True", "False", "None", "print", "sum"}


def _dt(dtype) -> str:
    try:
        return NL_DTYPE[dtype]
    except KeyError:
        raise ConfigError(f"dtype {dtype} is not supported in a newt kernel") from None


def _lit(v) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        if math.isnan(v):
            return 'float("nan")'
        r = repr(v)
        return r
    raise ConfigError(f"cannot write the constant {v!r} into a kernel")


def _identity(kind: str, dtype) -> object:
    if kind == "sum":
        return 0.0 if dtype.is_floating_point else 0
    if kind == "prod":
        return 1.0 if dtype.is_floating_point else 1
    if dtype.is_floating_point:
        return float("-inf") if kind in ("max", "argmax") else float("inf")
    if dtype == torch.bool:
        return False if kind in ("max", "argmax") else True
    info = torch.iinfo(dtype)
    return info.min if kind in ("max", "argmax") else info.max


class Generated:
    """The generated module's source and how to launch it."""

    def __init__(self, source: str, kernel_name: str, launch_name: str, runtime_params: list, constexprs: dict,
                 num_warps: int, num_stages: int, grid_desc: str, needs_num_sms: bool):
        self.source = source
        self.kernel_name = kernel_name
        self.launch_name = launch_name
        self.runtime_params = runtime_params  # [(name, kind, payload)] in kernel order
        self.constexprs = constexprs
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.grid_desc = grid_desc
        self.needs_num_sms = needs_num_sms


class _Names:
    def __init__(self):
        self.taken = set(_RESERVED)

    def reserve(self, name):
        self.taken.add(name)

    def fresh(self, base: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "v"
        if base[0].isdigit():
            base = "v" + base
        if base not in self.taken:
            self.taken.add(base)
            return base
        i = 1
        while f"{base}_{i}" in self.taken:
            i += 1
        name = f"{base}_{i}"
        self.taken.add(name)
        return name


def _tile_base(name: str) -> str:
    for p in ("tile_", "t_"):
        if name.startswith(p) and len(name) > len(p):
            return name[len(p):]
    return name


class _Gen:
    def __init__(self, prog: Program, config: Config, fn_name: str, defaults: Config):
        self.prog = prog
        self.cfg = config
        self.fn_name = fn_name
        self.names = _Names()
        self.lines: list[str] = []
        self.var: dict[int, str] = {}  # node id -> variable name (once emitted in the current scope)
        self.alloc: dict[int, str] = {}  # node id -> allocated name (stable across chunk loops)
        self.tile_names: dict[int, dict] = {}
        self.rd_names: dict[int, dict] = {}
        self.last_line = None
        self.src = prog.src
        self.use_count: dict[int, int] = {}
        self.cross_block: set = set()
        self.looped: dict[int, int] = {}  # rdim id -> chunk
        self.rblock: dict[int, int] = {}
        self.block_vals: dict[int, int] = {}
        self.defaults = defaults
        self.unit: set = set()  # tiles of block size 1: rendered as scalars, not as block dimensions

    def rd(self, dims) -> tuple:
        """The dims a value has in the generated code (block-size-1 tiles are scalars there)."""
        return tuple(d for d in dims if not (isinstance(d, TileInfo) and d.id in self.unit))

    def rpos(self, dims, i: int) -> int:
        return len(self.rd(dims[:i]))

    def is_unit(self, d) -> bool:
        return isinstance(d, TileInfo) and d.id in self.unit

    # ------------------------------------------------------------------ config
    def resolve_config(self):
        cfg = self.cfg
        bs = cfg.block_sizes or []
        for t in self.prog.tiles:
            if t.kind == "grid":
                continue
            if t.slot is not None:
                if t.slot >= len(bs):
                    raise ConfigError(f"config.block_sizes has {len(bs)} entries but the kernel needs at least "
                                      f"{t.slot + 1} (one per tunable tile dimension)")
                v = bs[t.slot]
                if t.used_in_dot and v < 16:
                    raise ConfigError(f"block_sizes[{t.slot}] = {v} is used by a matmul, which needs at least 16")
                self.block_vals[t.id] = v
            else:
                self.block_vals[t.id] = t.fixed or 1
            if self.block_vals[t.id] == 1 and t.kind == "tile":
                self.unit.add(t.id)
        rl = cfg.reduction_loops or []
        for r in self.prog.rdims:
            pad = 1 << max(0, (r.size - 1).bit_length())
            if r.used_in_dot:
                pad = max(pad, 16)
            chunk = None
            if r.rollable and r.slot is not None and r.slot < len(rl) and rl[r.slot] is not None:
                chunk = int(rl[r.slot])
                if chunk >= pad:
                    chunk = None
            if chunk is not None:
                self.looped[r.id] = chunk
                self.rblock[r.id] = chunk
            else:
                self.rblock[r.id] = pad

    # ------------------------------------------------------------------ output
    def w(self, indent: int, text: str):
        self.lines.append("    " * indent + text)

    def origin(self, indent: int, src):
        line = getattr(src, "lineno", None)
        if line is None or line == self.last_line:
            return
        self.last_line = line
        text = self.src.line_text(line).strip() if self.src is not None else ""
        if len(text) > 90:
            text = text[:87] + "..."
        self.w(indent, f"# line {line}: {text}")

    # ------------------------------------------------------------------ names of tiles and dims
    def block_expr(self, d) -> str:
        if d is ONE:
            return "1"
        if isinstance(d, TileInfo):
            if d.slot is not None:
                return f"_BLOCK_{d.slot}"
            return str(d.fixed or 1)
        if isinstance(d, RInfo):
            return f"_RBLOCK_{d.id}"
        raise AssertionError(d)

    def tile_mask_needed(self, t: TileInfo) -> bool:
        if t.kind == "grid" or t.id in self.unit:
            return False
        ext = t.extent
        if ext is None:
            return True
        b = self.block_vals[t.id]
        return ext % b != 0

    def rdim_mask_needed(self, r: RInfo) -> bool:
        b = self.rblock[r.id]
        if not isinstance(r.size_expr, int):
            return True
        return r.size % b != 0

    def mask_of(self, d) -> str | None:
        if isinstance(d, TileInfo):
            if not self.tile_mask_needed(d):
                return None
            return self.tile_names[d.id]["mask"]
        if isinstance(d, RInfo):
            if not self.rdim_mask_needed(d):
                return None
            return self.rd_names[d.id]["mask"]
        return None

    def offs_of(self, d) -> str:
        if isinstance(d, TileInfo):
            return self.tile_names[d.id]["offs"]
        return self.rd_names[d.id]["offs"]

    def scalar_expr(self, v) -> str:
        """An int or a scalar Node (begin / end of a tile), as an expression."""
        if isinstance(v, Node):
            return self.expr(v)
        return _lit(v)

    # ------------------------------------------------------------------ expressions
    @staticmethod
    def expand(expr: str, pos: int, k: int, rank: int) -> str:
        """``expr`` of rank k placed at dims [pos, pos+k) of a rank-``rank`` value."""
        if rank == k:
            return expr
        idx = ["None"] * pos + [":"] * k + ["None"] * (rank - pos - k)
        return f"{_atom(expr)}[{', '.join(idx)}]"

    def aligned(self, v, rank: int) -> str:
        """Operand ``v`` left-padded with size-1 dims to ``rank`` (torch broadcasting)."""
        if not isinstance(v, Node):
            return _lit(v)
        e = self.expr(v)
        k = len(self.rd(v.dims))
        if k == 0 or k == rank:
            return e
        return self.expand(e, rank - k, k, rank)

    def shape_tuple(self, dims) -> str:
        parts = [self.block_expr(d) for d in self.rd(dims)]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def expr(self, n) -> str:
        if not isinstance(n, Node):
            return _lit(n)
        if n.id in self.var:
            return self.var[n.id]
        op = n.op
        if op == "const":
            v = n.attrs["value"]
            if n.weak or (n.dtype == torch.float32 and isinstance(v, float)) or \
                    (n.dtype == torch.int32 and isinstance(v, int) and not isinstance(v, bool)):
                return _lit(float(v) if n.dtype == torch.float32 else v)
            return f"nl.full((), {_lit(v)}, {_dt(n.dtype)})"
        if op == "param":
            return n.attrs["name"]
        if op in ("carried", "loopout", "phi"):
            return self.var.get(n.id) or self.carried_name(n)
        if op.startswith("tile_") or op == "grid_index" or op == "loop_index":
            return self.tile_attr_expr(n)
        return self.render(n)

    def is_constexpr(self, n) -> bool:
        """Is this scalar a compile-time constant in the generated kernel (a block size, a literal)?"""
        if not isinstance(n, Node):
            return True
        if n.dims:
            return False
        if n.op == "const" or n.op == "tile_block_size":
            return True
        if n.op == "tile_count":
            return n.attrs["tile"].extent is not None
        if n.op in ("binary", "unary"):
            return all(self.is_constexpr(a) for a in n.args)
        return False

    def carried_name(self, n) -> str:
        raise AssertionError(f"unbound loop variable {n}")

    def tile_attr_expr(self, n) -> str:
        op = n.op
        if op == "loop_index":
            return self.var[n.id]
        t = n.attrs["tile"]
        tn = self.tile_names[t.id]
        if op == "grid_index":
            return tn["index"]
        if op == "tile_index":
            return tn["begin"] if t.id in self.unit else tn["offs"]
        if op == "tile_begin":
            return tn["begin"]
        b = self.block_expr(t)
        if op == "tile_block_size":
            return b
        if op == "tile_end":
            end = self.scalar_expr(t.end)
            if self.tile_mask_needed(t):
                return f"nl.minimum({tn['begin']} + {b}, {end})"
            return f"({tn['begin']} + {b})"
        start = self.scalar_expr(t.begin)
        if op == "tile_id":
            if "pid" in tn:
                return tn["pid"]
            return f"(({tn['begin']} - {start}) // {b})" if start != "0" else f"({tn['begin']} // {b})"
        if op == "tile_count":
            ext = t.extent
            if ext is not None and t.slot is None:
                return str(-(-ext // self.block_vals[t.id]))
            if ext is not None:
                return f"nl.cdiv({ext}, {b})"
            return f"nl.cdiv({self.scalar_expr(t.end)} - {start}, {b})"
        raise AssertionError(op)

    def render(self, n: Node) -> str:
        op = n.op
        rank = len(self.rd(n.dims))
        if op == "binary":
            a, b = n.args
            o = n.attrs["op"]
            if o in ("minimum", "maximum"):
                return f"nl.{o}({self.aligned(a, rank)}, {self.aligned(b, rank)})"
            if o == "pow":
                return f"nl.pow({self.aligned(a, rank)}, {self.aligned(b, rank)})"
            if o in ("and", "or") and n.dtype == torch.bool:
                pass
            sym = _BINOP_SYM[o]
            return f"{_paren(self.aligned(a, rank))} {sym} {_paren(self.aligned(b, rank))}"
        if op == "unary":
            (a,) = n.args
            fn = n.attrs["fn"]
            x = self.expr(a)
            if fn == "invert":
                return f"~{_atom(x)}"
            from .ops import UNARY
            tmpl = UNARY[fn]
            if "{x} * {x}" in tmpl or tmpl.startswith("-") or "/ {x}" in tmpl or "+ {x}" in tmpl \
                    or tmpl.endswith("- 1.0") or "== 0" in tmpl:
                return tmpl.format(x=_atom(x))
            return tmpl.format(x=x)
        if op == "cast":
            (a,) = n.args
            if isinstance(a, Node) and self.is_constexpr(a):
                return f"nl.full((), {self.expr(a)}, {_dt(n.dtype)})"  # a compile-time constant
            return f"{_atom(self.expr(a))}.to({_dt(n.dtype)})"
        if op == "where":
            c, a, b = n.args
            return f"nl.where({self.aligned(c, rank)}, {self.aligned(a, rank)}, {self.aligned(b, rank)})"
        if op == "expand_dims":
            (a,) = n.args
            ax = self.rpos(n.dims, n.attrs["axis"])
            k = len(self.rd(a.dims))
            idx = [":"] * k
            idx.insert(ax, "None")
            return f"{_atom(self.expr(a))}[{', '.join(idx)}]"
        if op == "reshape":
            (a,) = n.args
            if self.rd(n.dims) == self.rd(a.dims):
                return self.expr(a)
            if not self.rd(n.dims):
                return f"nl.reshape({self.expr(a)}, ())" if self.rd(a.dims) else self.expr(a)
            return f"nl.reshape({self.expr(a)}, {self.shape_tuple(n.dims)})"
        if op == "permute":
            (a,) = n.args
            kept = [i for i, d in enumerate(a.dims) if not self.is_unit(d)]
            order = [kept.index(i) for i in n.attrs["order"] if i in kept]
            if order == list(range(len(order))):
                return self.expr(a)
            if order == [1, 0]:
                return f"nl.trans({self.expr(a)})"
            return f"nl.permute({self.expr(a)}, {tuple(order)})"
        if op == "expand":
            (a,) = n.args
            if isinstance(a, Node) and self.rd(a.dims):
                if self.rd(a.dims) == self.rd(n.dims):
                    return self.expr(a)
                return f"nl.broadcast_to({self.aligned(a, rank)}, {self.shape_tuple(n.dims)})"
            if not self.rd(n.dims):
                return self.expr(a)
            return f"nl.full({self.shape_tuple(n.dims)}, {self.expr(a)}, {_dt(n.dtype)})"
        if op == "full":
            v = n.attrs["value"]
            if not self.rd(n.dims):
                return f"nl.full((), {_lit(v)}, {_dt(n.dtype)})"
            if v == 0 and not isinstance(v, bool):
                return f"nl.zeros({self.shape_tuple(n.dims)}, dtype={_dt(n.dtype)})"
            return f"nl.full({self.shape_tuple(n.dims)}, {_lit(v)}, {_dt(n.dtype)})"
        if op == "arange":
            r = n.attrs["rdim"]
            start = n.attrs["start"]
            if r is None:
                return f"nl.full((1,), {start}, nl.int32)"
            base = self.rd_names[r.id]["offs"]
            return base if start == 0 else f"({base} + {start})"
        if op == "load":
            return self.render_load(n)
        if op == "reduce":
            return self.render_reduce(n)
        if op == "dot":
            return self.render_dot(n)
        if op == "scan":
            (a,) = n.args
            ax = n.attrs["axis"]
            d = a.dims[ax]
            if self.is_unit(d):
                return self.expr(a)
            x = self.masked(a, ax, 0 if n.attrs["kind"] == "cumsum" else 1, d)
            return f"nl.{n.attrs['kind']}({x}, axis={self.rpos(a.dims, ax)})"
        raise AssertionError(f"cannot render {n}")

    # ------------------------------------------------------------------ memory
    def pointer(self, ta, items, dims):
        rank = len(self.rd(dims))
        terms = []
        masks = []
        pos = 0
        for it in items:
            kind = it[0]
            if kind == "none":
                pos += 1
                continue
            d = it[2]
            stride = ta.strides[d] if self.prog.static_shapes else None
            if self.prog.static_shapes:
                st_expr = None if stride == 1 else str(stride)
                if stride == 0 or ta.shape[d] == 1 and kind == "red":
                    st_expr = "0"
            else:
                st_expr = f"{ta.name}_stride_{d}"
            if kind in ("tile", "red"):
                dim = it[1]
                if self.is_unit(dim):
                    e = self.tile_names[dim.id]["begin"]
                else:
                    e = self.expand(self.offs_of(dim), pos, 1, rank)
                    m = self.mask_of(dim)
                    if m is not None:
                        masks.append(self.expand(m, pos, 1, rank))
                    pos += 1
            elif kind == "vec":
                v = it[1]
                vd_r = self.rd(v.dims)
                k = len(vd_r)
                e = self.expand(self.expr(v), pos, k, rank) if k else self.expr(v)
                for j, vd in enumerate(vd_r):
                    m = self.mask_of(vd)
                    if m is not None:
                        masks.append(self.expand(m, pos + j, 1, rank))
                pos += k
            else:  # scalar
                v = it[1]
                e = self.scalar_expr(v)
                if isinstance(v, int) and v == 0:
                    continue
            if st_expr == "0":
                continue
            if ta.int64:
                e = f"{_atom(e)}.to(nl.int64)"
            terms.append(e if st_expr is None else f"{_paren(e)} * {st_expr}")
        ptr = ta.name if not terms else f"{ta.name} + " + (" + ".join(terms) if len(terms) == 1 else
                                                           "(" + " + ".join(terms) + ")")
        seen = []
        for m in masks:
            if m not in seen:
                seen.append(m)
        mask = " & ".join(seen) if seen else None
        return ptr, mask

    def render_load(self, n: Node) -> str:
        ta = n.attrs["tensor"]
        ptr, mask = self.pointer(ta, n.attrs["items"], n.dims)
        if mask is None:
            return f"nl.load({ptr})"
        return f"nl.load({ptr}, mask={mask}, other=0)"

    def emit_store(self, n: Node, indent: int, atomic=False):
        ta = n.attrs["tensor"]
        dims = n.attrs["dims"]
        ptr, mask = self.pointer(ta, n.attrs["items"], dims)
        (v,) = n.args
        val = self.aligned(v, len(self.rd(dims))) if isinstance(v, Node) else _lit(v)
        if isinstance(v, Node) and v.dtype != ta.dtype and not atomic:
            val = f"{_atom(val)}.to({_dt(ta.dtype)})"
        if atomic:
            if isinstance(v, Node) and v.dtype != ta.dtype:
                val = f"{_atom(val)}.to({_dt(ta.dtype)})"
            args = f"{ptr}, {val}" + (f", mask={mask}" if mask else "") + f", sem={n.attrs['sem']!r}"
            self.w(indent, f"nl.atomic_add({args})")
        else:
            self.w(indent, f"nl.store({ptr}, {val}" + (f", mask={mask})" if mask else ")"))

    # ------------------------------------------------------------------ reductions and dots
    def masked(self, a: Node, ax: int, identity, d) -> str:
        """``a`` with the masked-off lanes of its dim ``ax`` set to ``identity``."""
        x = self.expr(a)
        m = self.mask_of(d)
        if m is None or self.is_unit(d) or (a.pad is not None and a.pad == identity and not (
                isinstance(identity, float) and math.isnan(identity))):
            return x
        rank = len(self.rd(a.dims))
        return f"nl.where({self.expand(m, self.rpos(a.dims, ax), 1, rank)}, {x}, {_lit(identity)})"

    def render_reduce(self, n: Node) -> str:
        (a,) = n.args
        kind = n.attrs["kind"]
        ax = n.attrs["axis"]
        d = n.attrs["dim"]
        keep = n.attrs["keepdim"]
        if self.is_unit(d):
            # a block-size-1 tile: nothing to reduce
            x = self.expr(a)
            if kind in ("argmax", "argmin"):
                x = f"nl.zeros({self.shape_tuple(n.dims)}, dtype=nl.int64)" if self.rd(n.dims) else \
                    "nl.full((), 0, nl.int64)"
            return x
        x = self.masked(a, ax, _identity(kind, a.dtype), d)
        kd = ", keep_dims=True" if keep else ""
        ax = self.rpos(a.dims, ax)
        if kind == "sum":
            return f"nl.sum({x}, axis={ax}{kd})"
        if kind in ("max", "min"):
            return f"nl.{kind}({x}, axis={ax}{kd})"
        if kind == "prod":
            return f"nl.reduce({x}, {ax}, _dt_mul{kd})"
        if kind in ("argmax", "argmin"):
            return f"nl.{kind}({x}, axis={ax}{kd}).to(nl.int64)"
        raise AssertionError(kind)

    def render_dot(self, n: Node) -> str:
        a, b = n.args[0], n.args[1]
        acc = n.args[2] if len(n.args) > 2 else None
        k = a.dims[-1]
        xa = self.masked(a, len(a.dims) - 1, 0, k) if not (a.pad == 0) else self.expr(a)
        xb = self.masked(b, len(b.dims) - 2, 0, k) if not (b.pad == 0) else self.expr(b)
        ra, rb = len(self.rd(a.dims)), len(self.rd(b.dims))
        if ra != rb:  # a batch of one on one side only: broadcast it away
            xa = f"nl.reshape({xa}, {self.shape_tuple(a.dims[-2:])})" if ra > 2 else xa
            xb = f"nl.reshape({xb}, {self.shape_tuple(b.dims[-2:])})" if rb > 2 else xb
        args = [xa, xb]
        if acc is not None:
            args.append(self.expr(acc))
        prec = n.attrs.get("precision")
        extra = f", input_precision={prec!r}" if prec == "ieee" else ""
        return f"nl.dot({', '.join(args)}{extra})"

    # ------------------------------------------------------------------ statements
    def node_name(self, n: Node) -> str:
        nm = self.alloc.get(n.id)
        if nm is None:
            if n.name:
                base = n.name
            elif n.op == "load":
                base = f"load_{n.attrs['tensor'].name}"
            elif n.op == "reduce":
                base = n.attrs["kind"]
            elif n.op == "dot":
                base = "dot"
            else:
                base = "v"
            nm = self.names.fresh(base)
            self.alloc[n.id] = nm
        return nm

    def needs_name(self, n: Node) -> bool:
        if n.op in ("load", "reduce", "dot", "scan", "full"):
            return True
        if n.name:
            return True
        if self.use_count.get(n.id, 0) != 1:
            return True
        if n.id in self.cross_block:
            return True
        return False

    def emit_node(self, n: Node, indent: int):
        if n.op in ("store", "atomic_add"):
            self.origin(indent, n.src)
            self.emit_store(n, indent, atomic=n.op == "atomic_add")
            return
        if n.id in self.var:
            return
        if not self.needs_name(n):
            return  # rendered inline at its single use
        self.origin(indent, n.src)
        text = self.render(n)
        nm = self.node_name(n)
        self.w(indent, f"{nm} = {text}")
        self.var[n.id] = nm

    def emit_block(self, block, indent: int):
        if not block.stmts:
            self.w(indent, "pass")
            return
        seg = []
        for s in block.stmts:
            if isinstance(s, Node):
                seg.append(s)
                continue
            self.emit_segment(seg, indent)
            seg = []
            if isinstance(s, LoopStmt):
                self.emit_loop(s, indent)
            elif isinstance(s, IfStmt):
                self.emit_if(s, indent)
        self.emit_segment(seg, indent)

    def _rolled(self, n: Node):
        for d in n.dims:
            if isinstance(d, RInfo) and d.id in self.looped:
                return d
        if n.op in ("store", "atomic_add"):
            for d in n.attrs["dims"]:
                if isinstance(d, RInfo) and d.id in self.looped:
                    return d
        return None

    def emit_segment(self, nodes, indent):
        if not nodes:
            return
        if not self.looped or not any(self._rolled(n) is not None or self._sink(n) is not None for n in nodes):
            for n in nodes:
                self.emit_node(n, indent)
            return
        done = set()
        deferred_stores = []
        for i, n in enumerate(nodes):
            if n.id in done:
                continue
            r = self._sink(n)
            if r is not None:
                group = [n]
                for m in nodes[i + 1:]:
                    if m.id in done or self._sink(m) is not r:
                        continue
                    if self._ready(m, r, set(self.var) | {g.id for g in group}, group):
                        group.append(m)
                for g in group:
                    done.add(g.id)
                self.emit_chunk_loop(r, group, [], indent)
                continue
            if self._rolled(n) is not None:
                if n.op in ("store", "atomic_add"):
                    deferred_stores.append(n)
                continue
            self.emit_node(n, indent)
        by_r: dict = {}
        for s in deferred_stores:
            by_r.setdefault(self._rolled(s).id, []).append(s)
        for rid, stores in by_r.items():
            r = next(x for x in self.prog.rdims if x.id == rid)
            self.emit_chunk_loop(r, [], stores, indent)

    def _sink(self, n: Node):
        if n.op == "reduce":
            d = n.attrs["dim"]
            if isinstance(d, RInfo) and d.id in self.looped:
                return d
        return None

    def _closure(self, roots, r) -> list:
        """The nodes with dim ``r`` that ``roots`` need, in program order."""
        out = {}
        stack = list(roots)
        while stack:
            n = stack.pop()
            for o in n.operands():
                if o.id in out:
                    continue
                if any(d is r for d in o.dims) and o.op not in ("param", "const"):
                    out[o.id] = o
                    stack.append(o)
        return sorted(out.values(), key=lambda x: x.id)

    def _ready(self, m, r, emitted, group) -> bool:
        group_ids = {g.id for g in group}
        for c in self._closure([m], r) + [m]:
            for o in c.operands():
                if any(d is r for d in o.dims):
                    continue
                if o.id in group_ids:
                    return False
                if o.op in ("param", "const", "carried", "loopout", "phi") or o.op.startswith("tile_") \
                        or o.op in ("grid_index", "loop_index"):
                    continue
                if o.id not in emitted and self.needs_name(o):
                    return False
                if o.id not in emitted and not self._inline_ready(o, emitted):
                    return False
        return True

    def _inline_ready(self, o, emitted) -> bool:
        for x in o.operands():
            if x.id in emitted or x.op in ("param", "const", "carried", "loopout", "phi") or \
                    x.op.startswith("tile_") or x.op in ("grid_index", "loop_index"):
                continue
            if self.needs_name(x) or not self._inline_ready(x, emitted):
                return False
        return True

    def emit_chunk_loop(self, r: RInfo, sinks, stores, indent):
        chunk = self.looped[r.id]
        rn = self.rd_names[r.id]
        accs = []
        for s in sinks:
            (a,) = s.args
            kind = s.attrs["kind"]
            acc = self.names.fresh(f"{self.node_name(s)}_acc")
            ident = _identity(kind, a.dtype)
            self.origin(indent, s.src)
            self.w(indent, f"{acc} = nl.full({self.shape_tuple(a.dims)}, {_lit(ident)}, {_dt(a.dtype)})")
            accs.append(acc)
        size = self.scalar_expr(r.size_expr)
        self.w(indent, f"for {rn['off']} in range(0, {size}, {self.block_expr(r)}):  # looped reduction "
                       f"over {r.size} elements, {chunk} at a time")
        inner = indent + 1
        self.w(inner, f"{rn['offs']} = {rn['off']} + nl.arange(0, {self.block_expr(r)})")
        if self.rdim_mask_needed(r):
            self.w(inner, f"{rn['mask']} = {rn['offs']} < {size}")
        saved_var = dict(self.var)
        body = self._closure(sinks + stores, r)
        for n in body:
            self.emit_node(n, inner)
        for s, acc in zip(sinks, accs):
            (a,) = s.args
            kind = s.attrs["kind"]
            x = self.masked(a, s.attrs["axis"], _identity(kind, a.dtype), s.attrs["dim"])
            if kind == "sum":
                self.w(inner, f"{acc} = {acc} + {_paren(x)}")
            elif kind == "prod":
                self.w(inner, f"{acc} = {acc} * {_paren(x)}")
            else:
                self.w(inner, f"{acc} = nl.{'maximum' if kind == 'max' else 'minimum'}({acc}, {x})")
        for st in stores:
            self.origin(inner, st.src)
            self.emit_store(st, inner, atomic=st.op == "atomic_add")
        self.var = saved_var
        self.last_line = None
        for s, acc in zip(sinks, accs):
            kind = s.attrs["kind"]
            kd = ", keep_dims=True" if s.attrs["keepdim"] else ""
            fn = {"sum": "nl.sum", "max": "nl.max", "min": "nl.min"}.get(kind)
            nm = self.node_name(s)
            ax = self.rpos(s.args[0].dims, s.attrs["axis"])
            if fn is None:
                self.w(indent, f"{nm} = nl.reduce({acc}, {ax}, _dt_mul{kd})")
            else:
                self.w(indent, f"{nm} = {fn}({acc}, axis={ax}{kd})")
            self.var[s.id] = nm

    def emit_loop(self, loop: LoopStmt, indent: int):
        self.origin(indent, loop.src)
        for c in loop.carried:
            init_var = self.var.get(c.init.id) if isinstance(c.init, Node) else None
            if init_var is not None and self.use_count.get(c.init.id, 0) == 1 and \
                    self.alloc.get(c.init.id) == init_var and c.init.name == c.name:
                nm = init_var  # the variable already holds the initial value
            else:
                nm = self.names.fresh(c.name)
                init = self.expr(c.init)
                self.w(indent, f"{nm} = {init}")
            self.var[c.arg.id] = nm
            self.var[c.out.id] = nm
            self.alloc[c.arg.id] = nm
            if isinstance(c.result, Node) and c.result.block is loop.body and c.result.op not in (
                    "carried", "loopout", "phi") and self._last_use_before(c, loop.body):
                self.alloc[c.result.id] = nm
        if loop.kind == "tile":
            t = loop.tiles[0]
            tn = self.tile_names[t.id]
            b = self.block_expr(t)
            start, end = self.scalar_expr(t.begin), self.scalar_expr(t.end)
            self.w(indent, f"for {tn['begin']} in range({start}, {end}, {b}):")
            inner = indent + 1
            if t.id not in self.unit:
                self.w(inner, f"{tn['offs']} = {tn['begin']} + nl.arange(0, {b})")
            if t.id not in self.unit and self.tile_mask_needed(t):
                self.w(inner, f"{tn['mask']} = {tn['offs']} < {end}")
        elif loop.kind == "grid":
            t = loop.tiles[0]
            tn = self.tile_names[t.id]
            start, end = self.scalar_expr(t.begin), self.scalar_expr(t.end)
            step = f", {t.step}" if t.step != 1 else ""
            self.w(indent, f"for {tn['index']} in range({start}, {end}{step}):")
            inner = indent + 1
        else:
            idx = self.names.fresh(loop.src.target.id if hasattr(loop.src.target, "id") else "i")
            self.var[loop.index.id] = idx
            step = f", {loop.step}" if loop.step != 1 else ""
            self.w(indent, f"for {idx} in range({self.scalar_expr(loop.start)}, {self.scalar_expr(loop.end)}"
                           f"{step}):")
            inner = indent + 1
        self.last_line = None
        saved = dict(self.var)
        self.emit_block(loop.body, inner)
        for c in loop.carried:
            nm = self.var[c.arg.id]
            res = self.expr(c.result)
            if res != nm:
                self.w(inner, f"{nm} = {res}")
        self.var = saved
        self.last_line = None

    def _last_use_before(self, c, body) -> bool:
        """Can the loop's result be assigned straight to the carried variable (no later use of the old value)?"""
        order = [s for s in body.stmts]
        pos = {id(s): i for i, s in enumerate(order)}
        rp = pos.get(id(c.result))
        if rp is None:
            return False
        for s in order[rp + 1:]:
            if isinstance(s, Node):
                if any(o is c.arg for o in s.operands()):
                    return False
            else:
                return False
        for u in c.arg.users:
            if u is c.result:
                continue
            if u.block is not body or pos.get(id(u), 10 ** 9) > rp:
                return False
        return True

    def emit_if(self, ifs: IfStmt, indent: int):
        self.origin(indent, ifs.src)
        merged_names = {}
        for m in ifs.merged:
            nm = self.names.fresh(m.name)
            merged_names[m.out.id] = nm
        cond = self.expr(ifs.cond)
        self.w(indent, f"if {cond}:")
        saved = dict(self.var)
        self.emit_block(ifs.then_block, indent + 1)
        for m in ifs.merged:
            self.w(indent + 1, f"{merged_names[m.out.id]} = {self.coerced(m.then_val)}")
        self.var = dict(saved)
        self.w(indent, "else:")
        self.last_line = None
        self.emit_block(ifs.else_block, indent + 1)
        for m in ifs.merged:
            self.w(indent + 1, f"{merged_names[m.out.id]} = {self.coerced(m.else_val)}")
        self.var = saved
        for m in ifs.merged:
            self.var[m.out.id] = merged_names[m.out.id]
        self.last_line = None

    def coerced(self, spec) -> str:
        v, dims, dtype = spec
        e = self.aligned(v, len(self.rd(dims)))
        if isinstance(v, Node) and v.dtype != dtype:
            e = f"{_atom(e)}.to({_dt(dtype)})"
        if isinstance(v, Node) and self.rd(v.dims) != self.rd(dims):
            e = f"nl.broadcast_to({e}, {self.shape_tuple(dims)})" if self.rd(v.dims) else \
                f"nl.full({self.shape_tuple(dims)}, {e}, {_dt(dtype)})"
        elif not isinstance(v, Node):
            e = f"nl.full({self.shape_tuple(dims)}, {_lit(v)}, {_dt(dtype)})" if self.rd(dims) else \
                f"nl.full((), {_lit(v)}, {_dt(dtype)})"
        return e

    # ------------------------------------------------------------------ analysis before emission
    def count_uses(self):
        from .trace_common import all_nodes
        for n, blk in all_nodes(self.prog.body):
            for o in n.operands():
                self.use_count[o.id] = self.use_count.get(o.id, 0) + 1
                if o.block is not None and o.block is not blk:
                    self.cross_block.add(o.id)
                if self.looped and self._rolled(n) is not None and self._rolled(o) is None:
                    self.cross_block.add(o.id)
                if self._sink(n) is not None:
                    self.cross_block.add(o.id)

        def visit(block):
            for s in block.stmts:
                if isinstance(s, LoopStmt):
                    for c in s.carried:
                        for v in (c.init, c.result):
                            if isinstance(v, Node):
                                self.use_count[v.id] = self.use_count.get(v.id, 0) + 1
                                self.cross_block.add(v.id)
                    visit(s.body)
                elif isinstance(s, IfStmt):
                    if isinstance(s.cond, Node):
                        self.use_count[s.cond.id] = self.use_count.get(s.cond.id, 0) + 1
                    for m in s.merged:
                        for v in (m.then_val[0], m.else_val[0]):
                            if isinstance(v, Node):
                                self.use_count[v.id] = self.use_count.get(v.id, 0) + 1
                                self.cross_block.add(v.id)
                    visit(s.then_block)
                    visit(s.else_block)
        visit(self.prog.body)

    # ------------------------------------------------------------------ the kernel
    def generate(self) -> Generated:
        prog = self.prog
        cfg = self.cfg
        self.resolve_config()
        kname = f"_{self.fn_name}_kernel" + (f"_{prog.loop_index}" if prog.loop_index else "")
        lname = f"_{self.fn_name}_launch" + (f"_{prog.loop_index}" if prog.loop_index else "")
        params = []
        for ta in prog.tensors.values():
            params.append((ta.name, "tensor", ta))
        for sa in prog.scalars.values():
            params.append((sa.name, "scalar", sa))
        for nm, spec in prog.size_params.items():
            params.append((nm, "size", spec))
        for nm, _, _ in params:
            self.names.reserve(nm)
        constexprs = {}
        for t in prog.tiles:
            if t.slot is not None:
                constexprs[f"_BLOCK_{t.slot}"] = self.block_vals[t.id]
        for r in prog.rdims:
            constexprs[f"_RBLOCK_{r.id}"] = self.rblock[r.id]
        for c in constexprs:
            self.names.reserve(c)
        self.names.reserve(kname)
        self.names.reserve(lname)
        self.names.reserve("_dt_mul")
        # tile and rdim variable names
        for t in prog.tiles:
            base = _tile_base(t.name)
            if t.kind == "grid":
                self.tile_names[t.id] = {"index": self.names.fresh(t.name)}
                if t.depth == 0:
                    self.tile_names[t.id]["pid"] = self.names.fresh(f"pid_{base}")
            else:
                d = {"begin": self.names.fresh(f"begin_{base}"), "offs": self.names.fresh(f"offs_{base}"),
                     "mask": self.names.fresh(f"mask_{base}")}
                if t.depth == 0:
                    d["pid"] = self.names.fresh(f"pid_{base}")
                self.tile_names[t.id] = d
        for r in prog.rdims:
            self.rd_names[r.id] = {"offs": self.names.fresh(f"offs_{r.name}"),
                                   "mask": self.names.fresh(f"mask_{r.name}"),
                                   "off": self.names.fresh(f"roff_{r.name}")}
        self.count_uses()
        num_warps = cfg.num_warps or 4
        num_stages = cfg.num_stages or 3
        pid_type = cfg.pid_type or "flat"
        # header
        src = prog.src
        head = [f"# Generated by deuteron from {src.path if src else '?'} ({self.fn_name}, the tile loop at line "
                f"{getattr(prog_loop_src(prog), 'lineno', '?')}).",
                "import newt",
                "import newt.language as nl",
                "", ""]
        uses_prod = "_dt_mul" in ""  # decided after the body is generated
        sig = [nm for nm, _, _ in params] + [f"{c}: nl.constexpr" for c in constexprs]
        self.w(0, "@newt.jit")
        self.w(0, f"def {kname}({', '.join(sig)}):")
        body_indent = 1
        grid_tiles = prog.grid_tiles
        g = len(grid_tiles)
        order = list(range(g))
        multi_index = [i for i, _ in enumerate(self._multi_grid_loops()) if _]
        if g > 1 and cfg.loop_orders:
            k = self._grid_loop_ordinal()
            if k is not None and k < len(cfg.loop_orders):
                o = list(cfg.loop_orders[k])
                if sorted(o) != order:
                    raise ConfigError(f"loop_orders[{k}] = {o} is not a permutation of {order}")
                order = o
        group = 1
        if g > 1 and cfg.l2_groupings:
            k = self._grid_loop_ordinal()
            if k is not None and k < len(cfg.l2_groupings):
                group = int(cfg.l2_groupings[k])
        del multi_index
        nblocks = []
        for t in grid_tiles:
            b = self.block_expr(t) if t.kind == "tile" else None
            ext = t.extent
            if ext is not None:
                if t.kind == "tile":
                    nb = str(-(-ext // t.fixed)) if t.slot is None else f"nl.cdiv({ext}, {b})"
                else:
                    nb = str(-(-ext // t.step))
            else:
                span = f"{self.scalar_expr(t.end)} - {self.scalar_expr(t.begin)}" if not (
                    isinstance(t.begin, int) and t.begin == 0) else self.scalar_expr(t.end)
                nb = f"nl.cdiv({span}, {b})" if t.kind == "tile" else (
                    f"nl.cdiv({span}, {t.step})" if t.step != 1 else f"({span})")
            nblocks.append(nb)
        origin_src = prog_loop_src(prog)
        self.origin(body_indent, origin_src)
        total = " * ".join(_paren(x) for x in nblocks) if nblocks else "1"
        if pid_type == "persistent":
            self.w(body_indent, f"for virtual_pid in range(nl.program_id(0), {total}, nl.num_programs(0)):")
            body_indent += 1
            pid_src = "virtual_pid"
        elif pid_type == "xyz":
            pid_src = None
        else:
            pid_src = "nl.program_id(0)"
        if pid_type == "xyz":
            if g > 3:
                raise ConfigError("pid_type='xyz' supports at most 3 grid dimensions")
            for axis, i in enumerate(order):
                self.w(body_indent, f"{self.tile_names[grid_tiles[i].id]['pid']} = nl.program_id({axis})")
        elif g == 1:
            self.w(body_indent, f"{self.tile_names[grid_tiles[0].id]['pid']} = {pid_src}")
        else:
            if pid_src != "virtual_pid":
                self.w(body_indent, f"pid = {pid_src}")
                pid_src = "pid"
            a, b = order[0], order[1]
            pa = self.tile_names[grid_tiles[a].id]["pid"]
            pb = self.tile_names[grid_tiles[b].id]["pid"]
            if group > 1:
                self.w(body_indent, f"num_pid_{a} = {nblocks[a]}")
                self.w(body_indent, f"num_pid_{b} = {nblocks[b]}")
                rest = pid_src
                if g == 3:
                    c = order[2]
                    self.w(body_indent, f"{self.tile_names[grid_tiles[c].id]['pid']} = {pid_src} // "
                                        f"(num_pid_{a} * num_pid_{b})")
                    self.w(body_indent, f"pid_ab = {pid_src} % (num_pid_{a} * num_pid_{b})")
                    rest = "pid_ab"
                self.w(body_indent, f"num_pid_in_group = {group} * num_pid_{b}")
                self.w(body_indent, f"group_id = {rest} // num_pid_in_group")
                self.w(body_indent, f"first_pid = group_id * {group}")
                self.w(body_indent, f"group_size = nl.minimum(num_pid_{a} - first_pid, {group})")
                self.w(body_indent, f"{pa} = first_pid + ({rest} % num_pid_in_group) % group_size")
                self.w(body_indent, f"{pb} = ({rest} % num_pid_in_group) // group_size")
            else:
                rem = pid_src
                for j, i in enumerate(order):
                    pn = self.tile_names[grid_tiles[i].id]["pid"]
                    if j == len(order) - 1:
                        self.w(body_indent, f"{pn} = {rem}")
                    else:
                        self.w(body_indent, f"{pn} = {_paren(rem)} % {_paren(nblocks[i])}")
                        nxt = f"{_paren(rem)} // {_paren(nblocks[i])}"
                        rem = nxt
        for t in grid_tiles:
            tn = self.tile_names[t.id]
            start = self.scalar_expr(t.begin)
            if t.kind == "grid":
                stepm = f" * {t.step}" if t.step != 1 else ""
                self.w(body_indent, f"{tn['index']} = {tn['pid']}{stepm}" + (f" + {start}" if start != "0" else ""))
                continue
            b = self.block_expr(t)
            self.w(body_indent, f"{tn['begin']} = {tn['pid']} * {b}" + (f" + {start}" if start != "0" else ""))
            if t.id in self.unit:
                continue
            self.w(body_indent, f"{tn['offs']} = {tn['begin']} + nl.arange(0, {b})")
            if self.tile_mask_needed(t):
                self.w(body_indent, f"{tn['mask']} = {tn['offs']} < {self.scalar_expr(t.end)}")
        for r in prog.rdims:
            if r.id in self.looped:
                continue
            rn = self.rd_names[r.id]
            self.w(body_indent, f"{rn['offs']} = nl.arange(0, {self.block_expr(r)})")
            if self.rdim_mask_needed(r):
                self.w(body_indent, f"{rn['mask']} = {rn['offs']} < {self.scalar_expr(r.size_expr)}")
        self.last_line = None
        self.emit_block(prog.body, body_indent)
        body = "\n".join(self.lines)
        uses_prod = "_dt_mul" in body
        prelude = []
        if uses_prod:
            prelude = ["@newt.jit", "def _dt_mul(a, b):", "    return a * b", "", ""]
        # the launch function
        launch = ["", ""]
        largs = [nm for nm, _, _ in params]
        kw = list(constexprs) + ["num_warps", "num_stages"]
        if pid_type == "persistent":
            kw.append("_NUM_SMS")
        launch.append(f"def {lname}({', '.join(largs + ['*'] + kw)}):")
        host_nb = [self._host_nblocks(t) for t in grid_tiles]
        if pid_type == "xyz":
            grid = "(" + ", ".join(host_nb[i] for i in order) + ("," if g == 1 else "") + ")"
        elif pid_type == "persistent":
            total_h = " * ".join(_paren(x) for x in host_nb)
            grid = f"(max(1, min({total_h}, _NUM_SMS)),)"
        else:
            total_h = " * ".join(_paren(x) for x in host_nb)
            grid = f"({total_h},)"
        launch.append(f"    grid = {grid}")
        launch.append(f"    {kname}[grid]({', '.join(largs + [f'{c}={c}' for c in constexprs])}, "
                      "num_warps=num_warps, num_stages=num_stages)")
        source = "\n".join(head + prelude + self.lines + launch) + "\n"
        return Generated(source, kname, lname, params, constexprs, num_warps, num_stages, grid,
                         pid_type == "persistent")

    def _host_nblocks(self, t: TileInfo) -> str:
        ext = t.extent
        b = self.block_expr(t) if t.kind == "tile" else str(t.step)
        if ext is not None:
            return f"newt.cdiv({ext}, {b})" if t.kind == "tile" or t.step != 1 else str(ext)
        span = f"{self.host_scalar(t.end)} - {self.host_scalar(t.begin)}"
        return f"newt.cdiv({span}, {b})"

    def host_scalar(self, v) -> str:
        if isinstance(v, int):
            return str(v)
        if isinstance(v, Node) and v.op == "param":
            return v.attrs["name"]
        if isinstance(v, Node) and v.host_value is not None:
            return str(v.host_value)
        raise ConfigError("the grid's bounds must be known on the host")

    def _multi_grid_loops(self):
        return [len(self.prog.grid_tiles) > 1]

    def _grid_loop_ordinal(self):
        return getattr(self.prog, "multi_grid_ordinal", None)


def prog_loop_src(prog):
    return getattr(prog, "loop_src", None)


def _atom(e: str) -> str:
    """Parenthesize ``e`` unless it is a name, a literal, a call or a subscript."""
    if _is_atomic(e):
        return e
    return f"({e})"


_paren = _atom


def _is_atomic(e: str) -> bool:
    e = e.strip()
    if not e:
        return True
    if e.replace("_", "").replace(".", "").isalnum():
        return True
    if e.startswith("-") and e[1:].replace(".", "").replace("e", "").replace("-", "").isdigit():
        return False
    # a call / subscript / parenthesized expression with balanced outer brackets
    depth = 0
    for ch in e:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch in " +-*/%<>=&|^~!,":
            return False
    if e.startswith("(") and e.endswith(")"):
        return True
    return e[0].isalpha() or e[0] == "_" or e.startswith('float("')


def generate(prog: Program, config: Config, fn_name: str, defaults: Config | None = None) -> Generated:
    return _Gen(prog, config, fn_name, defaults or Config()).generate()
