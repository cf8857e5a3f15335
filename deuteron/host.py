"""The host side of a ``@dt.kernel``: its source, its structure and the host function.

The host function is the user's function with every outermost tile loop
replaced by a call back into deuteron (``__dt_launch__(k, locals())``): the
code before and after the loops runs eagerly as ordinary Python, each loop
becomes one kernel launch.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types

from .errors import DeuteronError, SourceInfo
from .structure import KernelStructure, Resolver

__all__ = ["KernelSource", "RuntimeResolver"]


#: public deuteron objects defined above this module (``kernel``, ``Kernel``): their modules register them here
#: (``deuteron.kernel`` imports this module, not the other way round)
PUBLIC_OBJECTS: dict[str, object] = {}


def _public_deuteron() -> dict:
    from . import language
    from .config import Config
    out = {}
    for name in dir(language):
        obj = getattr(language, name)
        if callable(obj) and not name.startswith("_"):
            out[id(obj)] = f"deuteron.{name}"
    for name, obj in {"Config": Config, **PUBLIC_OBJECTS}.items():
        out[id(obj)] = f"deuteron.{name}"
    return out


class RuntimeResolver(Resolver):
    """Resolves names through the function's real globals and closure."""

    def __init__(self, fn):
        self.g = fn.__globals__
        self.closure = {}
        if fn.__closure__:
            for nm, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[nm] = cell.cell_contents
                except ValueError:
                    pass
        self.shadowed = set(inspect.signature(fn).parameters)
        self._dt = _public_deuteron()

    def _obj(self, node):
        if isinstance(node, ast.Name):
            if node.id in self.shadowed:
                return None, None
            if node.id in self.closure:
                obj = self.closure[node.id]
            elif node.id in self.g:
                obj = self.g[node.id]
            else:
                return None, None
            return obj, self._qual(obj)
        if isinstance(node, ast.Attribute):
            obj, q = self._obj(node.value)
            if obj is None or not isinstance(obj, types.ModuleType):
                return None, None
            child = getattr(obj, node.attr, None)
            if child is None:
                return None, f"{q}.{node.attr}" if q else None
            cq = self._qual(child)
            return child, cq or (f"{q}.{node.attr}" if q else None)
        return None, None

    def _qual(self, obj):
        if isinstance(obj, types.ModuleType):
            return obj.__name__
        q = self._dt.get(id(obj))
        if q is not None:
            return q
        return None

    def qualname(self, node):
        return self._obj(node)[1]


class KernelSource:
    """The parsed source of a kernel function and its host function."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise DeuteronError.at(None, None, "D004", f"cannot read the source of {fn.__qualname__}: {e}",
                                   hint="define @dt.kernel functions in a file (not in an interactive session)")
        self.path = inspect.getsourcefile(fn) or fn.__code__.co_filename
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        shift = 0
        if dedented != text:
            first = next((ln for ln in lines if ln.strip()), "")
            shift = len(first) - len(first.lstrip())
        full = "".join(linecache.getlines(self.path)) or text
        self.src = SourceInfo(self.path, full, col_shift=shift)
        tree = ast.parse(dedented)
        ast.increment_lineno(tree, start - 1)
        fdef = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
        if fdef is None:
            raise DeuteronError.at(self.src, None, "D004", f"{fn.__qualname__} is not a function definition")
        if isinstance(fdef, ast.AsyncFunctionDef):
            raise DeuteronError.at(self.src, fdef, "D004", "@dt.kernel functions cannot be async")
        self.fdef = fdef
        self.resolver = RuntimeResolver(fn)
        self.structure = KernelStructure(fdef, self.resolver)
        self._code = None

    def errors(self) -> list:
        return [p for p in self.structure.problems if p.severity == "error"]

    def raise_errors(self):
        errs = self.errors()
        if not errs:
            return
        from newt.diagnostics import Diagnostic, Severity
        diags = [Diagnostic(p.code, Severity.ERROR, self.src.span(p.node), p.message, hint=p.hint, file=self.path,
                            kernel=self.name) for p in errs]
        raise DeuteronError(diags, self.src.text, kernel=self.name)

    # -- the host function ----------------------------------------------------------
    def host_code(self):
        if self._code is not None:
            return self._code
        fdef = _copy(self.fdef)
        loops = {id_: k for k, id_ in enumerate(_loop_keys(self.structure))}
        fdef.decorator_list = []
        _Replacer(loops).visit(fdef)
        freevars = list(self.fn.__code__.co_freevars)
        if freevars:
            # every closure variable read by the host function, also one used only inside a tile loop (the
            # loop is gone from the host code): so each is in the host locals a launch traces and guards with
            fdef.body.insert(0, ast.Expr(value=ast.Tuple(elts=[ast.Name(id=v, ctx=ast.Load()) for v in freevars],
                                                         ctx=ast.Load())))
        extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
        factory = ast.FunctionDef(
            name="__dt_factory__",
            args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=a) for a in freevars + ["__dt_launch__",
                                                                                          "__dt_locals__"]],
                               vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
            body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
            decorator_list=[], returns=None, **extra)
        mod = ast.Module(body=[factory], type_ignores=[])
        ast.fix_missing_locations(mod)
        self._code = compile(mod, self.path, "exec")
        return self._code

    def host_function(self, launch):
        code = self.host_code()
        ns: dict = {}
        exec(code, self.fn.__globals__, ns)  # defines the factory only
        cells = []
        if self.fn.__closure__:
            for cell in self.fn.__closure__:
                try:
                    cells.append(cell.cell_contents)
                except ValueError:
                    cells.append(None)
        f = ns["__dt_factory__"](*cells, launch, locals)
        f.__defaults__ = self.fn.__defaults__
        f.__kwdefaults__ = self.fn.__kwdefaults__
        return f


def _loop_keys(st: KernelStructure):
    return [(ln.node.lineno, ln.node.col_offset) for ln in st.loops]


def _copy(node):
    import copy
    return copy.deepcopy(node)


class _Replacer(ast.NodeTransformer):
    def __init__(self, loops: dict):
        self.loops = loops

    def visit_For(self, node):
        k = self.loops.get((node.lineno, node.col_offset))
        if k is not None:
            call = ast.Expr(value=ast.Call(func=ast.Name(id="__dt_launch__", ctx=ast.Load()),
                                           args=[ast.Constant(value=k),
                                                 ast.Call(func=ast.Name(id="__dt_locals__", ctx=ast.Load()), args=[],
                                                          keywords=[])],
                                           keywords=[]))
            return ast.copy_location(call, node)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        return node
