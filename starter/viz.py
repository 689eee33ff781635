"""Draw your kernels' memory traffic on a small input: `make viz` (or `python viz.py [--out DIR]`).

Runs your rmsnorm_fwd_kernel and rmsnorm_bwd_kernel on the simulator, on x of shape (6, 12), launched
as the part (a) and (b) tests launch them (one row per program; `make viz BLOCK_M=2` gives the forward
two, and once part (d) is done the backward gets three), and saves one picture per kernel: every tensor argument
as a grid, each element coloured by the program that read or wrote it, with a number where it was
touched more than once. A fused forward paints each row of x once, in its program's colour; a 2
in every cell of x means your kernel reads x twice. Red marks a mistake: elements that several
programs stored (a data race: here it is drawn, not raised), or, when a kernel makes an
out-of-bounds access, every program's lanes past the end of its row or of the tensor (a second
picture, traffic_*_out_of_bounds.png). Last, which kernel the time of item 10's forward+backward would go to on
the course GPU (rmsnorm_testkit/predict.py, as `make bench` predicts it).
"""
import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))                        # rmsnorm_testkit, beside this file
sys.path.insert(0, str(HERE / "tests"))              # the public tests' launches
from rmsnorm_testkit.compare import load_impl, random_inputs  # noqa: E402
from test_part_a import launch_forward  # noqa: E402
from test_part_b import launch_backward, takes_many_rows  # noqa: E402

SHAPE = (6, 12)          # 12 columns in blocks of 16 lanes: the 4 masked lanes of each row move nothing


def draw(name, run, out_dir, title):
    """Run one kernel under record() and save its picture; return the path, or None with the reason."""
    import mini_triton as triton
    for old in (out_dir / f"traffic_{name}.png", out_dir / f"traffic_{name}_out_of_bounds.png"):
        old.unlink(missing_ok=True)                   # no picture of an earlier run is left to mislead
    mode = triton.get_race_mode()
    triton.set_race_mode("record")                  # a race is drawn, not raised
    try:
        with triton.record() as rec:
            run()
    except NotImplementedError as e:
        print(f"{name}: not written yet ({e})")
        return None
    except triton.OutOfBoundsError as e:
        path = triton.viz.draw_out_of_bounds(e, out_dir / f"traffic_{name}_out_of_bounds.png", title)
        print(f"{name}: out-of-bounds access, drawn in {path}\n  {e}")
        return path
    except Exception as e:                                        # noqa: BLE001 -- report it, draw the other
        print(f"{name}: failed before it could be drawn: {type(e).__name__}: {e}")
        return None
    finally:
        triton.set_race_mode(mode)
    path = rec.draw(out_dir / f"traffic_{name}.png", title)
    races = [L.race for L in rec.launches if L.race]
    print(f"{name}: {path}" + (f"\n  a data race, drawn in red: {races[0]}" if races else ""))
    return path


def main(argv):
    ap = argparse.ArgumentParser(description="Draw the memory traffic of your kernels.")
    ap.add_argument("--impl", default=os.environ.get("RMSNORM_IMPL", str(HERE / "rmsnorm.py")))
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("VIZ_OUT", HERE / "build")))
    ap.add_argument("--block-m", type=int, default=1, help="rows per program of the forward (default 1, the "
                                                         "lecture's kernel)")
    args = ap.parse_args(argv)
    impl = load_impl(args.impl, backend="mini_triton")
    x, g, dy = random_inputs(SHAPE)
    M = SHAPE[0]
    per_program = 3 if takes_many_rows(impl) else 1        # part (d) done: several rows per program
    drawn = [
        draw("forward", lambda: launch_forward(impl, x, g, BLOCK_M=args.block_m), args.out,
             f"rmsnorm_fwd_kernel on x of shape {SHAPE}, BLOCK_M={args.block_m}: {-(-M // args.block_m)} programs"),
        draw("backward", lambda: launch_backward(impl, x, g, dy, rows_per_program=per_program, BLOCK_M=1), args.out,
             f"rmsnorm_bwd_kernel on x of shape {SHAPE}, {per_program} row{'s' * (per_program > 1)} per program: "
             f"{-(-M // per_program)} programs"),
    ]
    where_the_time_goes(impl)
    return 0 if any(drawn) else 1


def where_the_time_goes(impl):
    """Which kernel item 10's time would go to on the course GPU, as `make bench` predicts it."""
    from rmsnorm_testkit import predict
    got = predict.item_10(impl, "fp32")
    step = got.steps.get("fwdbwd")
    if step is not None:
        print("on an H200, at item 10's shape, the fp32 forward+backward's time would go to (predicted): "
              + ", ".join(f"{name} {100 * share:.0f}%" for name, _, share in step.by_kernel()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
