"""What a call of a submission's functions is given, as features a hidden case can share.

A *record* is one call a test makes to the file under test: ``rmsnorm_forward``, ``rmsnorm_backward``,
``rmsnorm`` (the forward through the autograd Function), the Function's backward (``y.backward(dy)``), or a
kernel launched directly (``rmsnorm_fwd_kernel[grid](...)``, as the tests of parts (a), (b) and (d) do). It
holds three things:

- ``reached``: the functions and kernels the call went through (``rmsnorm`` reaches the Function's forward,
  which reaches ``rmsnorm_forward``, which launches ``rmsnorm_fwd_kernel``);
- ``inputs``: what the call was given, as words: x's dtype and dims, the layout of x and dy (contiguous, rows
  apart, columns apart, transposed), N against powers of 2, an eps other than the default, a row of zeros,
  and the path each kernel took (in chunks, a last chunk partly past the row's end, one block of the
  largest size held whole);
- ``grads``: which of x and g required grad, for the steps through autograd.

``Recorder.watching(modules)`` notes the records of whatever runs inside it. As a pytest plugin
(``-p public_inputs``, with RMSNORM_INPUTS_OUT naming a JSON file), it notes each public test's records
while the test runs, and writes them all at the end of the session.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os

import pytest
import torch

API = ("rmsnorm_forward", "rmsnorm_backward", "rmsnorm")
FUNCTION = "TritonRMSNorm"
KERNELS = ("rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel")
DEFAULT_EPS = 1e-5
DTYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def layout(t: torch.Tensor) -> str:
    """How a tensor's elements lie in memory, as a kernel that steps through rows sees them."""
    if t.is_contiguous():
        return "contiguous"
    if t.stride(-1) == 1:
        return "rows apart"
    if t.dim() >= 2 and t.stride(-2) < t.stride(-1):
        return "transposed"
    return "columns apart"


def input_features(x, g=None, dy=None, eps=None) -> set:
    """The words for what a call was given (``eps`` None: the call takes no eps)."""
    n = x.shape[-1]
    words = {f"x in {DTYPES.get(x.dtype, str(x.dtype))}", f"x {layout(x)}",
             "x 2-D" if x.dim() == 2 else "x 1-D" if x.dim() == 1 else "x of 3 or more dims",
             "N = 1" if n == 1 else "N a power of 2" if n & (n - 1) == 0 else "N not a power of 2"}
    if g is not None and g.dtype != x.dtype:
        words.add("g in another dtype than x")
    if dy is not None:
        words.add(f"dy {layout(dy)}")
    if eps is not None and float(eps) != DEFAULT_EPS:
        words.add("eps other than the default")
    if x.numel() and bool((x.detach().reshape(-1, n) == 0).all(1).any()):
        words.add("a row of zeros")
    return words


def path_features(kernel: str, args: dict) -> set:
    """The words for the path a kernel launch took, from the starter's parameters (SINGLE_PASS, BLOCK_N, n_cols)
    and the largest block the file holds whole (its MAX_FUSED_N)."""
    value = {k: getattr(v, "value", v) for k, v in args.items()}
    n, block = value.get("n_cols"), value.get("BLOCK_N")
    if not isinstance(n, int) or not isinstance(block, int) or "SINGLE_PASS" not in value:
        return set()
    if not value["SINGLE_PASS"]:
        return {f"{kernel} in chunks"} | ({f"{kernel}'s last chunk partly past the row's end"} if n % block else set())
    limit = value.get("MAX_FUSED_N")
    return {f"{kernel} in one block of MAX_FUSED_N"} if isinstance(limit, int) and block >= limit else set()


class Record(dict):
    """One call: {"where": the test or task, "call", "reached", "inputs", "grads"} (lists, for JSON)."""

    @classmethod
    def new(cls, where, call, inputs, grads=None):
        return cls(where=where, call=call, reached={call}, inputs=set(inputs),
                   grads=None if grads is None else tuple(grads))

    def plain(self) -> dict:
        return {**self, "reached": sorted(self["reached"]), "inputs": sorted(self["inputs"]),
                "grads": None if self["grads"] is None else list(self["grads"])}


class Recorder:
    """Notes a record for each outermost call into the watched modules, and what it reached."""

    def __init__(self):
        self.records, self.open, self.where = [], None, ""

    def enter(self, call, inputs=(), grads=None) -> bool:
        """A call begins: a record of its own when no call is open (True), else a name its record reached."""
        if self.open is None:
            self.open = Record.new(self.where, call, inputs, grads)
            return True
        self.open["reached"].add(call)
        return False

    def leave(self, outermost: bool):
        if outermost:
            self.records.append(self.open)
            self.open = None

    def called(self, call, fn, features):
        """``fn`` noted as ``call``: ``features(bound arguments)`` gives its (inputs, grads)."""
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                inputs, grads = features(bound.arguments)
            except (TypeError, ValueError, AttributeError, IndexError, RuntimeError):
                inputs, grads = set(), None          # what the call itself will refuse
            outermost = self.enter(call, inputs, grads)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave(outermost)
        return wrapper

    def launched(self, kernel: str, args: dict):
        """A kernel launch: a record of its own when made directly, else what its call's record reached."""
        tensors = {k: v for k, v in args.items() if isinstance(v, torch.Tensor)}
        path = path_features(kernel, args)
        outermost = self.enter(kernel)
        if outermost and "x_ptr" in tensors:
            self.open["inputs"] |= input_features(tensors["x_ptr"], tensors.get("g_ptr"), tensors.get("dy_ptr"),
                                                  args.get("eps"))
        self.open["inputs"] |= path
        self.leave(outermost)

    @contextlib.contextmanager
    def watching(self, modules, where=""):
        """Record the calls into each module of ``modules`` (a submission imported on the simulator), and every
        kernel launch, while the block runs."""
        from mini_triton.launcher import JITFunction
        self.where = where
        undo = []
        try:
            for mod in modules:
                undo += self._wrap(mod)
            run = JITFunction._run

            def _run(kernel, args, kwargs, grid):
                if kernel.__name__ in KERNELS:
                    try:
                        bound = kernel.bind(args, kwargs)
                    except TypeError:
                        bound = None                 # the launch itself says what is wrong
                    if bound is not None:
                        bound["MAX_FUSED_N"] = kernel.fn.__globals__.get("MAX_FUSED_N")
                        self.launched(kernel.__name__, bound)
                return run(kernel, args, kwargs, grid)
            JITFunction._run = _run
            undo.append((JITFunction, "_run", run))
            yield self
        finally:
            for owner, name, old in reversed(undo):
                setattr(owner, name, old)
            self.open = None

    def _wrap(self, mod) -> list:
        """Wrap the module's functions and its Function's forward and backward; [(owner, name, original)]."""
        undo = []

        def x_g(a, eps=True):
            return input_features(a["x"], a["g"], a.get("dy"), a.get("eps") if eps else None)

        features = {"rmsnorm_forward": lambda a: (x_g(a), None),
                    "rmsnorm_backward": lambda a: (x_g(a, eps=False), None),
                    "rmsnorm": lambda a: (x_g(a), [k for k in ("x", "g") if a[k].requires_grad])}
        for name in API:
            fn = getattr(mod, name, None)
            if callable(fn):
                setattr(mod, name, self.called(name, fn, features[name]))
                undo.append((mod, name, fn))
        cls = getattr(mod, FUNCTION, None)
        if isinstance(cls, type) and isinstance(cls.__dict__.get("forward"), staticmethod):
            forward, backward = cls.__dict__["forward"], cls.__dict__["backward"]

            def fwd(ctx, x, g, *rest, **kw):
                # what the backward's record needs of the forward's inputs, kept as words (ctx keeps no tensor)
                ctx.public_inputs = input_features(x, g, eps=rest[0] if rest else kw.get("eps", DEFAULT_EPS))
                return forward.__func__(ctx, x, g, *rest, **kw)

            def bwd(ctx, dy):
                given = {w for w in getattr(ctx, "public_inputs", ()) if not w.startswith("eps")}
                grads = [k for k, flag in zip(("x", "g"), ctx.needs_input_grad) if flag]
                return self.called(f"{FUNCTION}.backward", backward.__func__,
                                   lambda a: (given | {f"dy {layout(a['dy'])}"}, grads))(ctx, dy)
            setattr(cls, "forward", staticmethod(self.called(f"{FUNCTION}.forward", fwd, lambda a: (set(), None))))
            setattr(cls, "backward", staticmethod(bwd))
            undo += [(cls, "forward", forward), (cls, "backward", backward)]
        return undo


# ---- the pytest plugin -------------------------------------------------------------------------------------
RECORDER = Recorder()
OUT_VAR = "RMSNORM_INPUTS_OUT"


def short_id(nodeid: str) -> str:
    """A public test's id without its folder: "test_part_a.py::test_one_row_per_program"."""
    path, name = nodeid.split("::", 1)
    return f"{path.rsplit('/', 1)[-1]}::{name}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """Each public test's calls of the file under test (its ``impl`` and ``sim_impl`` fixtures)."""
    mods = {id(m): m for k in ("impl", "sim_impl") if (m := item.funcargs.get(k)) is not None}
    with RECORDER.watching(list(mods.values()), short_id(item.nodeid)):
        yield


def pytest_sessionfinish(session):
    out = os.environ.get(OUT_VAR)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump([r.plain() for r in RECORDER.records], f)
