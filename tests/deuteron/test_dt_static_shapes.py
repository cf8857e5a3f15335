"""The static tile-shape inference (deuteron/shape_check.py): D006 before any trace, at the tracer's line and
column with the tracer's message; no diagnostic on valid kernels or on any shipped / Helion example."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest
from dt_helpers import HEADER, ROOT, check, locate

import deuteron  # (registers @dt.kernel with the front end)


def d006(fa):
    return [d for d in fa.diagnostics if d.code == "D006"]


def expect_d006(body, contains):
    fa, marks, _ = check(body)
    got = [(d.span.line, d.span.col) for d in d006(fa)]
    assert got == marks, (got, marks, [d.format() for d in fa.diagnostics])
    for piece in contains:
        assert any(piece in d.message for d in d006(fa)), [d.message for d in d006(fa)]
    return fa


TRANSPOSED = """
@dt.kernel
def add_t(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = «x[tm, tn] + y[tn, tm]
    return out
"""

ROW_STORE = """
@dt.kernel
def row_store(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty([m], dtype=x.dtype, device=x.device)
    for tile_m in dt.tile(m):
        «out[tile_m] = x[tile_m, :]
    return out
"""

DOC_EXAMPLE = """
@dt.kernel
def doc_ex(a: torch.Tensor) -> torch.Tensor:
    m, n = a.shape
    out = torch.empty_like(a)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = «a[tm, tn] + a[tm, tn].T
    return out
"""

# equal fixed block sizes: the tiles still are two sizes (the tracer's and Helion's symbols)
SAME_BLOCKS = """
@dt.kernel
def same_blocks(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm, tn in dt.tile([m, n], block_size=[32, 32]):
        out[tm, tn] = «x[tm, tn] * y[tn, tm]
    return out
"""

TRANSPOSED_STORE = """
@dt.kernel
def tstore(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm, tn in dt.tile([m, n]):
        v = x[tm, tn] * 2.0
        «out[tn, tm] = v
    return out
"""

MATMUL_INNER = """
@dt.kernel
def mm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    k2, n = y.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn], dtype=torch.float32)
        for tk in dt.tile(k):
            acc = acc + «x[tm, tk] @ y[tn, tk]
        out[tm, tn] = acc
    return out
"""

MATMUL_DTYPES = """
@dt.kernel
def mmd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    k2, n = y.shape
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn], dtype=torch.float32)
        for tk in dt.tile(k):
            a = x[tm, tk].to(torch.float16)
            acc = acc + «a @ y[tk, tn].float()
        out[tm, tn] = acc
    return out
"""


def test_transposed_tiles_are_d006_at_the_operator():
    fa = expect_d006(TRANSPOSED, ["shapes [tm, tn] and [tn, tm] do not broadcast together"])
    assert "transpose" in d006(fa)[0].hint


def test_a_row_block_stored_into_a_row_is_d006_at_the_target():
    fa = expect_d006(ROW_STORE, ["storing a value of shape [tile_m, :n] into out[tile_m]"])
    assert "more dimensions" in d006(fa)[0].hint


def test_the_diagnostics_md_example_is_d006():
    expect_d006(DOC_EXAMPLE, ["shapes [tm, tn] and [tn, tm]"])


def test_equal_block_sizes_are_still_two_tiles():
    expect_d006(SAME_BLOCKS, ["shapes [tm, tn] and [tn, tm]"])


def test_transposed_store_and_matmul_inner_dims():
    expect_d006(TRANSPOSED_STORE, ["storing a value of shape [tm, tn] into out[tn, tm]"])
    expect_d006(MATMUL_INNER, ["matmul inner dimensions differ: [tm, tk] @ [tn, tk]"])


def test_a_matmul_of_two_known_dtypes_is_d007():
    fa, marks, _ = check(MATMUL_DTYPES)
    got = [(d.span.line, d.span.col, d.message) for d in fa.diagnostics if d.code == "D007"]
    assert [g[:2] for g in got] == marks
    assert got[0][2] == ("matmul of torch.float16 and torch.float32 blocks: torch.matmul needs both operands of "
                         "one dtype")
    # dt.dot and addmm accumulate mixed inputs: no D007
    for ok in ("dt.dot(a, y[tk, tn].float(), acc=acc)", "torch.addmm(acc, a, y[tk, tn].float())"):
        fa, _, _ = check(MATMUL_DTYPES.replace("acc + «a @ y[tk, tn].float()", ok))
        assert not [d for d in fa.diagnostics if d.code == "D007"], ok


def test_helion_spelling_is_checked_the_same():
    body = """
    import helion
    import helion.language as hl


    @helion.kernel(autotune_effort="none")
    def add_t(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m, n = x.size()
        out = torch.empty_like(x)
        for tm, tn in hl.tile([m, n]):
            out[tm, tn] = «x[tm, tn] + y[tn, tm]
        return out
    """
    expect_d006(body, ["shapes [tm, tn] and [tn, tm]"])


VALID = """
@dt.kernel
def valid(x: torch.Tensor, y: torch.Tensor, b: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    n2, k = w.shape
    out = torch.empty_like(x)
    col = torch.empty([n], dtype=x.dtype, device=x.device)
    mm = torch.empty([m, k], dtype=x.dtype, device=x.device)
    bs = dt.register_block_size(n)
    for tm, tn in dt.tile([m, n]):
        outer = b[tm, None] * b[None, tn]           # [tm, 1] * [1, tn]
        yt = y[tn, tm].T                            # transposed back
        p = y[tn, tm].permute(1, 0)
        s = x[tm, tn] + yt + p + outer + 1.0
        s = s + x[tm, tn].sum(dim=1, keepdim=True)  # [tm, tn] + [tm, 1]
        s = s + r[tm, :].sum(-1)[:, None]           # a reduction over a whole dimension
        s = torch.where(s > 0, s, 0.0)
        out[tm, tn] = s
        col[tn] = x[tm, tn].sum(0)
    for tm in dt.tile(m):
        row = x[tm, :]
        out[tm, :] = row - torch.amax(row, dim=1, keepdim=True)
        out[tm, 0:4] = x[tm, 0:4]
        z = dt.zeros([tm, bs], dtype=torch.float32)
        t2 = z + x[tm, 0:bs]                        # a registered block size: not checked statically
        out[tm, 0:bs] = t2
    for tm, tk in dt.tile([m, k]):
        acc = dt.zeros([tm, tk], dtype=torch.float32)
        for tn in dt.tile(n):
            acc = torch.addmm(acc, x[tm, tn], w[tn, tk])
            acc += dt.dot(x[tm, tn], w[tn, tk])
        mm[tm, tk] = acc
    for tile in dt.tile([m, n]):
        out[tile[0], tile[1]] = x[tile[0], tile[1]] * x[tile[0], tile[1]]
    return out
"""


def test_valid_kernels_get_no_shape_diagnostic():
    fa, _, _ = check(VALID)
    assert not d006(fa), [d.format() for d in d006(fa)]


def test_a_tile_against_a_whole_dimension_is_unknown_not_an_error():
    # x[tm, :] against y[tm, tn]: the tracer accepts it when the whole dimension has size 1, so stay silent
    fa, _, _ = check("""
    @dt.kernel
    def k(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m, n = y.shape
        out = torch.empty_like(y)
        for tm, tn in dt.tile([m, n]):
            out[tm, tn] = x[tm, :] + y[tm, tn]
        return out
    """)
    assert not d006(fa)


def test_values_are_noted_with_their_shapes_and_dtypes():
    fa, _, src = check(VALID)
    ka = next(k for k in fa.kernels if k.name == "valid")
    lines = src.splitlines()
    by_line = {(lines[sp.line - 1].strip(), lines[sp.line - 1][sp.col - 1:sp.end_col - 1]): str(v)
               for sp, v in ka.results[0].notes.items()
               if sp.line == sp.end_line and getattr(v, "kind", None) == "value"}
    notes = {text: v for (_, text), v in by_line.items()}
    assert notes["outer"] == "block [tm, tn]"
    assert by_line[("acc = dt.zeros([tm, tk], dtype=torch.float32)", "acc")] == "block fp32[tm, tk]"
    # fp32 + a product of loads of unknown dtype: the dtype is unknown (fp64 operands would promote), the shape not
    assert by_line[("acc += dt.dot(x[tm, tn], w[tn, tk])", "acc")] == "block [tm, tk]"
    assert notes["s > 0"] == "block i1[tm, tn]"
    assert "z" not in notes  # a registered block size: its dimension is unknown here, no hint
    assert notes["row"] == "block [tm, :n]"
    assert notes["x[tm, tn].sum(dim=1, keepdim=True)"] == "block [tm, 1]"


def _agrees_with_the_tracer(tmp_path, body, monkeypatch):
    """The tracer alone (the static inference switched off) reports the same D006 at the same place."""
    import importlib.util

    import torch

    import deuteron.structure as structure
    monkeypatch.setattr(structure, "infer_loop_shapes", lambda st, loop, concrete=None: ([], []))
    src, marks = locate(HEADER + textwrap.dedent(body).lstrip("\n"))
    p = tmp_path / f"mod_{abs(hash(body))}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(p.stem, str(p))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kern = next(v for v in vars(mod).values() if isinstance(v, deuteron.Kernel))
    nargs = len(kern.fn.__code__.co_varnames[:kern.fn.__code__.co_argcount])
    from deuteron.errors import DeuteronError
    with pytest.raises(DeuteronError) as ei:
        kern(*[torch.randn(32, 32) for _ in range(nargs)])
    d = ei.value.diagnostics[0]
    return d.code, (d.span.line, d.span.col), d.message, marks


@pytest.mark.parametrize("body", [TRANSPOSED, ROW_STORE, DOC_EXAMPLE, SAME_BLOCKS, TRANSPOSED_STORE, MATMUL_INNER,
                                  MATMUL_DTYPES],
                         ids=["transposed", "row_store", "doc", "same_blocks", "tstore", "matmul", "matmul_dtypes"])
def test_the_static_report_is_where_the_tracer_reports(tmp_path, monkeypatch, body):
    fa, _, _ = check(body)
    static = [d for d in fa.diagnostics if d.code in ("D006", "D007")][0]
    code, pos, message, marks = _agrees_with_the_tracer(tmp_path, body, monkeypatch)
    assert code == static.code and [pos] == marks == [(static.span.line, static.span.col)]
    # the same message, but for whole dimensions, which the tracer names by their size (:32) and we by symbol
    assert message.replace(":32", ":n") == static.message


def test_newt_check_reports_the_mistakes_before_any_run(tmp_path):
    src, marks = locate(HEADER + textwrap.dedent(TRANSPOSED).lstrip("\n") + "\n\n" + textwrap.dedent(ROW_STORE))
    p = tmp_path / "mistakes.py"
    p.write_text(src)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "newt", "check", str(p)], capture_output=True, text=True, env=env,
                       cwd=str(ROOT), timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    (l1, c1), (l2, c2) = marks
    assert f"{p}:{l1}:{c1}: error[D006] shapes [tm, tn] and [tn, tm] do not broadcast together" in r.stdout, r.stdout
    assert f"{p}:{l2}:{c2}: error[D006] storing a value of shape [tile_m, :n] into out[tile_m]" in r.stdout, r.stdout


def _example_files():
    files = sorted(glob.glob(str(ROOT / "examples" / "deuteron" / "*.py")))
    files += sorted(glob.glob(str(ROOT / "tests" / "deuteron" / "*.py")))
    files += sorted(glob.glob("/work/ext/helion/examples/**/*.py", recursive=True))
    return files


def test_no_new_error_on_any_shipped_or_helion_example(monkeypatch):
    """Every deuteron kernel of the examples, the tests and Helion's examples (read through the helion alias):
    the inference adds no diagnostic, and it does infer shapes there (it is not silent by doing nothing); the
    same with the shapes of the files' launches, which many of them have (``launch_shapes``)."""
    import deuteron.frontend as frontend
    import deuteron.structure as structure
    from newt.frontend import analyze_source
    real = structure.infer_loop_shapes
    real_launches = frontend.launch_shapes
    launched = []

    def counting(scan, fdef, st):
        got = real_launches(scan, fdef, st)
        launched.extend(run for run in got if structure.infer_loop_shapes is real)
        return got
    monkeypatch.setattr(frontend, "launch_shapes", counting)
    kernels = noted = 0
    for f in _example_files():
        text = open(f, encoding="utf-8").read()
        monkeypatch.setattr(structure, "infer_loop_shapes", lambda st, loop, concrete=None: ([], []))
        before = {(d.code, d.span, d.message) for d in analyze_source(text, f).diagnostics}
        monkeypatch.setattr(structure, "infer_loop_shapes", real)
        fa = analyze_source(text, f)
        after = {(d.code, d.span, d.message) for d in fa.diagnostics}
        assert after == before, (f, after - before)
        for ka in fa.kernels:
            if getattr(ka, "kind", None) == "deuteron":
                kernels += 1
                noted += any(getattr(v, "kind", None) == "value" for v in ka.results[0].notes.values())
    assert kernels >= 8 and noted >= kernels // 2, (kernels, noted)
    assert len(launched) >= 20, len(launched)  # (98 launches of 89 kernels with Helion's examples, 2026-12-06)


def test_a_store_into_a_tensor_of_unknown_rank_is_left_to_the_tracer():
    # out's rank is unknown here: with rank 2 the tracer reports D002 (partial indexing), not D006
    fa, _, _ = check("""
    def make(m, n):
        return torch.empty(m, n)


    @dt.kernel
    def k(x: torch.Tensor) -> torch.Tensor:
        m, n = x.shape
        out = make(m, n)
        for tile_m in dt.tile(m):
            out[tile_m] = x[tile_m, :]
        return out
    """)
    assert not d006(fa)


def test_clamp_with_block_bounds_broadcasts_them():
    fa, _, src = check("""
    @dt.kernel
    def k(x: torch.Tensor, r: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
        m, n = x.shape
        out = torch.empty_like(x)
        for tm, tn in dt.tile([m, n]):
            c = torch.clamp(r[tm, None], lo[None, tn])
            out[tm, tn] = c
        return out
    """)
    assert not d006(fa)
    ka = fa.kernels[0]
    assert any(str(v) == "block [tm, tn]" and sp.line == 10 for sp, v in ka.results[0].notes.items()
               if getattr(v, "kind", None) == "value"), src


_ATOMS = ["x[tm, tn]", "x[tn, tm]", "y[tm, tn].T", "x[tm, tn].sum(1, keepdim=True)", "x[tm, tn].sum(0)",
          "v1[tm, None]", "v1[None, tn]", "v1[tn]", "x[tm, :]", "torch.exp(y[tn, tm])", "2.0",
          "dt.zeros([tn, tm], dtype=torch.float32)", "(x[tm, tn] @ y[tn, tn])", "x[tm, tn].permute(1, 0)",
          "torch.amax(x[tn, tm], dim=0)", "v1[tm].unsqueeze(1)", "x[tm, tn].sum(1)[:, None]",
          "torch.where(x[tm, tn] > 0, y[tn, tm], 0.0)", "tm.index[None, :]", "x[tm, tn].to(torch.float16)"]
_STORES = ["out[tm, tn]", "out[tn, tm]", "o1[tm]", "o1[tn]"]


def _random_kernels(seed: int, count: int):
    import random
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        a, b = rnd.choice(_ATOMS), rnd.choice(_ATOMS)
        op = rnd.choice(["+", "*", "-"])
        target = rnd.choice(_STORES)
        out.append(f"""
@dt.kernel(config=dt.Config(block_sizes=[16, 16]))
def k{i}(x: torch.Tensor, y: torch.Tensor, v1: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    o1 = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm, tn in dt.tile([m, n]):
        v = {a} {op} {b}
        {target} = v
    return out
""")
    return out


def _static_and_traced(tmp_path, monkeypatch, bodies: list, launch, stem: str, with_message: bool = False):
    """({kernel: its first static D006/D007}, [(kernel, what the tracer alone reports, or None)]) of the kernels
    ``k0``, ``k1`` ... of ``bodies``: the file is analyzed, then imported with the static inference switched off
    and each kernel launched by ``launch(module, i)``; a kernel with another structural error is left out of the
    static side (the call stops there: a tile twice in one access is D003)."""
    import importlib.util

    import deuteron.structure as structure
    from deuteron.errors import DeuteronError
    from newt.frontend import analyze_source
    text = HEADER + "".join(bodies)
    fa = analyze_source(text, f"{stem}.py")
    static, other = {}, set()
    for d in fa.diagnostics:
        if d.code in ("D006", "D007"):
            static.setdefault(d.kernel, (d.code, d.span.line, d.span.col) + ((d.message,) if with_message else ()))
        elif d.severity.name == "ERROR":
            other.add(d.kernel)
    static = {k: v for k, v in static.items() if k not in other}
    p = tmp_path / f"{stem}.py"
    p.write_text(text)
    monkeypatch.setattr(structure, "infer_loop_shapes", lambda st, loop, concrete=None: ([], []))
    spec = importlib.util.spec_from_file_location(stem, str(p))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    traced = []
    for i in range(len(bodies)):
        try:
            launch(mod, i)
            got = None
        except DeuteronError as e:
            d = e.diagnostics[0]
            got = (d.code, d.span.line, d.span.col) + ((d.message,) if with_message else ())
        traced.append((f"k{i}", got))
    return static, traced


def test_every_static_report_is_a_trace_error_at_the_same_place(tmp_path, monkeypatch):
    """Random combinations of tiles, transposes, reductions, broadcasts and stores: whenever the static inference
    reports D006/D007, the tracer alone (the inference switched off) fails with the same code at the same line and
    column; where the tracer accepts a kernel, the inference reports nothing."""
    import torch
    bodies = _random_kernels(seed=25, count=80)
    n = 32
    static, traced = _static_and_traced(tmp_path, monkeypatch, bodies, lambda mod, i: getattr(mod, f"k{i}")(
        torch.randn(n, n), torch.randn(n, n), torch.randn(n)), "fuzz_kernels")
    for i, (name, got) in enumerate(traced):
        if name in static:
            assert got == static[name], (name, static[name], got, bodies[i])
    accepted = sum(got is None for _, got in traced)
    assert static and accepted, (static, accepted)  # both kinds of kernels occur


_CONCRETE_ATOMS = ["x[tm, :]", "y[tm, :]", "x[tm, tn]", "x[tm, :].sum(1, keepdim=True)", "dt.zeros([tm, 16], "
                   "dtype=torch.float32)", "dt.zeros([tm, 32], dtype=torch.float32)", "(x[tm, :] @ w[:, tn])",
                   "y[tm, :].T.T", "h[tm, :]", "(h[tm, :] @ w[:, tn])", "2.0", "v1[tm, None]"]
_CONCRETE_STORES = ["out[tm, :]", "out[tm, tn]", "o1[tm]", "o2[tm]"]


def _random_concrete_kernels(seed: int, count: int):
    """Kernels launched in the file with random sizes (16 / 32 / 1 columns) and dtypes (fp32 / fp16)."""
    import random
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        a, b = rnd.choice(_CONCRETE_ATOMS), rnd.choice(_CONCRETE_ATOMS)
        target = rnd.choice(_CONCRETE_STORES)
        nx, ny, nw = (rnd.choice([16, 32, 1]) for _ in range(3))
        hdt = rnd.choice(["torch.float32", "torch.float16"])
        o2 = rnd.choice(["32", f"32, {nx}"])  # the output a parameter: rank 1 or 2 (D002 for o2[tm])
        out.append(f"""
@dt.kernel(config=dt.Config(block_sizes=[16, 16]))
def k{i}(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, h: torch.Tensor, v1: torch.Tensor,
        o2: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    o1 = torch.empty([m], dtype=x.dtype, device=x.device)
    for tm, tn in dt.tile([m, n]):
        v = {a} + {b}
        {target} = v
    return out


def launch{i}():
    x = torch.randn(32, {nx})
    return k{i}(x, torch.randn(32, {ny}), torch.randn({nw}, {nx}), torch.randn(32, {nx}, dtype={hdt}),
               torch.randn(32), torch.empty({o2}))
""")
    return out


def test_every_report_with_the_files_launch_shapes_is_the_tracers(tmp_path, monkeypatch):
    """Random kernels launched in the file with random sizes and dtypes: whenever the static inference reports
    D006/D007 with the launch's shapes, the tracer alone, running that launch, fails with the same code, line,
    column and message; where the tracer accepts the launch, nothing is reported."""
    bodies = _random_concrete_kernels(seed=2512, count=48)
    static, traced = _static_and_traced(tmp_path, monkeypatch, bodies, lambda mod, i: getattr(mod, f"launch{i}")(),
                                        "fuzz_concrete", with_message=True)
    concrete_only = 0
    for i, (name, got) in enumerate(traced):
        if name in static:
            assert got == static[name], (name, static[name], got, bodies[i])
            # a report only the launch's sizes or dtypes make (a whole dimension's size, fp16 against fp32)
            concrete_only += bool(re.search(r":\d", static[name][3])) or "torch.float16" in static[name][3]
    accepted = sum(got is None for _, got in traced)
    assert static and accepted and concrete_only, (static, accepted, concrete_only)
