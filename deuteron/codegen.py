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

from . import ops as _ops  # noqa: F401  (the op entries declare the node kinds and their renderers)
from .codegen_desc import DescriptorForm, place_descriptors
from .codegen_expr import NL_DTYPE, ExprRenderer, _atom, _dt, _lit, _paren, binary
from .codegen_rolled import count_uses, emit_segment
from .config import Config, ConfigError
from .ops.reduce import COMBINE_HELPERS
from .optable import EFFECT, NAMED, NODE_KINDS, PRODUCED_BY_EFFECT, VARIABLE, has
from .program import ONE, IfStmt, LoopStmt, Node, Program, RInfo, TileInfo
from .space import descriptor_indexing

__all__ = ["generate", "Generated", "NL_DTYPE"]

class Generated:
    """The generated module's source and how to launch it."""

    def __init__(self, source: str, kernel_name: str, launch_name: str, runtime_params: list, constexprs: dict,
                 num_warps: int, num_stages: int, grid_desc: str, needs_num_sms: bool, maxnreg: int | None = None):
        self.source = source
        self.kernel_name = kernel_name
        self.launch_name = launch_name
        self.runtime_params = runtime_params  # [(name, kind, payload)] in kernel order
        self.constexprs = constexprs
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.grid_desc = grid_desc
        self.needs_num_sms = needs_num_sms
        self.maxnreg = maxnreg  # the config's register cap (newt's maxnreg launch option), None: the compiler's
        #: user line -> the AST node of the ``# line N:`` comment (an error in the generated code is reported there)
        self.origins: dict = {}
        self.src = None  # the user's SourceInfo
        self.loop_src = None  # the tile loop's AST node (where errors of the launch function are reported)


_RESERVED = set(keyword.kwlist) | {"nl", "newt", "range", "float", "int", "min", "max", "abs", "len", "pid", "grid",
                                   "True", "False", "None", "print", "sum"}


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


class _Gen(ExprRenderer):
    def __init__(self, prog: Program, config: Config, fn_name: str, defaults: Config):
        self.prog = prog
        self.cfg = config
        #: ``indexing="tensor_descriptor"``: tile loads and stores through tensor descriptors where exact (TMA on
        #: sm_90a), the others through pointers with every tile's bounds mask: ``deuteron/codegen_desc.py``
        self.descriptor_form = descriptor_indexing(config)
        self.desc = DescriptorForm()  # the descriptors chosen so far, their definitions and the reasons
        self.fn_name = fn_name
        self.names = _Names()
        self.lines: list[str] = []
        self.var: dict[int, str] = {}  # node id -> variable name (once emitted in the current scope)
        self.alloc: dict[int, str] = {}  # node id -> allocated name (stable across chunk loops)
        self.tile_names: dict[int, dict] = {}
        self.rd_names: dict[int, dict] = {}
        self.last_line = None
        self.origins: dict = {}
        self.src = prog.src
        self.use_count: dict[int, int] = {}
        self.cross_block: set = set()
        self.looped: dict[int, int] = {}  # rdim id -> chunk
        self.rblock: dict[int, int] = {}
        self.block_vals: dict[int, int] = {}
        self.defaults = defaults
        self.unit: set = set()  # tiles of block size 1: rendered as scalars, not as block dimensions
        self.range_ordinal = 0  # tile loops inside the kernel emitted so far (config.range_* entries)
        self.helpers: list[str] = []  # @newt.jit combine functions of dt.reduce / dt.associative_scan

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
        self.origins.setdefault(line, src)
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
        if ext is None or self.descriptor_form:
            return True
        b = self.block_vals[t.id]
        return ext % b != 0

    def rdim_mask_needed(self, r: RInfo) -> bool:
        b = self.rblock[r.id]
        if not isinstance(r.size_expr, int):
            return True
        return r.size % b != 0 or r.size == 0  # a dimension of 0 elements: every lane is past its end

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

    # ------------------------------------------------------------------ statements
    def node_name(self, n: Node) -> str:
        nm = self.alloc.get(n.id)
        if nm is None:
            hint = NODE_KINDS[n.op].name_hint
            base = n.name or (hint(n) if hint is not None else "v")
            nm = self.names.fresh(base)
            self.alloc[n.id] = nm
        return nm

    def needs_name(self, n: Node) -> bool:
        if has(n, NAMED):
            return True
        if n.name:
            return True
        if self.use_count.get(n.id, 0) != 1:
            return True
        if n.id in self.cross_block:
            return True
        return False

    def emit_node(self, n: Node, indent: int):
        if has(n, EFFECT):
            self.origin(indent, n.src)
            NODE_KINDS[n.op].emit(self, n, indent)
            return
        if n.id in self.var or has(n, PRODUCED_BY_EFFECT):  # named by its effect (deuteron.ops.memory.emit_store)
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
            emit_segment(self, seg, indent)
            seg = []
            if isinstance(s, LoopStmt):
                self.emit_loop(s, indent)
            elif isinstance(s, IfStmt):
                self.emit_if(s, indent)
        emit_segment(self, seg, indent)

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
            if isinstance(c.result, Node) and c.result.block is loop.body and not has(c.result, VARIABLE) and \
                    self._last_use_before(c, loop.body):
                self.alloc[c.result.id] = nm
        if loop.kind == "tile":
            t = loop.tiles[0]
            tn = self.tile_names[t.id]
            b = self.block_expr(t)
            start, end = self.scalar_expr(t.begin), self.scalar_expr(t.end)
            self.w(indent, f"for {tn['begin']} in {self.range_call(start, end, b)}:")
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
        e = self.aligned(v, len(self.rd(dims)), dims)
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
    # ------------------------------------------------------------------ the kernel
    def range_call(self, start, end, step) -> str:
        """``range(...)``, or ``nl.range(..., num_stages=, loop_unroll_factor=, ...)`` where the config's
        ``range_*`` entry for this tile loop (the n-th inside the kernel, in source order) sets something."""
        i = self.range_ordinal
        self.range_ordinal += 1
        cfg = self.cfg
        kw = []
        for field, name, want in (("range_num_stages", "num_stages", int), ("range_unroll_factors",
                                  "loop_unroll_factor", int), ("range_multi_buffers", "disallow_acc_multi_buffer",
                                  "not"), ("range_warp_specializes", "warp_specialize", bool),
                                  ("range_flattens", "flatten", bool)):
            vals = getattr(cfg, field, None)
            v = vals[i] if vals is not None and i < len(vals) else None
            if v is None or (want is int and v == 0):
                continue
            if want == "not":
                if v is False:
                    kw.append(f"{name}=True")
            elif want is bool:
                if v:
                    kw.append(f"{name}=True")
            else:
                kw.append(f"{name}={v}")
        if not kw:
            return f"range({start}, {end}, {step})"
        return f"nl.range({start}, {end}, {step}, {', '.join(kw)})"

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
        for h in COMBINE_HELPERS:
            self.names.reserve(h)
        self.names.reserve("virtual_pid")
        self.names.reserve("tiles_per_program")
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
        count_uses(self)
        num_warps = cfg.num_warps or 4
        num_stages = cfg.num_stages or 3
        pid_type = cfg.pid_type or "flat"
        blocked = pid_type == "persistent_blocked"
        if pid_type in ("persistent_interleaved", "persistent_blocked"):
            pid_type = "persistent"
        # header
        src = prog.src
        head = [f"# Generated by deuteron from {src.path if src else '?'} ({self.fn_name}, the tile loop at line "
                f"{getattr(prog_loop_src(prog), 'lineno', '?')}).",
                "import newt",
                "import newt.language as nl",
                "", ""]
        for field, what in (("indexing", "loads and stores"), ("atomic_indexing", "atomics")):
            v = getattr(cfg, field, None)
            if field == "indexing" and self.descriptor_form:
                head[1:1] = [f"# config {field}={v!r}: tensor descriptors where exact (TMA copies on sm_90a), else "
                             "pointers with every tile's bounds mask (the kernel's first comment says which)."]
            elif v not in (None, "pointer") and any(x != "pointer" for x in ([v] if isinstance(v, str) else v)):
                head[1:1] = [f"# config {field}={v!r}: newt's generated {what} use pointer arithmetic for every one."]
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
        if pid_type == "persistent" and blocked:
            # the bound in the range, not an ``if`` around the body: newt warp-specializes a tile loop whose body
            # is the K loop itself (an ``if`` there made the split fall back, silently)
            self.w(body_indent, f"tiles_per_program = nl.cdiv({total}, nl.num_programs(0))")
            self.w(body_indent, "for virtual_pid in range(nl.program_id(0) * tiles_per_program, "
                                f"nl.minimum((nl.program_id(0) + 1) * tiles_per_program, {total})):")
            body_indent += 1
            pid_src = "virtual_pid"
        elif pid_type == "persistent":
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
                        nxt = binary(rem, "//", nblocks[i])
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
        if self.descriptor_form:  # the descriptors the accesses chose, made at the top of the kernel
            place_descriptors(self, kname)
        body = "\n".join(self.lines)
        prelude = list(self.helpers)
        for h, lines in COMBINE_HELPERS.items():  # the combine functions of nl.reduce the body calls
            if h in body:
                prelude += lines + ["", ""]
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
        cap = f", maxnreg={cfg.maxnreg}" if cfg.maxnreg else ""
        launch.append(f"    {kname}[grid]({', '.join(largs + [f'{c}={c}' for c in constexprs])}, "
                      f"num_warps=num_warps, num_stages=num_stages{cap})")
        source = "\n".join(head + prelude + self.lines + launch) + "\n"
        gen = Generated(source, kname, lname, params, constexprs, num_warps, num_stages, grid,
                        pid_type == "persistent", cfg.maxnreg)
        gen.origins, gen.src, gen.loop_src = dict(self.origins), src, prog_loop_src(prog)
        return gen

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


def generate(prog: Program, config: Config, fn_name: str, defaults: Config | None = None) -> Generated:
    return _Gen(prog, config, fn_name, defaults or Config()).generate()
