"""The rubric: every graded item and its points, in one place.

The hidden tests take their weights from here, and a test in `make check` compares the
handout's points table with this file.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Item:
    number: str
    name: str
    points: float
    what: str
    extra_credit: bool = False
    gpu_only: bool = False


ITEMS = (
    Item("1", "Forward correctness", 15, "y and r match a float64 reference on fp32 shapes"),
    Item("2", "Backward dx", 15, "dx matches a float64 reference"),
    Item("3", "Backward dg", 10, "dg matches a float64 reference"),
    Item("4", "Robustness", 15, "fp16/bf16, 3-D/4-D, strided inputs, N=1, large N, eps values, zero rows, "
                                "dy untouched, output dtypes and shapes, identical reruns"),
    Item("5", "Fused forward", 10, "on the simulator: x loaded once, y and r stored once, g once per program"),
    Item("6", "Fused backward", 10, "on the simulator: x and dy loaded once, dx stored once"),
    Item("7", "Work happens in kernels", 10, "kernels launch in forward and backward and write y and dx; "
                                             "no host-side op reads an M·N activation"),
    Item("8", "Race-free", 5, "the simulator's race detector finds no data race"),
    Item("9", "Improved dg reduction", 5, "the partial dg buffer has at most M·N/8 elements and dg is exact",
         extra_credit=True),
    Item("10", "GPU speed", 10, "forward and forward+backward speedup over PyTorch eager at (16384, 4096), "
                                "fp32 and bf16, on the course GPU machine", gpu_only=True),
)

BY_NUMBER = {i.number: i for i in ITEMS}


def total(include_extra_credit: bool = False) -> float:
    return sum(i.points for i in ITEMS if include_extra_credit or not i.extra_credit)
