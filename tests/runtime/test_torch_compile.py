"""newt and deuteron kernels as torch custom ops (newt.library): ``torch.compile(fullgraph=True)`` of a model
that calls them has no graph break, the op is one node of the graph, and the compiled model matches eager --
on the CPU through the interpreter, and (gpu-marked) on a CUDA device."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import newt
import newt.language as nl
import newt.library

ROOT = Path(__file__).resolve().parents[2]
_ids = itertools.count()


def _name(stem: str) -> str:
    """A fresh op name: an operator can be defined once per process."""
    return f"newt_test::{stem}_{next(_ids)}"


@newt.jit
def _scale_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, x * alpha + y, mask=mask)


@newt.autotune(configs=[newt.Config({"BLOCK": 64}), newt.Config({"BLOCK": 128})], key=["n"])
@newt.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < n
    x = nl.load(x_ptr + offs, mask=mask)
    nl.store(out_ptr + offs, nl.maximum(x, 0.0), mask=mask)


def _scale_add_op(launches: list | None = None):
    @newt.library.custom_op(_name("scale_add"), mutates_args=())
    def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        if launches is not None:
            launches.append(type(x).__name__)
        newt.library.wrap(_scale_add_kernel)[(newt.cdiv(n, 128),)](x, y, out, n, alpha, BLOCK=128)
        return out

    return scale_add


class _Recorder:
    """A torch.compile backend that keeps the FX graphs it was given (and runs them as they are)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def targets(self):
        return [str(n.target) for g in self.graphs for n in g.graph.nodes if n.op == "call_function"]


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("NEWT_INTERPRET", "1")
    for k in (_scale_add_kernel, _relu_kernel.fn):
        k.__dict__.pop("_fast", None)  # the launch path is chosen when first launched
    yield
    for k in (_scale_add_kernel, _relu_kernel.fn):
        k.__dict__.pop("_fast", None)


def test_a_compiled_model_calls_a_newt_kernel_without_a_graph_break(interpret):
    launches: list = []
    scale_add = _scale_add_op(launches)

    def model(x, y):
        h = torch.sin(x) * 2
        return torch.relu(scale_add(h, y, 0.5)) + y.sum()

    x, y = torch.randn(1000), torch.randn(1000)
    eager = model(x, y)
    assert launches == ["Tensor"]
    rec = _Recorder()
    compiled = torch.compile(model, backend=rec, fullgraph=True)
    got = compiled(x, y)
    torch.testing.assert_close(got, eager)
    assert len(rec.graphs) == 1
    ops = rec.targets()
    assert any(scale_add._qualname.split("::")[1] in t for t in ops), ops
    # the eager call, the fake (shape) pass with its launch skipped, and the compiled call
    assert launches[0] == "Tensor" and launches[-1] == "Tensor" and "FakeTensor" in launches, launches
    # a second call runs the compiled graph: the kernel again, nothing retraced
    x2 = torch.randn(1000)
    torch.testing.assert_close(compiled(x2, y), model(x2, y))
    assert len(rec.graphs) == 1


def test_inductor_on_the_cpu_with_dynamic_shapes(interpret):
    """The default backend (inductor, C++ on the CPU) around the op, with symbolic sizes in the fake pass."""
    scale_add = _scale_add_op()
    torch._dynamo.reset()

    def model(x, y):
        return scale_add(torch.cos(x), y, 3.0).sum(dim=-1)

    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for n in (300, 513):
        x, y = torch.randn(4, n), torch.randn(4, n)
        torch.testing.assert_close(compiled(x, y), model(x, y))


def test_an_autotuned_kernel_and_the_ops_other_registrations(interpret):
    @newt.library.custom_op(_name("relu"), mutates_args=())
    def relu(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        newt.library.wrap(_relu_kernel)[lambda m: (newt.cdiv(n, m["BLOCK"]),)](x, out, n)
        return out

    # torch's CustomOpDef: autograd registers as documented for torch.library.custom_op
    relu.register_autograd(lambda ctx, g: g * (ctx.saved_tensors[0] > 0),
                           setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]))
    x = torch.randn(700, requires_grad=True)
    compiled = torch.compile(lambda t: relu(t * 2).sum(), backend="aot_eager", fullgraph=True)
    loss = compiled(x)
    loss.backward()
    torch.testing.assert_close(loss, torch.relu(x * 2).sum())
    torch.testing.assert_close(x.grad, 2.0 * (x > 0))
    # meta tensors: the fake gives the outputs' shape and dtype, no launch
    m = relu(torch.empty(5, 7, device="meta", dtype=torch.float16))
    assert m.shape == (5, 7) and m.dtype == torch.float16 and m.device.type == "meta"


def test_a_launch_that_bypasses_wrap_gets_an_explanation(interpret):
    direct = newt.library.custom_op(_name("direct"), _direct_fn, mutates_args=())  # launches without wrap()
    x = torch.randn(100)
    torch.testing.assert_close(direct(x), 2 * x)  # eager: fine
    with pytest.raises(RuntimeError, match=r"newt\.library\.wrap\(kernel\)\[grid\]"):
        direct(torch.empty(100, device="meta"))
    # an explicit fake= is the other way
    ok = newt.library.custom_op(_name("direct_fake"), _direct_fn, mutates_args=(), fake=lambda x: torch.empty_like(x))
    assert ok(torch.empty(3, device="meta")).shape == (3,)


def _direct_fn(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _scale_add_kernel[(1,)](x, x, out, x.numel(), 1.0, BLOCK=128)
    return out


def test_an_op_that_writes_its_argument(interpret):
    @newt.library.custom_op(_name("scale_add_"), mutates_args=("out",))
    def scale_add_(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
        n = x.numel()
        newt.library.wrap(_scale_add_kernel)[(newt.cdiv(n, 128),)](x, y, out, n, 2.0, BLOCK=128)

    def model(x, y):
        out = torch.empty_like(x)
        scale_add_(x + 1, y, out)
        return out * 3

    x, y = torch.randn(333), torch.randn(333)
    torch.testing.assert_close(torch.compile(model, backend="aot_eager", fullgraph=True)(x, y), model(x, y))
    torch.testing.assert_close(model(x, y), ((x + 1) * 2 + y) * 3)


def test_bad_registrations_are_explained():
    with pytest.raises(ValueError, match="namespace::op"):
        newt.library.custom_op("no_namespace", _direct_fn, mutates_args=())
    with pytest.raises(TypeError, match=r"did you mean \('out',\)"):
        newt.library.custom_op(_name("x"), _direct_fn, mutates_args="out")
    with pytest.raises(TypeError, match="takes a @newt.jit"):
        newt.library.wrap(lambda x: x)


def test_a_deuteron_kernel_in_a_compiled_model(monkeypatch):
    import deuteron as dt

    @dt.kernel(config=dt.Config(block_sizes=[16, 32]))
    def add_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in dt.tile(out.size()):
            out[tile] = x[tile] + y[tile] * 2
        return out

    op = newt.library.custom_op(_name("dt_add_rows"), add_rows, mutates_args=())

    def model(x, y):
        return torch.tanh(op(x * 3, y)).mean(dim=0)

    x, y = torch.randn(40, 50), torch.randn(40, 50)
    rec = _Recorder()
    got = torch.compile(model, backend=rec, fullgraph=True)(x, y)
    torch.testing.assert_close(got, torch.tanh(x * 3 + y * 2).mean(dim=0))
    assert len(rec.graphs) == 1 and any("dt_add_rows" in t for t in rec.targets()), rec.targets()


def test_importing_newt_library_does_not_import_torch():
    code = textwrap.dedent("""
        import sys, newt, newt.library
        newt.library.wrap, newt.library.custom_op
        print("TORCH", "torch" in sys.modules)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "TORCH False" in r.stdout


@pytest.mark.gpu
def test_on_the_gpu_with_inductor():
    scale_add = _scale_add_op()
    torch._dynamo.reset()

    def model(x, y):
        return torch.relu(scale_add(x * 2, y, 0.25)) @ y.T

    x = torch.randn(64, 256, device="cuda")
    y = torch.randn(64, 256, device="cuda")
    compiled = torch.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x, y), model(x, y), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_a_deuteron_kernel_on_the_gpu_with_inductor():
    import deuteron as dt

    @dt.kernel(config=dt.Config(block_sizes=[32, 64]))
    def mul_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in dt.tile(out.size()):
            out[tile] = x[tile] * y[tile]
        return out

    op = newt.library.custom_op(_name("dt_mul_rows"), mul_rows, mutates_args=())
    torch._dynamo.reset()
    x = torch.randn(128, 96, device="cuda", dtype=torch.float16)
    y = torch.randn(128, 96, device="cuda", dtype=torch.float16)
    compiled = torch.compile(lambda a, b: op(a + 1, b).float().sum(dim=1), fullgraph=True)
    torch.testing.assert_close(compiled(x, y), ((x + 1) * y).float().sum(dim=1), rtol=2e-2, atol=2e-2)
