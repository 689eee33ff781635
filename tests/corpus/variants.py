"""Slow-but-correct variants of the reference solution, made from it by one edit each (or by `make partial`).

    python3 tests/corpus/variants.py OUT_DIR     # writes OUT_DIR/<name>.py for autograder.calibrate

- rows_partial_dg: the lecture's backward, one program per row and an M x N fp32 partial dg
  buffer summed afterwards: a student who stopped after part (c) (`make partial PARTS=abc`). Full
  credit on the simulator, no extra credit; the GPU speed thresholds are calibrated against it.
- torch_backward: the solution's forward kernel, its backward left to PyTorch eager (the
  forward+backward GPU parts must fail it; item 10 only: it assumes 2-D inputs).
- host_sync: the solution with a check in its forward wrapper that reads a value back to the host
  (it cannot be captured in a CUDA graph, so item 10 gives its forward parts nothing).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mistakes import edited_solution, write_all  # noqa: E402
EDITS = {
    "rows_partial_dg": "abc",
    "torch_backward": [("        dx, dg = rmsnorm_backward(dy, x, g, r)\n",
                        "        xf, dyf, rr = x.float(), dy.float(), r.view(-1, 1).float()\n"
                        "        dyg = dyf * g.float()\n"
                        "        dx = (rr * (dyg - xf * rr * rr * (dyg * xf).mean(-1, keepdim=True))).to(x.dtype)\n"
                        "        dg = (dyf * xf * rr).sum(0).to(g.dtype)\n")],
    "host_sync": [("    return y.view(x.shape), r\n",
                   "    if not torch.isfinite(r).all():\n"
                   "        raise ValueError(\"x has a row that is not finite\")\n"
                   "    return y.view(x.shape), r\n")],
}


def variant(name: str) -> str:
    return edited_solution(EDITS[name], f"variant {name}")


if __name__ == "__main__":
    write_all(EDITS, variant, sys.argv)
