"""Check item 10's thresholds on a GPU machine: ``python -m autograder.calibrate SUB... [--runs 10]``.

Grades each submission ``--runs`` times, item 10 only, and prints per part the
speedups over eager (min / median / max), the GB/s and the verdicts. A
threshold holds when every run of a submission gets the same verdict, the
reference solution passes with a margin (its slowest run's speedup over the
threshold, 1.5x or more) and the slow variants fail. docs/perf.md records runs.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

from . import config, grade
from .rubric import PARTS, SPEEDUP_NEEDED

SPEED = re.compile(r"(?P<gbs>\d+) GB/s = (?P<pct>\d+)% of copy.*?; (?P<x>[\d.]+)x PyTorch eager")


def calibrate(subs, runs: int):
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for sub in subs:
            seen = {}
            for i in range(runs):
                res = grade.grade(sub, Path(d) / "r.json", select="gpu_speed")
                for t in res["tests"]:
                    if t["number"].startswith("10."):
                        m = SPEED.search(t["output"])
                        seen.setdefault(t["number"], []).append(
                            (t["status"], float(m["x"]) if m else float("nan"), int(m["pct"]) if m else -1,
                             t["output"] if not m else ""))
            for num, v in sorted(seen.items()):
                xs = [s[1] for s in v]
                verdicts = {s[0] for s in v}
                rows.append((Path(sub).stem if Path(sub).name != "rmsnorm.py" else Path(sub).parent.name, num,
                             PARTS[num].name, min(xs), statistics.median(xs), max(xs),
                             statistics.median(s[2] for s in v), SPEEDUP_NEEDED[num],
                             "/".join(sorted(verdicts)), f"{sum(s[0] == 'passed' for s in v)}/{len(v)}",
                             min(xs) / SPEEDUP_NEEDED[num], next((s[3] for s in v if s[3]), "")))
    return rows


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m autograder.calibrate")
    ap.add_argument("submissions", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args(argv)
    os.environ[config.GPU_TASKS_VAR] = "speed"              # the GPU job runs item 10's tasks only
    print(f"{'submission':<18}{'part':<6}{'':<24}{'min x':>7}{'median':>8}{'max x':>7}{'% copy':>8}"
          f"{'needs':>7}  {'verdict':<14}{'passed':>7}{'margin':>8}")
    for one in args.submissions:                      # a row block per submission, as soon as it is done
        for sub, num, name, lo, med, hi, pct, need, verdict, passed, margin, note in calibrate([one], args.runs):
            print(f"{sub:<18}{num:<6}{name:<24}{lo:>7.2f}{med:>8.2f}{hi:>7.2f}{pct:>8.0f}{need:>7.2f}  "
                  f"{verdict:<14}{passed:>7}{margin:>8.2f}" + (f"  {note[:120]}" if note else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
