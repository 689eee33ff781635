"""Hostile submissions, each built on an honest control: what a determined student would try, with the
simulator's source at hand, to earn points its work does not.

``HOSTILE`` maps a name to (its control, what it tries, how the grader stops it, the source). The
control is an honest submission of the same design without the trick (``CONTROLS``);
tests/test_autograder_hostile.py grades both and holds the hostile one to at most the control's points.
How it is stopped is one of ``scan`` (the static scan refuses the file: it earns nothing), ``language``
(the kernel leaves Triton's language: the simulator refuses the launch as Triton's compiler would),
``provenance`` (the judge's process sees that the outputs' values came from memory the host wrote:
autograder/job/judge/provenance.py) and ``judge`` (the grader measures what was touched). The controls:

- ``simple``: tests/corpus/simple.py, correct, lecture-style (every regular point, no extra credit);
- ``pure_pytorch``: tests/corpus/pure_pytorch.py, the whole API in torch, no kernel launched;
- ``x_twice``: simple.py whose forward reads x a second time (item 5 lost);
- ``x_dy_twice``: the same, and a backward that reads x and dy a second time (items 5 and 6 lost);
- ``racy_dg``: simple.py whose backward adds dg into one shared row without atomics (item 8 lost);
- ``no_other``: simple.py whose forward loads x without ``other=`` (its masked lanes are undefined);
- ``float_atomics``: tests/calibration/float_atomics.py, dg by float atomics (no extra credit);
- ``dg_on_host``: simple.py whose backward computes dg with torch on the host (item 3 lost); ``dy_scaled_on_host``:
  simple.py whose backward multiplies dy by 1.0 on the host (item 7 lost);
- ``r_on_host``: simple.py whose wrapper computes r with torch and whose kernel loads it (items 1, 5, 7 lost);
- ``zero_rows_bug`` (r = 0 on a zero row: 4.5 lost), ``validate`` (the host checks that x is finite: 7 lost),
  ``dot_on_host`` (each row's dot computed on the host, loaded by the kernel), ``kernel_sum`` (the M x N partial
  buffer summed by a second kernel: item 9 lost), and ``truncated_r``, ``serial_plain_rmw``, ``two_pass_dg``,
  ``two_pass_fwd``, ``scratch_read_twice``:
  tests/hostile_files/controls/, each says what it loses.

About 490 lines because it is a catalogue: each trick is a few lines of edits to a control, and they are
listed together so that a new one is added where the others are (tests/hostile_files/ holds the ones written
out whole).
"""
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIMPLE = (ROOT / "tests" / "corpus" / "simple.py").read_text()
PURE_PYTORCH = (ROOT / "tests" / "corpus" / "pure_pytorch.py").read_text()

FWD_X_LOAD = "x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)"
FWD_STORE_Y = "    tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)"
DG_STORE = "tl.store(dg_ptr + row * N + cols, dy * x * r, mask=mask)"


def edit(src, *edits):
    """``src`` with each (old, new) replaced once; an edit that no longer applies fails loudly."""
    for old, new in edits:
        assert old in src, f"hostile edit no longer applies: {old!r}"
        src = src.replace(old, new, 1)
    return src


def after_imports(src, code):
    """``src`` with ``code`` right after its backend choice, where triton and tl are bound."""
    marker = "    import triton.language as tl\n"
    return edit(src, (marker, marker + "\n" + code + "\n"))


# one backward launch whose last program sums the partial rows the other programs store: a race (item 8)
LAST_PROGRAM_SUMS = (
    ("def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, N, x_stride, dy_stride,",
     "def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, sums_ptr, out_ptr, n_rows, N, x_stride,\n"
     "                       dy_stride,"),
    (DG_STORE, DG_STORE + "\n    if row == n_rows - 1:\n        acc = tl.zeros([BLOCK], dtype=tl.float32)\n"
                          "        for i in range(0, n_rows):\n"
                          "            acc += tl.load(sums_ptr + i * N + cols, mask=mask, other=0.0)\n"
                          "        tl.store(out_ptr + cols, acc, mask=mask)"),
    ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N,",
     "    out = torch.empty(N, dtype=torch.float32, device=x.device)\n"
     "    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, dg_partial, out, M, N,"),
    ("dg_partial.sum(0).to(g.dtype)", "out.to(g.dtype)"))

# a kernel that adds ``rows`` partial rows into dg, placed after a kernel's last line
ADD_ROWS = """

@triton.jit
def _add_rows(p_ptr, dg_ptr, rows, N, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.load(dg_ptr + cols, mask=cols < N, other=0.0)
    for i in range(0, rows):
        acc += tl.load(p_ptr + i * N + cols, mask=cols < N, other=0.0)
    tl.store(dg_ptr + cols, acc, mask=cols < N)"""

# the lecture's partial dg buffer as eight tensors of M/8 rows: a backward kernel storing into the one its row is
# in, and a kernel that adds each into dg
EIGHT_PARTS = ("part = row // chunk\n    at = (row - part * chunk) * N + cols\n" + "".join(
    f"    {'if' if i == 0 else 'elif'} part == {i}:\n        tl.store(p{i} + at, dy * x * r, mask=mask)\n"
    for i in range(8)) + ADD_ROWS)


# ---- the shape drawn for each grading (items 5, 6 and 9 read it): files that tell it from the others ------------
# A direct call of rmsnorm_forward / rmsnorm_backward (not through TritonRMSNorm) on fp32 rows inside the handout's
# drawn range, not a core shape: what only the drawn shape's tasks are.
DRAWN_DETECT = '''_DEPTH = [0]          # > 0 while TritonRMSNorm runs (the robustness cases go through autograd)


def _is_drawn(x):
    return (_DEPTH[0] == 0 and x.dtype == torch.float32 and x.dim() == 2 and x.is_contiguous()
            and 6 <= x.shape[0] <= 64 and 64 <= x.shape[1] <= 400 and tuple(x.shape) not in CORE)


'''
THROUGH_AUTOGRAD = (
    ("        y, r = rmsnorm_forward(x, g, eps)\n",
     "        _DEPTH[0] += 1\n        try:\n            y, r = rmsnorm_forward(x, g, eps)\n"
     "        finally:\n            _DEPTH[0] -= 1\n"),
    ("        dx, dg = rmsnorm_backward(dy, x, g, r)\n",
     "        _DEPTH[0] += 1\n        try:\n            dx, dg = rmsnorm_backward(dy, x, g, r)\n"
     "        finally:\n            _DEPTH[0] -= 1\n"))
CHEAP_WRONG_KERNELS = '''@triton.jit
def _fake_fwd(x_ptr, g_ptr, y_ptr, r_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, x * g, mask=mask)
    tl.store(r_ptr + row, 1.0)


@triton.jit
def _fake_bwd(x_ptr, dy_ptr, dx_ptr, dg_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + row * N + cols, mask=mask, other=0.0)
    tl.store(dx_ptr + row * N + cols, dy, mask=mask)
    tl.store(dg_ptr + row * N + cols, dy * x, mask=mask)


'''
# the lecture's backward in two passes over x and dy (a row's dot, then dx and its dg terms); with ``launder``, the
# passes read fp32 copies of x and dy a first kernel made
TWO_PASS_KERNELS = '''@triton.jit
def _dot_kernel(x_ptr, g_ptr, dy_ptr, c_ptr, N, x_stride, dy_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(c_ptr + row, tl.sum(dy * g * x, axis=0))


@triton.jit
def _dx_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, c_ptr, dx_ptr, dg_ptr, N, x_stride, dy_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row)
    dot = tl.load(c_ptr + row)
    tl.store(dx_ptr + row * N + cols, dy * g * r - x * (r * r * r) * dot / N, mask=mask)
    tl.store(dg_ptr + row * N + cols, dy * x * r, mask=mask)


@triton.jit
def _copy_rows(x_ptr, dy_ptr, xs_ptr, dys_ptr, N, x_stride, dy_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(xs_ptr + row * N + cols, x, mask=mask)
    tl.store(dys_ptr + row * N + cols, dy, mask=mask)


'''
BWD_LAUNCH = ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
              "                             BLOCK=triton.next_power_of_2(N))\n")


def two_passes_off_d(launder: bool) -> str:
    """The lecture's kernels with a two-pass backward at every shape but (256, 128), the core case d."""
    copy = ("        xs = torch.empty((M, N), dtype=torch.float32, device=x.device)\n"
            "        dys = torch.empty((M, N), dtype=torch.float32, device=x.device)\n"
            "        _copy_rows[(M,)](x2, dy2, xs, dys, N, x2.stride(0), dy2.stride(0), BLOCK=B)\n"
            "        x2, dy2 = xs, dys\n") if launder else ""
    return edit(SIMPLE, ("def _matrix(t):\n", TWO_PASS_KERNELS + "def _matrix(t):\n"),
                (BWD_LAUNCH,
                 "    B = triton.next_power_of_2(N)\n"
                 "    if (M, N) == (256, 128):\n"
                 "        rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
                 "                                 BLOCK=B)\n"
                 "    else:                       # two passes over x and dy\n" + copy +
                 "        c = torch.empty(M, dtype=torch.float32, device=x.device)\n"
                 "        _dot_kernel[(M,)](x2, g, dy2, c, N, x2.stride(0), dy2.stride(0), BLOCK=B)\n"
                 "        _dx_kernel[(M,)](x2, g, dy2, r, c, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
                 "                         BLOCK=B)\n"))

CONTROLS = {
    **{name: (ROOT / "tests" / "hostile_files" / "controls" / f"{name}.py").read_text()
       for name in ("truncated_r", "serial_plain_rmw", "two_pass_dg", "two_pass_fwd", "scratch_read_twice")},
    "simple": SIMPLE,
    "zero_rows_bug": edit(SIMPLE, ("    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)\n",
                                   "    ms = tl.sum(x * x, axis=0) / N\n"
                                   "    r = tl.where(ms > 0, 1.0 / tl.sqrt(ms + eps), 0.0)\n")),
    "validate": edit(SIMPLE, ("def rmsnorm_forward(x, g, eps=1e-5):\n",
                              "def rmsnorm_forward(x, g, eps=1e-5):\n    if not bool(torch.isfinite(x).all()):\n"
                              "        raise ValueError('x has inf or nan')\n")),
    "dot_on_host": edit(SIMPLE, ("dx_ptr, dg_ptr, N, x_stride, dy_stride,",
                                 "dx_ptr, dg_ptr, dot_ptr, N, x_stride, dy_stride,"),
                        ("    dot = tl.sum(dy * g * x, axis=0)\n", "    dot = tl.load(dot_ptr + row)\n"),
                        ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N,",
                         "    dot = (dy2.float() * g.float() * x2.float()).sum(-1)\n"
                         "    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, dot, N,")),
    "kernel_sum": edit(SIMPLE, ("\n\ndef _matrix(t):", ADD_ROWS + "\n\n\ndef _matrix(t):"),
                       ("    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)",
                        "    dg = torch.zeros(N, dtype=torch.float32, device=x.device)\n"
                        "    _add_rows[(triton.cdiv(N, 128),)](dg_partial, dg, M, N, BLOCK=128)\n"
                        "    return dx.view(x.shape), dg.to(g.dtype)")),
    "pure_pytorch": PURE_PYTORCH,
    "x_twice": edit(SIMPLE, (FWD_STORE_Y, "    " + FWD_X_LOAD + "\n" + FWD_STORE_Y)),
    "two_passes_off_d": two_passes_off_d(launder=False),
    "x_dy_twice": edit(SIMPLE, (FWD_STORE_Y, "    " + FWD_X_LOAD + "\n" + FWD_STORE_Y),
                       ("    dot = tl.sum(dy * g * x, axis=0)\n",
                        "    dot = tl.sum(dy * g * x, axis=0)\n"
                        "    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)\n"
                        "    dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)\n")),
    "racy_dg": edit(SIMPLE, (DG_STORE, "tl.store(dg_ptr + cols, tl.load(dg_ptr + cols, mask=mask) + dy * x * r, "
                                       "mask=mask)"),
                    ("dg_partial = torch.empty((M, N)", "dg_partial = torch.zeros((1, N)")),
    "no_other": edit(SIMPLE, (FWD_X_LOAD, FWD_X_LOAD.replace(", other=0.0", ""))),
    "float_atomics": (ROOT / "tests" / "calibration" / "float_atomics.py").read_text(),
    "dy_upcast": edit(SIMPLE, ("    x2, dy2 = _matrix(x), _matrix(dy)\n",
                               "    x2, dy2 = _matrix(x), _matrix(dy).float()\n")),
    "last_program_sums": edit(SIMPLE, *LAST_PROGRAM_SUMS),
    "r_on_host": edit(SIMPLE, ("    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)\n",
                               "    r = tl.load(r_ptr + row)\n"),
                      ("    tl.store(r_ptr + row, r)\n", ""),
                      ("    r = torch.empty(M, dtype=torch.float32, device=x.device)",
                       "    r = torch.rsqrt(x2.float().pow(2).mean(-1) + eps)")),
    "dy_scaled_on_host": edit(SIMPLE, ("        x, g, r = ctx.saved_tensors\n",
                                       "        x, g, r = ctx.saved_tensors\n        dy = dy * 1.0\n")),
    "dg_on_host": edit(SIMPLE, ("    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)",
                                "    dg = (dy2.float() * x2.float() * r[:, None]).sum(0)\n"
                                "    return dx.view(x.shape), dg.to(g.dtype)")),
}

# All the math in torch on the host; kernels only load each output and store it back where it was, so that
# a kernel "stored" every element. {prelude} and {hide} say how the math hides from the grader's watch.
LAUNDERED = '''"""All of the math in torch on the host; the kernels only touch the outputs."""
import torch
{imports}
import mini_triton as triton
tl = triton.language

{prelude}

@triton.jit
def rmsnorm_fwd_kernel(buf_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(buf_ptr + offs, tl.load(buf_ptr + offs, mask=offs < n, other=0.0), mask=offs < n)


@triton.jit
def rmsnorm_bwd_kernel(buf_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(buf_ptr + offs, tl.load(buf_ptr + offs, mask=offs < n, other=0.0), mask=offs < n)


def _touch(t):
    rmsnorm_fwd_kernel[(triton.cdiv(t.numel(), 1024),)](t, t.numel(), BLOCK=1024)


def _forward_math(x, g, eps):
    r = torch.rsqrt(x.float().pow(2).mean(-1) + eps)
    return (x.float() * r[..., None] * g.float()).to(x.dtype).contiguous(), r.reshape(-1).contiguous()


def _backward_math(dy, x, g, r):
    xf, dyf, gf = x.float(), dy.float(), g.float()
    rr = r.view(*x.shape[:-1], 1)
    xhat, dxhat = xf * rr, dyf * gf
    dx = rr * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype).contiguous(), (dyf * xhat).reshape(-1, x.shape[-1]).sum(0).to(g.dtype).contiguous()


def rmsnorm_forward(x, g, eps=1e-5):
    {hide}
        y, r = _forward_math(x, g, eps)
    _touch(y)
    _touch(r)
    return y, r


def rmsnorm_backward(dy, x, g, r):
    {hide}
        dx, dg = _backward_math(dy, x, g, r)
    _touch(dx)
    _touch(dg)
    return dx, dg


class TritonRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g, eps=1e-5):
        y, r = rmsnorm_forward(x, g, eps)
        ctx.save_for_backward(x, g, r)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, g, r = ctx.saved_tensors
        dx, dg = rmsnorm_backward(dy, x, g, r)
        return dx, dg, None


def rmsnorm(x, g, eps=1e-5):
    return TritonRMSNorm.apply(x, g, eps)
'''


def laundered(hide="if True:", imports="", prelude=""):
    return LAUNDERED.format(hide=hide, imports=imports, prelude=prelude)


# The math run from inside a kernel: a @jit body calls a plain Python function of the module.
INSIDE_A_KERNEL = '''_HELD = {}


def _math_now():
    if "dy" in _HELD:
        _HELD["out"] = _backward_math(_HELD.pop("dy"), _HELD.pop("x"), _HELD.pop("g"), _HELD.pop("r"))
    else:
        _HELD["out"] = _forward_math(_HELD.pop("x"), _HELD.pop("g"), _HELD.pop("eps"))


@triton.jit
def _inside(any_ptr):
    _math_now()


class _InsideAKernel:
    def __init__(self, **held):
        _HELD.update(held)

    def __enter__(self):
        _inside[(1,)](torch.zeros(1))

    def __exit__(self, *exc):
        return False
'''


def tricked(body, prelude=""):
    """The laundered submission, each phase first launching a kernel whose ``body`` (on ``buf_ptr``, 4
    elements) reaches past Triton's language."""
    return laundered("with _Trick():", prelude=prelude + f"""
@triton.jit
def _trick(buf_ptr):
{textwrap.indent(body, "    ")}


class _Trick:
    def __enter__(self):
        _trick[(1,)](torch.zeros(4))

    def __exit__(self, *exc):
        return False
""")


# The job's record of each phase, reached through sys.modules without the words `sys.modules`.
PATCH_PHASE = '''from sys import modules as _modules

for _name, _m in list(_modules.items()):
    if _name.endswith("job.phases"):
        _m.Phase.summary = lambda self, roles, _s=_m.Phase.summary: dict(_s(self, roles), host_ops=[])
'''

NUMPY_MATH = '''

def _forward_math(x, g, eps):
    xn, gn = x.detach().float().numpy(), g.detach().float().numpy()
    r = 1.0 / np.sqrt((xn * xn).mean(-1) + eps)
    y = torch.from_numpy((xn * r[..., None] * gn).astype(np.float32)).to(x.dtype)
    return y.contiguous(), torch.from_numpy(r.astype(np.float32)).reshape(-1).contiguous()


def _backward_math(dy, x, g, r):
    xn, dyn, gn = x.detach().float().numpy(), dy.detach().float().numpy(), g.detach().float().numpy()
    rr = r.detach().numpy().reshape(*x.shape[:-1], 1)
    xhat, dxhat = xn * rr, dyn * gn
    dx = rr * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    dg = (dyn * xhat).reshape(-1, x.shape[-1]).sum(0)
    return torch.from_numpy(dx.astype(np.float32)).to(x.dtype), torch.from_numpy(dg.astype(np.float32)).to(g.dtype)
'''

# The laundered submission whose touch stores each output into the front of a buffer five times its size, the
# rest filled by the same launch ({rest}: zeros, or copies of the output): what the launch stored outweighs what
# it loaded of the host's memory, in one storage.
PADDED = '''@triton.jit
def _pad(buf_ptr, n, total, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(buf_ptr + {source}, mask=offs < total, other=0.0)
    tl.store(buf_ptr + offs, {value}, mask=offs < total)


def _touch(t):
    n = t.numel()
    big = torch.zeros(5 * n, dtype=t.dtype)
    _pad[(1,)](big, 1, 1, BLOCK=16)          # seen as a fill of zeros first; then the host's values go in front
    big[:n] = t.reshape(-1)
    _pad[(triton.cdiv(5 * n, 1024),)](big, n, 5 * n, BLOCK=1024)
    return big[:n].view(t.shape)
'''


def padded(rest: str) -> str:
    source, value = {"zeros": ("offs", "tl.where(offs < n, v, 0.0)"), "copies": ("offs % n", "v")}[rest]
    return edit(laundered(), ("def _touch(t):\n    rmsnorm_fwd_kernel[(triton.cdiv(t.numel(), 1024),)](t, t.numel(), "
                              "BLOCK=1024)\n", PADDED.format(source=source, value=value)),
                ("    _touch(y)\n    _touch(r)\n", "    y = _touch(y)\n    r = _touch(r)\n"),
                ("    _touch(dx)\n    _touch(dg)\n", "    dx = _touch(dx)\n    dg = _touch(dg)\n"))


HOSTILE = {
    # 1: laundering: the host computes, a kernel loads the result and stores it where the output is
    "laundered_through_a_touch": ("pure_pytorch", "torch computes every output on the host; a kernel loads each "
                                                  "one and stores it back", "provenance", laundered()),
    "laundered_beside_zeros": ("pure_pytorch", "the host's outputs stored by a kernel beside four times as many zeros, "
                                               "in one storage", "provenance", padded("zeros")),
    "laundered_beside_copies_of_itself": ("pure_pytorch", "the host's outputs stored by a kernel five times over, in "
                                                          "one storage", "provenance", padded("copies")),
    "laundered_from_numpy": ("pure_pytorch", "the math in numpy through .numpy(), then touched by kernels",
                             "provenance", laundered(imports="import numpy as np") + NUMPY_MATH),
    "laundered_through_a_scratch_buffer": (
        "pure_pytorch", "the host's y copied into y's memory by a kernel, from a scratch buffer of the host's",
        "provenance", laundered().replace("    _touch(y)\n    _touch(r)\n", "    _copied(y)\n    _copied(r)\n")
        .replace("def _touch(t):", '''@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n, other=0.0), mask=offs < n)


def _copied(t):
    scratch = t.clone()
    t.zero_()
    _copy[(triton.cdiv(t.numel(), 1024),)](scratch, t, t.numel(), BLOCK=1024)


def _touch(t):''')),
    "dg_partial_laundered": ("dg_on_host", "the host computes dg's terms into the partial buffer, a kernel touches "
                                           "them, the host sums", "provenance",
                             edit(SIMPLE, (DG_STORE, "tl.store(dg_ptr + row * N + cols, tl.load(dg_ptr + row * N + "
                                                     "cols, mask=mask, other=0.0), mask=mask)"),
                                  ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N,",
                                   "    dg_partial.copy_(dy2.float() * x2.float() * r[:, None])\n"
                                   "    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N,"))),
    "r_from_numpy": ("r_on_host", "r computed in numpy on the host, out of the host-op watch's sight, then loaded by "
                                  "the forward kernel", "provenance",
                     edit(CONTROLS["r_on_host"], ("import torch\n", "import numpy as np\nimport torch\n"),
                          ("    r = torch.rsqrt(x2.float().pow(2).mean(-1) + eps)",
                           "    xn = x2.float().numpy()\n"
                           "    r = torch.from_numpy((1.0 / np.sqrt((xn * xn).mean(-1) + eps)).astype(np.float32))"))),
    # 2: host work the grader's watch never sees, its outputs touched by kernels
    "math_inside_a_kernel": ("pure_pytorch", "the torch math called from inside a @jit body", "language",
                             laundered("with _InsideAKernel(x=x, g=g, eps=eps):", prelude=INSIDE_A_KERNEL)
                             .replace("with _InsideAKernel(x=x, g=g, eps=eps):\n        dx, dg",
                                      "with _InsideAKernel(dy=dy, x=x, g=g, r=r):\n        dx, dg")
                             .replace("y, r = _forward_math(x, g, eps)", "y, r = _HELD.pop('out')")
                             .replace("dx, dg = _backward_math(dy, x, g, r)", "dx, dg = _HELD.pop('out')")),
    "dispatch_mode_popped": ("pure_pytorch", "the math under torch's private _disable_current_modes()", "scan",
                             laundered("with _disable_current_modes():",
                                       "from torch.utils._python_dispatch import _disable_current_modes")),
    "torch_dispatch_switch": ("pure_pytorch", "the math under torch._C's switch of dispatch modes", "scan",
                              laundered("with torch._C._DisableTorchDispatch():")),
    "job_phase_patched_through_sys": ("pure_pytorch", "`from sys import modules`, then the job's Phase patched to "
                                                      "forget host ops", "scan", laundered(prelude=PATCH_PHASE)),
    "math_through_a_pointers_buffer": ("pure_pytorch", "a kernel computes with torch on the tensor behind its pointer",
                                       "language", tricked("buf_ptr.buf.tensor.mul_(1.0)")),
    "block_handle_read": ("pure_pytorch", "a kernel reads the torch tensor behind a block", "language",
                          tricked("x = tl.load(buf_ptr + tl.arange(0, 4))\ns = x.handle.sum()")),
    "python_builtin_in_a_kernel": ("pure_pytorch", "type(ptr) in a kernel: the simulator's own class", "language",
                                   tricked("cls = type(buf_ptr)")),
    "host_dict_read_by_a_kernel": ("pure_pytorch", "a kernel reaches a global dict of the host's", "language",
                                   tricked("_BOX.clear()", prelude="_BOX = {}\n")),
    # 3: the simulator's switches, reached through another name for the module
    "race_check_off_through_an_alias": ("racy_dg", "`T = triton`, then the race check off", "scan",
                                        after_imports(CONTROLS["racy_dg"], "T = triton\nT.set_race_mode('off')")),
    "batching_off_through_an_alias": ("racy_dg", "`T = triton`, then the race check and batching off", "scan",
                                      after_imports(CONTROLS["racy_dg"], "T = triton\nT.set_race_mode('off')\n"
                                                                         "T.set_batching(False)")),
    "module_passed_as_an_argument": ("racy_dg", "triton handed to a helper that turns the race check off", "scan",
                                     after_imports(CONTROLS["racy_dg"], "def _off(m):\n    m.set_race_mode('off')\n\n\n"
                                                                        "_off(triton)")),
    "masked_lanes_zeroed_through_an_alias": ("no_other", "masked lanes made to read 0 through a tuple holding triton",
                                             "scan", after_imports(CONTROLS["no_other"],
                                                                   "(triton,)[0].memory.UNDEFINED_FLOAT = 0.0")),
    "order_dependence_cleared_by_an_observer": (
        "float_atomics", "an observer that forgets the order dependence of float atomics", "scan",
        after_imports(CONTROLS["float_atomics"],
                      "def _calm(launch, records):\n    launch.order_dependent = None\n\n\n"
                      "_sim = triton\n_sim.observers.register(_calm, order=15)")),
    "loads_erased_through_an_alias": (
        "x_twice", "the second load of x dropped from a launch's records, through an alias of triton", "scan",
        after_imports(CONTROLS["x_twice"],
                      "def _once(launch, records):\n"
                      "    loads = [r for r in records if r.op == 'load' and r.buf.name == 'x_ptr']\n"
                      "    for r in loads[len(loads) // 2:]:\n"
                      "        records.remove(r)\n\n\n"
                      "_sim = triton\n_sim.observers.register(_once, order=5)")),
    "language_bound_again": ("simple", "`tl` bound again to an object of the file's own", "scan",
                             after_imports(SIMPLE, "class _Any:\n    def __getattr__(self, name):\n"
                                                   "        return triton.language.constexpr\n\n\ntl = _Any()")),
    # 4, 5: what items 5 and 9 measure
    "extra_pass_split_over_two_buffers": (
        "x_twice", "an extra pass over x through two scratch buffers of M·N/2 each", "judge",
        edit(SIMPLE,
             ("def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):",
              "def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, a_ptr, b_ptr, half,\n"
              "                       BLOCK: tl.constexpr):"),
             (FWD_STORE_Y, "    if row < half:\n"
                           "        tl.store(a_ptr + row * N + cols, x, mask=mask)\n"
                           "        x = tl.load(a_ptr + row * N + cols, mask=mask, other=0.0)\n"
                           "    else:\n"
                           "        tl.store(b_ptr + (row - half) * N + cols, x, mask=mask)\n"
                           "        x = tl.load(b_ptr + (row - half) * N + cols, mask=mask, other=0.0)\n"
                           + FWD_STORE_Y),
             ("    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, "
              "BLOCK=triton.next_power_of_2(N))",
              "    half = (M + 1) // 2\n"
              "    a = torch.empty((half, N), dtype=torch.float32, device=x.device)\n"
              "    b = torch.empty((M - half + 1, N), dtype=torch.float32, device=x.device)\n"
              "    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, a, b, half, "
              "BLOCK=triton.next_power_of_2(N))"))),
    "partial_buffer_split_over_eight_storages": (
        "simple", "the lecture's M x N partial dg buffer allocated as eight tensors of M/8 rows", "judge",
        edit(SIMPLE,
             ("def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, N, x_stride, dy_stride,",
              "def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, p0, p1, p2, p3, p4, p5, p6, p7, N,\n"
              "                       x_stride, dy_stride, chunk,"),
             (DG_STORE, EIGHT_PARTS),
             ("    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)\n"
              "    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N,",
              "    chunk = triton.cdiv(M, 8)\n"
              "    parts = [torch.empty((max(1, min(chunk, M - i * chunk)), N), dtype=torch.float32, device=x.device)\n"
              "             for i in range(8)]\n"
              "    dg_partial = torch.zeros(N, dtype=torch.float32, device=x.device)\n"
              "    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, *parts, N,"),
             ("BLOCK=triton.next_power_of_2(N))\n    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)",
              "chunk, BLOCK=triton.next_power_of_2(N))\n"
              "    for i in range(8):\n        if min(chunk, M - i * chunk) > 0:\n"
              "            _add_rows[(triton.cdiv(N, 128),)](parts[i], dg_partial, min(chunk, M - i * chunk), N, "
              "BLOCK=128)\n"
              "    return dx.view(x.shape), dg_partial.to(g.dtype)"))),
    # 6: what the checks did not follow: scalar arguments, the standard library's frames, views of other dtypes
    "r_passed_as_scalar_arguments": (
        "r_on_host", "r computed in numpy, each row's value passed to a kernel as a float argument that stores it",
        "provenance",
        edit(CONTROLS["r_on_host"], ("import torch\n", "import numpy as np\nimport torch\n"),
             ("    r = torch.rsqrt(x2.float().pow(2).mean(-1) + eps)",
              "    r = torch.empty(M, dtype=torch.float32, device=x.device)\n"
              "    t = x2.detach()\n"
              "    xn = ((t.view(torch.int16).numpy().astype(np.int32) << 16).view(np.float32)\n"
              "          if t.dtype == torch.bfloat16 else t.numpy().astype(np.float32)).astype(np.float64)\n"
              "    host_r = 1.0 / np.sqrt((xn * xn).mean(-1) + eps)\n"
              "    for i in range(M):\n"
              "        _put[(1,)](r, i, float(host_r[i]))"),
             ("\n\ndef _matrix(t):", "\n\n@triton.jit\ndef _put(r_ptr, row, value):\n    tl.store(r_ptr + row, value)"
                                   "\n\n\ndef _matrix(t):"))),
    "host_op_run_by_the_standard_library": (
        "dy_upcast", "dy converted to fp32 on the host by a call that collections.Counter makes", "judge",
        edit(SIMPLE, ("import os\n", "import collections\nimport os\n"),
             ("    x2, dy2 = _matrix(x), _matrix(dy)\n",
              "    x2, dy2 = _matrix(x), _matrix(dy)\n"
              "    dy2 = next(iter(collections.Counter(map(torch.Tensor.float, [dy2]))))\n"))),
    "race_through_a_view_of_another_dtype": (
        "last_program_sums", "the last program reads the other programs' fp32 rows through an fp16 view", "judge",
        edit(CONTROLS["last_program_sums"],
             ("            acc += tl.load(sums_ptr + i * N + cols, mask=mask, other=0.0)",
              "            lo = tl.load(sums_ptr + 2 * (i * N + cols), mask=mask, other=0.0).to(tl.int16, "
              "bitcast=True)\n"
              "            hi = tl.load(sums_ptr + 2 * (i * N + cols) + 1, mask=mask, other=0.0).to(tl.int16, "
              "bitcast=True)\n"
              "            acc += ((hi.to(tl.int32) << 16) | (lo.to(tl.int32) & 0xFFFF)).to(tl.float32, bitcast=True)"),
             ("dg_partial, dg_partial, out, M, N,", "dg_partial, dg_partial.view(torch.float16), out, M, N,"))),
    # 7: whole files (tests/hostile_files/): channels of host data and buffers the checks did not measure
    **{name: (control, what, how, (ROOT / "tests" / "hostile_files" / f"{name}.py").read_text())
       for name, control, what, how in (
           ("const_fill_bit_channel", "pure_pytorch", "numpy's outputs written bit by bit as 0x01 bytes into a zero "
                                                      "buffer, which kernels decode", "provenance"),
           ("float_atomics_with_a_race_on_purpose", "float_atomics", "dg by float atomic_add into one row, plus a "
                                                                      "plain load of that row on purpose", "judge"),
           ("launder_wide_load_byte_store", "pure_pytorch", "the host's outputs loaded by a kernel as int64 words and "
                                                            "stored byte by byte", "provenance"),
           ("r_on_host_packed", "r_on_host", "numpy's r packed two values per int64, unpacked and stored by the "
                                             "forward kernel", "provenance"),
           ("r_as_bool_arguments", "r_on_host", "each row's r passed as 32 bool arguments, its row as a view's "
                                                "offset", "provenance"),
           ("r_in_big_int_constexprs", "r_on_host", "r packed 31 values to a 992-bit constexpr int", "provenance"),
           ("copy_match_bool_views", "pure_pytorch", "numpy's outputs as nonzero bytes, taken as bool views that "
                                                     "\"equal\" a kernel's one stored 1 seen through a stride-0 view",
            "provenance"),
           ("copy_match_nan_payloads", "pure_pytorch", "numpy's outputs in NaN payloads that \"equal\" a kernel's one "
                                                       "stored NaN seen through a stride-0 view", "provenance"),
           ("copy_match_changed_positions", "pure_pytorch", "numpy's outputs as which bytes of a 0xFF fill the host "
                                                            "zeroed, each zero \"a copy\" of a kernel's zeros",
            "provenance"),
           ("fill_nan_payloads", "r_on_host", "r in the payloads of NaNs, one written per launch as \"a fill\"",
            "provenance"),
           ("copy_match_tiny_views", "r_on_host", "r as nibbles in one-byte views, each \"a copy\" of a 16-entry "
                                                  "table, shown to the judge by launches of no programs", "provenance"),
           ("buffer_choice_channel", "r_on_host", "r as which of 16 constant buffers is passed for each of 62 tensor "
                                                  "parameters", "provenance"),
           ("buffer_choice_dg_at_the_core_shape", "simple", "dg from numpy through the buffer-choice channel at the "
                                                            "core shape only, for item 9", "provenance"),
           ("offset_lie", "r_on_host", "a TorchFunctionMode tells the recipe each output is where a twin torch fills "
                                       "lies", "judge"),
           ("dg_scalars_lie", "simple", "dg from the host stored from scalars, the recipe told it is a twin torch "
                                        "fills", "judge"),
           ("zero_rows_hostmask", "zero_rows_bug", "which rows are zero passed as a host bitmask", "judge"),
           ("validate_cap64", "validate", "64 small host ops before the host's check of x", "judge"),
           ("truncated_r_corrected", "truncated_r", "a 15-bit r corrected by per-row host scalars", "judge"),
           ("dot_packed_via_grid_map", "dot_on_host", "the host's dot packed 3 bytes a row, computed in maps the "
                                                      "launch's grid runs", "judge"),
           ("dot_packed_after_64_ops", "dot_on_host", "the host's dot packed 3 bytes a row, after 64 small host ops",
            "judge"),
           ("atomic_read_then_xchg", "serial_plain_rmw", "a shared dg row updated by atomic_max(-inf) and "
                                                          "atomic_xchg, programs taking turns", "judge"),
           ("partial_split_over_views", "kernel_sum", "the M x N partial buffer given to 8 launches as 8 views",
            "judge"),
           ("partial_buffer_reused", "kernel_sum", "an M/8 x N partial buffer filled 8 times", "judge"),
           ("partial_split_in_dg_storage", "kernel_sum", "8 partial slices in dg's own storage", "judge"),
           ("read_twice_through_int64_views", "x_dy_twice", "x read twice by the forward, x and dy twice by the "
                                                            "backward, each pass through an int64 view", "judge"),
           ("partial_buffer_as_int32_words", "simple", "the M x N partial dg buffer as int32 words, and 8192 "
                                                       "programs that do nothing", "judge"),
           )},
    "dg_partial_in_dg_storage": (
        "simple", "the M x N partial dg buffer allocated in dg's own storage, past it", "judge",
        edit(SIMPLE, ("    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)\n",
                      "    whole = torch.empty((M + 1, N), dtype=torch.float32, device=x.device)\n"
                      "    dg_partial = whole[1:]\n"),
             ("    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)",
              "    torch.sum(dg_partial, 0, out=whole[0])\n    return dx.view(x.shape), whole[0].to(g.dtype)"))),
    "fused_only_at_core_shapes": (
        "x_dy_twice", "fused at the four 2-D shapes the grader's source names, each kernel launched twice at any "
                      "other shape", "judge",
        after_imports(edit(SIMPLE,
                           ("    rmsnorm_fwd_kernel[(M,)](", "    for _ in range(1 if (M, N) in CORE else 2):\n"
                                                            "        rmsnorm_fwd_kernel[(M,)]("),
                           ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), "
                            "dy2.stride(0),\n                             BLOCK",
                            "    for _ in range(1 if (M, N) in CORE else 2):\n"
                            "        rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), "
                            "dy2.stride(0),\n                                 BLOCK")),
                      "CORE = {(37, 100), (24, 256), (6, 513), (256, 128)}     # the grader's core shapes\n")),
    "lost_update_through_atomic_xchg": (
        "racy_dg", "dg summed into one shared row by a plain load and an atomic_xchg of the sum", "judge",
        edit(SIMPLE, (DG_STORE, "tl.atomic_xchg(dg_ptr + cols, tl.load(dg_ptr + cols, mask=mask) + dy * x * r, "
                                "mask=mask)"),
             ("dg_partial = torch.empty((M, N)", "dg_partial = torch.zeros((1, N)"))),
    "dy_upcast_via_numpy": (
        "dy_upcast", "dy converted to fp32 on the host through numpy", "judge",
        edit(SIMPLE, ("import torch\n", "import numpy as np\nimport torch\n"),
             ("    x2, dy2 = _matrix(x), _matrix(dy)\n",
              "    x2, dy2 = _matrix(x), _matrix(dy)\n"
              "    if dy2.dtype == torch.bfloat16:\n"
              "        dy2 = torch.from_numpy((dy2.detach().view(torch.int16).numpy().astype(np.int32) << 16)"
              ".view(np.float32))\n"
              "    elif dy2.dtype != torch.float32:\n"
              "        dy2 = torch.from_numpy(dy2.detach().numpy().astype(np.float32))\n"))),
    "partial_buffer_passed_as_one_column": (
        "simple", "the lecture's M x N partial dg buffer passed as a one-column view", "judge",
        edit(SIMPLE, ("dg_partial = torch.empty((M, N)", "dg_partial = torch.empty((M + 1, N)"),
             ("rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N,",
              "rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial[:, :1], N,"),
             ("dg_partial.sum(0)", "dg_partial[:M].sum(0)"))),
}
# found by a red team of the drawn shape: what a file does where it tells the drawn shape from the others
_CORE_ONLY = HOSTILE["fused_only_at_core_shapes"][3]
HOSTILE["stops_at_the_drawn_shape"] = (
    "x_dy_twice", "fused at the core shapes only (each kernel launched twice elsewhere), and raising an error at "
                  "the shape it takes for the drawn one: items 1-3 never read it", "judge",
    edit(_CORE_ONLY, ("def _matrix(t):\n", DRAWN_DETECT + "def _matrix(t):\n"), *THROUGH_AUTOGRAD,
         ("def rmsnorm_forward(x, g, eps=1e-5):\n",
          "def rmsnorm_forward(x, g, eps=1e-5):\n    if _is_drawn(x):\n        raise RuntimeError('not supported')\n"),
         ("def rmsnorm_backward(dy, x, g, r):\n",
          "def rmsnorm_backward(dy, x, g, r):\n    if _is_drawn(x):\n        raise RuntimeError('not supported')\n")))
HOSTILE["cheap_wrong_kernels_at_the_drawn_shape"] = (
    "x_dy_twice", "fused at the core shapes only, and at the shape it takes for the drawn one a kernel per phase "
                  "that reads x once and stores wrong y, r, dx and dg", "judge",
    edit(_CORE_ONLY, ("def _matrix(t):\n", DRAWN_DETECT + CHEAP_WRONG_KERNELS + "def _matrix(t):\n"),
         *THROUGH_AUTOGRAD,
         ("    r = torch.empty(M, dtype=torch.float32, device=x.device)\n",
          "    r = torch.empty(M, dtype=torch.float32, device=x.device)\n    if _is_drawn(x):\n"
          "        _fake_fwd[(M,)](x2, g, y, r, N, BLOCK=triton.next_power_of_2(N))\n        return y, r\n"),
         ("    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)\n",
          "    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)\n    if _is_drawn(x):\n"
          "        _fake_bwd[(M,)](x2, dy2, dx, dg_partial, N, BLOCK=triton.next_power_of_2(N))\n"
          "        return dx, dg_partial.sum(0)\n")))
HOSTILE["two_passes_through_kernel_made_copies"] = (
    "two_passes_off_d", "a two-pass backward at every shape but (256, 128), its passes reading fp32 copies of x and "
                        "dy that a first kernel made: x and dy are read once, the copies twice", "judge",
    two_passes_off_d(launder=True))
# the improved reduction (item 9) at the shapes the grader's source names, the lecture's M x N buffer elsewhere
HOSTILE["improved_only_at_core_shapes"] = (
    "simple", "the solution, whose backward gives each program many rows at the four core shapes only and one row "
              "elsewhere (an M x N partial buffer)", "judge",
    edit((ROOT / "solution" / "rmsnorm.py").read_text(),
         ("    programs = _num_programs_bwd(m, per_sm, x.device)\n",
          "    programs = _num_programs_bwd(m, per_sm, x.device) if (m, n) in {(37, 100), (24, 256), (6, 513), "
          "(256, 128)} else m\n")))
# dy upcast on the host inside triton.unrecorded(), which steps out of the simulator's records of host ops (and so
# out of the recipe the judge replays): the replay's fp32 dy is then never made, and its outputs are stale
HOSTILE["host_upcast_unrecorded"] = (
    "dy_upcast", "dy converted to fp32 on the host inside triton.unrecorded(), out of the host-op records", "scan",
    edit(SIMPLE, ("    x2, dy2 = _matrix(x), _matrix(dy)\n",
                  "    with triton.unrecorded():\n        x2, dy2 = _matrix(x), _matrix(dy).float()\n")))
# found by a red team: x and dy read a second time through two tl.atomic_xchg each (take the value, put it back), so
# that a traffic count that took an xchg for a store only would not see the second read
_DY_LOAD = "dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)"


def _through_xchg(name, ptr):
    """``name`` loaded by an atomic_xchg of 0.0 through ``ptr`` and put back by another."""
    return (f"    {name}_old = tl.atomic_xchg({ptr}, 0.0, mask=mask)\n"
            f"    tl.atomic_xchg({ptr}, {name}_old, mask=mask)\n"
            f"    {name} = tl.where(mask, {name}_old, 0.0).to(tl.float32)\n")


_X_BY_XCHG = _through_xchg("x", "x_ptr + row * x_stride + cols")
HOSTILE["read_twice_through_xchg"] = (
    "x_dy_twice", "x and dy read twice, the second time through atomic_xchg pairs that put each value back", "judge",
    edit(CONTROLS["x_dy_twice"], ("    " + FWD_X_LOAD + "\n" + FWD_STORE_Y, _X_BY_XCHG + FWD_STORE_Y),
         ("    dot = tl.sum(dy * g * x, axis=0)\n    " + FWD_X_LOAD + "\n    " + _DY_LOAD + "\n",
          "    dot = tl.sum(dy * g * x, axis=0)\n" + _X_BY_XCHG
          + _through_xchg("dy", "dy_ptr + row * dy_stride + cols"))))


# the grader's run told from its replay on fresh inputs (the red team of the replay): cheap work on the first run, the
# control's on the replay. Stopped: the replay's traffic is held to the first run's (judge/fused.other_work)
_NO_KEY = ("    key = -1                                  # control: no float has these bits, no host dg: the dg "
           "kernel always\n                                              # re-reads x and dy\n"
           "    bits = np.zeros(N, dtype=np.uint32)\n")
HOSTILE["replay_told_apart_by_a_key"] = (
    "two_pass_dg", "the grader's run told from the replay by x[0, 0]'s bits: numpy's dg on the first, two passes on "
                   "the replay", "judge",
    edit(CONTROLS["two_pass_dg"],
         (_NO_KEY, "    key = int(x2.detach().numpy()[0:1, 0:1].view(np.int32).reshape(-1)[0])\n"
                   "    bits = _host_dg(x2, dy2, r)\n")))
_PUBLIC_CASE = '''def _public_case(name, shape):
    """The grader's first inputs of case ``name``, as its source makes them (hidden/cases.py: a generator seeded by
    the case's name): the first x value, as bits, and dg for the reference r."""
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    x = torch.randn(*shape, generator=gen).double()
    torch.rand(shape[-1], generator=gen)
    dy = torch.randn(*shape, generator=gen).double()
    r = (1.0 / torch.sqrt(x.pow(2).mean(-1) + 1e-5)).float().double()
    dg = (dy * x * r[:, None]).sum(0).float()
    return int(x[0, 0].float().view(torch.int32)), dg.numpy().view(np.uint32)


# computed once, at import, from the grader's public seeds: no input of any task is ever read
KNOWN = {(256, 128): _public_case("d", (256, 128))}
KNOWN.update({(m, n): _public_case("tall", (m, n)) for m in range(264, 1033, 8) for n in (64, 128)})
'''
_HOST_DG = CONTROLS["two_pass_dg"][CONTROLS["two_pass_dg"].index("def _host_dg("):
                                   CONTROLS["two_pass_dg"].index("def _tricked_backward(")]
HOSTILE["replay_told_apart_by_public_seeds"] = (
    "two_pass_dg", "the grader's inputs rebuilt from its public seeds: numpy's dg on the first run only", "judge",
    edit(CONTROLS["two_pass_dg"], ("import numpy as np\n", "import zlib\n\nimport numpy as np\n"),
         (_HOST_DG, _PUBLIC_CASE + "\n\n"), (_NO_KEY, "    key, bits = KNOWN[(M, N)]\n"),
         ("            and x2.shape[-1] <= 1024 and x2.shape[0] >= 1 and r.dtype == torch.float32)",
          "            and r.dtype == torch.float32 and tuple(x2.shape) in KNOWN)")))
HOSTILE["replay_told_apart_row_by_row"] = (
    "two_pass_fwd", "a key per row: the host's r and one pass over x on the first run, two passes on the replay",
    "judge",
    edit(CONTROLS["two_pass_fwd"],
         ("    keys = np.full(M, 0xFFFFFFFF, dtype=np.uint32)                  # control: bits no input value has\n",
          "    keys = np.zeros(M, dtype=np.uint32)\n"),
         ("        xn = x2.detach().numpy()\n",
          "        xn = x2.detach().numpy()\n        keys = np.ascontiguousarray(xn[:, 0]).view(np.uint32)\n")))
# the replay's second pass made of atomics (an atomic_add of -0.0 reads and changes nothing): held to the first run's
# atomics too (the red team of the replay's traffic)
HOSTILE["replay_reads_through_atomics"] = (
    "two_pass_dg", "replay_told_apart_by_a_key, the replay's second reads of x and dy made by atomic_add(-0.0)",
    "judge",
    edit(HOSTILE["replay_told_apart_by_a_key"][3],
         ("        acc = tl.load(host_ptr + cols, mask=mask, other=0.0)\n",
          "        acc = h\n"),
         ("    acc = tl.zeros([BLOCK], dtype=tl.float32)\n",
          "    acc = tl.zeros([BLOCK], dtype=tl.float32)\n    h = tl.load(host_ptr + cols, mask=mask, other=0.0)\n"),
         ("            x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)\n"
          "            dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)\n"
          "            acc += dy * x * tl.load(r_ptr + row)\n",
          "            x = tl.atomic_add(x_ptr + row * x_stride + cols, -0.0, mask=mask)\n"
          "            dy = tl.atomic_add(dy_ptr + row * dy_stride + cols, -0.0, mask=mask)\n"
          "            rr = tl.atomic_add(r_ptr + row + cols * 0, -0.0, mask=cols < 1)\n"
          "            rv = tl.sum(tl.where(cols < 1, rr, 0.0), axis=0)\n"
          "            acc += tl.where(mask, dy * x * rv, 0.0)\n")))
HOSTILE["race_on_purpose_buys_a_second_read"] = (
    "scratch_read_twice", "a scratch buffer's second read made by a no-op atomic_max that races with other programs, "
                          "for item 6 to leave it to the race", "judge",
    edit(CONTROLS["scratch_read_twice"], ("ATOMIC_FLAG = False", "ATOMIC_FLAG = True")))
HOSTILE["replay_forward_through_atomics"] = (
    "two_pass_fwd", "replay_told_apart_row_by_row, the replay's passes over x and g and its stores of y and r made by "
                    "atomics, the first run's plain accesses made on both", "judge",
    edit(HOSTILE["replay_told_apart_row_by_row"][3],
         ("    else:\n        tl.store(flag_ptr + row, 0)\n",
          "    else:\n"
          "        g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n"
          "        r = tl.load(tab_ptr + M + row)\n"
          "        tl.store(y_ptr + row * y_stride + cols, x * 0.0 * g, mask=mask)\n"
          "        tl.store(r_ptr + row, r * 0.0)\n"
          "        tl.store(flag_ptr + row, 0)\n"),
         ("        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)\n"
          "        r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)\n"
          "        tl.store(r_ptr + row, r)\n"
          "        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)\n"
          "        g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)\n"
          "        tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)\n",
          "        x = tl.where(mask, tl.atomic_add(x_ptr + row * x_stride + cols, -0.0, mask=mask), 0.0)"
          ".to(tl.float32)\n"
          "        r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)\n"
          "        tl.atomic_xchg(r_ptr + row + cols * 0, r + cols * 0.0, mask=cols < 1)\n"
          "        x = tl.where(mask, tl.atomic_add(x_ptr + row * x_stride + cols, -0.0, mask=mask), 0.0)"
          ".to(tl.float32)\n"
          "        g = tl.where(mask, tl.atomic_add(g_ptr + cols, -0.0, mask=mask), 0.0).to(tl.float32)\n"
          "        tl.atomic_xchg(y_ptr + row * y_stride + cols, (x * r * g).to(y_ptr.dtype.element_ty), "
          "mask=mask)\n")))
# host work on dy run by autograd from a hook that is a function of torch's: no frame of rmsnorm.py names it
HOSTILE["host_work_in_a_torch_hook"] = (
    "dy_scaled_on_host", "dy * 1.0 computed by a hook registered on y, functools.partial(torch.mul, other=1.0)",
    "judge",
    edit(SIMPLE, ("import torch\n", "import functools\n\nimport torch\n"),
         ("def rmsnorm(x, g, eps=1e-5):\n    return TritonRMSNorm.apply(x, g, eps)\n",
          "def rmsnorm(x, g, eps=1e-5):\n    y = TritonRMSNorm.apply(x, g, eps)\n"
          "    if y.requires_grad:\n"
          "        y.register_hook(functools.partial(torch.mul, other=1.0))\n"
          "    return y\n")))
# a second run with masked-off lanes read as 0.0, a launch that raised and was caught, an order dependence that
# only the grader's inputs avoid: what a launch did on the grader's inputs, held against its replay
for _name, _what in (
        ("zero_lane_rerun", "kernels that compute nothing but NaN, and torch's outputs on the run with masked lanes "
                            "read as 0.0, which the host tells apart"),
        ("raise_in_first_run", "numpy's results stored by one-pass kernels, the unfused kernels launched too and "
                               "failing on the grader's inputs only (the host catches it)"),
        ("determinism_key_switch", "dg from numpy, handed over one scalar per launch, where g[0] is the grader's "
                                   "key; float atomics elsewhere")):
    _source = (ROOT / "tests" / "hostile_files" / f"{_name}.py").read_text()
    CONTROLS[f"{_name}_off"] = edit(_source, ("if M and _rerun(r):", "if False:"),
                                    ("if M and _rerun(dg_partial):", "if False:")) \
        if _name == "zero_lane_rerun" else edit(_source, ("TRICK = True", "TRICK = False"))
    HOSTILE[_name] = (f"{_name}_off", _what, "judge", _source)

# r kept on ctx out of autograd's sight (4.6 charges it), hidden in a dict
CONTROLS["r_as_ctx_attribute"] = edit(SIMPLE, ("        ctx.save_for_backward(x, g, r)\n",
                                               "        ctx.save_for_backward(x, g)\n        ctx.r = r\n"),
                                      ("        x, g, r = ctx.saved_tensors\n",
                                       "        x, g = ctx.saved_tensors\n        r = ctx.r\n"))
HOSTILE["r_kept_in_a_dict_on_ctx"] = (
    "r_as_ctx_attribute", "r kept on ctx inside a dict, where a check of ctx's tensor attributes once did not look",
    "judge", edit(SIMPLE, ("        ctx.save_for_backward(x, g, r)\n",
                           "        ctx.save_for_backward(x, g)\n        ctx.kept = {'r': r}\n"),
                  ("        x, g, r = ctx.saved_tensors\n",
                   "        x, g = ctx.saved_tensors\n        r = ctx.kept['r']\n")))

# inputs the file does not support, refused by its own raise: one raise for every feature, or a raise dressed as
# Triton's compile error, against a raise of its own per feature. A raise of the file's own is charged wherever it
# stops a case; it is no crash met by accident (one charge) nor a kernel Triton refuses (a compile rule)
_FEATURES = ("x.dim() > 3", "x.stride(-1) != 1", "x.shape[-1] > 16384", "eps >= 0.01")
_ONE_RAISE = ("def _unsupported():\n    raise NotImplementedError('not supported yet')\n\n\n"
              "def rmsnorm_forward(x, g, eps=1e-5):\n    if " + " or ".join(_FEATURES) + ":\n        _unsupported()\n")
CONTROLS["a_raise_per_feature"] = edit(SIMPLE, ("def rmsnorm_forward(x, g, eps=1e-5):\n",
                                                "def rmsnorm_forward(x, g, eps=1e-5):\n" + "".join(
                                                    f"    if {f}:\n        raise NotImplementedError('{f}')\n"
                                                    for f in _FEATURES)))
HOSTILE["one_raise_for_four_features"] = (
    "a_raise_per_feature", "4-D inputs, strided columns, long rows and large eps refused by one raise in one helper",
    "judge", edit(SIMPLE, ("def rmsnorm_forward(x, g, eps=1e-5):\n", _ONE_RAISE)))
HOSTILE["a_raise_dressed_as_a_compile_error"] = (
    "a_raise_per_feature", "the same features refused by one raise of the file's own CompilationError class",
    "judge", edit(SIMPLE, ("def rmsnorm_forward(x, g, eps=1e-5):\n",
                           "class CompilationError(Exception):\n    pass\n\n\n" +
                           _ONE_RAISE.replace("NotImplementedError", "CompilationError"))))
HOSTILE["a_raise_routed_through_torch"] = (
    "a_raise_per_feature", "the same features refused by one torch call that fails (torch.broadcast_shapes), so "
                           "that the error's last frame is torch's", "judge",
    edit(SIMPLE, ("def rmsnorm_forward(x, g, eps=1e-5):\n",
                  _ONE_RAISE.replace("raise NotImplementedError('not supported yet')",
                                     "torch.broadcast_shapes((2,), (3,))"))))
# the same refusal dressed as an error of the simulator's own code: a host helper of its made to fail (triton.cdiv),
# or a kernel called without its grid (the simulator's client raises that on the submission's side, no
# launch served). Only a launch the judge served and saw raise is a kernel's crash, charged once
HOSTILE["a_raise_inside_the_simulators_host_helper"] = (
    "a_raise_per_feature", "the same features refused by a call of triton.cdiv that fails inside the simulator's "
                           "code (None for its first argument), so that the error's last frame is the simulator's",
    "judge", edit(SIMPLE, ("def rmsnorm_forward(x, g, eps=1e-5):\n",
                           _ONE_RAISE.replace("raise NotImplementedError('not supported yet')",
                                              "triton.cdiv(None, 1)"))))
HOSTILE["a_raise_through_a_kernel_called_without_a_grid"] = (
    "a_raise_per_feature", "the same features refused by calling a kernel without its grid, which the simulator's "
                           "client refuses as Triton's compiler would, before any launch", "judge",
    edit(SIMPLE, ("def rmsnorm_forward(x, g, eps=1e-5):\n",
                  _ONE_RAISE.replace("raise NotImplementedError('not supported yet')", "rmsnorm_fwd_kernel(1)"))))
# the same features answered with outputs of a dtype the grader cannot read as numbers (quantized, bit-packed): the
# judge's trouble reading them was once charged as one crash; now such an output is one the file did not return, in
# every part whose case it reaches
_ODD = ("def rmsnorm_forward(x, g, eps=1e-5):\n",
        "def _odd(x):\n    return {}\n\n\ndef rmsnorm_forward(x, g, eps=1e-5):\n"
        "    if " + " or ".join(_FEATURES) + ":\n        return _odd(x), _odd(x)\n")
_ODD_AG = ("def rmsnorm(x, g, eps=1e-5):\n",
           "def rmsnorm(x, g, eps=1e-5):\n    if " + " or ".join(_FEATURES) + ":\n        return _odd(x)\n")
for _name, _make in (("quantized", "torch.quantize_per_tensor(torch.zeros(x.shape), 1.0, 0, torch.qint8)"),
                     ("bit_packed", "torch.zeros(x.shape, dtype=torch.uint8).view(torch.bits8)")):
    HOSTILE[f"refused_features_answered_{_name}"] = (
        "a_raise_per_feature", f"the same features answered with outputs of a dtype the grader cannot read ({_make})",
        "judge", edit(SIMPLE, (_ODD[0], _ODD[1].format(_make)), _ODD_AG))
# the same host work after a hook that clones dy: the op then reads memory of no activation's, but as much of it
HOSTILE["host_work_in_a_torch_hook_on_a_clone"] = (
    "dy_scaled_on_host", "dy cloned by one hook registered on y (torch.Tensor.clone), then multiplied by 1.0 by "
                         "another, functools.partial(torch.mul, other=1.0)", "judge",
    edit(SIMPLE, ("import torch\n", "import functools\n\nimport torch\n"),
         ("def rmsnorm(x, g, eps=1e-5):\n    return TritonRMSNorm.apply(x, g, eps)\n",
          "def rmsnorm(x, g, eps=1e-5):\n    y = TritonRMSNorm.apply(x, g, eps)\n"
          "    if y.requires_grad:\n"
          "        y.register_hook(torch.Tensor.clone)\n"
          "        y.register_hook(functools.partial(torch.mul, other=1.0))\n"
          "    return y\n")))
# the same, its copy kernel launched on 8 programs a row: the room a persistent grid of a fixed size gets for
# programs left without rows, taken by a grid that grows with the rows
HOSTILE["idle_programs_widen_the_scratch_room"] = (
    "two_passes_off_d", "two_passes_through_kernel_made_copies, its copy kernel on 8·M programs, most of them idle",
    "judge", edit(HOSTILE["two_passes_through_kernel_made_copies"][3],
                  ("def _copy_rows(x_ptr, dy_ptr, xs_ptr, dys_ptr, N, x_stride, dy_stride, BLOCK: tl.constexpr):\n"
                   "    row = tl.program_id(0).to(tl.int64)\n    cols = tl.arange(0, BLOCK)\n    mask = cols < N\n",
                   "def _copy_rows(x_ptr, dy_ptr, xs_ptr, dys_ptr, M, N, x_stride, dy_stride, BLOCK: tl.constexpr):\n"
                   "    row = tl.program_id(0).to(tl.int64)\n    cols = tl.arange(0, BLOCK)\n"
                   "    mask = (cols < N) & (row < M)\n"),
                  ("_copy_rows[(M,)](x2, dy2, xs, dys, N,", "_copy_rows[(8 * M,)](x2, dy2, xs, dys, M, N,")))
# the host's check of x made where the CPU's memory lets it be free: numpy reads x with no torch op (a copy from
# the device, which item 7 charges, on a GPU); or a recorder of the file's own put in the simulator's module
HOSTILE["validate_through_numpy"] = (
    "validate", "the host's check of x through numpy (x.detach().numpy()), which no torch op records on a CPU",
    "judge", edit(SIMPLE, ("import torch\n", "import numpy as np\nimport torch\n"),
                  ("def rmsnorm_forward(x, g, eps=1e-5):\n",
                   "def rmsnorm_forward(x, g, eps=1e-5):\n    if not np.isfinite(x.detach().numpy()).all():\n"
                   "        raise ValueError('x has inf or nan')\n")))
CONTROLS["validate_kernel_sum"] = edit(CONTROLS["kernel_sum"], ("def rmsnorm_forward(x, g, eps=1e-5):\n",
                                                             "def rmsnorm_forward(x, g, eps=1e-5):\n"
                                                             "    if not bool(torch.isfinite(x).all()):\n"
                                                             "        raise ValueError('x has inf or nan')\n"))
HOSTILE["recorder_replaced_through_update_wrapper"] = (
    "validate_kernel_sum", "the host's check of x, and a recorder of host ops that records nothing, put in the "
                           "simulator's module by functools.update_wrapper(triton, holder, updated=('__dict__',))",
    "judge",
    edit(CONTROLS["validate_kernel_sum"], ("import torch\n", "import contextlib\nimport functools\n\nimport torch\n"),
         ("def rmsnorm_forward(x, g, eps=1e-5):\n",
          "class _NoHostOps:\n    host_ops = None\n    launches = []\n\n\n"
          "@contextlib.contextmanager\ndef _quiet_record(host_ops=False, poison=False):\n    yield _NoHostOps()\n\n\n"
          "def _holder():\n    pass\n\n\n_holder.record = _quiet_record\n"
          "if os.environ.get('MINI_TRITON') == '1' or not torch.cuda.is_available():\n"
          "    functools.update_wrapper(triton, _holder, assigned=(), updated=('__dict__',))\n\n\n"
          "def rmsnorm_forward(x, g, eps=1e-5):\n")))

# Fused, improved or race-free only in the part of the inputs' space the core shapes cover (fp32, short rows, few
# rows): each with the draw that shows it (items 5, 6 and 9 read a shape and a dtype drawn for each grading, and
# item 9 a shape of many rows, hidden/cases.py). NARROW: name -> (control, what, source, (drawn, tall)).
_TWO_PASSES = ((("def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):",
                 "def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr,\n"
                 "                       TWO: tl.constexpr):"),
                ("    " + FWD_X_LOAD + "\n", "    " + FWD_X_LOAD + "\n    if TWO:\n        " + FWD_X_LOAD + "\n"),
                ("dx_ptr, dg_ptr, N, x_stride, dy_stride,\n                       BLOCK: tl.constexpr):",
                 "dx_ptr, dg_ptr, N, x_stride, dy_stride,\n"
                 "                       BLOCK: tl.constexpr, TWO: tl.constexpr):"),
                ("    dot = tl.sum(dy * g * x, axis=0)\n",
                 "    if TWO:\n"
                 "        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)\n"
                 "    dot = tl.sum(dy * g * x, axis=0)\n"),
                ("eps, BLOCK=triton.next_power_of_2(N))", "eps, BLOCK=triton.next_power_of_2(N), TWO=TWO_PASSES)"),
                ("                             BLOCK=triton.next_power_of_2(N))\n",
                 "                             BLOCK=triton.next_power_of_2(N), TWO=TWO_PASSES)\n")))


def _passes(when: str) -> str:
    src = edit(SIMPLE, *_TWO_PASSES)
    return src.replace("TWO=TWO_PASSES", f"TWO={when}")


CONTROLS["two_passes_everywhere"] = _passes("True")
CONTROLS["partial_row_per_row"] = edit((ROOT / "solution" / "rmsnorm.py").read_text(),
                                       ("    programs = _num_programs_bwd(m, per_sm, x.device)\n",
                                        "    programs = m\n"))
_SHARED = (("                       BLOCK: tl.constexpr):\n    row = tl.program_id(0).to(tl.int64)\n"
            "    cols = tl.arange(0, BLOCK)\n    mask = cols < N\n    x = tl.load(x_ptr + row * x_stride",
            "                       BLOCK: tl.constexpr, SHARED: tl.constexpr):\n"
            "    row = tl.program_id(0).to(tl.int64)\n"
            "    cols = tl.arange(0, BLOCK)\n    mask = cols < N\n    x = tl.load(x_ptr + row * x_stride"),
           ("    " + DG_STORE + "\n",
            "    if SHARED:\n"
            "        tl.store(dg_ptr + cols, tl.load(dg_ptr + cols, mask=mask, other=0.0) + dy * x * r, "
            "mask=mask)\n    else:\n        " + DG_STORE + "\n"),
           ("    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)\n",
            "    shared = SHARE_WHEN\n"
            "    dg_partial = torch.zeros((1 if shared else M, N), dtype=torch.float32, device=x.device)\n"),
           ("                             BLOCK=triton.next_power_of_2(N))\n",
            "                             BLOCK=triton.next_power_of_2(N), SHARED=shared)\n"))
CONTROLS["shared_dg_row"] = edit(SIMPLE, *_SHARED).replace("SHARE_WHEN", "True")
NARROW = {
    "fused_only_in_fp32": ("two_passes_everywhere", "x read twice by both kernels for 16-bit inputs only",
                           _passes("x.element_size() < 4"), ((40, 1500, "bfloat16"), (264, 64))),
    "fused_only_for_short_rows": ("two_passes_everywhere", "x read twice by both kernels for rows over 1024",
                                  _passes("N > 1024"), ((40, 1500, "float32"), (264, 64))),
    "improved_only_up_to_512_rows": ("partial_row_per_row", "the solution, one partial dg row per input row above "
                                                            "512 rows",
                                     edit((ROOT / "solution" / "rmsnorm.py").read_text(),
                                          ("    programs = _num_programs_bwd(m, per_sm, x.device)\n",
                                           "    programs = _num_programs_bwd(m, per_sm, x.device) if m <= 512 "
                                           "else m\n")),
                                     ((20, 200, "float32"), (1000, 64))),
    "race_only_above_512_rows": ("shared_dg_row", "every program adds into one shared dg row without an atomic, "
                                                  "above 512 rows only",
                                 edit(SIMPLE, *_SHARED).replace("SHARE_WHEN", "M > 512"),
                                 ((20, 200, "float32"), (1000, 64))),
}

# host work at the shapes item 7 once did not read: the row dots on the host for small inputs, in the kernel at d
_DOT_ELSEWHERE = edit(
    SIMPLE, ("dx_ptr, dg_ptr, N, x_stride, dy_stride,\n                       BLOCK: tl.constexpr):",
             "dx_ptr, dg_ptr, dot_ptr, N, x_stride, dy_stride,\n"
             "                       BLOCK: tl.constexpr, HOST_DOT: tl.constexpr):"),
    ("    dot = tl.sum(dy * g * x, axis=0)\n",
     "    if HOST_DOT:\n        dot = tl.load(dot_ptr + row)\n    else:\n        dot = tl.sum(dy * g * x, axis=0)\n"),
    (BWD_LAUNCH,
     "    host_dot = M * N < 32768      # small inputs: the row dots on the host\n"
     "    dot = (dy2.float() * g.float() * x2.float()).sum(-1) if host_dot else r\n"
     "    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, dot, N, x2.stride(0), dy2.stride(0),\n"
     "                             BLOCK=triton.next_power_of_2(N), HOST_DOT=host_dot)\n"))
CONTROLS["host_dot_everywhere"] = edit(_DOT_ELSEWHERE, ("host_dot = M * N < 32768", "host_dot = True"))
HOSTILE["host_dot_except_at_d"] = ("host_dot_everywhere", "the backward's row dots on the host for inputs smaller "
                                                          "than 256 x 128, in the kernel at that shape", "judge",
                                   _DOT_ELSEWHERE)

# the host's check of x through a library's code, which reads the tensor itself (np.copy's __array__, numpy's
# from_dlpack, json's default=): the readbacks item 7 sees wherever the file's call leads
for _name, _check in (("validate_through_np_copy", "np.isfinite(np.copy(x.detach())).all()"),
                      ("validate_through_dlpack", "np.isfinite(np.from_dlpack(x.detach())).all()"),
                      ("validate_through_json_default",
                       "all(map(math.isfinite, json.loads(json.dumps(x.detach().reshape(-1), "
                       "default=torch.Tensor.tolist))))")):
    HOSTILE[_name] = (
        "validate", f"the host's check of x as `{_check}`", "judge",
        edit(SIMPLE, ("import torch\n", "import json\nimport math\n\nimport numpy as np\nimport torch\n"),
             ("def rmsnorm_forward(x, g, eps=1e-5):\n",
              f"def rmsnorm_forward(x, g, eps=1e-5):\n    if not {_check}:\n"
              "        raise ValueError('x has inf or nan')\n")))

# scratch kept where item 6 once did not look (past dg in dg's own storage), and a host check over a kernel's copy
_IN_DG = edit(HOSTILE["two_passes_through_kernel_made_copies"][3],
              ("    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)\n", ""),
              ("    if (M, N) == (256, 128):\n        rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, "
               "x2.stride(0), dy2.stride(0),\n                                 BLOCK=B)\n"
               "    else:                       # two passes over x and dy\n"
               "        xs = torch.empty((M, N), dtype=torch.float32, device=x.device)\n"
               "        dys = torch.empty((M, N), dtype=torch.float32, device=x.device)\n"
               "        _copy_rows[(M,)](x2, dy2, xs, dys, N, x2.stride(0), dy2.stride(0), BLOCK=B)\n"
               "        x2, dy2 = xs, dys\n        c = torch.empty(M, dtype=torch.float32, device=x.device)\n"
               "        _dot_kernel[(M,)](x2, g, dy2, c, N, x2.stride(0), dy2.stride(0), BLOCK=B)\n"
               "        _dx_kernel[(M,)](x2, g, dy2, r, c, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
               "                         BLOCK=B)\n    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)\n",
               "    k = 4 // g.element_size()                  # copies of x and dy and the partial rows, past dg\n"
               "    start = (N + k - 1) // k * k\n"
               "    raw = torch.empty(start + 3 * M * N * k, dtype=g.dtype, device=x.device)\n"
               "    whole = raw[start:].view(torch.float32).view(3 * M, N)\n"
               "    xs, dys, dg_partial = whole[0:M], whole[M:2 * M], whole[2 * M:]\n"
               "    _copy_rows[(M,)](x2, dy2, xs, dys, N, x2.stride(0), dy2.stride(0), BLOCK=B)\n"
               "    x2, dy2 = xs, dys\n    c = torch.empty(M, dtype=torch.float32, device=x.device)\n"
               "    _dot_kernel[(M,)](x2, g, dy2, c, N, x2.stride(0), dy2.stride(0), BLOCK=B)\n"
               "    _dx_kernel[(M,)](x2, g, dy2, r, c, dx, dg_partial, N, x2.stride(0), dy2.stride(0), BLOCK=B)\n"
               "    raw[:N].copy_(dg_partial.sum(0))\n    return dx.view(x.shape), raw[:N]\n"))
_COPY_BOTH = "    _copy_rows[(M,)](x2, dy2, xs, dys, N, x2.stride(0), dy2.stride(0), BLOCK=B)\n    x2, dy2 = xs, dys\n"
CONTROLS["two_passes_over_x_and_dy"] = edit(_IN_DG, (_COPY_BOTH, "    pass\n"))
HOSTILE["scratch_in_dg_storage"] = ("two_passes_over_x_and_dy", "two passes over copies of x and dy kept in dg's "
                                                                "storage past dg", "judge", _IN_DG)
_CHECK_COPY = edit(_IN_DG, (_COPY_BOTH, _COPY_BOTH + "    lo, hi = torch.aminmax(dys)\n"
                            "    if not (bool(torch.isfinite(lo)) and bool(torch.isfinite(hi))):\n"
                            "        raise ValueError('dy has inf or nan')\n"))
CONTROLS["validate_dy_itself"] = edit(_CHECK_COPY, ("    x2, dy2 = xs, dys\n    lo, hi = torch.aminmax(dys)\n",
                                                    "    lo, hi = torch.aminmax(dy2)\n    x2, dy2 = xs, dys\n"))
HOSTILE["validate_a_kernels_copy"] = ("validate_dy_itself", "the host's check of dy as torch.aminmax over a kernel's "
                                                            "copy of it", "judge", _CHECK_COPY)

# The submission's own process edits what it reports (a red team with the whole source): the host ops its lines
# ran dropped from the simulator's record (reached through frames, a profile hook, the recorders' module, or a
# recorder told a kernel is running), a check made where no recorder looks (torch's printer, TensorBase's own
# numpy, a function relabelled as torch's), x's storage lied about to the grader. Item 7 is the judge's replay's
# (rmsnorm_testkit/dataflow.py): a check whose result reaches nothing costs no point, seen or not, and host work a
# kernel loads is in the replay whatever the record says.
_FWD = "def rmsnorm_forward(x, g, eps=1e-5):\n"
_RAISE = "        raise ValueError('x has inf or nan')\n"
_DROP_MINE = ("            host_ops[:] = [o for o in host_ops if 'rmsnorm.py' not in str(getattr(o, 'where', ''))]\n")
_FRAMES = ("def _frames():\n    try:\n        raise RuntimeError('where am I')\n    except RuntimeError:\n"
           "        tb = sys.exc_info()[2]\n    f = operator.attrgetter('tb_frame')(tb)\n    while f is not None:\n"
           "        yield f\n        f = operator.attrgetter('f_back')(f)\n\n\n")
_HIDERS = {
    "frames": ("import operator\nimport sys\n", _FRAMES +
               "def _forget():\n    for f in _frames():\n"
               "        phase = operator.attrgetter('f_locals')(f).get('phase')\n"
               "        host_ops = getattr(getattr(phase, 'rec', None), 'host_ops', None)\n"
               "        if isinstance(host_ops, list):\n" + _DROP_MINE + "            return\n\n\n"),
    "profile": ("import sys\n", "_SEEN = []\n\n\ndef _watch(frame, event, arg):\n"
                "    if event == 'return' and type(arg).__name__ == 'Phase':\n        _SEEN[:] = [arg]\n\n\n"
                "sys.setprofile(_watch)\n\n\ndef _forget():\n    for phase in _SEEN:\n"
                "        host_ops = getattr(getattr(phase, 'rec', None), 'host_ops', None)\n"
                "        if isinstance(host_ops, list):\n" + _DROP_MINE + "\n\n"),
    "recorders": ("import operator\n", "def _forget():\n"
                  "    for rec in operator.attrgetter('stats._RECORDERS')(triton):\n"
                  "        host_ops = getattr(rec, 'host_ops', None)\n        if isinstance(host_ops, list):\n"
                  + _DROP_MINE + "\n\n"),
}
for _how, (_imports, _code) in _HIDERS.items():
    HOSTILE[f"check_dropped_from_the_record_by_{_how}"] = (
        "validate", f"the host's check of x, then its host ops dropped from the simulator's record ({_how})", "judge",
        edit(CONTROLS["validate"], ("import torch\n", _imports + "\nimport torch\n"), (_FWD, _code + _FWD),
             (_RAISE, _RAISE + "    _forget()\n")))
HOSTILE["dy_upcast_dropped_from_the_record"] = (
    "dy_upcast", "dy converted to fp32 on the host, then the conversion dropped from the simulator's record",
    "judge",
    edit(CONTROLS["dy_upcast"], ("import torch\n", _HIDERS["recorders"][0] + "\nimport torch\n"),
         (_FWD, _HIDERS["recorders"][1] + _FWD),
         ("    x2, dy2 = _matrix(x), _matrix(dy).float()\n", "    x2, dy2 = _matrix(x), _matrix(dy).float()\n"
                                                           "    _forget()\n")))
HOSTILE["check_while_a_kernel_seems_to_run"] = (
    "validate", "the host's check of x while the simulator's runtime.CURRENT, set by functools.update_wrapper, says a "
                "kernel runs", "judge",
    edit(CONTROLS["validate"], ("import torch\n", "import functools\nimport operator\n\nimport torch\n"),
         (_FWD, "class _Flag:\n    pass\n\n\nclass _Busy:\n    launch = None\n\n\ndef _set_current(value):\n"
                "    _Flag.CURRENT = value\n"
                "    functools.update_wrapper(operator.attrgetter('runtime')(triton), _Flag, assigned=('CURRENT',),\n"
                "                             updated=())\n\n\n" + _FWD),
         ("    if not bool(torch.isfinite(x).all()):\n",
          "    _set_current(_Busy())\n    finite = bool(torch.isfinite(x).all())\n    _set_current(None)\n"
          "    if not finite:\n")))
_NP_CHECK = ("def _finite(x, read):\n    a = x.detach()\n    if a.dtype == torch.bfloat16:\n"
             "        v = read(a.view(torch.int16))\n        return not bool(((v & 0x7F80) == 0x7F80).any())\n"
             "    return bool(np.isfinite(read(a)).all())\n\n\n")
_RELABEL = ("def _relabeled(fn):\n    code = operator.attrgetter('__code__')(fn).replace(\n"
            "        co_filename=operator.attrgetter('__init__.__code__.co_filename')(\n"
            "            torch.overrides.TorchFunctionMode))\n"
            "    return type(fn)(code, operator.attrgetter('__globals__')(fn), None, "
            "operator.attrgetter('__defaults__')(fn))\n\n\n")
for _name, _what, _before, _read in (
        ("check_through_tensorbase_numpy", "numpy through TensorBase's own method, under the kit's wrapper",
         "_BASE = operator.attrgetter('__bases__')(torch.Tensor)[0]\n", "_BASE.numpy"),
        ("check_through_relabelled_numpy", "x.numpy() from a function whose code is relabelled as torch's file",
         _RELABEL + "_READ = _relabeled(lambda t: t.numpy())\n", "_READ")):
    HOSTILE[_name] = ("validate", f"the host's check of x through {_what}", "judge",
                      edit(SIMPLE, ("import torch\n", "import operator\n\nimport numpy as np\nimport torch\n"),
                           (_FWD, _before + "\n\n" + _NP_CHECK + _FWD + f"    if not _finite(x, {_read}):\n" + _RAISE)))
HOSTILE["check_through_torchs_printer"] = (
    "validate", "the host's check of x as 'nan' or 'inf' in repr(x), which torch prints with the modes off", "judge",
    edit(SIMPLE, (_FWD, "def _finite_by_repr(x):\n    torch.set_printoptions(threshold=1 << 62)\n    try:\n"
                        "        text = repr(x.detach())\n    finally:\n"
                        "        torch.set_printoptions(profile='default')\n"
                        "    return 'nan' not in text and 'inf' not in text\n\n\n" + _FWD +
                  "    if not _finite_by_repr(x):\n" + _RAISE)))
HOSTILE["check_hidden_by_a_storage_lie"] = (
    "validate", "the host's check of x.sum(), and a TorchFunctionMode left on from import (relabelled as torch's) "
                "that answers the grader's x.untyped_storage() with another storage", "judge",
    edit(SIMPLE, ("import torch\n", "import operator\n\nimport torch\n"),
         (_FWD, _RELABEL + "def _storage_lie(self, func, types, args=(), kwargs=None):\n"
                "    if func is torch.Tensor.untyped_storage and _Blind.target is not None and args and \\\n"
                "            isinstance(args[0], torch.Tensor) and args[0].data_ptr() == _Blind.target:\n"
                "        _Blind.target = None\n        return torch.empty(1).untyped_storage()\n"
                "    return func(*args, **(kwargs or {}))\n\n\n"
                "class _Blind(torch.overrides.TorchFunctionMode):\n    target = None\n"
                "    __torch_function__ = _relabeled(_storage_lie)\n\n\n"
                "def _left_on():\n    with _Blind():\n        yield\n\n\n_ON = _left_on()\nnext(_ON)\n\n\n"
                + _FWD +
                "    if not bool(torch.isfinite(x.sum())):\n" + _RAISE),
         ("    return y.view(x.shape), r\n", "    _Blind.target = x.data_ptr()\n    return y.view(x.shape), r\n")))

# A second red team against item 7's dataflow and the replay: host work passed on through an op that writes into an
# argument named otherwise than out= (torch.max's max=, a fill_ with a tensor value), or only where rows are long;
# partial sums kept in x's own memory, or written by float atomics into slices of the lecture's buffer; r kept on
# ctx by a bound method of a list.
_DOTS_KERNEL = ("dx_ptr, dg_ptr, N, x_stride, dy_stride,\n                       BLOCK: tl.constexpr):",
                "dx_ptr, dg_ptr, dot_ptr, N, x_stride, dy_stride, first,\n"
                "                       BLOCK: tl.constexpr):")
_DOTS_LOAD = ("    dot = tl.sum(dy * g * x, axis=0)\n",
              "    if row < first:\n        dot = tl.sum(dy * g * x, axis=0)\n    else:\n"
              "        dot = tl.load(dot_ptr + row)\n")


def _host_dots(handoff: str, when: str = "True") -> str:
    """simple.py whose backward takes the row dots of rows 1.. from the host (when ``when``), passed through
    ``handoff`` (code that turns ``dots`` into ``dot_buf``)."""
    return edit(SIMPLE, _DOTS_KERNEL, _DOTS_LOAD,
                (BWD_LAUNCH, f"    host = {when}\n    dots = (dy2.float() * g.float() * x2.float()).sum(-1) if host "
                             "else r\n" + handoff +
                 "    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, dot_buf, N, x2.stride(0), "
                 "dy2.stride(0),\n                             1 if host else M, BLOCK=triton.next_power_of_2(N))\n"))


# (at N = 1 a row's dot is as many values as dx has; the judge's replay finds the host op all the same, and item 7
# alone charges it: test_autograder_hostile.py's test_the_hosts_row_dots_are_charged_once_in_item_7)
CONTROLS["host_dots"] = _host_dots("    dot_buf = dots\n")
HOSTILE["host_dots_through_max_out"] = (
    "host_dots", "the backward's row dots on the host, passed on through torch.max(..., out=(max, indices))",
    "judge", _host_dots("    dot_buf = torch.empty_like(dots)\n"
                        "    idx = torch.empty(dots.shape, dtype=torch.long, device=dots.device)\n"
                        "    torch.max(dots.unsqueeze(1), dim=1, out=(dot_buf, idx))\n"))
HOSTILE["host_dots_through_fill"] = (
    "host_dots", "the backward's row dots on the host, passed on one by one through fill_ with a tensor value",
    "judge", _host_dots("    dot_buf = torch.empty_like(dots)\n    for i in range(M):\n"
                        "        dot_buf[i].fill_(dots[i])\n"))
HOSTILE["host_dots_for_long_rows_only"] = (
    "host_dots", "the backward's row dots on the host only for rows longer than 4096", "judge",
    _host_dots("    dot_buf = dots\n", when="N > 4096"))
HOSTILE["partial_rows_in_x"] = (
    "simple", "the partial dg rows stored over x's own rows, summed on the host", "judge",
    edit(SIMPLE, ("    tl.store(dg_ptr + row * N + cols, dy * x * r, mask=mask)",
                  "    tl.store(x_ptr + row * x_stride + cols, dy * x * r, mask=mask)"),
         ("    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)",
          "    return dx.view(x.shape), x2.sum(0, dtype=torch.float32).to(g.dtype)")))
_SLICES = edit(SIMPLE, ("\n\ndef _matrix(t):", ADD_ROWS + "\n\n\ndef _matrix(t):"),
               (BWD_LAUNCH + "    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)",
                "    dg = torch.zeros(N, dtype=torch.float32, device=x.device)\n"
                "    step = -(-M // 16)\n    for s in range(0, M, step):\n        e = min(M, s + step)\n"
                "        rmsnorm_bwd_kernel[(e - s,)](x2[s:e], g, dy2[s:e], r[s:e], dx[s:e], dg_partial[s:e], N,\n"
                "                                     x2.stride(0), dy2.stride(0), BLOCK=triton.next_power_of_2(N))\n"
                "    _add_rows[(triton.cdiv(N, 128),)](dg_partial, dg, M, N, BLOCK=128)\n"
                "    return dx.view(x.shape), dg.to(g.dtype)"))
CONTROLS["partial_rows_in_slices"] = _SLICES
HOSTILE["partial_rows_by_atomics_in_slices"] = (
    "partial_rows_in_slices", "the lecture's M x N partial buffer in 16 slices, each element written by a float "
                              "atomic_add of its one program", "judge",
    edit(_SLICES, ("    tl.store(dg_ptr + row * N + cols, dy * x * r, mask=mask)",
                   "    tl.atomic_add(dg_ptr + row * N + cols, dy * x * r, mask=mask)"),
         ("    dg_partial = torch.empty((M, N)", "    dg_partial = torch.zeros((M, N)")))
HOSTILE["r_kept_as_a_clone_on_ctx"] = (
    "r_as_ctx_attribute", "r kept on ctx as a copy the host made, which the judge's overwrite of the forward's memory "
    "never reaches", "judge",
    edit(CONTROLS["r_as_ctx_attribute"], ("        ctx.r = r\n", "        ctx.r = r.clone()\n")))
HOSTILE["r_on_ctx_recomputed_where_it_reads_nan"] = (
    "r_as_ctx_attribute", "r kept on ctx, recomputed by the forward's kernels wherever a host check finds it NaN (the "
    "judge's overwrite)", "judge",
    edit(CONTROLS["r_as_ctx_attribute"], ("        ctx.r = r\n", "        ctx.r = r\n        ctx.eps = eps\n"),
         ("        r = ctx.r\n", "        r = ctx.r\n        if bool(torch.isnan(r).any()):\n"
                                "            r = rmsnorm_forward(x, g, ctx.eps)[1]\n")))
HOSTILE["r_kept_by_a_bound_method_on_ctx"] = (
    "r_as_ctx_attribute", "r kept on ctx as the pop method of a list that holds it", "judge",
    edit(SIMPLE, ("        ctx.save_for_backward(x, g, r)\n", "        ctx.save_for_backward(x, g)\n"
                                                              "        ctx.take_r = [r].pop\n"),
         ("        x, g, r = ctx.saved_tensors\n", "        x, g = ctx.saved_tensors\n        r = ctx.take_r()\n")))
