"""Grades do not depend on machine load: every file of the library corpus and the solution, graded on an
idle machine and then again with two CPU-bound processes per core running, get the same result, test by test.

    .venv/bin/python tests/load_grading.py [--per-core 2] [names...]

Each grading is the real one (`make grade`'s path: the hidden tests, the sandboxed jobs and their limits),
so a time limit that counted wall-clock time under load would show here as a different score. Prints a
table (score idle, score loaded, seconds each) and exits 1 on any difference. docs/perf.md records runs.
"""
import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from autograder import grade  # noqa: E402

FILES = {p.stem: p for p in sorted((ROOT / "tests" / "library_styles").glob("*.py"))}
FILES["solution"] = ROOT / "solution" / "rmsnorm.py"


def spin():
    x = 0
    while True:
        x += 1


def grade_all(names, out: Path, tag: str) -> dict:
    got = {}
    for name in names:
        start = time.monotonic()
        res = grade.grade(FILES[name], out / f"{name}.{tag}.json")
        scores = {t.get("number", t["name"]): (t["score"], t["status"]) for t in res["tests"]}
        got[name] = (scores, time.monotonic() - start)
        print(f"  {tag:6s} {name:18s} {sum(s for s, _ in scores.values()):6.1f}  {got[name][1]:5.0f} s", flush=True)
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-core", type=int, default=2)
    ap.add_argument("names", nargs="*", default=list(FILES))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        idle = grade_all(args.names, out, "idle")
        n = args.per_core * (os.cpu_count() or 1)
        spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(n)]
        for p in spinners:
            p.start()
        try:
            loaded = grade_all(args.names, out, "loaded")
        finally:
            for p in spinners:
                p.terminate()
    print(f"\n| file | idle score | loaded score ({n} busy processes, {os.cpu_count()} cores) | same, test by test "
          f"| idle s | loaded s |\n|---|---|---|---|---|---|")
    differ = []
    for name in args.names:
        (a, ta), (b, tb) = idle[name], loaded[name]
        same = a == b
        differ += [] if same else [name]
        print(f"| {name} | {sum(s for s, _ in a.values()):.1f} | {sum(s for s, _ in b.values()):.1f} | "
              f"{'yes' if same else 'NO: ' + str({k: (a.get(k), b.get(k)) for k in a if a.get(k) != b.get(k)})} | "
              f"{ta:.0f} | {tb:.0f} |")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
