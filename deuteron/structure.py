"""The shape of a ``@dt.kernel`` function, read from its AST alone.

Shared by the static checker (``deuteron.frontend``, torch-free, in the editor)
and the compiler (``deuteron.kernel``): which loops are tile loops (the
outermost ones are kernels), which names live on the host and which inside
the kernel, where the tunable block sizes come from, tensor ranks the host
code reveals, and the problems that can be seen without running anything
(``D001``..``D005``).  Nothing here imports torch or runs user code.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, field

from . import ops

__all__ = ["Resolver", "StaticResolver", "KernelStructure", "TileSite", "DeviceLoop", "Problem", "Note",
           "KERNEL_OPTIONS", "EFFORTS"]

KERNEL_OPTIONS = ("config", "configs", "autotune_effort", "static_shapes", "autotune_callback", "print_config",
                  "autotune_log")
EFFORTS = ("none", "quick", "full")
CONFIG_FIELDS = ("block_sizes", "loop_orders", "l2_groupings", "reduction_loops", "num_warps", "num_stages",
                 "pid_type")


# ---------------------------------------------------------------------------
# name resolution
# ---------------------------------------------------------------------------


class Resolver:
    """Maps an expression (``dt.tile``, ``torch.exp``) to a dotted name (``deuteron.tile``) or None."""

    def qualname(self, node) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError

    def dt_name(self, node) -> str | None:
        """``tile`` for ``dt.tile`` / ``deuteron.tile`` / ``from deuteron import tile``."""
        q = self.qualname(node)
        if q is None:
            return None
        for prefix in ("deuteron.language.", "deuteron."):
            if q.startswith(prefix):
                rest = q[len(prefix):]
                return rest if "." not in rest else None
        return None


class StaticResolver(Resolver):
    """Resolution through the module's import aliases (``import deuteron as dt``)."""

    def __init__(self, aliases: dict, shadowed: set = frozenset()):
        self.aliases = aliases
        self.shadowed = shadowed

    def qualname(self, node) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.shadowed:
                return None
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------


@dataclass
class Problem:
    code: str
    severity: str  # "error" | "warning"
    node: ast.AST
    message: str
    hint: str | None = None


class Note:
    """What the editor shows when hovering a deuteron expression (``describe()``)."""

    __slots__ = ("kind", "text")

    def __init__(self, kind: str, text: str):
        self.kind = kind
        self.text = text

    def describe(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Note({self.kind}: {self.text})"


@dataclass
class TileSite:
    """A ``dt.tile`` / ``dt.grid`` call that a ``for`` loop iterates over."""

    node: ast.Call
    loop: ast.For
    kind: str  # "tile" | "grid"
    depth: int  # 0: a kernel's grid loop
    static_ndim: int | None  # number of dimensions when the source tells
    as_list: bool | None  # the loop variable is a tuple of tiles
    fixed: list | None  # per dimension: True when block_size= fixes it (static view)
    target_names: list  # loop variable names
    index: int = 0  # order among all sites (source order)

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass
class DeviceLoop:
    """An outermost tile loop: one generated kernel."""

    index: int
    node: ast.For
    site: TileSite
    assigned: set = field(default_factory=set)  # names bound inside (device locals)
    reads: set = field(default_factory=set)  # names read inside that are not device locals


def _targets(node) -> list[str]:
    out = []
    if isinstance(node, ast.Name):
        out.append(node.id)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            out.extend(_targets(e))
    elif isinstance(node, ast.Starred):
        out.extend(_targets(node.value))
    return out


def _assigned_names(stmts) -> set:
    out = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                out.add(n.id)
    return out


def _is_pow2(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


_ALLOC_FNS = {"empty", "zeros", "ones", "full", "empty_strided", "rand", "randn", "tensor"}
_LIKE_FNS = {"empty_like", "zeros_like", "ones_like", "full_like", "randn_like", "rand_like"}
_SAME_RANK_METHODS = {"contiguous", "clone", "to", "float", "half", "bfloat16", "t", "transpose", "permute",
                      "detach", "cuda", "cpu", "type_as", "abs", "exp", "neg", "mul", "add", "sub", "div",
                      "new_empty_strided"}
_NEW_METHODS = {"new_empty", "new_zeros", "new_ones", "new_full"}
_VIEW_METHODS = {"view", "reshape", "expand", "new_empty", "new_zeros", "new_ones"}


class KernelStructure:
    """Everything about one ``@dt.kernel`` function that its source alone tells."""

    def __init__(self, fdef: ast.FunctionDef, resolver: Resolver, module_functions: dict | None = None):
        self.fdef = fdef
        self.resolver = resolver
        self.module_functions = module_functions or {}
        self.params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs]
        self.param_annotations = {a.arg: a.annotation for a in fdef.args.posonlyargs + fdef.args.args
                                  + fdef.args.kwonlyargs}
        self.problems: list[Problem] = []
        self.notes: list[tuple[ast.AST, Note]] = []
        self.sites: list[TileSite] = []
        self.site_by_node: dict[int, TileSite] = {}
        self.loops: list[DeviceLoop] = []
        self.register_calls: list[ast.Call] = []  # dt.register_block_size, in source order
        self.tunable_calls: list[tuple[str | None, ast.Call]] = []
        self.specialize_calls: list[ast.Call] = []
        self.ranks: dict[str, int] = {}
        self.host_assigned: set = set()
        self._tile_uses: list = []  # (Name node, site, name) of tiles used inside their loops
        self.registered_names: dict[str, int] = {}  # name bound to register_block_size -> its order
        self._analyze()

    # -- helpers -------------------------------------------------------------------
    def problem(self, code, node, message, hint=None, severity="error"):
        self.problems.append(Problem(code, severity, node, message, hint))

    def note(self, node, kind, text):
        self.notes.append((node, Note(kind, text)))

    def dt(self, node) -> str | None:
        return self.resolver.dt_name(node)

    def torch_name(self, node) -> tuple[str, str] | None:
        """("torch", "exp") for torch.exp; ("F", "relu") for torch.nn.functional.relu."""
        q = self.resolver.qualname(node)
        if q is None:
            return None
        if q.startswith("torch.nn.functional."):
            return ("F", q[len("torch.nn.functional."):])
        if q.startswith("torch.") and q.count(".") == 1:
            return ("torch", q[len("torch."):])
        return None

    # -- the analysis ------------------------------------------------------------------
    def _analyze(self):
        body = self.fdef.body
        self._find_sites(body, depth=0, parent_loop=None)
        self.sites.sort(key=lambda s: (s.node.lineno, s.node.col_offset))
        for i, s in enumerate(self.sites):
            s.index = i
        self._host_names()
        self._ranks(body)
        self._check_misplaced_calls()
        for loop in self.loops:
            self._check_device(loop)
        self._check_host(body)
        self._check_escapes(body)
        self._static_slots()

    def _site_of(self, for_node) -> TileSite | None:
        it = for_node.iter
        if not isinstance(it, ast.Call):
            return None
        name = self.dt(it.func)
        if name not in ("tile", "grid"):
            return None
        return self.site_by_node.get(id(it))

    def _make_site(self, node: ast.For, depth: int) -> TileSite | None:
        it = node.iter
        if not isinstance(it, ast.Call):
            return None
        kind = self.dt(it.func)
        if kind not in ("tile", "grid"):
            return None
        first = it.args[0] if it.args else None
        for k in it.keywords:
            if k.arg in ("begin_or_sizes", "sizes"):
                first = k.value
        second = it.args[1] if len(it.args) > 1 else next((k.value for k in it.keywords if k.arg == "end"), None)
        ndim, as_list = None, None
        if isinstance(first, (ast.List, ast.Tuple)):
            ndim, as_list = len(first.elts), True
        elif first is not None and not self._maybe_sequence(first):
            ndim, as_list = 1, False
        elif first is not None and isinstance(first, (ast.Call, ast.Attribute)):
            base = self._shape_source(first)
            if base is not None and base in self.ranks:
                ndim, as_list = self.ranks[base], True
        if second is not None and ndim is None and not self._maybe_sequence(second):
            ndim, as_list = 1, False
        bs = None
        if kind == "tile":
            bs = it.args[2] if len(it.args) > 2 else next((k.value for k in it.keywords if k.arg == "block_size"),
                                                           None)
        fixed = None
        if kind == "grid":
            fixed = [True] * ndim if ndim is not None else None
        elif bs is None or (isinstance(bs, ast.Constant) and bs.value is None):
            fixed = [False] * ndim if ndim is not None else None
        elif isinstance(bs, (ast.List, ast.Tuple)):
            fixed = [not (isinstance(e, ast.Constant) and e.value is None) and not self._is_registered(e)
                     for e in bs.elts]
            if ndim is not None and len(fixed) != ndim:
                self.problem("D005", bs, f"dt.tile over {ndim} dimension(s) with {len(fixed)} block sizes")
        else:
            fixed = None if ndim is None else [not self._is_registered(bs)] * ndim
        if kind == "tile" and bs is not None:
            for e in (bs.elts if isinstance(bs, (ast.List, ast.Tuple)) else [bs]):
                if isinstance(e, ast.Constant) and e.value is not None and not _is_pow2(e.value):
                    self.problem("D005", e, f"block size {e.value!r} is not a power of two",
                                 hint=f"use {_pow2_near(e.value)}" if isinstance(e.value, int) else None)
        site = TileSite(it, node, kind, depth, ndim, as_list, fixed, _targets(node.target))
        self.site_by_node[id(it)] = site
        self.sites.append(site)
        return site

    def _is_registered(self, node) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.registered_names
        if isinstance(node, ast.Call):
            return self.dt(node.func) == "register_block_size"
        return False

    def _maybe_sequence(self, node) -> bool:
        """Could this expression be a list of sizes (``x.shape``, ``x.size()``, a tuple variable)?"""
        if isinstance(node, (ast.List, ast.Tuple)):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "shape":
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and not node.args:
            return True
        if isinstance(node, ast.Name):
            # a name assigned from a tuple/shape is a sequence; plain ints are not
            for stmt in ast.walk(self.fdef):
                if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id
                                                        for t in stmt.targets):
                    if self._maybe_sequence(stmt.value):
                        return True
            return node.id not in self.host_assigned_cache() and node.id not in self.params
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            return True
        return False

    def host_assigned_cache(self) -> set:
        if not hasattr(self, "_hac"):
            self._hac = _assigned_names(self.fdef.body)
        return self._hac

    def _shape_source(self, node) -> str | None:
        if isinstance(node, ast.Attribute) and node.attr == "shape" and isinstance(node.value, ast.Name):
            return node.value.id
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and isinstance(node.func.value, ast.Name):
            return node.func.value.id
        return None

    def _find_sites(self, stmts, depth: int, parent_loop):
        for s in stmts:
            self._find_sites_stmt(s, depth, parent_loop)

    def _find_sites_stmt(self, s, depth, parent_loop):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and isinstance(s.value, ast.Call) and self.dt(s.value.func) == "register_block_size" \
                and parent_loop is None:
            self.registered_names[s.targets[0].id] = len(self.registered_names)
        if isinstance(s, (ast.For, ast.AsyncFor)):
            site = self._make_site(s, depth)
            if site is not None:
                if depth == 0:
                    loop = DeviceLoop(len(self.loops), s, site)
                    self.loops.append(loop)
                    self._find_sites(s.body, depth + 1, loop)
                    self._find_sites(s.orelse, depth, parent_loop)
                else:
                    self._find_sites(s.body, depth + 1, parent_loop)
                    self._find_sites(s.orelse, depth, parent_loop)
                return
        for fname in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(s, fname, None)
            if isinstance(sub, list):
                for x in sub:
                    if isinstance(x, ast.stmt):
                        self._find_sites_stmt(x, depth, parent_loop)
                    elif isinstance(x, ast.ExceptHandler):
                        self._find_sites(x.body, depth, parent_loop)
        if isinstance(s, ast.Match):
            for c in s.cases:
                self._find_sites(c.body, depth, parent_loop)

    # -- host / device partition ---------------------------------------------------------
    def _host_names(self):
        device_nodes = set()
        for loop in self.loops:
            for n in ast.walk(loop.node):
                device_nodes.add(id(n))
            loop.assigned = _assigned_names(loop.node.body) | set(loop.site.target_names)
            for n in ast.walk(loop.node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in loop.assigned:
                    loop.reads.add(n.id)
        self._device_nodes = device_nodes
        host = set(self.params)
        for n in ast.walk(self.fdef):
            if id(n) in device_nodes:
                continue
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                host.add(n.id)
        self.host_assigned = host

    def in_device(self, node) -> bool:
        return id(node) in self._device_nodes

    # -- ranks from the host code ------------------------------------------------------
    def _rank_of(self, node) -> int | None:
        if isinstance(node, ast.Name):
            return self.ranks.get(node.id)
        if isinstance(node, ast.Call):
            tn = self.torch_name(node.func)
            if tn is not None and tn[0] == "torch":
                fn = tn[1]
                if fn in _ALLOC_FNS and fn != "tensor":
                    args = node.args
                    if fn == "full":
                        args = args[:1]
                    if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
                        return len(args[0].elts)
                    if len(args) == 1 and self._shape_source(args[0]) is not None:
                        return self.ranks.get(self._shape_source(args[0]))
                    if args and all(not isinstance(a, (ast.List, ast.Tuple, ast.Starred)) and
                                    not self._maybe_sequence(a) for a in args):
                        return len(args)
                    return None
                if fn in _LIKE_FNS and node.args:
                    return self._rank_of(node.args[0])
                return None
            if isinstance(node.func, ast.Attribute):
                m = node.func.attr
                recv = node.func.value
                if m in _SAME_RANK_METHODS and m not in ("t", "transpose", "permute") or m in ("t", "transpose"):
                    return self._rank_of(recv)
                if m == "permute":
                    args = node.args
                    if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
                        return len(args[0].elts)
                    return len(args) if args else None
                if m in _VIEW_METHODS or m in _NEW_METHODS:
                    args = node.args
                    if m == "new_full":
                        args = args[:1]
                    if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
                        return len(args[0].elts)
                    if args and all(not isinstance(a, (ast.List, ast.Tuple, ast.Starred)) and
                                    not self._maybe_sequence(a) for a in args):
                        return len(args)
                    return None
                if m == "unsqueeze":
                    r = self._rank_of(recv)
                    return None if r is None else r + 1
                if m == "flatten" and not node.args:
                    return 1
        return None

    def _ranks(self, body):
        assigned_twice = set()
        seen = set()
        for n in ast.walk(self.fdef):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and not self.in_device(n):
                if n.id in seen:
                    assigned_twice.add(n.id)
                seen.add(n.id)
        for stmt in self._host_stmts(body):
            if isinstance(stmt, ast.Assign):
                # m, n = x.shape / x.size()
                src = self._shape_source(stmt.value)
                for t in stmt.targets:
                    if isinstance(t, (ast.Tuple, ast.List)) and src is not None \
                            and not any(isinstance(e, ast.Starred) for e in t.elts):
                        if src not in self.ranks:
                            self.ranks[src] = len(t.elts)
                        elif self.ranks[src] != len(t.elts):
                            self.problem("D002", stmt.value,
                                         f"{src} is unpacked into {len(t.elts)} sizes here but has rank "
                                         f"{self.ranks[src]} elsewhere")
                if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    name = stmt.targets[0].id
                    r = self._rank_of(stmt.value)
                    if r is not None and name not in assigned_twice:
                        self.ranks[name] = r
                    elif name in self.ranks and name in assigned_twice:
                        self.ranks.pop(name, None)

    def _host_stmts(self, body):
        for s in body:
            if self.in_device(s):
                continue
            yield s
            for fname in ("body", "orelse", "finalbody"):
                sub = getattr(s, fname, None)
                if isinstance(sub, list):
                    yield from self._host_stmts([x for x in sub if isinstance(x, ast.stmt)])

    # -- checks --------------------------------------------------------------------------
    def _check_misplaced_calls(self):
        """dt.tile / dt.grid outside a for loop; host-only calls inside tile loops."""
        iters = {id(s.node) for s in self.sites}
        for n in ast.walk(self.fdef):
            if not isinstance(n, ast.Call):
                continue
            name = self.dt(n.func)
            if name in ("tile", "grid") and id(n) not in iters:
                self.problem("D003", n, f"dt.{name}(...) must be the iterable of a for loop",
                             hint=f"write `for tile in dt.{name}(...):`")
            elif name in ops.DT_HOST_ONLY and self.in_device(n):
                self.problem("D004", n, f"dt.{name} belongs in the host code, before the tile loops",
                             hint="call it before the outermost `for ... in dt.tile(...)` and use the result inside")
            elif name == "register_block_size":
                self.register_calls.append(n)
                self.note(n, "block", "a tunable block size (an entry of config.block_sizes)")
            elif name == "register_tunable":
                nm = n.args[0].value if n.args and isinstance(n.args[0], ast.Constant) and \
                    isinstance(n.args[0].value, str) else None
                self.tunable_calls.append((nm, n))
                if nm is not None:
                    self.note(n, "tunable", f"user tunable {nm!r} (config.{nm})")
            elif name == "specialize":
                self.specialize_calls.append(n)
                self.note(n, "specialize", "a compile-time constant of the kernel (specialized per value)")
        self.register_calls.sort(key=lambda c: (c.lineno, c.col_offset))

    def _check_device(self, loop: DeviceLoop):
        site = loop.site
        if site.static_ndim is not None and site.static_ndim > 3:
            self.problem("D003", site.node, f"the grid loop has {site.static_ndim} dimensions; "
                                            "a launch grid has at most 3",
                         hint="tile the outer dimensions in a nested dt.tile loop")
        checker = _DeviceChecker(self, loop)
        for s in loop.node.body:
            checker.visit(s)
        for s in loop.node.orelse:
            self.problem("D004", s, "a for/else on a tile loop is not supported")
            break

    def _site_text(self, site: TileSite, d: int | None = None, slot=None) -> str:
        if site.kind == "grid":
            what = "a grid index (an int)"
        elif site.as_list and d is None and len(site.target_names) == 1:
            what = f"a tuple of {site.static_ndim or 'n'} tiles"
        else:
            what = "a tile"
        if site.depth == 0:
            where = "of the launch grid" + (f" (axis {d})" if d is not None and (site.static_ndim or 1) > 1 else "")
        else:
            where = "of a loop inside the kernel"
        size = ""
        if site.kind == "tile":
            if slot is not None:
                size = f"; block size config.block_sizes[{slot}]"
            elif site.fixed is not None and d is not None and d < len(site.fixed) and site.fixed[d]:
                size = "; a fixed block size"
        return f"{what} {where}{size}"

    def site_notes(self):
        """Hover text for every tile loop's variables (after the block-size slots are known)."""
        slot_of = {}
        for i, (kind, obj, d) in enumerate(self.static_slots or []):
            if kind == "tile":
                slot_of[(obj.index, d)] = i
        self.tile_text = {}
        for site in self.sites:
            tgt = site.loop.target
            if isinstance(tgt, (ast.Tuple, ast.List)) and len(tgt.elts) == (site.static_ndim or len(tgt.elts)):
                for d, e in enumerate(tgt.elts):
                    txt = self._site_text(site, d, slot_of.get((site.index, d)))
                    self.note(e, "tile", txt)
                    if isinstance(e, ast.Name):
                        self.tile_text[(site.index, e.id)] = txt
            elif isinstance(tgt, ast.Name):
                txt = self._site_text(site, None if site.as_list else 0, slot_of.get((site.index, 0))
                                      if not site.as_list else None)
                self.note(tgt, "tile", txt)
                self.tile_text[(site.index, tgt.id)] = txt

    def _check_host(self, body):
        """D001: tensor work in the host code (it runs eagerly, outside the kernel)."""
        tensors = set()
        for p in self.params:
            ann = self.param_annotations.get(p)
            q = self.resolver.qualname(ann) if ann is not None else None
            if q == "torch.Tensor":
                tensors.add(p)
        # names used like tensors by the host code: x.shape, x.size(), torch.empty_like(x), x.view(...)
        for n in ast.walk(self.fdef):
            if self.in_device(n):
                continue
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (
                    n.attr in ops.HOST_ATTR_OK or n.attr in ops.HOST_METHOD_OK):
                tensors.add(n.value.id)
            elif isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name):
                tn = self.torch_name(n.func)
                if tn is not None and tn[0] == "torch" and tn[1] in _LIKE_FNS:
                    tensors.add(n.args[0].id)
        for stmt in self._host_stmts(body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                if self._rank_of(stmt.value) is not None:
                    tensors.add(stmt.targets[0].id)
        # tensors only: names the device code indexes
        indexed = set()
        for loop in self.loops:
            for n in ast.walk(loop.node):
                if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id not in loop.assigned:
                    indexed.add(n.value.id)
        tensors |= indexed
        self._host_tensors = tensors
        for stmt in self._host_stmts(body):
            for expr in self._stmt_exprs(stmt):
                self._host_expr(expr, tensors)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                r = self.ranks.get(stmt.targets[0].id)
                if r is not None and isinstance(stmt.value, ast.Call):
                    self.note(stmt.targets[0], "tensor", f"tensor of rank {r} (allocated on the host)")

    def _stmt_exprs(self, stmt):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
            v = getattr(stmt, "value", None)
            if v is not None:
                yield v
            if isinstance(stmt, ast.AugAssign):
                yield ast.BinOp(left=stmt.target, op=stmt.op, right=stmt.value, lineno=stmt.lineno,
                                col_offset=stmt.col_offset, end_lineno=stmt.end_lineno,
                                end_col_offset=stmt.end_col_offset)
        elif isinstance(stmt, (ast.If, ast.While)):
            yield stmt.test

    def _is_tensor_expr(self, node, tensors) -> bool:
        if isinstance(node, ast.Name):
            return node.id in tensors
        if isinstance(node, ast.Subscript):
            return self._is_tensor_expr(node.value, tensors) and not self._is_metadata(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("size", "stride", "dim", "numel", "item", "tolist", "data_ptr", "element_size",
                                  "is_contiguous", "storage_offset", "nelement", "get_device"):
                return False
            return self._is_tensor_expr(node.func.value, tensors)
        if isinstance(node, ast.BinOp):
            return self._is_tensor_expr(node.left, tensors) or self._is_tensor_expr(node.right, tensors)
        return False

    def _is_metadata(self, node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in ops.HOST_ATTR_OK

    def _host_expr(self, expr, tensors):
        for n in ast.walk(expr):
            if isinstance(n, ast.BinOp) and not isinstance(n.op, ast.MatMult) and \
                    (self._is_tensor_expr(n.left, tensors) or self._is_tensor_expr(n.right, tensors)):
                self.problem("D001", n, "tensor arithmetic outside any dt.tile loop runs eagerly on the host, "
                                        "not in the kernel", severity="warning",
                             hint="move it inside `for tile in dt.tile(...)`")
                return
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                self.problem("D001", n, "a matmul outside any dt.tile loop runs eagerly on the host (torch), "
                                        "not in the kernel", severity="warning",
                             hint="move it inside `for tile in dt.tile(...)`")
                return
            if isinstance(n, ast.Call):
                tn = self.torch_name(n.func)
                if tn is not None:
                    kind, fname = tn
                    if kind == "F" or (fname not in ops.HOST_TORCH_OK and fname[:1].islower()
                                       and fname in ops.TORCH_FUNCTIONS):
                        self.problem("D001", n, f"torch.{fname}(...) outside any dt.tile loop runs eagerly on the "
                                                "host, not in the kernel", severity="warning",
                                     hint="move it inside `for tile in dt.tile(...)`")
                        return
                elif isinstance(n.func, ast.Attribute) and self._is_tensor_expr(n.func.value, tensors):
                    m = n.func.attr
                    if m not in ops.HOST_METHOD_OK and m in ops.TENSOR_METHODS and m not in ("to", "size", "dim",
                                                                                           "numel", "contiguous"):
                        self.problem("D001", n, f".{m}() on a tensor outside any dt.tile loop runs eagerly on the "
                                                "host, not in the kernel", severity="warning",
                                     hint="move it inside `for tile in dt.tile(...)`")
                        return

    def _check_escapes(self, body):
        """Names bound inside a tile loop and read afterwards by the host code."""
        for loop in self.loops:
            after = False
            device_local = loop.assigned
            tiles = set(loop.site.target_names)
            for n in _walk_in_order(self.fdef.body):
                if n is loop.node:
                    after = True
                    continue
                if not after or self.in_device(n):
                    continue
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in device_local \
                        and n.id not in self._bound_before(loop, n.id):
                    if n.id in tiles:
                        self.problem("D003", n, f"tile {n.id!r} is used outside its loop",
                                     hint="tiles exist only inside their `for ... in dt.tile(...)` loop")
                    else:
                        self.problem("D004", n, f"{n.id!r} is computed inside a tile loop (in the kernel) and "
                                                "cannot be read by the host code after it",
                                     hint="write results into a tensor allocated before the loop and return it")

    def _bound_before(self, loop, name) -> set:
        """Host bindings of ``name`` before the loop (then reading it afterwards is fine)."""
        for n in ast.walk(self.fdef):
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) and not self.in_device(n) \
                    and (n.lineno, n.col_offset) < (loop.node.lineno, loop.node.col_offset):
                return {name}
        if name in self.params:
            return {name}
        return set()

    # -- block size slots -------------------------------------------------------------
    def _static_slots(self):
        """The tunable block sizes in source order, when the source alone tells how many there are."""
        items = []
        known = True
        for s in self.sites:
            if s.kind != "tile":
                continue
            if s.fixed is None:
                known = False
                continue
            for d, f in enumerate(s.fixed):
                if not f:
                    items.append(((s.node.lineno, s.node.col_offset, d), ("tile", s, d)))
        for c in self.register_calls:
            items.append(((c.lineno, c.col_offset, 0), ("register", c, 0)))
        items.sort(key=lambda x: x[0])
        self.static_slots = [v for _, v in items] if known else None
        if self.static_slots is not None:
            per_site: dict = {}
            for i, (kind, obj, d) in enumerate(self.static_slots):
                if kind == "tile":
                    tname = obj.target_names[d] if d < len(obj.target_names) and obj.as_list is not False \
                        and len(obj.target_names) > 1 else (obj.target_names[0] if obj.target_names else "tile")
                    per_site.setdefault(id(obj), (obj, []))[1].append(f"config.block_sizes[{i}] ({tname})")
                else:
                    self.note(obj, "block", f"a tunable block size: config.block_sizes[{i}]")
            for obj, parts in per_site.values():
                self.note(obj.node, "tile", ("block sizes: " if len(parts) > 1 else "block size: ") + ", ".join(parts))
        self.grid_ndims = [s.static_ndim for s in self.sites if s.depth == 0]
        self.site_notes()
        for node, site, name in self._tile_uses:
            txt = self.tile_text.get((site.index, name))
            if txt:
                self.note(node, "tile", txt)

    # -- configs written in the decorator ----------------------------------------------------
    def check_decorator(self, dec: ast.AST):
        """D005 for options and config literals of ``@dt.kernel(...)``."""
        if not isinstance(dec, ast.Call):
            return
        for k in dec.keywords:
            if k.arg is None:
                continue
            if k.arg not in KERNEL_OPTIONS:
                sugg = difflib.get_close_matches(k.arg, KERNEL_OPTIONS, n=1)
                self.problem("D005", k, f"@dt.kernel has no option {k.arg!r}",
                             hint=f"did you mean {sugg[0]!r}?" if sugg else f"options: {', '.join(KERNEL_OPTIONS)}")
                continue
            if k.arg == "autotune_effort" and isinstance(k.value, ast.Constant) and k.value.value not in EFFORTS:
                self.problem("D005", k.value, f"autotune_effort must be one of {', '.join(map(repr, EFFORTS))}, "
                                              f"not {k.value.value!r}")
            elif k.arg == "config":
                self.check_config_expr(k.value)
            elif k.arg == "configs":
                if isinstance(k.value, (ast.List, ast.Tuple)):
                    for e in k.value.elts:
                        self.check_config_expr(e)
        if dec.args:
            self.problem("D005", dec.args[0], "@dt.kernel takes keyword options only (config=, configs=, ...)")

    def check_config_expr(self, node):
        if isinstance(node, ast.Call) and self.dt(node.func) == "Config":
            kws = {k.arg: k for k in node.keywords if k.arg is not None}
            if node.args:
                self.problem("D005", node.args[0], "dt.Config takes keyword arguments only (block_sizes=[...], ...)")
        elif isinstance(node, ast.Dict):
            kws = {}
            for kn, vn in zip(node.keys, node.values):
                if isinstance(kn, ast.Constant) and isinstance(kn.value, str):
                    kws[kn.value] = ast.keyword(arg=kn.value, value=vn, lineno=kn.lineno, col_offset=kn.col_offset,
                                                end_lineno=vn.end_lineno, end_col_offset=vn.end_col_offset)
        else:
            return
        tunable_names = {nm for nm, _ in self.tunable_calls if nm is not None}
        dynamic_tunables = any(nm is None for nm, _ in self.tunable_calls)
        from .config import Config, ConfigError
        for name, kw in kws.items():
            if name not in CONFIG_FIELDS:
                if name in tunable_names or dynamic_tunables:
                    continue
                sugg = difflib.get_close_matches(name, list(CONFIG_FIELDS) + sorted(tunable_names), n=1)
                self.problem("D005", kw, f"unknown config entry {name!r} (not a config field nor a "
                                         "dt.register_tunable name of this kernel)",
                             hint=f"did you mean {sugg[0]!r}?" if sugg else None)
                continue
            try:
                value = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError):
                continue
            if name in ("block_sizes", "reduction_loops") and isinstance(kw.value, (ast.List, ast.Tuple)):
                for e in kw.value.elts:
                    if isinstance(e, ast.Constant) and e.value is not None and not _is_pow2(e.value):
                        what = "block size" if name == "block_sizes" else "reduction loop size"
                        self.problem("D005", e, f"{what} {e.value!r} is not a power of two",
                                     hint=f"use {_pow2_near(e.value)}" if isinstance(e.value, int) else None)
                if name == "block_sizes" and self.static_slots is not None and \
                        len(kw.value.elts) != len(self.static_slots):
                    names = ", ".join(self._slot_label(s) for s in self.static_slots) or "none"
                    self.problem("D005", kw.value,
                                 f"this kernel has {len(self.static_slots)} tunable block size(s) ({names}) but the "
                                 f"config gives {len(kw.value.elts)}")
                continue
            try:
                Config(**{name: value})
            except (ConfigError, TypeError) as e:
                self.problem("D005", kw, str(e))
            if name in ("loop_orders", "l2_groupings") and isinstance(value, (list, tuple)):
                multi = [n for n in self.grid_ndims if n is None or n > 1]
                if all(n is not None for n in multi) and len(value) > len(multi):
                    self.problem("D005", kw.value, f"{name} has {len(value)} entries but the kernel has "
                                                   f"{len(multi)} multi-dimensional grid loop(s)")

    def _slot_label(self, slot) -> str:
        kind, obj, d = slot
        if kind == "register":
            return f"register_block_size at line {obj.lineno}"
        names = obj.target_names
        if obj.as_list and len(names) > d:
            return names[d]
        return names[0] if names else f"dt.tile at line {obj.node.lineno}"


def _pow2_near(v: int) -> int:
    if v <= 1:
        return 1
    lo = 1 << (v.bit_length() - 1)
    hi = lo << 1
    return lo if v - lo <= hi - v else hi


def _walk_in_order(stmts):
    """Nodes in source order (statements, then their expressions), for before/after questions."""
    nodes = []
    for s in stmts:
        for n in ast.walk(s):
            if hasattr(n, "lineno"):
                nodes.append(n)
    nodes.sort(key=lambda n: (n.lineno, n.col_offset))
    return nodes


# ---------------------------------------------------------------------------
# inside a tile loop
# ---------------------------------------------------------------------------

_UNSUPPORTED_STMT = {
    ast.Try: "try/except", ast.With: "with", ast.AsyncWith: "async with", ast.Return: "return",
    ast.Delete: "del", ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Import: "import",
    ast.ImportFrom: "import", ast.FunctionDef: "a nested def", ast.AsyncFunctionDef: "a nested def",
    ast.ClassDef: "a class", ast.Break: "break", ast.Continue: "continue", ast.While: "a while loop",
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


class _DeviceChecker:
    """Walks the body of one tile loop nest."""

    def __init__(self, st: KernelStructure, loop: DeviceLoop):
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
            elif isinstance(s, (ast.Break, ast.Continue)):
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
        if isinstance(s, (ast.Pass,)):
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
            for side in (e.left, e.right):
                if isinstance(side, ast.Name) and side.id in self.tiles:
                    st.problem("D003", side, f"arithmetic on tile {side.id!r}",
                               hint="use tile.index (a tensor) or tile.begin / tile.end")
                else:
                    self.expr(side)
            return
        if isinstance(e, ast.UnaryOp):
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
            if dtn not in ops.DT_DEVICE and dtn not in ops.DT_HOST_ONLY and dtn not in ("Config", "Tile"):
                st.problem("D004", e.func, f"dt.{dtn} cannot be used inside a tile loop")
            for a in e.args:
                self.expr(a, parent="shape" if dtn in ("zeros", "full", "atomic_add") else "arg")
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
            if isinstance(recv, ast.Name) and recv.id in self.tiles and recv.id not in self.tile_tuples:
                st.problem("D003", e.func, f"a tile has no method {m!r}",
                           hint="tiles have " + ", ".join("." + a for a in ops.TILE_ATTRS))
                return
            self.expr(recv, parent="attr")
            for a in e.args:
                self.expr(a, parent="shape" if m in ("new_zeros", "new_full", "new_ones", "new_empty") else None)
            for k in e.keywords:
                self.expr(k.value)
            return
        self.expr(e.func)
        for a in e.args:
            self.expr(a)

    def subscript(self, e: ast.Subscript, store: bool):
        st = self.st
        base = e.value
        items = list(e.slice.elts) if isinstance(e.slice, ast.Tuple) else [e.slice]
        for it in items:
            if isinstance(it, ast.Slice):
                for x in (it.lower, it.upper, it.step):
                    if x is not None:
                        self.expr(x)
                        st.problem("D004", it, "only `:` (the whole dimension) is supported as a slice "
                                               "inside a tile loop",
                                   hint="index with a tile: `for t in dt.tile(begin, end)` then x[t]")
                        break
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
    except Exception:  # noqa: BLE001
        return "?"


def _example_index(name, rank, items) -> str:
    parts = [_index_desc(it) for it in items if not (isinstance(it, ast.Constant) and it.value is None)]
    parts = parts[:rank] + [":"] * (rank - len(parts))
    return f"{name}[{', '.join(parts)}]"
