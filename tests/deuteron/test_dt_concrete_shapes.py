"""deuteron kernels checked with the shapes the file gives (issue 25): ``newt check`` and the editor read the
kernel's launches in the file (a call with tensor constructors, Helion's ``run_example``, a ``newt.harness``
example), follow the tensors to their constructors without running anything, and report what only those sizes
and dtypes reveal -- D006/D007 at the tracer's line and column with the tracer's message.  Each case is also run
through the real tracer (the static checks switched off) with the file's own launch: the same report."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
from dt_helpers import HEADER, check, locate

import deuteron  # noqa: F401  (registers @dt.kernel with the front end)


def _reports(fa, codes=("D002", "D006", "D007")):
    return [(d.code, d.span.line, d.span.col, d.message) for d in fa.diagnostics if d.code in codes]


def _traced(tmp_path, monkeypatch, body: str, launch: str):
    """What the tracer alone reports when the file's ``launch()`` runs: (code, line, col, message) or None."""
    import deuteron.structure as structure
    from deuteron.errors import DeuteronError
    monkeypatch.setattr(structure, "infer_loop_shapes", lambda st, loop, concrete=None: ([], []))
    src, _ = locate(HEADER + textwrap.dedent(body).lstrip("\n"))
    p = tmp_path / f"conc_{abs(hash(body))}.py"
    p.write_text(src)
    spec = importlib.util.spec_from_file_location(p.stem, str(p))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        getattr(mod, launch)()
    except DeuteronError as e:
        d = e.diagnostics[0]
        return d.code, d.span.line, d.span.col, d.message
    return None


# a module constant and a size passed to the function that builds the tensors (check(32) in main)
MATMUL_WHOLE = """
M = 64


@dt.kernel
def mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    k2, n = w.shape
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = «x[tm, :] @ w[:, tn]
    return out


def check(n):
    x = torch.randn([M, 64], dtype=torch.float16)
    w = torch.randn(128, n).half()
    return mm(x, w)


def main():
    check(32)
"""

# the output is a parameter: its rank comes from the launch only
ROW_STORE_PARAM = """
@dt.kernel
def row_store(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    for tile_m in dt.tile(m):
        «out[tile_m] = x[tile_m, :]
    return out


def main():
    x = torch.randn(48, 16)
    out = torch.empty(48)
    row_store(x, out)
"""

# Helion's example harness: run_example(kernel, baseline, args)
WHOLE_DIMS_DIFFER = """
@dt.kernel
def add_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm in dt.tile(m):
        out[tm, :] = «x[tm, :] + y[tm, :]
    return out


def run_example(kernel, baseline, args):
    return kernel(*args)


def main():
    x = torch.randn(64, 32)
    run_example(add_rows, torch.add, (x, torch.randn(64, 16)))
"""

# a tile against a whole dimension of 32 (symbolically it might be 1: silent without the launch)
TILE_VS_WHOLE = """
@dt.kernel
def add_tw(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    for tm, tn in dt.tile([m, n]):
        out[tm, tn] = «x[tm, tn] + y[tm, :]
    return out


def main():
    x = torch.randn(32, 64)
    add_tw(x.t().contiguous(), torch.randn(64, 32))
"""

# a newt.harness example; the dtypes come from .to(...)
MATMUL_DTYPES = """
import newt.harness


@dt.kernel
def mmd(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    k2, n = w.shape
    out = torch.empty([m, n], dtype=torch.float32, device=x.device)
    for tm, tn in dt.tile([m, n]):
        acc = dt.zeros([tm, tn], dtype=torch.float32)
        for tk in dt.tile(k):
            acc = acc + «x[tm, tk] @ w[tk, tn]
        out[tm, tn] = acc
    return out


@newt.harness.example(mmd)
def ex(device):
    x = torch.randn(32, 32, device=device).to(torch.float16)
    return newt.harness.Case(args=(x, torch.randn(32, 16, device=device)))


def main():
    mmd(*ex("cpu").args)
"""

# a registered block size, a literal size in dt.zeros and a whole dimension of the launch's size
REGISTERED_BLOCK = """
@dt.kernel
def blk(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    bm = dt.register_block_size(m)
    for tm in dt.tile(m, block_size=bm):
        acc = dt.zeros([tm, 64], dtype=torch.float32)
        out[tm, :] = «acc + x[tm, :]
    return out


def main():
    blk(torch.randn(64, 128))
"""

# a parameter indexed with fewer indices than the launch's tensor has dimensions (the tracer's D002)
INDEX_RANK = """
@dt.kernel
def rows(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    for tm in dt.tile(m):
        «out[tm] = x[tm, :].sum(-1)
    return out


def main():
    rows(torch.randn(16, 8), torch.empty(16, 4))
"""

CASES = {
    "matmul_inner": (MATMUL_WHOLE, "D006", "matmul inner dimensions differ: [tm, :64] @ [:128, tn]"),
    "row_store": (ROW_STORE_PARAM, "D006", "storing a value of shape [tile_m, :16] into out[tile_m]"),
    "whole_dims": (WHOLE_DIMS_DIFFER, "D006", "shapes [tm, :32] and [tm, :16] do not broadcast together"),
    "tile_vs_whole": (TILE_VS_WHOLE, "D006", "shapes [tm, tn] and [tm, :32] do not broadcast together"),
    "matmul_dtypes": (MATMUL_DTYPES, "D007", "matmul of torch.float16 and torch.float32 blocks: torch.matmul "
                                             "needs both operands of one dtype"),
    "registered_block": (REGISTERED_BLOCK, "D006", "shapes [tm, :64] and [tm, :128] do not broadcast together"),
    "index_rank": (INDEX_RANK, "D002", "out has rank 2 (shape (16, 4)) but is indexed with 1 index [tm]"),
    # a whole dimension of one element is still a dimension of its own in a store (the tracer's words: :1)
    "row_store_one": (ROW_STORE_PARAM.replace("torch.randn(48, 16)", "torch.randn(48, 1)"), "D006",
                      "storing a value of shape [tile_m, :1] into out[tile_m]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_launch_shapes_reveal_the_mistake_at_the_users_line(case):
    body, code, message = CASES[case]
    fa, marks, _ = check(body)
    got = _reports(fa)
    assert [(c, ln, col) for c, ln, col, _ in got] == [(code, *marks[0])], [d.format() for d in fa.diagnostics]
    assert got[0][3] == message
    d = next(d for d in fa.diagnostics if d.code == code)
    assert "with the shapes of" in d.hint  # where the sizes came from


@pytest.mark.parametrize("case", sorted(CASES))
def test_without_a_launch_the_static_check_stays_silent(case):
    """The same kernels with the file's launches removed: the symbolic check alone cannot know (no report)."""
    body = CASES[case][0]
    kernel_only = body.split("\n\ndef ")[0] if "@newt.harness" not in body else body.split("\n\n@newt.harness")[0]
    fa, _, _ = check(kernel_only.replace("«", ""))
    assert not _reports(fa), [d.format() for d in fa.diagnostics]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_static_report_is_the_tracers_with_the_files_launch(tmp_path, monkeypatch, case):
    body, code, message = CASES[case]
    fa, marks, _ = check(body)
    traced = _traced(tmp_path, monkeypatch, body, "main")
    assert traced == _reports(fa)[0], (traced, _reports(fa))


VALID = {
    "matmul": MATMUL_WHOLE.replace("torch.randn(128, n)", "torch.randn(64, n)"),
    "row_store": ROW_STORE_PARAM.replace("out[tile_m] = x[tile_m, :]", "out[tile_m] = x[tile_m, :].sum(-1)"),
    "whole_dims": WHOLE_DIMS_DIFFER.replace("torch.randn(64, 16)", "torch.randn(64, 32)"),
    "tile_vs_whole": TILE_VS_WHOLE.replace("torch.randn(64, 32)", "torch.randn(64, 1)"),
    "matmul_dtypes": MATMUL_DTYPES.replace(".to(torch.float16)", ".to(torch.float32)"),
    "registered_block": REGISTERED_BLOCK.replace("torch.randn(64, 128)", "torch.randn(64, 64)"),
    "index_rank": INDEX_RANK.replace("torch.empty(16, 4)", "torch.empty(16)"),
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_launches_get_no_report_and_the_tracer_agrees(tmp_path, monkeypatch, case):
    body = VALID[case].replace("«", "")
    fa, _, _ = check(body)
    assert not _reports(fa), [d.format() for d in fa.diagnostics]
    assert _traced(tmp_path, monkeypatch, body, "main") is None


def test_a_helion_file_with_run_example_and_check_is_checked_with_its_shapes():
    """Helion's example layout, as it is: run_example from helion._testing, check(m, k, n) called by main()."""
    fa, marks, _ = check("""
    import helion
    import helion.language as hl
    from helion._testing import DEVICE, run_example


    @helion.kernel(autotune_effort="none")
    def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m, k = x.size()
        k2, n = y.size()
        out = torch.empty([m, n], dtype=x.dtype, device=x.device)
        for tile_m, tile_n in hl.tile([m, n]):
            out[tile_m, tile_n] = «x[tile_m, :] @ y[:, tile_n]
        return out


    def check(m: int, k: int, n: int) -> None:
        x = torch.randn([m, k], device=DEVICE, dtype=torch.float16)
        y = torch.randn([k * 2, n], device=DEVICE, dtype=torch.float16)
        run_example({"helion": matmul}, torch.matmul, (x, y))


    def main() -> None:
        check(256, 64, 128)


    if __name__ == "__main__":
        main()
    """)
    assert _reports(fa) == [("D006", *marks[0], "matmul inner dimensions differ: [tile_m, :64] @ [:128, tile_n]")]
    d = next(d for d in fa.diagnostics if d.code == "D006")
    assert "run_example at line" in d.hint and "x: fp16[256, 64]" in d.hint and "y: fp16[128, 128]" in d.hint


def test_a_launch_under_main_with_a_like_constructor():
    fa, marks, _ = check("""
    @dt.kernel
    def add_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m, n = x.shape
        out = torch.empty_like(x)
        for tm in dt.tile(m):
            out[tm, :] = «x[tm, :] * y[tm, :]
        return out


    if __name__ == "__main__":
        a = torch.randn(8, 48, dtype=torch.bfloat16)
        add_rows(a, torch.zeros_like(a).view(-1, 24))
    """)
    assert _reports(fa) == [("D006", *marks[0], "shapes [tm, :48] and [tm, :24] do not broadcast together")]


def test_launches_that_say_nothing_about_shapes_are_ignored():
    """Tensors the text cannot follow (a helper's result, a loaded file): silent, as without a launch."""
    fa, _, _ = check("""
    @dt.kernel
    def add_rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m, n = x.shape
        out = torch.empty_like(x)
        for tm in dt.tile(m):
            out[tm, :] = x[tm, :] + y[tm, :]
        return out


    def make(n):
        return torch.randn(4, n)


    def main(path):
        add_rows(torch.load(path), make(16))
    """)
    assert not _reports(fa)


def test_newt_check_reports_it_from_the_command_line(tmp_path):
    import os
    import subprocess
    import sys

    from dt_helpers import ROOT
    src, marks = locate(HEADER + textwrap.dedent(MATMUL_WHOLE).lstrip("\n"))
    p = tmp_path / "launched.py"
    p.write_text(src)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "newt", "check", str(p)], capture_output=True, text=True, env=env,
                       cwd=str(ROOT), timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    (line, col), = marks
    assert f"{p}:{line}:{col}: error[D006] matmul inner dimensions differ: [tm, :64] @ [:128, tn]" in r.stdout
    assert "with the shapes of the call at line 21 (x: fp16[64, 64], w: fp16[128, 32])" in r.stdout, r.stdout


def test_a_tile_over_a_size_tuple_is_not_taken_for_one_tile():
    """``for tile in dt.tile(out.size())``: a tuple of tiles when out has rank 2, which only the launch says; x[tile]
    indexes every dimension then (Helion's add example): no D002 (found on Helion's examples)."""
    fa, _, _ = check("""
    @dt.kernel
    def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        for tile in dt.tile(out.size()):
            out[tile] = x[tile] + y[tile]
        return out


    def main():
        add(torch.randn(300, 20), torch.randn(300, 20))
    """)
    assert not _reports(fa), [d.format() for d in fa.diagnostics]


def test_a_tensor_the_kernel_reassigns_in_a_branch_is_unknown():
    """Which assignment holds depends on the run (``if y.dim() == 1: y = y.unsqueeze(0)``): the launch's shape
    of y is not used for it, so no report from the branch not taken (a D002 y[tm, :] on rank 3 otherwise)."""
    fa, _, _ = check("""
    @dt.kernel
    def rows(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m, n = x.shape
        if y.dim() == 1:
            y = y.unsqueeze(0)
        out = torch.empty_like(x)
        for tm in dt.tile(m):
            out[tm, :] = x[tm, :] * y[tm, :]
        return out


    def main():
        rows(torch.randn(16, 8), torch.randn(16, 8))
    """)
    assert not _reports(fa), [d.format() for d in fa.diagnostics]


def test_a_tensor_the_launching_code_reassigns_in_a_branch_is_unknown():
    """``if transpose: y = y.t()`` before the launch: which y is passed depends on the run, so its shape is not
    used (a D006 [tm, :32] against [tm, :16] otherwise); one assigned in the launch's own loop still is."""
    kernel = WHOLE_DIMS_DIFFER.split("\n\ndef run_example")[0]
    branch = kernel + """


def main(transpose):
    x = torch.randn(64, 32)
    y = torch.randn(16, 64)
    if transpose:
        y = y.t()
    add_rows(x, y)
"""
    fa, _, _ = check(branch.replace("«", ""))
    assert not _reports(fa), [d.format() for d in fa.diagnostics]
    fa, marks, _ = check(kernel + """


def main():
    x = torch.randn(64, 32)
    for _ in range(2):
        y = torch.randn(64, 16)
        add_rows(x, y)
""")
    assert _reports(fa) == [("D006", *marks[0], "shapes [tm, :32] and [tm, :16] do not broadcast together")]
