"""`make partial PARTS=...`: the solution with only some parts answered, graded and tested as a student's file.

A student who stops after part (c) has part (b)'s backward (one program per row, an M x N partial
buffer): the public tests of parts (a)-(c) pass, part (d)'s fail, and the grader gives 90 with the extra
credit at 0. With part (d) too, 90 + 5.
"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT


def _make(*args, timeout=600):
    env = dict(os.environ, MINI_TRITON="1")
    env.pop("RMSNORM_IMPL", None)
    return subprocess.run(["make", *args, f"PYTHON={sys.executable}", f"PY={sys.executable}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    """PARTS -> the path `make partial` wrote."""
    d = tmp_path_factory.mktemp("partial")
    out = {}
    for parts in ("abc", "abcd"):
        run = _make("partial", f"PARTS={parts}", f"OUT={d / parts}.py")
        assert run.returncode == 0, run.stdout + run.stderr
        assert f"parts a, b, c{', d' * (parts == 'abcd')}, the starter's everywhere else" in run.stdout
        out[parts] = d / f"{parts}.py"
    return out


@pytest.fixture(scope="module")
def graded(partial, tmp_path_factory):
    """PARTS -> (results.json, make's output) of `make grade SUBMISSION=...`, both gradings at once."""
    d = tmp_path_factory.mktemp("graded")

    def grade(parts):
        run = _make("grade", f"SUBMISSION={partial[parts]}", f"RESULTS={d / parts}.json")
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
        return parts, (json.loads((d / f"{parts}.json").read_text()), run.stdout)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(grade, partial))


@pytest.mark.parametrize("parts, extra", [("abc", 0), ("abcd", 5)])
def test_make_grade_gives_90_and_the_extra_credit_only_with_part_d(graded, parts, extra):
    results, out = graded[parts]
    tests = {t["number"]: t for t in results["tests"]}
    regular = sum(t["score"] for n, t in tests.items() if n != "9")
    assert (regular, tests["9"]["score"]) == (90, extra), out[-3000:]
    if not extra:
        assert "partial dg buffer (dg_partial_ptr) has 32768 elements" in tests["9"]["output"]


def test_after_part_c_the_public_tests_of_parts_a_to_c_pass_and_part_d_s_fail(partial):
    run = _make("test", f"IMPL={partial['abc']}")
    failed = re.findall(r"^FAILED starter/tests/(test_part_\w)\.py::(\S+)", run.stdout, flags=re.M)
    assert run.returncode != 0 and failed, run.stdout[-3000:]
    assert {f for f, _ in failed} == {"test_part_d"}, failed
    assert "part (d) is not done yet: rmsnorm_bwd_kernel has no parameter rows_per_program" in run.stdout
    assert int(re.search(r"\b(\d+) passed", run.stdout).group(1)) >= 45, run.stdout[-500:]
    assert "Every failure is part (d)'s, the extra credit" in run.stdout
