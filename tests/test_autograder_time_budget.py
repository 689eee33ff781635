"""A simulator group's limit is CPU time (job/judge/remote.py, job/wire/channel.py): a busy machine costs a submission
nothing, an endless loop is still stopped, and a submission that waits meets the wall clock behind it."""
import socket
import subprocess
import sys
import threading
import time

import pytest
import torch

from autograder import runner, sandbox
from autograder.job.judge import remote
from autograder.job.wire.channel import HEADER, Channel, TimedOut

pytestmark = pytest.mark.usefixtures("sandbox_accounts")      # grades through the sandbox (conftest.py)


def _frame(message: bytes) -> bytes:
    return HEADER.pack(len(message)) + message


def test_a_spent_budget_ends_the_wait_even_while_messages_keep_coming():
    mine, theirs = socket.socketpair()
    channel, calls = Channel(mine), []
    channel.budget = lambda: calls.append(1) or len(calls) > 3
    for _ in range(5):
        theirs.sendall(_frame(b"{}"))
    for _ in range(3):
        assert channel.recv() == ({}, [])
    with pytest.raises(TimedOut) as e:
        channel.recv()
    assert e.value.cpu


def test_a_budget_looked_at_in_slices_does_not_cut_a_message_that_arrives_slowly():
    mine, theirs = socket.socketpair()
    channel = Channel(mine)
    channel.budget = lambda: False
    frame = _frame(b'{"a": 1}')

    def slow():
        theirs.sendall(frame[:1])
        time.sleep(0.6)                               # longer than a slice
        theirs.sendall(frame[1:])
    threading.Thread(target=slow).start()
    assert channel.recv() == ({"a": 1}, [])


def test_a_process_s_cpu_time_is_read_from_proc():
    busy = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 20: pass"])
    try:
        start = time.monotonic()                      # a busy machine gives it less than a core: wait for it
        while remote.process_cpu(busy.pid) <= 0.5 and time.monotonic() - start < 15:
            time.sleep(0.1)
        assert remote.process_cpu(busy.pid) > 0.5
    finally:
        busy.kill()
        busy.wait()


SPINS = "def rmsnorm_forward(x, g, eps=1e-5):\n    while True:\n        pass\n"
SLEEPS = "import time\n\n\ndef rmsnorm_forward(x, g, eps=1e-5):\n    time.sleep(60)\n"


@pytest.mark.parametrize("source, says", [
    (SPINS, "timed out after 2 s of CPU time while running rmsnorm_forward"),
    (SLEEPS, "timed out after 8 s while running rmsnorm_forward"),
], ids=["spins", "sleeps"])
def test_a_group_ends_at_its_cpu_budget_or_at_the_wall_clock_behind_it(tmp_path, source, says):
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(source)
    torch.manual_seed(0)
    inputs = {"x": torch.randn(37, 100), "g": torch.randn(100)}
    out = runner.run_jobs(sub, {"g": {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}}, inputs,
                          limits=sandbox.Limits(timeout_s=8, group_cpu_s=2))
    assert says in out.task_error("fwd"), out.task_error("fwd")


def test_a_simulator_job_computes_in_one_thread_whatever_the_grader_s_environment_says(tmp_path, monkeypatch):
    """OpenMP threads spin while they wait for each other, and on a busy machine they wait long: CPU time the
    budget would charge to the submission (a correct library file timed out that way under load)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    sub = tmp_path / "rmsnorm.py"
    sub.write_text("import torch\n\n\ndef rmsnorm_forward(x, g, eps=1e-5):\n"
                   "    raise RuntimeError(f'threads={torch.get_num_threads()}')\n")
    out = runner.run_jobs(sub, {"g": {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}},
                          {"x": torch.randn(4, 8), "g": torch.randn(8)},
                          limits=sandbox.Limits(timeout_s=30, group_cpu_s=10))
    assert "threads=1" in out.task_error("fwd"), out.task_error("fwd")


KERNEL_LOOP = """import torch
import triton
import triton.language as tl


@triton.jit
def spin_kernel(x_ptr, n):
    i = 0
    while i < n:
        i = {step}


def rmsnorm_forward(x, g, eps=1e-5):
    spin_kernel[(1,)](x, {n})
    return x, x
"""


@pytest.mark.parametrize("step, n, says", [
    ("i * 1", 4, "line 9 of rmsnorm.py (`while i < n:`), on the simulator, where `i` and `n` kept the same "
                 "values"),
    ("i + 1", 10 ** 12, ", in spin_kernel, line "),
], ids=["stuck", "progressing"])
def test_a_kernel_that_never_ends_stops_at_the_budget_with_its_line_and_whether_it_progressed(tmp_path, step, n,
                                                                                              says):
    """Kernels run in the judge's process, where no wait on the channel looks at the budget: a timer does."""
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(KERNEL_LOOP.format(step=step, n=n))
    start = time.monotonic()
    out = runner.run_jobs(sub, {"g": {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}},
                          {"x": torch.randn(4, 8), "g": torch.randn(8)},
                          limits=sandbox.Limits(timeout_s=60, group_cpu_s=2))
    err = out.task_error("fwd")
    assert err.startswith("timed out after 2 s of CPU time while running rmsnorm_forward") and says in err, err
    assert ("still making progress" in err) == (step == "i + 1"), err
    assert time.monotonic() - start < 30
