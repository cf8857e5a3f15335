"""No GPU needed: the generated kernels of every example compile to a cubin for sm_90a (NVRTC), for the default
config and a few neighbours; reports registers and spills so regressions in the generated code show."""

from __future__ import annotations

import importlib

import pytest

from deuteron.compile import compile_binary
from deuteron.kernel import Kernel, _HostRun, _runtime_args


def _nvrtc() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
        return hasattr(importlib.import_module("newt.backend.cuda"), "compile_cuda")
    except Exception:  # noqa: BLE001
        return False


pytestmark = pytest.mark.skipif(not _nvrtc(), reason="NVRTC (cuda-bindings) is not installed")

EXAMPLES = ["add", "softmax", "layer_norm", "rms_norm", "matmul", "matmul_epilogue", "attention", "column_sum"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_compiles_for_sm90a(name):
    mod = importlib.import_module(name)
    k = next(v for v in vars(mod).values() if isinstance(v, Kernel))
    args = mod.make_args("cpu")
    b = k._bind(args, {})
    e = k._entry(b)
    default = e.space.default()
    configs = [default] + [c for c in e.space.neighbors(default) if c.pid_type != default.pid_type][:1]
    configs += [c for c in e.space.neighbors(default) if c.reduction_loops != default.reduction_loops][:1]
    for cfg in configs:
        run = _HostRun(e, cfg, "source")
        run.execute(b)
        for gen, m, prog, loc in run.built:
            ck = compile_binary(gen, m, _runtime_args(gen, prog, loc, k.fn.__globals__), "sm_90a")
            assert ck.asm["cubin"], (name, cfg)
            if cfg is default and name in ("add", "softmax", "layer_norm", "rms_norm", "column_sum"):
                assert ck.metadata["n_spills"] == 0, (name, cfg, ck.metadata)
