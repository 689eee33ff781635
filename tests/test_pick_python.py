"""Which Python `make setup` builds .venv/ from: as root, one the sandbox accounts can run, or none."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "autograder"))
import pick_python  # noqa: E402


def test_as_root_without_a_python_the_accounts_can_run_no_venv_is_built_and_the_fix_is_named(monkeypatch, capsys):
    monkeypatch.setattr(pick_python.os, "geteuid", lambda: 0)
    monkeypatch.setattr(pick_python.shutil, "which", lambda p: {"python3": "/root/.pyenv/shims/python3",
                                                                "/usr/bin/python3": "/usr/bin/python3"}.get(p))
    problems = {"python3": "python3 lives under /root, which other users may not enter (mode 700)",
                "/usr/bin/python3": "/usr/bin/python3 has no venv module (or does not run)"}
    monkeypatch.setattr(pick_python, "usable", problems.get)
    monkeypatch.setattr(pick_python, "probe", lambda p: ("/root/.pyenv/versions/3.11.7/bin/python3.11",
                                                         "/root/.pyenv/versions/3.11.7", 311))
    assert pick_python.pick("python3") is None
    err = capsys.readouterr().err
    assert "refusing to build .venv/ as root: python3 lives under /root" in err
    assert "/usr/bin/python3: /usr/bin/python3 has no venv module" in err
    assert "`apt-get install python3-venv`" in err and "`chmod o+x /root`" in err


def test_as_root_a_python_the_accounts_can_run_is_taken_instead(monkeypatch, capsys):
    monkeypatch.setattr(pick_python.os, "geteuid", lambda: 0)
    monkeypatch.setattr(pick_python.shutil, "which", lambda p: {"python3": "/root/.pyenv/shims/python3",
                                                                "/usr/bin/python3": "/usr/bin/python3"}.get(p))
    monkeypatch.setattr(pick_python, "usable", lambda p: None if p == "/usr/bin/python3" else "under /root")
    assert pick_python.pick("python3") == "/usr/bin/python3"
    assert "building .venv/ from /usr/bin/python3 instead" in capsys.readouterr().err
