"""Hidden rubric tests: one test per graded part. Numbers and weights come from autograder/rubric.py.

Every comparison happens here, in the trusted process, against float64 references, under
the one tolerance rule (rmsnorm_check.tolerance). A failing test's message is all the
student sees: it names the output, the function that made it, the input and how it was
made, and the worst element. Each hidden input belongs to one part, and a part fails only
on its own checks, so that one defect costs one part.
"""
import pytest
import torch
from autograder.decorators import number, visibility, weight

from autograder.check import DTYPE_NAMES, compare, describe, host_work_problem, reference
from autograder.rubric import COPY_NEEDED, PARTS, SPEEDUP_NEEDED
from autograder.speed import baseline_times, gpu_verdict, reference_at_rows
from autograder.worker import GRAPH_SEED, PROFILE_SEED, apply_view

from autograder.hidden.cases import (CORE, GPU_ROBUST, GPU_ROBUST_PARTS, HOST_CHECK, ROBUST, ROBUST_PARTS,
                                     SPEED_ROWS, SPEED_SEED, SPEED_SHAPE)


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


def given(inputs, k, case=None):
    """(x as the submission saw it, the input's story for the feedback)."""
    x = apply_view(inputs[f"x_{k}"], case.view if case else None)
    return x, (case.story if case else describe(x))


def expected(inputs, k, case=None):
    """x as the submission saw it, the float64 (y, dx, dg, r), and the input's story."""
    eps, view = (case.eps, case.view) if case else (1e-5, None)
    x, story = given(inputs, k, case)
    g, dy = inputs[f"g_{k}"], apply_view(inputs[f"dy_{k}"], None if case and case.dy_contiguous else view)
    y, r, dx, dg = reference(x, g, dy, eps)
    return x, {"y": y, "dx": dx, "dg": dg, "r": r}, story


# Which function of the submission made each output, as the feedback names it.
SOURCES = {"fwd": {"y": " from rmsnorm_forward", "r": " from rmsnorm_forward"},
           "ag": {"y": " from rmsnorm (your TritonRMSNorm.forward)",
                  "dx": " (x.grad) from your backward (TritonRMSNorm.backward)",
                  "dg": " (g.grad) from your backward (TritonRMSNorm.backward)"}}
SOURCES["speed"] = SOURCES["ag"]
# Who must have made each output: credit for correct values goes only to values the kernels computed.
MADE_BY = {"y": "forward", "r": "forward", "dx": "backward", "dg": "backward"}


def kernels_made(outcome, task, names):
    """None if the submission's kernels made every output in ``names`` (or nobody can tell), else the first
    that they did not."""
    made = outcome.info.get(task, {}).get("kernel_made") or {}
    return next((name for name in names if made.get(name) is False), None)


def not_made(outcome, task, names, story) -> str | None:
    """Why the outputs ``names`` earn nothing, if the submission's kernels did not make one of them."""
    name = kernels_made(outcome, task, names)
    if not name:
        return None
    stored = (outcome.info.get(task, {}).get("kernel_stored") or {}).get(name)
    numel = outcome.tensors[f"{task}.{name}"].numel() if f"{task}.{name}" in outcome.tensors else None
    if stored and numel:
        return (f"your kernels stored only {stored} of the {numel} elements of {name} that your {MADE_BY[name]} "
                f"returned, for {story}: the others were never written by a kernel (a block that does not cover "
                f"the whole row, or a grid that misses some rows?); points go only to values your Triton kernels "
                f"compute")
    how = (" (stored by a kernel, or summed on the host from a partial buffer your kernels stored)"
           if name == "dg" else "")
    return (f"your {MADE_BY[name]} returned {name} without any kernel storing it{how}, for {story}: points for "
            f"correct values go only to values your Triton kernels compute")


def gate(outcome, task, names, story):
    """Fail unless the submission's kernels produced ``names`` (known on the simulator only)."""
    why = not_made(outcome, task, names, story)
    if why:
        fail(why)


def check(outcome, task, names, x, ref, story, n_rows=None):
    """Fail with the first output in ``names`` that is missing or wrong."""
    gate(outcome, task, names, story)
    source = SOURCES[task.split("_")[0]]
    for name in names:
        got = outcome.tensors.get(f"{task}.{name}")
        if got is None:
            what = outcome.info.get(task, {}).get("not_tensors", {}).get(name)
            fail(f"{name} was not returned for {story}" + (f" (got {what} instead of a tensor)" if what else "")
                 + (" - g.grad is None after backward: return dg for g from your backward"
                    if name == "dg" and what == "NoneType" else ""))
        msg = compare(name, got, ref[name], x, story=story, source=source.get(name, ""), n_rows=n_rows)
        if msg:
            fail(msg + _forward_first(outcome, task, name, x, ref, story))


def _forward_first(outcome, task, name, x, ref, story) -> str:
    """For a wrong dx or dg: say so when the forward's y is wrong on the same input (the likelier cause)."""
    y = outcome.tensors.get(f"{task}.y")
    if name in ("dx", "dg") and y is not None and compare("y", y, ref["y"], x, story=story):
        return ". Your forward's y is wrong on this input too: fix the forward first (the backward uses its r)"
    return ""


def check_cases(sim, keys):
    inputs, outcome = sim
    for k in keys:
        c = ROBUST[k]
        need(outcome, f"{c.task}_{k}")
        x, ref, story = expected(inputs, k, c)
        check(outcome, f"{c.task}_{k}", ("y", "r") if c.forward_only else ("y", "dx", "dg"), x, ref, story)


@number("0")
@weight(0)
@visibility("visible")
def test_static_checks(scanned):
    """The source scan: the required API is all there and nothing forbidden is used (0 points)."""
    missing, problems = scanned
    if missing or problems:
        fail("; ".join(missing + problems))


# --- items 1-3: correctness on fp32 shapes ----------------------------------------------------------------

def check_core(sim, op, names):
    """Compare ``names`` on every fp32 core shape, from the forward ("fwd") or the autograd ("ag") tasks."""
    inputs, outcome = sim
    for k in CORE:
        need(outcome, f"{op}_{k}")
        x, ref, story = expected(inputs, k)
        check(outcome, f"{op}_{k}", names, x, ref, story)


@item("1")
def test_forward_correctness(sim):
    check_core(sim, "fwd", ("y", "r"))


@item("2")
def test_backward_dx(sim):
    check_core(sim, "ag", ("dx",))


@item("3")
def test_backward_dg(sim):
    check_core(sim, "ag", ("dg",))


# --- item 4: robustness -------------------------------------------------------------------------------------

def _robustness_test(part):
    """The test of one robustness part: every case of ROBUST_PARTS[part] (cases.py), and on a GPU machine
    its GPU cases too."""
    @item(part)
    def test(sim, request):
        check_cases(sim, ROBUST_PARTS[part])
        if torch.cuda.is_available() and part in GPU_ROBUST_PARTS:   # real Triton on the GPU machine
            inputs, outcome = request.getfixturevalue("gpu")
            for k in GPU_ROBUST_PARTS[part]:
                need(outcome, f"ag_{k}")
                x, ref, story = expected(inputs, k, GPU_ROBUST[k])
                check(outcome, f"ag_{k}", ("y", "dx", "dg"), x, ref, story)
    test.__name__ = f"test_robustness_{part.replace('.', '_')}"
    return test


for _part in ROBUST_PARTS:
    globals()[f"test_robustness_{_part.replace('.', '_')}"] = _robustness_test(_part)


def _properties(outcome, task, x, story):
    """The first broken property of one forward+backward run: dy untouched, g.grad set, dtypes, shapes."""
    info = outcome.info[task]
    if info.get("dy_modified"):
        return f"your backward modified dy for {story}: callers may reuse dy, so never write into it"
    if info.get("not_tensors", {}).get("dg") == "NoneType":
        return f"g.grad is None after backward for {story}: return dg for g from your backward"
    for name in ("y", "dx", "dg"):
        got = info.get("dtypes", {}).get(name)
        if got is None:
            return f"{name} was not returned for {story}"
        if got != str(x.dtype).removeprefix("torch."):
            return f"{name} has dtype {got} for {story}; it must match the input ({DTYPE_NAMES[x.dtype]})"
        shape = tuple(outcome.tensors[f"{task}.{name}"].shape)
        want = tuple(x.shape) if name != "dg" else (x.shape[-1],)
        if shape != want:
            return f"{name} has shape {shape} for {story}; expected {want}"
    return None


@item("4.6")
def test_dy_untouched_grad_set_and_output_dtypes(sim):
    """Checked on every input where the forward and backward otherwise worked: a crash or a wrong value
    costs its own part, not this one."""
    inputs, outcome = sim
    checked, skipped = 0, []                       # why each input could not be checked: its own part's cause
    for k, c in [*((k, None) for k in CORE), *((k, c) for k, c in ROBUST.items() if not c.forward_only)]:
        task = f"ag_{k}"
        x, story = given(inputs, k, c)
        why = outcome.task_error(task) or not_made(outcome, task, ("y", "dx", "dg"), story)
        if why:
            skipped.append(why)
            continue
        problem = _properties(outcome, task, x, story)
        if problem:
            fail(problem)
        checked += 1
    if not checked:
        fail(skipped[0] if skipped else "your forward and backward did not run, so their outputs could not be "
                                        "checked")
    if not outcome.task_error("fwd_bf16"):           # rmsnorm_forward on bf16: y bf16, r fp32 (M,)
        info, story = outcome.info["fwd_bf16"], ROBUST["bf16"].story
        dtypes, rows = info.get("dtypes", {}), ROBUST["bf16"].shape[0]
        if dtypes.get("y") != "bfloat16":
            fail(f"y from rmsnorm_forward has dtype {dtypes.get('y')} for {story}; it must be bfloat16")
        if dtypes.get("r") != "float32":
            fail(f"r from rmsnorm_forward has dtype {dtypes.get('r')} for {story}; it must be float32 "
                 f"(one reciprocal RMS per row, kept in fp32 for the backward)")
        r = outcome.tensors.get("fwd_bf16.r")
        if r is None or tuple(r.shape) != (rows,):
            fail(f"r from rmsnorm_forward has shape {None if r is None else tuple(r.shape)} for {story}; "
                 f"expected ({rows},), one value per row")


@item("4.7")
def test_identical_results_when_run_twice(sim, request):
    pairs = [(sim, "ag_a", "ag_a_again")]
    if torch.cuda.is_available():
        pairs.append((request.getfixturevalue("gpu"), "ag_rerun_gpu", "ag_rerun_gpu_again"))
    for (inputs, outcome), first, again in pairs:
        need(outcome, first)
        need(outcome, again)
        _, story = given(inputs, first.removeprefix("ag_"), GPU_ROBUST.get(first.removeprefix("ag_")))
        gate(outcome, first, ("y", "dx", "dg"), story)
        for name in ("y", "dx", "dg"):
            a, b = outcome.tensors.get(f"{first}.{name}"), outcome.tensors.get(f"{again}.{name}")
            if a is None or b is None or not torch.equal(a, b):
                where = "on the GPU" if "gpu" in first else "on the simulator"
                why = _order_dependence(outcome.info[first])
                fail(f"running the same forward and backward twice on {story} gave different {name} {where}: "
                     f"results must be deterministic" + (f"; {why}" if why else
                                                         " (no atomics whose order changes a sum)"))


def _order_dependence(info) -> str:
    """Why a run's result depends on the order programs run, as the simulator saw it ('' if it does not)."""
    for phase in ("fwd", "bwd"):
        for L in info.get(phase, {}).get("launches", []):
            if L.get("order_dependent"):
                return (f"in {L['kernel']}, {L['order_dependent']} makes the result depend on the order programs "
                        f"run, which changes from run to run on a GPU (the simulator shuffles it too)")
    return ""


# --- items 5-7: traffic, from the simulator's counts --------------------------------------------------------

def _by_role(launches, role, key):
    return sum(a[key] for L in launches for a in L["args"].values() if a["role"] == role)


def _others(launches, roles):
    return [(L["kernel"], name, a) for L in launches for name, a in L["args"].items() if a["role"] not in roles]


@item("5")
def test_fused_forward(sim):
    _, outcome = sim
    info = need(outcome, "fwd_d")
    M, N = CORE["d"]
    launches = info["fwd"]["launches"]
    if not launches:
        fail("your forward launched no kernel")
    x_loads = _by_role(launches, "x", "loaded")
    if x_loads != M * N:
        fail(f"your forward loaded x {x_loads / (M * N):.1f} times per element; a fused kernel reads it once")
    y_stores = _by_role(launches, "y", "stored")
    if y_stores != M * N:
        fail(f"your forward's kernels stored {y_stores / (M * N):.1f} values per element of the y it returned; "
             f"a fused kernel writes each element of y once, into the tensor the forward returns")
    r_stores = _by_role(launches, "r", "stored")
    if r_stores != M:
        fail(f"your forward stored {r_stores} values of r for {M} rows; store each row's 1/rms once")
    g_loads = _by_role(launches, "g", "loaded")
    g_max = sum(L["programs"] for L in launches) * N
    if g_loads > g_max:
        fail(f"your forward loaded g {g_loads} times ({g_max} allowed: once per program)")
    for kernel, name, a in _others(launches, ("x", "y", "r", "g")):
        if a["numel"] >= M * N and (a["loaded"] or a["stored"]):
            fail(f"your forward moves an extra buffer of {a['numel']} elements ({name} in {kernel}); a fused "
                 f"forward reads x and g and writes y and r, nothing else")


# Buffers a backward kernel may touch besides these are its scratch: the partial dg buffer, lock words.
IO_ROLES = ("x", "dy", "dx", "g", "y", "r", "dg")


def backward_traffic_problem(launches, M, N):
    """Why the backward is not fused (None if it is): x and dy read once, dx written once, and a dg
    reduction whose scratch traffic its own partial buffers bound.

    Scratch in floats (partial dg buffers): at most M·N + M + N stores (each row's contribution to dg
    written once, as the lecture's M x N buffer is, or far fewer when programs sum rows in registers),
    and at most M·N + (their size) + M loads (each contribution read back once, as a lock-protected
    read-modify-write does, plus one pass over the partial buffers). Integer scratch (lock words,
    counters) is not counted as data, up to a few accesses per row and program.
    """
    if not launches:
        return "your backward launched no kernel"
    for role, key, what in (("x", "loaded", "loaded x"), ("dy", "loaded", "loaded dy"),
                            ("dx", "stored", "stored dx")):
        n = _by_role(launches, role, key)
        if n != M * N:
            return (f"your backward {what} {n / (M * N):.1f} times per element; a fused backward reads x and dy "
                    f"once and writes dx once")
    scratch = _others(launches, IO_ROLES)
    floats = [(k, name, a) for k, name, a in scratch if "int" not in a.get("dtype", "float")]
    words = [a for _, _, a in scratch if "int" in a.get("dtype", "float")]
    stored = sum(a["stored"] for _, _, a in floats)
    loaded = sum(a["loaded"] for _, _, a in floats)
    size = sum({a["storage"]: a["numel"] for _, _, a in floats}.values())
    detail = "; ".join(f"{name} in {k} ({a['numel']} elements): {a['stored']} stored, {a['loaded']} loaded"
                       for k, name, a in floats)
    if stored > M * N + M + N:
        return (f"your backward stored {stored} elements into scratch buffers for x of {M}x{N} ({detail}): a fused "
                f"backward writes each row's contribution to dg at most once (at most M·N + M + N = "
                f"{M * N + M + N}); another M x N buffer written by one kernel and read by the next is an "
                f"extra pass over memory")
    if loaded > M * N + size + M:
        return (f"your backward loaded {loaded} elements from scratch buffers for x of {M}x{N} ({detail}): a fused "
                f"backward reads each contribution to dg back at most once, plus one pass over its partial "
                f"buffers (at most M·N + {size} + M = {M * N + size + M})")
    programs = sum(L["programs"] for L in launches)
    if sum(a["loaded"] + a["stored"] for a in words) > 8 * (M + programs):
        return (f"your backward moved {sum(a['loaded'] + a['stored'] for a in words)} elements of integer "
                f"scratch buffers for {M} rows; lock words and counters need a few accesses per program")
    return None


@item("6")
def test_fused_backward(sim):
    _, outcome = sim
    info = need(outcome, "ag_d")
    M, N = CORE["d"]
    problem = backward_traffic_problem(info["bwd"]["launches"], M, N)
    if problem:
        fail(problem)


@item("7")
def test_work_happens_in_kernels(sim):
    _, outcome = sim
    M, N = CORE["d"]
    for k, dtype in HOST_CHECK.items():
        name = DTYPE_NAMES[getattr(torch, dtype)]
        fwd, ag = need(outcome, f"fwd_{k}"), need(outcome, f"ag_{k}")
        for phase, where in ((fwd["fwd"], f"forward ({name} x)"), (ag["fwd"], f"forward through rmsnorm ({name} x)"),
                             (ag["bwd"], f"backward ({name} x)")):
            if not phase["launches"]:
                fail(f"your {where} launched no kernel")
            problem = host_work_problem(phase.get("host_ops", []), M, N, where)
            if problem:
                fail(problem)
        for phase, role, where in ((fwd["fwd"], "y", "forward"), (ag["bwd"], "dx", "backward")):
            covered = max((a["distinct"] for L in phase["launches"] for a in L["args"].values()
                           if a["role"] == role and a["stored"]), default=0)
            if covered != M * N:
                fail(f"{role} returned by your {where} ({name} x) was not written by kernel stores "
                     f"({covered} of {M * N} elements were)")


@item("8")
def test_race_free(sim):
    _, outcome = sim
    for task in [f"ag_{k}" for k in CORE] + [f"{c.task}_{k}" for k, c in ROBUST.items()]:
        err = outcome.task_error(task)
        if err and "DataRaceError" in err:
            fail(err.replace("DataRaceError: ", "", 1))
    for k in CORE:
        need(outcome, f"ag_{k}")
    made = [v for k in CORE for v in (outcome.info[f"ag_{k}"].get("kernel_made") or {"any": True}).values()]
    if not any(made):
        fail("no output of yours was stored by a kernel, so there was nothing for the race detector to check")


# --- item 9: extra credit -----------------------------------------------------------------------------------

@item("9")
def test_improved_dg_reduction(sim):
    """The improved reduction: a fused backward (item 6) whose dg is deterministic (no float atomics, no sums
    built under a lock) and whose partial buffer is at most M·N/8 elements."""
    _, outcome = sim
    M, N = CORE["d"]
    info = need(outcome, "ag_d")
    launches = info["bwd"]["launches"]
    problem = backward_traffic_problem(launches, M, N)
    if problem:
        fail(f"the improved reduction starts from a fused backward (item 6): {problem}")
    why = _order_dependence({"bwd": info["bwd"]})
    if why:
        fail(f"your dg is not deterministic: {why}. The improved reduction has each program sum its rows in "
             f"registers and store one partial row; the partial rows are then added in a fixed order")
    scratch = [(name, a) for _, name, a in _others(launches, IO_ROLES)
               if a["stored"] and "int" not in a.get("dtype", "float")]
    biggest = max(scratch, key=lambda s: s[1]["numel"], default=None)
    if biggest and biggest[1]["numel"] > M * N // 8:
        fail(f"your partial dg buffer ({biggest[0]}) has {biggest[1]['numel']} elements for M·N = {M * N}; the "
             f"improved reduction keeps it at most M·N/8 = {M * N // 8}: give each program many rows and "
             f"accumulate dg in registers")
    check_core(sim, "ag", ("dg",))


# --- item 10: GPU speed (only where CUDA is present) --------------------------------------------------------

# part: (dtype, what is timed, the outputs whose correctness the part needs)
SPEED_PARTS = {"10.1": ("float32", "fwd", ("y",)), "10.2": ("bfloat16", "fwd", ("y",)),
               "10.3": ("float32", "fwdbwd", ("y", "dx", "dg")), "10.4": ("bfloat16", "fwdbwd", ("y", "dx", "dg"))}


@pytest.fixture(scope="session")
def baseline(gpu):
    """PyTorch eager and a plain copy, timed by the grader itself, per dtype."""
    return {dtype: baseline_times(SPEED_SHAPE, dtype, SPEED_SEED) for dtype in ("float32", "bfloat16")}


_REFERENCES = {}


def _speed_reference(dtype, seed=SPEED_SEED):
    if (dtype, seed) not in _REFERENCES:
        _REFERENCES[dtype, seed] = reference_at_rows(SPEED_SHAPE, dtype, seed, SPEED_ROWS)
    return _REFERENCES[dtype, seed]


def _timed_outputs_wrong(outcome, dtype, kind, info, story):
    """What is wrong with the outputs of the GPU-timed run (None if nothing): they were computed on
    inputs the submission had not seen before (the graph's replay, or the profiled call)."""
    names = ("y",) if kind == "fwd" else ("dx", "dg")
    if info.get(f"{kind}_graph_ms"):
        seed = SPEED_SEED + GRAPH_SEED
    elif info.get(f"{kind}_profiled_ms"):
        seed = SPEED_SEED + PROFILE_SEED
    else:
        return None                                  # no GPU time: the wall time is graded
    x, ref = _speed_reference(dtype, seed)
    for n in names:
        got = outcome.tensors.get(f"speed_{dtype}.{n}_gpu")
        if got is None:
            return f"{n} of the timed run did not come back"
        wrong = compare(n, got, ref[n], x, story=story, n_rows=SPEED_SHAPE[0])
        if wrong:
            return wrong
    return None


def _speed(gpu, baseline, part, record_property):
    dtype, kind, names = SPEED_PARTS[part]
    inputs, outcome = gpu
    info = need(outcome, f"speed_{dtype}")
    x, ref = _speed_reference(dtype)
    story = (f"x of shape {SPEED_SHAPE} {DTYPE_NAMES[getattr(torch, dtype)]} (the timing input; y and dx "
             f"compared at rows {SPEED_ROWS})")
    check(outcome, f"speed_{dtype}", names, x, ref, story, n_rows=SPEED_SHAPE[0])
    wrong = _timed_outputs_wrong(outcome, dtype, kind, info, story.replace("(the timing input;",
                                                                           "(new timing inputs;"))
    ok, msg = gpu_verdict(kind, dtype, SPEED_SHAPE, info, baseline[dtype], COPY_NEEDED[part], wrong,
                          SPEEDUP_NEEDED[part])
    record_property("output", msg)
    if not ok:
        fail(msg)


def _speed_test(part):
    """The test of one GPU speed part (10.1-10.4)."""
    @item(part)
    def test(gpu, baseline, record_property):
        _speed(gpu, baseline, part, record_property)
    test.__name__ = f"test_gpu_speed_{part.replace('.', '_')}"
    return test


test_gpu_speed_forward_fp32 = _speed_test("10.1")
test_gpu_speed_forward_bf16 = _speed_test("10.2")
test_gpu_speed_forward_backward_fp32 = _speed_test("10.3")
test_gpu_speed_forward_backward_bf16 = _speed_test("10.4")
