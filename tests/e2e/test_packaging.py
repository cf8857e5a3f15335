"""Packaging (issue 27): ``python -m build`` makes an sdist and a wheel (built from the sdist, so the sdist is
complete) that install into a fresh venv and work there without the repository: ``newt-lsp`` answers an LSP
``initialize`` over stdio, ``newt check`` and the examples (copied out of the checkout) run, and the package
data (newt/runtime/_launch.c) is there.  The venv gets ``--no-deps``: torch, pygls... come from this test
run's own site-packages through a .pth file (its editable install of newt is not seen: a .pth names a folder,
its own .pth files are not read).  Slow (a build and a venv): ``python -m pytest -m slow``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONSAFEPATH") and not k.startswith("NEWT_INTERPRET")}
    env.update(extra)
    return env


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def _read_message(stream) -> dict:
    length = None
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the server closed its output")
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(stream.read(length))


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    pytest.importorskip("build", reason="`build` (in the [dev] extra) makes the wheel")
    pytest.importorskip("setuptools")
    src = tmp_path_factory.mktemp("src")
    # the checkout's files as git sees them (tracked, and new ones not ignored): no build/, .venv, caches
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (REPO / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
                       capture_output=True, text=True, timeout=600, env=_clean_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return wheels[0], sdists[0]


@pytest.fixture(scope="module")
def installed(dists, tmp_path_factory):
    wheel, _ = dists
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # this run's dependencies (torch, pygls, cuda-bindings...), after the venv's own site-packages: its
    # site-packages folders (not the checkout, which an editable install or PYTHONPATH puts on sys.path)
    deps = [p for p in dict.fromkeys([sysconfig.get_paths()["purelib"], *sys.path])
            if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    Path(site, "newt_test_deps.pth").write_text("".join(p + "\n" for p in deps))
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                        "--disable-pip-version-check", "-q", str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    work = tmp_path_factory.mktemp("work")  # outside the checkout: nothing of the repository on sys.path
    shutil.copytree(REPO / "examples", work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    return venv, py, work


def test_the_wheel_and_sdist_hold_the_package_data_and_the_entry_points(dists):
    wheel, sdist = dists
    names = zipfile.ZipFile(wheel).namelist()
    assert "newt/runtime/_launch.c" in names
    for pkg in ("newt/__init__.py", "newt/library.py", "deuteron/__init__.py", "lsp_server/__main__.py"):
        assert pkg in names, pkg
    assert not [n for n in names if n.startswith(("tests/", "examples/"))]
    ep = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry = zipfile.ZipFile(wheel).read(ep).decode()
    assert "newt-lsp = lsp_server.__main__:main" in entry and "newt = newt.__main__:main" in entry
    assert "deuteron = deuteron.frontend:register" in entry
    members = tarfile.open(sdist).getnames()
    root = members[0].split("/")[0]
    for f in ("newt/runtime/_launch.c", "pyproject.toml", "README.md", "examples/vector_add.py",
              "examples/deuteron/softmax.py", "editors/nvim/lua/newt/init.lua", "docs/editor.md"):
        assert f"{root}/{f}" in members, f


def test_the_installed_package_runs_without_the_repository(installed):
    venv, py, work = installed
    env = _clean_env()
    r = subprocess.run([str(py), "-c", "import newt, deuteron, lsp_server, newt.runtime.clauncher as c; "
                        "print(newt.__file__); print(c.SOURCE.is_file())"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    where, launch_c = r.stdout.split()
    assert Path(where).is_relative_to(venv) and launch_c == "True", r.stdout
    newt_exe = py.parent / ("newt.exe" if os.name == "nt" else "newt")
    r = subprocess.run([str(newt_exe), "check", "examples"], cwd=work, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for ex, says in (("examples/vector_add.py", "vector_add: newt matches torch"),
                     ("examples/deuteron/softmax.py", "softmax: ok on")):
        r = subprocess.run([str(py), ex], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0 and says in r.stdout, ex + "\n" + r.stdout[-2000:] + r.stderr[-3000:]


def test_newt_lsp_from_the_wheel_answers_over_stdio(installed):
    venv, py, work = installed
    exe = py.parent / ("newt-lsp.exe" if os.name == "nt" else "newt-lsp")
    r = subprocess.run([str(exe), "--help"], cwd=work, env=_clean_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "language server" in r.stdout, r.stdout + r.stderr
    proc = subprocess.Popen([str(exe)], cwd=work, env=_clean_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {"processId": None, "rootUri": work.as_uri(), "capabilities": {}}}))
        proc.stdin.flush()
        while True:
            msg = _read_message(proc.stdout)
            if msg.get("id") == 1:
                break
        assert msg["result"]["serverInfo"]["name"].lower().startswith("newt"), msg
        assert "hoverProvider" in msg["result"]["capabilities"], msg
        proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None}))
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit", "params": None}))
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()
