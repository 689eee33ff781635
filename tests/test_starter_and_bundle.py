"""The starter is the solution with its answers removed; the student bundle works on its own."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "starter"))
import build_bundle  # noqa: E402
import generate  # noqa: E402
from rmsnorm_check import load_impl  # noqa: E402


def solution_code_lines():
    """Substantial lines written inside the solution's TODO blocks (the answers)."""
    lines = set()
    for _, _, block in generate.solution_blocks(generate.SOLUTION.read_text()):
        for line in block:
            s = line.strip()
            if len(s) > 12 and not s.startswith("#"):
                lines.add(s)
    return lines


def test_committed_starter_is_generated_from_the_solution():
    assert (ROOT / "starter" / "rmsnorm.py").read_text() == generate.make_starter(generate.SOLUTION.read_text()), \
        "starter/rmsnorm.py is out of date: run `make starter`"


def test_starter_contains_no_solution_code():
    starter = {line.strip() for line in (ROOT / "starter" / "rmsnorm.py").read_text().splitlines()}
    leaked = solution_code_lines() & starter
    assert not leaked, f"solution lines in the starter: {sorted(leaked)[:5]}"
    assert len(solution_code_lines()) > 40


def test_starter_imports_and_every_entry_point_raises_not_implemented():
    import torch
    S = load_impl(ROOT / "starter" / "rmsnorm.py", backend="mini_triton", name="starter")
    x, g = torch.randn(4, 8), torch.randn(8)
    for call in (lambda: S.rmsnorm_forward(x, g), lambda: S.rmsnorm_backward(x, x, g, torch.ones(4)),
                 lambda: S.rmsnorm(x, g),
                 lambda: S.rmsnorm_fwd_kernel[(1,)](x, g, x, x, 4, 8, 8, 8, 1e-5, BLOCK_M=4, BLOCK_N=8,
                                                    SINGLE_PASS=True)):
        with pytest.raises(NotImplementedError, match="TODO"):
            call()
    for name in ("rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel", "TritonRMSNorm", "rmsnorm_forward",
                 "rmsnorm_backward", "rmsnorm", "BACKEND", "DEVICE"):
        assert hasattr(S, name)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = build_bundle.build(tmp_path_factory.mktemp("dist") / "rmsnorm-student.zip")
    dest = tmp_path_factory.mktemp("unzipped")
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        z.extractall(dest)
    return out, names, dest / "rmsnorm-student"


def test_bundle_holds_the_starter_simulator_tests_and_no_answers(bundle):
    _, names, top = bundle
    for must in ("rmsnorm.py", "Makefile", "README.md", "requirements.txt", "bench.py", "tests/test_public.py",
                 "mini_triton/__init__.py", "mini_triton/README.md"):
        assert f"rmsnorm-student/{must}" in names
    assert not any("autograder" in n or "solution" in n for n in names), names
    answers = solution_code_lines()
    for path in top.rglob("*.py"):
        leaked = answers & {line.strip() for line in path.read_text().splitlines()}
        assert not leaked, f"{path.name} holds solution code: {sorted(leaked)[:3]}"


def _make(top, *targets):
    env = dict(os.environ, MINI_TRITON="1")
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run(["make", *targets, f"PY={sys.executable}"], cwd=top, env=env, capture_output=True,
                          text=True, timeout=600)


def test_bundle_make_test_fails_on_the_starter_with_todo_messages(bundle):
    _, _, top = bundle
    out = _make(top, "test")
    assert out.returncode != 0
    assert "NotImplementedError: TODO" in out.stdout and "failed" in out.stdout


def test_bundle_make_test_and_submit_pass_with_the_solution(bundle, tmp_path):
    _, _, top = bundle
    work = tmp_path / "student"
    shutil.copytree(top, work)
    shutil.copy(ROOT / "solution" / "rmsnorm.py", work / "rmsnorm.py")
    out = _make(work, "test")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "passed" in out.stdout
    out = _make(work, "submit")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    with zipfile.ZipFile(work / "submission.zip") as z:
        assert z.namelist() == ["rmsnorm.py"]
        assert z.read("rmsnorm.py") == (ROOT / "solution" / "rmsnorm.py").read_bytes()
