"""The course GPU as a file's wrappers see it while item 10's prediction runs their steps on the CPU.

Library code picks its launch by the device it runs on: ``sms = torch.cuda.get_device_properties(x.device)
.multi_processor_count if x.is_cuda else 8``, ``num_warps = 8 if torch.cuda.get_device_capability()[0] >= 9
else 4``. On the CPU such a file launches a grid the GPU never runs, and a prediction of the GPU's time made from
it predicts another program. Inside ``course_gpu(gpu, device)`` the file's own code sees the course GPU instead:

- ``torch.cuda.is_available()`` is True, ``device_count()`` 1, ``current_device()`` 0, and
  ``get_device_properties``, ``get_device_name`` and ``get_device_capability`` give ``gpu``'s figures (a
  ``mini_triton.perf.GPU``: its SMs, L2, memory, name and compute capability);
- a tensor on the step's ``device`` (the CPU for the simulated steps, meta for the plan) reads ``is_cuda`` True,
  ``device`` cuda:0 and ``get_device()`` 0 (a torch function mode answers those getters, and is entered again
  around a custom autograd Function's backward, which torch's autograd engine runs outside any such mode);
- a device argument naming CUDA (``torch.empty(n, device=x.device)``, ``x.to("cuda")``, ``x.cuda()``) means the
  step's ``device``: what the file allocates still lands on the CPU (or meta), and its kernels still run on the
  simulator.

With ``tensors=False`` the tensors keep their own ``device`` (only ``is_cuda`` and torch.cuda speak of the GPU):
for a file that compares its inputs' device with one it chose at import (the starter's check that x is on the
simulator's device), which refuses cuda:0 tensors.

Only the file is told: a call made from torch, the standard library, installed packages, the simulator, this
kit or a ``trusted`` folder (the grader's job) gets the truth, so none of them is misled. What the file asked is
kept (``View.asked``), for the prediction's note. Everything is put back on leaving, whatever happened inside.

    with course_gpu(perf.GPUS["H200"], "cpu") as view:
        y = rmsnorm(x, g)          # its launches are those it makes on the H200
    view.asked                     # {"torch.cuda.get_device_properties", "x.is_cuda"}
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import sys
import sysconfig

import torch
import torch.autograd.function as autograd_function
from torch.overrides import TorchFunctionMode

CUDA0 = torch.device("cuda", 0)
_CUDA_NAME = re.compile(r"cuda(:\d+)?")
_GETTERS = {name: torch._C.TensorBase.__dict__[name] for name in ("device", "is_cuda", "is_cpu", "is_meta")}


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """What ``torch.cuda.get_device_properties`` says of the course GPU (the fields code reads; the per-SM limits
    are Hopper's)."""
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    L2_cache_size: int
    warp_size: int = 32
    max_threads_per_multi_processor: int = 2048
    max_threads_per_block: int = 1024
    regs_per_multiprocessor: int = 65536
    shared_memory_per_block: int = 49152
    shared_memory_per_block_optin: int = 232448
    shared_memory_per_multiprocessor: int = 233472
    is_integrated: bool = False
    is_multi_gpu_board: bool = False


def properties(gpu) -> DeviceProperties:
    """The properties of a ``mini_triton.perf.GPU``."""
    return DeviceProperties(gpu.device_name, *gpu.capability, int(gpu.memory_gb * 1e9), gpu.sms, gpu.l2_bytes,
                            max_threads_per_multi_processor=32 * gpu.max_warps_per_sm)


def _installed() -> tuple:
    """Folders whose code is told the truth: torch, the standard library, installed packages, this kit, and the
    simulator (wherever the file's folder holds it)."""
    folders = {os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__))}
    folders |= {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")} - {None}
    simulator = sys.modules.get("mini_triton")
    if getattr(simulator, "__file__", None):
        folders.add(os.path.dirname(os.path.abspath(simulator.__file__)))
    return tuple(folders)


class View:
    """The course GPU, as shown to the file's frames while ``course_gpu`` is entered."""

    def __init__(self, gpu, device, trusted=(), tensors=True):
        self.gpu, self.device, self.tensors = gpu, torch.device(device), tensors
        self.props = properties(gpu)
        roots = {os.path.abspath(str(p)) for p in (*_installed(), *trusted)}
        roots |= {os.path.realpath(p) for p in roots}
        self.trusted = tuple(p.rstrip(os.sep) + os.sep for p in roots)
        self.asked: set = set()             # what the file asked of the device: "torch.cuda.<fn>", "x.is_cuda"...
        self._file: dict = {}               # code object -> is it the file's?

    def by_file(self, frame) -> bool:
        """Is ``frame`` the file's code (not torch's, the standard library's, the simulator's, this kit's or a
        trusted folder's)?"""
        code = frame.f_code
        mine = self._file.get(code)
        if mine is None:
            path = code.co_filename
            mine = self._file[code] = not (path.startswith("<") or os.path.abspath(path).startswith(self.trusted))
        return mine

    def on_device(self, t) -> bool:
        return isinstance(t, torch.Tensor) and t.device == self.device

    def means(self, value, device_argument=False):
        """A device argument as the step runs it: CUDA (a name, a torch.device, an ordinal given as ``device=``)
        is the step's device."""
        if isinstance(value, torch.device) and value.type == "cuda":
            return self.device
        if isinstance(value, str) and _CUDA_NAME.fullmatch(value):
            return self.device
        if device_argument and isinstance(value, int) and not isinstance(value, bool):
            return self.device
        return value

    # -- the torch function mode's answers ------------------------------------------------------------------
    def answer(self, func, args, kwargs):
        if func is torch.device:                 # the name of a device, not a tensor on it: cuda stays cuda
            return func(*args, **kwargs)
        descriptor = getattr(func, "__self__", None)
        if args and self.on_device(args[0]):
            if descriptor is _GETTERS["device"]:
                return CUDA0 if self.tensors else args[0].device
            if descriptor is _GETTERS["is_cuda"]:
                self.asked.add("x.is_cuda")
                return True
            if descriptor is _GETTERS["is_cpu"] or descriptor is _GETTERS["is_meta"]:
                self.asked.add("x.is_cpu")
                return False
            if func is torch.Tensor.get_device:
                self.asked.add("x.get_device()")
                return 0
            if func is torch.Tensor.cuda:
                return args[0].to(self.device)
            if func is torch.Tensor.pin_memory:
                return args[0]
        args = tuple(self.means(a) for a in args)
        kwargs = {k: self.means(v, k == "device") for k, v in kwargs.items()}
        return func(*args, **kwargs)

    # -- torch.cuda's functions -----------------------------------------------------------------------------
    def replies(self) -> dict:
        """{torch.cuda function: what the file gets instead}."""
        return {"is_available": lambda: True, "is_initialized": lambda: True, "device_count": lambda: 1,
                "current_device": lambda: 0, "get_device_properties": lambda device=None: self.props,
                "get_device_name": lambda device=None: self.props.name,
                "get_device_capability": lambda device=None: (self.props.major, self.props.minor),
                "set_device": lambda device: None, "synchronize": lambda device=None: None,
                "device": lambda device=None: contextlib.nullcontext()}

    def told(self, name, original, reply):
        """``torch.cuda.<name>`` while the view is on: ``reply`` to the file, ``original`` to everyone else."""
        @functools.wraps(original, updated=())
        def ask(*args, **kwargs):
            if self.by_file(sys._getframe(1)):
                self.asked.add(f"torch.cuda.{name}")
                return reply(*args, **kwargs)
            return original(*args, **kwargs)
        return ask


class _Mode(TorchFunctionMode):
    """Answers the file's tensor getters (is_cuda, device) and reads its device arguments as the step's device."""

    def __init__(self, view: View):
        super().__init__()
        self.view = view

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.view.by_file(sys._getframe(1)):
            return func(*args, **kwargs)
        return self.view.answer(func, args, kwargs)


def _backward_in(view: View):
    """torch's ``BackwardCFunction.apply`` (the autograd engine's call of a custom Function's backward) with the
    view's mode entered around it: the engine runs a backward outside the caller's torch function modes."""
    original = autograd_function.BackwardCFunction.__dict__["apply"]

    @functools.wraps(original)
    def apply(self, *args):
        with _Mode(view):
            return original(self, *args)
    return original, apply


@contextlib.contextmanager
def course_gpu(gpu, device="cpu", trusted=(), tensors=True):
    """Inside, the file's code sees ``gpu`` (a ``mini_triton.perf.GPU``) and the step's tensors on ``device`` as
    cuda:0 (``tensors=False``: on their own device, but ``is_cuda``); code in ``trusted`` folders (and torch's, the
    simulator's, this kit's) sees the truth. Yields the View, whose ``asked`` says what the file asked."""
    view = View(gpu, device, trusted, tensors)
    saved = {}
    backward, in_view = _backward_in(view)
    try:
        for name, reply in view.replies().items():
            original = getattr(torch.cuda, name, None)
            if original is not None:
                saved[name] = original
                setattr(torch.cuda, name, view.told(name, original, reply))
        autograd_function.BackwardCFunction.apply = in_view
        with _Mode(view):
            yield view
    finally:
        autograd_function.BackwardCFunction.apply = backward
        for name, original in saved.items():
            setattr(torch.cuda, name, original)
