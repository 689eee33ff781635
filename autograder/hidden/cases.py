"""The hidden inputs: every case the grader runs, which part it belongs to, and the jobs that run them.

To add a hidden case, add it here and nothing else: a ``Case`` in ``ROBUST`` and its name in the
part's tuple in ``ROBUST_PARTS`` (a new part also needs its points in rubric.py). The hidden tests
(test_rubric.py) make one test per part of ``ROBUST_PARTS``, compare every case of it with the float64
reference, and tell the case's ``story`` in the feedback. docs/ta-guide.md has a worked example.
"""
import typing

import torch


class Case(typing.NamedTuple):
    """One hidden input: x of ``shape`` in ``dtype`` (a view of a wider tensor when ``view`` is given),
    and ``story``, how it was made, as the feedback tells it."""
    shape: tuple
    dtype: str
    eps: float = 1e-5
    view: list | None = None               # [start, stop, step] of the last dimension of a wider tensor
    story: str = ""
    forward_only: bool = False             # checks y and r from rmsnorm_forward, not the whole autograd step
    dy_contiguous: bool = False            # with a view: dy is a contiguous tensor, its rows N apart, not x's

    @property
    def task(self) -> str:
        """The name prefix of its task: the forward alone ("fwd") or forward and backward ("ag")."""
        return "fwd" if self.forward_only else "ag"


def case(shape, dtype="float32", eps=1e-5, view=None, note="", forward_only=False):
    """A Case whose story is the shape, the dtype and ``note``."""
    name = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[dtype]
    return Case(shape, dtype, eps, view, f"x of shape {shape} {name}" + (f" ({note})" if note else ""), forward_only)


CORE = {"a": (37, 100), "b": (4, 16, 64), "c": (2, 3, 513), "d": (256, 128)}     # items 1-3, 5-9 (fp32)
STRIDED = "x and dy of shape (24, 80) fp32, views {} of (24, 160) tensors, x.stride() = {}"
# Each robustness case belongs to one part only, and only 4.1's are 16-bit, so that one defect costs
# one part (on the CPU: the GPU job adds N = 65536 in bf16 to 4.4, where only 16-bit dtypes allow it).
ROBUST = {
    "fp16": case((33, 200), "float16"),
    "bf16": case((33, 200), "bfloat16"),

    "3d": case((5, 7, 96), note="3-D: 35 rows of 96"),
    "4d": case((2, 3, 5, 48), note="4-D: 30 rows of 48"),
    "row_stride": Case((24, 160), "float32", 1e-5, [0, 80, 1],
                       STRIDED.format("x[:, 0:80]", "(160, 1): rows are 160 elements apart")),
    "col_stride": Case((24, 160), "float32", 1e-5, [0, None, 2],
                       STRIDED.format("x[:, ::2]", "(160, 2): every other column")),
    "n1000": case((16, 1000), note="N = 1000, not a power of 2"),
    "n1": case((8, 1), note="N = 1"),
    "big_n": case((3, 16384), note="N = 16384"),
    "big_n_32k": case((2, 32768), note="N = 32768: more than one block per row"),
    "big_n_bf16": case((2, 65536), "bfloat16", note="N = 65536, allowed in 16 bits: tl.sum adds bf16 in bf16, so "
                                                    "sum the squares in fp32", forward_only=True),
    "eps_small": case((16, 64), eps=1e-6, note="eps = 1e-06"),
    "eps_large": case((16, 64), eps=1e-2, note="eps = 0.01"),
    "eps_one": case((16, 64), eps=1.0, note="eps = 1.0"),
    "zero_rows": case((12, 64), note="rows 0 and 5 are all zeros, so r = 1/sqrt(eps) there"),
    "mixed_strides": Case((24, 160), "float32", 1e-5, [0, 80, 1],
                          "x of shape (24, 80) fp32, a view of a (24, 160) tensor with x.stride() = (160, 1), and a "
                          "contiguous dy with dy.stride() = (80, 1): x's and dy's rows are different distances apart",
                          dy_contiguous=True),
}
ROBUST_PARTS = {
    "4.1": ("fp16", "bf16"),
    "4.2": ("3d", "4d"),
    "4.3": ("row_stride", "col_stride", "mixed_strides"),
    "4.4": ("n1000", "n1", "big_n", "big_n_32k", "big_n_bf16"),
    "4.5": ("eps_small", "eps_large", "eps_one", "zero_rows"),
}
# Item 7 looks for host-side ops on the core shape "d" in every dtype it grades.
HOST_CHECK = {"d": "float32", "d_bf16": "bfloat16", "d_fp16": "float16"}
HOST_CASES = {"d_fp16": case(CORE["d"], "float16"), "d_bf16": case(CORE["d"], "bfloat16")}
# The GPU job: large N for 4.4 and a rerun for 4.7, then the timing shape of item 10.
GPU_ROBUST = {"big_n_gpu": case((64, 32768), note="N = 32768, on the GPU with real Triton"),
              "big_n_bf16_gpu": case((64, 65536), "bfloat16", note="N = 65536, on the GPU with real Triton"),
              "rerun_gpu": case((4096, 1024), note="on the GPU with real Triton")}
GPU_ROBUST_PARTS = {"4.4": ("big_n_gpu", "big_n_bf16_gpu")}      # graded with the part's CPU cases
SPEED_SHAPE = (16384, 4096)
SPEED_ROWS = [0, 1, 777, 4095, 8191, 12000, 16382, 16383]
SPEED_SEED = 2024


def _make(shape, dtype, gen, zero_rows=False, view=None, dy_contiguous=False):
    """x, g, dy for one case; a view case gets a wider base tensor (dy too, unless ``dy_contiguous``)."""
    dtype = getattr(torch, dtype)
    x = torch.randn(*shape, generator=gen)
    if zero_rows:
        x[0] = 0
        x[5] = 0
    n = shape[-1] if view is None else len(range(shape[-1])[slice(*view)])
    g = torch.rand(n, generator=gen) + 0.5
    dy = torch.randn(*shape[:-1], n if dy_contiguous else shape[-1], generator=gen)
    return x.to(dtype), g.to(dtype), dy.to(dtype)


def make_inputs(cases):
    gen = torch.Generator().manual_seed(1234)
    out = {}
    for k, c in cases.items():
        out[f"x_{k}"], out[f"g_{k}"], out[f"dy_{k}"] = _make(c.shape, c.dtype, gen, k == "zero_rows", c.view,
                                                             c.dy_contiguous)
    return out


def _names(k):
    return {"x": f"x_{k}", "g": f"g_{k}", "dy": f"dy_{k}"}


def sim_jobs():
    """Two jobs: the forward alone (so a broken backward cannot cost forward points), then autograd."""
    fwd, ag = {}, {}
    for k in [*CORE, *HOST_CASES]:
        t = _names(k)
        fwd[f"fwd_{k}"] = {"op": "forward", "tensors": {"x": t["x"], "g": t["g"]}}
        ag[f"ag_{k}"] = {"op": "autograd", "tensors": t}
    ag["ag_a_again"] = dict(ag["ag_a"])
    fwd["fwd_bf16"] = {"op": "forward", "tensors": {"x": "x_bf16", "g": "g_bf16"}}     # r stays fp32 (4.6)
    for k, c in ROBUST.items():
        job, names = (fwd, {"x": f"x_{k}", "g": f"g_{k}"}) if c.forward_only else (ag, _names(k))
        job[f"{c.task}_{k}"] = {"op": "forward" if c.forward_only else "autograd", "tensors": names, "eps": c.eps}
        if c.view:
            job[f"{c.task}_{k}"]["view"] = {"x": c.view, **({} if c.dy_contiguous else {"dy": c.view})}
    return {"forward": fwd, "autograd": ag}


def sim_inputs():
    """Every simulator task's tensors, drawn in a fixed order from one seed."""
    return make_inputs({**{k: case(s) for k, s in CORE.items()}, **ROBUST, **HOST_CASES})


def gpu_tasks(speed_only=False):
    """The GPU job's tasks; ``speed_only`` (RMSNORM_GPU_TASKS=speed, used by calibrate.py) keeps item 10's."""
    tasks = {}
    for k, c in ({} if speed_only else GPU_ROBUST).items():
        tasks[f"ag_{k}"] = {"op": "autograd", "tensors": _names(k), "eps": c.eps, "device": "cuda"}
    if not speed_only:
        tasks["ag_rerun_gpu_again"] = dict(tasks["ag_rerun_gpu"])
    for dtype in ("float32", "bfloat16"):
        tasks[f"speed_{dtype}"] = {"op": "speed", "shape": SPEED_SHAPE, "dtype": dtype, "seed": SPEED_SEED,
                                   "rows": SPEED_ROWS}
    return tasks


