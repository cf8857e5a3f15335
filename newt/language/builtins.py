"""The primitive ops of the newt language (``nl.*``).

Every function here is a stub registered with :func:`builtin`: the front end
checks calls against its signature and types them; the interpreter and the
CUDA backend implement the IR op it emits.  Docstrings are what the language
server shows on hover.
"""

from __future__ import annotations

from .core import PropagateNan, builtin

# ----------------------------------------------------------------------------
# program indexing and creation
# ----------------------------------------------------------------------------


@builtin
def program_id(axis):
    """The index of this program instance along ``axis`` (0, 1 or 2) of the launch grid. Returns an ``int32`` scalar."""


@builtin
def num_programs(axis):
    """The number of program instances along ``axis`` (0, 1 or 2) of the launch grid. Returns an ``int32`` scalar."""


@builtin
def arange(start, end):
    """A 1-D block ``[start, start+1, ..., end-1]`` of ``int32``.

    ``start`` and ``end`` must be constexpr and ``end - start`` a power of two.
    """


@builtin
def full(shape, value, dtype):
    """A block of ``shape`` (constexpr ints, powers of two) filled with ``value``, of ``dtype``."""


@builtin
def zeros(shape, dtype):
    """A block of ``shape`` filled with zeros of ``dtype``."""


@builtin(method=("cast", "to"))
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False):
    """Convert ``input`` to ``dtype``.

    ``bitcast=True`` reinterprets the bits (same bit width required).
    ``fp_downcast_rounding`` is ``"rtne"`` (default) or ``"rtz"`` for float downcasts.
    Also available as ``x.to(dtype, bitcast=...)``.
    """


# ----------------------------------------------------------------------------
# memory
# ----------------------------------------------------------------------------


@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    """Load a block (or scalar) from global memory at ``pointer``.

    ``mask`` (int1, broadcast to the pointer's shape) guards each element; masked-off
    elements take ``other`` (default: undefined, use 0 for safety).
    ``cache_modifier``: ``""``, ``".ca"``, ``".cg"``, ``".cv"``; ``eviction_policy``:
    ``""``, ``"evict_first"``, ``"evict_last"``.
    """


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    """Store ``value`` (broadcast to the pointer's shape, cast to its element type) at ``pointer``.

    Only elements where ``mask`` is true are written.  ``cache_modifier``: ``""``,
    ``".wb"``, ``".cg"``, ``".cs"``, ``".wt"``.
    """


# ----------------------------------------------------------------------------
# atomics
# ----------------------------------------------------------------------------

_ATOMIC_DOC = """Atomically {what} at ``pointer`` and return the old value.

``mask`` guards each element.  ``sem`` is ``"acq_rel"`` (default), ``"acquire"``,
``"release"`` or ``"relaxed"``; ``scope`` is ``"gpu"`` (default), ``"cta"`` or ``"sys"``.
"""


def _atomic_doc(what):
    def deco(f):
        f.__doc__ = _ATOMIC_DOC.format(what=what)
        return f
    return deco


@builtin
@_atomic_doc("add ``val``")
def atomic_add(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
@_atomic_doc("store the maximum of the old value and ``val``")
def atomic_max(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
@_atomic_doc("store the minimum of the old value and ``val``")
def atomic_min(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
@_atomic_doc("bitwise-and ``val`` (integers)")
def atomic_and(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
@_atomic_doc("bitwise-or ``val`` (integers)")
def atomic_or(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
@_atomic_doc("bitwise-xor ``val`` (integers)")
def atomic_xor(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
@_atomic_doc("exchange with ``val``")
def atomic_xchg(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    """Atomic compare-and-swap: where the value at ``pointer`` equals ``cmp``, store ``val``.

    Returns the old value.  ``sem`` and ``scope`` as for ``atomic_add``.
    """


# ----------------------------------------------------------------------------
# elementwise
# ----------------------------------------------------------------------------


@builtin(method=True)
def where(condition, x, y):
    """Elementwise select: ``x`` where ``condition`` is true, else ``y`` (all three broadcast together)."""


@builtin
def minimum(x, y, propagate_nan=PropagateNan.NONE):
    """Elementwise minimum of ``x`` and ``y`` (promoted to a common type)."""


@builtin
def maximum(x, y, propagate_nan=PropagateNan.NONE):
    """Elementwise maximum of ``x`` and ``y`` (promoted to a common type)."""


@builtin
def clamp(x, min, max, propagate_nan=PropagateNan.NONE):
    """Clamp ``x`` elementwise to ``[min, max]`` (floating point)."""


@builtin(method=True)
def abs(x):
    """Elementwise absolute value."""


@builtin
def fma(x, y, z):
    """Fused multiply-add ``x * y + z`` rounded once (floating point)."""


@builtin
def umulhi(x, y):
    """The high 32 (or 64) bits of the product of two integers."""


def _unary_float(name, what):
    def f(x):
        pass
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"Elementwise {what} (floating-point input; fp16/bf16 compute in fp32)."
    return builtin(f, method=True)


exp = _unary_float("exp", "e**x")
exp2 = _unary_float("exp2", "2**x")
log = _unary_float("log", "natural logarithm")
log2 = _unary_float("log2", "base-2 logarithm")
sqrt = _unary_float("sqrt", "square root (fast approximation)")
sqrt_rn = _unary_float("sqrt_rn", "square root, correctly rounded")
rsqrt = _unary_float("rsqrt", "reciprocal square root")
sin = _unary_float("sin", "sine")
cos = _unary_float("cos", "cosine")
tanh = _unary_float("tanh", "hyperbolic tangent")
erf = _unary_float("erf", "error function")
floor = _unary_float("floor", "floor")
ceil = _unary_float("ceil", "ceiling")


@builtin
def div_rn(x, y):
    """Floating-point division ``x / y`` correctly rounded to nearest even."""


@builtin
def pow(x, y):
    """Elementwise ``x ** y`` (floating point)."""


# ----------------------------------------------------------------------------
# reductions and scans
# ----------------------------------------------------------------------------


@builtin(method=True)
def sum(input, axis=None, keep_dims=False, dtype=None):
    """Sum of ``input`` along ``axis`` (all axes when ``None``).

    Integers narrower than 32 bits are summed as 32-bit; ``dtype`` overrides.
    """


@builtin(method=True)
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Maximum along ``axis``; with ``return_indices=True`` also the index of the maximum."""


@builtin(method=True)
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Minimum along ``axis``; with ``return_indices=True`` also the index of the minimum."""


@builtin(method=True)
def argmax(input, axis, tie_break_left=True, keep_dims=False):
    """Index (int32) of the maximum along ``axis``."""


@builtin(method=True)
def argmin(input, axis, tie_break_left=True, keep_dims=False):
    """Index (int32) of the minimum along ``axis``."""


@builtin(method=True)
def xor_sum(input, axis=None, keep_dims=False):
    """Bitwise xor of all elements along ``axis`` (integers)."""


@builtin(method=True)
def reduce(input, axis, combine_fn, keep_dims=False):
    """Reduce ``input`` (a block or a tuple of blocks) along ``axis`` with a ``@newt.jit`` ``combine_fn``.

    ``combine_fn(a0, .., b0, ..)`` takes two sets of scalars and returns the combined set;
    it must be associative and commutative.
    """


@builtin(method=True)
def associative_scan(input, axis, combine_fn, reverse=False):
    """Inclusive scan of ``input`` (a block or tuple of blocks) along ``axis`` with an associative ``combine_fn``."""


@builtin(method=True)
def cumsum(input, axis=0, reverse=False, dtype=None):
    """Inclusive cumulative sum along ``axis``."""


@builtin(method=True)
def cumprod(input, axis=0, reverse=False):
    """Inclusive cumulative product along ``axis``."""


# ----------------------------------------------------------------------------
# shape manipulation
# ----------------------------------------------------------------------------


@builtin(method=True)
def reshape(input, *shape, can_reorder=False):
    """Reshape to ``shape`` (same number of elements)."""


@builtin(method=True)
def view(input, *shape):
    """Reshape to ``shape``; the element order may change (prefer ``reshape``)."""


@builtin(method=True)
def permute(input, *dims):
    """Permute the dimensions of ``input``: ``permute(x, (1, 0))``."""


@builtin(method=True)
def trans(input, *dims):
    """Transpose: swaps the two dimensions of a 2-D block, or permutes by ``dims``. Also ``x.T``."""


@builtin(method=True)
def expand_dims(input, axis):
    """Insert a dimension of size 1 at ``axis`` (an int or a sequence of ints)."""


@builtin(method=True)
def broadcast(input, other):
    """Broadcast two blocks to their common shape; returns both."""


@builtin(method=True)
def broadcast_to(input, *shape):
    """Broadcast ``input`` to ``shape``."""


@builtin(method=True)
def split(a):
    """Split a block whose last dimension is 2 into two blocks (the inverse of ``join``)."""


@builtin(method=True)
def join(a, b):
    """Stack two blocks of the same shape along a new last dimension of size 2."""


@builtin(method=True)
def cat(input, other, can_reorder=False):
    """Concatenate two blocks along the first dimension."""


# ----------------------------------------------------------------------------
# matrix multiply
# ----------------------------------------------------------------------------


@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=None):
    """Matrix product of two blocks on the tensor cores: ``(M, K) @ (K, N) -> (M, N)``.

    3-D operands are batched: ``(B, M, K) @ (B, K, N)``.  M, N and K must be at least 16.
    ``acc`` is added to the product; ``out_dtype`` is the accumulator type (fp32 by
    default, int32 for int8).  ``input_precision`` for fp32 operands: ``"tf32"``
    (default), ``"tf32x3"`` or ``"ieee"``.
    """


# ----------------------------------------------------------------------------
# debugging and hints
# ----------------------------------------------------------------------------


@builtin
def static_print(*values, sep=" ", end="\n", file=None, flush=False):
    """Print constexpr values and the types of block values when the kernel is compiled."""


@builtin
def static_assert(cond, msg=""):
    """Fail compilation (a diagnostic in the editor) when the constexpr ``cond`` is false."""


@builtin
def device_print(prefix, *args, hex=False):
    """Print ``prefix`` and the values of ``args`` from every thread at run time."""


@builtin
def device_assert(cond, msg="", mask=None):
    """Trap at run time when ``cond`` is false for some element (where ``mask`` is true)."""


@builtin
def debug_barrier():
    """Synchronize all threads of the program instance (``__syncthreads``)."""


@builtin
def multiple_of(input, values):
    """Promise that every element of ``input`` is a multiple of ``values``."""


@builtin
def max_contiguous(input, values):
    """Promise that the first ``values`` elements of ``input`` are contiguous."""


@builtin
def max_constancy(input, values):
    """Promise that ``input`` is constant in runs of ``values`` elements."""


@builtin
def assume(cond):
    """Let the compiler assume ``cond`` (a scalar int1) is true."""


# ----------------------------------------------------------------------------
# loops
# ----------------------------------------------------------------------------


class range:  # noqa: A001 - mirrors triton.language.range
    """``for i in nl.range(start, end, step, num_stages=, loop_unroll_factor=)``.

    A run-time loop; ``num_stages`` sets the software-pipelining depth of the
    loads in its body, ``loop_unroll_factor`` asks for unrolling.
    """

    __newt_builtin__ = "range"

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False):
        pass


class static_range:
    """``for i in nl.static_range(start, end, step)``: unrolled when the kernel is compiled.

    The bounds must be constexpr; ``i`` is a constexpr in the body.
    """

    __newt_builtin__ = "static_range"

    def __init__(self, arg1, arg2=None, step=None):
        pass
