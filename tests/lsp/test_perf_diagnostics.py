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

async def _session(tmp_path, options: dict, pull: bool = False, **env):
    c = RawClient()
    await c.start(sys.executable, "-m", "lsp_server", env=server_env(tmp_path / "cache", **env), cwd=str(tmp_path))
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
        # the server's timeline of it: sent to the compile process at the open, then the plan, the figures, the
        # warning (newt/serverInfo's perf; benchmarks/perf_first_warning.py prints it)
        tl = (await _call(c, "newt/serverInfo", {}))["perf"]["timeline"][uri]
        steps = [st["step"] for st in tl["steps"]]
        assert steps[:3] == ["sent", "plan", "figures"] and tl["steps"][0]["at"] < 2.0
        spilled = next(st for st in tl["steps"] if st["step"] == "figures" and st["label"].startswith("config #2"))
        assert spilled["spills"] == f["n_spills"] and tl["warning"] >= spilled["at"]
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
    # (timed: its compiles are NVRTC's, never the test run's memo of them: tests/conftest.py)
    c = await _session(tmp_path, {"trusted": True, "target": TARGET}, NEWT_TESTS_NVRTC_MEMO="off")
    try:
        for _ in range(1200):  # the worker starts and imports the backend at initialization
            info = await _call(c, "newt/serverInfo", {})
            if info["perf"]["warm"][:1] == [True]:
                break
            await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                           "text": text}})
        got, t = await _wait_n100(c, uri, 120)
        assert got is not None
        tl = (await _call(c, "newt/serverInfo", {}))["perf"]["timeline"][uri]
        print(f"first N100 after {t - t0:.2f} s (load average {os.getloadavg()[0]:.2f}); server timeline: " +
              "; ".join(f"{st['step']} {st['at']:.2f} s" + (f" (compile {st['compile_ms'] / 1e3:.2f} s, CPU "
                                                           f"{st['compile_cpu_ms'] / 1e3:.2f} s)"
                                                           if "compile_ms" in st else "") for st in tl["steps"]))
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


# -- the first warning's path (issue 23: within 3 s of opening the file) ---------------------------------------

class _FakeLs:
    """What ``Perf`` uses of the server, recording the diagnostics it pushes."""

    def __init__(self, texts: dict):
        from lsprotocol.converters import get_converter

        from lsp_server.settings import Settings
        self.settings = Settings(trusted=True)
        self.encoding = "utf-16"
        self.docs = self.texts = texts
        self.pull_diagnostics = self.refresh_diagnostics = self.refresh_inlay = False
        self.protocol = type("P", (), {"_converter": get_converter()})()
        self.pushed: list = []

        class _Commands:
            def target_for(self, uri):
                return TARGET
        self.commands = _Commands()

    def settings_for(self, uri):
        return self.settings

    def doc_text(self, uri, strict=False):
        return self.texts[uri]

    def text_document_publish_diagnostics(self, params):
        self.pushed.append(params)


class _ScriptedWorker:
    """A compile process that answers a ``perf`` request with the plan and the figures it is given."""

    alive = False

    def __init__(self, entries, figures, calls):
        self.entries, self.figures, self.calls = entries, figures, calls

    async def request(self, method, params, timeout, on_event=None, cancel=None):
        self.calls.append((method, params.get("shard"), params.get("text")))
        on_event("plan", {"entries": self.entries, "timing": {"analysis_ms": 1.0}})
        i, n = params.get("shard") or (0, 1)
        for j, f in enumerate(self.figures):
            if j % n == i:
                await asyncio.sleep(0.01)
                on_event("perf", dict(f, timing={"compile_ms": 5.0}))
        return {"done": 1}

    async def stop(self):
        pass


def _spill_entry_and_figures():
    entry = {"key": "k1", "kernel": "matmul_kernel", "spec": 1, "label": "config #1", "line": 13, "col": 9,
             "end_col": 20, "num_warps": 2, "num_stages": 3, "target": TARGET}
    fig = {"key": "k1", "n_regs": 255, "n_spills": 96, "spill_stores": 48, "spill_loads": 48, "shared": 1024,
           "threads": 64, "num_warps": 2, "occupancy": occupancy(255, 1024, 64, TARGET)}
    return entry, fig


def test_open_compiles_at_once_and_pushes_the_warning_before_the_first_analysis(monkeypatch):
    """``didOpen`` sends the text to the compile process at once (not after the front end's first publication),
    a warning that comes before that publication is pushed on its own, the publication then does not start a
    second run, and the timeline records each step."""
    from lsp_server.perf import Perf
    monkeypatch.setenv("NEWT_PERF_WORKERS", "1")
    uri = "file:///m.py"
    text = fixture_text(FIXTURE)
    ls = _FakeLs({uri: (text, 1)})
    entry, fig = _spill_entry_and_figures()
    calls: list = []

    async def go():
        p = Perf(ls)
        p.worker = _ScriptedWorker([entry], [fig], calls)
        p.opened(uri, 1)
        await p.docs[uri].task
        assert calls == [("perf", [0, 1], text)]
        (pushed,) = ls.pushed  # no front-end publication yet: the warning on its own
        assert [d.code for d in pushed.diagnostics] == ["N100"] and pushed.version == 1
        p.published(uri, 1, lambda: None)  # the front end's publication of the same text: no second run
        await asyncio.sleep(0.05)
        assert len(calls) == 1
        tl = p.info()["timeline"][uri]
        assert [s["step"] for s in tl["steps"]] == ["sent", "plan", "figures", "done"]
        assert tl["steps"][2]["label"] == "config #1" and tl["steps"][2]["compile_ms"] == 5.0
        assert "warning" in tl
        await p.shutdown()

    asyncio.run(go())


def test_worker_count_follows_idle_cores(monkeypatch):
    from lsp_server import perf
    monkeypatch.delenv("NEWT_PERF_WORKERS", raising=False)
    monkeypatch.setattr(perf.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    for load, want in ((0.3, 4), (12.2, 2), (14.5, 1), (40.0, 1)):
        monkeypatch.setattr(perf.os, "getloadavg", lambda load=load: (load, load, load))
        assert perf.worker_count() == want, load
    monkeypatch.setattr(perf.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert perf.worker_count(2) == 2  # never more processes than specializations
    monkeypatch.setattr(perf.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert perf.worker_count() == 1  # two cores: one for the editor's requests
    monkeypatch.setenv("NEWT_PERF_WORKERS", "3")
    assert perf.worker_count() == 3


def test_a_document_is_spread_over_the_compile_processes(monkeypatch):
    """With two compile processes each gets its shard of the document; the plan counts once and the figures of
    both arrive."""
    from lsp_server.perf import Perf
    monkeypatch.setenv("NEWT_PERF_WORKERS", "2")
    uri = "file:///m.py"
    ls = _FakeLs({uri: ("text", 1)})
    entry, fig = _spill_entry_and_figures()
    entry2 = dict(entry, key="k2", label="config #2", line=14)
    fig2 = dict(fig, key="k2", n_spills=0, spill_stores=0, spill_loads=0)
    calls: list = []

    async def go():
        p = Perf(ls)
        p.workers = [_ScriptedWorker([entry, entry2], [fig, fig2], calls) for _ in range(2)]
        p.warm_at = [None, None]
        p.opened(uri, 1)
        await p.docs[uri].task
        assert sorted(c[1] for c in calls) == [[0, 2], [1, 2]]
        assert set(p.figures) == {"k1", "k2"} and len(p.docs[uri].entries) == 2
        assert [s["step"] for s in p.info()["timeline"][uri]["steps"]].count("plan") == 1
        await p.shutdown()

    asyncio.run(go())


def test_worker_shards_heaviest_first_and_figures_before_any_disassembly(monkeypatch):
    """``perfjob.run``: shard i of n compiles every n-th entry of the heaviest-first order (the spilling
    128 x 128 config goes to the first process), and every figure is out before the first instruction mix."""
    from lsp_server import perfjob
    compiled: list = []

    def fake_compile(a, e, target, mix=True):
        compiled.append(e["label"])
        return {"key": e["key"], "n_regs": 1, "_mix": lambda: [{"line": 1, "total": 1, "mix": {}}]}

    monkeypatch.setattr(perfjob, "compile_entry", fake_compile)
    text = fixture_text(FIXTURE).replace(  # a third config: three entries
        '    ],\n    key=["M", "N", "K"],',
        '        triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4),\n'
        '    ],\n    key=["M", "N", "K"],')
    shards = []
    for i in range(2):
        compiled.clear()
        ctx = _Ctx()
        perfjob.run({"text": text, "uri": fixture_uri(FIXTURE), "target": TARGET, "shard": [i, 2]}, ctx)
        shards.append([lb.split(" (")[0] for lb in compiled])
        kinds = ["mix" if "hottest" in d else "figures" for k, d in ctx.events if k == "perf"]
        assert kinds == ["figures"] * len(compiled) + ["mix"] * len(compiled)
        assert all("timing" in d for k, d in ctx.events if k in ("plan", "perf"))
    assert shards == [["config #2", "config #3"], ["config #1"]]


def test_worker_runs_at_the_background_priority():
    """The compile process lowers itself as the analysis forks do (nice +1 and SCHED_BATCH), not to nice +10."""
    import subprocess
    code = ("import os; from lsp_server.perfjob import _nice; from lsp_server.priority import BACKGROUND_NICE; "
            "a = os.getpriority(os.PRIO_PROCESS, 0); _nice(); _nice(); "
            "print(os.getpriority(os.PRIO_PROCESS, 0) - a, BACKGROUND_NICE, "
            "os.sched_getscheduler(0) == getattr(os, 'SCHED_BATCH', -1))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=server_env(),
                         timeout=120).stdout.split()
    assert out[0] == out[1] and out[2] == ("True" if sys.platform.startswith("linux") else "False")


@needs_nvrtc
def test_compile_command_reuses_the_performance_workers_cubin(tmp_path, monkeypatch):
    """Show CUDA / PTX / SASS of a configuration the performance figures compiled: no second NVRTC compile (one
    disk cache between the two workers), the same figures and the same SASS."""
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path))
    from lsp_server import worker
    from lsp_server.perfjob import run
    ctx = _Ctx()
    run({"text": fixture_text(FIXTURE), "uri": fixture_uri(FIXTURE), "target": TARGET}, ctx)
    entries = next(d for k, d in ctx.events if k == "plan")["entries"]
    figures = {d["key"]: d for k, d in ctx.events if k == "perf"}
    spill = figures[entries[1]["key"]]
    import newt.backend.cuda.compiler as compiler

    def no_compile(*a, **k):
        raise AssertionError("compiled again")
    monkeypatch.setattr(compiler, "compile_cuda", no_compile)
    got = worker._compile({"text": fixture_text(FIXTURE), "uri": fixture_uri(FIXTURE), "kernel": "matmul_kernel",
                           "spec": entries[1]["spec"], "target": TARGET}, _Ctx())
    assert (got["n_regs"], got["n_spills"], got["shared"]) == (spill["n_regs"], spill["n_spills"], spill["shared"])
    assert "HMMA" in got["texts"]["sass"] and got["maps"]["sass"]


@needs_nvrtc
def test_cached_compile_restores_a_changed_launch_bound(tmp_path, monkeypatch):
    """A compile that kept another ``__launch_bounds__`` (two blocks per SM spilled): a cache hit gives the same
    binary and the module the cubin was built from (its source, line map and metadata), without NVRTC."""
    import newt.backend.cuda as be
    from lsp_server.perfjob import cached_compile
    from newt.backend.cuda import generate_cuda
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "backend"))
    try:
        from kernels import P, aligned, f32, i32, ir
    finally:
        sys.path.pop(0)
    p = tmp_path / "wide.py"
    p.write_text("import newt\nimport newt.language as nl\n\n\n@newt.jit\n"
                 "def wide(x_ptr, w_ptr, b_ptr, y_ptr, N, BLOCK: nl.constexpr):\n"
                 "    cols = nl.arange(0, BLOCK)\n    row = nl.program_id(0)\n"
                 "    x = nl.load(x_ptr + row * N + cols)\n    w = nl.load(w_ptr + cols)\n"
                 "    b = nl.load(b_ptr + cols)\n    mean = nl.sum(x, axis=0) / N\n    xc = x - mean\n"
                 "    rstd = 1.0 / nl.sqrt(nl.sum(xc * xc, axis=0) / N + 1e-5)\n"
                 "    nl.store(y_ptr + row * N + cols, xc * rstd * w + b)\n")

    def build():
        f = ir(str(p), "wide", {"x_ptr": P(f32), "w_ptr": P(f32), "b_ptr": P(f32), "y_ptr": P(f32), "N": i32},
               {"BLOCK": 16384}, aligned("x_ptr", "w_ptr", "b_ptr", "y_ptr", "N"), 16, 3)
        return generate_cuda(f, TARGET, 16, 3)
    m1 = build()
    b1 = cached_compile(be, m1, TARGET)
    assert "min_blocks_dropped" in m1.metadata  # the second try was kept
    m2 = build()
    assert m2.source != m1.source

    class _NoCompile:
        def compile_cuda(self, *a, **k):
            raise AssertionError("compiled again")
    b2 = cached_compile(_NoCompile(), m2, TARGET)
    assert (b2.n_regs, b2.n_spills, b2.shared, b2.cubin, b2.ptx) == (b1.n_regs, b1.n_spills, b1.shared, b1.cubin,
                                                                       b1.ptx)
    assert m2.source == m1.source and m2.metadata == m1.metadata and b2.module is m2
    assert [(x.line, x.col) if x else None for x in m2.line_locs] == \
        [(x.line, x.col) if x else None for x in m1.line_locs]


async def test_compile_process_warms_at_initialize_and_when_trust_comes_later(tmp_path):
    """Trusted at initialization: the compile process starts and imports the backend before any file opens.
    Untrusted: none starts; once the workspace is trusted (``didChangeConfiguration``) it warms up, still before
    any file opens."""
    async def warm_within(c, seconds):
        for _ in range(int(seconds / 0.1)):
            info = await _call(c, "newt/serverInfo", {})
            if info["perf"]["warm"][:1] == [True]:
                return info
            await asyncio.sleep(0.1)
        return None

    c = await _session(tmp_path, {"trusted": True, "target": TARGET})
    try:
        info = await warm_within(c, 120)
        assert info is not None and info["perf"]["workers"][0] and not info["perf"]["timeline"]
    finally:
        await c.stop()
    c = await _session(tmp_path, {"trusted": False, "target": TARGET})
    try:
        await asyncio.sleep(1.0)
        assert (await _call(c, "newt/serverInfo", {}))["perf"]["workers"] == []
        c.notify("workspace/didChangeConfiguration", {"settings": {"trusted": True}})
        assert await warm_within(c, 120) is not None
    finally:
        await c.stop()
