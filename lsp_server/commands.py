"""``newt.compile``, ``newt.verify``, ``newt.autotune``, ``newt.show`` and the virtual documents.

Compile runs in the *compile worker* (the server's interpreter; it imports the
CUDA backend and NVRTC, never the user's module).  Verify and Autotune run in
the *run worker* (the ``python`` setting; it imports the user's module with
torch).  Both refuse in an untrusted workspace (error -32001).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import sys
import uuid
from collections import OrderedDict
from typing import Any, Protocol

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

from .analysis import Analysis, uri_to_path
from .commandinfo import AnalysisRef, ConcreteRef, KernelRef, command_info, header
from .features import has_harness_example
from .settings import Settings, apply_log_level, convert_args
from .vdocs import LANGUAGE_IDS, make_uri, parse_uri
from .workers import Worker, WorkerError, worker_env

__all__ = ["Commands", "UNTRUSTED", "KERNEL_ERROR", "WORKER_ERROR", "resolve_target"]

log = logging.getLogger("newt-lsp")

UNTRUSTED = -32001  # the workspace is not trusted: commands that run code are refused
KERNEL_ERROR = -32002  # no kernel at the position, no specialization, the kernel does not compile ...
WORKER_ERROR = -32003  # the worker crashed, hung past its timeout, or hit a CUDA fault

_USER_KINDS = {"user", "import", "compile", "spec", "backend"}


def _error(code: int, message: str, data=None) -> JsonRpcException:
    return JsonRpcException(message=message, code=code, data=data)


def resolve_target(setting: str | None, gpu: dict | None) -> str:
    """``auto`` -> the local GPU's target (sm_90 -> sm_90a ...), else sm_90a."""
    if setting and setting != "auto":
        return setting
    if gpu and gpu.get("capability"):
        major, minor = gpu["capability"]
        try:
            from newt.backend.cuda.targets import pick_target
            best = pick_target(major, minor)  # the runtime's rule (newt.runtime.driver.target_for_capability)
        except ImportError:
            best = None
        if best is not None:
            return best
        return f"sm_{major}{minor}a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"
    return "sm_90a"


class Server(Protocol):
    """What the commands need of the language server (``server.NewtLanguageServer`` is one): a narrow
    interface, so that this module never imports the server (no import cycle)."""

    settings: Settings
    docs: dict
    protocol: Any
    workspace: Any
    pull_diagnostics: bool
    refresh_diagnostics: bool
    refresh_inlay: bool

    def settings_for(self, uri: str | None) -> Settings: ...
    async def analysis_for(self, uri: str, allow_stale: bool = False, exact: bool = True) -> Analysis | None: ...
    async def run_sync(self, fn, *args, **kwargs): ...
    def doc_text(self, uri: str, strict: bool = False) -> tuple[str, int | None]: ...
    def schedule(self, uri: str, delay_ms: int | None = None) -> None: ...
    def _state(self, uri: str) -> Any: ...
    def workspace_diagnostic_refresh(self, params) -> Any: ...
    def workspace_inlay_hint_refresh(self, params) -> Any: ...


class Commands:
    def __init__(self, ls: Server):
        self.ls = ls
        self.compile_worker: Worker | None = None
        self.run_worker: Worker | None = None
        self.compiled: OrderedDict = OrderedDict()  # (src, kernel, spec, target) -> compile result
        self.picked: dict = {}  # (uri, kernel) -> constexpr values the user picked (Compile asks for missing ones)
        self.gpu: dict | None = None
        from .perf import Perf
        self.perf = Perf(ls)  # registers, spills and occupancy of every config, as you type
        #: newt: URI -> (source URI, per document line the source line or None): what each generated view shows
        self.maps: OrderedDict = OrderedDict()

    # -- environment -----------------------------------------------------------------
    async def detect_gpu(self):
        """The local GPU from ``nvidia-smi`` (no CUDA import in the server); None without one."""
        if os.environ.get("NEWT_LSP_NO_GPU") == "1":
            self.gpu = None
            return
        exe = shutil.which("nvidia-smi")
        if exe is None:
            self.gpu = None
            return
        try:
            proc = await asyncio.create_subprocess_exec(
                exe, "--query-gpu=name,compute_cap", "--format=csv,noheader", stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL)
        except OSError:
            self.gpu = None
            return
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 5)
        except asyncio.TimeoutError:  # a hung nvidia-smi: collected now, not by a transport's __del__ at exit
            proc.kill()
            await proc.communicate()
            self.gpu = None
            return
        line = out.decode("utf-8", "replace").strip().splitlines()[:1]
        m = re.match(r"(.+?),\s*(\d+)\.(\d+)", line[0]) if line else None
        if not m:
            self.gpu = None
            return
        self.gpu = {"name": m.group(1).strip(), "capability": (int(m.group(2)), int(m.group(3)))}

    def target(self) -> str:
        return resolve_target(self.ls.settings.target, self.gpu)

    def target_for(self, uri: str | None) -> str:
        """The target of the workspace folder that holds ``uri`` (its own ``target`` setting, else the global one)."""
        return resolve_target(self.ls.settings_for(uri).target, self.gpu)

    def status(self) -> dict:
        g = self.gpu
        return {"mode": "gpu" if g else "compile-only", "gpu": g["name"] if g else None,
                "arch": f"sm_{g['capability'][0]}{g['capability'][1]}" if g else None, "target": self.target()}

    def send_status(self):
        try:
            self.ls.protocol.notify("newt/status", self.status())
        except Exception:
            log.exception("cannot send newt/status")

    async def settings_changed(self, changed: list):
        s = self.ls.settings
        apply_log_level(s)
        if "python" in changed or "cacheDir" in changed:
            if self.run_worker is not None:
                await self.run_worker.stop()
                self.run_worker = None
        if "cacheDir" in changed and self.compile_worker is not None:
            await self.compile_worker.stop()
            self.compile_worker = None
        if any(c in changed for c in ("trusted", "perfDiagnostics", "target")):
            for uri in list(self.ls.docs):  # measured again (or hidden) with the diagnostics' next publish
                self.ls.schedule(uri, 0)
            self.perf.prestart()  # trusted (or switched on) now: the compile processes warm up before the figures
        if "target" in changed:
            self.compiled.clear()
            self.send_status()
        if any(c.startswith("inlayHints") for c in changed) and self.ls.refresh_inlay:
            try:
                self.ls.workspace_inlay_hint_refresh(None)
            except Exception:
                log.debug("inlay hint refresh failed", exc_info=True)
        if "diagnosticsOn" in changed:
            for uri in list(self.ls.docs):
                self.ls._state(uri).saved_analysis = None
                self.ls._state(uri).saved_diags = None
                self.ls.schedule(uri, 0)
        if self.ls.pull_diagnostics and self.ls.refresh_diagnostics and (
                "diagnosticsOn" in changed or "target" in changed):
            try:
                self.ls.workspace_diagnostic_refresh(None)
            except Exception:
                log.debug("diagnostic refresh failed", exc_info=True)

    def forget(self, uri: str):
        for k in [k for k in self.compiled if k[0] == uri]:
            self.compiled.pop(k, None)
        self.perf.forget(uri)

    async def shutdown(self):
        await self.perf.shutdown()
        for w in (self.compile_worker, self.run_worker):
            if w is not None:
                await w.stop()

    def _workers(self, kind: str) -> Worker:
        s = self.ls.settings
        if kind == "compile":
            if self.compile_worker is None:
                self.compile_worker = Worker("compile", sys.executable, worker_env(s.cache_dir), cwd=None)
            return self.compile_worker
        if self.run_worker is None:
            root = None
            try:
                root = uri_to_path(self.ls.workspace.root_uri) if self.ls.workspace.root_uri else None
            except RuntimeError:
                root = None
            extra = {}
            if self.gpu is None:
                extra["NEWT_WORKER_DEVICE"] = os.environ.get("NEWT_WORKER_DEVICE", "")
            self.run_worker = Worker("run", s.python or sys.executable, worker_env(s.cache_dir, extra),
                                     cwd=root if root and os.path.isdir(root) else None)
        return self.run_worker

    async def worker_request(self, method: str, params: dict):
        """A request to the run worker (it imports the user's module): for what a trusted workspace's hovers
        prepare in the background (``dt_newt``); raises ``WorkerError``."""
        return await self._workers("run").request(method, params, timeout=self.ls.settings.worker_timeout)

    # -- dispatch -------------------------------------------------------------------------
    async def run(self, name: str, args: list, token=None):
        arg = convert_args(args[0]) if args else {}
        if not isinstance(arg, dict):
            raise _error(KERNEL_ERROR, f"{name} expects one argument object {{uri, position}}")
        if name in ("newt.compile", "newt.verify", "newt.autotune") and not self.ls.settings.trusted:
            raise _error(UNTRUSTED, f"{name} is disabled because this workspace is not trusted: it would "
                                    "compile or run code from it. Trust the workspace to enable it.")
        if name == "newt.compile":
            return await self.compile(arg)
        if name == "newt.verify":
            return await self.verify(arg)
        if name == "newt.autotune":
            return await self.autotune(arg, token)
        if name == "newt.show":
            return await self.show(arg)
        raise _error(KERNEL_ERROR, f"unknown command {name}")

    async def _info(self, uri: str, **req) -> dict:
        """``commandinfo.command_info`` on the analysis of ``uri``'s text: in a fork of the analysis engine (the
        server's loop never waits for the front end or code generation), on the query thread without engines."""
        from .files import UnreadableDocument
        try:
            text, version = self.ls.doc_text(uri, strict=True)
        except UnreadableDocument as e:  # a FIFO, a device, a huge file... named by the client
            raise _error(KERNEL_ERROR, f"cannot read {uri}: {e}") from None
        picked = {k: v for (u, k), v in self.picked.items() if u == uri}
        msg = dict(req, uri=uri, text=text, version=version, given_by_kernel=picked)
        engine = getattr(self.ls, "engine", None)
        if engine is not None:
            from .engine_host import EngineUnavailable
            try:
                got = await engine.command(msg)
            except EngineUnavailable as e:
                raise _error(WORKER_ERROR, f"the analysis engine could not answer: {e}") from None
            if "error" in got:
                raise _error(WORKER_ERROR, f"the analysis engine failed: {got['error']}")
            return got["result"]
        a = await self.ls.analysis_for(uri)
        return await self.ls.run_sync(command_info, a, msg)

    async def _kernel(self, arg: dict, **req):
        """(the analyzed document, the kernel at ``position`` or named ``kernel``, the whole answer)."""
        uri = arg.get("uri")
        pos = arg.get("position")
        if not isinstance(uri, str):
            raise _error(KERNEL_ERROR, "missing 'uri'")
        given = arg.get("constexprs") if isinstance(arg, dict) else None
        if isinstance(given, dict) and given:
            req["given"] = {k: v for k, v in given.items() if isinstance(k, str) and isinstance(v, (int, float, bool))}
        info = await self._info(uri, position=pos if isinstance(pos, dict) else None, kernel=arg.get("kernel"), **req)
        a = AnalysisRef(info)
        if info.get("kernel") is None:
            where = f"line {int(pos['line']) + 1}" if isinstance(pos, dict) and "line" in pos else "the position"
            raise _error(KERNEL_ERROR, a.spelling.respell(f"no @newt.jit or @dt.kernel kernel at {where} of {a.path}"))
        return a, KernelRef(info["kernel"]), info

    # -- compile ---------------------------------------------------------------------------
    async def compile(self, arg: dict) -> dict:
        a, ka, info = await self._kernel(arg, want=["concrete"], spec=arg.get("spec"))
        if ka.helper:
            raise _error(KERNEL_ERROR, f"{ka.name} is a helper (it is called from other kernels and inlined "
                                       "there); compile a kernel that launches it")
        target = arg.get("target") or self.target_for(a.uri)
        if ka.kind != "jit":
            res = await self._compile_traced(a, ka.name, target)
            return self._traced_result(a, ka.name, res, target)
        given = self._given(a, ka, arg)
        if "spec_error" in info:
            raise _error(KERNEL_ERROR, info["spec_error"]["message"], info["spec_error"]["data"])
        conc = ConcreteRef(info["concrete"])
        res = await self._compile_in_worker(a, ka.name, conc.spec_index, target, given)
        return self._compile_result(a, ka.name, conc, res, target)

    async def _compile_traced(self, a: AnalysisRef, kname: str, target: str) -> dict:
        """Deuteron kernels: traced on their first example in the run worker (it runs the user's host code)."""
        key = (a.uri, kname, 0, target, hash(a.text))
        hit = self.compiled.get(key)
        if hit is not None:
            return hit
        w = self._workers("run")
        try:
            res = await w.request("compile_dt", {"path": a.path, "text": a.text, "kernel": kname, "target": target},
                                  timeout=self.ls.settings.worker_timeout)
        except WorkerError as e:
            raise self._worker_error("compile", kname, e) from None
        self.compiled[key] = res
        return res

    def _traced_result(self, a: AnalysisRef, kname: str, res: dict, target: str) -> dict:
        spec = res.get("specialization") or {}
        docs = {kind: make_uri(a.uri, kname, 0, kind, target) for kind in ("cuda", "ptx", "sass", "ir")}
        return {"kernel": kname,
                "specialization": {"constexprs": spec.get("constexprs", {}), "num_warps": spec.get("num_warps"),
                                   "num_stages": spec.get("num_stages")},
                "specialization_label": spec.get("label"), "arg_types": spec.get("arg_types"), "assumed": {},
                "target": target, "n_regs": res.get("n_regs"), "n_spills": res.get("n_spills"),
                "shared": res.get("shared"), "compile_ms": res.get("compile_ms"), "kernels": res.get("kernels"),
                "documents": docs}

    def _given(self, a: AnalysisRef, ka, arg: dict) -> dict | None:
        """Constexpr values the user picked for this kernel (``constexprs`` in the command's argument, which
        the client asks for when the file does not say them); remembered for Show and the virtual documents."""
        got = arg.get("constexprs") if isinstance(arg, dict) else None
        if isinstance(got, dict) and got:
            clean = {k: v for k, v in got.items() if isinstance(k, str) and isinstance(v, (int, float, bool))}
            self.picked[(a.uri, ka.name)] = clean
        return self.picked.get((a.uri, ka.name))

    async def _compile_in_worker(self, a: AnalysisRef, kname: str, spec_index: int, target: str,
                                 given: dict | None = None) -> dict:
        key = (a.uri, kname, spec_index, target, hash(a.text), tuple(sorted((given or {}).items())))
        hit = self.compiled.get(key)
        if hit is not None:
            self.compiled.move_to_end(key)
            return hit
        w = self._workers("compile")
        try:
            res = await w.request("compile", {"text": a.text, "uri": a.uri, "kernel": kname, "spec": spec_index,
                                              "target": target, "constexprs": given or {}},
                                  timeout=self.ls.settings.worker_timeout)
        except WorkerError as e:
            raise _error(KERNEL_ERROR if e.kind in _USER_KINDS else WORKER_ERROR, str(e),
                         {"kind": e.kind, "traceback": e.traceback} if e.traceback else {"kind": e.kind}) from None
        self.compiled[key] = res
        while len(self.compiled) > 64:
            self.compiled.popitem(last=False)
        return res

    def _compile_result(self, a: AnalysisRef, kname: str, conc, res: dict, target: str) -> dict:
        spec = res.get("specialization") or conc.to_json()
        docs = {kind: make_uri(a.uri, kname, conc.spec_index, kind, target) for kind in ("cuda", "ptx", "sass", "ir")}
        return {
            "kernel": kname,
            "specialization": {"constexprs": spec.get("constexprs", {}), "num_warps": spec.get("num_warps"),
                               "num_stages": spec.get("num_stages")},
            "specialization_label": spec.get("label"),
            "arg_types": spec.get("arg_types"),
            "assumed": spec.get("assumed") or {},
            "target": target,
            "n_regs": res.get("n_regs"),
            "n_spills": res.get("n_spills"),
            "shared": res.get("shared"),
            "compile_ms": res.get("compile_ms"),
            "documents": docs,
        }

    # -- verify ----------------------------------------------------------------------------
    async def verify(self, arg: dict) -> dict:
        a, ka, _info = await self._kernel(arg)
        w = self._workers("run")
        try:
            rep = await w.request("verify", {"path": a.path, "text": a.text, "kernel": ka.name},
                                  timeout=self.ls.settings.worker_timeout)
        except WorkerError as e:
            raise self._worker_error("verify", ka.name, e) from None
        if rep.pop("fatal", False):
            raise _error(WORKER_ERROR, f"verifying {ka.name} crashed the GPU context: "
                         + "; ".join(c.get("message") or "" for c in rep.get("cases", []) if not c.get("ok"))
                         + " (the worker was restarted)", {"kind": "fatal", "cases": rep.get("cases", [])})
        for c in rep.get("cases", []):
            c.pop("traceback", None)
        return rep

    def _worker_error(self, what: str, kname: str, e: WorkerError) -> JsonRpcException:
        code = KERNEL_ERROR if e.kind in _USER_KINDS else WORKER_ERROR
        if e.kind == "environment":
            code = WORKER_ERROR
        msg = str(e) if e.kind in _USER_KINDS else f"{what} {kname}: {e}"
        data = {"kind": e.kind}
        if e.traceback:
            data["traceback"] = e.traceback
        return _error(code, msg, data)

    # -- autotune --------------------------------------------------------------------------
    async def autotune(self, arg: dict, token=None) -> dict:
        a, ka, _info = await self._kernel(arg)
        plain = ka.kind == "jit" and not ka.autotuned
        if plain and not has_harness_example(a.text, ka.name):
            raise _error(KERNEL_ERROR, a.spelling.respell(
                f"{ka.name} is not autotuned and has no example inputs: decorate it with "
                f"@newt.autotune(configs=[...], key=[...]), or add a @newt.harness.example({ka.name}) (the light "
                f"bulb on its def line inserts one) to tune its launch options (num_warps, num_stages)"))
        total = None if plain else (ka.configs or None)  # a plain kernel's count follows its example's grid
        ls = self.ls
        progress = ls.work_done_progress
        if token is None and ls.progress_supported:
            token = str(uuid.uuid4())
            try:
                await asyncio.wait_for(progress.create_async(token), 5)
            except Exception:  # no progress bar, still tune
                token = None
        cancel = asyncio.Event()
        loop = asyncio.get_running_loop()
        done_n = {"n": 0}

        def report(kind, data):
            if kind != "config" or token is None:
                return
            done_n["n"] += 1
            cfg = config_label(data.get("config"))
            if data.get("ms") is not None:
                msg = f"{cfg}: {data['ms']:.4g} ms"
            elif data.get("pruned"):
                msg = f"{cfg}: skipped: {data['pruned'].splitlines()[0][:200]}"
            else:
                msg = f"{cfg}: rejected: {(data.get('error') or 'failed').splitlines()[0][:200]}"
            pct = int(100 * done_n["n"] / total) if total else None
            progress.report(token, lsp.WorkDoneProgressReport(message=msg, percentage=min(pct, 100)
                                                              if pct is not None else None, cancellable=True))

        if token is not None:
            progress.begin(token, lsp.WorkDoneProgressBegin(
                title=f"Autotuning {ka.name}", cancellable=True,
                message=f"{total} config(s)" if total else None, percentage=0 if total else None))
            fut = progress.tokens.get(token)
            if fut is not None:
                fut.add_done_callback(lambda f: loop.call_soon_threadsafe(cancel.set) if f.cancelled() else None)
        w = self._workers("run")
        end_msg = "failed"
        try:
            rep = await w.request("autotune", {"path": a.path, "text": a.text, "kernel": ka.name},
                                  timeout=self.ls.settings.worker_timeout, on_event=report, cancel=cancel)
            if rep.pop("fatal", False):
                end_msg = "crashed"
                raise _error(WORKER_ERROR, f"autotuning {ka.name}: {rep.get('message')} (the worker was restarted)",
                             {"kind": "fatal", "results": rep.get("results", [])})
            if rep.get("cancelled"):
                end_msg = "cancelled"
            elif rep.get("best"):
                b = rep["best"]
                end_msg = f"best: {config_label(b['config'])} ({b['ms']:.4g} ms)"
            else:
                end_msg = rep.get("message") or "no config ran"
            return rep
        except WorkerError as e:
            end_msg = "cancelled" if e.kind == "cancelled" else "failed"
            if e.kind == "cancelled":
                return {"kernel": ka.name, "best": None, "results": [], "cache": None, "cancelled": True,
                        "message": str(e)}
            raise self._worker_error("autotune", ka.name, e) from None
        except asyncio.CancelledError:
            end_msg = "cancelled"
            raise
        finally:
            if token is not None:
                try:
                    progress.end(token, lsp.WorkDoneProgressEnd(message=end_msg))
                except Exception:
                    pass
                progress.tokens.pop(token, None)

    # -- show / virtual documents -------------------------------------------------------------
    async def show(self, arg: dict) -> dict:
        kind = arg.get("kind") or "cuda"
        if kind not in LANGUAGE_IDS:
            raise _error(KERNEL_ERROR, f"unknown document kind {kind!r} (cuda, ptx, sass or ir)")
        spec = arg.get("spec")
        a, ka, info = await self._kernel(arg, want=["concrete"], spec=spec)
        target = arg.get("target") or self.target_for(a.uri)  # the folder's: Show SASS and Compile agree
        if ka.kind != "jit":
            return {"uri": make_uri(a.uri, ka.name, 0, kind, target)}
        self._given(a, ka, arg)
        if "spec_error" in info:
            if kind != "ir":
                raise _error(KERNEL_ERROR, info["spec_error"]["message"], info["spec_error"]["data"])
            idx = 0
        else:
            idx = ConcreteRef(info["concrete"]).spec_index
        return {"uri": make_uri(a.uri, ka.name, idx, kind, target)}

    async def virtual_document(self, uri) -> dict:
        if not isinstance(uri, str):
            raise _error(KERNEL_ERROR, "newt/virtualDocument needs {uri}")
        try:
            vd = parse_uri(uri)
        except ValueError as e:
            raise _error(KERNEL_ERROR, str(e)) from None
        lang = LANGUAGE_IDS[vd.kind]
        target = vd.target or self.target_for(vd.src)
        want = ["ir"] if vd.kind == "ir" else ["concrete", "cuda"] if vd.kind == "cuda" else ["concrete"]
        info = await self._info(vd.src, kernel=vd.kernel, want=want,
                                spec=vd.spec if vd.kind == "ir" else (vd.spec if vd.spec > 0 else None), target=target)
        a = AnalysisRef(info)
        if info.get("kernel") is None:
            return {"text": f"// {vd.kernel} is no longer defined in {a.path}\n", "languageId": lang}
        ka = KernelRef(info["kernel"])
        if ka.kind != "jit":
            return await self._traced_document(a, ka, vd, target, lang)
        if vd.kind == "ir":
            return {"text": info.get("document") or "", "languageId": lang}
        if "spec_error" in info:
            return {"text": f"// {info['spec_error']['message']}\n", "languageId": lang}
        given = self.picked.get((a.uri, ka.name))
        conc = ConcreteRef(info["concrete"])
        if vd.kind == "cuda" and info.get("document") is not None:
            self._remember_map(uri, a.uri, info.get("map"))
            return {"text": info["document"], "languageId": lang}
        key = (a.uri, ka.name, conc.spec_index, target, hash(a.text))
        res = self.compiled.get(key)
        if res is None:
            if not self.ls.settings.trusted:
                return {"text": f"// The {vd.kind.upper()} of {ka.name} comes from NVRTC, which runs only in a "
                                "trusted workspace (newt.compile). Trust the workspace and open this again.\n",
                        "languageId": lang}
            try:
                res = await self._compile_in_worker(a, ka.name, conc.spec_index, target, given)
            except JsonRpcException as e:
                # a worker that was ended (a settings change, a crash) is not the kernel's fault: the client keeps
                # what it shows for this prefix (vscode-extension/src/virtualDocuments.ts)
                head = "// Newt: could not generate this document:" if e.code == WORKER_ERROR else "// compile failed:"
                return {"text": head + "\n" + "\n".join("// " + ln for ln in str(e).splitlines()) + "\n",
                        "languageId": lang}
        text = (res.get("texts") or {}).get(vd.kind) or f"// no {vd.kind} output\n"
        head = header(ka.name, conc, target, "//" if vd.kind != "sass" else "#")
        raw = (res.get("maps") or {}).get(vd.kind)
        if raw is not None and vd.kind in ("ptx", "sass"):
            from .sourcemap import with_header
            self._remember_map(uri, a.uri, with_header(head, raw))
        return {"text": head + text, "languageId": lang}

    # -- source <-> generated code -------------------------------------------------------------
    def _remember_map(self, vuri: str, src: str, lines):
        if not isinstance(lines, list):
            return
        self.maps[vuri] = (src, lines)
        self.maps.move_to_end(vuri)
        while len(self.maps) > 64:
            self.maps.popitem(last=False)

    async def source_map(self, uri) -> dict:
        """``newt/sourceMap``: for a generated view (a ``newt:`` URI), the source file and, per line of the view
        that comes from a line of it, ``[view line, source line]`` (0-based).  The view is generated first when
        it was not (the map is the one of the text the view shows)."""
        if not isinstance(uri, str):
            raise _error(KERNEL_ERROR, "newt/sourceMap needs {uri}")
        if uri not in self.maps:
            await self.virtual_document(uri)
        got = self.maps.get(uri)
        if got is None:
            try:
                src = parse_uri(uri).src
            except ValueError as e:
                raise _error(KERNEL_ERROR, str(e)) from None
            return {"uri": uri, "source": src, "lines": []}
        src, lines = got
        return {"uri": uri, "source": src, "lines": [[i, s - 1] for i, s in enumerate(lines) if s]}

    async def definition(self, uri: str, line: int):
        """Go to definition in a generated view: the source line that generated view line ``line``."""
        if not uri.startswith("newt:"):
            return None
        m = await self.source_map(uri)
        src_line = next((s for g, s in m["lines"] if g == line), None)
        if src_line is None:
            return None
        text = self.ls.doc_text(m["source"])[0] if m["source"] in self.ls.docs else None
        width = len(text.splitlines()[src_line]) if text is not None and src_line < len(text.splitlines()) else 0
        return [lsp.Location(uri=m["source"], range=lsp.Range(lsp.Position(src_line, 0),
                                                              lsp.Position(src_line, width)))]


    async def _traced_document(self, a: AnalysisRef, ka, vd, target: str, lang: str) -> dict:
        key = (a.uri, ka.name, 0, target, hash(a.text))
        res = self.compiled.get(key)
        if res is None:
            if not self.ls.settings.trusted:
                return {"text": f"// {ka.name} is a deuteron kernel: its code is generated by tracing it on an "
                                "example, which runs code from this workspace. Trust the workspace and open this "
                                "again.\n", "languageId": lang}
            try:
                res = await self._compile_traced(a, ka.name, target)
            except JsonRpcException as e:
                # a worker that was ended (a settings change, a crash) is not the kernel's fault: the client keeps
                # what it shows for this prefix (vscode-extension/src/virtualDocuments.ts)
                head = "// Newt: could not generate this document:" if e.code == WORKER_ERROR else "// compile failed:"
                return {"text": head + "\n" + "\n".join("// " + ln for ln in str(e).splitlines()) + "\n",
                        "languageId": lang}
        spec = res.get("specialization") or {}
        c = "#" if vd.kind == "sass" else "//"
        head = f"{c} {ka.name} — {spec.get('label', 'traced')}; target {target}\n\n"
        return {"text": head + ((res.get("texts") or {}).get(vd.kind) or f"{c} no {vd.kind} output\n"),
                "languageId": lang}


_CONFIG_CALL = re.compile(r"^\s*[A-Za-z_][\w.]*\((.*)\)\s*$", re.S)


def config_label(cfg) -> str:
    """An autotune config as progress text: ``BLOCK_M=64, num_warps=4``; a config the worker could only
    give as its repr (``{"config": "dt.Config(block_sizes=[64, 32], num_warps=4)"}``) without the wrapper."""
    if isinstance(cfg, dict) and set(cfg) == {"config"} and isinstance(cfg["config"], str):
        m = _CONFIG_CALL.match(cfg["config"])
        return m.group(1) if m else cfg["config"]
    if isinstance(cfg, dict):
        return ", ".join(f"{k}={v}" for k, v in cfg.items()) or "defaults"
    if isinstance(cfg, str):
        m = _CONFIG_CALL.match(cfg)
        return m.group(1) if m else cfg
    return str(cfg) if cfg is not None else "defaults"
