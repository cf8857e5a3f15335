"""One rule picks the target for a device (runtime launches and the language server use it)."""

from newt.backend.cuda.targets import pick_target


def test_pick_target():
    assert pick_target(9, 0) == "sm_90a"           # arch-specific features on Hopper
    assert pick_target(8, 0) == "sm_80"
    assert pick_target(8, 6) == "sm_80"            # a cubin runs on later minors of its major
    assert pick_target(8, 9) == "sm_89"
    assert pick_target(10, 0) is None              # no cubin of another major runs there
    assert pick_target(7, 5) is None


def test_runtime_and_editor_agree(monkeypatch):
    from lsp_server.commands import resolve_target
    from newt.runtime.driver import target_for_capability
    monkeypatch.delenv("NEWT_TARGET", raising=False)
    for cap in ((9, 0), (8, 0), (8, 6), (8, 9), (12, 0)):
        assert target_for_capability(*cap) == resolve_target("auto", {"capability": list(cap)}) == pick_target(*cap)
