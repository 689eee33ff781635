"""The judge runs each task again on inputs the submission never saw (autograder/job/judge/replay.py): the recipe the
submission's process reported (its host ops, recipe.py) and the launches the judge served, replayed by the judge
on fresh inputs. An output right on the grader's inputs and wrong on the fresh ones is stale: the host computed it
from the first inputs out of the recipe's sight."""
import sys

import pytest
import torch

from autograder.job.submission import recipe

from autograder.job.judge import replay
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
import hostile  # noqa: E402
from grade_in_process import fresh_inputs, made_on_a_draw, stale, verdicts  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_fresh_draw_keeps_the_buffer_its_dtype_and_its_zero_rows_and_changes_the_rest(dtype):
    base = torch.randn(6, 10, generator=torch.Generator().manual_seed(0)).to(dtype)
    base[2] = 0
    new = replay.fresh(base, torch.Generator().manual_seed(1))
    assert new.dtype == dtype and new.shape == (60,)
    zero = (new.view(6, 10) == 0).all(1)
    assert int(zero.sum()) == 1 and int((new == 0).sum()) == 10             # one zero row, and no other zero
    assert bool((new.view(6, 10)[~zero].flatten() != torch.cat([base[:2], base[3:]]).flatten()).all())
    strided = replay.fresh(base[:, ::2], torch.Generator().manual_seed(1))  # a view: its own rows, the rest anew
    assert int((strided.view(6, 10)[:, ::2] == 0).all(1).sum()) == 1


def test_a_zero_row_moves_on_the_fresh_draw():
    """Where the host found the zero rows of the first inputs is stale on the replay's: they are elsewhere."""
    base = torch.randn(6, 10)
    base[2] = 0
    rows = {int((replay.fresh(base, torch.Generator().manual_seed(k)).view(6, 10) == 0).all(1).nonzero())
            for k in range(8)}
    assert len(rows) > 1, rows


def _views(base):
    return {"whole": base, "tail": base[3:], "columns": base.view(10, 100)[:, 5:9],
            "transposed": base.view(10, 100).t(), "stepped": base.view(10, 100)[::3, ::7], "one": base[7],
            "int16": base.view(torch.int16)[1:9], "bytes": base.view(torch.uint8)[5:77],
            "stride_0": base[5:6].expand(4, 3), "empty": base[:0].view(0, 5)}


@pytest.mark.parametrize("view", list(_views(torch.zeros(1000))))
def test_the_replay_marks_and_reads_each_byte_of_a_view_as_its_addresses_say(view):
    """Which bytes the replay's kernels made (Replay.mark, made_each, is_made), on any view of a buffer, agree with
    the bytes its elements' addresses name (storage offset + index · stride, times the element's size)."""
    base = torch.zeros(1000)
    t = _views(base)[view]
    size = t.element_size()
    index = torch.arange(base.numel() * 4 // size).as_strided(t.shape, t.stride(), t.storage_offset()).reshape(-1)
    at = index[:, None] * size + torch.arange(size)           # the byte addresses, one row per element
    run = replay.Replay(None)
    run.buffers[0] = base.view(torch.uint8)
    flags = torch.rand(4000, generator=torch.Generator().manual_seed(0)) < 0.7
    run.made[0] = flags.clone()
    assert torch.equal(run.made_each(t), flags[at].all(-1).reshape(t.shape))
    assert run.is_made(t) == bool(flags[at].all())
    for made in (True, False, torch.rand(t.shape, generator=torch.Generator().manual_seed(1)) < 0.5):
        run.made[0] = flags.clone()
        run.mark(t, made)
        want = flags.clone()
        want[at] = made if isinstance(made, bool) else made.reshape(-1, 1).expand_as(at)
        assert torch.equal(run.made[0], want), made


def test_recorded_torch_ops_replay_on_the_replays_own_tensors():
    """The submission's side records each op with its tensors as buffers; the replay runs the same ops, by their
    aten names, on the fresh input, and reads the output back from the buffer the log named."""
    log = recipe.start()
    try:
        x = torch.randn(4, 8)
        log.input("x", x)
        with recipe.Recording():
            y = torch.empty(8)
            y.copy_((x * 2).sum(0))
        plan = replay.Recipe()
        plan.ops, plan.roles = log.ops, {str(b): role for b, role in log.roles.items()}
        plan.snapshots = [(len(log.ops), 0, {"y": log.ref(y)})]
    finally:
        recipe.Recording.log = None
    assert [op["op"] for op in plan.ops] == ["aten::empty", "aten::mul", "aten::sum", "aten::copy_"]
    fresh = torch.randn(4, 8)
    (got,) = replay.run(plan, replay.Replay(None), {"x": fresh})
    assert torch.allclose(got["y"], (fresh * 2).sum(0))


@pytest.mark.parametrize("op, why", [
    ("mylib::fast_norm", "not a pure tensor op"),          # a custom op: torch does not define it
    ("aten::from_file", "not a pure tensor op"),           # effects beyond its tensors
    ("aten::_unsafe_index", "not a pure tensor op"),       # indexing without its bounds checks
    ("aten::no_such_op", "torch has no op"),
])
def test_an_op_that_is_not_a_pure_tensor_op_of_torchs_stops_the_replay_and_names_it(op, why):
    with pytest.raises(replay.Stale, match=why) as stopped:
        replay.Replay(None).op({"op": op, "overload": "default", "args": [], "kwargs": {}, "out": []})
    assert op in str(stopped.value)


# the lecture's kernels, whose backward keeps its partial dg buffer from one call to the next (a workspace): the
# replay of a later call starts it from what the launch found there, and the kernel overwrites it
WORKSPACE_KEPT = hostile.edit(
    hostile.SIMPLE, ("def _matrix(t):", "_WORKSPACE = {}\n\n\ndef _matrix(t):"),
    ("dg_partial = torch.empty((M, N)", "dg_partial = _WORKSPACE.get((M, N))\n    if dg_partial is None:\n"
                                        "        dg_partial = _WORKSPACE[(M, N)] = torch.empty((M, N)"))


def test_a_workspace_kept_from_an_earlier_call_is_replayed_as_the_launch_found_it(tmp_path):
    path = tmp_path / "rmsnorm.py"
    path.write_text(WORKSPACE_KEPT)
    assert stale(path, (37, 100), "backward") == {}


@pytest.mark.parametrize("name, op", [("solution", "autograd"), ("simple", "backward"), ("unsloth", "backward")])
def test_honest_kernels_are_right_again_on_fresh_inputs(tmp_path, name, op):
    """The solution, the lecture's kernels and a backward that writes dx into dy's memory (the replay's fresh dy
    changes under it, as the first run's did): nothing stale."""
    path = {"solution": ROOT / "solution" / "rmsnorm.py", "unsloth": ROOT / "tests" / "library_styles" / "unsloth.py",
            "simple": ROOT / "tests" / "corpus" / "simple.py"}[name]
    assert stale(path, (37, 100), op) == {}


def test_the_fresh_inputs_follow_the_inputs_as_given_not_what_the_run_left_in_their_memory(tmp_path):
    """A backward that writes into dy (here dy scaled by 1000, as dx stored into dy's memory is dx's scale: 316 times
    dy's on a zero row of x) leaves its mark in dy's buffer; the replay's fresh dy is drawn like the dy it was given,
    or a fresh dy 1000 times too large would make rounding look like a wrong dg."""
    path = tmp_path / "rmsnorm.py"
    path.write_text(hostile.edit(hostile.SIMPLE, ("    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)",
                                                  "    dy.mul_(1000)\n    return dx.view(x.shape), dg_partial.sum(0)"
                                                  ".to(g.dtype)")))
    got = fresh_inputs(path, (37, 100), "backward")
    for name, (given, new) in got.items():
        assert new is not None and new.numel() == given.numel() and not torch.equal(new, given.reshape(-1)), name
        if name != "r":
            assert 0.5 < float(new.std()) / float(given.std()) < 2, (name, float(new.std()), float(given.std()))


# the lecture's kernels, whose backward then writes dg again from a value the host computed in numpy, passed to a
# kernel as a scalar where a row is one element long: within every budget of scalars, and right on the first inputs
DG_FROM_A_HOST_SCALAR = hostile.edit(
    hostile.SIMPLE, ("import torch\n", "import numpy as np\nimport torch\n"),
    ("def _matrix(t):", "@triton.jit\ndef _put(p_ptr, value):\n    tl.store(p_ptr, value)\n\n\ndef _matrix(t):"),
    ("    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)",
     "    dg = dg_partial.sum(0).to(g.dtype)\n"
     "    if N == 1:\n"
     "        xn, dyn, rn = (t.detach().float().numpy() for t in (x2, dy2, r))\n"
     "        _put[(1,)](dg, float((dyn[:, 0] * xn[:, 0] * rn).sum()))\n"
     "    return dx.view(x.shape), dg"))


@pytest.mark.parametrize("trick, shape, op, stale_outputs, why", [
    # r in memory numpy made: the replay starts it from what the launch found there, the first inputs' r
    ("r_from_numpy", (12, 64), "forward", {"r"}, "the same as on the first inputs"),
    # r's values in launch arguments: r comes out the same on the new inputs (and y, made from it, wrong)
    ("r_passed_as_scalar_arguments", (12, 64), "forward", {"r"}, "the same as on the first inputs"),
    ("dg_from_a_host_scalar", (8, 1), "backward", {"dg"}, "the same as on the first inputs"),
])
def test_host_values_the_recipe_does_not_make_are_stale_on_fresh_inputs(tmp_path, trick, shape, op, stale_outputs,
                                                                       why):
    path = tmp_path / "rmsnorm.py"
    path.write_text(DG_FROM_A_HOST_SCALAR if trick == "dg_from_a_host_scalar" else hostile.HOSTILE[trick][3])
    got = stale(path, shape, op)
    assert set(got) == stale_outputs, got
    assert all(why in m for m in got.values()), got


def test_a_part_right_on_the_graders_inputs_and_wrong_on_the_replays_earns_nothing(tmp_path):
    """dg written from a host scalar where N = 1 is right on the grader's inputs: only the replay on fresh inputs
    shows that the host made it, and the part whose case it is (4.4, N = 1) says so."""
    path = tmp_path / "rmsnorm.py"
    path.write_text(DG_FROM_A_HOST_SCALAR)
    got = verdicts({"trick": path}, workers=1)["trick"]
    assert sorted(got["failed"]) == ["4.4", "9"], got["failed"]
    assert "the same as on the first inputs" in got["failed"]["4.4"], got["failed"]["4.4"]


@pytest.mark.parametrize("again, first, evidence", [
    ([0.0, 0.0], [5e-4, -5e-4], False),             # the right values within the tolerance of zero: zeros pass too
    ([0.5, -0.25], [5e-4, -5e-4], True),            # right, and neither the first run's values nor zeros would be
    ([0.5, -0.25], [0.5, -0.25], False),            # the first run's values are as right: nothing told apart
    ([0.4, -0.25], [5e-4, -5e-4], False),           # wrong on the new inputs
])
def test_a_replay_shows_the_kernels_work_only_where_the_draw_tells_it_from_stale_values_and_from_nothing(
        again, first, evidence):
    want = torch.tensor([[0.5], [-0.25]], dtype=torch.float64) if again[0] else torch.tensor([[2e-6], [-3e-6]],
                                                                                           dtype=torch.float64)
    x = torch.ones(2, 1)
    as_output = [torch.tensor(v, dtype=torch.float32).reshape(2, 1) for v in (again, first)]
    assert replay.told_apart("dx", *as_output, want, x) is evidence


@pytest.mark.parametrize("seed", [10, 64])
def test_stale_zeros_at_n_1_are_not_the_kernels_work_on_a_draw_where_zeros_are_right(seed):
    """dx at N = 1 is about r·dy·g·eps/x²: on some fresh draws (these seeds) every right value lies within the
    tolerance of zero. A file that decodes the host's numpy bits leaves zeros on the replay (its bits are never
    written there), which come out right on such a draw and unlike the first run's values: the draw tells nothing
    apart there, and dx stays the host's (a trick earned part 4.4 on about one grading in 25 this way)."""
    made, fresh = made_on_a_draw(ROOT / "tests" / "hostile_files" / "const_fill_bit_channel.py", "n1", (8, 1),
                                 "autograd", seed)
    want = replay.references(fresh["x"].reshape(8, 1), fresh["g"], fresh["dy"].reshape(8, 1), 1e-5, ("x", "g"))["dx"]
    assert replay.right("dx", torch.zeros(8, 1), want, fresh["x"].reshape(8, 1)), "not a draw where zeros are right"
    assert made["dx"] is False, made


@pytest.mark.parametrize("again, says", [
    ({"args": {"x_ptr": [64, 0, 0], "y_ptr": [0, 64, 0]}, "race": False}, None),
    ({"args": {"x_ptr": [128, 0, 0], "y_ptr": [0, 64, 0]}, "race": False},
     "k made 128 loads, 0 stores and 0 atomics through x_ptr on the new inputs, 64 loads, 0 stores and 0 atomics on "
     "the grader's"),
    ({"args": {"x_ptr": [64, 0, 64], "y_ptr": [0, 64, 0]}, "race": False},         # reads hidden in atomics
     "k made 64 loads, 0 stores and 64 atomics through x_ptr on the new inputs, 64 loads, 0 stores and 0 atomics on "
     "the grader's"),
    ({"args": {"y_ptr": [0, 64, 0]}, "race": False},
     "k made 0 loads, 0 stores and 0 atomics through x_ptr on the new inputs, 64 loads, 0 stores and 0 atomics on "
     "the grader's"),
    ({"args": {"x_ptr": [64, 0, 0], "y_ptr": [0, 64, 0]}, "race": True},
     "k raced on the new inputs and did not on the grader's"),
])
def test_a_launch_that_moves_other_memory_on_the_replay_is_told_apart(again, says):
    """What each launch loads and stores (atomics aside) depends on the shapes it is given: the replay's counts are
    held to the first run's (a kernel that tells the grader's inputs from others does other work on each)."""
    first = {"args": {"x_ptr": [64, 0, 0], "y_ptr": [0, 64, 0]}, "race": False}
    assert replay.moved("k", first, again) == says

