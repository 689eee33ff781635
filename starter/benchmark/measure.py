"""What runs in the process that times one shape (or the model) on the GPU: every provider's forward and
forward+backward step, as GPU time (a CUDA graph's replay), the kernels' summed durations (the profiler) and wall
time (a normal call). Each measurement is a JSON dict; ``progress`` tells the parent what is being timed.
"""
import statistics
import sys

import torch
from rmsnorm_testkit.compare import DTYPES, compare, eager, load_impl, reference
from rmsnorm_testkit.text import error_line
from rmsnorm_testkit.timing import STEPS, NotCapturable, captured, kernel_times, speed_inputs, time_cuda

COMPILE_MODES = ("default", "reduce-overhead")
# time_cuda as the grader calls it, shorter: one round of 100 ms (do_bench's defaults), as every provider is timed
BENCH_TIMING = {"warmup_ms": 25.0, "rep_ms": 100.0, "rounds": 1}
PROGRESS = "progress: "


def wrong_outputs(impl, x, g, dy):
    """None if your rmsnorm gives y, dx and dg within the tolerance of the float64 reference, else why.
    A time or a traffic count says nothing about code that computes the wrong thing."""
    xg, gg = x.detach().clone().requires_grad_(True), g.detach().clone().requires_grad_(True)
    y = impl.rmsnorm(xg, gg)
    y.backward(dy)
    ref_y, _, ref_dx, ref_dg = reference(x, g, dy)
    for name, got, want in (("y", y, ref_y), ("dx", xg.grad, ref_dx), ("dg", gg.grad, ref_dg)):
        msg = compare(name, got, want, x) if got is not None else f"{name} is None"
        if msg:
            return msg
    return None


def providers(impl):
    """name -> (forward(x, g), differentiable forward(x, g)) for every implementation available."""
    out = {"yours": (lambda x, g: impl.rmsnorm_forward(x, g)[0], impl.rmsnorm),
           "eager": (eager, eager),
           "torch.compile": (None, torch.compile(eager, dynamic=False)),
           "F.rms_norm": (lambda x, g: torch.nn.functional.rms_norm(x, (x.shape[-1],), g, 1e-5),
                          lambda x, g: torch.nn.functional.rms_norm(x, (x.shape[-1],), g, 1e-5))}
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        # in_place=False: by default Liger writes dx over dy, which a benchmark reuses
        liger = lambda x, g: LigerRMSNormFunction.apply(x, g, 1e-5, 0.0, "llama", False)  # noqa: E731
        out["Liger"] = (liger, liger)
    except Exception as e:                                       # noqa: BLE001 -- optional, never fatal
        if not isinstance(e, ImportError):
            print(f"(Liger-Kernel is installed but does not load: {type(e).__name__}: {e})", file=sys.stderr)
    return out


def progress(what):
    """Tell the parent process what is being timed now (a line it shows as the progress line)."""
    print(f"{PROGRESS}{what}", flush=True)


def measure_one(impl_path, dtype_name, M, N):
    """Times of every provider at one shape and dtype (run in its own process): a dict for JSON."""
    impl = load_impl(impl_path)
    bench = lambda f: time_cuda(f, **BENCH_TIMING)  # noqa: E731
    x, g, dy = speed_inputs((M, N), DTYPES[dtype_name], seed=0, device="cuda")
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    out = torch.empty_like(x)
    res = {"copy": bench(lambda: out.copy_(x)), "providers": {}, "wrong": wrong_outputs(impl, x, g, dy)}
    for name, (fwd, diff) in providers(impl).items():
        fwd = fwd or diff
        steps = {"fwd": lambda: fwd(x, g), "fwdbwd": lambda: torch.autograd.grad(diff(xg, gg), (xg, gg), dy)}
        t = res["providers"][name] = {}
        for kind, step in steps.items():
            progress(f"{name} {STEPS[kind][0]}")
            try:
                t[kind] = bench(step)
            except Exception as e:                               # noqa: BLE001 -- report, keep going
                t["error"] = error_line(e)
                break
            try:
                t[f"{kind}_gpu"] = bench(captured(step)[0])
            except Exception as e:                               # noqa: BLE001 -- the wall time stands
                t[f"{kind}_gpu_error"] = str(e) if isinstance(e, NotCapturable) else error_line(e)
                torch.cuda.synchronize()
            try:
                t[f"{kind}_kernels"] = kernel_ms(step)
            except Exception as e:                               # noqa: BLE001 -- the other times stand
                t[f"{kind}_kernels_error"] = error_line(e)
    return res


def kernel_ms(step, reps=5):
    """What the GPU spends running ``step``'s kernels (and its copies and fills), in ms: the sum of
    their durations as the profiler records them, for one call launched normally (the median of
    ``reps`` calls, each after the L2 cache is flushed, as time_cuda does before each timed call)."""
    return statistics.median(sum(ms for _, ms in kernel_times(step)[1]) for _ in range(reps))


def measure_model(impl_path, dtype_name, T, D):
    """The model Linear -> RMSNorm -> Linear at (T tokens, width D), forward and backward, compiled in each
    of COMPILE_MODES, with your RMSNorm and with F.rms_norm: wall time (CUDA events around a normal call)
    and the kernels' GPU time (profiler), in ms; and whether Dynamo broke the graph around your op."""
    impl = load_impl(impl_path)
    dtype = DTYPES[dtype_name]
    norms = {"yours": impl.rmsnorm, "F.rms_norm": lambda h, g: torch.nn.functional.rms_norm(h, (h.shape[-1],), g, 1e-5)}
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, D, device="cuda", dtype=dtype, generator=gen)
    dy = torch.randn(T, D, device="cuda", dtype=dtype, generator=gen)
    res = {}
    for mode in COMPILE_MODES:
        for name, norm in norms.items():
            progress(f"model {T}x{D}, torch.compile mode={mode}, {name}")
            model = Model(D, norm).to(device="cuda", dtype=dtype)
            t = res.setdefault(mode, {}).setdefault(name, {})
            try:
                torch._dynamo.reset()
                compiled = torch.compile(model, mode=mode, fullgraph=True)
                params = list(model.parameters())

                def step():
                    torch.compiler.cudagraph_mark_step_begin()
                    return torch.autograd.grad(compiled(x), params, dy)
                t["wall"] = time_cuda(step, **BENCH_TIMING)
                t["gpu"] = kernel_ms(step)
            except Exception as e:                               # noqa: BLE001 -- report, keep going
                t["error"] = error_line(e)
    return res


class Model(torch.nn.Module):
    """Linear -> RMSNorm (the ``norm`` given, with its own g) -> Linear."""

    def __init__(self, width, norm):
        super().__init__()
        self.first, self.last = torch.nn.Linear(width, width), torch.nn.Linear(width, width)
        self.g = torch.nn.Parameter(torch.rand(width) + 0.5)
        self.norm = norm

    def forward(self, x):
        return self.last(self.norm(self.first(x), self.g))
