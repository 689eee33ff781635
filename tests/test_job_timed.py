"""Item 10 timed by the judge's process (autograder/job/judge/timed.py), on the CPU: the submission's process records
each step without running it (host.py's "record"), and the judge compiles the kernels with Triton's interpreter,
replays, captures and times them on the fake GPU (tests/fake_gpu.py), as it does with Triton on a GPU."""
import importlib.util
import sys

import pytest
import torch

from autograder.job.judge import timed
from autograder.job.submission import recipe
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
from grade_in_process import timed_job  # noqa: E402
import timed_hostile  # noqa: E402

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                  reason="the judge compiles with Triton (its interpreter here): Linux x86-64 only")

DECOY = '''
# A forward whose kernel works on its first three calls and then keeps y as it was: a counter in a buffer the file
# keeps between calls (a decoy for the first timings, cheap for the rest).
_COUNT = torch.zeros(1, dtype=torch.int32)


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, count_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    seen = tl.atomic_add(count_ptr, 1)
    if seen < 3 * tl.num_programs(0):
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
        g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * N + cols, (x * r * g).to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(r_ptr + row, r)


def rmsnorm_forward(x, g, eps=1e-5):
    M, N = x.shape
    y, r = torch.empty_like(x), torch.empty(M, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(M,)](x, g, y, r, _COUNT, N, eps, BLOCK=triton.next_power_of_2(N))
    return y, r
'''


PATCHED = '''
import unittest.mock  # noqa: E402

from rmsnorm_testkit import timing as _timing  # noqa: E402

for _name in ("time_cuda", "captured"):           # every timing a hundred times faster, in this process
    unittest.mock.patch.object(_timing, _name, lambda *a, **k: 0.01).start()
'''

PATCHED_TORCH = '''
import unittest.mock  # noqa: E402

unittest.mock.patch.object(torch.cuda, "synchronize", lambda *a, **k: None).start()
'''


def _decoy() -> str:
    head = (ROOT / "solution" / "rmsnorm.py").read_text().split("# ---------------------------------------------------"
                                                                 "------------------------\n# Host side")[0]
    solution = (ROOT / "solution" / "rmsnorm.py").read_text()
    return head.split("@triton.jit")[0] + DECOY + "\n\n" + solution[solution.index("class TritonRMSNorm"):]


@needs_triton
def test_the_judge_replays_and_times_a_recorded_step_with_its_own_triton():
    got = timed_job(ROOT / "solution" / "rmsnorm.py")
    info = got["speed.float32"]
    assert got["_import"] is None and info.get("ok"), info
    for kind in timed.OUTPUTS:
        assert info[f"{kind}_graph_ms"] == 1.0                    # the whole step, one fake kernel of 1 ms
        assert info["wrong"][kind] is None and info["refused"][kind] is None, info
        assert info[f"{kind}_replays_wrong"] == 0 and info[f"{kind}_replays_checked"] >= 1
        assert info[f"{kind}_torch_work"] == [] and info[f"{kind}_inputs_changed"] == []
    seeds = info["seeds"]
    assert len({seeds["call"], seeds["fwd"], seeds["fwdbwd"]}) == 3 and all(isinstance(s, int) for s in seeds.values())


@needs_triton
def test_an_autotuned_kernel_is_recorded_as_a_choice_of_its_configs_and_timed(tmp_path):
    """fla's style: every launch autotuned over num_warps; the judge picks a config (the first, off a GPU)."""
    got = timed_job(ROOT / "tests" / "library_styles" / "fla.py")
    info = got["speed.float32"]
    assert all(info["refused"][k] is None and info["wrong"][k] is None for k in timed.OUTPUTS), info
    assert [a[0] for a in info["fwd_autotuned"]] == ["layer_norm_fwd_kernel"], info.get("fwd_autotuned")
    assert all(chosen == 0 and configs > 1 for _, chosen, configs in info["fwdbwd_autotuned"]), info


@needs_triton
def test_a_kernel_that_is_cheap_after_its_first_calls_is_caught_by_the_checked_replays(tmp_path):
    path = tmp_path / "rmsnorm.py"
    path.write_text(_decoy())
    info = timed_job(path)["speed.float32"]
    assert info["fwd_replays_wrong"] >= 1, info
    assert "timed replays of your forward gave wrong outputs" in info["refused"]["fwd"], info["refused"]


@needs_triton
def test_tampering_with_its_own_process_changes_nothing_the_judge_times(tmp_path):
    """A file that patches torch's timing in its own process (unittest.mock.patch on torch.cuda's Event and
    synchronize, as the grader's old timing could be fooled) is timed as any other: the timing runs in the judge's
    process."""
    path = tmp_path / "rmsnorm.py"
    path.write_text((ROOT / "solution" / "rmsnorm.py").read_text() + PATCHED_TORCH)
    info = timed_job(path)["speed.float32"]
    assert info.get("ok") and info["fwd_graph_ms"] == 1.0 and info["refused"]["fwd"] is None, info


@needs_triton
def test_a_file_that_patches_the_graders_code_in_its_own_process_ends_the_grading(tmp_path):
    """The kit's timing functions patched in the submission's process: its seal (job/submission/seal.py) finds the
    change after the import, and the judge ends the grading with the name of what changed."""
    path = tmp_path / "rmsnorm.py"
    path.write_text((ROOT / "solution" / "rmsnorm.py").read_text() + PATCHED)
    got = timed_job(path)
    assert "rmsnorm_testkit.timing.time_cuda" in got["_tampered"]["error"], got
    assert not got["speed.float32"].get("ok"), got


def _ran(body, shape=(64, 32)):
    """The torch work the judge measures when it runs the host ops ``body(x)`` records (no launches)."""
    x = torch.randn(*shape)
    log = recipe.start()
    log.input("x", x)
    with recipe.Recording():
        y = body(x)
    recorded = {**recipe.report(), "launches": [], "outputs": {"y": recipe.ref(y)}}
    recipe.Recording.log = None
    step = timed.Step("fwd", recorded, None, "cpu")
    step({"x": torch.randn(*shape)})
    return timed.torch_work(step.work, shape)


def _chunked(chunks):
    def body(x):
        torch.zeros(4, x.shape[1]).sum(0)              # a partial buffer's sum: small, and moving data
        x.to(torch.float16)                            # a cast of x: moving data
        torch.ones(x.shape[1]).mul(2)                  # a little arithmetic: not the step's work
        return [rows.pow(2) for rows in x.chunk(chunks)][-1]           # torch computing from x, in one op or eight
    return body


@pytest.mark.parametrize("chunks", [1, 8])
def test_torch_work_is_measured_as_the_judge_runs_the_ops_in_one_op_or_many(chunks):
    found = _ran(_chunked(chunks))
    assert [w["op"] for w in found] == (["pow"] * chunks + ["mul"])[:8] and found[0]["reads"] == 64 * 32 // chunks
    assert _ran(lambda x: x[:8].pow(2)) == []          # an eighth of x is not the step's work
    assert _ran(lambda x: x.t().contiguous()) == []     # a view and a copy move data


def test_work_written_into_an_out_buffer_or_in_place_is_work():
    assert [w["op"] for w in _ran(lambda x: torch.mul(x, 2.0, out=torch.empty_like(x)))] == ["mul"]
    assert [w["op"] for w in _ran(lambda x: x.clone().mul_(2.0))] == ["mul_"]


def _var_mean_into(x):
    var, mean = torch.empty(x.shape[0]), torch.empty(x.shape[0])
    torch.ops.aten.var_mean.correction_out(x, [1], correction=0, keepdim=False, out0=var, out1=mean)
    return var


def _square_by_mse_grad(x):
    out = torch.empty_like(x)
    torch.ops.aten.mse_loss_backward.grad_input(torch.ones(()), x, torch.zeros_like(x), 0, grad_input=out)
    return out


def test_work_written_into_any_argument_the_schema_marks_written_is_work():
    """Whatever the written argument is called (out0=, grad_input=): the op's schema says it writes, not its name."""
    assert [w["op"] for w in _ran(_var_mean_into)] == ["var_mean"]
    assert [w["op"] for w in _ran(_square_by_mse_grad)] == ["mse_loss_backward"]


def test_a_sum_over_the_inputs_is_work_and_a_sum_over_a_kernels_buffer_is_glue():
    """A sum over memory torch made from the inputs (a row sum of x, of x's bits) is the kernels' work; the sum of
    a buffer nothing computed from the inputs (the lecture's partial dg rows, which kernels store) moves data."""
    assert [w["op"] for w in _ran(lambda x: x.sum(1))] == ["sum"]
    assert [w["op"] for w in _ran(lambda x: x.view(torch.int32).sum(0))] == ["sum"]
    assert _ran(lambda x: torch.empty_like(x).sum(0)) == []


@torch.library.custom_op("timed_tests::wrapped", mutates_args=())
def _wrapped(x: torch.Tensor, host_math: bool) -> torch.Tensor:
    """A step's work in a torch.library custom op: a stand-in kernel's copy, or torch's own math."""
    return x * 2 if host_math else x.clone()


@pytest.mark.parametrize("host_math", [False, True])
def test_the_recipe_looks_inside_a_custom_op(host_math):
    """A custom op is its body's work: kernels wrapped in one (to keep torch.compile out) are not torch's work, and
    torch math inside one is."""
    assert [w["op"] for w in _ran(lambda x: _wrapped(x, host_math))] == (["mul"] if host_math else [])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_replay_check_uses_the_inputs_made_again_from_their_seed(dtype):
    """The check's reference comes from the inputs made again from their seed: outputs right for the inputs as a
    kernel left them are wrong, and the change is named."""
    from rmsnorm_testkit import timing
    from rmsnorm_testkit.compare import reference
    shape = (16, 64)
    statics = timing.speed_inputs(shape, dtype, 5)
    y, _, dx, dg = reference(*statics)
    outs = [t.to(statics[0].dtype) for t in (y, dx, dg)]
    check = timed.Check("fwdbwd", statics, outs, shape, dtype)
    check(5)
    outs[1][3] += 1                                   # one row of dx wrong
    check(5)
    assert (check.wrong, check.checked, check.changed) == (1, 2, set())
    statics[2].zero_()                                # dy zeroed by a kernel: dx and dg zero are right for it
    for t in outs:
        t.zero_()
    check(5)
    assert check.wrong == 2 and check.changed == {"dy"}


@needs_triton
def test_a_name_a_kernel_reads_that_triton_cannot_compile_is_refused_with_its_name():
    from autograder.job.judge.provenance import Refused
    kernels = timed.TritonKernels("rmsnorm.py", "")
    with pytest.raises(Refused, match="a kernel reads np, which is not a kernel, a constexpr or a part of Triton"):
        kernels._bound({"kind": "foreign", "name": "np", "module": True}, {})
    assert kernels._bound({"kind": "constexpr", "value": {"value": 4}}, {}).value == 4
    assert kernels._bound({"kind": "op", "space": "tl", "name": "sum"}, {}) is kernels.language["tl"].sum


@needs_triton
@pytest.mark.parametrize("name", sorted(timed_hostile.TIMED_TRICKS))
def test_a_red_team_trick_on_the_judge_s_timing_earns_nothing_over_the_solution(name, tmp_path):
    """Each trick of tests/timed_hostile.py (built against the judge's timing by a red team with the whole source)
    gets the step it attacks refused, or its outputs found wrong, or its trick never reaches what the judge times
    (the step launches the solution's own kernels, and is timed as the solution)."""
    what, kind, *_ = timed_hostile.TIMED_TRICKS[name]
    path = tmp_path / "rmsnorm.py"
    path.write_text(timed_hostile.source(name))
    info = timed_job(path, shape=(16, 128))["speed.float32"]
    assert info.get("ok"), info
    honest = set(info[f"{kind}_launched"]) <= {"rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel", "dg_sum_kernel"}
    assert info["refused"][kind] is not None or info["wrong"].get(kind) or honest, (name, what, info["refused"],
                                                                                    info["wrong"])
