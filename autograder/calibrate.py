"""Check item 10's thresholds on a GPU machine: ``python -m autograder.calibrate SUB... [--runs 10]``.

Grades each submission ``--runs`` times, item 10 only, and prints per part the percentage of copy bandwidth its
kernels reach in GPU time (min / median / max, the graded figure), the verdicts and the speedup over eager's
kernels. A threshold holds when every run of a submission gets the same verdict and no submission's runs come within
10% of it (margin: the slowest passing run over the threshold, or the threshold over the fastest failing run, 1.1 or
more). docs/perf.md records runs.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

from rmsnorm_testkit import text

from . import config, grade
from .errors import GraderError
from .rubric import COPY_NEEDED, PARTS

GPU = re.compile(r"the GPU ran your [\w+]+ in (?P<ms>[\d.]+) ms \((?P<how>\w+).*?= (?P<pct>\d+)% of copy", re.S)
KX = re.compile(r"; (?P<x>[\d.]+)x as fast as eager PyTorch's kernels")


def _name(sub: Path) -> str:
    return sub.stem if sub.name != "rmsnorm.py" else sub.parent.name


def calibrate(subs, runs: int):
    """Rows of (submission, part, name, min %, median %, max %, needed %, verdicts, passed, margin,
    median x eager's kernels, how timed, first unparsed message,
    first run's message)."""
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for sub in subs:
            seen = {}
            for _ in range(runs):
                res = grade.grade(sub, Path(d) / "r.json", select="gpu_speed")
                for t in res["tests"]:
                    if t["number"].startswith("10."):
                        m, k = (r.search(t["output"]) for r in (GPU, KX))
                        seen.setdefault(t["number"], []).append(dict(
                            status=t["status"], pct=int(m["pct"]) if m else -1,
                            kx=float(k["x"]) if k else float("nan"),
                            how="graph" if m else "?",
                            note="" if m else t["output"], output=t["output"]))
            for num, v in sorted(seen.items()):
                pcts, need = [s["pct"] for s in v], COPY_NEEDED[num]
                passed = sum(s["status"] == "passed" for s in v)
                margin = min(pcts) / need if passed == len(v) else need / max(max(pcts), 1)
                rows.append((_name(Path(sub)), num, PARTS[num].name, min(pcts), statistics.median(pcts), max(pcts),
                             need, "/".join(sorted({s["status"] for s in v})), f"{passed}/{len(v)}", margin,
                             statistics.median(s["kx"] for s in v),
                             "/".join(sorted({s["how"] for s in v})), next((s["note"] for s in v if s["note"]), ""),
                             v[0]["output"]))
    return rows


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m autograder.calibrate")
    ap.add_argument("submissions", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--show", action="store_true", help="print each part's feedback of the first run")
    args = ap.parse_args(argv)
    missing = [str(s) for s in args.submissions if not s.exists()]
    if missing:
        ap.error(f"no such file or folder: {', '.join(missing)}")
    import torch
    if not torch.cuda.is_available():
        print("calibrate times item 10 (GPU speed), which needs a CUDA GPU and none is visible here: run it on the "
              "course GPU machine (docs/ta-guide.md, the end of \"Adding a hidden case or a part\")", file=sys.stderr)
        return 2
    os.environ[config.GPU_TASKS_VAR] = "speed"              # the GPU job runs item 10's tasks only
    print(f"{'submission':<18}{'part':<6}{'':<24}{'min %':>6}{'median':>7}{'max %':>6}{'needs':>6}  "
          f"{'verdict':<14}{'passed':>7}{'margin':>7}{'x eager kernels':>16}  timed by")
    try:
        for one in args.submissions:                  # a row block per submission, as soon as it is done
            _print_rows(calibrate([one], args.runs), args.show)
    except GraderError as e:
        print(grade.explain(e), file=sys.stderr)
        return 1
    return 0


def _print_rows(rows, show: bool):
    for (sub, num, name, lo, med, hi, need, verdict, passed, margin, kx, how, note, output) in rows:
        print(f"{sub:<18}{num:<6}{name:<24}{lo:>6}{med:>7.0f}{hi:>6}{need:>6}  {verdict:<14}{passed:>7}"
              f"{margin:>7.2f}{kx:>16.2f}  {how}" + (f"  {note[:text.SUMMARY_CHARS]}" if note else ""),
              flush=True)
        if show:
            print(f"    {output}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
