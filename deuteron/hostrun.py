"""Running a kernel's host code once: tracing its tile loops (discovery, source generation) and launching the
generated kernels with the arguments each needs.  ``deuteron.kernel`` (the kernel object) and the autotuner
both use it; it imports neither.

Importing this module does not import torch.
"""

from __future__ import annotations

import sys

from newt.diagnostics import CompilationError, LocatedError

from . import language as L
from . import runtime as _rt
from .config import Config
from .errors import DeuteronError


def _np2(n):
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()

def _fetch(source, host_locals, g):
    kind = source[0]
    if kind == "local":
        name = source[1]
        if name in host_locals:
            return host_locals[name]
        return g.get(name, _MISSING)
    if kind == "item":
        base = host_locals.get(source[1], g.get(source[1], _MISSING))
        try:
            return base[source[2]]
        except Exception:
            return _MISSING
    if kind in ("cell", "fnglobal"):  # a value captured by a function (a callable argument, a global helper)
        fn = _fetch(source[1], host_locals, g) if isinstance(source[1], tuple) else \
            host_locals.get(source[1], g.get(source[1], _MISSING))
        code = getattr(fn, "__code__", None)
        if code is None:
            return _MISSING
        if kind == "fnglobal":
            return fn.__globals__.get(source[2], _MISSING)
        try:
            return fn.__closure__[code.co_freevars.index(source[2])].cell_contents
        except (ValueError, TypeError, IndexError):
            return _MISSING
    if kind == "attr":  # an attribute of a module (``cfg.SCALE``), the module found by its own source
        return getattr(_fetch(source[1], host_locals, g), source[2], _MISSING)
    return _MISSING


#: the kinds of guard keys that name a host value by where it is fetched from (the others: a tensor's size or stride)
VALUE_SOURCES = ("local", "cell", "fnglobal", "attr")

_MISSING = object()
_LAUNCH = _rt.launch  # what Entry.launcher's launch functions do (runtime.launch replaced: calls go to it)


_TRACE_HELPERS: list = []  # [torch.Tensor, trace._guard_value], filled on first use (no imports per call)


def _guards_hold(prog, host_locals, g, static, arguments=None) -> bool:
    """Whether the traced ``prog`` fits this launch (the tensors' dtypes, devices, shapes and strides, and the
    host values it was specialized on).  With static shapes, a tensor that is still the argument of its name
    is not checked again: the entry (``Kernel._key``) already matched it exactly."""
    if not _TRACE_HELPERS:
        import torch

        from .trace_common import _guard_value
        _TRACE_HELPERS[:] = [torch.Tensor, _guard_value]
    tensor, _guard_value = _TRACE_HELPERS
    for ta in prog.tensors.values():
        src = ta.sources[0]
        t = _fetch(src, host_locals, g)
        if not (static and arguments and src[0] == "local" and t is not _MISSING and
                arguments.get(src[1], _MISSING) is t):
            if not isinstance(t, tensor) or t.dtype != ta.dtype:
                return False
            if t.is_cuda != ta.tensor.is_cuda or (not t.is_cuda and t.device.type != ta.tensor.device.type):
                return False
            if static:
                if t.shape != ta.shape or t.stride() != ta.strides:
                    return False
            elif t.dim() != len(ta.shape) or any(_np2(a) != _np2(b) for a, b in zip(t.shape, ta.shape)) or \
                    any((a == 1) != (b == 1) for a, b in zip(t.stride(), ta.strides)):
                return False
        for s in ta.sources[1:]:
            if _fetch(s, host_locals, g) is not t:
                return False
    for key, gv in prog.guards:
        if key[0] in VALUE_SOURCES:
            v = _fetch(key, host_locals, g)
            if v is _MISSING or _guard_value(v) != gv:
                return False
        else:
            what, tname, d = key
            ta = prog.tensors.get(tname)
            t = _fetch(ta.sources[0], host_locals, g) if ta else _MISSING
            if not isinstance(t, tensor):
                return False
            val = t.shape[d] if what == "size" else t.stride(d)
            if _guard_value(int(val)) != gv:
                return False
    return True


def guard_checker(prog, static: bool):
    """``_guards_hold`` for ``prog`` as generated straight-line code: ``check(host_locals, g, arguments) ->
    bool``, the same answer for every input (tests/deuteron/test_dt_fastpath.py compares the two); made once per
    traced program, it is what a call's program lookup runs."""
    if not _TRACE_HELPERS:
        _guards_hold(prog, {}, {}, static)  # fills _TRACE_HELPERS (the answer does not matter)
    tensor, guard_value = _TRACE_HELPERS
    from .trace_common import SpecializedInt
    ns: dict = {"_T": tensor, "_M": _MISSING, "_F": _fetch, "_GV": guard_value, "_np2": _np2,
                "_QUICK": {"int": (int, SpecializedInt), "float": (float,), "bool": (bool,), "str": (str,)}}
    consts: list = []

    def const(v):
        consts.append(v)
        ns[f"_c{len(consts) - 1}"] = v
        return f"_c{len(consts) - 1}"

    def fetch(src) -> str:
        if src[0] == "local" and src[1].isidentifier():
            return f"(L[{src[1]!r}] if {src[1]!r} in L else g.get({src[1]!r}, _M))"
        return f"_F({const(src)}, L, g)"

    def quick(gv) -> str:
        """A test that implies ``_GV(v) == gv`` for the common host values (ints, floats, bools, strings)."""
        if isinstance(gv, tuple) and len(gv) == 2 and gv[0] in ("int", "float", "bool", "str") and \
                type(gv[1]).__name__ == gv[0]:
            types = " or ".join(f"type(v) is {const(t)}" for t in ns["_QUICK"][gv[0]])
            return f"({types}) and v == {const(gv[1])} or "
        return ""

    lines = ["def check(L, g, A):"]
    for ta in prog.tensors.values():
        src = ta.sources[0]
        lines.append(f"    t = {fetch(src)}")
        conds = ["isinstance(t, _T)", f"t.dtype == {const(ta.dtype)}"]
        cuda = bool(ta.tensor.is_cuda)
        dev = ta.tensor.device.type
        conds.append("t.is_cuda" if cuda else "t.is_cpu" if dev == "cpu" else
                     f"(not t.is_cuda and t.device.type == {const(dev)})")
        if static:
            conds += [f"t.shape == {const(ta.shape)}", f"t.stride() == {const(ta.strides)}"]
        else:
            conds += [f"t.dim() == {len(ta.shape)}",
                      f"tuple(map(_np2, t.shape)) == {const(tuple(_np2(a) for a in ta.shape))}",
                      f"tuple(s == 1 for s in t.stride()) == {const(tuple(s == 1 for s in ta.strides))}"]
        check = f"if not ({' and '.join(conds)}): return False"
        if static and src[0] == "local":
            lines.append(f"    a = A.get({const(src[1])}, _M) if A else _M")
            lines.append("    if a is _M or a is not t:")
            lines.append(f"        {check}")
        else:
            lines.append(f"    {check}")
        for extra in ta.sources[1:]:
            lines.append(f"    if {fetch(extra)} is not t: return False")
    for key, gv in prog.guards:
        if key[0] in VALUE_SOURCES:
            lines.append(f"    v = {fetch(key)}")
            lines.append(f"    if v is _M or not ({quick(gv)}_GV(v) == {const(gv)}): return False")
        else:
            what, tname, d = key
            ta = prog.tensors.get(tname)
            if ta is None:
                lines.append("    return False")
                continue
            lines.append(f"    t = {fetch(ta.sources[0])}")
            lines.append("    if not isinstance(t, _T): return False")
            val = f"t.shape[{int(d)}]" if what == "size" else f"t.stride({int(d)})"
            lines.append(f"    if _GV(int({val})) != {const(gv)}: return False")
    lines.append("    return True")
    exec(compile("\n".join(lines) + "\n", f"<deuteron guards of {prog.name}>", "exec"), ns)
    return ns["check"]


def args_getter(gen, prog, launch=None):
    """``_runtime_args`` for one generated kernel as generated code: ``get(host_locals, g) -> list``; with
    ``launch=(launch function, keyword arguments)``: ``go(host_locals, g)``, the launch with those arguments."""
    ns: dict = {"_M": _MISSING, "_F": _fetch}
    n = 0

    def fetch(src) -> str:
        nonlocal n
        if src[0] == "local" and src[1].isidentifier():
            return f"(L[{src[1]!r}] if {src[1]!r} in L else g.get({src[1]!r}, _M))"
        ns[f"_c{n}"] = src
        n += 1
        return f"_F(_c{n - 1}, L, g)"

    items = []
    for _name, kind, payload in gen.runtime_params:
        if kind == "tensor":
            items.append(fetch(payload.sources[0]))
        elif kind == "scalar":
            items.append(fetch(_scalar_source(payload)))
        else:
            tname, what, d = payload
            t = fetch(prog.tensors[tname].sources[0])
            items.append(f"int({t}.shape[{int(d)}])" if what == "size" else f"int({t}.stride({int(d)}))")
    src = f"def get(L, g):\n    return [{', '.join(items)}]\n"
    if launch is not None:  # the launch itself, its keyword arguments as constants of the call
        fn, kw = launch
        ns["_fn"] = fn
        kws = []
        for i, (name, v) in enumerate(kw.items()):
            if not name.isidentifier():
                raise ValueError(f"generated launch argument {name!r} is not an identifier")
            ns[f"_k{i}"] = v
            kws.append(f"{name}=_k{i}")
        src = f"def go(L, g):\n    _fn({', '.join(items + kws)})\n"
    exec(compile(src, f"<deuteron arguments of {gen.kernel_name}>", "exec"), ns)
    return ns["go" if launch is not None else "get"]


_SPECIALIZED: list = []


def _specialized_int():
    if not _SPECIALIZED:
        from .trace_common import SpecializedInt
        _SPECIALIZED.append(SpecializedInt)
    return _SPECIALIZED[0]


class _HostRun:
    """The context of one execution of a kernel's host code."""

    def __init__(self, entry, config: Config | None, mode: str, prefill=False, collect=None):
        self.entry = entry
        self.kernel = entry.kernel
        self.config = config
        self.mode = mode  # "discover" | "run" | "source"
        self.device = entry.device
        self.fn_globals = self.kernel.fn.__globals__
        self.prefill = prefill
        self.collect = collect
        self.sources: list = []
        # discovery records
        self.slot_keys: dict = {}  # provisional id -> key
        self.slot_ids: dict = {}  # key -> provisional id
        self.reg_pos: list = []
        self.reg_bounds: list = []
        self.programs: dict = {}
        self.tunables: dict = {}
        self._reg_calls = 0
        self.built: list = []
        self.arguments: dict = {}  # the call's arguments by name

    def execute(self, bound):
        self.arguments = bound.arguments
        host = self.kernel._host_fn()
        token = L._CONTEXT.set(self)
        try:
            if self.prefill:
                from .oracle import nan_allocations
                with nan_allocations():
                    return host(*bound.args, **bound.kwargs)
            return host(*bound.args, **bound.kwargs)
        finally:
            L._CONTEXT.reset(token)

    # -- dt.* calls from the host code -------------------------------------------------------
    def _call_site(self):
        code = self.kernel._host_fn().__code__
        f = sys._getframe(2)
        while f is not None:
            if f.f_code is code or (f.f_code.co_name == self.kernel.fn.__name__ and
                                    f.f_code.co_filename == code.co_filename):
                return (f.f_lineno, 0)
            f = f.f_back
        return (10 ** 9, self._reg_calls)

    def register_block_size(self, lo, hi):
        from .trace import BlockSizeInt
        i = self._reg_calls
        self._reg_calls += 1
        if self.mode == "discover":
            key = ("reg", i)
            pid = self._prov(key)
            self.reg_pos.append(self._call_site() + (i,))
            self.reg_bounds.append((lo, hi))
            v = min(max(L.next_power_of_2(lo), 64), L.next_power_of_2(hi))
            return BlockSizeInt(v, pid)
        if i >= len(self.entry.reg_slots):
            raise L.DeuteronUsageError("dt.register_block_size was called more times than when the kernel was "
                                       "first compiled for these argument shapes")
        slot = self.entry.reg_slots[i]
        return BlockSizeInt(self.config.block_sizes[slot], slot)

    def register_tunable(self, name, fragment):
        if self.mode == "discover":
            prev = self.tunables.get(name)
            if prev is not None and prev.choices() != fragment.choices():
                raise L.DeuteronUsageError(f"dt.register_tunable({name!r}) registered twice with different choices")
            self.tunables[name] = fragment
            return fragment.default
        return self.config.tunables.get(name, fragment.default)

    def specialize(self, value):
        if type(value) is int:  # the common case first (a size)
            return _specialized_int()(value)
        SpecializedInt = _specialized_int()
        if isinstance(value, (tuple, list)) or type(value).__name__ == "Size":
            return tuple(SpecializedInt(int(v)) for v in value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise L.DeuteronUsageError(f"dt.specialize takes an int (a size), not {type(value).__name__}")
        return SpecializedInt(int(value))

    def ref_tiles(self, ranges, bss, as_list):
        raise L.DeuteronUsageError("dt.tile(...) must be the iterable of a for loop in the kernel's own body")

    def _prov(self, key):
        pid = self.slot_ids.get(key)
        if pid is None:
            pid = len(self.slot_keys)
            self.slot_keys[pid] = key
            self.slot_ids[key] = pid
        return pid

    # -- tile loops ---------------------------------------------------------------------------
    def slot_of(self, site, d, bs):
        from .trace import BlockSizeInt
        if self.mode == "discover":
            if bs is None:
                return self._prov(("tile", site.index, d))
            if isinstance(bs, BlockSizeInt):
                return bs.slot
            return None
        if bs is None:
            key = ("tile", site.index, d)
            if key not in self.entry.slot_map:
                raise L.DeuteronUsageError("a tile loop appeared that was not seen when the kernel was first "
                                           "compiled for these argument shapes")
            return self.entry.slot_map[key]
        if isinstance(bs, BlockSizeInt):
            return bs.slot
        return None

    def trace(self, k, host_locals):
        from .errors import TraceError
        from .trace import Tracer
        kern = self.kernel
        src = kern.source
        loop = src.structure.loops[k]
        scalar_params = _scalar_params(kern)
        tracer = Tracer(kern, loop, host_locals, kern.fn.__globals__, src.src, static_shapes=kern.static_shapes,
                        scalar_params=scalar_params, slot_of=self.slot_of,
                        rdim_slots=None if self.mode == "discover" else self.entry.rdim_slots.get(k, {}),
                        discovery=self.mode == "discover", name=kern.__name__)
        tracer.constexpr_params = constexpr_params(kern)
        if self.mode != "discover":
            tracer.prog.multi_grid_ordinal = self.entry.multi_ordinal.get(k)
        try:
            prog = tracer.run()
        except TraceError as e:
            raise located(kern, e) from None
        return prog

    def launch(self, k, host_locals):
        if self.mode == "discover":
            if k not in self.programs:
                self.programs[k] = self.trace(k, host_locals)
            return None
        prog = self.entry.program(k, host_locals, self)
        if self.mode == "run" and self.collect is None:
            hit = self.entry.launchers.get((id(prog), self.config.key()))
            if hit is not None and hit[3] is prog and _rt.launch is _LAUNCH:
                # the common case: launched before with this config (and deuteron.runtime.launch, the hook
                # every launch goes through, not replaced): the launch function straight away
                try:
                    hit[4](host_locals, self.fn_globals)
                except (CompilationError, LocatedError) as ex:
                    _at_user_line(ex, self.kernel)
                    raise
                return None
        gen, mod, _ = self.entry.compiled(prog, self.config)
        if self.mode == "source":
            self.sources.append(f"# config: {self.config}\n" + gen.source.rstrip() + "\n\n# launched as: "
                                + _launch_line(gen, prog, host_locals))
            self.built.append((gen, mod, prog, dict(host_locals)))
            return None
        if self.collect is not None:
            self.collect.append((gen, mod, prog))
        fn, get_args, kw, _, _ = self.entry.launcher(gen, mod, prog, self.config)
        try:
            if _rt.launch is _LAUNCH:
                fn(*get_args(host_locals, self.fn_globals), **kw)
            else:
                _rt.launch(gen, mod, get_args(host_locals, self.fn_globals), gen.constexprs, self.device,
                           kw.get("_NUM_SMS"))
        except (CompilationError, LocatedError) as ex:
            _at_user_line(ex, self.kernel)
            raise
        return None


class _CallRun(_HostRun):
    """A plain call's run of the host code (``Kernel.__call__``: mode "run", no oracle prefill, no
    collection): only what a run needs is set up, and a launch whose program's guards hold and that was
    launched before with this config goes straight to the entry's cached launcher.  Anything else (a new
    program, a new config, ``runtime.launch`` replaced) is ``_HostRun.launch``."""

    def __init__(self, entry, config: Config):  # (no super().__init__: the discovery records)
        self.entry = entry
        self.kernel = entry.kernel
        self.config = config
        self.mode = "run"
        self.device = entry.device
        self.fn_globals = self.kernel.fn.__globals__
        self.prefill = False
        self.collect = None
        self._reg_calls = 0
        self.arguments = {}

    def call(self, args, kwargs, arguments):
        self.arguments = arguments
        host = self.kernel._host or self.kernel._host_fn()
        token = L._CONTEXT.set(self)
        try:
            return host(*args, **kwargs)
        finally:
            L._CONTEXT.reset(token)

    def launch(self, k, host_locals):
        entry = self.entry
        progs = entry.programs.get(k)
        if progs and _rt.launch is _LAUNCH:
            g = self.fn_globals
            for p, check in progs:
                if check(host_locals, g, self.arguments):
                    hit = entry.launchers.get((id(p), self.config.key()))
                    if hit is not None and hit[3] is p:
                        try:
                            hit[4](host_locals, g)
                        except (CompilationError, LocatedError) as ex:
                            _at_user_line(ex, self.kernel)
                            raise
                        return None
                    break
        return _HostRun.launch(self, k, host_locals)


def located(kern, e) -> DeuteronError:
    """A tracer's ``TraceError`` (a cause of ``deuteron.errors``) as the DeuteronError at the user's line."""
    return DeuteronError.at(kern.source.src, e.node, e.code, e.message, hint=e.hint, kernel=kern.__name__,
                            data={"cause": type(e).__name__, **e.data})


def _scalar_params(kern) -> set:
    """Int parameters of the kernel that stay run-time scalars (never reassigned, not dt.specialize'd)."""
    st = kern.structure
    reassigned = set()
    import ast
    for n in ast.walk(st.fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and not st.in_device(n):
            reassigned.add(n.id)
    return {p for p in st.params if p not in reassigned and p not in constexpr_params(kern)}


def constexpr_params(kern) -> set:
    """Parameters annotated ``dt.constexpr``: compile-time constants of the kernel (one program per value)."""
    st = kern.structure
    return {p for p, ann in st.param_annotations.items() if ann is not None and st.dt(ann) == "constexpr"}


def _runtime_args(gen, prog, host_locals, g) -> list:
    out = []
    for _name, kind, payload in gen.runtime_params:
        if kind == "tensor":
            t = _fetch(payload.sources[0], host_locals, g)
            out.append(t)
        elif kind == "scalar":
            v = _fetch(_scalar_source(payload), host_locals, g)
            out.append(v)
        else:
            tname, what, d = payload
            t = _fetch(prog.tensors[tname].sources[0], host_locals, g)
            out.append(int(t.shape[d] if what == "size" else t.stride(d)))
    return out


def _at_user_line(ex, kern):
    """Raise ``ex`` (from a generated kernel: newt's compile, the interpreter) at the user's line, where it
    comes from a generated file; return (the caller re-raises ``ex``) otherwise."""
    from .errors import relocate
    out = relocate(ex, kern.__name__)
    if out is None or out is ex:
        return
    raise out from ex


def _scalar_source(sa) -> tuple:
    """Where a scalar argument's value is fetched from at each launch: a host variable's name, or the source
    of a global / captured value (``("fnglobal", ...)``, ``("attr", ...)``)."""
    return sa.source if isinstance(sa.source, tuple) else ("local", sa.source)


def _launch_line(gen, prog, host_locals) -> str:
    args = [name for name, _, _ in gen.runtime_params]
    kw = [f"{k}={v}" for k, v in gen.constexprs.items()] + [f"num_warps={gen.num_warps}",
                                                             f"num_stages={gen.num_stages}"]
    if gen.needs_num_sms:
        kw.append("_NUM_SMS=<number of SMs>")
    return f"{gen.launch_name}({', '.join(args + kw)})"
