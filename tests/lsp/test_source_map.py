"""Source <-> generated code (issue 23): per line of the Show CUDA / PTX / SASS views, the source line it comes
from (the backend's CUDA line map carried through NVRTC's -lineinfo to PTX ``.loc`` and to SASS through
``nvdisasm --print-line-info-inline``); ``newt/sourceMap`` and go-to-definition in a view; the SASS instruction
mix of the hottest source lines."""

from __future__ import annotations

import asyncio
import re
import sys

import pytest

from lsp_server import sourcemap
from lsp_server.vdocs import make_uri

from .conftest import fixture_text, fixture_uri, server_env
from .rawclient import RawClient

pytestmark = pytest.mark.timeout(600)

FIXTURE = "perf_matmul.py"
DOT_LINE = 38  # acc = tl.dot(a, b, acc)
LOAD_LINES = (36, 37)
LOOP_LINE = 35  # for k in range(0, tl.cdiv(K, BLOCK_K)):


def _nvrtc() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return False
    from newt.backend.cuda.disasm import find_cuobjdump
    return find_cuobjdump() is not None and sourcemap._nvdisasm() is not None


needs_tools = pytest.mark.skipif(not _nvrtc(), reason="NVRTC, cuobjdump or nvdisasm is not installed")


# -- the parsers ------------------------------------------------------------------------------------------------

def test_ptx_lines_follow_loc_and_inlined_at():
    cuda = [None, 10, 11, 12, None, 20]  # CUDA line -> source line
    ptx = "\n".join([
        ".visible .entry k(",
        ")",
        "{",
        "\t.loc\t1 2 3",
        "\tld.global.u32 %r1, [%rd1];",
        "\t.loc\t2 7 1, function_name $L__info_string0, inlined_at 1 6 5",  # a prelude helper called at line 6
        "\tmma.sync.aligned.m16n8k16 ...;",
        "$L__BB0_1:",
        "\t.loc\t1 5 0",  # a CUDA line of no source line
        "\tret;",
        "}",
        '\t.file\t1 "/tmp/k.cu"',
        '\t.file\t2 "/tmp/newt_prelude.cuh"',
    ])
    got = sourcemap.ptx_lines(ptx, cuda)
    assert got == [None, None, None, None, 10, None, 20, None, None, None, None, None, None]


def test_sass_addresses_take_the_call_site_of_inlined_code():
    info = "\n".join([
        "matmul_kernel:",
        '\t//## File "/w/matmul_kernel.cu", line 36',
        "        /*0000*/                   LDC R1, c[0x0][0x28] ;",
        '\t//## File "/w/matmul_kernel.cu", line 11 inlined at "/w/matmul_kernel.cu", line 272',
        '\t//## File "/w/matmul_kernel.cu", line 272',
        "        /*0010*/                   HGMMA.64x64x16.F32 R24, gdesc[UR8].tnspB, R24 ;",
        '\t//## File "/w/newt_prelude.cuh", line 5',
        "        /*0020*/                   NOP ;",
    ])
    assert sourcemap.sass_addresses(info) == {0x0: 36, 0x10: 272}
    cuda = [None] * 300
    cuda[35], cuda[271] = 21, DOT_LINE
    sass = "\n".join([
        "\t\tFunction : matmul_kernel",
        "        /*0000*/                   LDC R1, c[0x0][0x28] ;   /* 0x00000a00ff017b82 */",
        "                                                              /* 0x000ff00000000800 */",
        "        /*0010*/                   HGMMA.64x64x16.F32 R24, gdesc[UR8].tnspB, R24 ;  /* 0x... */",
        "        /*0020*/                   NOP ;",
        "        /*0030*/              @!P0 STL [R1+0x4], R2 ;",
    ])
    lines = sourcemap.sass_lines(sass, {0x0: 36, 0x10: 272, 0x30: 272}, cuda)
    assert lines == [None, 21, 21, DOT_LINE, None, DOT_LINE]  # an encoding word's line goes with its instruction
    mix = sourcemap.instruction_mix(sass, lines)
    assert mix[DOT_LINE] == {"total": 2, "HGMMA": 1, "STL": 1} and mix[21] == {"total": 1}
    assert sourcemap.hottest_lines(mix, 1) == [{"line": DOT_LINE, "total": 2, "mix": {"HGMMA": 1, "STL": 1}}]


# -- a real compile: every map of the worker's Compile --------------------------------------------------------

@pytest.fixture(scope="module")
def compiled():
    if not _nvrtc():
        pytest.skip("NVRTC, cuobjdump or nvdisasm is not installed")
    from lsp_server.worker import _compile
    return _compile({"text": fixture_text(FIXTURE), "uri": fixture_uri(FIXTURE), "kernel": "matmul_kernel",
                     "spec": 1, "target": "sm_90a"}, None)


@needs_tools
def test_compile_maps_carry_the_source_lines(compiled):
    maps, texts = compiled["maps"], compiled["texts"]
    for kind in ("cuda", "ptx", "sass"):
        assert len(maps[kind]) == len(texts[kind].splitlines()), kind
    sass = texts["sass"].splitlines()
    gmma = [i for i, ln in enumerate(sass) if "HGMMA." in ln]
    # the dot's line; a pipelined loop's peeled iteration is the loop's own code (its ``for`` line)
    assert gmma and DOT_LINE in {maps["sass"][i] for i in gmma} <= {DOT_LINE, LOOP_LINE}
    ldg = [i for i, ln in enumerate(sass) if re.search(r"\bLDGSTS\b|\bLDG\b", ln)]
    assert ldg and {maps["sass"][i] for i in ldg} <= set(LOAD_LINES)
    ptx = texts["ptx"].splitlines()
    wgmma = [i for i, ln in enumerate(ptx) if "wgmma.mma_async" in ln]
    assert wgmma and DOT_LINE in {maps["ptx"][i] for i in wgmma} <= {DOT_LINE, LOOP_LINE}
    # every mapped line of every view is a line of the kernel
    for kind in ("cuda", "ptx", "sass"):
        assert {s for s in maps[kind] if s} <= set(range(19, 44)), kind
    mix = sourcemap.instruction_mix(texts["sass"], maps["sass"])
    assert mix[DOT_LINE]["HGMMA"] == sum(1 for i in gmma if maps["sass"][i] == DOT_LINE)
    assert maps["hottest"] == sourcemap.hottest_lines(mix) and len(maps["hottest"]) == 5


# -- over LSP ------------------------------------------------------------------------------------------------

@needs_tools
async def test_source_map_request_and_definition(tmp_path, compiled):
    uri, text = fixture_uri(FIXTURE), fixture_text(FIXTURE)
    c = RawClient()
    await c.start(sys.executable, "-m", "lsp_server", env=server_env(tmp_path / "cache"), cwd=str(tmp_path))
    try:
        await c.initialize(root_uri=fixture_uri(""), options={"trusted": True, "target": "sm_90a",
                                                               "perfDiagnostics": False})
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        for kind, needle in (("sass", "HGMMA."), ("ptx", "wgmma.mma_async"), ("cuda", None)):
            vuri = make_uri(uri, "matmul_kernel", 1, kind, "sm_90a")
            doc = (await c.call("newt/virtualDocument", {"uri": vuri}, timeout=300))["result"]
            body = (await c.call("newt/sourceMap", {"uri": vuri}, timeout=300))["result"]
            assert body["source"] == uri and body["lines"], kind
            mapped = dict(body["lines"])
            lines = doc["text"].splitlines()
            assert all(0 <= g < len(lines) for g in mapped), kind
            if needle is None:  # CUDA: the generated lines of the dot's source line mention the MMA
                dot = [g for g, s in mapped.items() if s == DOT_LINE - 1]
                assert dot, kind
                continue
            hit = next(i for i, ln in enumerate(lines) if needle in ln and mapped.get(i) == DOT_LINE - 1)
            assert mapped[hit] == DOT_LINE - 1, kind
            got = (await c.call("textDocument/definition", {"textDocument": {"uri": vuri},
                                                            "position": {"line": hit, "character": 3}}))["result"]
            assert got == [{"uri": uri, "range": {"start": {"line": DOT_LINE - 1, "character": 0},
                                                  "end": {"line": DOT_LINE - 1,
                                                          "character": len(text.splitlines()[DOT_LINE - 1])}}}]
        # a line of the header maps nowhere; a Python file gets no definition from the server
        vuri = make_uri(uri, "matmul_kernel", 1, "sass", "sm_90a")
        assert (await c.call("textDocument/definition", {"textDocument": {"uri": vuri},
                                                         "position": {"line": 0, "character": 0}}))["result"] is None
        assert (await c.call("textDocument/definition", {"textDocument": {"uri": uri},
                                                         "position": {"line": DOT_LINE - 1, "character": 10}}
                             ))["result"] is None
        await asyncio.sleep(0)
    finally:
        await c.stop()
