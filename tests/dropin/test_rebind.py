"""A real ``triton`` imported before ``newt.dropin.install()``: the modules that hold its objects (torch's inductor
does) are pointed at the served ones, and ``uninstall()`` gives them back (newt/dropin/rebind.py).

Each case runs in a child process: install() changes ``sys.modules`` and other modules' globals."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: a stand-in for an installed Triton (what a machine with Triton has on its path), with a name the drop-in
#: serves and one it does not
FAKE = {
    "triton/__init__.py": "__version__ = '9.9.9'\nfrom .runtime.autotuner import Config\n"
                          "from . import compiler, language\nONLY_REAL = object()\n",
    "triton/runtime/__init__.py": "",
    "triton/runtime/autotuner.py": "class Config:\n    real = True\n",
    "triton/compiler/__init__.py": "class ASTSource:\n    real = True\n",
    "triton/language/__init__.py": "def program_id(axis):\n    return 'real'\n",
    "userlib.py": "import triton\nimport triton.language as tl\nfrom triton import Config, ONLY_REAL\n"
                  "from triton.compiler import ASTSource\nLIMIT = 3\n",
}


def _run(tmp_path, code: str, fake: bool = True) -> str:
    """``code`` in a child process, with the stand-in Triton first on its path (``fake``) or the installed one."""
    if fake:
        for rel, text in FAKE.items():
            p = tmp_path / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT] if fake else [ROOT]))
    env.pop("NEWT_DROPIN", None)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                       timeout=240, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return r.stdout


def test_references_taken_before_install_point_at_the_served_package(tmp_path):
    out = _run(tmp_path, """
        import userlib, triton
        assert triton.__version__ == "9.9.9" and userlib.Config.real
        real_triton = triton
        import newt.dropin as nd
        nd.install()
        import triton as served
        assert served.__newt_dropin__ and served is not real_triton
        assert userlib.triton is served                      # a module: the served module of that name
        assert userlib.tl is sys.modules["triton.language"] and userlib.tl.__newt_dropin__
        from triton.compiler import ASTSource
        assert userlib.ASTSource is ASTSource and not hasattr(ASTSource, "real")   # an object: the served one
        assert userlib.Config is served.Config and not hasattr(served.Config, "real")
        assert userlib.ONLY_REAL is real_triton.ONLY_REAL    # nothing served under that name: left as it was
        assert userlib.LIMIT == 3
        nd.uninstall()
        assert userlib.triton is real_triton and userlib.Config.real and userlib.ASTSource.real
        import triton
        assert triton is real_triton and triton.__version__ == "9.9.9"
        print("ok")
    """.replace("import userlib, triton", "import sys, userlib, triton"))
    assert out.strip().endswith("ok")


def test_install_without_a_real_package_rebinds_nothing(tmp_path):
    out = _run(tmp_path, """
        import sys
        import newt.dropin as nd
        from newt.dropin import rebind
        calls = []
        real = rebind.rebind
        rebind.rebind = lambda *a: calls.append(a) or real(*a)
        nd.install()
        import triton                                         # imported after install(): served from the start
        assert triton.__newt_dropin__ and calls == []
        print("ok")
    """)
    assert out.strip().endswith("ok")


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs Triton installed")
def test_inductor_imported_with_real_triton_compiles_through_newt(tmp_path):
    """torch's inductor imported (with the installed Triton) before install(): torch.compile's Triton kernels
    still compile through newt (before: "0 compatible backends for target (cpu)")."""
    out = _run(tmp_path, """
        import os
        import torch, torch._inductor.config as cfg
        import torch._inductor.runtime.triton_heuristics, torch._inductor.codecache
        import triton
        assert not getattr(triton, "__newt_dropin__", False)
        import newt.dropin as nd
        nd.install()
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.getcwd(), "ind")
        from newt.dropin import compiler
        with cfg.patch(cpu_backend="triton", fx_graph_cache=False):
            x = torch.randn(100)
            y = torch.compile(lambda x: x.sin() * 2)(x)
        assert torch.allclose(y, x.sin() * 2) and len(compiler._COMPILED) >= 1
        print("ok")
    """, fake=False)
    assert "ok" in out.split()


def test_install_warns_where_inductor_decided_there_is_no_triton(tmp_path):
    """A process that imported torch's inductor while no ``triton`` could be imported (torch.compile used before
    the drop-in, on a machine without Triton) cannot get torch.compile through the drop-in: install() says so
    and how to avoid it; with inductor imported after install() it does not warn."""
    code = textwrap.dedent("""
        import sys, warnings
        sys.modules["triton"] = None  # as on a machine without Triton
        import torch._inductor.runtime.triton_compat
        del sys.modules["triton"]
        import newt.dropin
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            newt.dropin.install()
        print("WARNED" if any("install the drop-in first" in str(x.message).lower() for x in w) else "SILENT")
        print(newt.dropin.inductor_decided_without_triton())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.stdout.split() == ["WARNED", "True"], r.stdout + r.stderr[-2000:]
    clean = textwrap.dedent("""
        import warnings
        import newt.dropin
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            newt.dropin.install()
        import torch._inductor.runtime.triton_compat as tc
        print("SILENT" if not any("drop-in first" in str(x.message) for x in w) else "WARNED", tc.HAS_TRITON)
    """)
    r = subprocess.run([sys.executable, "-c", clean], capture_output=True, text=True, timeout=300)
    assert r.stdout.split() == ["SILENT", "True"], r.stdout + r.stderr[-2000:]
