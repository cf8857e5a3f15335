"""newt's tuning executor, shared by ``@newt.autotune``, deuteron's searches and the editor.

Compilation needs no GPU, so candidates compile on every core (and on every
machine of a Dask cluster); only timing needs a GPU, and it runs on every
visible GPU, one worker per device.  See docs/tuning.md.

* :func:`get_executor` -- ``serial``, ``local`` (worker processes; default),
  ``dask`` / ``tcp://scheduler:8786`` (``NEWT_TUNE_CLUSTER``);
* :class:`CompileTask` / :func:`compile_spec_for` -- one specialization to
  compile, computed from real arguments; :func:`compile_stream` -- compile
  many, installing the cubins as they arrive;
* :class:`TimeTask` / :class:`ArgSpec` -- timing on a GPU worker, inputs made
  there from a seed;
* :class:`AdaptiveTimeout`, :class:`TuneProgress`, :func:`classify`.
"""

from __future__ import annotations

from .classify import FAILED, STATUSES, classify
from .executor import Executor, LocalExecutor, SerialExecutor, ThreadExecutor, cpu_count, visible_gpus
from .pipeline import close_shared, compile_all, compile_stream, shared_executor
from .progress import TuneProgress
from .select import get_executor, register_executor
from .tasks import (
           COMPILE,
           TIME,
           ArgSpec,
           CompileTask,
           KernelRef,
           TimeTask,
           compile_spec_for,
           default_target,
           install,
           target_features,
)
from .timeouts import AdaptiveTimeout
from .worker import main as worker_main
from .workers import ProcessPool, read_frame, write_frame

__all__ = ["Executor", "SerialExecutor", "ThreadExecutor", "LocalExecutor", "get_executor", "register_executor",
           "visible_gpus", "cpu_count", "CompileTask", "TimeTask", "ArgSpec", "KernelRef", "compile_spec_for",
           "install", "compile_stream", "compile_all", "shared_executor", "close_shared", "AdaptiveTimeout",
           "TuneProgress", "classify", "STATUSES", "FAILED", "COMPILE", "TIME",
           "default_target", "target_features", "worker_main", "ProcessPool", "read_frame", "write_frame"]
