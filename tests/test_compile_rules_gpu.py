"""The compile rules the simulator enforces are Triton's: one table of kernels, each refused or run by the
simulator (on the CPU, always) and by real Triton on a GPU (skipped without CUDA; run on the course GPU machine,
docs/perf.md records the run)."""
import contextlib
import re
import textwrap

import pytest
import torch

import mini_triton

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA and Triton")

KERNELS = {
    "loop_carried_scalar_made_a_block": ("""
        acc = 0.0
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)""", False),
    "scalar_stays_scalar": ("""
        acc = 0.0
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.sum(tl.load(x_ptr + cols, mask=cols < n, other=0.0), axis=0)
        tl.store(out_ptr, acc)""", True),
    "store_of_higher_rank": ("""
        rows = tl.arange(0, 2)[:, None]
        cols = tl.arange(0, BLOCK)
        tile = tl.load(x_ptr + rows * BLOCK + cols[None, :])
        tl.store(out_ptr + cols, tile)""", False),
    "value_broadcast_to_pointers": ("""
        rows = tl.arange(0, 2)[:, None]
        cols = tl.arange(0, BLOCK)
        tl.store(out_ptr + rows * BLOCK + cols[None, :], tl.load(x_ptr + cols))""", True),
    "plain_python_function_called": ("""
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, helper(tl.load(x_ptr + offs)))""", False),
    "jit_function_called": ("""
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, jit_helper(tl.load(x_ptr + offs)))""", True),
    "global_class_read": ("""
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * Holder.K)""", False),
    "constexpr_global_read": ("""
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * K)""", True),
    "branches_give_an_int_and_a_float": ("""
        offs = tl.arange(0, BLOCK)
        if n > 3:
            v = 1
        else:
            v = 1.5
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * v)""", False),
    "branches_give_a_block_and_a_scalar": ("""
        offs = tl.arange(0, BLOCK)
        if n > 3:
            v = tl.load(x_ptr + offs)
        else:
            v = 0.0
        tl.store(out_ptr + offs, v)""", False),
    "arange_not_a_power_of_2": ("""
        offs = tl.arange(0, 48)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs))""", False),
    "block_shape_from_a_runtime_value": ("""
        offs = tl.arange(0, n)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs))""", False),
    "store_of_a_value_with_an_extra_dim_of_1": ("""
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs)[:, None])""", False),
    "triton_2_name_in_tl_math": ("""
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.math.fast_powf(tl.load(x_ptr + offs), 2.0))""", False),
    "loop_carried_dtype_changes": ("""
        acc = tl.zeros([BLOCK], dtype=tl.float16)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)""", False),
    "loop_carried_int_given_floats": ("""
        total = 0
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            total += tl.sum(tl.load(x_ptr + cols, mask=cols < n, other=0.0), axis=0)
        tl.store(out_ptr, total)""", False),
    "loop_carried_dtype_kept": ("""
        acc = tl.zeros([BLOCK], dtype=tl.float16)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0).to(tl.float16)
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)""", True),
    "loop_variable_cast_to_int64": ("""
        for row in range(0, 2):
            offs = row.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))""", True),
    "loop_variable_as_a_block_shape": ("""
        for i in range(1, 2):
            offs = tl.arange(0, i * BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs))""", False),
    "version_shim_module_and_function": ("""
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.store(out_ptr + offs, tl_math.rsqrt(x * x + 1.0) * shim_rsqrt(x * x + 1.0))""", True),
    "module_of_jit_helpers": ("""
        offs = helpers.lanes(BLOCK)
        tl.store(out_ptr + offs, helpers.twice(tl.load(x_ptr + offs)) * helpers.K * helpers.THREE)""", True),
    "module_attribute_plain_function": ("""
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, helpers.plain(tl.load(x_ptr + offs)))""", False),
    "torch_read_in_a_kernel": ("""
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(torch.float16))""", False),
    "branches_give_two_floats": ("""
        offs = tl.arange(0, BLOCK)
        if n > 3:
            v = 2.0
        else:
            v = 1.5
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * v)""", True),
}
# what the kernels above may name besides tl: a plain function, a jit one, a class, a constexpr global and a module
PRELUDE = """
def helper(v):
    return v * 2


@triton.jit
def jit_helper(v):
    return v * 2


class Holder:
    K = 2


K = tl.constexpr(2)


@triton.jit
def lanes(BLOCK: tl.constexpr):
    return tl.arange(0, BLOCK)


# version shims, as public kernel files write them: Triton's modules read as values
tl_math = tl.libdevice if hasattr(tl, "libdevice") else tl.math
shim_rsqrt = getattr(tl, "rsqrt", None) or tl.math.rsqrt


# a module of helpers, as libraries keep them (`from lib import helpers`): @jit functions, a constexpr, a number and
# a plain function
helpers = types.ModuleType("helpers")
helpers.twice, helpers.lanes, helpers.plain, helpers.K, helpers.THREE = jit_helper, lanes, helper, K, 3
"""


# what the simulator raises for a kernel Triton refuses: a CompilationError, or for a name Triton lacks (a Triton 2
# name), the simulator's Unsupported, a NotImplementedError
REFUSED = (mini_triton.CompilationError, NotImplementedError)


BACKENDS = {"triton": "import types\nimport torch\nimport triton\nimport triton.language as tl\n",
            "mini_triton": "import types\nimport torch\nimport mini_triton as triton\ntl = triton.language\n"}


def _kernel(name, body, tmp_path, backend="triton"):
    path = tmp_path / f"{name}.py"
    path.write_text(BACKENDS[backend] + PRELUDE + "\n\n@triton.jit\n"
                    "def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n" + textwrap.indent(
                        textwrap.dedent(body).strip("\n"), "    ") + "\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_simulator_refuses_at_its_line_what_triton_refuses_and_runs_what_it_runs(name, tmp_path):
    body, runs = KERNELS[name]
    kernel = _kernel(name, body, tmp_path, "mini_triton")
    x, out = torch.randn(64), torch.zeros(64)
    if runs:
        kernel[(1,)](x, out, 64, BLOCK=32)
    else:
        with pytest.raises(REFUSED, match=r"kernel line \d+: "):
            kernel[(1,)](x, out, 64, BLOCK=32)


# The refusals the simulator can run on as written, in rule mode "record" (as the grader runs kernels): the kernel
# runs, and its launch's statistics name the rule, once.
RUN_ON = {"loop_carried_scalar_made_a_block", "branches_give_an_int_and_a_float", "arange_not_a_power_of_2",
          "loop_carried_dtype_changes", "loop_carried_int_given_floats", "loop_variable_as_a_block_shape",
          "plain_python_function_called", "triton_2_name_in_tl_math",
          "block_shape_from_a_runtime_value",
          "store_of_a_value_with_an_extra_dim_of_1"}


COPY = "tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + tl.arange(0, BLOCK)))"


@contextlib.contextmanager
def rules_recorded():
    """mini_triton's rule mode "record", as the grader runs kernels, for the block; the mode before it after."""
    old = mini_triton.set_rule_mode("record")
    try:
        yield
    finally:
        mini_triton.set_rule_mode(old)


@pytest.mark.parametrize("name", sorted(RUN_ON))
def test_in_record_mode_a_refused_kernel_runs_as_written_and_its_launch_names_the_rule(name, tmp_path):
    body, runs = KERNELS[name]
    assert not runs
    kernel = _kernel(name, body, tmp_path, "mini_triton")
    x, out = torch.randn(64), torch.zeros(64)
    with rules_recorded(), mini_triton.record() as rec:
        kernel[(1,)](x, out, 64, BLOCK=32)
    assert [L.rule is not None for L in rec.launches] == [True], rec.launches
    assert re.match(r"kernel line \d+: ", rec.launches[0].rule), rec.launches[0].rule
    with pytest.raises(REFUSED):                                # and the default mode refuses it again
        kernel[(1,)](x, out, 64, BLOCK=32)


def test_in_record_mode_a_plain_function_runs_as_written_and_every_launch_names_it(tmp_path):
    """The rule is broken where the kernel's names are bound, once per compile: each later launch names it too."""
    body, _ = KERNELS["plain_python_function_called"]
    kernel = _kernel("plain_python_function_called", body, tmp_path, "mini_triton")
    x = torch.randn(64)
    with rules_recorded():
        for _ in range(2):
            out = torch.zeros(64)
            with mini_triton.record() as rec:
                kernel[(1,)](x, out, 64, BLOCK=64)
            assert torch.equal(out, x * 2)
            assert "helper is a Python function" in (rec.launches[0].rule or ""), rec.launches[0].rule


def test_in_record_mode_an_int_grid_runs_as_one_program_per_index_and_is_named(tmp_path):
    kernel = _kernel("int_grid", COPY, tmp_path, "mini_triton")
    x, out = torch.randn(64), torch.zeros(64)
    with rules_recorded(), mini_triton.record() as rec:
        kernel[1](x, out, 64, BLOCK=64)
    assert torch.equal(out, x) and "the grid must be a tuple" in rec.launches[0].rule
    with pytest.raises(TypeError, match="the grid must be a tuple"):
        kernel[1](x, out, 64, BLOCK=64)


def test_in_record_mode_a_rule_noted_for_a_launch_that_never_began_is_not_the_next_ones(tmp_path):
    kernel = _kernel("int_grid", COPY, tmp_path, "mini_triton")
    x, out = torch.randn(64), torch.zeros(64)
    with rules_recorded():
        with pytest.raises(TypeError, match="unsupported type"):
            kernel[1](x, out, "64", BLOCK=64)             # the int grid noted, then an argument refused
        with mini_triton.record() as rec:
            kernel[(1,)](x, out, 64, BLOCK=64)
    assert rec.launches[0].rule is None


@needs_cuda
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_triton_refuses_what_the_simulator_refuses_and_runs_what_it_runs(name, tmp_path):
    body, runs = KERNELS[name]
    kernel = _kernel(name, body, tmp_path)
    x, out = torch.randn(64, device="cuda"), torch.zeros(64, device="cuda")
    if runs:
        kernel[(1,)](x, out, 64, BLOCK=32)
        torch.cuda.synchronize()
    else:
        with pytest.raises(Exception):                     # noqa: B017 -- Triton's CompilationError, whatever module
            kernel[(1,)](x, out, 64, BLOCK=32)
            torch.cuda.synchronize()


@needs_cuda
def test_an_int_grid_fails_on_a_gpu(tmp_path):
    kernel = _kernel("int_grid", COPY, tmp_path)
    x, out = torch.randn(64, device="cuda"), torch.zeros(64, device="cuda")
    with pytest.raises(TypeError):
        kernel[2](x, out, 64, BLOCK=32)
