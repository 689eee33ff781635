"""The comparison every test and hidden item uses: one tolerance rule, and messages that name the
element actually rejected, with its tolerance, the output's source and the input's story."""
import pytest
import torch

from rmsnorm_testkit.compare import DTYPE_NAMES, DTYPES, compare, strided_inputs, tolerance
from rmsnorm_testkit.text import DTYPE_SHORT, ERROR_LINE_CHARS, dtype_name, error_line


def test_the_named_element_is_the_one_furthest_outside_its_tolerance():
    """A large dg value rounded correctly to fp16 has the largest absolute error, but is within its
    tolerance; the message must name the small element that is really off."""
    x = torch.zeros(33, 200, dtype=torch.float16)
    expected = torch.full((200,), 0.5, dtype=torch.float64)
    expected[111], expected[171] = 16.944, -0.0576
    got = expected.clone()
    got[111], got[171] = 16.9375, -0.0543                 # [111]: fp16 rounding; [171]: a real error
    tol = (1e-3, 1e-2)
    msg = compare("dg", got, expected, x, tol=tol)
    assert "1 of 200 elements are off; the worst, dg[171], is -0.0543 where -0.0576 was expected" in msg, msg
    assert "tolerance there 0.00158" in msg


def test_dg_atol_grows_with_the_rows_summed_and_with_dg_in_16_bits():
    ref = torch.tensor([1.0, -30.0])
    assert tolerance("dg", torch.float32, ref, 4)[0] == 1e-5              # small M: the table's atol
    assert tolerance("dg", torch.float32, ref, 16384)[0] == 5e-6 * 128
    assert tolerance("dg", torch.float16, ref, 16)[0] == 2 * 2 ** -10 * 30
    assert tolerance("y", torch.float32, ref, 16384)[:2] == (1e-5, 1e-5)


def test_the_message_names_the_source_and_the_story_of_the_input():
    x = torch.randn(24, 80)
    msg = compare("y", x + 1, x, x, story="x of shape (24, 80) fp32, rows 160 elements apart",
                  source=" from rmsnorm_forward")
    assert msg.startswith("y from rmsnorm_forward differs for x of shape (24, 80) fp32, rows 160 elements apart: "
                          "1920 of 1920 elements are off")


def test_nan_where_the_reference_has_none_points_at_masked_loads():
    x = torch.randn(4, 8)
    got = x.clone()
    got[1, 3] = float("nan")
    msg = compare("y", got, x, x)
    assert "the worst, y[1, 3], is nan" in msg and "tl.load without other=" in msg


def test_a_wrong_shape_with_the_right_numel_is_compared_by_value():
    x = torch.randn(6, 10)
    assert compare("dx", x.reshape(60), x, x) is None               # the shape is 4.6's to judge
    assert "has shape (59,), expected (6, 10)" in compare("dx", x.reshape(60)[:59], x, x)


def test_the_reference_gradients_are_autograds_in_float64():
    """The closed-form dx and dg of reference() agree with autograd through RMSNorm in float64."""
    from rmsnorm_testkit.compare import reference
    torch.manual_seed(0)
    x, g, dy = torch.randn(2, 5, 33, dtype=torch.float64), torch.randn(33, dtype=torch.float64), \
        torch.randn(2, 5, 33, dtype=torch.float64)
    xa, ga = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    ya = xa * torch.rsqrt(xa.pow(2).mean(-1, keepdim=True) + 1e-2) * ga
    ya.backward(dy)
    y, r, dx, dg = reference(x, g, dy, eps=1e-2)
    torch.testing.assert_close(y, ya.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dx, xa.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dg, ga.grad, rtol=1e-12, atol=1e-12)
    assert r.shape == (10,) and reference(x, g)[2:] == (None, None)


@pytest.mark.parametrize("dtype, name", [(torch.float32, "fp32"), ("float16", "fp16"), (torch.bfloat16, "bf16"),
                                         ("bfloat16", "bf16"), (torch.float64, "float64")])
def test_a_dtype_has_one_short_name_whether_given_as_torch_s_or_by_its_name(dtype, name):
    assert dtype_name(dtype) == name


def test_the_dtype_tables_are_one_table_read_both_ways():
    assert {str(d).removeprefix("torch."): n for d, n in DTYPE_NAMES.items()} == DTYPE_SHORT
    assert {DTYPE_NAMES[d]: d for d in DTYPE_NAMES} == DTYPES


def test_strided_inputs_are_views_whose_rows_are_160_elements_apart_while_n_is_80():
    x, g, dy = strided_inputs(torch.bfloat16)
    assert x.shape == dy.shape == (24, 80) and x.stride() == dy.stride() == (160, 1)
    assert g.shape == (80,) and g.is_contiguous() and x.dtype == g.dtype == torch.bfloat16


def test_an_error_in_one_line_keeps_its_first_line_cut_to_the_limit():
    assert error_line(RuntimeError("CUDA error: not permitted\nCUDA kernel errors...")) == \
        "RuntimeError: CUDA error: not permitted"
    assert error_line(ValueError("x" * 5000)) == "ValueError: " + "x" * ERROR_LINE_CHARS
    assert error_line(KeyError()) == "KeyError: "
