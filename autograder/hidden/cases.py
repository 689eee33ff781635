"""The hidden inputs: every case the grader runs, which part it belongs to, and the jobs that run them.

Each part tests its own topic on inputs of its own, so that one mistake shows in the part that owns
it: items 1-3 on 2-D, contiguous fp32 rows (the backward items with the reference r, so that a
forward mistake costs them nothing); 3-D and 4-D inputs only in 4.2; strided inputs only in 4.3;
16-bit inputs only in 4.1 (and item 7's host check); autograd steps where only x, only g or neither
requires grad only in 4.6 (every other step has both).

A case is data: a ``Case`` says everything the grader needs of it (shape, dtype, eps, a view of a
wider tensor, zero rows, which inputs require grad, the part that owns it, the story its feedback
tells). To add a hidden case, add it here and nothing else: a ``Case`` in ``ROBUST`` whose ``part``
names its part of item 4 (a new part also needs its points in rubric.py). The hidden tests (judge/)
compare every case of a part with the float64 reference and tell the case's ``story`` in the
feedback. Each case draws its tensors from a seed of its own name, so adding one changes no other.
docs/ta-guide.md has a worked example.

The names a job uses are made by the helpers at the end (``task_name``, ``input_key``), and those of
its outputs by ``job.wire.protocol.output_key``, never by hand.
"""
import secrets
import typing
import zlib

import torch
from rmsnorm_testkit import predict, text, timing


class Case(typing.NamedTuple):
    """One hidden input: x of ``shape`` in ``dtype`` (a view of a wider tensor when ``view`` is given),
    and ``story``, how it was made, as the feedback tells it."""
    shape: tuple
    dtype: str
    eps: float = 1e-5
    view: list | str | None = None         # [start, stop, step] of a wider tensor's last dimension; "T": a transpose
    story: str = ""
    forward_only: bool = False             # checks y and r from rmsnorm_forward, not the whole autograd step
    dy_contiguous: bool = False            # with a view: dy is a contiguous tensor, its rows N apart, not x's
    zero_rows: tuple = ()                  # rows of x set to zero
    part: str | None = None                # the part of item 4 that grades it (None: a core case of items 1-3, 5-9)
    requires_grad: tuple = ("x", "g")      # the inputs of its autograd step that require grad (none: the step is
                                           # rmsnorm alone, with no backward to run)
    offload: bool = False                  # the step's saved tensors go through autograd's saved-tensor hooks, and
                                           # the judge overwrites x, g and what the forward's kernels stored before
                                           # the backward (job/judge/remote.py, Task.offload)

    @property
    def kind(self) -> str:
        """The kind of its task (``task_name``): the forward alone ("fwd") or forward and backward ("ag")."""
        return "fwd" if self.forward_only else "ag"


def case(shape, dtype="float32", eps=1e-5, view=None, note="", forward_only=False, zero_rows=(), part=None,
         requires_grad=("x", "g"), offload=False):
    """A Case whose story is the shape, the dtype and ``note``."""
    story = f"x of shape {shape} {text.dtype_name(dtype)}" + (f" ({note})" if note else "")
    return Case(shape, dtype, eps, view, story, forward_only, zero_rows=zero_rows, part=part,
                requires_grad=tuple(requires_grad), offload=offload)


# Items 1-3 and 5-9: 2-D, contiguous fp32 rows. Item 1 runs the forward on each, items 2 and 3 the
# backward (rmsnorm_backward, given the reference r); items 5-9 and 4.7 look at "d": its forward, its
# backward given the reference r (so that a mistake of the forward or of the autograd Function costs
# them nothing), and, for item 7, its step through autograd.
CORE = {k: case(shape) for k, shape in {"a": (37, 100), "b": (24, 256), "c": (6, 513), "d": (256, 128)}.items()}
# Items 5 and 6 also read the traffic at a shape and a dtype drawn for each grading (each process of the grader
# draws them once): a kernel fused at every shape and in every dtype is fused there too, and one fused only at the
# shapes written here, or for short rows, or in fp32, is not. Items 1-3 do not grade it, so a verdict of theirs
# never depends on the draw.
DRAWN_ROWS, DRAWN_COLS = (6, 64), (64, 2048)
DRAWN_DTYPES = ("float32", "float16", "bfloat16")


def _drawn_shape() -> tuple:
    """A shape no one knows before the grading: rows and columns in DRAWN_ROWS and DRAWN_COLS, not a core shape."""
    core = {c.shape for c in CORE.values()}
    while True:
        shape = tuple(lo + secrets.randbelow(hi - lo + 1) for lo, hi in (DRAWN_ROWS, DRAWN_COLS))
        if shape not in core:
            return shape


def drawn_case(shape: tuple, dtype: str = "float32"):
    """The case of a drawn shape and dtype (the project's tests choose them: tests/grade_in_process.py)."""
    return case(shape, dtype, note="a shape drawn for this grading")


DRAWN = drawn_case(_drawn_shape(), secrets.choice(DRAWN_DTYPES))


# Item 9 also reads the backward at a second drawn shape, of many rows: its partial buffer's bound, M·N/8, holds
# for any design that gives each program 8 rows or more (M a multiple of 8, so that M / 8 programs of 8 rows fit it
# exactly), and a file that keeps its improved reduction for the shapes written here breaks it. Its rows have a
# power-of-2 length, as d's do: a partial buffer whose rows are padded to a power of 2 is as small there as at d.
TALL_ROWS, TALL_COLS = (264, 1032), (64, 128, 256, 512)


def _tall_shape() -> tuple:
    """Item 9's drawn shape: rows a multiple of 8 in TALL_ROWS, columns one of TALL_COLS."""
    lo, hi = TALL_ROWS
    return lo + 8 * secrets.randbelow((hi - lo) // 8 + 1), secrets.choice(TALL_COLS)


def tall_case(shape: tuple):
    """The case of item 9's drawn shape (the project's tests choose one: tests/grade_in_process.py)."""
    return case(shape, note="a shape of many rows drawn for this grading")


TALL = tall_case(_tall_shape())


def traffic_cases() -> dict:
    """The cases items 5 and 6 read: the core cases, then the drawn one ("drawn")."""
    return {**CORE, "drawn": DRAWN}


def reduction_cases() -> dict:
    """The cases item 9 reads: the core case d, the drawn one, and one of many rows ("tall"), the backward alone."""
    return {"d": CORE["d"], "drawn": DRAWN, "tall": TALL}
STRIDED = "x and dy of shape (24, 80) fp32, views {} of (24, 160) tensors, x.stride() = {}"
LONG_ODD_N = 20001            # odd, above the 16384 fp32 values a row can hold whole in one block
LONG_ODD = (f"N = {LONG_ODD_N}: more than one block per row, and the last chunk of any power-of-2 size is partly "
            f"past the row's end")
# Each robustness case belongs to one part only, and only 4.1's are 16-bit, so that one defect costs
# one part (on the CPU: the GPU job adds N = 65536 in bf16 to 4.4, where only 16-bit dtypes allow it).
ROBUST = {
    "fp16": case((33, 200), "float16", part="4.1"),
    "bf16": case((33, 200), "bfloat16", part="4.1"),
    # r is fp32 whatever x's dtype: rmsnorm_forward on 16-bit rows, r held to fp32's tolerance
    "fp16_fwd": case((33, 200), "float16", forward_only=True, part="4.1"),
    "bf16_fwd": case((33, 200), "bfloat16", forward_only=True, part="4.1"),

    "3d": case((5, 7, 96), note="3-D: 35 rows of 96", part="4.2"),
    "4d": case((2, 3, 5, 48), note="4-D: 30 rows of 48", part="4.2"),
    # N = 64 fills its block (no lane masked), and 160 rows are more than a forward program's tile of fp32 rows
    # (8192 elements): a grid sized from x.shape[0] (4) instead of the rows of x viewed as (M, N) leaves rows unstored
    "3d_pow2": case((4, 40, 64), note="3-D: 160 rows of 64", part="4.2"),

    "row_stride": Case((24, 160), "float32", view=[0, 80, 1], part="4.3",
                       story=STRIDED.format("x[:, 0:80]", "(160, 1): rows are 160 elements apart")),
    "col_stride": Case((24, 160), "float32", view=[0, None, 2], part="4.3",
                       story=STRIDED.format("x[:, ::2]", "(160, 2): every other column")),
    "transposed": Case((80, 24), "float32", view="T", part="4.3",
                       story="x and dy of shape (24, 80) fp32, transposes of (80, 24) tensors, x.stride() = (1, 24): "
                             "dense, but each row's elements are 24 apart (torch.empty_like(x) is laid out the same "
                             "way)"),
    "mixed_strides": Case((24, 160), "float32", view=[0, 80, 1], dy_contiguous=True, part="4.3",
                          story="x of shape (24, 80) fp32, a view of a (24, 160) tensor with x.stride() = (160, 1), "
                                "and a contiguous dy with dy.stride() = (80, 1): x's and dy's rows are different "
                                "distances apart"),

    # not a power of 2, and between 1024 and 4096: the row length where a backward's tiles may hold a few rows of
    # more than one block of 1024 (the solution's 2 rows of 2048), a path no other fixed case takes
    "n1500": case((16, 1500), note="N = 1500, not a power of 2", part="4.4"),
    "n1": case((8, 1), note="N = 1", part="4.4"),
    "big_n": case((3, 16384), note="N = 16384", part="4.4"),
    "big_n_32k": case((2, 32768), note="N = 32768: more than one block per row", part="4.4"),
    "big_n_bf16": case((2, 65536), "bfloat16", note="N = 65536, allowed in 16 bits: tl.sum adds bf16 in bf16, so "
                                                    "sum the squares in fp32", forward_only=True, part="4.4"),
    # rows longer than one block whose last chunk is partly past the row's end, through rmsnorm_forward and through
    # autograd: an odd N above 16384 is no multiple of any power-of-2 chunk, so a chunk loop that masks its last
    # chunk as it masks the first (or not at all) shows here, in the forward's kernel and in the backward's
    # (the forward with eps = 0.5, where an eps the chunked path alone gets wrong shows: at 1e-5 it is below the
    # tolerance)
    "long_odd_fwd": case((4, LONG_ODD_N), eps=0.5, note=LONG_ODD + "; eps = 0.5", forward_only=True, part="4.4"),
    "long_odd": case((2, LONG_ODD_N), note=LONG_ODD, part="4.4"),
    "one_row": case((1, 64), note="M = 1: a single row", part="4.4"),

    "eps_small": case((16, 64), eps=1e-6, note="eps = 1e-06", part="4.5"),
    "eps_large": case((16, 64), eps=1e-2, note="eps = 0.01", part="4.5"),
    "eps_one": case((16, 64), eps=1.0, note="eps = 1.0", part="4.5"),
    "zero_rows": case((12, 64), note="rows 0 and 5 are all zeros, so r = 1/sqrt(eps) there", zero_rows=(0, 5),
                      part="4.5"),
    "zero_row_eps": case((6, 64), eps=0.1, note="eps = 0.1; row 2 is all zeros, so r = 1/sqrt(0.1) there",
                         zero_rows=(2,), part="4.5"),

    # the autograd Function when not every input requires grad (a frozen scale g, a frozen input, inference): each
    # gradient asked for comes back right (a backward that reads ctx.needs_input_grad reads x's flag at [0], g's at
    # [1]), and with neither, rmsnorm returns y and there is no backward to run
    "only_x_grad": case((16, 64), note="only x requires grad, g does not", requires_grad=("x",), part="4.6"),
    "only_g_grad": case((16, 64), note="only g requires grad, x does not", requires_grad=("g",), part="4.6"),
    "no_grad": case((16, 64), note="neither x nor g requires grad", requires_grad=(), part="4.6"),
    # the Function's saved tensors handed back through autograd's saved-tensor hooks, as activation offloading
    # (torch.autograd.graph.save_on_cpu) hands them back, with x, g and all the forward's kernels stored overwritten
    # in between: a backward that reads a tensor it kept elsewhere (ctx.r = r) reads the overwritten memory
    "offloaded": case((16, 64), note="its saved tensors offloaded", part="4.6", offload=True),
}
# Item 7 looks for host-side ops on the core shape "d" in every dtype it grades.
HOST_CASES = {"d_fp16": case(CORE["d"].shape, "float16"), "d_bf16": case(CORE["d"].shape, "bfloat16")}
HOST_CHECK = {"d": CORE["d"], "d_bf16": HOST_CASES["d_bf16"], "d_fp16": HOST_CASES["d_fp16"]}   # in this order
# The GPU job: large N for 4.4 and a rerun for 4.7, then the timing shape of item 10.
GPU_ROBUST = {"big_n_gpu": case((64, 32768), note="N = 32768, on the GPU with real Triton", part="4.4"),
              "big_n_bf16_gpu": case((64, 65536), "bfloat16", note="N = 65536, on the GPU with real Triton",
                                     part="4.4"),
              "rerun_gpu": case((4096, 1024), note="on the GPU with real Triton", part="4.7")}
SPEED_SHAPE = timing.SPEED_SHAPE
SPEED_SEED = 2024           # the grader's own baseline timings (eager, a copy); the job draws the timed inputs' seeds


def parts_of(cases: dict) -> dict:
    """{part: (case names, in order)} of the cases that name a part."""
    parts = {}
    for k, c in cases.items():
        if c.part:
            parts.setdefault(c.part, []).append(k)
    return {part: tuple(names) for part, names in parts.items()}


def robust_parts() -> dict:
    """The parts of item 4 that grade cases of their own (4.1-4.6), with their cases' names."""
    return parts_of(ROBUST)


def all_sim_cases() -> dict:
    """Every case the simulator job runs, by name."""
    return {**traffic_cases(), "tall": TALL, **ROBUST, **HOST_CASES}


# ---- the names a job uses ------------------------------------------------------------------------------------

def task_name(kind: str, name: str) -> str:
    """The task that runs case ``name`` as ``kind``: "fwd" (rmsnorm_forward), "bwd" (rmsnorm_backward given
    the reference r), "ag" (the step through autograd) or "speed"."""
    return f"{kind}_{name}"


def kind_of(task: str) -> str:
    """The kind of a task (``task_name``'s first argument)."""
    return task.split("_", 1)[0]


def again(task: str) -> str:
    """The task that runs ``task`` a second time (item 4.7 compares the two)."""
    return f"{task}_again"


def input_key(tensor: str, name: str) -> str:
    """The key of one input tensor of case ``name`` as a job takes it: "x.a"."""
    return f"{tensor}.{name}"


def _make(name, c: Case):
    """x, g, dy of one case, from a generator seeded by the case's name: a view case gets a wider base
    tensor (dy too, unless ``dy_contiguous``)."""
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    dtype = getattr(torch, c.dtype)
    x = torch.randn(*c.shape, generator=gen)
    for row in c.zero_rows:
        x[row] = 0
    n = c.shape[-1] if c.view is None else c.shape[-2] if c.view == "T" else len(range(c.shape[-1])[slice(*c.view)])
    g = torch.rand(n, generator=gen) + 0.5
    dy = torch.randn(*c.shape[:-1], n if c.dy_contiguous else c.shape[-1], generator=gen)
    return x.to(dtype), g.to(dtype), dy.to(dtype)


def make_inputs(cases: dict) -> dict:
    """{name: {"x": ..., "g": ..., "dy": ...}} for each case, each drawn from its own seed."""
    return {k: dict(zip(("x", "g", "dy"), _make(k, c))) for k, c in cases.items()}


def flat(inputs: dict) -> dict:
    """The tensors as a job takes them: {"x.a": ..., "g.a": ..., "r.a": ...}."""
    return {input_key(t, k): v for k, ts in inputs.items() for t, v in ts.items()}


def _task(op, k, c: Case, tensors=("x", "g", "dy")) -> dict:
    task = {"op": op, "tensors": {t: input_key(t, k) for t in tensors}, "eps": c.eps}
    if op == "autograd":
        task["requires_grad"] = list(c.requires_grad)     # host.py makes these inputs leaves that require grad
        if c.offload:
            task["offload"] = True
    if c.view:
        task["view"] = {"x": c.view, **({} if c.dy_contiguous or "dy" not in tensors else {"dy": c.view})}
    return task


PREDICT_SEED = 1009


def predict_tasks() -> dict:
    """Item 10's prediction on the simulator (no points): per timed dtype, the two steps at predict.ROWS rows on
    inputs the judge makes from a seed, and their plan at item 10's shape (job/remote.predict_item_10)."""
    make = lambda d: {"shape": [predict.ROWS, SPEED_SHAPE[1]], "dtype": d, "seed": PREDICT_SEED}   # noqa: E731
    return {task_name("predict", d): {"op": "predict", "dtype": d, "make": make(d),
                                      "tensors": {t: t for t in ("x", "g", "dy")}} for d in predict.DTYPES}


def sim_jobs(predict_item_10: bool = False) -> dict:
    """Two jobs: the forward alone (so a broken backward cannot cost forward points), then the backward
    given the reference r, and autograd; and, with ``predict_item_10`` (a CPU grading), item 10's prediction
    in a third."""
    fwd, ag = {}, {}
    cases = all_sim_cases()
    for k in [*traffic_cases(), *HOST_CASES]:
        fwd[task_name("fwd", k)] = _task("forward", k, cases[k], ("x", "g"))
    fwd[again(task_name("fwd", "d"))] = dict(fwd[task_name("fwd", "d")])           # 4.7: the same forward twice
    for k in [*traffic_cases(), "tall", *HOST_CASES]:
        ag[task_name("bwd", k)] = _task("backward", k, cases[k], ("x", "g", "dy", "r"))
    ag[again(task_name("bwd", "d"))] = dict(ag[task_name("bwd", "d")])             # 4.7: the same backward twice
    for k in ["d", *HOST_CASES]:
        ag[task_name("ag", k)] = _task("autograd", k, cases[k])
    for k, c in ROBUST.items():
        job = fwd if c.forward_only else ag
        job[task_name(c.kind, k)] = _task("forward" if c.forward_only else "autograd", k, c,
                                          ("x", "g") if c.forward_only else ("x", "g", "dy"))
    return {"forward": fwd, "autograd": ag, **({"predict": predict_tasks()} if predict_item_10 else {})}


def sim_inputs(reference_r) -> dict:
    """Every simulator task's tensors; the core and host cases also get r, the reference's (fp32) for the
    backward. ``reference_r(x, g, eps)`` computes it (the grader's float64 reference)."""
    cases = all_sim_cases()
    inputs = make_inputs(cases)
    for k in [*traffic_cases(), "tall", *HOST_CASES]:
        inputs[k]["r"] = reference_r(inputs[k]["x"], inputs[k]["g"], cases[k].eps)
    return inputs


def gpu_jobs(speed_only=False) -> dict:
    """{job: tasks} on the GPU, each job with a time limit of its own: 4.4's large N, 4.7's rerun, then item 10's
    timings, so that a slow case (compiling an autotuned kernel at N = 65536, say) costs its own part only.
    ``speed_only`` (RMSNORM_GPU_TASKS=speed, used by calibrate.py): item 10's."""
    jobs = {}
    if not speed_only:
        for part, job in (("4.4", "robust"), ("4.7", "rerun")):
            jobs[job] = {task_name("ag", k): {**_task("autograd", k, c), "device": "cuda"}
                         for k, c in GPU_ROBUST.items() if c.part == part}
        jobs["rerun"][again(task_name("ag", "rerun_gpu"))] = dict(jobs["rerun"][task_name("ag", "rerun_gpu")])
    jobs["speed"] = {task_name("speed", dtype): {"op": "speed", "shape": SPEED_SHAPE, "dtype": dtype}
                     for dtype in ("float32", "bfloat16")}                               # seeds: the job's own
    return jobs
