"""torch dtype -> newt dtype (a leaf module: specialize.py and wrappers.py both use it)."""

from __future__ import annotations

from newt.language import core as lc

_TORCH_TO_NL = None


def torch_dtype_map() -> dict:
    global _TORCH_TO_NL
    if _TORCH_TO_NL is None:
        import torch
        m = {
            torch.bool: lc.int1, torch.int8: lc.int8, torch.int16: lc.int16, torch.int32: lc.int32,
            torch.int64: lc.int64, torch.uint8: lc.uint8, torch.float16: lc.float16, torch.bfloat16: lc.bfloat16,
            torch.float32: lc.float32, torch.float64: lc.float64,
        }
        for name, nd in (("uint16", lc.uint16), ("uint32", lc.uint32), ("uint64", lc.uint64),
                         ("float8_e4m3fn", lc.float8e4nv), ("float8_e5m2", lc.float8e5),
                         ("float8_e4m3fnuz", lc.float8e4b8), ("float8_e5m2fnuz", lc.float8e5b16)):
            t = getattr(torch, name, None)
            if t is not None:
                m[t] = nd
        _TORCH_TO_NL = m
    return _TORCH_TO_NL
