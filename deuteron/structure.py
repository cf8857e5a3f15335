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

from . import ops
from .device_check import DeviceChecker
from .shape_check import infer_loop_shapes
from .structure_base import (
    _ALLOC_FNS,
    _LIKE_FNS,
    _NEW_METHODS,
    _SAME_RANK_METHODS,
    _VIEW_METHODS,
    CONFIG_FIELDS,
    EFFORTS,
    HELION_IGNORED_OPTIONS,
    KERNEL_OPTIONS,
    DeviceLoop,
    Note,
    Problem,
    Resolver,
    StaticResolver,
    TileSite,
    _assigned_names,
    _is_pow2,
    _pow2_near,
    _targets,
    _walk_in_order,
)

__all__ = ["Resolver", "StaticResolver", "KernelStructure", "TileSite", "DeviceLoop", "Problem", "Note",
           "KERNEL_OPTIONS", "EFFORTS"]



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
            self._infer_shapes(loop)
        self._check_host(body)
        self._check_escapes(body)
        self._static_slots()

    def _site_of(self, for_node) -> TileSite | None:
        it = for_node.iter
        if not isinstance(it, ast.Call):
            return None
        name = self.dt(it.func)
        if name not in ("tile", "grid", "jagged_tile"):
            return None
        return self.site_by_node.get(id(it))

    def _make_site(self, node: ast.For, depth: int) -> TileSite | None:
        it = node.iter
        if not isinstance(it, ast.Call):
            return None
        kind = self.dt(it.func)
        if kind == "jagged_tile":
            return self._make_jagged_site(node, depth)
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
        registered = None
        if kind == "tile" and bs is not None and not (isinstance(bs, ast.Constant) and bs.value is None):
            registered = [self._is_registered(e) for e in (bs.elts if isinstance(bs, (ast.List, ast.Tuple)) else
                                                           [bs] * (ndim or 1))]
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
        site = TileSite(it, node, kind, depth, ndim, as_list, fixed, _targets(node.target), registered=registered)
        self.site_by_node[id(it)] = site
        self.sites.append(site)
        return site

    def _make_jagged_site(self, node: ast.For, depth: int) -> TileSite:
        """``for tile_k in dt.jagged_tile(lengths)``: a tile loop inside the kernel over ``[0, max(lengths))``
        whose lanes past each parent lane's length are masked off (Helion's jagged_tile)."""
        it = node.iter
        if depth == 0:
            self.problem("D003", it, "dt.jagged_tile cannot be the outermost loop: its lengths come from an "
                                     "enclosing tile", hint="tile the rows first: `for tile_b in dt.tile(b):` "
                                                            "then `for tile_k in dt.jagged_tile(lengths[tile_b])`")
        nargs = len(it.args) + len(it.keywords)
        if nargs != 1 or (it.keywords and it.keywords[0].arg != "parent"):
            self.problem("D004", it, "dt.jagged_tile takes one argument: the lengths (a block over enclosing tiles)")
        site = TileSite(it, node, "tile", depth, 1, False, [False], _targets(node.target), jagged=True)
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
            if name in ("tile", "grid", "jagged_tile") and id(n) not in iters:
                self.problem("D003", n, f"dt.{name}(...) must be the iterable of a for loop",
                             hint=f"write `for tile in dt.{name}(...):`")
            elif name == "barrier" and self.in_device(n):
                self.problem("D004", n, "dt.barrier() goes between two tile loops, in the host code",
                             hint="end the tile loop, call dt.barrier(), start the next loop")
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
        checker = DeviceChecker(self, loop)
        for s in loop.node.body:
            checker.visit(s)
        for s in loop.node.orelse:
            self.problem("D004", s, "a for/else on a tile loop is not supported")
            break

    def _infer_shapes(self, loop: DeviceLoop):
        """D006 from the symbolic tile shapes (``deuteron.shape_check``), and the values' shape/dtype notes."""
        problems, notes = infer_loop_shapes(self, loop)
        for code, node, message, hint in problems:
            self.problem(code, node, message, hint)
        self.notes.extend(notes)

    def launch_problems(self, concrete) -> list:
        """D006/D007 with the sizes and dtypes one launch of the file gives (``deuteron.frontend.LaunchShapes``):
        ``(code, node, message, hint)`` of every tile loop."""
        out = []
        for loop in self.loops:
            problems, _notes = infer_loop_shapes(self, loop, concrete)
            out.extend(problems)
        return out

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
        # tensors the kernel stores into (a split reduction's partial results): combining them on the host after
        # the tile loops (``partial.sum(0)``, Helion's layer-norm backward) is the second stage, meant as host work
        stored = {n.value.id for loop in self.loops for n in ast.walk(loop.node)
                  if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
                  and n.value.id not in loop.assigned}
        last_loop = max((loop.node.end_lineno or loop.node.lineno for loop in self.loops), default=None)
        for stmt in self._host_stmts(body):
            after = last_loop is not None and stmt.lineno > last_loop
            for expr in self._stmt_exprs(stmt):
                if after and self._combines_results(expr, tensors, stored):
                    continue
                self._host_expr(expr, tensors)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                r = self.ranks.get(stmt.targets[0].id)
                if r is not None and isinstance(stmt.value, ast.Call):
                    self.note(stmt.targets[0], "tensor", f"tensor of rank {r} (allocated on the host)")

    def _combines_results(self, expr, tensors, stored) -> bool:
        """Whether every tensor ``expr`` reads is one the kernel stored into (the host combines its results)."""
        roots, meta = set(), set()
        for n in ast.walk(expr):
            if self._is_metadata(n) and isinstance(n.value, ast.Name):
                meta.add(id(n.value))  # x.dtype, x.shape: not a read of x's values
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in tensors and id(n) not in meta:
                roots.add(n.id)
        return bool(roots) and roots <= stored

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
                if not f and not (s.registered and d < len(s.registered) and s.registered[d]):
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

    def check_ignore_warnings(self, value: ast.AST):
        """``ignore_warnings=[dt.exc.TensorOperationInWrapper, ...]``: drop those warnings (D005 for an unknown
        class)."""
        from .exc import WARNINGS
        if not isinstance(value, (ast.List, ast.Tuple)):
            return
        codes = set()
        for e in value.elts:
            name = e.attr if isinstance(e, ast.Attribute) else (e.id if isinstance(e, ast.Name) else None)
            cls = WARNINGS.get(name or "")
            if cls is None:
                self.problem("D005", e, f"ignore_warnings: {ast.unparse(e)} is not a dt.exc warning class",
                             hint=f"one of {', '.join('dt.exc.' + n for n in WARNINGS)}")
            else:
                codes.add(cls.code)
        self.problems = [p for p in self.problems if not (p.severity == "warning" and p.code in codes)]

    # -- configs written in the decorator ----------------------------------------------------
    def check_decorator(self, dec: ast.AST):
        """D005 for options and config literals of ``@dt.kernel(...)``."""
        if not isinstance(dec, ast.Call):
            return
        for k in dec.keywords:
            if k.arg is None:
                continue
            if k.arg in HELION_IGNORED_OPTIONS:
                self.note(k, "option", f"{k.arg}: a Helion autotuner / debugging setting, accepted with no effect")
                continue
            if k.arg not in KERNEL_OPTIONS:
                sugg = difflib.get_close_matches(k.arg, KERNEL_OPTIONS, n=1)
                self.problem("D005", k, f"@dt.kernel has no option {k.arg!r}",
                             hint=f"did you mean {sugg[0]!r}?" if sugg else f"options: {', '.join(KERNEL_OPTIONS)}")
                continue
            if k.arg == "ignore_warnings":
                self.check_ignore_warnings(k.value)
            elif k.arg == "autotune_effort" and isinstance(k.value, ast.Constant) and k.value.value not in EFFORTS:
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
