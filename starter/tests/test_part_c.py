"""Part (c): the wrappers rmsnorm_forward and rmsnorm_backward, and autograd through rmsnorm.

These tests call your functions as a user would, on 2-D, 3-D, strided and 16-bit inputs; long rows
come last. Each test that needs the backward first checks the forward's y on the same input, so that
a forward bug is reported as one, and a gradient that is right for the r your forward saved says so.
On the simulator, elements no kernel stored are named as such, and memory from torch.empty holds NaN
(old data on a GPU). `make test PART=c`.
"""
import pytest
import torch

from rmsnorm_testkit.compare import (DTYPE_NAMES, STRIDED_SHAPE, apply_view, assert_untouched, ctx_tensors,
                                     ctx_tensors_message, describe, kernel_stored,
                                     leave_garbage, partial_dtype_problem, random_inputs, reference, strided_inputs,
                                     transposed_inputs)
from rmsnorm_testkit.causes import backward_alternatives, backward_plain, dg_rows, forward_alternatives, pick
from rmsnorm_testkit.diagnose import (KernelLog, called_wrong, diagnose, diagnose_all, fail_if,
                                      handed_by_the_function, no_r_saved, read_instead, read_instead_fwd, saved_r,
                                      saved_r_finding, saved_too_few, simulated, swapped_argument)
from rmsnorm_testkit.text import autograd_hint
from rmsnorm_testkit import dataflow, readbacks

SHAPES = [(37, 100), (4, 40, 64), (2, 3, 513)]


def forward(impl, x, g, story=None, source=" from rmsnorm_forward"):
    """(y, r) of rmsnorm_forward, checked against the reference (r first, y next), with the cause named."""
    __tracebackhide__ = True
    story = story or describe(x)
    ref_y, ref_r, _, _ = reference(x, g)             # before the call: a kernel that writes into x cannot move it
    alts = forward_alternatives(x, g)
    before = x.detach().clone()
    with KernelLog(impl) as log:
        y, r = _called(lambda: impl.rmsnorm_forward(x, g), x, "rmsnorm_forward")
    if isinstance(r, torch.Tensor) and r.dtype != torch.float32:       # the dtype, before the values it rounded
        raise AssertionError(f"r{source} has dtype {r.dtype} for {story}: it must be torch.float32 (one reciprocal "
                             f"RMS per row, kept in fp32 for the backward): allocate it with dtype=torch.float32")
    nan, fmt = log.nan_source()
    read = log.traffic("fwd", {"x": x, "g": g, "y": y, "r": r}, x)            # what the kernels read, first
    instead = read_instead_fwd(read, x, g)                                    # the outputs from what they read
    fail_if(diagnose_all([(name, got, want, x, dict(alternatives=pick(alts, i) + [(k, v[i], says) for k, v, says
                                                                                  in instead],
                                                    stored=log.stored(got), story=story,
                                                    source=source, nan_cause=nan, fmt=fmt,
                                                    traffic=read[:2] if read else None))
                          for name, got, want, i in (("r", r, ref_r, 1), ("y", y, ref_y, 0))]))
    assert_untouched("x", x, before, "rmsnorm_forward", output="y")      # right outputs, stored into x's memory
    return y, r


def _called(call, x, what):
    """call(), with a hint when x of more than two dims is what stops it."""
    __tracebackhide__ = True
    try:
        return call()
    except Exception as e:
        if x.dim() > 2 and not isinstance(e, NotImplementedError):      # a TODO left is not a shape's fault
            raise AssertionError(f"{what} raised {type(e).__name__}: {e}, for {describe(x)}: x has {x.dim()} dims. "
                                 f"View it as (M, N) rows, x.reshape(-1, x.shape[-1]) (a view when it can be), and "
                                 f"give y x's shape back at the end") from e
        raise


def forward_first(impl, x, g, story=None):
    """y = rmsnorm(x, g), checked before any gradient is: a wrong y makes every gradient wrong too."""
    __tracebackhide__ = True
    story = story or describe(x)
    ref_y, alts = reference(x, g)[0], pick(forward_alternatives(x, g), 0)     # before a kernel could write into x
    before = x.detach().clone()
    with KernelLog(impl) as log:
        y = _called(lambda: impl.rmsnorm(x, g), x, "rmsnorm")
    nan, fmt = log.nan_source()
    read = log.traffic("fwd", {"x": x, "g": g, "y": y}, x)
    alts += [(k, v[0], says) for k, v, says in read_instead_fwd(read, x, g)]
    fail_if(diagnose("y", y, ref_y, x, alternatives=alts,
                     stored=log.stored(y), story=story, nan_cause=nan, fmt=fmt, traffic=read[:2] if read else None,
                     source=" from rmsnorm (your forward: fix it first, the gradients depend on it)"))
    assert_untouched("x", x.detach(), before, "rmsnorm (your TritonRMSNorm.forward)", output="y")
    return y


def _runs_directly(impl, dy, x, g) -> bool:
    """Does rmsnorm_backward, called directly on these tensors (and the reference r), run without raising? (Its
    values are the other tests' business.)"""
    try:
        impl.rmsnorm_backward(dy, x, g, reference(x.float(), g.float())[1].float())
        return True
    except Exception:                               # noqa: BLE001 -- the question is only whether it runs
        return False


def leaf_like(t):
    """A leaf copy of ``t`` that needs its gradient, with t's strides: clone() would make a view whose rows are
    apart, or whose columns are, contiguous, and the layout is what a strided case tests."""
    leaf = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    # the memory between the rows too, so that a kernel stepping wrong reads what it would have read in t
    leaf.as_strided((span,), (1,)).copy_(t.detach().as_strided((span,), (1,)))
    return leaf.requires_grad_(True)


class Step:
    """rmsnorm(x, g).backward(dy), each stage checked: y first, then what the forward saved, then dy untouched.
    ``grads(names)`` then diagnoses dx (x.grad) and dg (g.grad), naming a wrong r as the cause of gradients
    that are right for it."""

    def __init__(self, impl, x, g, dy, story=None, garbage=0):
        __tracebackhide__ = True
        self.x, self.g, self.dy, self.story = x, g, dy, story or describe(x)
        xg, gg = leaf_like(x), g.detach().clone().requires_grad_(True)
        y = forward_first(impl, xg, gg, self.story)
        rows = x.numel() // max(1, x.shape[-1])
        self.r_saved, kinds = saved_r(y, rows)
        r_storage = self.r_saved.untyped_storage().data_ptr() if self.r_saved is not None else None
        if self.r_saved is not None:
            self.r_saved = self.r_saved.detach().clone()
        if garbage and not simulated(impl):
            leave_garbage([k * x.shape[-1] for k in range(1, garbage + 1)], x.device)
        before = dy.clone()
        with KernelLog(impl) as self.log:
            try:
                y.backward(dy)
            except Exception as e:
                if kinds is not None and self.r_saved is None:
                    raise AssertionError(no_r_saved(kinds, rows, self.story) + f". Your backward then raised "
                                                                              f"{type(e).__name__}: {e}") from e
                too_few = saved_too_few(kinds, str(e), self.story)
                if too_few:
                    raise AssertionError(too_few) from e
                hint = autograd_hint(str(e))
                if hint:
                    raise AssertionError(f"y.backward(dy) failed for {self.story}: {e}{hint}") from e
                if _runs_directly(impl, dy, x, g):
                    raise AssertionError(called_wrong(kinds, f"{type(e).__name__}: {e}", self.story)) from e
                raise
        self.dx, self.dg, self.kinds, self.rows, self.impl = xg.grad, gg.grad, kinds, rows, impl
        tensors = {"x": xg, "dy": dy, "g": gg, "dx": self.dx, "y": y}
        self.read = self.log.traffic("bwd", tensors, x)
        swap = swapped_argument(self.log.args(tensors, x) or []) if self.read else None
        if self.read and self.read[0] == "wrong_tensor_bwd" and swap and swap[3] == "y":
            # y reaches rmsnorm_backward only through the Function (what it saved, or how it unpacked it)
            self.read = handed_by_the_function(swap, self.read[2])
        if self.read and self.read[0] == "wrong_tensor_bwd" and not torch.equal(dy, before):
            # a launch that passes dx and dy the other way round writes into dy: the launch is the cause
            raise AssertionError(f"your backward (y.backward(dy) through rmsnorm) wrote into dy for {self.story}: "
                                 f"{self.read[1]}. Pass the tensors in the order of the kernel's parameters")
        assert_untouched("dy", dy, before, "your backward (y.backward(dy) through rmsnorm)")
        known = {t.untyped_storage().data_ptr() for t in (xg, gg, dy, self.dx, self.dg) if t is not None} | {r_storage}
        self.scratch = [(L.kernel, name, a.dtype, a.stored, a.loaded, a.numel, a.storage) for L in self.log.rec.launches
                        for name, a in L.args.items() if a.storage not in known] if self.log.rec else []

    def _backward_returns_no_dg(self, r) -> bool:
        """Does rmsnorm_backward itself, called directly, return None for dg?"""
        try:
            out = self.impl.rmsnorm_backward(self.dy, self.x, self.g, r.float())
        except Exception:                           # noqa: BLE001 -- the question is only what it returns
            return False
        return isinstance(out, (tuple, list)) and len(out) == 2 and out[1] is None

    def grads(self, names=("dx", "dg")):
        __tracebackhide__ = True
        x, g, dy = self.x, self.g, self.dy
        _, r, ref_dx, ref_dg = reference(x, g, dy)
        alts = backward_alternatives(x, g, dy, r)
        extra = self._wrong_r(r) + read_instead(self.read, x, g, dy, r)
        nan, loads = self.log.nan_source()
        fmt = {"old_memory": self.log.adds_into_scratch([self.dx, self.dg]), "stride": x.stride(0) if x.dim() > 1
               else x.shape[-1], "dy_stride": dy.stride(0) if dy.dim() > 1 else dy.shape[-1],
               "dy_col_stride": dy.stride(-1) if dy.dim() else 1, **loads}
        if self.dg is None and "dg" in names:
            if self._backward_returns_no_dg(r):
                raise AssertionError(f"g.grad is None after y.backward(dy) for {self.story}, since rmsnorm_backward "
                                     f"returns None for dg: it must return (dx, dg), dg the sum over rows of dy·x·r")
            raise AssertionError(f"g.grad is None after y.backward(dy) for {self.story}: TritonRMSNorm.backward must "
                                 f"return dg for g as its second value")
        for name, got, want, i in (("dx", self.dx, ref_dx, 0), ("dg", self.dg, ref_dg, 1)):
            if name not in names:
                continue
            choices = pick(alts, i) + [(k, v[i], says) for k, v, says in extra] + \
                ([dg_rows(x, dy, r)] if name == "dg" else [])
            found = diagnose(name, got, want, x, alternatives=choices, stored=_stored(self.log, name, got),
                             story=self.story, fmt=fmt, nan_cause=nan,
                             source=f" ({'x' if name == 'dx' else 'g'}.grad after rmsnorm(x, g).backward(dy))",
                             traffic=self.read[:2] if self.read else None)
            if found is not None and self.kinds is not None and self.r_saved is None and found.cause is None:
                raise AssertionError(no_r_saved(self.kinds, self.rows, self.story) + f". Your {name}: {found.message}")
            fail_if(found)

    def _wrong_r(self, r):
        """[(key, (dx, dg), words)]: the gradients right for the r the forward saved, when that r is wrong."""
        wrong = None if self.r_saved is None else saved_r_finding(self.r_saved, r, self.x, self.g, story=self.story)
        if wrong is None:
            return []
        grads = backward_plain(self.x, self.g, self.dy, self.r_saved)
        return [("r_from_forward", grads, f"it is right for the r your forward saved, and that r is wrong "
                                          f"({wrong.message})")]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_forward(impl, shape):
    """x of any number of leading dims: the wrapper views it as (M, N) rows."""
    x, g, _ = random_inputs(shape, device=impl.DEVICE)
    y, r = forward(impl, x, g)
    if tuple(y.shape) != tuple(shape):
        raise AssertionError(f"y from rmsnorm_forward has shape {tuple(y.shape)} for {describe(x)}: it must have x's "
                             f"shape (y.view(x.shape) at the end)")
    if r.dtype != torch.float32:
        raise AssertionError(f"r from rmsnorm_forward has dtype {r.dtype}: it must be float32, one value per row")
    rows = x.numel() // shape[-1]
    if tuple(r.shape) != (rows,):
        raise AssertionError(f"r from rmsnorm_forward has shape {tuple(r.shape)} for {describe(x)}: it must be "
                             f"({rows},), one value per row (the backward indexes it as r_ptr + row)")


def test_the_eps_the_caller_passes(impl):
    """eps = 0.1 reaches the kernel through rmsnorm_forward, and through rmsnorm and its autograd Function."""
    x, g, dy = random_inputs((6, 64), device=impl.DEVICE)
    story = f"{describe(x)} (eps = 0.1)"
    ref_y, ref_r, _, _ = reference(x, g, eps=0.1)
    alts = forward_alternatives(x, g, 0.1)
    before = x.detach().clone()
    with KernelLog(impl) as log:
        y, r = _called(lambda: impl.rmsnorm_forward(x, g, eps=0.1), x, "rmsnorm_forward")
    fail_if(diagnose_all([(name, got, want, x, dict(alternatives=pick(alts, i), stored=log.stored(got), story=story,
                                                    source=" from rmsnorm_forward(x, g, eps=0.1)", fmt={"eps": 0.1}))
                          for name, got, want, i in (("r", r, ref_r, 1), ("y", y, ref_y, 0))]))
    assert_untouched("x", x, before, "rmsnorm_forward", output="y")
    y = impl.rmsnorm(x, g, 0.1)
    fail_if(diagnose("y", y, ref_y, x, alternatives=pick(alts, 0), story=story, fmt={"eps": 0.1},
                     source=" from rmsnorm(x, g, 0.1) (your TritonRMSNorm.forward)"))


def test_forward_strided_rows(impl):
    """x as a view whose rows are 160 elements apart: pass its row stride (it needs no copy)."""
    x, g, _ = strided_inputs(device=impl.DEVICE)
    forward(impl, x, g, story=f"{describe(x)} whose rows are 160 elements apart (row stride 160, N 80)")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_backward_dx(impl, shape):
    x, g, dy = random_inputs(shape, device=impl.DEVICE)
    Step(impl, x, g, dy).grads(("dx",))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_backward_dg(impl, shape):
    x, g, dy = random_inputs(shape, device=impl.DEVICE)
    Step(impl, x, g, dy).grads(("dg",))


def test_backward_wrapper_given_r(impl):
    """rmsnorm_backward called directly, with r from the float64 reference (as the grader's items 2 and 3)."""
    x, g, dy = random_inputs((37, 100), device=impl.DEVICE)
    r = reference(x, g)[1].float().to(x.device)
    before = {"dy": dy.clone(), "x": x.clone(), "g": g.clone(), "r": r.clone()}
    with KernelLog(impl) as log:
        dx, dg = impl.rmsnorm_backward(dy, x, g, r)
    for name, t in (("dy", dy), ("x", x), ("g", g), ("r", r)):
        assert_untouched(name, t, before[name], "rmsnorm_backward(dy, x, g, r)")
    check_given_r(log, x, g, dy, r, dx, dg)


def _stored(log, name, t):
    """Where the kernels stored ``t``: dx's mask; dg's only where a kernel stored some of it (a dg summed on the
    host, or autograd's conversion of it to g's dtype, is no kernel's store at all, and no column "never written")."""
    mask = log.stored(t)
    return mask if name == "dx" or (mask is not None and bool(mask.any())) else None


def check_given_r(log, x, g, dy, r, dx, dg, source=" from rmsnorm_backward(dy, x, g, r)"):
    """dx and dg of rmsnorm_backward(dy, x, g, r) against the reference, a tensor the kernels read for another
    named first (``log``: the KernelLog of the call)."""
    __tracebackhide__ = True
    _, _, ref_dx, ref_dg = reference(x, g, dy)
    alts = backward_alternatives(x, g, dy, r)
    read = log.traffic("bwd", {"x": x, "dy": dy, "g": g, "dx": dx}, x)
    instead, traffic = read_instead(read, x, g, dy, r), read[:2] if read else None
    fail_if(diagnose("dx", dx, ref_dx, x, alternatives=pick(alts, 0) + [(k, v[0], w) for k, v, w in instead],
                     stored=log.stored(dx), source=source, traffic=traffic))
    fail_if(diagnose("dg", dg, ref_dg, x, alternatives=pick(alts, 1) + [dg_rows(x, dy, r)] +
                     [(k, v[1], w) for k, v, w in instead], stored=_stored(log, "dg", dg), source=source,
                     fmt={"old_memory": log.adds_into_scratch([dx, dg])}, traffic=traffic))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_backward_wrapper_keeps_the_input_dtypes(impl, dtype):
    """rmsnorm_backward called on its own: dx in x's dtype, dg in g's (autograd would cast g.grad back
    silently, a direct caller would not)."""
    x, g, dy = random_inputs((33, 200), dtype, device=impl.DEVICE)
    r = reference(x, g)[1].float().to(x.device)
    dx, dg = impl.rmsnorm_backward(dy, x, g, r)
    for name, got, want in (("dx", dx, x.dtype), ("dg", dg, g.dtype)):
        if got.dtype != want:
            raise AssertionError(f"{name} from rmsnorm_backward has dtype {got.dtype} for {describe(x)}: it must be "
                                 f"{want} ({'x' if name == 'dx' else 'g'}'s dtype; keep fp32 for the sums "
                                 f"inside, and convert the result)")


def test_autograd_keeps_tensors_through_save_for_backward(impl):
    """TritonRMSNorm.forward hands the backward its tensors through ctx.save_for_backward, not as ctx attributes."""
    x, g, _ = random_inputs((6, 64), device=impl.DEVICE)
    y = impl.rmsnorm(x.clone().requires_grad_(True), g.clone().requires_grad_(True))
    kept = ctx_tensors(y)
    if kept:
        raise AssertionError(ctx_tensors_message(kept, describe(x)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_precision(impl, dtype):
    """fp16/bf16 in and out, fp32 math inside (the tolerances are per dtype)."""
    x, g, dy = random_inputs((33, 200), dtype, device=impl.DEVICE)
    y, r = forward(impl, x, g)
    if y.dtype != dtype:
        raise AssertionError(f"y from rmsnorm_forward has dtype {y.dtype} for {describe(x)}: it must keep x's dtype "
                             f"(allocate it with dtype=x.dtype)")
    if r.dtype != torch.float32:
        raise AssertionError(f"r from rmsnorm_forward has dtype {r.dtype} for {describe(x)}: it must be "
                             f"torch.float32 (one reciprocal RMS per row, kept in fp32 for the backward)")
    step = Step(impl, x, g, dy)
    problem = partial_dtype_problem(step.scratch, describe(x))
    if problem:
        raise AssertionError(problem)
    step.grads()


def test_transposed_x_and_dy(impl):
    """x and dy dense but transposed (x.stride() = (1, 24)): y and dx must still come back right, whatever
    layout torch.empty_like(x) would give them."""
    x, g, dy = transposed_inputs(device=impl.DEVICE)
    Step(impl, x, g, dy, story=f"{describe(x)} and dy, transposes of (80, 24) tensors (x.stride() = (1, 24))"
         ).grads()


def test_strided_rows_and_untouched_dy(impl):
    """x and dy as views whose rows are 160 elements apart (the kernels take row strides)."""
    x, g, dy = strided_inputs(device=impl.DEVICE)
    Step(impl, x, g, dy, story=f"{describe(x)} and dy whose rows are 160 elements apart (row stride 160, N 80)"
         ).grads(("dx",))


def test_every_other_column(impl):
    """x and dy as views of every other column (x.stride() = (160, 2)): their columns are not adjacent, so a kernel
    that steps by 1 from column to column reads the wrong elements. Pass the column stride, or copy x and dy to
    contiguous rows on the host (moving data is allowed)."""
    base_x, g, base_dy = random_inputs(STRIDED_SHAPE, device=impl.DEVICE)
    x, dy = apply_view(base_x, (0, None, 2)), apply_view(base_dy, (0, None, 2))
    Step(impl, x, g[:x.shape[-1]].contiguous(), dy,
         story=f"{describe(x)} and dy, every other column of (24, 160) tensors (x.stride() = (160, 2))").grads()


@pytest.mark.parametrize("asked", [("x",), ("g",), ()], ids=["only_x", "only_g", "neither"])
def test_only_the_inputs_that_require_grad(impl, asked):
    """rmsnorm(x, g) where only x, only g, or neither requires grad (a frozen scale g, a frozen input, inference):
    y is right, and y.backward(dy) gives each input that requires grad its gradient. A backward may skip a gradient
    no input asks for: ctx.needs_input_grad has one flag per input of forward(ctx, x, g, eps), in that order."""
    x, g, dy = random_inputs((6, 64), device=impl.DEVICE)
    story = f"{describe(x)}, where " + (f"only {asked[0]} requires grad" if asked else "neither x nor g requires grad")
    xg, gg = x.clone().requires_grad_("x" in asked), g.clone().requires_grad_("g" in asked)
    y = forward_first(impl, xg, gg, story)
    if not asked:
        return                                     # nothing to differentiate: y.backward would have no graph
    y.backward(dy)
    i, leaf = (0, xg) if asked == ("x",) else (1, gg)
    name = ("dx", "dg")[i]
    if leaf.grad is None:
        raise AssertionError(f"{asked[0]}.grad is None after y.backward(dy) for {story}: your TritonRMSNorm.backward "
                             f"returned None for {asked[0]} while ctx.needs_input_grad[{i}] is True. "
                             f"ctx.needs_input_grad has one flag per input of forward(ctx, x, g, eps), in that order: "
                             f"[0] is x's, [1] is g's, [2] is eps's. Return {name} where [{i}] is True (or return dx "
                             f"and dg always: autograd drops the gradient of an input that does not require grad)")
    _, r, ref_dx, ref_dg = reference(x, g, dy)
    fail_if(diagnose(name, leaf.grad, (ref_dx, ref_dg)[i], x, alternatives=pick(backward_alternatives(x, g, dy, r), i),
                     story=story, source=f" ({asked[0]}.grad after rmsnorm(x, g).backward(dy))"))


def test_forward_reads_x_once_and_writes_y_once(sim_impl):
    """On the simulator: rmsnorm_forward's kernels load each element of x once and store y once."""
    import mini_triton as triton
    M, N = 64, 256
    x, g, _ = random_inputs((M, N))
    with triton.record() as rec:
        sim_impl.rmsnorm_forward(x, g)
    assert rec.launches, "rmsnorm_forward launched no kernel"
    loaded_x = sum(a.loaded for L in rec.launches for a in L.args.values() if a.data_ptr == x.data_ptr())
    stored = rec.totals()["stored"]
    per_elem = loaded_x / (M * N)
    if per_elem != 1.0:
        raise AssertionError(f"your forward loaded x {per_elem:.1f} times per element; a fused kernel reads it once")
    if stored > M * N + M:
        raise AssertionError(f"your forward stored {stored:,} elements; y and r need only {M * N + M:,} (M·N + M)")
    loaded_g = sum(a.loaded for L in rec.launches for a in L.args.values() if a.data_ptr == g.data_ptr())
    programs = sum(L.programs for L in rec.launches)
    if loaded_g > max(programs, M) * N:
        raise AssertionError(f"your forward loaded g {loaded_g} times ({max(programs, M) * N} allowed: once per "
                             f"program or once per row, {programs} programs and {M} rows of N = {N}): load g once, "
                             f"before it is used, and keep it in registers for all of the program's rows")


def test_backward_reads_x_and_dy_once_and_writes_dx_once(sim_impl):
    """On the simulator: the backward's kernels load x and dy once each and store dx once. (A backward that runs
    the forward's kernels again to recompute r, in place of the r its forward saved, is not counted: that costs a
    read of x on a GPU, but the grader does not charge it.)"""
    import mini_triton as triton
    M, N = 64, 256
    x, g, dy = random_inputs((M, N))
    xg = x.clone().requires_grad_(True)
    with triton.record() as fwd:
        y = sim_impl.rmsnorm(xg, g)
    with triton.record() as rec:
        y.backward(dy)
    assert rec.launches, "your backward launched no kernel"
    forward = {L.kernel for L in fwd.launches}
    backward = [L for L in rec.launches if L.kernel not in forward]

    def moved(t, kind):
        return sum(getattr(a, kind) for L in backward for a in L.args.values()
                   if a.storage == t.untyped_storage().data_ptr())
    for name, t, kind in (("x", xg, "loaded"), ("dy", dy, "loaded"), ("dx", xg.grad, "stored")):
        per_elem = moved(t, kind) / (M * N)
        if per_elem != 1.0:
            raise AssertionError(f"your backward {kind} {name} {per_elem:.1f} times per element; a fused "
                                 f"backward reads x and dy once and writes dx once")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_work_happens_in_kernels(sim_impl, impl_path, dtype):
    """On the simulator: your kernels store y and dx, and no value a host-side torch op of your file computed from
    x, dy, y or dx is loaded by your kernels or returned (item 7; items 1-4 also give points only for outputs your
    kernels stored)."""
    import mini_triton as triton
    M, N = 64, 256
    x, g, dy = random_inputs((M, N), dtype)
    name = DTYPE_NAMES[dtype]
    readbacks.watch(impl_path)            # x.numpy() and x.cpu(): values that leave torch for the host
    with readbacks.logged() as seen, triton.record(host_ops=True) as rec:
        y, r = sim_impl.rmsnorm_forward(x, g)
    _check_kernels_did_the_work(rec, seen, {"x": x, "g": g}, {"y": y, "r": r}, M, N, f"forward ({name} x)", "y")
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    with readbacks.logged() as seen, triton.record(host_ops=True) as rec:
        y = sim_impl.rmsnorm(xg, gg)
    _check_kernels_did_the_work(rec, seen, {"x": xg, "g": gg}, {"y": y}, M, N, f"forward through rmsnorm ({name} x)")
    with readbacks.logged() as seen, triton.record(host_ops=True) as rec:
        y.backward(dy)
    cast = str(y.dtype).removeprefix("torch.") if y.dtype != x.dtype else None      # autograd's cast of dy
    _check_kernels_did_the_work(rec, seen, {"x": xg, "g": gg, "dy": dy}, {"dx": xg.grad, "dg": gg.grad}, M, N,
                                f"backward ({name} x)", "dx", cast)


def _check_kernels_did_the_work(rec, seen, inputs, outputs, M, N, where, out=None, dy_cast=None):
    """``inputs`` and ``outputs``: the step's tensors by name; ``out``: the output the kernels must have stored;
    ``seen``: the values the file read back to the host (rmsnorm_testkit/readbacks.py)."""
    __tracebackhide__ = True
    if not rec.launches:
        raise AssertionError(f"your {where} launched no kernel")
    used, foreign = dataflow.of_recording(rec, inputs, outputs, M, N, dy_cast)
    problem = dataflow.problem(used, M, N, where)
    if problem:
        raise AssertionError(problem)
    if foreign and seen:
        line = f" at {seen[0]['where']}" if seen[0].get("where") else ""
        raise AssertionError(f"your {where} read values back to the host (`{seen[0]['op']}`{line}) and a kernel "
                             f"loaded memory no torch op made: values computed outside torch (numpy's, say). The "
                             f"grader runs your launches again on new inputs, where those values are stale, and "
                             f"counts the outputs they made as wrong: compute in the kernels")
    stored = kernel_stored(rec, outputs[out]) if out else M * N
    if stored < M * N:
        raise AssertionError(f"{out} returned by your {where} was not written by kernel stores "
                             f"({stored} of {M * N} elements were)")


def test_backward_gives_the_same_dg_in_every_run(sim_impl):
    """On the simulator: no launch of the backward depends on the order its programs run in (a float
    tl.atomic_add, or a sum under a lock), so dg is the same bits in every run (grader: part 4.7, and
    the extra credit of item 9)."""
    import mini_triton as triton
    x, g, dy = random_inputs((64, 256))
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    y = sim_impl.rmsnorm(xg, gg)
    with triton.record() as rec:
        y.backward(dy)
    why = [L.order_dependent for L in rec.launches if L.order_dependent]
    if why:
        raise AssertionError(
            f"{why[0]} in your backward: programs then add in whatever order they run, which a GPU does not "
            f"fix, so dg changes in its last bits from run to run (the grader checks that two runs agree, part "
            f"4.7, and item 9's extra credit needs a deterministic dg). Give each program its own row of "
            f"dg_partial (torch.empty is enough when each row is stored once; a kernel that adds into its row "
            f"needs it zeroed, torch.zeros) and sum the rows in a fixed order "
            f"after the kernel")


def test_forward_rows_of_16384(impl):
    """N = 16384, MAX_FUSED_N: the longest row held in registers whole, a block of 16384 lanes."""
    x, g, _ = random_inputs((3, 16384), device=impl.DEVICE)
    forward(impl, x, g)


def test_forward_long_rows(impl):
    """N = 32768 fp32: more than MAX_FUSED_N (a row of 32768 fp32 values is 128 KB, more than a program's
    registers hold), so the wrapper launches BLOCK_N = CHUNK_N with SINGLE_PASS=False and the kernel loops over
    the row in chunks (test_part_a's test_long_rows_in_chunks checks that loop)."""
    x, g, _ = random_inputs((2, 32768), device=impl.DEVICE)
    forward(impl, x, g)


def test_backward_long_rows(impl):
    """N = 32768 fp32 through autograd: the chunked path of both kernels, and the wrapper's buffers. Memory a
    wrapper allocates with torch.empty holds old data (NaN here): a kernel that adds into its row of the
    partial dg buffer needs that buffer zeroed first."""
    M, N = 8, 32768
    x, g, dy = random_inputs((M, N), device=impl.DEVICE)
    Step(impl, x, g, dy, garbage=2 * M).grads()
