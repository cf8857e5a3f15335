"""Inline assembly: ``nl.inline_asm_elementwise`` (Triton's ``tl.inline_asm_elementwise``)."""

from __future__ import annotations

from .core import builtin


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack, *, _semantic=None):
    """Run a PTX snippet on every element (or every ``pack`` consecutive elements) of ``args``.

    ``asm`` is a constexpr string of PTX; ``$0``, ``$1``, ... name the operands, the outputs first
    (one per result register), then the inputs.  ``constraints`` is a comma-separated constexpr string
    with one letter per operand: ``=r`` / ``=h`` / ``=l`` / ``=f`` / ``=d`` for outputs (b32, b16, b64,
    f32, f64 registers), ``r`` / ``h`` / ``l`` / ``f`` / ``d`` for inputs.  ``args`` (a list of blocks or
    scalars) broadcast together; ``dtype`` is the result dtype, or a tuple of dtypes for several results
    (the call then returns a tuple).  With ``pack > 1`` each asm invocation handles ``pack`` consecutive
    elements; values narrower than 32 bits are packed into one register (two fp16 in a b32, four int8 in a
    b32), low element in the low bits, as Triton does.  ``is_pure``: the asm has no side effect, so an
    unused result may be removed.  The interpreter runs a subset of PTX (docs/interpreter.md).
    """
    return _semantic.inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack)
