"""The small defects of issue 23, each pinned: signature help after ``other=``, the constexpr parameter's hover,
``num_stages`` once in Compile's header, deuteron's generated ``_BLOCK_0`` names shown as the config's
``block_sizes[0]``, Autotune progress without a raw ``{config=dt.Config(...)}``."""

from __future__ import annotations

import pytest
from lsprotocol import types as lsp

from lsp_server.analysis import analyze
from lsp_server.commandinfo import header
from lsp_server.commands import config_label
from lsp_server.concrete import Concrete, concrete_spec, display_name
from lsp_server.features import signature_help
from lsp_server.hover import hover

from .conftest import ROOT, pos_of

TEXT = '''import newt
import newt.language as nl


@newt.jit
def k(x_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=0.0)
    nl.store(x_ptr + offs, x)


k[(1,)](None, 10, BLOCK=128)
'''


@pytest.mark.parametrize("typed", ["mask=offs < n, other=", "mask=offs < n, other",
                                   "mask=(offs < n) & (offs >= 0), other=", "mask=offs[None, :] < n, other=",
                                   "mask=offs < n,\n                other="])
def test_signature_help_after_other_highlights_other(typed):
    text = TEXT.replace("mask=offs < n, other=0.0)", typed)
    a = analyze(TEXT, "file:///sig.py")  # the last analysis is of the text before the edit, as while typing
    lines = text.splitlines()
    line = max(i for i, ln in enumerate(lines) if "other" in ln)
    sh = signature_help(a, text, lsp.Position(line, len(lines[line])))
    sig = sh.signatures[sh.active_signature or 0]
    lo, hi = sig.parameters[sh.active_parameter].label
    assert sig.label[lo:hi] == "other=None" and sig.active_parameter == sh.active_parameter


def test_the_constexpr_parameter_hover_names_it_once():
    a = analyze(TEXT, "file:///cx.py")
    md = hover(a, pos_of(TEXT, "BLOCK: nl", delta=1)).contents.value
    assert md.startswith("```python\nBLOCK: constexpr\n```"), md
    assert "nl.constexpr: constexpr" not in md
    assert "| launch at line 12 (BLOCK=128) | `constexpr 128` |" in md


def test_num_stages_once_in_the_compile_header():
    path = ROOT / "examples" / "fused_softmax.py"
    a = analyze(path.read_text(encoding="utf-8"), path.as_uri())
    conc = concrete_spec(a, a.kernel_named("softmax_kernel"))
    text = header("softmax_kernel", conc, "sm_90a")
    assert text.splitlines()[1].count("num_stages=") == 1, text  # the specialization line
    assert conc.num_stages == conc.constexprs["num_stages"]  # the constexpr is the launch option too
    c = Concrete("k", 1, "x", {}, {"BLOCK": 64}, num_warps=4, num_stages=3)
    assert c.describe() == "BLOCK=64, num_warps=4, num_stages=3"


def test_deuteron_block_names_are_shown_as_the_config_names():
    assert display_name("_BLOCK_0") == "block_sizes[0]" and display_name("_RBLOCK_2") == "reduction block #2"
    assert display_name("BLOCK_M") == "BLOCK_M"
    c = Concrete("add", 0, "example small", {}, {"_BLOCK_0": 64, "_BLOCK_1": 32})
    assert c.describe().startswith("block_sizes[0]=64, block_sizes[1]=32") and "_BLOCK" not in c.describe()


def test_autotune_progress_shows_configs_as_assignments():
    assert config_label({"config": "dt.Config(block_sizes=[64, 32], num_warps=4)"}) == \
        "block_sizes=[64, 32], num_warps=4"
    assert config_label({"BLOCK_M": 64, "num_warps": 4}) == "BLOCK_M=64, num_warps=4"
    assert config_label({}) == "defaults" and config_label(None) == "defaults"
    import deuteron as dt
    import newt.harness as nh
    for raw in (dt.Config(block_sizes=[64, 32], num_warps=4), "dt.Config(block_sizes=[64, 32], num_warps=4)"):
        label = config_label(nh._config_text(raw))  # what the worker sends for a deuteron config
        assert label == "block_sizes=[64, 32], num_warps=4" and "{" not in label and "dt.Config" not in label
