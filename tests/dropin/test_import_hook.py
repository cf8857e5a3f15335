"""``newt.dropin.install()``: ``import triton`` and its submodules come from newt through one import hook."""

from __future__ import annotations

import sys
import types

import pytest


def test_install_puts_one_finder_first_and_uninstall_removes_it(dropin):
    assert isinstance(sys.meta_path[0], dropin.DropinFinder)
    dropin.install()  # idempotent: still one finder
    assert sum(isinstance(f, dropin.DropinFinder) for f in sys.meta_path) == 1
    dropin.uninstall()
    assert not any(isinstance(f, dropin.DropinFinder) for f in sys.meta_path)
    assert not dropin.is_installed()


def test_import_triton_comes_from_newt(dropin):
    import triton
    import triton.language as tl

    import newt
    import newt.language as nl
    assert triton.__newt_dropin__ is True
    assert triton.jit.__module__ == "newt.dropin.triton"
    assert tl.constexpr is nl.constexpr and tl.load is nl.load and tl.float16 is nl.float16
    assert tl.core.program_id is nl.program_id  # Triton's language.core holds the whole language
    assert triton.cdiv is newt.cdiv and triton.next_power_of_2(5) == 8
    import triton.tools.tensor_descriptor as td

    import newt.tools.tensor_descriptor as ntd
    assert td is ntd


def test_a_triton_imported_before_install_is_replaced():
    import newt.dropin as nd
    fake = types.ModuleType("triton")
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "triton"}
    sys.modules["triton"] = fake
    try:
        nd.install()
        import triton
        assert triton is not fake and triton.__newt_dropin__
    finally:
        nd.uninstall()
        for k in [k for k in sys.modules if k.split(".")[0] == "triton"]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_modules_triton_has_and_newt_does_not_are_module_not_found(dropin):
    with pytest.raises(ModuleNotFoundError, match="triton._C"):
        import triton._C
    with pytest.raises(ModuleNotFoundError):
        import triton.runtime.interpreter  # noqa: F401  (torch probes it; no such thing here)
    with pytest.raises(ImportError):
        from triton.backends.compiler import AttrsDescriptor  # noqa: F401  (Triton 3.4 has none)


def test_uninstall_forgets_the_served_modules(dropin):
    import triton
    assert triton.__newt_dropin__
    dropin.uninstall()
    assert "triton" not in sys.modules or not getattr(sys.modules["triton"], "__newt_dropin__", False)
    dropin.install()
    import triton as again
    assert again.__newt_dropin__


def test_register_provider_serves_another_package(dropin, tmp_path, monkeypatch):
    prov = tmp_path / "fakeprov_dropin.py"
    prov.write_text("import types\n"
                    "def module_for(name):\n"
                    "    m = types.ModuleType(name)\n    m.__path__ = []\n    m.served = name\n    return m\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    dropin.register_provider("fakeforeign", "fakeprov_dropin")
    try:
        import fakeforeign.sub as fs
        assert fs.served == "fakeforeign.sub"
        assert dropin.providers()["fakeforeign"] == "fakeprov_dropin"
    finally:
        dropin._PROVIDERS.pop("fakeforeign", None)
        for k in [k for k in sys.modules if k.split(".")[0] == "fakeforeign"]:
            del sys.modules[k]
    with pytest.raises(ValueError):
        dropin.register_provider("a.b", "x")


def test_served_modules_answer_find_spec_once_imported(dropin):
    # torch's CUDA initialisation asks importlib.util.find_spec("triton"); a served module with no __spec__ made
    # that raise ValueError ("triton.__spec__ is None") and every CUDA call of a drop-in program failed
    import importlib.util

    import triton
    import triton.language
    import triton.runtime.driver  # (a facade built in memory)
    import triton.testing
    for name in ("triton", "triton.runtime", "triton.runtime.driver", "triton.testing", "triton.language"):
        assert name in sys.modules
        assert importlib.util.find_spec(name) is not None, name
    assert triton.__spec__ is not None and triton.__spec__.name == "triton"
