"""A worker that lacks a kernel's file loads the text the main process shipped (issue 22, item 2): it is
written into a private directory of the worker (``mkdtemp``), created exclusively and never through a link,
so a directory another local user planted at the old predictable name ``$TMPDIR/newt-tune-src-<hash>`` is
neither written through nor put on ``sys.path``."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from newt.tune import tasks

TEXT = "import shipped_helper_planted_22\n\ndef f():\n    return 41 + 1\n"


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(tasks, "_MODULES", {})
    monkeypatch.setattr(tasks, "_SHIPPED_DIR", [], raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "shipped_helper_planted_22", raising=False)
    return tasks


def test_a_planted_source_directory_is_not_followed(fresh, tmp_path):
    text = TEXT.replace("import shipped_helper_planted_22\n", "")
    sha = hashlib.sha256(text.encode()).hexdigest()
    planted = tmp_path / f"newt-tune-src-{sha[:16]}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (planted / "kern_ship.py").symlink_to(victim)
    ref = tasks.KernelRef(str(tmp_path / "elsewhere" / "kern_ship.py"), "f", sha, "kern_ship", text)
    m = fresh._load_module(ref)
    assert m.f() == 42
    assert victim.read_text() == "precious"
    where = Path(m.__file__).resolve()
    assert planted not in where.parents and str(planted) not in sys.path
    for d in (where.parent, where.parent.parent):
        st = d.stat()
        assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert stat.S_IMODE(where.stat().st_mode) == 0o600


def test_modules_planted_beside_it_are_not_imported(fresh, tmp_path):
    sha = hashlib.sha256(TEXT.encode()).hexdigest()
    planted = tmp_path / f"newt-tune-src-{sha[:16]}"
    planted.mkdir()
    marker = tmp_path / "RAN"
    (planted / "shipped_helper_planted_22.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    ref = tasks.KernelRef(str(tmp_path / "elsewhere" / "kern_ship2.py"), "f", sha, "kern_ship2", TEXT)
    with pytest.raises(ModuleNotFoundError, match="shipped_helper_planted_22"):
        fresh._load_module(ref)
    assert not marker.exists()
