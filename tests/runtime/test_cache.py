"""The caches: keys, atomic checksummed entries, corruption, many processes (no GPU needed)."""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import newt
import newt.language as nl
from newt.runtime import cache as C
from newt.runtime import compiler

from . import kernels as K

SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}


def entries(root: Path) -> list:
    return sorted(p for p in root.rglob("*") if p.is_file())


# --- the entry format -----------------------------------------------------------------


def test_roundtrip():
    data = C.encode("k1", {"a": [1, 2], "b": "x"}, {"text": "hello é", "bin": b"\x00\xff" * 10})
    meta, blobs = C.decode(data, "k1")
    assert meta == {"a": [1, 2], "b": "x"} and blobs == {"text": "hello é", "bin": b"\x00\xff" * 10}


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty", "append"])
def test_corruption_is_detected(damage):
    data = C.encode("k1", {"a": 1}, {"bin": b"x" * 100})
    if damage == "truncate":
        bad = data[:-7]
    elif damage == "flip":
        bad = bytearray(data)
        bad[-20] ^= 1
        bad = bytes(bad)
    elif damage == "magic":
        bad = b"X" + data[1:]
    elif damage == "empty":
        bad = b""
    else:
        bad = data + b"junk"
    with pytest.raises(ValueError):
        C.decode(bad, "k1")


def test_entry_of_another_key_is_refused():
    with pytest.raises(ValueError, match="another key"):
        C.decode(C.encode("k1", {}, {}), "k2")


def test_put_is_atomic_and_leaves_no_temp_files(tmp_path):
    c = C.DiskCache(tmp_path)
    assert c.put("ab" * 32, {"m": 1}, {"b": b"123"})
    files = entries(tmp_path)
    assert [p.name for p in files] == [f"{'ab' * 32}.bin"]
    assert files[0].parent.name == "ab" and files[0].parent.parent.name == "kernels"
    assert c.get("ab" * 32) == ({"m": 1}, {"b": b"123"})


def test_corrupt_file_is_removed_and_reported(tmp_path):
    c = C.DiskCache(tmp_path)
    key = "cd" * 32
    c.put(key, {"m": 1}, {"b": b"123"})
    p = c.path(key)
    p.write_bytes(p.read_bytes()[:-2])
    with pytest.warns(RuntimeWarning, match="corrupt"):
        assert c.get(key) is None
    assert not p.exists() and c.stats.corrupt == 1


def test_unwritable_directory_warns_once_and_continues(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    c = C.DiskCache(blocker / "cache")
    with pytest.warns(RuntimeWarning, match="cannot write to the cache directory"):
        assert not c.put("ef" * 32, {}, {})
    assert not c.put("ef" * 32, {}, {})  # warned once only
    assert c.stats.write_errors == 2


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("NEWT_CACHE_DIR", str(tmp_path / "x"))
    assert C.default_cache_dir() == tmp_path / "x"
    monkeypatch.setenv("NEWT_CACHE_DIR", "")
    assert C.default_cache_dir() is None
    monkeypatch.delenv("NEWT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert C.default_cache_dir() == tmp_path / "xdg" / "newt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert C.default_cache_dir() == tmp_path / "home" / ".cache" / "newt"
    monkeypatch.setenv("NEWT_DISABLE_CACHE", "1")
    assert C.default_cache_dir() is None


# --- compiling through the caches -------------------------------------------------------


def test_memory_then_disk_then_rebuild(fake_backend, isolated_cache):
    ck1 = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})
    assert fake_backend.compiled == 1
    assert newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128}) is ck1  # memory
    compiler.clear_memory_cache()
    ck2 = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})  # disk
    assert fake_backend.compiled == 1 and ck2 is not ck1
    assert ck2.asm["cubin"] == ck1.asm["cubin"] and ck2.asm["cuda"] == ck1.asm["cuda"]
    assert dict(ck2.metadata) == dict(ck1.metadata) and ck2.params == ck1.params
    # damage the entry: it is rebuilt and rewritten
    (p,) = entries(isolated_cache)
    p.write_bytes(p.read_bytes()[:100])
    compiler.clear_memory_cache()
    with pytest.warns(RuntimeWarning, match="corrupt"):
        ck3 = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})
    assert fake_backend.compiled == 2 and ck3.asm["cubin"] == ck1.asm["cubin"]
    C.decode(p.read_bytes(), ck1.cache_key)  # valid again


def test_disabled_disk_cache(fake_backend, monkeypatch, isolated_cache):
    monkeypatch.setenv("NEWT_CACHE_DIR", "")
    newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})
    compiler.clear_memory_cache()
    newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})
    assert fake_backend.compiled == 2 and not isolated_cache.exists()


def test_cache_false_always_compiles(fake_backend):
    newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128}, cache=False)
    newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128}, cache=False)
    assert fake_backend.compiled == 2


def _key(fn=K.add_kernel, **kw):
    args = dict(arg_types={n: nl.dtype_from_name(t) for n, t in SIG.items()}, constexprs={"BLOCK_SIZE": 128},
                hints={}, target="sm_90a", num_warps=4, num_stages=3)
    args.update(kw)
    return compiler.cache_key(fn, **args)


def test_key_covers_the_specialization_and_options():
    base = _key()
    assert _key() == base
    variants = [
        _key(target="sm_80"), _key(num_warps=8), _key(num_stages=2), _key(constexprs={"BLOCK_SIZE": 256}),
        _key(hints={"x_ptr": 16}), _key(debug=True),
        _key(arg_types={**{n: nl.dtype_from_name(t) for n, t in SIG.items()}, "n_elements": nl.int64}),
        _key(constexprs={"BLOCK_SIZE": 128.0}),
    ]
    assert len(set(variants + [base])) == len(variants) + 1


def test_key_covers_the_compiler_and_nvrtc_versions(monkeypatch):
    base = _key()
    monkeypatch.setattr(compiler, "_NVRTC", "99.9")
    assert _key() != base
    monkeypatch.undo()
    monkeypatch.setattr(compiler, "_PKG_FP", "0.0.0+other")
    assert _key() != base


def _load_module(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


KERNEL_SRC = """
import newt
import newt.language as nl
from {helpers} import helper
FACTOR = {factor}

@newt.jit
def k(x_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.store(x_ptr + offs, helper(nl.load(x_ptr + offs)) * FACTOR)
"""

HELPERS_SRC = """
import newt
import newt.language as nl

@newt.jit
def inner(x):
    return x + {inner}

@newt.jit
def helper(x):
    return inner(x) * 2
"""


def test_fingerprint_follows_callees_transitively_and_constants(tmp_path):
    def fp(tag, inner, factor):
        h = _load_module(tmp_path, f"helpers_{tag}", HELPERS_SRC.format(inner=inner))
        m = _load_module(tmp_path, f"kern_{tag}", KERNEL_SRC.format(helpers=h.__name__, factor=factor))
        return compiler.source_fingerprint(m.k), m

    a, _ = fp("a", 1, 3)
    b, _ = fp("b", 2, 3)  # only the helper's helper changed
    c, _ = fp("c", 1, 4)  # only a module constant changed
    assert len({a, b, c}) == 3


def test_fingerprint_is_stable_for_the_same_source():
    assert compiler.source_fingerprint(K.add_kernel) == compiler.source_fingerprint(newt.jit(K.add_kernel.fn))


def test_constexpr_jit_function_arguments_are_keyed_by_source():
    k1 = _key(K.helper_kernel, arg_types={"x_ptr": nl.pointer_type(nl.float32),
                                          "out_ptr": nl.pointer_type(nl.float32), "n": nl.int32},
              constexprs={"BLOCK": 16, "ACT": K.relu})
    k2 = _key(K.helper_kernel, arg_types={"x_ptr": nl.pointer_type(nl.float32),
                                          "out_ptr": nl.pointer_type(nl.float32), "n": nl.int32},
              constexprs={"BLOCK": 16, "ACT": K.twice})
    assert k1 != k2
    assert "jit:relu:" in compiler.stable_repr(K.relu)


def test_jit_kernel_uses_the_disk_cache(fake_backend, fake_gpu, cuda_ok, isolated_cache):
    x = torch.randn(64)
    k1 = newt.jit(K.add_kernel.fn)
    k1[(1,)](x, x, x, 64, BLOCK_SIZE=64)
    compiler.clear_memory_cache()
    k2 = newt.jit(K.add_kernel.fn)  # a fresh process would look like this
    k2[(1,)](x, x, x, 64, BLOCK_SIZE=64)
    assert fake_backend.compiled == 1 and len(fake_gpu.launches) == 2
    assert len(entries(isolated_cache / "kernels")) == 1  # (the compiled launcher may be built under launcher/)


# --- many processes ------------------------------------------------------------------------


def _pool(n):
    return mp.get_context("spawn").Pool(n)


def test_processes_compiling_the_same_kernel_share_one_entry(tmp_path):
    from .mp_worker import compile_in_process
    cache_dir = tmp_path / "shared-cache"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    n = 4
    with _pool(n) as pool:
        results = pool.map(compile_in_process, [(str(cache_dir), str(barrier), n)] * n)
    keys = {r[1] for r in results}
    cubins = {r[2] for r in results}
    assert len(keys) == 1 and len(cubins) == 1
    files = entries(cache_dir)
    assert len(files) == 1 and not any(p.name.endswith(".tmp") for p in files)
    C.decode(files[0].read_bytes(), keys.pop())
    # a later process finds it on disk and compiles nothing
    barrier2 = tmp_path / "barrier2"
    barrier2.mkdir()
    with _pool(1) as pool:
        (compiled, _, cubin), = pool.map(compile_in_process, [(str(cache_dir), str(barrier2), 1)])
    assert compiled == 0 and cubin in cubins


def test_concurrent_writers_and_readers_never_see_a_partial_entry(tmp_path):
    from .mp_worker import hammer_entry
    key = "12" * 32
    with _pool(4) as pool:
        results = pool.map(hammer_entry, [(str(tmp_path), key, 1 << 20, 40, seed) for seed in range(4)])
    assert all(r == (0, 0) for r in results), results
    assert [p.name for p in entries(tmp_path)] == [f"{key}.bin"]


def test_clear_cache(fake_backend, isolated_cache):
    newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})
    assert entries(isolated_cache)
    assert newt.runtime.cache_dir() == isolated_cache
    newt.runtime.clear_cache(disk=True)
    assert not isolated_cache.exists()
    newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})
    assert fake_backend.compiled == 2


def test_cache_dir_env_is_followed(fake_backend, monkeypatch, tmp_path):
    other = tmp_path / "other"
    monkeypatch.setenv("NEWT_CACHE_DIR", str(other))
    newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 64})
    assert len(entries(other)) == 1
    assert os.path.commonpath([str(entries(other)[0]), str(other)]) == str(other)


# --- issue 22, item 17: an entry whose checksum is right but whose metadata is malformed is a miss ---------

def _set(path, value):
    def mutate(meta, blobs):
        *head, last = path
        d = {"meta": meta, "blobs": blobs}
        for k in head:
            d = d[k]
        if value is _DELETE:
            del d[last]
        else:
            d[last] = value(d[last]) if callable(value) else value
    return mutate


_DELETE = object()
MALFORMED = {
    "num_warps a string": _set(("meta", "metadata", "num_warps"), "4"),
    "num_warps not a power of 2": _set(("meta", "metadata", "num_warps"), 3),
    "num_warps of another build": _set(("meta", "metadata", "num_warps"), 8),
    "target of another build": _set(("meta", "metadata", "target"), "sm_80"),
    "negative dynamic shared": _set(("meta", "metadata", "dynamic_shared"), -1),
    "dynamic shared a bool": _set(("meta", "metadata", "dynamic_shared"), True),
    "shared sizes disagree": _set(("meta", "metadata", "shared"), lambda v: v + 4096),
    "symbol not an identifier": _set(("meta", "metadata", "name"), "k(); system"),
    "kernel_name a number": _set(("meta", "metadata", "kernel_name"), 5),
    "no n_regs": _set(("meta", "metadata", "n_regs"), _DELETE),
    "line a string": _set(("meta", "metadata", "line"), "12"),
    "debug a string": _set(("meta", "metadata", "debug"), "no"),
    "maxnreg zero": _set(("meta", "metadata", "maxnreg"), 0),
    "tensormaps a string": _set(("meta", "metadata", "tensormaps"), "x"),
    "unknown struct code": _set(("meta", "params"), lambda ps: [dict(ps[0], code="x"), *ps[1:]]),
    "extra parameter field": _set(("meta", "params"), lambda ps: [dict(ps[0], extra=1), *ps[1:]]),
    "parameter name a number": _set(("meta", "params"), lambda ps: [dict(ps[0], name=1), *ps[1:]]),
    "arg_names not strings": _set(("meta", "arg_names"), [1, 2]),
    "arg_names miss a parameter": _set(("meta", "arg_names"), lambda ns: ns[1:]),
    "no cubin": _set(("blobs", "cubin"), _DELETE),
    "cubin as text": _set(("blobs", "cubin"), "not bytes"),
    "cuda source as bytes": _set(("blobs", "cuda"), b"bytes"),
}


@pytest.mark.parametrize("mutate", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_metadata_with_a_valid_checksum_is_a_miss(fake_backend, isolated_cache, mutate):
    ck1 = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})
    (p,) = entries(isolated_cache)
    meta, blobs = C.decode(p.read_bytes(), ck1.cache_key)
    compiler.check_entry(meta, blobs)  # what the compiler writes passes
    mutate(meta, blobs)
    p.write_bytes(C.encode(ck1.cache_key, meta, blobs))  # a right checksum
    compiler.clear_memory_cache()
    with pytest.warns(RuntimeWarning, match="corrupt"):
        ck2 = newt.compile(K.add_kernel, signature=SIG, constexprs={"BLOCK_SIZE": 128})
    assert fake_backend.compiled == 2, "the malformed entry was used"
    assert dict(ck2.metadata) == dict(ck1.metadata) and ck2.params == ck1.params
    meta2, blobs2 = C.decode(p.read_bytes(), ck1.cache_key)  # replaced by a good one
    compiler.check_entry(meta2, blobs2)


@pytest.mark.parametrize("value", [[1], {"index": "0", "config": "c"}, {"index": True, "config": "c"},
                                   {"index": -1, "config": "c"}, {"index": 0}, {"index": 0, "config": "c",
                                                                                "timings": {"c": "fast"}}])
def test_malformed_tuning_entries_are_removed(tmp_path, value):
    from newt.tune.autotuner import _check_tuning_entry
    dc = C.DiskCache(tmp_path)
    dc.put_json("ab" * 32, value, "autotune")
    with pytest.warns(RuntimeWarning, match="malformed"):
        assert dc.get_json("ab" * 32, "autotune", validate=_check_tuning_entry) is None
    assert not dc.path("ab" * 32, "autotune").exists()
    good = {"index": 1, "config": "BLOCK: 64", "timings": {"BLOCK: 64": 0.5, "BLOCK: 32": None}}
    dc.put_json("cd" * 32, good, "autotune")
    assert dc.get_json("cd" * 32, "autotune", validate=_check_tuning_entry) == good


def test_trim_removes_the_least_recently_used_entries_first(tmp_path):
    c = C.DiskCache(tmp_path)
    blob = b"x" * 1000
    keys = [C.hash_key(["trim", i]) for i in range(8)]
    for i, k in enumerate(keys):
        assert c.put(k, {"i": i}, {"b": blob}, "lsp-cubin")
        os.utime(c.path(k, "lsp-cubin"), (1000 + i, 1000 + i))  # written in this order, a second apart
    c.put(C.hash_key(["other kind"]), {}, {"b": blob * 20}, "kernels")
    size = c.path(keys[0], "lsp-cubin").stat().st_size
    assert c.get(keys[0], "lsp-cubin") is not None  # a read makes the oldest the most recently used
    assert c.trim("lsp-cubin", 8 * size) == 0  # within the bound: nothing removed
    removed = c.trim("lsp-cubin", 6 * size)  # over it: down to three quarters (4 entries)
    assert removed == 4
    left = [k for k in keys if c.path(k, "lsp-cubin").exists()]
    assert left == [keys[0], keys[5], keys[6], keys[7]]
    assert c.get(C.hash_key(["other kind"]), "kernels") is not None  # other kinds untouched


def test_the_editors_cubin_cache_is_trimmed_as_it_is_written(tmp_path, monkeypatch):
    from lsp_server import perfjob
    c = C.DiskCache(tmp_path)
    monkeypatch.setattr(perfjob, "_puts", [0])
    monkeypatch.setenv("NEWT_LSP_CUBIN_CACHE_MB", str(4000 / (1024 * 1024)))
    blob = b"y" * 1000
    for i in range(3 * perfjob._TRIM_EVERY + 1):
        c.put(C.hash_key(["cubin", i]), {}, {"b": blob}, "lsp-cubin")
        perfjob._trim_now_and_then(c)
    total = sum(f.stat().st_size for f in (tmp_path / "lsp-cubin").rglob("*.bin"))
    assert 0 < total <= 4000 + 1000 * perfjob._TRIM_EVERY  # bounded between trims, never emptied
    monkeypatch.setenv("NEWT_LSP_CUBIN_CACHE_MB", "not a number")
    assert perfjob.cubin_cache_limit() == 256 * 1024 * 1024
