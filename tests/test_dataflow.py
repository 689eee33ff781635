"""Item 7 by dataflow (rmsnorm_testkit/dataflow.py): host work is charged when a kernel loads its result or an output
returns it, never for a read whose result reaches neither; the kernels' own values stay theirs through copies."""
import pytest
import torch

import mini_triton as triton
from backends import kernels
from rmsnorm_testkit import dataflow

M, N = 8, 16


def op(name, reads=M * N, roles=(), out=M * N, dtype="float32"):
    return {"op": name, "reads": reads, "output_numel": out, "dtype": dtype, "where": "", "roles": list(roles)}


def test_host_work_a_kernel_loads_is_charged():
    flow = dataflow.Flow(M, N)
    flow.op(op("pow", roles=["x"]), ["x"], ["t"])
    flow.op(op("mean", out=M), ["t"], ["r"])
    flow.launch(["x", "r", "g"], ["y"])
    used, reached = flow.used
    assert (used["op"], reached) == ("pow", "a kernel")      # the first op of the chain, named
    assert "and a kernel loaded its result" in dataflow.problem(flow.used, M, N, "forward")


def test_a_check_whose_result_reaches_nothing_is_not_charged():
    flow = dataflow.Flow(M, N)
    flow.op(op("isnan", roles=["x"], dtype="bool"), ["x"], ["nan"])
    flow.op(op("any", out=1, dtype="bool"), ["nan"], ["flag"])
    flow.launch(["x", "g"], ["y", "r"])
    flow.output("y", "y")
    assert flow.used is None


@pytest.mark.parametrize("name", ["_to_copy", "clone", "sum"])
def test_moving_the_kernels_values_is_not_charged(name):
    flow = dataflow.Flow(M, N)
    flow.launch(["x", "dy", "g"], ["dx", "partial"])
    flow.op(op(name, out=N if name == "sum" else M * N), ["partial" if name == "sum" else "dx"], ["out"])
    flow.output("dx", "out")
    assert flow.used is None


def test_a_store_over_part_of_the_hosts_values_leaves_them_the_hosts():
    flow = dataflow.Flow(M, N)
    flow.op(op("mul", roles=["x"]), ["x", "g"], ["t"])
    flow.launch(["x"], ["t"])                         # one element stored: the rest is still the host's
    flow.launch(["t"], ["y"])
    assert flow.used is not None and flow.used[1] == "a kernel"
    clean = dataflow.Flow(M, N)
    clean.op(op("mul", roles=["x"]), ["x", "g"], ["t"])
    clean.launch(["x"], ["t"], whole=["t"])           # every byte stored again by a kernel: the kernels' values
    clean.launch(["t"], ["y"])
    assert clean.used is None


def test_autograds_cast_of_dy_to_ys_dtype_is_not_the_files_work():
    for cast, charged in ((None, True), ("float32", False)):
        flow = dataflow.Flow(M, N)
        flow.dy_cast = cast
        flow.op(op("_to_copy", roles=["dy"]), ["dy"], ["dy32"])
        flow.launch(["x", "dy32"], ["dx"])
        assert (flow.used is not None) == charged


def test_a_mini_triton_record_follows_the_same_values():
    """The public test's path: a record of host ops and launches, in the order they ran."""
    add_kernel = kernels("mini").add_kernel
    x = torch.randn(M, N)
    with triton.record(host_ops=True) as rec:
        t = x * 2                                     # host work on x ...
        y = torch.empty_like(x)
        add_kernel[(1,)](t, x, y, x.numel(), BLOCK=M * N)    # ... that a kernel loads
    used, foreign = dataflow.of_recording(rec, {"x": x}, {"y": y}, M, N)
    assert used[0]["op"] == "mul" and used[1] == "a kernel" and not foreign
    with triton.record(host_ops=True) as rec:
        bool(torch.isnan(x).any())                    # a check: its result reaches nothing
        y = torch.empty_like(x)
        add_kernel[(1,)](x, x, y, x.numel(), BLOCK=M * N)
    assert dataflow.of_recording(rec, {"x": x}, {"y": y}, M, N) == (None, False)


def test_a_table_made_from_shapes_alone_is_no_host_work():
    """torch.arange(M) * stride reads M elements, as many as an activation has where N = 1, but no input's value."""
    flow = dataflow.Flow(8, 1)
    flow.op(op("arange", reads=0, out=8, dtype="int32"), [], ["rows"])
    flow.op(op("mul", reads=8, out=8, dtype="int32"), ["rows"], ["table"])
    flow.launch(["x", "table"], ["y"])
    assert flow.used is None
    flow.op(op("mul", reads=8, roles=["x"], out=8), ["x"], ["t"])        # the same op on x's values is work
    flow.launch(["t"], ["y"])
    assert flow.used is not None
