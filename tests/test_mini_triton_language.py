"""The kernel language (mini_triton/frontend.py): a kernel runs only if Triton's compiler would take it,
and it reaches nothing but the language."""
import math

import pytest
import torch

import mini_triton as triton
from mini_triton import CompilationError
from mini_triton.language.extra.libdevice import rsqrt as libdevice_rsqrt

tl = triton.language

SCALE = tl.constexpr(2.0)
PLAIN_NUMBER = 2.0
HOST_STATE = {"n": 0}


def plain_python(x):
    return x * 2


@triton.jit
def jit_helper(x):
    return x * 2


def run(kernel, n=8, **kw):
    x, y = torch.arange(n, dtype=torch.float32), torch.zeros(n)
    kernel[(1,)](x, y, n, BLOCK=8, **kw)
    return y


@triton.jit
def uses_the_language(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    bits = x.dtype.primitive_bitwidth + tl.float32.primitive_bitwidth     # dtype attributes
    y = jit_helper(x.to(tl.float32)) * SCALE + libdevice_rsqrt(x + 1.0) * 0 + bits * 0
    y = max(y, 3.0) + min(1, 2) * 0 + triton.cdiv(n, 4) * 0 + math.pi * 0 + len(x.shape) * 0
    tl.store(y_ptr + offs, y if hasattr(x, "to") else y * 0, mask=offs < n)


def test_a_kernel_in_tritons_language_runs_with_helpers_constexpr_globals_libdevice_and_builtins():
    y = run(uses_the_language)
    assert torch.equal(y, torch.maximum(torch.arange(8.0) * 4, torch.tensor(3.0)))


@triton.jit
def calls_plain_python(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, plain_python(tl.load(x_ptr + offs)))


@triton.jit
def reads_a_plain_number(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * PLAIN_NUMBER)


@triton.jit
def reads_host_state(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    HOST_STATE["n"] += 1


@triton.jit
def uses_torch(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    torch.zeros(1)


@pytest.mark.parametrize("kernel,words", [
    (calls_plain_python, "plain_python is a Python function, which Triton cannot compile; decorate it with "
                         "@triton.jit"),
    (reads_a_plain_number, "write `PLAIN_NUMBER = tl.constexpr(2.0)`"),
    (reads_host_state, "only use globals that are constexpr, dtypes, the triton modules"),
    (uses_torch, "torch is the module torch, which runs on the host"),
])
def test_a_global_triton_would_not_bind_is_refused_with_tritons_rule(kernel, words):
    with pytest.raises(CompilationError, match="cannot access the global variable") as e:
        run(kernel)
    assert words in str(e.value), str(e.value)


@triton.jit
def breaks(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    for i in range(4):
        break


@triton.jit
def continues(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    for i in range(4):
        continue


@triton.jit
def has_a_lambda(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    f = lambda v: v  # noqa: E731, F841


@triton.jit
def uses_abs(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    abs(n)


@pytest.mark.parametrize("kernel,words,line", [
    (breaks, "`break` is not part of Triton's kernel language (Triton's compiler says: unsupported AST node "
             "type: Break); end the loop with its bound, or mask the iterations past the end", 3),
    (continues, "unsupported AST node type: Continue", 3),
    (has_a_lambda, "unsupported AST node type: Lambda", 2),
    (uses_abs, "`abs` is not available in a kernel: Triton's compiler knows only the builtins float, getattr", None),
])
def test_a_construct_tritons_compiler_has_no_visitor_for_is_refused_at_its_line(kernel, words, line):
    """``line``: where the construct is, counted from the decorator's line."""
    with pytest.raises(CompilationError) as e:
        run(kernel)
    assert words in str(e.value), str(e.value)
    if line is not None:
        assert f"{kernel.__name__} line {kernel.fn.__code__.co_firstlineno + line}" in str(e.value), str(e.value)


@triton.jit
def reads_the_buffer(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    x_ptr.buf.tensor.zero_()


@triton.jit
def reads_the_handle(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    x.handle.zero_()


@triton.jit
def reads_a_dunder(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    getattr(x_ptr, "__class__")


@triton.jit
def reaches_the_simulator(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    triton.set_race_mode("off")


@triton.jit
def hasattr_of_the_buffer(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.store(y_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32) + hasattr(x_ptr, "buf"))


@pytest.mark.parametrize("kernel,words", [
    (reads_the_buffer, "a kernel cannot read `.buf` of a block: Triton's tensors have no such attribute"),
    (reads_the_handle, "a kernel cannot read `.handle` of a block"),
    (reads_a_dunder, "a kernel cannot read `.__class__` of a block: Triton's compiler reaches no private"),
    (reaches_the_simulator, "inside a kernel, triton offers only cdiv, language, next_power_of_2"),
])
def test_a_kernel_reads_only_tritons_attributes_so_it_reaches_nothing_of_the_simulator(kernel, words):
    x = torch.arange(8, dtype=torch.float32)
    with pytest.raises(CompilationError) as e:
        kernel[(1,)](x, torch.zeros(8), 8, BLOCK=8)
    assert words in str(e.value), str(e.value)
    assert torch.equal(x, torch.arange(8, dtype=torch.float32))
    assert triton.get_race_mode() != "off"


def test_hasattr_in_a_kernel_says_false_for_what_a_kernel_may_not_read():
    assert torch.equal(run(hasattr_of_the_buffer), torch.zeros(8))


@triton.jit
def todo(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    raise NotImplementedError("TODO: Part (a): write the kernel")


def test_the_starters_todo_raise_still_says_what_to_write():
    with pytest.raises(NotImplementedError, match="TODO: Part"):
        run(todo)
