"""The grader's sandbox and job runner survive hostile submissions."""
import os
import textwrap

import pytest
import torch

from autograder import runner, sandbox
from conftest import ROOT

FAST = sandbox.Limits(timeout_s=8, cpu_s=20)


def child(tmp_path, code, limits=FAST):
    script = tmp_path / "evil.py"
    script.write_text(textwrap.dedent(code))
    return sandbox.run(sandbox.python_argv(script), cwd=tmp_path, limits=limits)




def test_infinite_loop_that_ignores_sigalrm_and_catches_baseexception_is_killed(tmp_path):
    r = child(tmp_path, """
        import signal
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
    """, sandbox.Limits(timeout_s=2, cpu_s=20))
    assert r.timed_out and r.returncode is None and r.seconds < 10


def test_children_it_spawns_die_with_it(tmp_path):
    marker = tmp_path / "alive"
    r = child(tmp_path, f"""
        import os, time
        if os.fork() == 0:
            time.sleep(3)
            open({str(marker)!r}, "w").write("still alive")
            os._exit(0)
        os._exit(0)
    """)
    assert r.returncode == 0
    import time
    time.sleep(4)
    assert not marker.exists(), "a forked child outlived the job"


def test_huge_output_is_capped(tmp_path):
    r = child(tmp_path, """
        import sys
        for _ in range(20 * 1024):
            sys.stdout.write("x" * 1024)
    """)
    assert r.returncode == 0 and len(r.stdout) <= sandbox.OUTPUT_CAP


def test_memory_limit_stops_a_memory_bomb(tmp_path):
    r = child(tmp_path, """
        blocks = []
        while True:
            blocks.append(bytearray(100 * 1024 * 1024))
    """, sandbox.Limits(timeout_s=20, memory_bytes=512 * 1024 ** 2))
    assert not r.timed_out and r.returncode != 0 and "MemoryError" in r.stderr


def test_file_size_limit(tmp_path):
    r = child(tmp_path, """
        with open("big", "wb") as f:
            f.write(b"x" * (200 * 1024 * 1024))
    """, sandbox.Limits(timeout_s=20, file_bytes=1024 * 1024))
    assert r.returncode != 0


SOLUTION = ROOT / "solution" / "rmsnorm.py"


def inputs():
    torch.manual_seed(0)
    return {"x": torch.randn(37, 100), "g": torch.randn(100)}


def test_job_runs_the_solution_and_returns_plain_tensors():
    out = runner.run_job(SOLUTION, {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}, inputs(),
                         limits=sandbox.Limits(timeout_s=120))
    assert out.error is None and out.task_error("fwd") is None, (out.error, out.run.stderr[-2000:])
    x, g = inputs()["x"], inputs()["g"]
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g
    torch.testing.assert_close(out.tensors["fwd.y"], ref)
    launches = out.info["fwd"]["fwd"]["launches"]
    assert launches and launches[0]["args"]["x_ptr"]["loaded"] == 37 * 100
    assert launches[0]["args"]["x_ptr"]["role"] == "x" and launches[0]["args"]["y_ptr"]["role"] == "y"


@pytest.mark.parametrize("code,expect", [
    ("import os\nos._exit(0)\n", "crashed"),
    ("raise SystemExit(0)\n", "importing rmsnorm.py failed: SystemExit"),
    ("def broken(:\n", "importing rmsnorm.py failed: SyntaxError"),
    ("import not_a_module\n", "importing rmsnorm.py failed: ModuleNotFoundError"),
    ("while True:\n    pass\n", "timed out after 3 s"),
])
def test_job_reports_broken_submissions_in_plain_words(tmp_path, code, expect):
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(code)
    out = runner.run_job(sub, {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}, inputs(),
                         limits=sandbox.Limits(timeout_s=3, cpu_s=20))
    assert out.error is not None and expect in out.error, out.error


def test_forged_outputs_are_not_trusted_objects(tmp_path):
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(textwrap.dedent("""
        import torch
        class Liar(torch.Tensor):
            def __eq__(self, other):
                return True
        def rmsnorm_forward(x, g, eps=1e-5):
            return torch.zeros_like(x).as_subclass(Liar), torch.zeros(x.shape[0]).as_subclass(Liar)
    """))
    out = runner.run_job(sub, {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}, inputs(),
                         limits=sandbox.Limits(timeout_s=60))
    assert type(out.tensors["fwd.y"]) is torch.Tensor and not bool((out.tensors["fwd.y"] != 0).any())
