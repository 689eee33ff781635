"""A launch that passes two tensors the other way round (job/launches.Launcher.exchange): the judge runs it with
the two exchanged and notes it, so that one mistake in a launch's argument order is charged once and the rest of
the kernels' work is checked; a launch whose arguments fit its parameters' names, or whose names say nothing,
runs as passed. Below: what an error is charged as (judge/outputs.task_error)."""
import dataclasses

import pytest
import torch

import mini_triton as triton
from autograder.job.judge.launches import Launcher

tl = triton.language


@triton.jit
def fwd(x_ptr, g_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, tl.load(x_ptr + i) * tl.load(g_ptr + i))


@triton.jit
def bwd(x_ptr, dy_ptr, dx_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(dx_ptr + i, tl.load(x_ptr + i) * tl.load(dy_ptr + i))


@triton.jit
def generic(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.load(a_ptr + i) + tl.load(b_ptr + i))


@triton.jit
def scale(x_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, tl.load(x_ptr + i) * 2)


def launcher(**inputs) -> Launcher:
    L = Launcher(None, None)
    L.inputs = {t.untyped_storage().data_ptr(): role for role, t in inputs.items()}
    return L


def tensors():
    return {k: torch.randn(8) for k in ("x", "g", "dy", "out")}


# kernel, the roles passed in order ("out": a tensor the phase returns, no input), the parameters exchanged or None
CASES = {
    "x_and_y_swapped": (fwd, ["out", "g", "x"], ["y_ptr", "x_ptr"]),
    "x_and_dy_swapped": (bwd, ["dy", "x", "out"], ["x_ptr", "dy_ptr"]),
    "dx_and_dy_swapped": (bwd, ["x", "out", "dy"], ["dx_ptr", "dy_ptr"]),
    "in_order": (bwd, ["x", "dy", "out"], None),
    "forward_in_order": (fwd, ["x", "g", "out"], None),
    "names_that_say_nothing": (generic, ["dy", "x", "out"], None),
    "x_named_kernel_given_dy_with_no_dy_parameter": (scale, ["dy", "out"], None),
    "in_place_y_into_x": (scale, ["x", "x"], None),
    "dx_written_into_dy": (bwd, ["x", "dy", "dy"], None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_launch_is_run_with_two_tensors_exchanged_only_when_they_were_passed_the_other_way_round(name):
    kernel, passed, want = CASES[name]
    t = tensors()
    L = launcher(x=t["x"], g=t["g"], dy=t["dy"])
    pos = [t[k] for k in passed]
    new_pos, kw = L.exchange(kernel, pos, {"N": 8})
    if want is None:
        assert L.exchanged == [] and all(a is b for a, b in zip(new_pos, pos))
        return
    assert L.exchanged == [{"kernel": kernel.fn.__name__, "params": want}]
    bound = kernel.bind(new_pos, kw)
    for param in want:                                   # each tensor now where its parameter's name says
        role = {"x_ptr": "x", "dy_ptr": "dy"}.get(param)
        if role:
            assert bound[param] is t[role], param
    assert kw == {"N": 8}


def test_an_exchange_given_by_keyword_is_made_in_the_keywords():
    t = tensors()
    L = launcher(x=t["x"], g=t["g"], dy=t["dy"])
    pos, kw = L.exchange(bwd, [], {"x_ptr": t["dy"], "dy_ptr": t["x"], "dx_ptr": t["out"], "N": 8})
    assert pos == [] and kw["x_ptr"] is t["x"] and kw["dy_ptr"] is t["dy"] and kw["dx_ptr"] is t["out"]


# -- what an error is charged as (judge/outputs.task_error): one refused kernel, or one crash site ----------------
ERRORS = {
    # Triton's own words for a kernel it refuses, on a GPU: a compile rule, one mistake wherever it shows
    "CompilationError: at 46:22: ...": "compile_rule",
    "RuntimeError: Unsupported function referenced: <function bwd_tile at 0x7f8461c68e00>": "compile_rule",
    "TypeError: object of type 'int' has no len()": "compile_rule",
    # a crash: its site, whatever the program, offsets and dtype
    "OutOfBoundsError: out-of-bounds load in load_tile line 58, program 7: x_ptr[256:264, 0:128] are past the end":
        "error: OutOfBoundsError: out-of-bounds load in load_tile line 58",
    "RuntimeError: Mismatch in shape: grad_output[0] has a shape of torch.Size([5, 7, 96])":
        "error: RuntimeError: Mismatch in shape",
    "ValueError: too many values to unpack (expected 2) (rmsnorm.py line 412)":
        "error: ValueError: too many values to unpack (expected 2) (rmsnorm.py line 412)",
}


class _Outcome:
    def __init__(self, err, raised_in_file=False):
        self.err = err
        self.info = {"fwd_d": {"error": err, "raised_in_file": raised_in_file}}

    def task_error(self, task):
        return self.err


@pytest.mark.parametrize("err", sorted(ERRORS))
def test_an_error_is_charged_as_a_refused_kernel_or_as_its_crash_site(err):
    from autograder.judge.outputs import task_error
    assert task_error(_Outcome(err), "fwd_d").cause == ERRORS[err]


@pytest.mark.parametrize("err", ["NotImplementedError: not supported yet (rmsnorm.py line 56)",
                                 "CompilationError: not supported yet (rmsnorm.py line 60)"])
def test_an_error_the_file_raised_itself_is_its_tasks_own_cause_never_a_compile_rule(err):
    """A raise of the file's own refuses that input on purpose: charged wherever it stops a case (its cause names
    the task), and a CompilationError class of the file's is not Triton's refusal."""
    from autograder.judge.outputs import task_error
    cause = task_error(_Outcome(err, raised_in_file=True), "fwd_d").cause
    assert cause != "compile_rule" and cause.endswith("[fwd_d]") and "(rmsnorm.py line" in cause, cause


def test_one_crash_met_on_two_inputs_is_one_cause():
    from autograder.judge.outputs import crash_site
    a = crash_site("OutOfBoundsError: out-of-bounds load in bwd_tile line 135, program 4: offsets 128–135 are past the "
                   "end of g_ptr (tl.float32, 128 elements)")
    b = crash_site("OutOfBoundsError: out-of-bounds load in bwd_tile line 135, program 0: offsets 1–7 are past the "
                   "end of g_ptr (tl.float16, 1 elements)")
    assert a == b and a != crash_site("OutOfBoundsError: out-of-bounds load in bwd_tile line 136, program 0: x")


class _FailedBackward(_Outcome):
    def __init__(self, err):
        super().__init__(err)
        self.info = {"ag_big": {"failed_in": "bwd"}}


@pytest.mark.parametrize("err", [e for e, cause in ERRORS.items() if cause == "compile_rule"])
def test_a_backward_that_triton_refuses_through_autograd_is_a_compile_rule(err):
    """On the GPU, an autograd case whose backward kernel Triton refuses (a plain function it calls, say) is the same
    one mistake the simulator recorded, not a crash of its own."""
    import torch
    from autograder.judge.outputs import backward_failure
    found = backward_failure(_FailedBackward(err), "ag_big", torch.zeros(4, 8), "x of shape (4, 8) fp32")
    assert found.cause == "compile_rule" and err in found.message


def _launch_error(source: str, kernel: str, grid, *args):
    """The judge's record (wire/errors.Crash) of one launch of ``kernel`` from ``source`` that raised, as
    job/judge/launches.Launcher.run keeps it, with the error's text."""
    import linecache

    import mini_triton
    from autograder.job.wire.errors import Crash
    path = "/tmp/graded/rmsnorm.py"
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    space = {"triton": mini_triton, "tl": mini_triton.language}
    exec(compile(source, path, "exec"), space)
    try:
        space[kernel][grid](*args)
    except Exception as e:  # noqa: BLE001 -- the kernel's error, recorded
        return Crash.of(e, {"kernel": {"name": kernel}}, path), f"{type(e).__name__}: {e}"
    raise AssertionError("the launch did not raise")


OOB = '''@triton.jit
def helper(p, i):
    return tl.load(p + i)


@triton.jit
def fwd(p, n, B: tl.constexpr):
    tl.store(p + tl.arange(0, B), helper(p, tl.arange(0, B) + n))


@triton.jit
def bwd(p, n, B: tl.constexpr):
    tl.store(p + tl.arange(0, B), helper(p, tl.arange(0, B) * n))
'''


def test_a_crash_is_its_site_in_the_judges_record_whichever_kernel_and_input_met_it():
    """One error at one line, met by two kernels (a helper they share) on other inputs, is one cause; the judge's
    record names the helper, its line and the kernel launched, never what the message says of the program or
    offsets."""
    import torch
    from autograder.judge.charge import Finding, Ledger, one_crash
    a, said_a = _launch_error(OOB, "fwd", (1,), torch.zeros(8), 4, 8)
    b, said_b = _launch_error(OOB, "bwd", (1,), torch.zeros(16), 3, 8)
    assert said_a != said_b and a.site() == "error: OutOfBoundsError in helper line 3 in a launch of fwd", a
    assert b.site() == "error: OutOfBoundsError in helper line 3 in a launch of bwd", b
    found = one_crash({"1": Ledger([Finding("y", said_a, a.site())]), "2": Ledger([Finding("dx", said_b, b.site())])})
    assert found["1"].findings[0].cause == found["2"].findings[0].cause == a.site()
    assert a.told(said_a) and a.told(said_a[:60]) and not a.told(said_b) and not a.told("ValueError: not supported")
    quiet = dataclasses.replace(a, message="")            # an error without a message: its type alone, nothing more
    assert quiet.told("OutOfBoundsError:  (rmsnorm.py line 9)") and quiet.told("RuntimeError: ")
    assert not quiet.told("ValueError: ") and not quiet.told("OutOfBoundsError: not supported (rmsnorm.py line 9)")


TWO_LINES = '''@triton.jit
def helper(p, i):
    return tl.load(p + i)


@triton.jit
def kernel(p, q, n, LONG: tl.constexpr, B: tl.constexpr):
    i = tl.arange(0, B) - n
    if LONG:
        tl.store(p + tl.arange(0, B), tl.load(q + i))
    else:
        tl.store(p + tl.arange(0, B), helper(p, i))


@triton.jit
def other(p, n, B: tl.constexpr):
    tl.store(p + tl.arange(0, B), tl.load(p + tl.arange(0, B) - n))
'''


def test_one_kernels_crash_at_two_lines_is_one_mistake_and_another_kernels_is_another():
    """A row index one too low faults where the first load meets it: in a helper at one shape, in the kernel's own
    load on the path long rows take. Both are one crash of one kernel, named where it was met first (in the rubric's
    order); the same error in another kernel, or another error in the same one, is a crash of its own."""
    import torch
    from autograder.judge.charge import Finding, Ledger, one_crash
    short, _ = _launch_error(TWO_LINES, "kernel", (1,), torch.zeros(8), torch.zeros(8), 1, False, 8)
    long, _ = _launch_error(TWO_LINES, "kernel", (1,), torch.zeros(8), torch.zeros(8), 1, True, 8)
    elsewhere, _ = _launch_error(TWO_LINES, "other", (1,), torch.zeros(8), 1, 8)
    assert short.line != long.line and short.kernel == "helper" and long.kernel == "kernel", (short, long)
    stray = dataclasses.replace(long, type="ValueError").site()
    found = one_crash({"2": Ledger([Finding("dx", "s", short.site())]),
                       "4.4": Ledger([Finding("dx", "l", long.site()), Finding("dx", "v", stray)]),
                       "6": Ledger([Finding("dx", "o", elsewhere.site())])})
    assert [f.cause for f in found["4.4"].findings] == [short.site(), stray], found
    assert found["2"].findings[0].cause == short.site() and found["6"].findings[0].cause == elsewhere.site()


def test_a_race_at_a_line_whose_accesses_also_fall_outside_the_tensor_is_that_crash():
    """A row's address computed wrong makes two programs meet at one shape and the last run past the end at
    another: the race between the stores of that line is the crash there, one mistake; a race at another line is a
    race."""
    import torch
    from autograder.judge.charge import Finding, Ledger, one_crash
    crash, said = _launch_error(TWO_LINES, "kernel", (1,), torch.zeros(8), torch.zeros(8), 1, True, 8)
    race = "data race in kernel: programs 0 and 1 both write p[3, 0] (kernel line {}) without an atomic. Programs"
    found = one_crash({"2": Ledger([Finding("task", said, crash.site())]),
                       "8": Ledger([Finding("race", race.format(crash.line), "race"),
                                    Finding("race", race.format(crash.line + 2), "race")])})
    assert [f.cause for f in found["8"].findings] == [crash.site(), "race"], found["8"]


class _Judged(_Outcome):
    """A simulator job's task error, as its judge reports it: with the launch it served that raised it, or none."""

    def __init__(self, err, crash):
        super().__init__(err)
        self.info = {"fwd_d": {"error": err, "judged": True, "raised_in_file": crash is None,
                               "crash": None if crash is None else dataclasses.asdict(crash)}}


def test_a_simulator_jobs_error_is_a_crash_only_where_the_judge_saw_a_launch_raise_it():
    """The submission's process says where its error came from, and a file can make a host error look like the
    simulator's (a host helper of triton's made to fail, a kernel called without its grid): the judge's record
    decides. Without a launch that raised it, it is the file's own, charged wherever it stops a case."""
    import torch
    from autograder.judge.outputs import task_error
    crash, said = _launch_error(OOB, "fwd", (1,), torch.zeros(8), 4, 8)
    assert task_error(_Judged(said, crash), "fwd_d").cause == crash.site()
    for err in ["TypeError: unsupported operand type(s) for +: 'NoneType' and 'int' (rmsnorm.py line 60)",
                "CompilationError: rmsnorm_fwd_kernel is a kernel: launch it as rmsnorm_fwd_kernel[grid](...)"]:
        cause = task_error(_Judged(err, None), "fwd_d").cause
        assert cause.endswith("[fwd_d]") and cause != "compile_rule", cause
    refused = dataclasses.replace(crash, type="CompilationError", message="tl.load needs a pointer")
    assert task_error(_Judged("CompilationError: tl.load needs a pointer", refused), "fwd_d").cause == "compile_rule"
