"""The CUDA renderer: walks the tile IR once and writes readable CUDA C++.

Each op is rendered by one function registered with ``@lowers(name)`` (see
``lower_*.py`` and ``dot/``).  This module holds what they share: the output
buffer (a tree of chunks, one per op, so a value can be materialized in a new
layout right where it is defined), value lookup in a requested layout
(rematerialization and conversions), shared-memory allocation and the
comments that map CUDA lines back to the user's source.
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass

from newt.diagnostics import LocatedError
from newt.ir.types import is_block, scalar_of, shape_of

from .ctypes import const_literal, ctype
from .elementwise import ELEMENTWISE, scalar_expr
from .layout import Layout, bit_index_expr, in_thread_map
from .plan import compact
from .vectors import pack_words, unpack_words

__all__ = ["Emitter", "lowers", "LOWERINGS", "BackendError", "Chunk"]

LOWERINGS: dict = {}


def lowers(*names):
    """Register the CUDA lowering of IR ops ``names``: ``fn(em, op)``."""
    def deco(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return deco


class BackendError(LocatedError):
    """The backend cannot lower an op: a ``LocatedError`` (code ``B002`` unless given) placed at the op.

    ``data`` carries what programs need (``{"resource": "shared memory", "required": n, "limit": m,
    "target": "sm_90a"}`` for a kernel too big for the target), passed on as ``Diagnostic.data``."""

    def __init__(self, msg: str, op=None, *, code: str = "B002", hint: str | None = None, data: dict | None = None):
        super().__init__(code, msg, hint=hint, location=getattr(op, "loc", None), data=data)
        self.op = op


class Chunk:
    """Lines of output for one op (or one region), in order.  Items are strings or Chunks."""

    __slots__ = ("indent", "loc", "items", "pipelined")

    def __init__(self, indent: int, loc=None, pipelined: bool = False):
        self.indent = indent
        self.loc = loc
        self.items: list = []
        self.pipelined = pipelined

    def line(self, text: str = ""):
        self.items.append(text)

    def sub(self, indent_delta: int = 0, loc=None, pipelined=None) -> "Chunk":
        c = Chunk(self.indent + indent_delta, loc if loc is not None else self.loc,
                  self.pipelined if pipelined is None else pipelined)
        self.items.append(c)
        return c

    def render(self, out: list, locs: list):
        pad = "  " * self.indent
        for it in self.items:
            if isinstance(it, Chunk):
                it.render(out, locs)
            else:
                out.append((pad + it) if it else "")
                locs.append(self.loc)


@dataclass
class SmemUse:
    name: str
    size: int
    persistent: bool   # a pipeline buffer live through its loop
    inside: bool       # used inside a software-pipelined loop
    async_proxy: bool = False  # also accessed through the async proxy (wgmma operands, TMA tiles): see codegen


class Emitter:
    def __init__(self, fn, target, num_warps, num_stages, plan, axis, *, device_asserts=True, pipes=None):
        self.fn = fn
        self.target = target
        self.nw = num_warps
        self.num_stages = num_stages
        self.plan = plan
        self.axis = axis
        self.device_asserts = device_asserts
        self.counter = 0
        self.helpers: dict[str, str] = {}       # name -> definition (emitted before the kernel)
        self.scalars: dict = {}                  # Value -> C++ expression
        self.blocks: dict = {}                   # (Value, Layout) -> array name
        self.def_chunk: dict = {}                # Value -> Chunk where it is defined
        self.def_smem: dict = {}                 # Value -> len(smem_uses) when its op was emitted
        self.thread_flats: dict = {}             # (lane bases, warp bases) -> var
        self.smem_uses: list[SmemUse] = []
        self.cur: Chunk | None = None
        self.top: Chunk | None = None            # kernel-level declarations
        self.names: dict = {}
        self.last_line = None
        self.pipes = pipes                       # pipeline.PipelinePlan (None: nothing pipelined)
        self.pipe_read_base: dict = {}           # pipelined load op -> C++ address of this iteration's buffer
        self.used_names: set = set()
        self.yield_stack: list = []
        self.smem_tiles: dict = {}               # Value -> dot.base.OperandTile (operands already in smem)
        self.users: dict = {}                    # Value -> ops using it
        for op in fn.walk():
            for o in op.operands:
                self.users.setdefault(o, []).append(op)
        self.used_values = set(self.users)
        self.cond_value = None
        self.parent_op: dict = {}                # op -> the op whose region holds it (None at top level)
        self.defining_op: dict = {}              # Value -> the op that defines it (region args: the region's op)

        def index(region, owner):
            for a in region.args:
                self.defining_op[a] = owner
            for o in region.ops:
                self.parent_op[o] = owner
                for r in o.results:
                    self.defining_op[r] = o
                for reg in o.regions:
                    index(reg, o)
        index(fn.body, None)
        self.reduce_pending = [False, False]    # ping-pong reduction buffers that may still be read
        self.reduce_turn = 0
        self.reduce_bytes = 0                    # size of each of the two reduction buffers
        self.reserved: list[SmemUse] = []        # shared memory that overlaps nothing (operands staged once)
        self.staged_once: dict = {}              # (Value, tile, inner) -> OperandTile

    @property
    def pipelines(self):
        """scf.for op -> its ``pipeline.Pipeline``."""
        return self.pipes.loops if self.pipes is not None else {}

    @property
    def pipelined_loads(self):
        """load op -> (its pipeline, its ``pipeline.PipeLoad``)."""
        return self.pipes.loads if self.pipes is not None else {}

    # ------------------------------------------------------------------
    # names and small helpers
    # ------------------------------------------------------------------
    def tmp(self, prefix="t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def vname(self, v) -> str:
        n = self.names.get(v)
        if n is None:
            n = f"v{v.id}" if v.id >= 0 else self.tmp("v")
            self.names[v] = n
        return n

    def helper(self, name: str, text: str) -> str:
        self.helpers.setdefault(name, text)
        return name

    def line(self, text: str = ""):
        self.cur.line(text)

    def for_regs(self, n: int, stmt: str, chunk=None, var: str = "i"):
        c = chunk or self.cur
        if n == 1:
            c.line(f"{{ const int {var} = 0; {stmt} }}")
        else:
            c.line("#pragma unroll")
            c.line(f"for (int {var} = 0; {var} < {n}; ++{var}) {stmt}")

    def source_comment(self, op):
        loc = op.loc
        if loc is None:
            return
        key = (loc.file, loc.line)
        if key == self.last_line:
            return
        self.last_line = key
        text = linecache.getline(loc.file, loc.line).strip() if loc.file and not loc.file.startswith("<") else ""
        base = loc.file.rsplit("/", 1)[-1] if loc.file else "?"
        self.cur.line(f"// {base}:{loc.line}" + (f": {text}" if text else ""))

    def enclosing_loop(self, op):
        """The innermost scf.for / scf.while around ``op`` (None at the top level)."""
        o = self.parent_op.get(op)
        while o is not None and o.name not in ("scf.for", "scf.while"):
            o = self.parent_op.get(o)
        return o

    def defined_inside(self, v, op) -> bool:
        """Whether ``v`` is defined by ``op`` or inside its regions."""
        o = self.defining_op.get(v)
        while o is not None:
            if o is op:
                return True
            o = self.parent_op.get(o)
        return False

    def loop_invariant(self, v, user) -> bool:
        """``v`` is defined outside the innermost loop around ``user`` (and that loop exists)."""
        loop = self.enclosing_loop(user)
        return loop is not None and not self.defined_inside(v, loop)

    # ------------------------------------------------------------------
    # layouts
    # ------------------------------------------------------------------
    def layout_of(self, v) -> Layout | None:
        return self.plan.layout.get(v)

    def thread_flat(self, lay: Layout) -> str:
        """A kernel-level variable holding this thread's part of the flat index."""
        key = (lay.lane, lay.warp)
        var = self.thread_flats.get(key)
        if var is None:
            le = bit_index_expr("lane_id", list(lay.lane))
            we = bit_index_expr("warp_id", list(lay.warp)) if lay.warp else "0"
            parts = [p for p in (le, we) if p != "0"]
            expr = " | ".join(parts) if parts else "0"
            var = f"tf{len(self.thread_flats)}"
            self.thread_flats[key] = var
            self.top.line(f"const int {var} = {expr};  // this thread's offset in {_short(lay)}")
        return var

    def in_loop_fresh(self, chunk) -> bool:
        """Shared-memory addresses of a conversion in ``chunk`` are recomputed where they are used (from
        an opaque copy of the thread's offset) rather than hoisted: inside a loop body of a kernel with
        tensor-core dots.  Hoisted, they are loop-invariant, one register each for the whole loop (the
        persistent matmul's epilogue inside its tile loop: 64 addresses live across the K loop spilled
        the 128x256 tile)."""
        return getattr(chunk, "indent", 1) > 1 and bool(self.plan.dot) and \
            os.environ.get("NEWT_FRESH_CONVERT", "1") != "0"

    def fresh_flat(self, fe: str, lay: Layout, c) -> str:
        """``fe`` (a flat-index expression of ``lay``) with the thread's offset replaced by a copy the
        compiler may not hoist out of the loop (``fresh_int``)."""
        import re
        tfv = self.thread_flat(lay)
        self.helper("fresh_int", "__device__ __forceinline__ int fresh_int(int x) { asm volatile(\"\" : \"+r\"(x)); "
                                 "return x; }  // a value the compiler may not hoist out of a loop\n")
        tl = self.tmp(tfv + "_l")
        c.line(f"const int {tl} = fresh_int({tfv});")
        return re.sub(rf"\b{tfv}\b", tl, fe)

    def flat_expr(self, lay: Layout, reg: str = "i") -> str:
        r = bit_index_expr(reg, list(lay.reg)) if lay.reg else "0"
        t = self.thread_flat(lay)
        if r == "0":
            return t
        return f"({r} | {t})"

    def const_reg_index(self, v, lay: Layout, reg: str = "i") -> str:
        """``reg`` with the register bits cleared along which ``v`` is provably constant (the axis
        analysis' constancy), so that an unrolled per-register computation of ``v`` indexes its
        operands with the same constant for all registers of a run and NVVM computes it once per run
        (e.g. ``cols < n`` once per 16-byte vector instead of once per element).

        Only in kernels without tensor-core dots: there the registers go to the accumulators and
        ptxas' allocation at the 255-register edge swings either way with such changes (NVRTC 13.5
        spilled 64 bytes in the tf32 128x128x32 matmul with it, 13.0 spilled less)."""
        if self.plan.dot:
            return reg
        info = self.axis.get(v) if self.axis is not None else None
        cons = getattr(info, "constancy", None)
        if not cons or not lay.reg:
            return reg
        keep = 0
        for j, b in enumerate(lay.reg):
            if b == 0:
                continue  # a broadcast register bit: already the same value
            d, k = lay.dim_of_bit(b)
            if d < len(cons) and (1 << (k + 1)) <= cons[d]:
                continue
            keep |= 1 << j
        full = (1 << len(lay.reg)) - 1
        if keep == full:
            return reg
        return f"({reg} & {keep})"

    def owner_pred(self, lay: Layout) -> str | None:
        """True in exactly one of the threads holding each element (None when no duplicates)."""
        conds = []
        lm, wm = lay.dup_lane_mask(), lay.dup_warp_mask()
        if lm:
            conds.append(f"(lane_id & {lm}) == 0")
        if wm:
            conds.append(f"(warp_id & {wm}) == 0")
        return " && ".join(conds) if conds else None

    # ------------------------------------------------------------------
    # values
    # ------------------------------------------------------------------
    def scalar(self, v) -> str:
        e = self.scalars.get(v)
        if e is None:
            op = v.owner
            if op is not None and getattr(op, "name", None) == "constant":
                e = const_literal(op.attrs["value"], v.type)
                self.scalars[v] = e
                return e
            raise BackendError(f"internal: scalar {v!r} used before definition", None)
        return e

    def bind_scalar(self, v, expr: str, declare=True, chunk=None):
        if declare:
            name = self.vname(v)
            ct = ctype(v.type)
            decl = f"{ct} const" if ct.endswith("*") else f"const {ct}"
            (chunk or self.cur).line(f"{decl} {name} = {expr};")
            self.scalars[v] = name
        else:
            self.scalars[v] = expr

    def declare_block(self, v, lay: Layout, chunk=None, name=None) -> str:
        name = name or self.vname(v)
        self.used_names.add(name)
        (chunk or self.cur).line(f"{ctype(v.type)} {name}[{lay.nregs}];")
        self.blocks[(v, lay)] = name
        return name

    def get(self, v, lay: Layout) -> str:
        """The name of an array holding block ``v`` in layout ``lay`` (materializing or converting)."""
        lay = compact(lay)
        key = (v, lay)
        name = self.blocks.get(key)
        if name is not None:
            return name
        if v in self.plan.poly:
            return self.materialize(v, lay)
        have = self.layout_of(v)
        if have is None:
            raise BackendError(f"internal: no layout for {v!r}")
        src = self.blocks.get((v, compact(have)))
        if src is None:
            raise BackendError(f"internal: block {v!r} used before definition")
        chunk = self.def_chunk.get(v, self.cur)
        return self.convert(v, src, compact(have), lay, chunk)

    def operand(self, v, lay: Layout | None, reg="i") -> str:
        """C++ for one element of operand v (block in ``lay``, or a scalar)."""
        if is_block(v.type):
            return f"{self.get(v, lay)}[{reg}]"
        return self.scalar(v)

    def convert(self, v, src: str, have: Layout, want: Layout, chunk: Chunk) -> str:
        """Emit (into ``chunk``) a copy of ``src`` in layout ``want``."""
        m = in_thread_map(have, want.reg, want.lane, want.warp)
        name = self.tmp(self.vname(v) + "_")
        ct = ctype(v.type)
        if m is not None:
            chunk.line(f"{ct} {name}[{want.nregs}];  // {self.vname(v)} in {_short(want)} (registers only)")
            self.for_regs(want.nregs, f"{name}[i] = {src}[{bit_index_expr('i', m)}];", chunk)
        else:
            self.smem_convert(src, have, name, want, v.type, chunk, what=self.vname(v))
        self.blocks[(v, want)] = name
        return name

    def smem_convert(self, src, have: Layout, dst, want: Layout, ty, chunk: Chunk, what="", owner_only=False,
                     declare=True):
        """Write ``src`` (layout ``have``) to shared memory and read it back as ``dst`` (``want``).

        Runs of consecutive elements in a thread's low registers move as one 4/8/16-byte access on
        each side (the mma accumulator's column pairs go out as 32-bit stores, a blocked layout reads
        16 bytes at a time); rows of 128 bytes are padded by 16 bytes (by one element when neither
        side has a run) so that those accesses stay aligned and spread over the banks."""
        ct = ctype(ty)
        eb = _elem_bytes(ty)
        numel = have.numel
        per = max(1, 128 // eb)
        st = scalar_of(ty)
        vec_ok = eb in (2, 4) and not st.is_ptr() and st.name != "int1"
        vs = _vec_run(have, eb) if vec_ok else 1
        vw = _vec_run(want, eb) if vec_ok else 1
        padv = 16 // eb if max(vs, vw) > 1 else 1
        size = (numel + (numel // per + 1) * padv) * eb
        off = self.smem_scratch(size, chunk)
        sh = self.tmp("cv")
        pad = _pad_shift(per)

        def at(f):
            return f"{f} + ({f} >> {pad}) * {padv}" if padv > 1 else f"{f} + ({f} >> {pad})"
        chunk.line(f"// {what}: {_short(have)} -> {_short(want)} through shared memory")
        if declare:
            chunk.line(f"{ct} {dst}[{want.nregs}];")
        chunk.line("{")
        c = chunk.sub(1)
        c.line(f"{ct}* {sh} = reinterpret_cast<{ct}*>(smem + {off});")
        c.line("__syncthreads();")
        fe = self.flat_expr(have)
        fe2 = self.flat_expr(want)
        if self.in_loop_fresh(chunk):
            fe, fe2 = self.fresh_flat(fe, have, c), self.fresh_flat(fe2, want, c)
        own = self.owner_pred(have) if owner_only else None
        sa, sa2 = self._split_addr(have, fe, at, c), self._split_addr(want, fe2, at, c)
        if self.stmatrix_ok(have, st, eb, owner_only):
            self._stmatrix_store(c, have, src, st, sh, at)
            vs = 0  # stored
        elif vs == 1:
            store = f"{{ const int f = {fe}; {sh}[{at('f')}] = {src}[i]; }}" if sa is None else \
                f"{sh}[{sa}] = {src}[i];"
        else:
            vt = _VEC_T[vs * eb]
            words = pack_words([f"{src}[i + {j}]" for j in range(vs)], st, vs * eb)
            val = words[0] if len(words) == 1 else f"make_{vt}({', '.join(words)})"
            store = f"{{ const int f = {fe}; *reinterpret_cast<{vt}*>({sh} + {at('f')}) = {val}; }}" if sa is None \
                else f"*reinterpret_cast<{vt}*>({sh} + {sa}) = {val};"
        if own and vs:
            store = f"if ({own}) {store}"
        if vs:
            self._for_step(have.nregs, vs, store, c)
        c.line("__syncthreads();")
        addr2 = at("f") if sa2 is None else sa2
        head = f"const int f = {fe2}; " if sa2 is None else ""
        if vw == 1:
            self.for_regs(want.nregs, f"{{ {head}{dst}[i] = {sh}[{addr2}]; }}", c)
        else:
            vt = _VEC_T[vw * eb]
            nw = vw * eb // 4
            ws = ["w"] if nw == 1 else [f"w.{x}" for x in "xyzw"[:nw]]
            outs = unpack_words(ws, st, vw)
            body = " ".join(f"{dst}[i + {j}] = {e};" for j, e in enumerate(outs))
            self._for_step(want.nregs, vw, f"{{ {head}const {vt} w = "
                           f"*reinterpret_cast<const {vt}*>({sh} + {addr2}); {body} }}", c)
        chunk.line("}")

    def _split_addr(self, lay: Layout, fe: str, at, c) -> str | None:
        """``NEWT_CONVERT_ADDR=split``: a conversion's padded shared-memory index ``at(r | t)`` as
        ``at(t) + at(r)`` — the thread's part ``t`` (lane and warp bits) once per conversion, the register
        part ``r`` a constant once unrolled, so every access is ``[R + imm]`` (the 128x256 matmul epilogue
        computed each of its 64 stores' addresses: 159 LEA, 63 VIADD, 51 SHF, 51 LOP3).  Exact when the
        register bits and the thread bits are disjoint single bits: then ``r | t == r + t`` and the padding
        ``f + (f >> p) * v`` adds up over the two parts.  None (the per-access form) otherwise or unset."""
        if os.environ.get("NEWT_CONVERT_ADDR") != "split" or not lay.reg:
            return None
        bases = list(lay.reg) + list(lay.lane) + list(lay.warp)
        if any(b < 0 or b & (b - 1) for b in bases):
            return None
        rmask = 0
        for b in lay.reg:
            rmask |= b
        tmask = 0
        for b in list(lay.lane) + list(lay.warp):
            tmask |= b
        if rmask & tmask or not (fe.startswith("(") and fe.endswith(")")) or " | " not in fe:
            return None
        r, t = fe[1:-1].rsplit(" | ", 1)  # (flat_expr: "(<register part> | <thread variable>)")
        if not t.isidentifier():
            return None
        tb = self.tmp("ta")
        c.line(f"const int {tb} = {at(t)};  // this thread's part of the conversion's addresses")
        return f"{tb} + ({at(f'({r})')})"

    def stmatrix_ok(self, have: Layout, st, eb: int, owner_only: bool) -> bool:
        """``NEWT_STMATRIX=1`` on sm_90a: a conversion's store side as ``stmatrix.m8n8.x4`` when the source
        is an MMA accumulator-shaped layout of 16-bit values: register bit 0 and lane bits 0-1 are the
        flat index's bits 0-2 (each quad of lanes holds 8 consecutive elements, two a lane, one 8x8 matrix
        row), every basis a distinct single bit, and at least 8 registers (registers 2j, 2j + 1 of each
        group of 8 are matrix j)."""
        if os.environ.get("NEWT_STMATRIX") != "1" or not self.target.wgmma or owner_only or eb != 2:
            return False
        if st.is_ptr() or st.name == "int1" or have.nregs % 8 or len(have.lane) != 5 or len(have.reg) < 3:
            return False
        bases = list(have.reg) + list(have.lane) + list(have.warp)
        if any(b <= 0 or b & (b - 1) for b in bases) or len(set(bases)) != len(bases):
            return False
        return have.reg[0] == 1 and have.lane[0] == 2 and have.lane[1] == 4

    def _stmatrix_store(self, c: Chunk, have: Layout, src: str, st, sh: str, at):
        """Each warp stores four 8x8 matrices per instruction: matrix j is registers 2j, 2j + 1 (packed
        in one word) of a group of 8; lane 8j + r gives the address of row r of matrix j, i.e. of the
        element lane 4r holds in register 2j (its first column)."""
        self.helper("stmatrix_x4", "__device__ __forceinline__ void stmatrix_x4(unsigned a, unsigned w0, unsigned w1, "
                                   "unsigned w2, unsigned w3) {\n  asm volatile(\"stmatrix.sync.aligned.m8n8.x4.shared"
                                   ".b16 [%0], {%1, %2, %3, %4};\" :: \"r\"(a), \"r\"(w0), \"r\"(w1), \"r\"(w2), "
                                   "\"r\"(w3) : \"memory\");\n}\n")
        lj, lr = self.tmp("stm_j"), self.tmp("stm_r")
        c.line(f"const int {lj} = lane_id >> 3, {lr} = (lane_id & 7) << 2;  // stmatrix: matrix, row lane")
        parts = [bit_index_expr(f"(i | ({lj} << 1))", list(have.reg)), bit_index_expr(lr, list(have.lane))]
        if have.warp:
            parts.append(bit_index_expr("warp_id", list(have.warp)))
        fe = " | ".join(p for p in parts if p != "0") or "0"
        words = [pack_words([f"{src}[i + {2 * j}]", f"{src}[i + {2 * j + 1}]"], st, 4)[0] for j in range(4)]
        c.line("#pragma unroll")
        c.line(f"for (int i = 0; i < {have.nregs}; i += 8) {{ const int f = {fe}; "
               f"stmatrix_x4(smem_u32({sh} + {at('f')}), {', '.join(words)}); }}")

    def _for_step(self, n: int, step: int, stmt: str, c: Chunk):
        if step == 1:
            self.for_regs(n, stmt, c)
            return
        if n == step:
            c.line(f"{{ const int i = 0; {stmt} }}")
            return
        c.line("#pragma unroll")
        c.line(f"for (int i = 0; i < {n}; i += {step}) {stmt}")

    def smem_scratch(self, size: int, chunk: Chunk, async_proxy: bool = False) -> str:
        """A scratch area of ``size`` bytes, used by ``chunk``'s code only (areas of different uses may share
        bytes, ordered by barriers).  ``async_proxy``: the tensor cores or the TMA unit access it too (a wgmma
        operand staged by plain stores, a TMA tile); such an area shares no bytes with the plain-access ones."""
        name = f"SMEM_SCRATCH{len(self.smem_uses)}"
        self.smem_uses.append(SmemUse(name, _align(size, 16), False, chunk.pipelined, async_proxy))
        return name

    def reduce_buffer(self, size: int) -> tuple[str, bool]:
        """One of two shared-memory buffers reserved for cross-warp reductions (used in turn; they
        overlap nothing else), and whether a barrier must come first.

        A reduction writes its warps' partials, syncs, and every thread reads them back.  The next
        reduction writes the *other* buffer: the readers of that one finished before the barrier in
        between, so no leading barrier is needed -- unless control flow came in between (loop bodies,
        branches), where ``reduce_pending`` is reset to "unknown"."""
        self.reduce_bytes = max(self.reduce_bytes, _align(size, 16))
        t = self.reduce_turn
        self.reduce_turn ^= 1
        lead = self.reduce_pending[t]
        # after this reduction's middle barrier nothing reads either buffer; then its own reads start
        self.reduce_pending = [False, False]
        self.reduce_pending[t] = True
        return f"SMEM_RED{t}", lead

    def smem_reserved(self, size: int) -> str:
        """Shared memory for the whole kernel, overlapping nothing else."""
        name = f"SMEM_KEEP{len(self.reserved)}"
        self.reserved.append(SmemUse(name, _align(size, 128), True, False))
        return name

    def smem_persistent(self, size: int, name: str | None = None) -> str:
        name = name or f"SMEM_PIPE{len(self.smem_uses)}"
        self.smem_uses.append(SmemUse(name, _align(size, 128), True, True))
        return name

    # ------------------------------------------------------------------
    # polymorphic values: produce them in any layout, where they are defined
    # ------------------------------------------------------------------
    def materialize(self, v, lay: Layout) -> str:
        op = v.owner
        chunk = self.def_chunk.get(v)
        if chunk is None:
            raise BackendError(f"internal: polymorphic value {v!r} has no definition site", op)
        name = self.vname(v)
        if name in self.used_names:
            name = self.tmp(name + "_")
        self.used_names.add(name)
        n = lay.nregs
        ct = ctype(v.type)
        nm = op.name
        if nm == "constant":
            lit = const_literal(op.attrs["value"], scalar_of(v.type))
            chunk.line(f"{ct} {name}[{n}];")
            self.for_regs(n, f"{name}[i] = {lit};", chunk)
        elif nm == "splat":
            s = self.scalar(op.operands[0])
            chunk.line(f"{ct} {name}[{n}];")
            self.for_regs(n, f"{name}[i] = {s};", chunk)
        elif nm == "arange":
            start = int(op.attr("start"))
            fe = self.flat_expr(lay)
            chunk.line(f"{ct} {name}[{n}];  // arange({start}, {op.attrs.get('end')}) in {_short(lay)}")
            expr = fe if start == 0 else f"{start} + {fe}"
            self.for_regs(n, f"{name}[i] = {expr};", chunk)
        elif nm == "hint":
            src = self.get(op.operands[0], lay)
            self.blocks[(v, lay)] = src
            return src
        elif nm in ("expand_dims", "reshape"):
            x = op.operands[0]
            if not is_block(x.type):
                s = self.scalar(x)
                chunk.line(f"{ct} {name}[{n}];")
                self.for_regs(n, f"{name}[i] = {s};", chunk)
            else:
                src = self.get(x, lay.with_shape(shape_of(x.type)))
                self.blocks[(v, lay)] = src
                return src
        elif nm == "permute":
            order = list(op.attrs["order"])
            inv = [0] * len(order)
            for i, o in enumerate(order):
                inv[o] = i
            src = self.get(op.operands[0], lay.permute(inv))
            self.blocks[(v, lay)] = src
            return src
        elif nm == "broadcast":
            x = op.operands[0]
            proj = lay.project_to(shape_of(x.type))
            src_lay = compact(proj)
            src = self.get(x, src_lay)
            pos = {b: 1 << j for j, b in enumerate(src_lay.reg)}
            mapping = [pos[b] if b else 0 for b in proj.reg]
            if all(m == 1 << j for j, m in enumerate(mapping)) and len(mapping) == len(src_lay.reg):
                self.blocks[(v, lay)] = src
                return src
            chunk.line(f"{ct} {name}[{n}];  // broadcast of {src}")
            self.for_regs(n, f"{name}[i] = {src}[{bit_index_expr('i', mapping)}];", chunk)
        elif nm == "addptr" and (sp := self.affine(v, lay)) is not None:
            # one base address per thread, then register offsets that are constants once unrolled
            base = self.tmp(name + "_base")
            decl = f"{ct} const" if ct.endswith("*") else f"const {ct}"
            chunk.line(f"{decl} {base} = opaque_ptr({sp[0]});")
            chunk.line(f"{ct} {name}[{n}];")
            r = sp[1]("i")
            self.for_regs(n, f"{name}[i] = {base}{'' if r == '0' else f' + {r}'};", chunk)
        elif (nm in ("add", "sub") and _is_i32(scalar_of(v.type)) and self.enclosing_loop(op) is not None
              and (sp := self.affine(v, lay)) is not None and sp[1] is not _zero):
            # one per-thread value, then register constants: ``start_n + offs_n`` in a loop is one add and
            # immediates, not the register-dependent halves of offs_n kept in registers across the loop
            # (NVVM hoists ``tf | c_i`` out of the loop: 16 registers for a 64-wide wgmma row).  Only in
            # loops: outside, the form changes nothing but ptxas' allocation at the 255-register edge (the
            # tf32 128x128x32 matmul's rm/rn spilled 8 bytes with it, NVRTC 13.5)
            base = self.tmp(name + "_base")
            chunk.line(f"const {ct} {base} = {sp[0]};")
            chunk.line(f"{ct} {name}[{n}];")
            self.for_regs(n, f"{name}[i] = ({ct})((unsigned int){base} + (unsigned int)({sp[1]('i')}));", chunk)
        elif nm in ELEMENTWISE:
            ri = self.const_reg_index(v, lay)
            args = [self.operand(o, lay.with_shape(shape_of(o.type)) if is_block(o.type) else None, ri)
                    for o in op.operands]
            expr = scalar_expr(nm, args, [o.type for o in op.operands], v.type, op.attrs)
            chunk.line(f"{ct} {name}[{n}];")
            self.for_regs(n, f"{name}[i] = {expr};", chunk)
        else:
            raise BackendError(f"internal: cannot materialize {nm}", op)
        self.blocks[(v, lay)] = name
        return name

    def affine(self, v, lay: Layout):
        """Split a polymorphic integer or pointer block into ``(T, R)``: ``T`` a C++ expression that
        does not depend on the register (scalars, this thread's flat index) and ``R(reg)`` one that
        depends only on the register index (a constant once unrolled), with ``v[reg] == T + R(reg)``.
        None when ``v`` is not of that form (anything but arange, splat, constants, views, +, -,
        negation and products with a constant).  Used for pointer blocks: one base address per thread, then
        immediate offsets (NVVM does not split ``base + (tf | 1024)`` by itself).

        Not cached: ``T`` names the scalars bound *now*, and the pipeline re-renders a loop body's
        load slice with other bindings (the lookahead iteration's)."""
        try:
            return self._affine(v, lay)
        except (BackendError, KeyError, ValueError, AssertionError):
            return None

    def _affine(self, v, lay: Layout):
        if not is_block(v.type):
            t = scalar_of(v.type)
            if not (t.is_ptr() or (t.is_int() and t.primitive_bitwidth in (32, 64) and not t.is_bool())):
                return None
            return self.scalar(v), _zero
        st = scalar_of(v.type)
        is_ptr = st.is_ptr()
        if not (is_ptr or (st.is_int() and st.primitive_bitwidth in (32, 64) and not st.is_bool())):
            return None
        if v not in self.plan.poly:
            return None
        op = v.owner
        nm = op.name
        if nm == "constant":
            if is_ptr:
                return None
            return const_literal(op.attrs["value"], st), _zero
        if nm == "splat":
            return self.scalar(op.operands[0]), _zero
        if nm == "arange":
            if st.primitive_bitwidth != 32:
                return None
            start = int(op.attr("start"))
            t = self.thread_flat(lay)
            bases = list(lay.reg)
            return (t if start == 0 else f"({start} + {t})"), (lambda reg: bit_index_expr(f"({reg})", bases)
                                                              if bases else "0")
        if nm in ("hint", "expand_dims", "reshape"):
            x = op.operands[0]
            if not is_block(x.type):
                return self._affine(x, lay) if nm != "hint" else None
            return self.affine(x, lay.with_shape(shape_of(x.type)) if nm != "hint" else lay)
        if nm == "permute":
            order = list(op.attrs["order"])
            inv = [0] * len(order)
            for i, o in enumerate(order):
                inv[o] = i
            return self.affine(op.operands[0], lay.permute(inv))
        if nm == "broadcast":
            x = op.operands[0]
            proj = lay.project_to(shape_of(x.type))
            src_lay = compact(proj)
            sp = self.affine(x, src_lay)
            if sp is None:
                return None
            pos = {b: 1 << j for j, b in enumerate(src_lay.reg)}
            mapping = [pos[b] if b else 0 for b in proj.reg]
            rs = sp[1]
            return sp[0], (lambda reg: rs(bit_index_expr(f"({reg})", mapping)))
        if nm == "neg" and not is_ptr and st.primitive_bitwidth == 32:
            x = op.operands[0]
            px = self.affine(x, lay.with_shape(shape_of(x.type))) if is_block(x.type) else self._affine(x, lay)
            if px is None:
                return None
            return f"(int)(0u - (unsigned int)({px[0]}))", _sum(_zero, px[1], "-")
        if nm not in ("add", "sub", "mul", "addptr"):
            return None
        a, b = op.operands

        def part(o):
            if is_block(o.type):
                return self.affine(o, lay.with_shape(shape_of(o.type)))
            return self._affine(o, lay)
        pa, pb = part(a), part(b)
        if pa is None or pb is None:
            return None
        ra, rb = pa[1], pb[1]
        if nm == "addptr":
            if scalar_of(b.type).primitive_bitwidth != 32 and ra is not _zero:
                return None
            return f"({pa[0]} + {pb[0]})", _sum(ra, rb, "+")
        u = "unsigned long long" if st.primitive_bitwidth == 64 else "unsigned int"
        ct = ctype(st)
        if st.primitive_bitwidth != 32 and (ra is not _zero or rb is not _zero):
            return None
        if nm in ("add", "sub"):
            sym = "+" if nm == "add" else "-"
            return f"({ct})(({u})({pa[0]}) {sym} ({u})({pb[0]}))", _sum(ra, rb, sym)
        # mul: only by a known constant (the register part scales)
        ca = self.axis.get(a).const_value if is_block(a.type) else None
        cb = self.axis.get(b).const_value if is_block(b.type) else None
        if ca is None and not is_block(a.type) and a.owner is not None and a.owner.name == "constant":
            ca = a.owner.attrs["value"]
        if cb is None and not is_block(b.type) and b.owner is not None and b.owner.name == "constant":
            cb = b.owner.attrs["value"]
        if cb is not None and isinstance(cb, int) and not isinstance(cb, bool):
            t, r, c = pa[0], ra, int(cb)
        elif ca is not None and isinstance(ca, int) and not isinstance(ca, bool):
            t, r, c = pb[0], rb, int(ca)
        else:
            return None
        if r is _zero:
            rr = _zero
        else:
            rr = (lambda reg: f"(({r(reg)}) * {c})")
        return f"({ct})(({u})({t}) * ({u})({c}))", rr

    # ------------------------------------------------------------------
    # walking the IR
    # ------------------------------------------------------------------
    def emit_region(self, region, chunk: Chunk):
        saved = self.cur
        self.cur = chunk
        top = region is self.fn.body
        if not top:  # a loop body or a branch: entered from code (and iterations) the state cannot see
            self.reduce_pending = [True, True]
        try:
            for op in region.ops:
                self.emit_op(op)
        finally:
            self.cur = saved
            if not top:  # after the region's op, either path may have been taken
                self.reduce_pending = [True, True]

    def emit_op(self, op):
        if op.name in ("yield", "condition", "return"):
            fn = LOWERINGS.get(op.name)
            if fn is not None:
                fn(self, op)
            return
        self.source_comment(op)
        outer = self.cur
        chunk = outer.sub(0, op.loc)
        for r in op.results:
            self.def_chunk[r] = chunk
            self.def_smem[r] = len(self.smem_uses)
        self.cur = chunk
        try:
            if op.results and all(r in self.plan.poly for r in op.results):
                return  # produced on demand, in the layouts its users need
            fn = LOWERINGS.get(op.name)
            if fn is None:
                raise BackendError(f"the CUDA backend has no lowering for '{op.name}'", op)
            try:
                fn(self, op)
            except BackendError as e:
                if e.op is None:
                    e.op = op
                raise
        finally:
            self.cur = outer

    def result_block(self, v, chunk=None) -> tuple[str, Layout]:
        """Declare the array of an anchored result in its planned layout."""
        lay = compact(self.layout_of(v))
        return self.declare_block(v, lay, chunk), lay


def _is_i32(t) -> bool:
    return t.is_int() and t.primitive_bitwidth == 32 and not t.is_bool()


def _zero(reg: str) -> str:
    return "0"


def _sum(ra, rb, sym: str):
    if rb is _zero:
        return ra
    if ra is _zero:
        return rb if sym == "+" else (lambda reg: f"(-({rb(reg)}))")
    return lambda reg: f"(({ra(reg)}) {sym} ({rb(reg)}))"


def _elem_bytes(ty) -> int:
    t = scalar_of(ty)
    if t.is_ptr():
        return 8
    return max(1, t.primitive_bitwidth // 8)


_VEC_T = {4: "unsigned", 8: "uint2", 16: "uint4"}


def _vec_run(lay: Layout, eb: int) -> int:
    """Consecutive flat elements in a thread's lowest registers (a power of two, at most 16 bytes)."""
    run = 1
    for j, b in enumerate(lay.reg):
        if b != 1 << j or (run * 2) * eb > 16:
            break
        run *= 2
    return run


def _pad_shift(per: int) -> int:
    return per.bit_length() - 1


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def _short(lay: Layout) -> str:
    regs = lay.per_dim(lay.reg)
    lanes = lay.per_dim(lay.lane)
    warps = lay.per_dim(lay.warp)
    f = lambda v: "x".join(map(str, v))
    return f"{lay.kind.split('(')[0]}[regs {f(regs)}, lanes {f(lanes)}, warps {f(warps)}]"

