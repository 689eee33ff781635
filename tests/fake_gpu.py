"""A stand-in for CUDA on the CPU: the table of functions rmsnorm_testkit.timing keeps (``timing.CUDA``), faked.

Tests of the timing logic (graphs, the profiler, medians) put ``FakeGPU().table`` in its place.
"""
import contextlib
import types

import torch
from torch.utils._python_dispatch import _disable_current_modes


class FakeGPU:
    """CUDA graphs, events and the profiler on the CPU. A "kernel" is a Python function passed to
    launch(): it runs at once, costs 1 ms of the fake GPU clock (and one profiler event), and runs
    again on each replay of a graph that captured it."""

    def __init__(self):
        self.now, self.capturing, self.profiling = 0.0, None, None
        gpu = self

        class Graph:
            def __init__(self):
                self.kernels = []

        class Event:
            def __init__(self, enable_timing=True):
                self.t = None

        @contextlib.contextmanager
        def graph(g):
            gpu.capturing = g
            try:
                yield
            finally:
                gpu.capturing = None

        class Profile:
            def __init__(self, activities):
                self.recorded = []

            def __enter__(self):
                gpu.profiling = self.recorded
                return self

            def __exit__(self, *exc):
                gpu.profiling = None

            def events(self):
                return self.recorded

        self.table = {"event": Event, "record": lambda ev: setattr(ev, "t", gpu.now),
                      "elapsed": lambda a, b: b.t - a.t, "sync": lambda: None,
                      "empty": lambda *a, **k: torch.empty(1) if k.get("device") == "cuda" else torch.empty(*a, **k),
                      "graph_class": Graph, "graph": graph,
                      "replay": lambda g: [k() for k in g.kernels], "stream_class": lambda: None,
                      "current_stream": lambda: None, "use_stream": lambda s: contextlib.nullcontext(),
                      "wait_stream": lambda a, b: None, "no_grad": torch.no_grad, "profile": Profile,
                      "cuda_activity": "CUDA", "generator": torch.Generator, "manual_seed": torch.Generator.manual_seed,
                      "randn": torch.randn, "rand": torch.rand, "copy": torch.Tensor.copy_, "add_": torch.Tensor.add_,
                      "zero_": torch.Tensor.zero_, "tensor_class": torch.Tensor, "index_select": torch.index_select,
                      "detach": torch.Tensor.detach, "clone": torch.Tensor.clone,
                      "as_subclass": torch.Tensor.as_subclass, "equal": torch.equal}

    def launch(self, kernel, name="rmsnorm_fwd_kernel", ms=1.0):
        def timed():
            with _disable_current_modes():           # a kernel's work is not a torch op a grader's watch sees
                kernel()
            self.now += ms
            if self.profiling is not None:
                self.profiling.append(types.SimpleNamespace(
                    name=name, device_type="DeviceType.CUDA",
                    time_range=types.SimpleNamespace(elapsed_us=lambda: ms * 1e3)))
        timed()
        if self.capturing is not None:
            self.capturing.kernels.append(timed)

    def kernel_of(self, step, name="rmsnorm_fwd_kernel"):
        """``step`` (a function returning a tuple of tensors) as one kernel of this GPU: a call runs it now, and a
        graph that captured the call runs it again on each replay, its outputs written into the first call's (as a
        replay writes into the buffers it captured)."""
        def call(*args, **kwargs):
            outs = []

            def kernel():
                got = step(*args, **kwargs)
                if outs:
                    for first, again in zip(outs, got):
                        first.copy_(again)
                else:
                    outs.extend(got)
            self.launch(kernel, name=name)
            return tuple(outs)
        return call
