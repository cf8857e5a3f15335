"""Performance diagnostics as you type (issue 23): registers, spills, shared memory and occupancy of every
autotune config, computed in the background through NVRTC (no GPU), shown as an N100 warning at a config
that spills, as an inlay hint at each config's line and in the kernel hover; the figures are
``newt.compile``'s own."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest

from lsp_server.occupancy import occupancy

from .conftest import fixture_text, fixture_uri, server_env
from .rawclient import RawClient

pytestmark = pytest.mark.timeout(600)

FIXTURE = "perf_matmul.py"
TARGET = "sm_90a"


def _nvrtc() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
        return True
    except ImportError:
        return False


needs_nvrtc = pytest.mark.skipif(not _nvrtc(), reason="NVRTC (cuda-bindings) is not installed")


# -- occupancy from the documented sm_90 limits -----------------------------------------------------------

def test_occupancy_registers_limit():
    # 255 registers -> 256 a thread, 8192 a warp: 2 warps per sub-partition, 8 per SM; 4-warp blocks -> 2
    o = occupancy(255, 10240, 128, "sm_90a")
    assert (o["blocks_per_sm"], o["warps_per_sm"], o["limiter"], o["launchable"]) == (2, 8, "registers", True)
    # 32 registers, no shared memory, 256 threads: the 64-warp SM holds 8 blocks (threads), not 16 (registers)
    o = occupancy(32, 0, 256, "sm_90a")
    assert (o["blocks_per_sm"], o["warps_per_sm"], o["occupancy"]) == (8, 64, 1.0)


def test_occupancy_shared_memory_limit():
    # 100 KB + 1 KB reserved a block in 228 KB: 2 blocks
    o = occupancy(64, 100 * 1024, 128, "sm_90a")
    assert (o["blocks_per_sm"], o["limiter"]) == (2, "shared memory")
    # sm_80 has 164 KB a SM: 1 block
    assert occupancy(64, 100 * 1024, 128, "sm_80")["blocks_per_sm"] == 1


def test_occupancy_cannot_launch():
    o = occupancy(255, 0, 1024, "sm_90a")  # 256 x 1024 registers > 64 K
    assert not o["launchable"] and o["blocks_per_sm"] == 0 and "registers" in o["why"]
    o = occupancy(32, 228 * 1024, 128, "sm_90a")  # over the 227 KB a block may opt in to
    assert not o["launchable"] and "shared memory" in o["why"]
    assert occupancy(32, 0, 2048, "sm_90a")["launchable"] is False


# -- the figures are newt.compile's -----------------------------------------------------------------------

def _reference() -> dict:
    """label -> (n_regs, n_spills, shared) from ``newt.compile`` of the fixture's kernel, per specialization
    of the plan (the same concrete specialization: constexprs, argument types, warps, stages)."""
    import importlib.util

    import newt
    import newt.dropin
    from lsp_server.analysis import analyze
    from lsp_server.perfjob import plan
    newt.dropin.install()
    try:
        path = os.path.join(os.path.dirname(__file__), "fixtures", FIXTURE)
        spec = importlib.util.spec_from_file_location("perf_matmul_fixture", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        kernel = mod.matmul_kernel
    finally:
        newt.dropin.uninstall()
    a = analyze(fixture_text(FIXTURE), fixture_uri(FIXTURE))
    out = {}
    for e in plan(a, TARGET):
        conc = e["_conc"]
        sig = {k: f"{t}:16" if str(t).startswith("*") else str(t) for k, t in conc.arg_types.items()}
        ck = newt.compile(kernel, signature=sig, constexprs=dict(conc.constexprs), target=TARGET,
                          num_warps=conc.num_warps, num_stages=conc.num_stages, cache=False)
        md = ck.metadata
        out[e["label"]] = (md.n_regs, md.n_spills, md.shared)
    return out


@pytest.fixture(scope="module")
def reference():
    if not _nvrtc():
        pytest.skip("NVRTC (cuda-bindings) is not installed")
    return _reference()


class _Ctx:
    def __init__(self):
        self.cancelled = False
        self.events = []

    def event(self, kind, data):
        self.events.append((kind, data))


@needs_nvrtc
def test_worker_figures_equal_newt_compile(reference):
    from lsp_server.perfjob import run
    ctx = _Ctx()
    got = run({"text": fixture_text(FIXTURE), "uri": fixture_uri(FIXTURE), "target": TARGET}, ctx)
    assert got == {"done": 2, "cancelled": False}
    plan = next(d for k, d in ctx.events if k == "plan")["entries"]
    assert [(e["label"].split(" (")[0], e["line"]) for e in plan] == [("config #1", 13), ("config #2", 14)]
    figures = {d["key"]: d for k, d in ctx.events if k == "perf"}
    for e in plan:
        f = figures[e["key"]]
        assert (f["n_regs"], f["n_spills"], f["shared"]) == reference[e["label"]], e["label"]
    spill = figures[plan[1]["key"]]
    assert spill["n_spills"] > 0 and spill["occupancy"] == occupancy(spill["n_regs"], spill["shared"], 64, TARGET)
    # the hottest lines name the tensor-core and spill traffic of the kernel's own lines
    hot = spill["hottest"]
    assert hot and all(1 <= h["line"] <= 45 for h in hot)
    assert any("LDL" in h["mix"] or "STL" in h["mix"] for h in hot)
    # a known key is not compiled again
    ctx2 = _Ctx()
    again = run({"text": fixture_text(FIXTURE), "uri": fixture_uri(FIXTURE), "target": TARGET,
                 "known": list(figures)}, ctx2)
    assert again["done"] == 0 and not [k for k, _ in ctx2.events if k == "perf"]


@needs_nvrtc
def test_cancelled_between_specializations():
    from lsp_server.perfjob import run
    ctx = _Ctx()
    ctx.cancelled = True
    got = run({"text": fixture_text(FIXTURE), "uri": fixture_uri(FIXTURE), "target": TARGET}, ctx)
    assert got == {"done": 0, "cancelled": True} and [k for k, _ in ctx.events] == ["plan"]


# -- in the editor -------------------------------------------------------------------------------------------

async def _session(tmp_path, options: dict, pull: bool = False):
    c = RawClient()
    await c.start(sys.executable, "-m", "lsp_server", env=server_env(tmp_path / "cache"), cwd=str(tmp_path))
    await c.initialize(root_uri=fixture_uri(""), options=options, pull=pull)
    return c


async def _call(c: RawClient, method: str, params: dict):
    body = await c.call(method, params, timeout=60)
    assert "error" not in body, body
    return body["result"]


def _n100(c: RawClient, uri: str):
    for method, params, t in c.notifications:
        if method == "textDocument/publishDiagnostics" and params["uri"] == uri:
            got = [d for d in params["diagnostics"] if d.get("code") == "N100"]
            if got:
                return got, t
    return None, None


async def _wait_n100(c: RawClient, uri: str, timeout: float):
    t_end = time.perf_counter() + timeout
    while time.perf_counter() < t_end:
        got, t = _n100(c, uri)
        if got:
            return got, t
        await asyncio.sleep(0.05)
    return None, None


@needs_nvrtc
async def test_spill_warning_inlay_hint_and_hover(tmp_path, reference):
    uri, text = fixture_uri(FIXTURE), fixture_text(FIXTURE)
    c = await _session(tmp_path, {"trusted": True, "target": TARGET})
    try:
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        got, _ = await _wait_n100(c, uri, 300)
        assert got is not None, c.stderr.decode(errors="replace")[-3000:]
        (d,) = got
        lines = text.splitlines()
        assert d["severity"] == 2 and d["range"]["start"]["line"] == 13  # the 128 x 128, 2-warp triton.Config
        assert lines[13][d["range"]["start"]["character"]:].startswith("triton.Config(")
        f = d["data"]["figures"]
        label = next(k for k in reference if k.startswith("config #2"))
        assert (f["n_regs"], f["n_spills"], f["shared"]) == reference[label]
        assert f"{f['n_spills']} bytes" in d["message"] and "config #2" in d["message"]
        assert d["codeDescription"]["href"]
        # the figures of both configs at their lines, with no warning on the one that fits
        at: dict = {}
        for _ in range(600):  # the other config's figures come when its compile ends
            hints = await _call(c, "textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": {
                "start": {"line": 0, "character": 0}, "end": {"line": 20, "character": 0}}})
            at = {h["position"]["line"]: h["label"] for h in hints if "regs" in str(h["label"])}
            if len(at) == 2:
                break
            await asyncio.sleep(0.5)
        assert sorted(at) == [12, 13] and all(h["position"]["character"] == len(lines[h["position"]["line"]])
                                              for h in hints if "regs" in str(h["label"]))
        ok = next(k for k in reference if k.startswith("config #1"))
        assert at[12].strip().startswith(f"{reference[ok][0]} regs · no spill")
        assert at[13].strip().startswith(f"{f['n_regs']} regs · ") and "spilled" in at[13]
        # the kernel hover: a row per config and the hottest lines' instruction mix (the disassembly comes once
        # every config's figures are out)
        line = next(i for i, ln in enumerate(lines) if ln.startswith("def matmul_kernel"))
        for _ in range(240):
            hov = await _call(c, "textDocument/hover", {"textDocument": {"uri": uri},
                                                      "position": {"line": line, "character": 6}})
            value = hov["contents"]["value"]
            if "Hottest source lines" in value:
                break
            await asyncio.sleep(0.5)
        assert "Resources on sm_90a" in value and f"| {f['n_regs']} |" in value
        assert "Hottest source lines" in value and ("LDL" in value or "STL" in value)
        # an edit elsewhere: the same figures again from the cache, for the new version
        c.notifications.clear()
        c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 52, "character": 0}, "end": {"line": 52, "character": 0}},
             "text": "# a comment\n"}]})
        t0 = time.perf_counter()
        got2, t2 = await _wait_n100(c, uri, 60)
        assert got2 is not None and got2[0]["data"]["figures"] == f
        assert t2 - t0 < 10.0  # no compile: the figures are cached by content
    finally:
        await c.stop()


@needs_nvrtc
async def test_untrusted_or_off_computes_nothing(tmp_path):
    uri, text = fixture_uri(FIXTURE), fixture_text(FIXTURE)
    for opts in ({"trusted": False}, {"trusted": True, "perfDiagnostics": False}):
        c = await _session(tmp_path, opts)
        try:
            c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                               "text": text}})
            await asyncio.sleep(6)
            info = await _call(c, "newt/serverInfo", {})
            assert _n100(c, uri)[0] is None
            assert not any(m == "textDocument/publishDiagnostics" and any(
                d.get("code") in ("N100", "N101") for d in p["diagnostics"]) for m, p, _ in c.notifications)
            assert info is not None
        finally:
            await c.stop()


@pytest.mark.slow
@needs_nvrtc
async def test_first_spill_warning_latency(tmp_path):
    """The spill warning arrives at the config line after opening the file (a fresh server whose perf worker
    started at initialization, an empty compile cache), and the time it took is printed.  Issue 23's aim is 3 s
    on an idle machine (measured 4.5 s in a loaded clean-clone CI run, the spilling config's NVRTC compile being
    most of it); a timed unit test cannot hold a shared machine to that, so the bound here is generous:
    ``NEWT_PERF_BUDGET_S=3`` holds it to the aim (``benchmarks/run_device.sh perfdiag`` on an idle CPU)."""
    uri, text = fixture_uri(FIXTURE), fixture_text(FIXTURE)
    budget = float(os.environ.get("NEWT_PERF_BUDGET_S", "30.0"))
    c = await _session(tmp_path, {"trusted": True, "target": TARGET})
    try:
        await asyncio.sleep(3.0)  # the worker starts and imports the backend at initialization
        t0 = time.perf_counter()
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        got, t = await _wait_n100(c, uri, 120)
        assert got is not None
        print(f"first N100 after {t - t0:.2f} s (load average {os.getloadavg()[0]:.2f})")
        assert t - t0 < budget, f"the first spill warning took {t - t0:.2f} s (budget {budget} s)"
    finally:
        await c.stop()


@needs_nvrtc
def test_cannot_launch_is_n101_at_its_config():
    """A config whose shared memory is over the 227 KB a block may have on sm_90a: N101 at its line, with the
    resource, what it needs and the limit (the backend's own figures)."""
    from lsp_server.perf import Perf
    from lsp_server.perfjob import run
    from lsp_server.settings import Settings
    text = fixture_text(FIXTURE).replace(
        '"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=2, num_stages=3',
        '"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 512, "GROUP_M": 8}, num_warps=8, num_stages=2')
    assert "num_stages=2" in text
    ctx = _Ctx()
    run({"text": text, "uri": fixture_uri(FIXTURE), "target": TARGET}, ctx)
    entries = next(d for k, d in ctx.events if k == "plan")["entries"]
    figures = {d["key"]: d for k, d in ctx.events if k == "perf"}
    big = figures[entries[1]["key"]]
    assert big["resource"]["resource"] == "shared memory" and big["resource"]["limit"] == 227 * 1024
    assert big["resource"]["required"] > 227 * 1024

    class _Ls:
        settings = Settings(trusted=True)
        encoding = "utf-16"
        docs = {fixture_uri(FIXTURE): None}

        def settings_for(self, uri):
            return self.settings

        def doc_text(self, uri, strict=False):
            return text, 1

    p = Perf(_Ls())
    d = p.docs.setdefault(fixture_uri(FIXTURE), __import__("lsp_server.perf", fromlist=["_Doc"])._Doc())
    d.version, d.text, d.entries = 1, text, entries
    p.figures.update(figures)
    diags = p.diagnostics(fixture_uri(FIXTURE), 1)
    assert [x["code"] for x in diags] == ["N101"]
    assert diags[0]["range"]["start"]["line"] == 13 and "cannot launch: shared memory" in diags[0]["message"]
    assert str(big["resource"]["required"]) in diags[0]["message"]
    assert p.diagnostics(fixture_uri(FIXTURE), 2) == []  # figures of another version are not shown


@needs_nvrtc
async def test_pull_client_without_refresh_gets_the_warning_pushed(tmp_path):
    """Neovim 0.11 pulls diagnostics and has no workspace/diagnostic/refresh: the N100 comes to it pushed on
    its own (only the performance diagnostics), and its pull reports do not repeat it."""
    uri, text = fixture_uri(FIXTURE), fixture_text(FIXTURE)
    c = RawClient()
    await c.start(sys.executable, "-m", "lsp_server", env=server_env(tmp_path / "cache"), cwd=str(tmp_path))
    try:
        await c.initialize(root_uri=fixture_uri(""), options={"trusted": True, "target": TARGET}, pull=True)
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        rep = await _call(c, "textDocument/diagnostic", {"textDocument": {"uri": uri}})
        got, _ = await _wait_n100(c, uri, 300)
        assert got is not None and got[0]["range"]["start"]["line"] == 13
        pushed = [p for m, p, _ in c.notifications if m == "textDocument/publishDiagnostics"]
        assert all(d["code"] in ("N100", "N101") for p in pushed for d in p["diagnostics"])
        rep = await _call(c, "textDocument/diagnostic", {"textDocument": {"uri": uri}})
        assert not [d for d in rep.get("items", []) if d.get("code") in ("N100", "N101")]
    finally:
        await c.stop()


def test_the_edited_document_comes_first(monkeypatch):
    """A run for another document (a folder of opened files) stops when the user's document needs figures, and
    resumes when that one's run ends."""
    monkeypatch.setenv("NEWT_PERF_WORKERS", "1")
    from lsp_server.perf import Perf
    from lsp_server.settings import Settings

    texts = {"file:///a.py": ("A", 1), "file:///b.py": ("B", 1)}
    calls = []

    class _Worker:
        async def request(self, method, params, timeout, on_event=None, cancel=None):
            calls.append(params["text"])
            for _ in range(200):  # "compiles" until cancelled or 2 s
                if cancel.is_set():
                    return {"cancelled": True}
                await asyncio.sleep(0.01)
            return {"done": 1}

        async def stop(self):
            pass

    class _Commands:
        def target_for(self, uri):
            return TARGET

    class _Ls:
        settings = Settings(trusted=True)
        encoding = "utf-16"
        docs = texts
        commands = _Commands()
        pull_diagnostics = False
        refresh_diagnostics = refresh_inlay = False

        def settings_for(self, uri):
            return self.settings

        def doc_text(self, uri, strict=False):
            return texts[uri]

    async def go():
        p = Perf(_Ls())
        p.worker = _Worker()
        p.start("file:///a.py", 1)
        await asyncio.sleep(0.1)
        p.start("file:///b.py", 1)  # the user opened b: a's run stops
        await asyncio.sleep(0.1)
        assert p.docs["file:///a.py"].task.done() and p.docs["file:///a.py"].preempted
        await p.docs["file:///b.py"].task  # b's run ends: a's starts again
        await asyncio.sleep(0.05)
        assert calls == ["A", "B", "A"] and not p.docs["file:///a.py"].preempted
        await p.shutdown()

    asyncio.run(go())
