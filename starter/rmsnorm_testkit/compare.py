"""Shared by the public tests and the autograder: load an implementation, compute the
float64 reference, and compare with messages that say where an error is and how large.
"""
import contextlib
import functools
import gc
import importlib.util
import os
import sys
import types
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from .text import DTYPE_SHORT

# Tolerances per dtype (atol, rtol) against a float64 reference; fp32 math inside.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 1e-2),
    torch.bfloat16: (1.6e-2, 2e-2),
}
DTYPE_NAMES = {getattr(torch, name): short for name, short in DTYPE_SHORT.items()}     # torch.float32 -> "fp32"
DTYPES = {short: dtype for dtype, short in DTYPE_NAMES.items()}                         # "fp32" -> torch.float32


@contextmanager
def _env(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: v for k, v in values.items() if v is not None})
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def load_impl(path, backend=None, name="student_rmsnorm"):
    """Import rmsnorm.py from ``path`` as a fresh module.

    backend: "mini_triton", "interpreter" (Triton's, on the CPU), or None: the environment's choice, as the
    file's own backend block makes it (MINI_TRITON=1 the simulator, TRITON_INTERPRET=1 Triton's interpreter,
    else a GPU if there is one, else the simulator).
    """
    backend = backend or _chosen_backend()
    if backend == "interpreter" and not _installed("triton"):
        raise ImportError("TRITON_INTERPRET=1 asks for Triton's own interpreter, and Triton is not installed here: "
                          "`make setup TRITON=1` installs it (Linux x86-64 only); without TRITON_INTERPRET the "
                          "simulator runs your kernels")
    path = Path(path).resolve()
    root = path.parent
    here = Path(__file__).resolve().parent             # tests/: the simulator sits next to it or above
    for p in (str(root), str(root.parent), str(here.parent), str(here.parent.parent)):
        if (Path(p) / "mini_triton").is_dir() and p not in sys.path:
            sys.path.insert(0, p)
            break
    env = {"mini_triton": {"MINI_TRITON": "1"}, "interpreter": {"MINI_TRITON": None, "TRITON_INTERPRET": "1"},
           None: {}}[backend]
    simulated = backend == "mini_triton"
    with _env(**env), _triton_paths(simulated):
        spec = importlib.util.spec_from_file_location(f"{name}_{backend or 'auto'}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod                   # importable by name, as torch.compile needs
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[spec.name]
            raise
    if not hasattr(mod, "DEVICE"):                      # the starter defines it; a file written from scratch may not
        real = getattr(getattr(mod, "triton", None), "__name__", "") == "triton"
        mod.DEVICE = torch.device("cuda" if real and torch.cuda.is_available() else "cpu")
    return mod


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _chosen_backend() -> str | None:
    """The backend the environment chooses for a file loaded without one: None is a GPU, with Triton."""
    if os.environ.get("MINI_TRITON") == "1":
        return "mini_triton"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "interpreter"
    return None if torch.cuda.is_available() else "mini_triton"


def _triton_paths(simulated: bool):
    """On the simulator, Triton's import paths (``import triton``, ``from triton.language.extra.libdevice
    import rsqrt``) give the simulator's modules while the file loads (mini_triton/imports.py)."""
    if not simulated:
        return nullcontext()
    from mini_triton.imports import as_triton
    return as_triton()


def reference(x, g, dy=None, eps=1e-5):
    """RMSNorm and its gradients in float64, the ground truth every check uses: (y, r, dx, dg).

    r = 1/sqrt(mean(x²) + eps) per row (one value per row, flattened to M values), x̂ = x·r,
    y = x̂·g; with dy, dx = r·(dy·g − x̂·mean(dy·g·x̂)) and dg = the sum over rows of dy·x̂
    (the formulas of the handout's part (b)). Without dy, dx and dg are None.
    """
    x64, g64 = x.detach().double(), g.detach().double()
    r = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    xhat = x64 * r
    y = xhat * g64
    if dy is None:
        return y, r.reshape(-1), None, None
    dy64 = dy.detach().double()
    wdy = dy64 * g64
    dx = r * (wdy - xhat * (wdy * xhat).mean(-1, keepdim=True))
    dg = (dy64 * xhat).reshape(-1, x.shape[-1]).sum(0)
    return y, r.reshape(-1), dx, dg


def eager(x, g, eps=1e-5):
    """RMSNorm as a PyTorch user writes it (eager mode): the speed baseline."""
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * g


# What a time-out means, in the public tests and in the grader alike.
SLOW_HINT = ("an infinite loop (a while loop whose variable never changes, a loop bound that never moves), or "
             "far more work than needed (the simulator runs a kernel one block operation at a time, so "
             "element-by-element loops are very slow)")


# On a GPU with Triton, where the simulator is not involved: compiling counts too.
GPU_SLOW_HINT = ("an infinite loop (a while loop whose variable never changes, a loop bound that never moves), "
                 "far more work than needed, or compiling a great many kernels (Triton compiles each new "
                 "configuration of an autotuned kernel, and each new value of a tl.constexpr, a second or more "
                 "each)")

COMPILING_HINT = ("Triton was still compiling when the time ran out, so the time went to compiling, not to your "
                  "kernel running: an autotuned kernel compiles once per config for each new key (N, say), and a "
                  "block of many rows times a large N (16 x 32768 elements, say) needs far more registers than a "
                  "program has and can compile for minutes. Drop the configs that make such blocks at large N "
                  "(triton.autotune's prune_configs_by), or give each program one row there")


# When the grader saw the kernel's loop: its condition never changed, or it was still getting somewhere.
NO_PROGRESS_HINT = ("an infinite loop: make the loop's variable move toward its bound on every pass "
                    "(start += BLOCK_N, say)")
PROGRESS_HINT = ("far more work than needed, or a loop that ends only after very many passes (the simulator runs "
                 "a kernel one block operation at a time, so element-by-element loops are very slow): "
                 "work on whole blocks")


def timed_out(seconds, where="", on_gpu=False, cpu=False, hint=None) -> str:
    """The time-out message: ``where`` says what was running (" in rmsnorm_bwd_kernel, line 12: ..."); ``cpu``:
    the seconds are CPU time (the grader's budget), not the wall clock's; on a GPU (real Triton) the hint
    leaves the simulator out and names compiling; ``hint``: what the grader saw instead (NO_PROGRESS_HINT...)."""
    return (f"timed out after {seconds:.0f} s{' of CPU time' if cpu else ''}{where}: "
            f"{hint or (GPU_SLOW_HINT if on_gpu else SLOW_HINT)}")


def describe(x) -> str:
    return f"x of shape {tuple(x.shape)} {DTYPE_NAMES.get(x.dtype, str(x.dtype))}"


# dg sums M rows, so its rounding error grows with M: the one rule for its atol (handout section 8).
DG_FP32_ATOL_PER_SQRT_ROW = 5e-6       # fp32: atol = 5e-6·√M
DG_16BIT_EPS_MULTIPLE = 2              # fp16/bf16: atol = 2·eps(dtype)·max|dg| (dg is stored in 16 bits)


WIDENED = [1.0]        # the tolerance of dx and dg where N = 1 times this (``widened``)


@contextlib.contextmanager
def widened(scale: float):
    """The tolerance of dx and dg for rows of one element ``scale`` times wider inside the block: the grader judges
    its own replay of a submission's work on fresh inputs so. There fp32's cancellation holds an honest kernel to
    about the tolerance, which must not fail on the next draw; every other output is held to the same tolerance
    on both draws, so an error the host corrected on the first inputs only (stale on the new ones) shows."""
    WIDENED.append(WIDENED[-1] * scale)
    try:
        yield
    finally:
        WIDENED.pop()


def tolerance(name, dtype, expected, n_rows):
    """(atol, rtol, how atol was set) for output ``name``: the one tolerance rule, used everywhere.

    y and dx: the per-dtype TOLERANCES. r: fp32's, whatever x's dtype, since r is an fp32 output
    (a sum of squares kept in 16 bits shows there). dg: at least the per-dtype tolerance, and an
    atol that grows with the number of rows summed (fp32: 5e-6·√M) or with dg's size (16-bit:
    2·eps·max|dg|, two units in the last place of the largest element, since dg itself is stored
    in 16 bits).
    """
    atol, rtol = TOLERANCES[torch.float32 if name == "r" else dtype]
    wider = WIDENED[-1] if name in ("dx", "dg") and (expected.shape[-1] if expected.dim() else 1) == 1 else 1.0
    atol, rtol = atol * wider, rtol * wider
    if name != "dg":
        return atol, rtol, f"atol {atol:g}"
    if dtype == torch.float32:
        grown, rule = DG_FP32_ATOL_PER_SQRT_ROW * n_rows ** 0.5, f"5e-6·√M, M = {n_rows}"
    else:
        grown = DG_16BIT_EPS_MULTIPLE * torch.finfo(dtype).eps * float(expected.detach().abs().max())
        rule = f"2·eps({DTYPE_NAMES[dtype]})·max|dg|"
    grown *= wider
    return (grown, rtol, f"atol {grown:.3g} = {rule}") if grown > atol else (atol, rtol, f"atol {atol:g}")


def compare(name, got, expected, x, dtype=None, tol=None, story=None, source="", n_rows=None, hints=True):
    """None if ``got`` matches ``expected`` under the tolerance rule, else a message for the student.

    The message names the output (and ``source``, the function that made it), the input
    (``story``: how it was made, when there is more to say than ``describe(x)``), how many
    elements are off, and the worst of them: the one furthest outside its tolerance, with
    the tolerance there. ``tol`` = (atol, rtol) overrides the rule; ``n_rows`` the rows dg sums.
    ``hints=False`` leaves out the hints about NaN and 16-bit sums (diagnose.py gives its own).
    """
    dtype = dtype or x.dtype
    what = f"{name}{source}"
    story = story or describe(x)
    if not isinstance(got, torch.Tensor):
        return f"{what} should be a torch.Tensor, got {type(got).__name__}"
    if tuple(got.shape) != tuple(expected.shape):
        if got.numel() != expected.numel():
            return f"{what} has shape {tuple(got.shape)}, expected {tuple(expected.shape)} for {story}"
        got = got.reshape(expected.shape)               # the shape is item 4.6's to judge; compare values
    rows = n_rows if n_rows is not None else max(1, x.numel() // max(1, x.shape[-1]))
    atol, rtol, how = (*tol, f"atol {tol[0]:g}") if tol else tolerance(name, dtype, expected, rows)
    g64 = got.detach().double().to(expected.device)     # compared where the reference is (a GPU's is fast)
    e64 = expected.detach().double()
    bound = atol + rtol * e64.abs()
    err = (g64 - e64).abs()
    err = torch.where(torch.isnan(err) | torch.isinf(err), torch.full_like(err, float("inf")), err)
    bad = err > bound
    if not bool(bad.any()):
        return None
    worst = tuple(int(i) for i in torch.nonzero(err / bound == (err / bound).max())[0])
    at = ", ".join(str(i) for i in worst)
    error = float(err[worst])
    error = f"{error:.3g}" if error != float("inf") else "not a number" if torch.isnan(g64[worst]) else "infinite"
    msg = (f"{what} differs for {story}: {int(bad.sum())} of {bad.numel()} elements are off; the worst, "
           f"{name}[{at}], is {float(g64[worst]):.6g} where {float(e64[worst]):.6g} was expected (error "
           f"{error}, tolerance there {float(bound[worst]):.3g}: {how} + rtol {rtol:g}·|expected|)")
    if not hints:
        return msg
    if bool((torch.isnan(g64) & ~torch.isnan(e64)).any()):
        msg += (". NaN where the reference has none: lanes masked off in a tl.load without other= are undefined "
                "in Triton, and NaN in the simulator; give those loads other=0.0, or keep the lanes out of your sums")
    elif name == "r" and dtype != torch.float32 and float((err / e64.abs().clamp_min(1e-30)).max()) < 0.01:
        msg += (f". r is off by less than 1%: it is fp32 and held to fp32's tolerance, while a sum of "
                f"squares kept in {DTYPE_NAMES[dtype]} rounds at every step: convert x to fp32 before squaring "
                f"(tl.load(...).to(tl.float32))")
    return msg


def assert_matches(name, got, expected, x, dtype=None, story=None, source=""):
    __tracebackhide__ = True                    # pytest: the failure shows at the test's line
    msg = compare(name, got, expected, x, dtype, story=story, source=source)
    if msg:
        raise AssertionError(msg)


# -- for the tests that launch a kernel themselves ------------------------------------------
FILL = 4096.0      # outputs start as this (exact in every dtype), so a lane no program stored shows


def assert_untouched(name, now, before, who, output="dx"):
    """``name`` (an input, e.g. dy) came back as it went in; else say which element ``who`` changed and why
    it matters, and that ``output`` belongs in a tensor of its own. The backward's inputs are checked before its
    outputs (the reference is computed from them, so dx written into dy's memory would read as a wrong dx); x after
    the forward's outputs, which the reference computed before the call (a right y stored into x's memory shows
    as the write it is)."""
    __tracebackhide__ = True
    if torch.equal(now, before):
        return
    changed = (now != before).nonzero()
    at = tuple(changed[0].tolist())
    idx = ", ".join(map(str, at))
    raise AssertionError(
        f"{who} wrote into {name}: {name}[{idx}] was {before[at].item():.6g} and is now {now[at].item():.6g} "
        f"({len(changed)} of {now.numel()} elements changed). {name} belongs to the caller, who may use it again "
        f"(autograd hands the same {name} to every function that needs it): store {output} in a tensor of its own "
        f"(torch.empty_like), never in {name}'s memory, and do not write through {'an' if name in 'xr' else 'a'} "
        f"{name} pointer in a kernel")


def random_inputs(shape, dtype=torch.float32, device="cpu", seed=0):
    """x, g and dy of a test: standard normal, the same for a given seed on every machine."""
    torch.manual_seed(seed)
    x = torch.randn(*shape, dtype=dtype).to(device)
    g = torch.randn(shape[-1], dtype=dtype).to(device)
    dy = torch.randn(*shape, dtype=dtype).to(device)
    return x, g, dy


def apply_view(t, spec):
    """``t[..., start:stop:step]`` for ``spec`` = (start, stop[, step]), or ``t`` itself for None: a view of the
    last dimension whose rows stay as far apart as ``t``'s; "T": ``t``'s last two dimensions swapped (dense, but
    its columns are rows apart). How the tests and the grader make strided inputs."""
    if spec == "T":
        return t.transpose(-1, -2)
    return t[..., slice(*spec)] if spec else t


STRIDED_SHAPE, STRIDED_VIEW = (24, 160), (0, 80)      # the strided tests: views x[:, 0:80] of (24, 160) tensors


def transposed_inputs(dtype=torch.float32, device="cpu", seed=0):
    """x, g and dy of shape (24, 80) whose x and dy are transposes of (80, 24) tensors: dense, x.stride() = (1, 24),
    so torch.empty_like(x) is laid out the same way, and a y made like it is not row-major."""
    base_x, g, base_dy = random_inputs((80, 24), dtype, device, seed)
    g = random_inputs((24, 80), dtype, device, seed + 1)[1]
    return apply_view(base_x, "T"), g, apply_view(base_dy, "T")


def strided_inputs(dtype=torch.float32, device="cpu", seed=0):
    """x, g and dy of the tests of strided rows: x and dy are views ``[:, 0:80]`` of (24, 160) tensors, so their
    rows are 160 elements apart while N = 80 (a kernel must step by the row stride, not by N); g is contiguous."""
    base_x, g, base_dy = random_inputs(STRIDED_SHAPE, dtype, device, seed)
    n = STRIDED_VIEW[1]
    return apply_view(base_x, STRIDED_VIEW), g[:n].contiguous(), apply_view(base_dy, STRIDED_VIEW)


def saved_for_backward(y, rows):
    """(r, saved): the tensors y's autograd Function saved for its backward (None when y has no custom Function
    behind it, or it saved nothing), and among them its r, the fp32 tensor of one value per row (or None)."""
    try:
        saved = [t for t in y.grad_fn.saved_tensors if isinstance(t, torch.Tensor)]
    except Exception:                                 # noqa: BLE001 -- not a custom Function, or nothing saved
        return None, None
    return next((t for t in saved if t.numel() == rows and t.dim() <= 1 and t.dtype == torch.float32), None), saved


def ctx_tensors(y) -> list:
    """[[name, shape, dtype]] of the tensors y's autograd Function kept as attributes of ctx (``ctx.r = r``, or in a
    list, tuple, dict or namespace there) instead of passing them to ctx.save_for_backward; [] when none, or no
    custom Function."""
    try:
        attributes = vars(y.grad_fn)
    except TypeError:                                   # no grad_fn, or a built-in one: no attributes of a ctx
        return []
    kept = []
    for name, value in attributes.items():
        for t in _reachable_tensors(value):
            kept.append([f"ctx.{name}", list(t.shape), DTYPE_NAMES.get(t.dtype, str(t.dtype))])
    return kept[:8]


def _reachable_tensors(value, depth: int = 4, seen=None) -> list:
    """The tensors reachable from ``value`` through containers (lists, tuples, sets, dicts), objects' attributes (a
    SimpleNamespace, a dataclass, an object of the file's own class), what a closure or a partial holds, and what
    any other object refers to (a bound method's object, an iterator's list), a few levels deep: wherever a
    Function keeps one on ctx."""
    seen = set() if seen is None else seen
    if isinstance(value, torch.Tensor):
        return [value]
    if depth == 0 or id(value) in seen or len(seen) > 1000:
        return []
    seen.add(id(value))
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    elif isinstance(value, (types.FunctionType, functools.partial)):     # a closure or a partial keeps what it holds
        func = getattr(value, "func", value)
        items = [*(c.cell_contents for c in (getattr(func, "__closure__", None) or ()) if _filled(c)),
                 *getattr(value, "args", ()), *getattr(value, "keywords", {}).values(),
                 *(getattr(func, "__defaults__", None) or ())]
    elif isinstance(value, (type, types.ModuleType)) or type(value).__module__.split(".")[0] in _OPAQUE:
        items = []                                      # a class, a module, or an object of numpy's or Triton's
    else:
        try:
            items = list(vars(value).values())          # an object with attributes (the file's own, a torch Module)
        except TypeError:                               # one without: whatever it holds (a bound method's object,
            items = [v for v in gc.get_referents(value)     # an iterator's list), but no module's namespace
                     if not isinstance(v, (type, types.ModuleType))
                     and not (isinstance(v, dict) and "__builtins__" in v)]
    return [t for item in items for t in _reachable_tensors(item, depth - 1, seen)]


_OPAQUE = {"numpy", "triton", "mini_triton"}


def _filled(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:                                  # an empty cell
        return False


def ctx_tensors_message(kept, story) -> str:
    """Why tensors kept as ctx attributes are wrong, for the student."""
    names = ", ".join(f"{n} ({tuple(s)} {d})" for n, s, d in kept)
    return (f"your TritonRMSNorm.forward kept {names} as an attribute of ctx for {story}: pass tensors the backward "
            f"needs to ctx.save_for_backward(x, g, r) and read them as ctx.saved_tensors. autograd then checks that "
            f"nothing changed them in place before the backward, and frees them with the graph; a tensor kept as an "
            f"attribute escapes both: nothing checks it, and it lives as long as ctx does, past the backward")


def offloaded_message(kept, read, story) -> str:
    """Why a backward that read memory the grader overwrote after the forward (``read``: what it was, "x", "r",
    "memory your forward's kernels stored") is wrong, for the student; ``kept``: the tensors the Function kept as
    attributes of ctx, as ctx_tensors names them, if any."""
    names = ", ".join(f"{n} ({tuple(s)} {d})" for n, s, d in kept or [])
    what = " and ".join(read)
    first = f"your forward kept {names} as an attribute of ctx, and your backward" if names else "your backward"
    return (f"{first} read {what} as the forward left it, not a copy from ctx.saved_tensors, for {story}: the "
            f"grader offloads the saved tensors there, as torch.autograd.graph.save_on_cpu does "
            f"(autograd's saved-tensor hooks copy each tensor passed to ctx.save_for_backward and hand the copy back), "
            f"and overwrote x, g and the memory your forward's kernels stored before the backward ran. Pass every "
            f"tensor the backward needs to ctx.save_for_backward(x, g, r) and read them from ctx.saved_tensors")


def leave_garbage(numels, device="cpu"):
    """Fill buffers of these sizes with NaN and free them at once. A ``torch.empty`` that follows
    (of one of these sizes) then likely gets that memory back, NaN and all, as it gets old data from
    the allocator in a long training run: a buffer the wrapper forgets to zero shows up. A best
    effort: an allocator may hand out other memory."""
    for n in numels:
        torch.full((int(n),), float("nan"), device=device)


def filled(shape, dtype, device):
    """An output buffer for a kernel to write, holding FILL everywhere."""
    return torch.full(shape, FILL, dtype=dtype, device=device)


def _region(index: torch.Tensor) -> str:
    """'[0:2, 4096:32768]' for the bounding box of the (k, dims) indices."""
    lo, hi = index.min(0).values.tolist(), index.max(0).values.tolist()
    return "[" + ", ".join(f"{a}" if a == b else f"{a}:{b + 1}" for a, b in zip(lo, hi)) + "]"


def assert_written(name, out, kernel, story="", hint=""):
    """Fail, naming the elements, if the kernel left some of ``out`` as the test filled it."""
    __tracebackhide__ = True
    left = (out.detach().cpu() == FILL)
    if bool(left.any()):
        index = left.nonzero()
        region = _region(index) if out.dim() else ""
        raise AssertionError(
            f"{name}{region} was never written by {kernel} ({int(left.sum())} of {out.numel()} elements still hold "
            f"{FILL:g}, the value the test filled {name} with){' for ' + story if story else ''}: no program "
            f"stored there. {hint}".rstrip())


# -- work happens in kernels (item 7): host-side torch ops that touch activations -------------------------

def host_op_name(op) -> str:
    """A host op as the student wrote it: aten's _to_copy is x.to(dtype)."""
    if op["op"] == "__array__":
        return "np.asarray"                          # numpy read the tensor through its __array__
    return f"to({op['dtype']})" if op["op"] in ("_to_copy", "to") and op.get("dtype") else op["op"]


CHECK_HINT = (" (a check of the values on the host also makes Python wait for the GPU at every call: validate "
              "shapes and dtypes only, which need no data)")
CONVERT_HINT = " (load the 16-bit values and convert them in registers: tl.load(...).to(tl.float32))"
READBACK_HINT = (" (on a GPU this copies the tensor from the device to the host and makes Python wait for the "
                 "GPU at every call: validate shapes and dtypes only, which need no data)")
HOST_OP_HINTS = {**dict.fromkeys(("_to_copy", "to"), CONVERT_HINT),
                 **dict.fromkeys(("isnan", "isinf", "isfinite", "any", "all"), CHECK_HINT),
                 **dict.fromkeys(("numpy", "__array__", "tolist", "cpu"), READBACK_HINT)}


# host ops that may read a partial dg buffer of M·N elements: its sum over rows, a cast or a copy of it
GLUE_OPS = frozenset({"sum", "_to_copy", "to", "copy_", "clone", "contiguous"})


def host_work_problem(host_ops, M, N, where, file=None, reached=""):
    """Why the host did work the kernels should do, or None.

    ``host_ops``: one dict per torch op that ran on the host and read data, with ``op`` (its name),
    ``reads`` (elements of its largest input), ``output_numel``, ``dtype`` (of its output),
    ``roles`` (which of x, dy, y, dx it read) and ``where`` (the line that ran it, if known).
    Reading an M·N activation at all is work for a kernel; so is reading M·N elements of anything
    to make more than N values. Small glue (summing a partial dg buffer to N values, allocating
    outputs) is fine. ``file``: the name of the student's file; ops run from elsewhere (autograd's own
    work between the student's functions, such as casting dy to y's dtype) are not the student's. ``reached``: what
    used the op's result, as a clause (", and a kernel loaded its result").
    """
    op = host_work_op(host_ops, M, N, file)
    if op is None:
        return None
    act = [r for r in op["roles"] if r in ("x", "dy", "y", "dx")]
    at = f", at {op['where']}" if op.get("where") else ""
    if act:
        many = f"all {M * N}" if op["reads"] == M * N else f"{op['reads']}"
        return (f"a host-side `{host_op_name(op)}` read {many} elements of {act[0]} in your {where}{at}{reached}: the "
                f"kernels must do the work on M·N data" + HOST_OP_HINTS.get(op["op"], ""))
    return (f"a host-side `{host_op_name(op)}` read {op['reads']} elements in your {where}{at}{reached}: only small "
            f"glue (like summing the partial dg buffer to N values) may run outside kernels")


def host_work_op(host_ops, M, N, file=None) -> dict | None:
    """The first of ``host_ops`` that does work the kernels should do (host_work_problem says why), or None."""
    for op in host_ops:
        if file and not (op.get("where") or "").startswith(file):
            continue
        # reading M·N elements is work, but summing a partial buffer (its rows perhaps as wide as the block: N
        # padded to a power of 2) to N values, or converting or copying that sum, which is glue
        if any(r in ("x", "dy", "y", "dx") for r in op["roles"]) or op["reads"] >= M * N and (
                op["output_numel"] > 1 << max(0, N - 1).bit_length() or op["op"] not in GLUE_OPS):
            return op
    return None


def partial_dtype_problem(scratch, story):
    """Why a backward's partial dg buffer is wrong in kind, or None: ``scratch`` lists (kernel, parameter, dtype
    as the simulator names it, elements stored, elements loaded, numel, storage) of each argument of the
    backward's launches that is none of its inputs and outputs. A buffer the kernels both store and load (a
    partial buffer another kernel sums, or one a kernel adds into) stored in 16 bits rounds each partial sum of
    many rows to 3 significant digits, and dg with it: the handout asks for an fp32 buffer."""
    loaded = {s for *_, n_loaded, _, s in scratch if n_loaded}
    for kernel, name, dtype, stored, _, numel, storage in scratch:
        if stored and storage in loaded and dtype in ("tl.float16", "tl.bfloat16"):
            return (f"your partial dg buffer ({name} of {kernel}, {numel} elements) is {dtype.removeprefix('tl.')} "
                    f"for {story}: each partial sum of many rows is then rounded to 16 bits, and dg with it. "
                    f"Allocate it with dtype=torch.float32 and let the final sum store dg in g's dtype")
    return None


def host_ops_of(rec, tensors):
    """The host ops of a mini_triton ``record(host_ops=True)`` that read data, as host_work_problem
    takes them; ``tensors`` names the activations ({"x": x, "dy": dy, ...}) by their storage."""
    role = {t.untyped_storage().data_ptr(): name for name, t in tensors.items() if t is not None}
    return [{"op": o.name, "reads": o.reads, "output_numel": o.output_numel, "dtype": o.out_dtype, "where": o.where,
             "roles": sorted({role[s] for s in o.storages if s in role})} for o in rec.host_ops if o.reads > 0]


def kernel_stored(rec, t) -> int:
    """How many distinct elements of ``t``'s storage the recorded kernels stored."""
    storage = t.untyped_storage().data_ptr()
    return sum(a.distinct("store") for L in rec.launches for a in L.args.values()
               if a.stored and a.storage == storage)
