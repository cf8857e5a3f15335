"""The static checker: D001..D005 at exact positions, notes for hover, never importing torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
from dt_helpers import ROOT, check


def diags(fa, code=None):
    return [(d.code, d.span.line, d.span.col) for d in fa.diagnostics if code is None or d.code == code]


def expect(body, code, severity="error", contains=None):
    fa, marks, _ = check(body)
    assert marks, "the test needs a « marker"
    got = diags(fa)
    for ln, col in marks:
        hits = [d for d in fa.diagnostics if d.code == code and (d.span.line, d.span.col) == (ln, col)]
        assert hits, f"expected {code} at {ln}:{col}, got {got}\n" + "\n".join(d.format() for d in fa.diagnostics)
        assert str(hits[0].severity) == severity
        if contains:
            assert contains in hits[0].message, hits[0].message
    unexpected = [g for g in got if g[0] == code and (g[1], g[2]) not in marks]
    assert not unexpected, f"unexpected {code}: {unexpected}"
    return fa


GOOD = """
@dt.kernel
def softmax(x):
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in dt.tile(m):
        row = x[tile_m, :].to(torch.float32)
        e = torch.exp(row - torch.amax(row, dim=1, keepdim=True))
        out[tile_m, :] = (e / e.sum(dim=1, keepdim=True)).to(out.dtype)
    return out
"""


def test_clean_kernel_has_no_diagnostics():
    fa, _, _ = check(GOOD)
    assert fa.diagnostics == []
    (k,) = fa.kernels
    assert k.kind == "deuteron" and k.name == "softmax"
    assert k.span.line == 6 and k.span.col == 5


def test_examples_are_clean():
    from newt.frontend import analyze_source
    for p in sorted((ROOT / "examples" / "deuteron").glob("*.py")):
        fa = analyze_source(p.read_text(), str(p))
        assert [d.format() for d in fa.diagnostics if d.code.startswith("D")] == [], p.name
        assert any(k.kind == "deuteron" for k in fa.kernels), p.name


def test_d001_tensor_work_on_the_host_is_a_warning():
    expect("""
    @dt.kernel
    def f(x):
        y = «x * 2
        z = «torch.exp(x)
        w = «x.sum()
        out = torch.empty_like(x)
        v = x.view(-1)
        for tile in dt.tile(out.size(0)):
            out[tile] = y[tile]
        return out
    """, "D001", severity="warning")


def test_d001_spares_combining_the_kernels_partial_results_after_the_loops():
    """A split reduction's second stage on the host (Helion's layer-norm backward: ``partial.sum(0)`` of the
    blocks the kernel stored) is meant as host work: no D001 there; host work on the inputs, or on a stored
    tensor before the loop or mixed with an input after it, still gets one."""
    expect("""
    @dt.kernel
    def f(x, w):
        m, n = x.shape
        part = torch.empty([4, n], dtype=torch.float32, device=x.device)
        y = «w * 2
        for tile_n in dt.tile(n):
            acc = dt.zeros([tile_n], dtype=torch.float32)
            for tile_m in dt.tile(m):
                acc += x[tile_m, tile_n].sum(0)
            part[0, tile_n] = acc
        total = part.sum(0).to(w.dtype)
        scaled = «part * w
        return total, y, scaled
    """, "D001", severity="warning")


def test_d002_rank_mismatch_from_unpacked_shape():
    expect("""
    @dt.kernel
    def f(x):
        m, n = x.shape
        out = torch.empty([m, n], device=x.device)
        for tile_m in dt.tile(m):
            out[tile_m, :] = «x[tile_m]
            «out[tile_m, :, 0] = 1.0
        return out
    """, "D002", contains="rank 2")


def test_d002_rank_from_allocations():
    expect("""
    @dt.kernel
    def f(x):
        acc = torch.zeros(4, 8, 16, device=x.device)
        out = torch.empty_like(acc)
        for t in dt.tile(4):
            out[t, :, :] = «acc[t, :]
        return out
    """, "D002")


def test_d003_tile_misuse():
    expect("""
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            a = «tile / 2 + (tile + 1)
            b = «tile.start
            c = range(«tile)
            out[tile] = x[tile]
        t = «dt.tile(4)
        return out
    """, "D003")


def test_d003_tile_used_after_its_loop():
    expect("""
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            out[tile] = x[tile]
        print(«tile)
        return out
    """, "D003", contains="outside its loop")


def test_a_grid_of_four_dimensions_is_not_an_error():
    """One program-id axis, decomposed, covers any number of grid dimensions (Helion's mamba2 kernels use
    four); it runs in test_dt_helion_options."""
    fa, _, _ = check("""
    @dt.kernel
    def f(x):
        for a, b, c, d in dt.tile([1, 2, 3, 4]):
            x[a, b, c, d] = 0
        return x
    """)
    assert fa.diagnostics == []


def test_d004_unsupported_statements_and_ops():
    expect("""
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            «while True:
                pass
            y = «torch.sort(x[tile])
            «return out
            z = «[v for v in range(3)]
        return out
    """, "D004")


def test_d004_device_value_read_by_the_host():
    expect("""
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            s = x[tile].sum()
            out[tile] = x[tile]
        return «s
    """, "D004", contains="cannot be read by the host")


def test_d004_host_only_call_inside_loop():
    expect("""
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            bs = «dt.register_block_size(64)
            out[tile] = x[tile]
        return out
    """, "D004", contains="host code")


def test_d005_config_literals():
    fa = expect("""
    @dt.kernel(config=dt.Config(block_sizes=[«100], «num_warps=3, «pid_type="zigzag"))
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            out[tile] = x[tile]
        return out
    """, "D005")
    d = [d for d in fa.diagnostics if "not a power of two" in d.message][0]
    assert d.hint == "use 128"


def test_d005_wrong_number_of_block_sizes():
    expect("""
    @dt.kernel(configs=[dt.Config(block_sizes=«[64]), dt.Config(block_sizes=[64, 32, 16])])
    def f(x, y):
        m, k = x.shape
        _, n = y.shape
        out = torch.empty([m, n], device=x.device)
        for tm, tn in dt.tile([m, n]):
            acc = dt.zeros([tm, tn])
            for tk in dt.tile(k):
                acc = acc + x[tm, tk] @ y[tk, tn]
            out[tm, tn] = acc
        return out
    """, "D005", contains="3 tunable block size")


def test_d005_a_tile_over_a_registered_block_size_is_that_registration_s_slot():
    """``block_size=bm`` with ``bm = dt.register_block_size(...)`` adds no slot of its own (Helion's attention
    backward: two registrations, two tiles over them, ``block_sizes=[64, 64]``); a wrong count still is D005."""
    src = """
    @dt.kernel(config=dt.Config(block_sizes=[64, 32]))
    def f(x):
        m, n = x.shape
        bm = dt.register_block_size(m)
        bn = dt.register_block_size(n)
        out = torch.empty_like(x)
        for tm in dt.tile(m, block_size=bm):
            for tn in dt.tile(n, block_size=bn):
                out[tm, tn] = x[tm, tn]
        return out
    """
    fa, _, _ = check(src)
    assert [d for d in fa.diagnostics if d.code == "D005"] == [], [d.format() for d in fa.diagnostics]
    expect(src.replace("block_sizes=[64, 32]", "block_sizes=«[64, 32, 16]"), "D005", contains="2 tunable block size")


def test_config_atomic_indexing_is_a_field():
    fa, _, _ = check("""
    @dt.kernel(config=dt.Config(block_sizes=[64], atomic_indexing="tensor_descriptor"))
    def f(x, out):
        for tile in dt.tile(x.size(0)):
            dt.atomic_add(out, [tile], x[tile])
        return out
    """)
    assert [d for d in fa.diagnostics if d.code == "D005"] == [], [d.format() for d in fa.diagnostics]
    from deuteron.config import Config, ConfigError
    assert Config(atomic_indexing=["pointer", "tensor_descriptor"]).to_dict()["atomic_indexing"][1] == \
        "tensor_descriptor"
    with pytest.raises(ConfigError, match="atomic_indexing must be one of"):
        Config(atomic_indexing="ptr")


def test_d005_unknown_option_effort_and_tunable_names():
    expect("""
    @dt.kernel(«autotune_efort="quick")
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0)):
            out[tile] = x[tile]
        return out

    @dt.kernel(autotune_effort=«"max", config=dt.Config(«unroll=2, flag=True))
    def g(x):
        out = torch.empty_like(x)
        flag = dt.register_tunable("flag", dt.Bool())
        for tile in dt.tile(x.size(0)):
            out[tile] = x[tile]
        return out
    """, "D005")


def test_d005_non_power_of_two_block_size_argument():
    expect("""
    @dt.kernel
    def f(x):
        out = torch.empty_like(x)
        for tile in dt.tile(x.size(0), block_size=«100):
            out[tile] = x[tile]
        return out
    """, "D005")


def test_from_import_and_alias_spellings():
    fa, _, _ = check("""
    from deuteron import kernel, tile
    import deuteron

    @kernel
    def f(x):
        out = torch.empty_like(x)
        for t in tile(x.size(0)):
            out[t] = x[t] + 1
        return out

    @deuteron.kernel
    def g(x):
        for t in deuteron.tile(x.size(0)):
            y = t / 2
        return x
    """)
    assert [k.kind for k in fa.kernels] == ["deuteron", "deuteron"]
    assert diags(fa, "D003") == [("D003", 18, 13)]


def test_notes_for_hover():
    fa, _, src = check(GOOD)
    notes = {sp: n.describe() for sp, n in fa.kernels[0].results[0].notes.items()}
    lines = src.splitlines()

    def at(line, text):
        col = lines[line - 1].index(text) + 1
        return [v for sp, v in notes.items() if sp.line == line and sp.col == col]

    assert any("launch grid" in v for v in at(9, "tile_m"))
    assert any("config.block_sizes[0] (tile_m)" in v for v in at(9, "dt.tile(m)"))
    assert any("load of x[tile_m, :]" in v for v in at(10, "x[tile_m, :]"))
    assert any("store into out[tile_m, :]" in v for v in at(12, "out[tile_m, :]"))


def test_broken_file_does_not_crash():
    fa, _, _ = check("""
    @dt.kernel
    def f(x):
        for tile in dt.tile(x.size(0):
            out[tile] =
    """)
    assert any(d.code == "N001" for d in fa.diagnostics)


@pytest.mark.parametrize("mod", ["deuteron", "deuteron.frontend"])
def test_no_torch_import(mod):
    code = (f"import sys, time; t=time.perf_counter(); import {mod}; "
            "from newt.frontend import analyze_source; "
            "analyze_source(open(sys.argv[1]).read(), 'x.py'); "
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:5]; "
            "print(time.perf_counter() - t)")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "deuteron" / "attention.py")],
                       capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"})
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.strip()) < 2.0


def test_a_place_two_analyses_describe_shows_both():
    # the structure's note (what a load or a tile is) and the shape inference's (its block shape and dtype)
    fa, _, src = check(GOOD)
    notes = {sp: n for sp, n in fa.kernels[0].results[0].notes.items()}
    lines = src.splitlines()
    col = lines[9].index("x[tile_m, :]") + 1
    (note,) = [n for sp, n in notes.items() if sp.line == 10 and sp.col == col and sp.end_col == col + 12]
    text = note.describe()
    assert text.startswith("block ") and "[tile_m, " in text and "load of x[tile_m, :]" in text
    assert getattr(note, "dims", None)  # inlay hints still read the value's dims
