"""Worker functions for the multiprocess cache tests (run in spawned processes)."""

from __future__ import annotations

import os


def compile_in_process(args):
    cache_dir, barrier_path, n_workers = args
    os.environ["NEWT_CACHE_DIR"] = cache_dir
    import time

    from newt.runtime import compiler

    from . import kernels as K
    from .fakes import FakeBackend
    fb = FakeBackend()
    compiler._backend = lambda: fb
    # start together: every worker touches a file, then waits for all of them
    open(os.path.join(barrier_path, str(os.getpid())), "w").close()
    deadline = time.time() + 60
    while len(os.listdir(barrier_path)) < n_workers and time.time() < deadline:
        time.sleep(0.005)
    import newt
    ck = newt.compile(K.add_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                               "n_elements": "i32"}, constexprs={"BLOCK_SIZE": 128})
    return fb.compiled, ck.cache_key, bytes(ck.asm["cubin"])


def hammer_entry(args):
    """Write and read one key many times; report what readers saw."""
    cache_dir, key, payload_size, rounds, seed = args
    from newt.runtime.cache import DiskCache
    c = DiskCache(cache_dir)
    blob = bytes([seed % 256]) * payload_size
    seen_partial = 0
    for _ in range(rounds):
        c.put(key, {"writer": seed}, {"blob": blob})
        got = c.get(key)
        if got is None:
            continue
        meta, blobs = got
        b = blobs["blob"]
        if len(b) != payload_size or b != bytes([meta["writer"] % 256]) * payload_size:
            seen_partial += 1
    return seen_partial, c.stats.corrupt
