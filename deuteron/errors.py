"""deuteron's errors: every one points at the user's file, line and column.

They are ``newt.CompilationError`` values (``except newt.CompilationError``
catches them), built from the same ``Diagnostic`` values the editor shows.
"""

from __future__ import annotations

import ast
import os
import re

from newt.diagnostics import CompilationError, Diagnostic, LocatedError, Severity, Span

__all__ = ["DeuteronError", "GeneratedKernelError", "SourceInfo", "TraceError", "Cause"]


class SourceInfo:
    """Where a kernel's source lives: file, full text, and the offsets of the parsed snippet."""

    def __init__(self, path: str, text: str, col_shift: int = 0):
        self.path = path
        self.text = text
        self.lines = text.splitlines()
        self.col_shift = col_shift

    def span(self, node) -> Span:
        return Span.from_ast(node, self.lines, self.col_shift)

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""


class DeuteronError(CompilationError):
    """A deuteron kernel cannot be compiled (or a config does not fit it)."""

    @classmethod
    def at(cls, src: SourceInfo | None, node, code: str, message: str, hint: str | None = None,
           kernel: str | None = None, extra: str | None = None, data: dict | None = None) -> "DeuteronError":
        span = src.span(node) if (src is not None and node is not None) else Span(1, 1, 1, 2)
        d = Diagnostic(code, Severity.ERROR, span, message, hint=hint, file=src.path if src else "<unknown>",
                       kernel=kernel, data=dict(data or {}))
        return cls([d], src.text if src else None, kernel=kernel, extra=extra)


class GeneratedKernelError(DeuteronError):
    """D008: newt rejected a generated kernel (a ``CompilationError`` or another located error in the generated
    file): reported at the user's line the failing generated line comes from (its ``# line N:`` comment), with
    newt's code and message; where in the generated file it happened is in ``extra`` and ``data["generated"]``."""

    code = "D008"


#: generated file (its real path) -> the ``Generated`` of its source (``origins``, ``src``, ``loop_src``)
_GENERATED: dict = {}
_LINE_COMMENT = re.compile(r"^\s*# line (\d+):")


def register_generated(path: str, gen) -> None:
    """Remember where generated file ``path`` comes from, for :func:`relocate`."""
    _GENERATED[os.path.realpath(path)] = gen
    if len(_GENERATED) > 1024:
        _GENERATED.pop(next(iter(_GENERATED)))


def _user_node(gen, line: int):
    """The user's AST node of generated line ``line``: the nearest ``# line N:`` comment above it (the launch
    function and lines above every comment: the tile loop)."""
    lines = gen.source.splitlines()
    launch = next((i + 1 for i, t in enumerate(lines) if t.startswith(f"def {gen.launch_name}(")), len(lines) + 1)
    if line < launch:
        for i in range(min(line, len(lines)), 0, -1):
            m = _LINE_COMMENT.match(lines[i - 1])
            if m:
                node = gen.origins.get(int(m.group(1)))
                if node is not None:
                    return node
    return gen.loop_src


def _gen_excerpt(path: str, line: int, col: int, end_col: int | None = None) -> str:
    import linecache

    from newt.diagnostics import caret_excerpt
    text = linecache.getline(path, line)
    return caret_excerpt(text, col, end_col, line=line) if text else ""


def relocate(exc: BaseException, kernel: str | None = None):
    """``exc`` raised from a generated kernel, reported at the user's line: a newt ``CompilationError`` (or
    another located error of the compiler) becomes a ``GeneratedKernelError`` (D008); an interpreter error
    (out of bounds, ``DeadlockError``, a failed device assert...) keeps its class and gets the user's location,
    line and caret, the generated location below them.  None when ``exc`` does not come from a generated file.
    """
    from newt.diagnostics import Loc
    if getattr(exc, "_dt_relocated", False):
        return None
    if isinstance(exc, CompilationError) and not isinstance(exc, DeuteronError):
        d = next((d for d in exc.diagnostics if d.severity == Severity.ERROR), None) or \
            (exc.diagnostics[0] if exc.diagnostics else None)
        if d is None or d.file is None:
            return None
        where = (d.file, d.span.line, d.span.col, d.span.end_col if d.span.end_line == d.span.line else None)
        code, message, hint = d.code, d.message, d.hint
    elif isinstance(exc, LocatedError) and isinstance(exc.location, Loc) and not isinstance(exc, TraceError):
        loc = exc.location
        where = (loc.file, loc.line, loc.col, loc.end_col if loc.end_line == loc.line else None)
        code, message, hint = exc.code, getattr(exc, "detail", exc.message), exc.hint
    else:
        return None
    gen = _GENERATED.get(os.path.realpath(where[0]))
    if gen is None or gen.src is None:
        return None
    node = _user_node(gen, where[1])
    src = gen.src
    span = src.span(node) if node is not None else Span(1, 1, 1, 2)
    gen_where = f"{where[0]}:{where[1]}:{where[2]}"
    excerpt = _gen_excerpt(*where)
    secondary = f"in the generated code ({gen.kernel_name}): {gen_where}: [{code}] {message}" + \
        (f"\n{excerpt}" if excerpt else "")
    if isinstance(exc, LocatedError) and hasattr(exc, "detail") and hasattr(exc, "what"):  # an interpreter error
        from newt.diagnostics import caret_excerpt
        user_loc = Loc(src.path, span.line, span.col, span.end_line, span.end_col)
        head = f"{user_loc}: {exc.what} in kernel '{kernel or gen.kernel_name}'"
        pid = getattr(exc, "pid", None)
        if pid is not None:
            head += f", program id {tuple(pid)}"
        end = span.end_col if span.end_line == span.line else None
        msg = f"{head}: {exc.detail}\n" + caret_excerpt(src.line_text(span.line), span.col, end, line=span.line)
        msg += "\n  " + secondary.replace(f": [{code}] {message}", "", 1)
        if hint:
            msg += f"\nhint: {hint}"
        exc.data["generated"] = gen_where
        exc.data["generated_kernel"] = gen.kernel_name
        exc.location = user_loc
        if hasattr(exc, "loc"):
            exc.loc = user_loc
        exc.message = msg
        exc.args = (msg,)
        exc._dt_relocated = True
        return exc
    diag = Diagnostic("D008", Severity.ERROR, span, f"newt rejected the generated kernel: [{code}] {message}",
                      hint=hint, file=src.path, kernel=kernel,
                      data={"cause": "GeneratedKernelError", "newt_code": code, "generated": gen_where})
    out = GeneratedKernelError([diag], src.text, kernel=kernel, extra=secondary)
    out._dt_relocated = True
    return out


class TraceError(LocatedError):
    """Raised inside the tracer; turned into a ``DeuteronError`` with the kernel's source (the AST ``node`` is
    where in the user's code it happened)."""

    def __init__(self, code: str, node: ast.AST | None, message: str, hint: str | None = None, data=None):
        super().__init__(code, message, hint=hint, data=data)
        self.node = node


class Cause(TraceError):
    """One cause of a deuteron error: a subclass per cause with its ``code`` and a message (and hint) template
    over named fields, which also travel as ``data``: ``raise PerTileDecision(node, what="an `if`")``."""

    code = "D004"
    template = ""
    hint_template: str | None = None

    def __init__(self, node: ast.AST | None, hint: str | None = None, **fields):
        message, default_hint = self.render_template(fields)
        super().__init__(self.code, node, message, hint=default_hint if hint is None else hint, data=fields)


class PerTileDecision(Cause):
    code = "D004"
    template = ("{what} of a value computed from whole tiles: the kernel would decide once per tile, PyTorch once "
                "for the whole tensor")
    hint_template = ("Python control flow on tensor values is not supported inside a tile loop; "
                     "use torch.where(cond, a, b)")


class BlockDecision(Cause):
    code = "D004"
    template = "{what} of a block (a tensor with tile dimensions {dims})"
    hint_template = "use torch.where(cond, a, b) for elementwise choices"


class TileBoundDecision(Cause):
    code = "D004"
    template = ("{what} on where the tile {tile} starts or ends: its block size is tunable, so the kernel would "
                "decide per tile of the config's size while kernel.ref runs the loop as one tile")
    hint_template = ("give the loop a fixed size (dt.tile(n, block_size=64): kernel.ref then uses the same tiles), "
                     "or decide per element with torch.where on {tile}.index")


class TileScan(Cause):
    code = "D004"
    template = ("{op} along the tile {tile}, whose block size is tunable: the kernel's scan restarts at every tile "
                "of the config's size, kernel.ref scans the whole loop as one tile")
    hint_template = "scan a whole dimension (x[t, :]) or give the loop a fixed block_size="


class TilePastEnd(Cause):
    code = "D006"
    template = "{tensor} has size {size} in dimension {dim} but the tile {tile} runs to {end}"
    hint_template = ("the tile loop and {tensor}.shape[{dim}] must agree (torch would slice {tensor} shorter and "
                     "fail to broadcast)")


class MatmulDtypes(Cause):
    code = "D007"
    template = "matmul of {a} and {b} blocks: torch.matmul needs both operands of one dtype"
    hint_template = ("convert one side first (.to({b}) or .to({a})), or use dt.dot, which accumulates mixed inputs "
                     "in fp32")


class BadArguments(Cause):
    code = "D004"
    template = "{op}: {problem}"
    hint_template = "{op}{signature}"


class UnknownOption(Cause):
    code = "D004"
    template = "{op}: unknown {option} {value!r}"
    hint_template = "one of {choices}"


class SliceBound(Cause):
    code = "D004"
    template = "{tensor}[..., a:b]: the slice's {what} must be an int known when compiling, not {value}"
    hint_template = ("bounds are ints or sizes of the host code (static shapes), the step 1; for a range that "
                     "moves, tile it: `for t in dt.tile(begin, end)` then {tensor}[t]")


class MovingSlice(Cause):
    code = "D004"
    template = "{tensor}[..., s:s + C]: {problem}"
    hint_template = ("a slice whose start is a scalar of the kernel (`tile.begin * 2`) needs a stop of the same "
                     "scalar plus an int known when compiling: x[t, s : s + 2 * block]")


class RandomShape(Cause):
    code = "D004"
    template = "{op}: {problem}"
    hint_template = ("the shape holds tiles of loops with ends known when compiling, ints and block sizes; the "
                     "seed is an int or an int argument")


class NotInTileLoop(Cause):
    code = "D004"
    template = "{op} cannot be used inside a tile loop{why}"
    hint_template = None  # the hint= of each raise


class TileNotIterated(Cause):
    code = "D003"
    template = "dt.{op}(...) must be the iterable of a for loop"
    hint_template = "write `for tile in dt.{op}(...):`"


class CombineFunction(Cause):
    code = "D004"
    template = "{op}: {problem}"
    hint_template = ("combine_fn(a0, .., b0, ..) takes two sets of elements and returns one (a value, or a tuple "
                     "with one value per input)")


class SizeOneMatmul(Cause):
    code = "D004"
    template = ("a matmul over a whole dimension of size 1 that is also broadcast against a larger one in this "
                "kernel")
    hint_template = "index the size-1 dimension with 0 (x[t, 0]) where it is broadcast"


class ReshapeDims(Cause):
    code = "D004"
    template = "reshape from {src} to {dst}: {why}"
    hint_template = ("inside a tile loop a reshape adds or removes size-1 dimensions, or splits and merges whole "
                     "dimensions of power-of-two sizes between tiles that stay in place")


class SplitJoin(Cause):
    code = "D004"
    template = "{op}: {problem}"
    hint_template = "dt.split(x) takes a block whose last dimension has 2 elements; dt.join(a, b) adds one"


class Subscript(Cause):
    code = "D004"
    template = "dt.subscript: {problem}"
    hint_template = "dt.subscript(v, [slice(None), None]) is v[:, None] for a block v computed in the tile loop"


class Einsum(Cause):
    code = "D004"
    template = "torch.einsum: {problem}"
    hint_template = ("inside a tile loop: one or two blocks, letters only (no ellipsis, no repeated letter), each "
                     "letter one dimension")


class JaggedTile(Cause):
    code = "D004"
    template = "dt.jagged_tile: {problem}"
    hint_template = ("`for tile_k in dt.jagged_tile(lengths)` takes an int block whose every dimension is an "
                     "enclosing tile (lengths = ends - starts over tile_b); index with tile_k together with those "
                     "tiles (x[tile_b, tile_k], or a gather index built from both)")


class UnsupportedConstruct(Cause):
    code = "D004"
    template = "dt.{name} is not supported by deuteron: {why}"
    hint_template = "see docs/deuteron.md for what tile loops support"


class UnsupportedStatement(Cause):
    code = "D004"
    template = "{what} is not supported inside a tile loop"
    hint_template = ("tile loops hold assignments, if, for over dt.tile / dt.grid / range / lists, expressions and "
                     "asserts")


class NotCompileTime(Cause):
    code = "D004"
    template = "{what} must be known when the kernel is compiled, got {got}"
    hint_template = "use an int of the host code (a size, a literal, a dt.constexpr or dt.specialize'd argument)"


class TileAsNumber(Cause):
    code = "D003"
    template = "a tile used as {what}"
    hint_template = "use tile.begin / tile.end / tile.block_size, or index with it"


class TileLoopArguments(Cause):
    code = "D004"
    template = "dt.{op}: {problem}"
    hint_template = "dt.{op}(n), dt.{op}(begin, end), dt.{op}([m, n]) with ints or scalars of the host code"


class BlockSizeValue(Cause):
    code = "D005"
    template = "{problem}"
    hint_template = "block sizes are powers of two, one per tile dimension"


class TileAttribute(Cause):
    code = "D003"
    template = "a tile has no attribute {attr!r}"
    hint_template = "tiles have {attrs}"


class ForeignTile(Cause):
    code = "D003"
    template = "{name!r} is a tile of kernel.ref, not of this kernel"
    hint_template = "tiles exist only inside the loop that makes them"


class TensorDevice(Cause):
    code = "D004"
    template = "tensor {name!r} is on {device}; deuteron runs on CUDA (or the CPU interpreter)"
    hint_template = "move it with .cuda() (or .cpu() for the interpreter) before the call"


class NotAValue(Cause):
    code = "D004"
    template = "expected a value inside the kernel, got {got}"
    hint_template = "tile loops compute with tensor values, numbers and tiles' attributes"


class Unpack(Cause):
    code = "D004"
    template = "cannot unpack {what}"
    hint_template = "unpack tuples and lists of the host code, or index a block (x[0], x[1])"


class ItemAssignment(Cause):
    code = "D004"
    template = "item assignment to a value computed in the kernel"
    hint_template = "assign a new value instead (torch.where for a masked update)"


class CompileTimeAssert(Cause):
    code = "D004"
    template = "assertion failed while compiling the kernel: {msg}"
    hint_template = "the assert is on host values, so it fails for every call with these arguments"


class RaiseInTileLoop(Cause):
    code = "D004"
    template = "raise inside a tile loop (reached while compiling the kernel)"
    hint_template = "check arguments in the host code, before the tile loop"


class ConditionOn(Cause):
    code = "D004"
    template = "an `if` on {what}"
    hint_template = "branch on host values or device scalars; torch.where for elementwise choices"


class LoopOver(Cause):
    code = "D004"
    template = "a for loop over {what} inside a tile loop"
    hint_template = "loop with dt.tile(...), dt.grid(...) or range(...)"


class RangeLoop(Cause):
    code = "D004"
    template = "range(): {problem}"
    hint_template = "range(end), range(begin, end) or range(begin, end, step) of int scalars; the step known when " \
                    "compiling"


class LoopCarried(Cause):
    code = "D004"
    template = "{name!r} {problem}"
    hint_template = "a variable carried around a loop keeps one kind of value: a block of one shape and dtype"


class LoopShape(Cause):
    code = "D006"
    template = "{name!r} changes shape inside the loop: {before} before, {after} after one iteration"
    hint_template = "initialize it with its final shape (dt.zeros([tile_m, tile_n]))"


class BranchShapes(Cause):
    code = "D006"
    template = "{name!r} has shape {then} on one branch and {other} on the other"
    hint_template = "give it the same shape on both branches"


class Broadcast(Cause):
    code = "D006"
    template = "shapes {shapes} do not broadcast together"
    hint_template = "index both sides with the same tiles in the same order (transpose with .T / permute)"


class StoreShape(Cause):
    code = "D006"
    template = "storing a value of shape {value} into {target}"
    hint_template = "the dimensions must match (transpose with .T / permute if needed)"


class IndexRank(Cause):
    code = "D002"
    template = "{what} has rank {rank}{shape} but is indexed with {count} ind{plural}{items}"
    hint_template = "index every dimension (`:` for a whole one)"


class WholeTensor(Cause):
    code = "D004"
    template = "{name} used whole inside a tile loop{what}"
    hint_template = "index it with tiles: {name}[tile, ...]"


class OperandDtype(Cause):
    code = "D004"
    template = "{op} on {dtype} values{why}"
    hint_template = "convert first (.to(torch.float32) / .to(torch.int32)), as torch would require"


class DimensionArgument(Cause):
    code = "D004"
    template = "{op}: {problem}"
    hint_template = "dimensions are ints in [-rank, rank) of the block"


class HelperFunction(Cause):
    code = "D004"
    template = "{name}(): {problem}"
    hint_template = "helpers called in a tile loop are plain Python functions defined in a file (traced inline)"


class UnknownName(Cause):
    code = "D004"
    template = "name {name!r} is not defined"
    hint_template = "names inside a tile loop are the kernel's locals and arguments, the module's globals, builtins"


class TileArithmetic(Cause):
    code = "D003"
    template = "arithmetic on {what}"
    hint_template = ("a tile in + - * // % stands for tile.index; otherwise use tile.index (a tensor) or tile.begin / "
                     "tile.end")


class MatmulOperands(Cause):
    code = "D004"
    template = "matmul {problem}"
    hint_template = "2-D (or batched 3-D) float or int8 blocks of one dtype; dimensions of at least 16"


class MatmulShapes(Cause):
    code = "D006"
    template = "matmul {problem}"
    hint_template = "index both operands with the same tile (x[tile_m, tile_k] @ y[tile_k, tile_n])"


class BadIndex(Cause):
    code = "D004"
    template = "{problem}"
    hint_template = "index host tensors with tiles, ints, int blocks (gathers), `:`, bounded slices, None and `...`"


class TileIndexing(Cause):
    code = "D003"
    template = "{problem}"
    hint_template = "index a tensor with a tile once per access (x[tile]); store tile.index, not the tile"


class MemoryTarget(Cause):
    code = "D004"
    template = "dt.{op} needs a tensor of the host code{what}"
    hint_template = "pass the tensor itself (a kernel argument or a host allocation), then the index list"


class AliasedOutput(Cause):
    code = "D004"
    template = ("{name} is written by the kernel but its elements share memory (shape {shape}, strides {strides}: "
                "an expand()ed or as_strided view): every program would write the same addresses")
    hint_template = ("write into a tensor of its own (torch.empty(...), or .contiguous() / .clone() of the view) "
                     "and expand it after the kernel; PyTorch refuses to write into such a view too")


class ExtraMask(Cause):
    code = "D004"
    template = "dt.{op}: extra_mask must be a bool block (a comparison), not {got}"
    hint_template = "extra_mask=(tile.index < n)[:, None]"


class ExtraMaskShape(Cause):
    code = "D006"
    template = "dt.{op}: extra_mask {mask} does not broadcast to the accessed block {dims}"
    hint_template = "give the mask the access's tiles in order, with None for the others"


class OperandKind(Cause):
    code = "D004"
    template = "{op} of {got}"
    hint_template = "ops in a tile loop take values of the kernel (loaded blocks, scalars) and numbers"


class HostValueOperand(Cause):
    code = "D004"
    template = "{use}: {got} is a host value the kernel cannot compute with"
    hint_template = ("values inside a tile loop are blocks, scalars of the kernel and numbers (int, float, bool); "
                     "strings, None, dtypes and lists are options of ops (dtype=, dim=) or decisions of the host code")


class UnsupportedExpression(Cause):
    code = "D004"
    template = "{what} is not supported inside a tile loop"
    hint_template = "see docs/deuteron.md for the supported expressions and ops"


class HostCall(Cause):
    code = "D004"
    template = "{problem}"
    hint_template = "only torch ops, dt.* and your own helper functions are compiled; host calls take host values"


class BadAttribute(Cause):
    code = "D004"
    template = "{what} has no attribute {attr!r}"
    hint_template = "values of the kernel have .dtype, .shape, .ndim, .T, .device and the supported tensor methods"


class ShapeArgument(Cause):
    code = "D004"
    template = "{problem}"
    hint_template = "shapes hold tiles, ints and block sizes (dt.zeros([tile_m, 64])); fill values are scalars"


class CapturedTensor(Cause):
    code = "D004"
    template = "the tensor {name!r} is captured by a helper function"
    hint_template = "pass it to the kernel (or the helper) as an argument"


__all__ += sorted(n for n, v in list(globals().items())
                  if isinstance(v, type) and issubclass(v, Cause) and v is not Cause)
