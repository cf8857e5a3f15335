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
def program_id(axis, *, _semantic=None):
    """The index of this program instance along ``axis`` (0, 1 or 2) of the launch grid. Returns an ``int32`` scalar."""
    return _semantic.program_id(axis)


@builtin
def num_programs(axis, *, _semantic=None):
    """The number of program instances along ``axis`` (0, 1 or 2) of the launch grid. Returns an ``int32`` scalar."""
    return _semantic.num_programs(axis)


@builtin
def arange(start, end, *, _semantic=None):
    """A 1-D block ``[start, start+1, ..., end-1]`` of ``int32``.

    ``start`` and ``end`` must be constexpr and ``end - start`` a power of two.
    """
    return _semantic.arange(start, end)


@builtin
def full(shape, value, dtype, *, _semantic=None):
    """A block of ``shape`` (constexpr ints, powers of two) filled with ``value``, of ``dtype``."""
    return _semantic.full(shape, value, dtype)


@builtin
def zeros(shape, dtype, *, _semantic=None):
    """A block of ``shape`` filled with zeros of ``dtype``."""
    return _semantic.zeros(shape, dtype)


@builtin(method=("cast", "to"))
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False, *, _semantic=None):
    """Convert ``input`` to ``dtype``.

    ``bitcast=True`` reinterprets the bits (same bit width required).
    ``fp_downcast_rounding`` is ``"rtne"`` (default) or ``"rtz"`` for float downcasts.
    Also available as ``x.to(dtype, bitcast=...)``.
    """
    return _semantic.cast(input, dtype, fp_downcast_rounding, bitcast)


# ----------------------------------------------------------------------------
# memory
# ----------------------------------------------------------------------------


@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False, *, _semantic=None):
    """Load a block (or scalar) from global memory at ``pointer``.

    ``mask`` (int1, broadcast to the pointer's shape) guards each element; masked-off
    elements take ``other`` (default: undefined, use 0 for safety).
    ``cache_modifier``: ``""``, ``".ca"``, ``".cg"``, ``".cv"``; ``eviction_policy``:
    ``""``, ``"evict_first"``, ``"evict_last"``.
    """
    return _semantic.load(pointer, mask, other, boundary_check, padding_option, cache_modifier, eviction_policy,
                          volatile)


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy="", *, _semantic=None):
    """Store ``value`` (broadcast to the pointer's shape, cast to its element type) at ``pointer``.

    Only elements where ``mask`` is true are written.  ``cache_modifier``: ``""``,
    ``".wb"``, ``".cg"``, ``".cs"``, ``".wt"``.
    """
    return _semantic.store(pointer, value, mask, boundary_check, cache_modifier, eviction_policy)


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
def atomic_add(pointer, val, mask=None, sem=None, scope=None, *, _semantic=None):
    return _semantic.atomic_add(pointer, val, mask, sem, scope)


@builtin
@_atomic_doc("store the maximum of the old value and ``val``")
def atomic_max(pointer, val, mask=None, sem=None, scope=None, *, _semantic=None):
    return _semantic.atomic_max(pointer, val, mask, sem, scope)


@builtin
@_atomic_doc("store the minimum of the old value and ``val``")
def atomic_min(pointer, val, mask=None, sem=None, scope=None, *, _semantic=None):
    return _semantic.atomic_min(pointer, val, mask, sem, scope)


@builtin
@_atomic_doc("bitwise-and ``val`` (integers)")
def atomic_and(pointer, val, mask=None, sem=None, scope=None, *, _semantic=None):
    return _semantic.atomic_and(pointer, val, mask, sem, scope)


@builtin
@_atomic_doc("bitwise-or ``val`` (integers)")
def atomic_or(pointer, val, mask=None, sem=None, scope=None, *, _semantic=None):
    return _semantic.atomic_or(pointer, val, mask, sem, scope)


@builtin
@_atomic_doc("bitwise-xor ``val`` (integers)")
def atomic_xor(pointer, val, mask=None, sem=None, scope=None, *, _semantic=None):
    return _semantic.atomic_xor(pointer, val, mask, sem, scope)


@builtin
@_atomic_doc("exchange with ``val``")
def atomic_xchg(pointer, val, mask=None, sem=None, scope=None, *, _semantic=None):
    return _semantic.atomic_xchg(pointer, val, mask, sem, scope)


@builtin(method=True)
def atomic_poll(pointer, expected_value, sem=None, scope=None, timeout_ns=None, *, _semantic=None):
    """Spin until the 16-, 32- or 64-bit integer at each ``pointer`` equals ``expected_value``.

    The program waits for all its polls.  ``sem``: ``"acquire"`` (default) or ``"relaxed"``; ``scope``:
    ``"gpu"`` (default), ``"cta"`` or ``"sys"``.  With ``timeout_ns`` (a budget shared by the whole poll,
    read from the GPU's global timer) an element may give up; each element is read at least once.
    Returns an int1 block of the pointer's shape: true where the value was seen.
    """
    return _semantic.atomic_poll(pointer, expected_value, sem, scope, timeout_ns)


@builtin
def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero", *, _semantic=None):
    """A descriptor of the tensor at ``base`` with ``shape`` and ``strides`` (in elements, the last 1).

    ``desc.load([i, j])`` reads the block of ``block_shape`` (constexpr powers of two) at those offsets,
    out-of-bounds elements reading 0 (``padding_option="nan"``: NaN); ``desc.store([i, j], value)``
    writes the in-bounds part.  On sm_80 these are masked loads and stores.
    """
    return _semantic.make_tensor_descriptor(base, shape, strides, block_shape, padding_option)


@builtin
def make_block_ptr(base, shape, strides, offsets, block_shape, order, *, _semantic=None):
    """A block pointer (deprecated by Triton 3.7, removed in 3.9; prefer ``nl.make_tensor_descriptor``).

    Points at the block of ``block_shape`` (constexpr powers of two) at ``offsets`` of the tensor at
    ``base`` with ``shape`` and ``strides`` (in elements); ``order`` (the dimensions from fastest to
    slowest varying) is checked and otherwise ignored.  ``nl.load(bp, boundary_check=(0, 1),
    padding_option="zero")`` reads the block, masking the listed dimensions at the tensor's bounds;
    ``nl.store(bp, value, boundary_check=...)`` writes it; ``nl.advance(bp, deltas)`` moves it.
    newt lowers them to masked pointer loads and stores, as it does tensor descriptors.
    """
    return _semantic.make_block_ptr(base, shape, strides, offsets, block_shape, order)


@builtin
def advance(base, offsets, *, _semantic=None):
    """The block pointer ``base`` moved by ``offsets`` (one per dimension, in elements)."""
    return _semantic.advance(base, offsets)


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None, mask=None, *, _semantic=None):
    """Atomic compare-and-swap: where the value at ``pointer`` equals ``cmp``, store ``val``.

    Returns the old value.  ``sem`` and ``scope`` as for ``atomic_add``.  ``mask`` (a newt extension over
    Triton, whose ``atomic_cas`` has none): lanes where it is false do not touch memory and return 0, as the
    masked-off lanes of ``atomic_add`` do.
    """
    return _semantic.atomic_cas(pointer, cmp, val, sem, scope, mask)


# ----------------------------------------------------------------------------
# elementwise
# ----------------------------------------------------------------------------


@builtin(method=True)
def where(condition, x, y, *, _semantic=None):
    """Elementwise select: ``x`` where ``condition`` is true, else ``y`` (all three broadcast together)."""
    return _semantic.where(condition, x, y)


@builtin
def minimum(x, y, propagate_nan=PropagateNan.NONE, *, _semantic=None):
    """Elementwise minimum of ``x`` and ``y`` (promoted to a common type)."""
    return _semantic.minimum(x, y, propagate_nan)


@builtin
def maximum(x, y, propagate_nan=PropagateNan.NONE, *, _semantic=None):
    """Elementwise maximum of ``x`` and ``y`` (promoted to a common type)."""
    return _semantic.maximum(x, y, propagate_nan)


@builtin
def clamp(x, min, max, propagate_nan=PropagateNan.NONE, *, _semantic=None):
    """Clamp ``x`` elementwise to ``[min, max]`` (floating point)."""
    return _semantic.clamp(x, min, max, propagate_nan)


@builtin(method=True)
def abs(x, *, _semantic=None):
    """Elementwise absolute value."""
    return _semantic.abs(x)


@builtin
def fma(x, y, z, *, _semantic=None):
    """Fused multiply-add ``x * y + z`` rounded once (floating point)."""
    return _semantic.fma(x, y, z)


@builtin
def umulhi(x, y, *, _semantic=None):
    """The high 32 (or 64) bits of the product of two integers."""
    return _semantic.umulhi(x, y)


def _unary_float(name, what):
    def f(x, *, _semantic=None):
        return getattr(_semantic, name)(x)
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
def fdiv(x, y, ieee_rounding=False, *, _semantic=None):
    """Elementwise ``x / y`` in floating point; ``ieee_rounding=True`` rounds correctly (as ``div_rn``)."""
    return _semantic.fdiv(x, y, ieee_rounding)


@builtin
def div_rn(x, y, *, _semantic=None):
    """Floating-point division ``x / y`` correctly rounded to nearest even."""
    return _semantic.div_rn(x, y)


@builtin
def pow(x, y, *, _semantic=None):
    """Elementwise ``x ** y`` (floating point)."""
    return _semantic.pow(x, y)


# ----------------------------------------------------------------------------
# reductions and scans
# ----------------------------------------------------------------------------


@builtin(method=True)
def sum(input, axis=None, keep_dims=False, dtype=None, *, _semantic=None):
    """Sum of ``input`` along ``axis`` (all axes when ``None``).

    Integers narrower than 32 bits are summed as 32-bit; ``dtype`` overrides.
    """
    return _semantic.sum(input, axis, keep_dims, dtype)


@builtin(method=True)
def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False, *, _semantic=None):
    """Maximum along ``axis``; with ``return_indices=True`` also the index of the maximum."""
    return _semantic.max(input, axis, return_indices, return_indices_tie_break_left, keep_dims)


@builtin(method=True)
def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False, *, _semantic=None):
    """Minimum along ``axis``; with ``return_indices=True`` also the index of the minimum."""
    return _semantic.min(input, axis, return_indices, return_indices_tie_break_left, keep_dims)


@builtin(method=True)
def argmax(input, axis, tie_break_left=True, keep_dims=False, *, _semantic=None):
    """Index (int32) of the maximum along ``axis``."""
    return _semantic.argmax(input, axis, tie_break_left, keep_dims)


@builtin(method=True)
def argmin(input, axis, tie_break_left=True, keep_dims=False, *, _semantic=None):
    """Index (int32) of the minimum along ``axis``."""
    return _semantic.argmin(input, axis, tie_break_left, keep_dims)


@builtin(method=True)
def sort(x, dim=None, descending=False, *, _semantic=None):
    """Sort ``x`` along its last dimension (``dim`` may only name it), ascending unless ``descending``.

    A bitonic sorting network; the dimension's size must be a power of two.
    """
    return _semantic.sort(x, dim, descending)


@builtin(method=True)
def topk(x, k, dim=None, descending=True, *, _semantic=None):
    """The ``k`` largest (``descending=False``: smallest) elements along the last dimension, in order.

    ``k`` is a constexpr power of two no larger than the dimension; the result's last dimension is ``k``.
    """
    return _semantic.topk(x, k, dim, descending)


@builtin(method=True)
def histogram(input, num_bins, mask=None, *, _semantic=None):
    """Count the elements of the 1-D integer block ``input`` in ``num_bins`` bins ``0 .. num_bins-1``.

    Returns an ``int32`` block of shape ``[num_bins]``; elements outside the bins, and where ``mask`` is
    false, are not counted.
    """
    return _semantic.histogram(input, num_bins, mask)


@builtin(method=True)
def xor_sum(input, axis=None, keep_dims=False, *, _semantic=None):
    """Bitwise xor of all elements along ``axis`` (integers)."""
    return _semantic.xor_sum(input, axis, keep_dims)


@builtin(method=True)
def reduce(input, axis, combine_fn, keep_dims=False, *, _semantic=None):
    """Reduce ``input`` (a block or a tuple of blocks) along ``axis`` with a ``@newt.jit`` ``combine_fn``.

    ``combine_fn(a0, .., b0, ..)`` takes two sets of scalars and returns the combined set;
    it must be associative and commutative.
    """
    return _semantic.reduce(input, axis, combine_fn, keep_dims)


@builtin(method=True)
def associative_scan(input, axis, combine_fn, reverse=False, *, _semantic=None):
    """Inclusive scan of ``input`` (a block or tuple of blocks) along ``axis`` with an associative ``combine_fn``."""
    return _semantic.associative_scan(input, axis, combine_fn, reverse)


@builtin(method=True)
def cumsum(input, axis=0, reverse=False, dtype=None, *, _semantic=None):
    """Inclusive cumulative sum along ``axis``."""
    return _semantic.cumsum(input, axis, reverse, dtype)


@builtin(method=True)
def cumprod(input, axis=0, reverse=False, *, _semantic=None):
    """Inclusive cumulative product along ``axis``."""
    return _semantic.cumprod(input, axis, reverse)


# ----------------------------------------------------------------------------
# shape manipulation
# ----------------------------------------------------------------------------


@builtin(method=True)
def reshape(input, *shape, can_reorder=False, _semantic=None):
    """Reshape to ``shape`` (same number of elements)."""
    return _semantic.reshape(input, *shape, can_reorder=can_reorder)


@builtin(method=True)
def view(input, *shape, _semantic=None):
    """Reshape to ``shape``; the element order may change (prefer ``reshape``)."""
    return _semantic.view(input, *shape)


@builtin(method=True)
def permute(input, *dims, _semantic=None):
    """Permute the dimensions of ``input``: ``permute(x, (1, 0))``."""
    return _semantic.permute(input, *dims)


@builtin(method=True)
def trans(input, *dims, _semantic=None):
    """Transpose: swaps the two dimensions of a 2-D block, or permutes by ``dims``. Also ``x.T``."""
    return _semantic.trans(input, *dims)


@builtin(method=True)
def gather(src, index, axis, *, _semantic=None):
    """``out[i][j] = src[index[i][j]][j]`` along ``axis`` (as ``torch.gather``).

    ``index`` is an integer block of ``src``'s rank whose other dimensions match ``src``'s; the result has
    ``index``'s shape and ``src``'s element type.
    """
    return _semantic.gather(src, index, axis)


@builtin(method=True)
def squeeze(x, dim, *, _semantic=None):
    """Remove dimension ``dim`` (a constexpr int) of ``x``, which must have size 1."""
    return _semantic.squeeze(x, dim)


@builtin(method=True)
def unsqueeze(x, dim, *, _semantic=None):
    """Insert a dimension of size 1 at ``dim`` (as ``expand_dims``)."""
    return _semantic.unsqueeze(x, dim)


@builtin(method=True)
def flip(x, dim=None, *, _semantic=None):
    """Reverse the elements of ``x`` along ``dim`` (default: the last dimension; its size a power of two)."""
    return _semantic.flip(x, dim)


@builtin(name="item", method="item")
def _item(input, *, _semantic=None):
    """The one element of a block of one element, as a scalar (``x.item()``)."""
    return _semantic.item(input)


@builtin(method=True)
def expand_dims(input, axis, *, _semantic=None):
    """Insert a dimension of size 1 at ``axis`` (an int or a sequence of ints)."""
    return _semantic.expand_dims(input, axis)


@builtin(method=True)
def broadcast(input, other, *, _semantic=None):
    """Broadcast two blocks to their common shape; returns both."""
    return _semantic.broadcast(input, other)


@builtin(method=True)
def broadcast_to(input, *shape, _semantic=None):
    """Broadcast ``input`` to ``shape``."""
    return _semantic.broadcast_to(input, *shape)


@builtin(method=True)
def split(a, *, _semantic=None):
    """Split a block whose last dimension is 2 into two blocks (the inverse of ``join``)."""
    return _semantic.split(a)


@builtin(method=True)
def join(a, b, *, _semantic=None):
    """Stack two blocks of the same shape along a new last dimension of size 2."""
    return _semantic.join(a, b)


@builtin(method=True)
def cat(input, other, can_reorder=False, *, _semantic=None):
    """Concatenate two blocks along the first dimension."""
    return _semantic.cat(input, other, can_reorder)


# ----------------------------------------------------------------------------
# matrix multiply
# ----------------------------------------------------------------------------


@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=None, *, _semantic=None):
    """Matrix product of two blocks on the tensor cores: ``(M, K) @ (K, N) -> (M, N)``.

    3-D operands are batched: ``(B, M, K) @ (B, K, N)``.  M, N and K must be at least 16.
    ``acc`` is added to the product; ``out_dtype`` is the accumulator type (fp32 by
    default, int32 for int8).  ``input_precision`` for fp32 operands: ``"tf32"``
    (default), ``"tf32x3"`` or ``"ieee"``.
    """
    return _semantic.dot(input, other, acc, input_precision, allow_tf32, max_num_imprecise_acc, out_dtype)


# ----------------------------------------------------------------------------
# debugging and hints
# ----------------------------------------------------------------------------


@builtin
def static_print(*values, sep=" ", end="\n", file=None, flush=False, _semantic=None):
    """Print constexpr values and the types of block values when the kernel is compiled."""
    return _semantic.static_print(*values, sep=sep, end=end, file=file, flush=flush)


@builtin
def static_assert(cond, msg="", *, _semantic=None):
    """Fail compilation (a diagnostic in the editor) when the constexpr ``cond`` is false."""
    return _semantic.static_assert(cond, msg)


@builtin
def device_print(prefix, *args, hex=False, _semantic=None):
    """Print ``prefix`` and the values of ``args`` from every thread at run time."""
    return _semantic.device_print(prefix, *args, hex=hex)


@builtin
def device_assert(cond, msg="", mask=None, *, _semantic=None):
    """Trap at run time when ``cond`` is false for some element (where ``mask`` is true)."""
    return _semantic.device_assert(cond, msg, mask)


@builtin
def debug_barrier(*, _semantic=None):
    """Synchronize all threads of the program instance (``__syncthreads``)."""
    return _semantic.debug_barrier()


@builtin
def multiple_of(input, values, *, _semantic=None):
    """Promise that every element of ``input`` is a multiple of ``values``."""
    return _semantic.multiple_of(input, values)


@builtin
def max_contiguous(input, values, *, _semantic=None):
    """Promise that the first ``values`` elements of ``input`` are contiguous."""
    return _semantic.max_contiguous(input, values)


@builtin
def max_constancy(input, values, *, _semantic=None):
    """Promise that ``input`` is constant in runs of ``values`` elements."""
    return _semantic.max_constancy(input, values)


@builtin
def assume(cond, *, _semantic=None):
    """Let the compiler assume ``cond`` (a scalar int1) is true."""
    return _semantic.assume(cond)


# ----------------------------------------------------------------------------
# loops
# ----------------------------------------------------------------------------


class range:  # mirrors triton.language.range
    """``for i in nl.range(start, end, step, num_stages=, loop_unroll_factor=)``.

    A run-time loop; ``num_stages`` sets the software-pipelining depth of the
    loads in its body, ``loop_unroll_factor`` asks for unrolling.
    """

    __newt_builtin__ = "range"

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False, disable_licm=False):
        pass


class static_range:
    """``for i in nl.static_range(start, end, step)``: unrolled when the kernel is compiled.

    The bounds must be constexpr; ``i`` is a constexpr in the body.
    """

    __newt_builtin__ = "static_range"

    def __init__(self, arg1, arg2=None, step=None):
        pass
