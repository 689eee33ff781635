"""``triton.runtime.driver``: the device a kernel file asks about, as Triton's tutorials ask.

Triton's own tutorials begin ``DEVICE = triton.runtime.driver.active.get_active_torch_device()``, and size a
persistent grid from ``driver.active.utils.get_device_properties(DEVICE.index)["multiprocessor_count"]``. On a
GPU the driver asks CUDA; here it answers from ``torch.cuda`` when a GPU is there (or when item 10's prediction
shows the file the course GPU), and otherwise says what the simulator runs on: the CPU, with a GPU's usual figures
for the rest, so that a file written for a GPU runs here unchanged.
"""
from __future__ import annotations

import collections

import torch

GPUTarget = collections.namedtuple("GPUTarget", ["backend", "arch", "warp_size"])
# what a kernel file reads when no GPU is there: an H100/H200's figures (SMs, shared memory, registers)
DEFAULTS = {"multiprocessor_count": 132, "max_shared_mem": 232448, "max_num_regs": 65536, "warpSize": 32,
            "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 5120}


def _cuda() -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:                                 # noqa: BLE001 -- no CUDA build: the simulator's device
        return False


class _Utils:
    def get_device_properties(self, device=None) -> dict:
        """The figures Triton's driver gives (``multiprocessor_count``, ``max_shared_mem``, ...)."""
        props = dict(DEFAULTS)
        if _cuda():
            p = torch.cuda.get_device_properties(device if isinstance(device, int) else 0)
            props["multiprocessor_count"] = int(p.multi_processor_count)
            props["max_shared_mem"] = int(getattr(p, "shared_memory_per_block_optin", props["max_shared_mem"]))
            props["max_num_regs"] = int(getattr(p, "regs_per_multiprocessor", props["max_num_regs"]))
        return props


class _Active:
    utils = _Utils()

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cuda", 0) if _cuda() else torch.device("cpu")

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        if _cuda():
            major, minor = torch.cuda.get_device_capability()
            return GPUTarget("cuda", 10 * major + minor, 32)
        return GPUTarget("cpu", 0, 32)


class _Driver:
    """``triton.runtime.driver``: ``active`` is the device's driver."""
    active = _Active()


driver = _Driver()
