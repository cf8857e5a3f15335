"""OS priorities: background work (analyses, warm-ups, commands' forks, compiles) yields the CPU to requests.

The protocol process and the engine that answers run at the priority they were started with.  Work that no
request waits on at this moment runs lower (``BACKGROUND_NICE`` on top of its own nice value, and
``SCHED_BATCH`` on Linux: it never preempts a task that wakes up), so that on a busy machine a hover's
processes get the CPU first and the analysis takes what is left.

An unprivileged process can lower its priority but never raise it back (``RLIMIT_NICE`` is 0 almost
everywhere).  An analysis fork becomes the answering engine once it is done, so it lowers only the *thread* that
analyzes (Linux's priorities are per thread): :func:`run_in_background` runs a function in a fresh thread at the
background priority and returns its result; the fork's main thread, which answers afterwards and forks the next
analysis, keeps its priority.

The API for background jobs (e.g. background compiles for performance diagnostics):

* ``run_in_background(fn, *args)``: ``fn(*args)`` in a low-priority thread of this process (blocks until done;
  its exception is raised here);
* ``lower_current_thread()``: the calling thread from now on (a worker's own thread, a process that only does
  background work);
* ``background_preexec``: ``preexec_fn`` of ``subprocess.Popen`` / ``asyncio.create_subprocess_exec`` for a child
  process that only does background work (a compile worker);
* ``lower_process(pid)``: another process of this user, from the outside (every thread it has now).

Everything degrades gracefully: where the OS has no such call, or refuses it, nothing changes (no error).
``NEWT_LSP_BACKGROUND_NICE=0`` turns the nice value off (``SCHED_BATCH`` stays; ``NEWT_LSP_BACKGROUND_BATCH=0``
turns that off).
"""

from __future__ import annotations

import logging
import os
import sys
import threading

__all__ = ["BACKGROUND_NICE", "background_preexec", "lower_current_thread", "lower_process", "run_in_background",
           "thread_priority"]

log = logging.getLogger("newt-lsp")


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


#: how much lower (added nice value) background work runs than the process that starts it
BACKGROUND_NICE = max(0, min(19, _env_int("NEWT_LSP_BACKGROUND_NICE", 1)))
#: SCHED_BATCH for background work (Linux): it does not preempt a task that wakes up to answer
BACKGROUND_BATCH = _env_int("NEWT_LSP_BACKGROUND_BATCH", 1) != 0
_LINUX = sys.platform.startswith("linux")


def _tid() -> int:
    get = getattr(threading, "get_native_id", None)
    return get() if get is not None else 0


def _lower(tid: int, nice: int, batch: bool) -> bool:
    """Lower thread ``tid`` (0: the calling thread) by ``nice`` and to SCHED_BATCH; whether anything changed."""
    changed = False
    if nice > 0 and hasattr(os, "getpriority"):
        try:
            cur = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(19, cur + nice))
            changed = True
        except OSError as e:
            log.debug("cannot lower the priority of %s: %s", tid, e)
    if batch and _LINUX and hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_BATCH"):
        try:
            if os.sched_getscheduler(tid) == os.SCHED_OTHER:
                os.sched_setscheduler(tid, os.SCHED_BATCH, os.sched_param(0))
                changed = True
        except OSError as e:
            log.debug("cannot make %s SCHED_BATCH: %s", tid, e)
    return changed


def lower_current_thread(nice: int | None = None) -> bool:
    """Run the calling thread at the background priority from now on (per thread on Linux; elsewhere
    ``setpriority`` may apply to the whole process, so it is left alone there: see :func:`run_in_background`)."""
    if not _LINUX:
        return False
    return _lower(_tid(), BACKGROUND_NICE if nice is None else nice, BACKGROUND_BATCH)


def background_preexec():
    """``preexec_fn`` for a child process that only does background work (runs in the child before exec)."""
    _lower(0, BACKGROUND_NICE, BACKGROUND_BATCH)


def lower_process(pid: int, nice: int | None = None) -> bool:
    """Lower every thread of process ``pid`` (one of this user's) to the background priority."""
    nice = BACKGROUND_NICE if nice is None else nice
    tids = [pid]
    if _LINUX:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            pass
    return any([_lower(t, nice, BACKGROUND_BATCH) for t in tids])


def thread_priority(tid: int = 0) -> tuple[int | None, int | None]:
    """(nice value, scheduling policy) of thread ``tid`` (0: the calling one); None where unknown."""
    nice = policy = None
    try:
        nice = os.getpriority(os.PRIO_PROCESS, tid)
    except (OSError, AttributeError):
        pass
    try:
        policy = os.sched_getscheduler(tid)
    except (OSError, AttributeError):
        pass
    return nice, policy


def run_in_background(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` in a fresh thread at the background priority; blocks until it returns, returns
    its result or raises its exception.  On systems without per-thread priorities it runs at the caller's
    priority (the caller could never get its own back)."""
    if not _LINUX:
        return fn(*args, **kwargs)
    out: dict = {}

    def body():
        lower_current_thread()
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the caller
            out["error"] = e

    t = threading.Thread(target=body, name="newt-background", daemon=True)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("result")
