"""Hidden rubric tests: one test per graded part. Numbers and weights come from autograder/rubric.py.

Every comparison happens here, in the trusted process, against float64 references.
A failing test's message is all the student sees: it names the case and the problem.
"""
import pytest
import torch
from autograder.decorators import number, visibility, weight

from autograder.rubric import PARTS, SPEEDUP_NEEDED
from autograder.worker import apply_view
from rmsnorm_check import DTYPE_NAMES, compare, dg_tolerance, reference_grads

from conftest import CORE, GPU_ROBUST, HOST_CHECK, ROBUST, ROBUST_PARTS, SPEED_ROWS, SPEED_SEED, SPEED_SHAPE


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


def case(inputs, k, eps=1e-5, view=None):
    """(x, g, dy) as the submission saw them, and the float64 (y, dx, dg, r)."""
    x, g, dy = inputs[f"x_{k}"], inputs[f"g_{k}"], inputs[f"dy_{k}"]
    x, dy = apply_view(x, view), apply_view(dy, view)
    y, dx, dg = reference_grads(x, g, dy, eps)
    r = x.double().pow(2).mean(-1).add(eps).rsqrt().reshape(-1)
    return x, g, dy, {"y": y, "dx": dx, "dg": dg, "r": r}


# Who must have made each output: credit for correct values goes only to values the kernels computed.
MADE_BY = {"y": "forward", "r": "forward", "dx": "backward", "dg": "backward"}


def gate(outcome, task, names, x):
    """Fail unless the submission's kernels produced ``names`` (known on the simulator only)."""
    made = outcome.info.get(task, {}).get("kernel_made")
    if made is None:
        return
    for name in names:
        if made.get(name) is False:
            how = (" (stored by a kernel, or summed on the host from a partial buffer your kernels stored)"
                   if name == "dg" else "")
            fail(f"your {MADE_BY[name]} returned {name} without any kernel storing it{how}, for x of shape "
                 f"{tuple(x.shape)} {DTYPE_NAMES[x.dtype]}: points for correct values go only to values "
                 f"your Triton kernels compute")


def check(outcome, task, names, x, ref, dtype=None):
    gate(outcome, task, names, x)
    for name in names:
        got = outcome.tensors.get(f"{task}.{name}")
        if got is None:
            what = outcome.info.get(task, {}).get("not_tensors", {}).get(name)
            fail(f"{name} was not returned" + (f" (got {what} instead of a tensor)" if what else "")
                 + (" - g.grad is None after backward: return dg for g from your backward"
                    if name == "dg" and what == "NoneType" else ""))
        msg = compare(name, got, ref[name], x, dtype)
        if msg:
            fail(msg)


def check_cases(sim, keys, names=("y", "dx", "dg")):
    inputs, outcome = sim
    for k in keys:
        shape, dtype, eps, view = ROBUST[k]
        need(outcome, f"ag_{k}")
        x, g, dy, ref = case(inputs, k, eps, view)
        check(outcome, f"ag_{k}", names, x, ref)


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
        x, g, dy, ref = case(inputs, k)
        check(outcome, f"{op}_{k}", names, x, ref)


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

@item("4.1")
def test_half_precision_inputs(sim):
    check_cases(sim, ROBUST_PARTS["4.1"])


@item("4.2")
def test_3d_and_4d_inputs(sim):
    check_cases(sim, ROBUST_PARTS["4.2"])


@item("4.3")
def test_non_contiguous_x_and_dy(sim):
    check_cases(sim, ROBUST_PARTS["4.3"])


@item("4.4")
def test_odd_n_n1_and_large_n(sim, request):
    check_cases(sim, ROBUST_PARTS["4.4"])
    if torch.cuda.is_available():                      # large N with real Triton on the GPU machine
        inputs, outcome = request.getfixturevalue("gpu")
        for k in ("big_n_gpu", "big_n_bf16_gpu"):
            shape, dtype, eps, view = GPU_ROBUST[k]
            need(outcome, f"ag_{k}")
            x, g, dy, ref = case(inputs, k, eps)
            check(outcome, f"ag_{k}", ("y", "dx", "dg"), x, ref)


@item("4.5")
def test_eps_values_and_zero_rows(sim):
    check_cases(sim, ROBUST_PARTS["4.5"])


@item("4.6")
def test_dy_untouched_grad_set_and_output_dtypes(sim):
    inputs, outcome = sim
    for k, (shape, dtype, eps, view) in ROBUST.items():
        info = need(outcome, f"ag_{k}")
        x = apply_view(inputs[f"x_{k}"], view)
        gate(outcome, f"ag_{k}", ("y", "dx", "dg"), x)
        where = f"for x of shape {tuple(x.shape)} {DTYPE_NAMES[x.dtype]}"
        if info.get("dy_modified"):
            fail(f"your backward modified dy {where}: callers may reuse dy, so never write into it")
        if info.get("not_tensors", {}).get("dg") == "NoneType":
            fail(f"g.grad is None after backward {where}: return dg for g from your backward")
        for name, want in (("y", x.dtype), ("dx", x.dtype), ("dg", x.dtype)):
            got = info.get("dtypes", {}).get(name)
            if got is None:
                fail(f"{name} was not returned {where}")
            if got != str(want).removeprefix("torch."):
                fail(f"{name} has dtype {got} {where}; it must match the input ({DTYPE_NAMES[want]})")
            t = outcome.tensors[f"ag_{k}.{name}"]
            expect = tuple(x.shape) if name != "dg" else (x.shape[-1],)
            if tuple(t.shape) != expect:
                fail(f"{name} has shape {tuple(t.shape)} {where}; expected {expect}")
    info = need(outcome, "fwd_bf16")                 # rmsnorm_forward on bf16: y bf16, r fp32 (M,)
    gate(outcome, "fwd_bf16", ("y", "r"), inputs["x_bf16"])
    shape = ROBUST["bf16"][0]
    dtypes = info.get("dtypes", {})
    if dtypes.get("y") != "bfloat16":
        fail(f"y from rmsnorm_forward has dtype {dtypes.get('y')} for x of shape {shape} bf16; it must be bfloat16")
    if dtypes.get("r") != "float32":
        fail(f"r from rmsnorm_forward has dtype {dtypes.get('r')} for x of shape {shape} bf16; it must be float32 "
             f"(one reciprocal RMS per row, kept in fp32 for the backward)")
    r = outcome.tensors.get("fwd_bf16.r")
    if r is None or tuple(r.shape) != (shape[0],):
        fail(f"r from rmsnorm_forward has shape {None if r is None else tuple(r.shape)} for x of shape {shape}; "
             f"expected ({shape[0]},), one value per row")


@item("4.7")
def test_identical_results_when_run_twice(sim, request):
    pairs = [(sim, "ag_a", "ag_a_again")]
    if torch.cuda.is_available():
        pairs.append((request.getfixturevalue("gpu"), "ag_rerun_gpu", "ag_rerun_gpu_again"))
    for (inputs, outcome), first, again in pairs:
        need(outcome, first)
        need(outcome, again)
        gate(outcome, first, ("y", "dx", "dg"), inputs[f"x_{first.removeprefix('ag_')}"])
        for name in ("y", "dx", "dg"):
            a, b = outcome.tensors.get(f"{first}.{name}"), outcome.tensors.get(f"{again}.{name}")
            if a is None or b is None or not torch.equal(a, b):
                where = "on the GPU" if "gpu" in first else "on the simulator"
                fail(f"running the same forward and backward twice gave different {name} {where}: results "
                     f"must be deterministic (no atomics whose order changes the sum)")


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


@item("6")
def test_fused_backward(sim):
    _, outcome = sim
    info = need(outcome, "ag_d")
    M, N = CORE["d"]
    launches = info["bwd"]["launches"]
    if not launches:
        fail("your backward launched no kernel")
    for role, key, what in (("x", "loaded", "loaded x"), ("dy", "loaded", "loaded dy"),
                            ("dx", "stored", "stored dx")):
        n = _by_role(launches, role, key)
        if n != M * N:
            fail(f"your backward {what} {n / (M * N):.1f} times per element; a fused backward reads x and dy "
                 f"once and writes dx once")
    # Scratch buffers (the partial dg buffer): written once and read once at most.
    scratch = _others(launches, ("x", "dy", "dx", "g", "y"))
    stored = sum(a["stored"] for _, _, a in scratch)
    loaded = sum(a["loaded"] for _, _, a in scratch)
    if stored > M * N + M or loaded > M * N + M:
        fail(f"your backward moved {stored + loaded} elements of scratch buffers for {M * N} elements of x; "
             f"only the partial dg buffer (at most M·N, written once, reduced once) is allowed")


def _op_name(op) -> str:
    """A host op as the student wrote it: aten's _to_copy is x.to(dtype)."""
    return f"to({op['dtype']})" if op["op"] in ("_to_copy", "to") and op.get("dtype") else op["op"]


def _host_problems(phase, M, N, where):
    for op in phase.get("host_ops", []):
        act = [r for r in op["roles"] if r in ("x", "dy", "y", "dx")]
        if act:
            many = f"all {M * N}" if op["reads"] == M * N else f"{op['reads']}"
            return (f"a host-side `{_op_name(op)}` read {many} elements of {act[0]} in your {where}: the kernels "
                    f"must do the work on M·N data" + (" (load the 16-bit values and convert them in registers: "
                                                      "tl.load(...).to(tl.float32))"
                                                      if op["op"] in ("_to_copy", "to") else ""))
        if op["reads"] >= M * N and op["output_numel"] > N:
            return (f"a host-side `{_op_name(op)}` read {op['reads']} elements in your {where}: only small glue "
                    f"(like summing the partial dg buffer to N values) may run outside kernels")
    return None


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
            problem = _host_problems(phase, M, N, where)
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
    for task in [f"ag_{k}" for k in CORE] + [f"ag_{k}" for k in ROBUST]:
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
    _, outcome = sim
    M, N = CORE["d"]
    info = need(outcome, "ag_d")
    scratch = [(name, a) for _, name, a in _others(info["bwd"]["launches"], ("x", "dy", "dx", "g", "y", "r"))
               if a["stored"]]
    biggest = max(scratch, key=lambda s: s[1]["numel"], default=None)
    if biggest and biggest[1]["numel"] > M * N // 8:
        fail(f"your partial dg buffer ({biggest[0]}) has {biggest[1]['numel']} elements for M·N = {M * N}; the "
             f"improved reduction keeps it at most M·N/8 = {M * N // 8}: give each program many rows and "
             f"accumulate dg in registers")
    check_core(sim, "ag", ("dg",))


# --- item 10: GPU speed (only where CUDA is present) --------------------------------------------------------

SPEED_PARTS = {"10.1": ("float32", "fwd"), "10.2": ("bfloat16", "fwd"),
               "10.3": ("float32", "fwdbwd"), "10.4": ("bfloat16", "fwdbwd")}


@pytest.fixture(scope="session")
def baseline(gpu):
    """PyTorch eager and a plain copy, timed by the grader itself, per dtype."""
    from autograder.speed import baseline_times
    return {dtype: baseline_times(SPEED_SHAPE, dtype, SPEED_SEED) for dtype in ("float32", "bfloat16")}


_REFERENCES = {}


def _speed_reference(dtype):
    from autograder.speed import reference_at_rows
    if dtype not in _REFERENCES:
        _REFERENCES[dtype] = reference_at_rows(SPEED_SHAPE, dtype, SPEED_SEED, SPEED_ROWS)
    return _REFERENCES[dtype]


def _speed(gpu, baseline, part, record_property):
    from autograder.speed import verdict
    dtype, kind = SPEED_PARTS[part]
    inputs, outcome = gpu
    info = need(outcome, f"speed_{dtype}")
    x, ref = _speed_reference(dtype)
    check(outcome, f"speed_{dtype}", ("y", "dx"), x, ref)
    got = outcome.tensors.get(f"speed_{dtype}.dg")
    msg = "dg was not returned" if got is None else compare(
        "dg", got, ref["dg"], x, tol=dg_tolerance(x.dtype, SPEED_SHAPE[0], ref["dg"]))
    if msg:
        fail(msg.replace(f"shape {tuple(x.shape)}", f"shape {SPEED_SHAPE}"))
    ok, msg = verdict(kind, dtype, SPEED_SHAPE, info[f"{kind}_ms"], baseline[dtype], SPEEDUP_NEEDED[part])
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
