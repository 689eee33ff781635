"""Hidden rubric tests: one test per graded part. Numbers and weights come from autograder/rubric.py.

The verdicts come from judge/, in the trusted process: every output is compared with a float64
reference under the one tolerance rule (rmsnorm_testkit.compare.tolerance), every difference gets its cause
named (rmsnorm_testkit.diagnose), and each cause is charged once, in the part that owns it. A failing test's
message is all the student sees; a part that keeps its points although it saw another part's
mistake says so in its output.
"""
import pytest
import torch
from rmsnorm_testkit import text
from rmsnorm_testkit.compare import compare

from autograder.decorators import number, visibility, weight

from autograder import config, plugin
from autograder.errors import GraderError
from autograder.judge import judge
from autograder.judge.charge import note
from autograder.judge.outputs import SOURCES, got, got_instead, not_made
from autograder.rubric import COPY_NEEDED, PARTS
from autograder.job.wire.protocol import TIMED, timed_key
from autograder.judge.speed import WHAT, gpu_verdict, implausible, measured_entry, not_timed, refusal
from autograder.speed import baseline_times, full_reference, reference_at_rows

from autograder.hidden.cases import SPEED_SEED, SPEED_SHAPE, kind_of, robust_parts, task_name


def item(n):
    """Decorate a test with rubric part n's number and points."""
    def deco(fn):
        return number(n)(weight(PARTS[n].points)(visibility("visible")(fn)))
    return deco


def fail(msg):
    pytest.fail(msg, pytrace=False)


def need(outcome, task):
    err = outcome.task_error(task)
    if err:
        fail(err)
    return outcome.info[task]


@pytest.fixture(scope="session")
def verdicts(sim, request):
    """Every part's verdict (judge/), with the GPU job's cases where CUDA is present."""
    gpu = request.getfixturevalue("gpu") if torch.cuda.is_available() else None
    try:
        return judge(sim, gpu)
    except Exception as e:                          # noqa: BLE001 -- the grader's own failure, never the student's
        raise GraderError(f"the grader failed while judging the outputs: {type(e).__name__}: {e}",
                          "a bug in autograder/judge/ or the shared diagnosis: report it with this log") from e


@number("0")
@weight(0)
@visibility("visible")
def test_static_checks(scanned, record_property):
    """The source scan: the required API is all there and nothing forbidden is used (0 points). Skipped, and
    said so, with RMSNORM_SCAN=off (the grader's environment, never a submission's)."""
    if not config.scan_enabled():
        record_property("output", f"{config.SCAN_SKIPPED}: nothing was checked or refused")
        return
    missing, problems = scanned
    if missing or problems:
        fail("; ".join(missing + problems))


def _part_test(part, name):
    """The test of one part: its verdict, and the note of a part that keeps its points."""
    @item(part)
    def test(verdicts, record_property):
        verdict = verdicts[part]
        if verdict.failure:
            fail(verdict.failure)
        if note(verdict):
            record_property("output", note(verdict))
    test.__name__ = name
    return test


test_forward_correctness = _part_test("1", "test_forward_correctness")
test_backward_dx = _part_test("2", "test_backward_dx")
test_backward_dg = _part_test("3", "test_backward_dg")
for _part in dict.fromkeys([*robust_parts(), "4.6", "4.7"]):       # 4.6 has cases of its own and checks besides
    globals()[f"test_robustness_{_part.replace('.', '_')}"] = _part_test(_part,
                                                                       f"test_robustness_{_part.replace('.', '_')}")
test_fused_forward = _part_test("5", "test_fused_forward")
test_fused_backward = _part_test("6", "test_fused_backward")
test_work_happens_in_kernels = _part_test("7", "test_work_happens_in_kernels")
test_race_free = _part_test("8", "test_race_free")
test_improved_dg_reduction = _part_test("9", "test_improved_dg_reduction")


def check(outcome, task, names, x, ref, story, n_rows=None):
    """Fail with the first output in ``names`` that is missing, not made by the kernels, or wrong."""
    for name in names:
        why = not_made(outcome, task, name, story)
        if why:
            fail(why.message)
    source = SOURCES[kind_of(task)]
    for name in names:
        returned = got(outcome, task, name)
        if returned is None:
            what = outcome.info.get(task, {}).get("not_tensors", {}).get(name)
            fail(f"{name} was not returned for {story}" + (f" (got {got_instead(what)})" if what else ""))
        msg = compare(name, returned, ref[name], x, story=story, source=source.get(name, ""), n_rows=n_rows)
        if msg:
            fail(msg)


# --- item 10: GPU speed (only where CUDA is present) --------------------------------------------------------

# part: (dtype, what is timed, the outputs whose correctness the part needs)
SPEED_PARTS = {"10.1": ("float32", "fwd", ("y",)), "10.2": ("bfloat16", "fwd", ("y",)),
               "10.3": ("float32", "fwdbwd", ("y", "dx", "dg")), "10.4": ("bfloat16", "fwdbwd", ("y", "dx", "dg"))}


@pytest.fixture(scope="session")
def baseline(gpu):
    """PyTorch eager and a plain copy, timed by the grader itself, per dtype."""
    return {dtype: baseline_times(SPEED_SHAPE, dtype, SPEED_SEED) for dtype in ("float32", "bfloat16")}


def _replay_wrong(outcome, dtype, kind, info, story):
    """What is wrong with the whole outputs of the timed replay (None if nothing): they were computed on
    inputs made from a seed the job drew after the capture, which the grader makes again here."""
    if f"{kind}_graph_ms" not in info:
        return None                                  # nothing was timed: refusal() says why
    seed = info.get("seeds", {}).get(kind)
    if not isinstance(seed, int):
        return "the seed of the replayed inputs did not come back"
    x, ref = full_reference(SPEED_SHAPE, dtype, seed)
    try:
        for n in TIMED[kind]:
            returned = got(outcome, task_name("speed", dtype), timed_key(kind, n))
            if returned is None:
                return f"{n} of the timed replay did not come back"
            wrong = compare(n, returned.to(x.device), ref[n], x, story=story, n_rows=SPEED_SHAPE[0])
            if wrong:
                return wrong
        return None
    finally:
        del x, ref
        torch.cuda.empty_cache()


def _speed(gpu, baseline, own_functions, part, record_property):
    dtype, kind, names = SPEED_PARTS[part]
    inputs, outcome = gpu
    task = task_name("speed", dtype)
    info = need(outcome, task)
    seed, rows = info.get("seeds", {}).get("call"), info.get("rows")
    if not isinstance(seed, int) or not isinstance(rows, list):
        raise GraderError("the speed task's seed or rows did not come back",
                          "a bug in autograder/job/judge/timed.py")
    x, ref = reference_at_rows(SPEED_SHAPE, dtype, seed, rows)
    story = (f"x of shape {SPEED_SHAPE} {text.dtype_name(dtype)} (a timing input; y and dx compared at "
             f"{len(rows)} rows drawn after the call)")
    if kind == "fwdbwd" and info.get("fwdbwd_error"):
        fail(not_timed(f"x of shape {SPEED_SHAPE} {text.dtype_name(dtype)}", str(info["fwdbwd_error"]),
                       info.get("fwdbwd_cause")))
    blocked = next((k for k in ("fwd", kind) if info.get(f"{k}_replay_error")), None)
    if blocked:                                      # the grader could not run the step itself: nothing to compare
        fail(f"{WHAT[kind]} {text.dtype_name(dtype)} at {SPEED_SHAPE[0]}x{SPEED_SHAPE[1]}: "
             f"{refusal(blocked, info, own_functions)}.")
    check(outcome, task, names, x, ref, story, n_rows=SPEED_SHAPE[0])
    wrong = _replay_wrong(outcome, dtype, kind, info, f"x of shape {SPEED_SHAPE} {text.dtype_name(dtype)} "
                                                      f"(new timing inputs, every element compared)")
    ok, msg = gpu_verdict(kind, dtype, SPEED_SHAPE, info, baseline[dtype], COPY_NEEDED[part], wrong, own_functions)
    entry = measured_entry(part, dtype, SPEED_SHAPE, info, baseline[dtype],
                           refused=bool(wrong or refusal(kind, info, own_functions))
                           or implausible(kind, SPEED_SHAPE, dtype, info, baseline[dtype]))
    if entry:
        plugin.LEADERBOARD.append(entry)              # the measured leaderboard (no points ride on it)
    record_property("output", msg)
    if not ok:
        fail(msg)


def _speed_test(part):
    """The test of one GPU speed part (10.1-10.4)."""
    @item(part)
    def test(gpu, baseline, own_functions, record_property):
        _speed(gpu, baseline, own_functions, part, record_property)
    test.__name__ = f"test_gpu_speed_{part.replace('.', '_')}"
    return test


test_gpu_speed_forward_fp32 = _speed_test("10.1")
test_gpu_speed_forward_bf16 = _speed_test("10.2")
test_gpu_speed_forward_backward_fp32 = _speed_test("10.3")
test_gpu_speed_forward_backward_bf16 = _speed_test("10.4")
