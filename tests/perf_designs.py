"""RMSNorm files of different designs, on which the performance model (mini_triton/perf.py) is checked against
the H200: each predicted share of a copy's bandwidth, at item 10's shape, beside the one measured there.

Each design launches the same grid on the CPU as on a GPU, so that what the simulator records is what the GPU
runs (a file that picks its grid from the GPU's SM count and a constant on the CPU is edited to the GPU's count).

    python3 tests/perf_designs.py OUT_DIR      # writes OUT_DIR/<name>.py
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _read(path: str, *edits) -> str:
    src = (ROOT / path).read_text()
    for old, new in edits:
        if src.count(old) != 1:
            raise ValueError(f"{path}: {old!r} is not there once")
        src = src.replace(old, new)
    return src


# name: (what the design is, its source)
DESIGNS = {
    "solution": ("the reference: one pass over x; a persistent backward (4 programs per SM), dg summed by a kernel",
                 lambda: _read("solution/rmsnorm.py")),
    "lecture": ("the lecture's kernels: one program per row; an M x N fp32 partial dg summed by torch",
                lambda: _read("tests/corpus/simple.py")),
    "x_read_twice": ("blocks of 128 columns: each program reads its row of x (and dy) twice, the second time "
                     "from L2", lambda: _read("tests/corpus/small_blocks.py")),
    "host_ops": ("a kernel for r only; y = x * r * g in torch on the host (four more passes over M x N)",
                 lambda: _read("tests/corpus/unfused_forward.py")),
    "float_atomics": ("one program per row; dg by tl.atomic_add into N fp32 values",
                      lambda: _read("tests/calibration/float_atomics.py")),
    "row_loop": ("Liger's design: the backward over one program per SM, each looping over its rows",
                 lambda: _read("tests/library_styles/liger.py", ("    return 16\n", "    return 132\n"))),
    "few_programs": ("a persistent design with 33 programs, a quarter of the H200's SMs, in both passes",
                     lambda: _read("tests/library_styles/persistent_module.py",
                                   ('programs = min(n_rows, 132 if device_type == "cuda" else 8) or 1',
                                    "programs = min(n_rows, 33) or 1"))),
}


def write_all(out: Path) -> list:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (_, source) in DESIGNS.items():
        (out / f"{name}.py").write_text(source())
        paths.append(out / f"{name}.py")
    return paths


if __name__ == "__main__":
    for p in write_all(Path(sys.argv[1])):
        print(p)
