"""RMSNorm files of different designs, on which the performance model (mini_triton/perf.py) and item 10's
prediction (rmsnorm_testkit/predict.py) are checked.

``DESIGNS`` were measured on the H200 (tests/data/perf_h200.json): each predicted share of a copy's bandwidth, at
item 10's shape, is held to the one measured there. ``MORE`` are further designs, not measured yet
(``python3 tests/perf_model_gpu.py measure`` times them all).

Files that pick their grid by the device (``sm_count = ... if x.is_cuda else 16``) are written as they are: the
prediction runs them with the course GPU in view, so the simulator records the grid the GPU runs.
``GPU_GRID`` holds, for each of them, the edit that writes the GPU's grid into the file instead; the prediction
of the file as written must agree with the model's prediction of that edited file (tests/test_perf_model.py).

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


def _file(path: str, *edits):
    return lambda: _read(path, *edits)


# name: (what the design is, its source), measured on the H200
DESIGNS = {
    "solution": ("the reference: one pass over x; a persistent backward (4 programs per SM), dg summed by a kernel",
                 _file("solution/rmsnorm.py")),
    "lecture": ("the lecture's kernels: one program per row; an M x N fp32 partial dg summed by torch",
                _file("tests/corpus/simple.py")),
    "x_read_twice": ("blocks of 128 columns: each program reads its row of x (and dy) twice, the second time "
                     "from L2", _file("tests/corpus/small_blocks.py")),
    "host_ops": ("a kernel for r only; y = x * r * g in torch on the host (four more passes over M x N)",
                 _file("tests/corpus/unfused_forward.py")),
    "float_atomics": ("one program per row; dg by tl.atomic_add into N fp32 values",
                      _file("tests/calibration/float_atomics.py")),
    "row_loop": ("Liger's design: the backward over one program per SM (16 off the GPU), each looping over its "
                 "rows", _file("tests/library_styles/liger.py")),
    "few_programs": ("a persistent design with 33 programs, a quarter of the H200's SMs, in both passes",
                     _file("tests/library_styles/persistent_module.py",
                           ('programs = min(n_rows, 132 if device_type == "cuda" else 8) or 1',
                            "programs = min(n_rows, 33) or 1"))),
}

# name: (what the design is, its source), not measured yet
MORE = {
    "persistent": ("a persistent module: one program per SM in both passes (8 off the GPU, by x.device.type)",
                   _file("tests/library_styles/persistent_module.py")),
    "one_off_gpu": ("Liger's multi-device backward: one program per SM, a single one off CUDA",
                    _file("tests/library_styles/liger_devices.py")),
    "tutorial_persistent": ("persistent kernels of twice the SM count (4 SMs' worth without CUDA), num_stages "
                            "from the shared memory", _file("tests/library_styles/tutorial_persistent.py")),
    "flash_attn": ("flash-attention's layer norm: autotuned warps, a backward over one program per SM (16 off "
                   "the GPU)", _file("tests/library_styles/flash_attn.py")),
    "dw_kernel": ("FlagGems' design: dx one row per program, a separate dW kernel over 16 x 256 tiles that reads "
                  "x and dy again", _file("tests/library_styles/flaggems.py")),
    "locked_dw": ("Triton's layer-norm tutorial: dW summed into a few partial rows under locks, then a kernel",
                  _file("tests/library_styles/triton_tutorial.py")),
}
ALL = {**DESIGNS, **MORE}


def _styles() -> dict:
    """Every file of tests/library_styles/ that no design above already is, named ``style_<stem>``."""
    taken = {line.split("library_styles/")[1].split('"')[0]
             for line in Path(__file__).read_text().splitlines() if '_file("tests/library_styles/' in line}
    return {f"style_{p.stem}": (f"tests/library_styles/{p.name}, as written", _file(f"tests/library_styles/{p.name}"))
            for p in sorted((ROOT / "tests" / "library_styles").glob("*.py")) if p.name not in taken}


# the other library styles: measured on a GPU beside the designs (``perf_model_gpu.py measure OUT styles``)
STYLES = _styles()
SETS = {"designs": ALL, "styles": STYLES, "all": {**ALL, **STYLES}}

# name: the edits that write the GPU's grid (the H200's 132 SMs) where the file asks the device
GPU_GRID = {
    "row_loop": [('    if device.type == "cuda":\n        return torch.cuda.get_device_properties(device)'
                  '.multi_processor_count\n    return 16\n', "    return 132\n")],
    "persistent": [('programs = min(n_rows, 132 if device_type == "cuda" else 8) or 1',
                    "programs = min(n_rows, 132) or 1")],
    "one_off_gpu": [('    sm_count = 1\n    if X.device.type == "cuda":\n        sm_count = torch.cuda.get_device_'
                     'properties(X.device).multi_processor_count\n    elif X.device.type == "xpu":\n        '
                     'sm_count = torch.xpu.get_device_properties(X.device).gpu_eu_count\n', "    sm_count = 132\n")],
    "tutorial_persistent": [("    props = device_properties(torch.cuda.current_device() if torch.cuda.is_available() "
                             "else None)\n", '    props = {"NUM_SM": 132, "SIZE_SMEM": 232448}\n')],
    "flash_attn": [('    if device.type == "cuda":\n        return torch.cuda.get_device_properties(device)'
                    '.multi_processor_count\n    return 16\n', "    return 132\n")],
}


def gpu_grid_source(name: str) -> str:
    """Design ``name``'s source with the GPU's grid written in (itself where it asks the device nothing)."""
    src = ALL[name][1]()
    for old, new in GPU_GRID.get(name, []):
        if src.count(old) != 1:
            raise ValueError(f"{name}: {old!r} is not there once")
        src = src.replace(old, new)
    return src


def write_all(out: Path, designs=None) -> list:
    """Each design of ``designs`` (default: all of them) as OUT/<name>.py."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (_, source) in (ALL if designs is None else designs).items():
        (out / f"{name}.py").write_text(source())
        paths.append(out / f"{name}.py")
    return paths


if __name__ == "__main__":
    for p in write_all(Path(sys.argv[1])):
        print(p)
