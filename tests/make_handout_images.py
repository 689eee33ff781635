"""Draw the handout's traffic pictures (handout/img/) with the student bundle's viz.py:

    python3 tests/make_handout_images.py

- traffic_fused.png: the reference forward, one row per program (the lecture's kernel);
- traffic_reads_x_twice.png: the same kernel made to load x a second time (tests/mistakes.py).
"""
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from mistakes import mistake  # noqa: E402

OUT = ROOT / "handout" / "img"


def _viz():
    spec = importlib.util.spec_from_file_location("student_viz", ROOT / "starter" / "viz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    viz = _viz()
    x, g, _ = viz.random_inputs(viz.SHAPE)
    with tempfile.TemporaryDirectory() as tmp:
        twice = Path(tmp) / "rmsnorm.py"
        twice.write_text(mistake("x_loaded_twice"))
        for name, path, title in (
                ("fused", ROOT / "solution" / "rmsnorm.py", "a fused forward, one row per program"),
                ("reads_x_twice", twice, "a forward that loads x a second time to compute y")):
            impl = viz.load_impl(path, backend="mini_triton", name=f"handout_{name}")
            viz.draw(name, lambda: viz.launch_forward(impl, x, g, BLOCK_M=1), OUT, title)


if __name__ == "__main__":
    main()
