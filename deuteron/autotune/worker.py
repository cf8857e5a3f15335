"""deuteron's screening task, run by newt's tuning workers (``newt.tune.worker``).

A task compiles one generated kernel (newt's disk cache keeps the cubin for
the main process) and, on a GPU, launches it once on copies of its arguments
and synchronizes, so a faulting kernel is caught in the worker.
"""

from __future__ import annotations

import importlib.util
import os
import sys


def classify(e: BaseException) -> dict:
    """The status of a failed task (``newt.tune.classify``)."""
    from newt.tune import classify as c
    return c(e)


_MODULES: dict = {}
_ARGS: dict = {}
_SMS: list = []


def screen(task: dict) -> dict:
    """Compile one generated kernel and, with arguments, launch it once and synchronize (in a worker of
    :class:`deuteron.autotune.workers.WorkerPool`; the device is ``DEUTERON_WORKER_DEVICE``)."""
    from deuteron.autotune.workers import load_args
    device = os.environ.get("DEUTERON_WORKER_DEVICE", "cuda")
    if device.startswith("cuda:") and not _SMS:
        import torch
        torch.cuda.set_device(int(device.split(":", 1)[1]))
    path = task["module"]
    mod = _MODULES.get(path)
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
        _MODULES[path] = mod
    fn = getattr(mod, task["launch"])
    kw = dict(task["constexprs"])
    kw["num_warps"] = task["num_warps"]
    kw["num_stages"] = task["num_stages"]
    if task.get("needs_num_sms"):
        if not _SMS:
            import torch
            _SMS.append(torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
                        if device.startswith("cuda") else 4)
        kw["_NUM_SMS"] = _SMS[0]
    if task.get("run", True) and task.get("args"):
        ap = task["args"]
        args = _ARGS.get(ap)
        if args is None:
            args = load_args(ap, device)
            _ARGS.clear()
            _ARGS[ap] = args
        fn(*args, **kw)
        if device.startswith("cuda"):
            from newt.runtime import synchronize
            synchronize()
    else:
        kernel = getattr(mod, task["kernel"])
        kernel.warmup(*task["warmup_args"], grid=(1,), **kw)
    return {"status": "ok"}


def main(argv=None) -> int:
    """``python -m deuteron.autotune.worker FD [DEVICE]``: a screening worker (see ``newt.tune.worker``)."""
    from newt.tune import worker_main as tune_main
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1:
        os.environ["DEUTERON_WORKER_DEVICE"] = argv[1]
    return tune_main([argv[0], "deuteron.autotune.worker:screen"])


if __name__ == "__main__":
    sys.exit(main())
