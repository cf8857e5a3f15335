"""``python -m deuteron.autotune.worker FD DEVICE``: one autotuner worker process.

Reads tasks (length-prefixed pickles) on stdin and answers on file descriptor
``FD``.  A task compiles one generated kernel (newt's disk cache keeps the
cubin for the main process) and, on a GPU, launches it once on copies of its
arguments and synchronizes, so a faulting kernel is caught here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import traceback


def classify(e: BaseException) -> dict:
    name = type(e).__name__
    msg = str(e).strip().splitlines()
    first = msg[0] if msg else name
    try:
        from newt.runtime.errors import KernelFaultError, LaunchError, OutOfResources
    except ImportError:  # pragma: no cover
        KernelFaultError = LaunchError = OutOfResources = ()  # noqa: N806
    try:
        from newt import CompilationError
    except ImportError:  # pragma: no cover
        CompilationError = ()  # noqa: N806
    if OutOfResources and isinstance(e, OutOfResources):
        return {"status": "out_of_resources", "message": first}
    if KernelFaultError and isinstance(e, KernelFaultError):
        return {"status": "fault", "message": first, "fatal": True}
    if LaunchError and isinstance(e, LaunchError):
        sticky = bool(getattr(e, "sticky", False))
        code = getattr(e, "code", None) or ""
        if "OUT_OF_RESOURCES" in code or "out of resources" in first.lower():
            return {"status": "out_of_resources", "message": first}
        return {"status": "fault" if sticky else "launch_error", "message": first, "fatal": sticky}
    if CompilationError and isinstance(e, CompilationError):
        return {"status": "compile_error", "message": "\n".join(msg[:12])}
    low = first.lower()
    if "illegal" in low or "misaligned" in low or "unspecified launch failure" in low:
        return {"status": "fault", "message": first, "fatal": True}
    if "out of memory" in low or "too many resources" in low or "shared memory" in low:
        return {"status": "out_of_resources", "message": first}
    return {"status": "error", "message": f"{name}: {first}",
            "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fd = int(argv[0])
    device = argv[1] if len(argv) > 1 else "cuda"
    out = os.fdopen(fd, "wb", buffering=0)
    inp = sys.stdin.buffer
    from deuteron.autotune.workers import load_args, write_frame
    import struct
    import pickle
    hdr = struct.Struct("<Q")
    if device.startswith("cuda:"):
        import torch
        torch.cuda.set_device(int(device.split(":", 1)[1]))
    modules: dict = {}
    args_cache: dict = {}
    sms = None
    while True:
        head = inp.read(hdr.size)
        if len(head) < hdr.size:
            return 0
        (n,) = hdr.unpack(head)
        msg = pickle.loads(inp.read(n))
        if msg is None:
            return 0
        tid, task = msg
        t0 = time.perf_counter()
        res: dict
        try:
            path = task["module"]
            mod = modules.get(path)
            if mod is None:
                name = "deuteron_worker_" + os.path.basename(path)[:-3]
                spec = importlib.util.spec_from_file_location(name, path)
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod
                spec.loader.exec_module(mod)
                if not device.startswith("cuda"):
                    for v in vars(mod).values():
                        if getattr(v, "__newt_jit__", False):
                            v.interpret = True
                modules[path] = mod
            fn = getattr(mod, task["launch"])
            kw = dict(task["constexprs"])
            kw["num_warps"] = task["num_warps"]
            kw["num_stages"] = task["num_stages"]
            if task.get("needs_num_sms"):
                if sms is None:
                    import torch
                    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count \
                        if device.startswith("cuda") else 4
                kw["_NUM_SMS"] = sms
            if task.get("run", True) and task.get("args"):
                ap = task["args"]
                args = args_cache.get(ap)
                if args is None:
                    args = load_args(ap, device)
                    args_cache.clear()
                    args_cache[ap] = args
                fn(*args, **kw)
                if device.startswith("cuda"):
                    from newt.runtime import synchronize
                    synchronize()
            else:
                kernel = getattr(mod, task["kernel"])
                kernel.warmup(*task["warmup_args"], grid=(1,), **kw)
            res = {"status": "ok"}
        except BaseException as e:  # noqa: BLE001 - every failure is a result
            res = classify(e)
        res["seconds"] = time.perf_counter() - t0
        write_frame(out, (tid, res))
        if res.get("fatal"):
            return 3


if __name__ == "__main__":
    sys.exit(main())
