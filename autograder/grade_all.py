"""Regrade a Gradescope export: ``python -m autograder.grade_all EXPORT [--out CSV] [--jobs N]``
(``make grade-all EXPORT=dir``).

EXPORT is Gradescope's "Export Submissions" folder: one folder per submission
(``submission_123456/``) and ``submission_metadata.yml`` naming its submitters.
Each submission is graded by the same hidden tests as on Gradescope (grade.py);
on a GPU machine that includes item 10. Results go to ``EXPORT/regrade/`` (one
results.json per submission: a rerun skips those already graded, so an
interrupted regrade resumes) and to a CSV with one row per student: every
rubric item, the total and the extra credit.

Workers: one per visible GPU on a GPU machine (each pinned to its GPU),
otherwise ``--jobs N`` (default 1).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import os
import queue
import re
import sys
import threading
import time
from pathlib import Path

from . import grade
from .rubric import ITEMS


def read_metadata(path: Path) -> dict:
    """{submission folder: [{"name", "sid", "email"}]} from Gradescope's submission_metadata.yml.

    A small reader for that one file's layout (keys like ``:submitters:``), so
    regrading needs no YAML library.
    """
    subs, current, person = {}, None, None
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        top = re.match(r"^(\S[^:]*):\s*$", raw)
        if top:
            current, person = top.group(1).strip("'\""), None
            subs[current] = []
            continue
        field = re.match(r"^\s*(-\s*)?:?(name|sid|email):\s*(.*)$", raw)
        if current is None or not field:
            continue
        if field.group(1) or person is None:
            person = {}
            subs[current].append(person)
        person[field.group(2)] = field.group(3).strip().strip("'\"")
    return subs


def submissions(export: Path) -> list[tuple[str, Path, list]]:
    meta_file = export / "submission_metadata.yml"
    meta = read_metadata(meta_file) if meta_file.exists() else {}
    folders = sorted(p for p in export.iterdir() if p.is_dir() and p.name != "regrade")
    return [(p.name, p, meta.get(p.name, [])) for p in folders]


def gpus() -> list[str]:
    """Visible GPU indices (empty without CUDA)."""
    try:
        import torch
        return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    except ImportError:
        return []


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int):
        self.total, self.done, self.start, self.lock = total, 0, time.monotonic(), threading.Lock()

    def step(self, label: str):
        with self.lock:
            self.done += 1
            frac = self.done / max(self.total, 1)
            spent = time.monotonic() - self.start
            eta = spent / self.done * (self.total - self.done)
            bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
            sys.stderr.write(f"\r[{bar}] {self.done}/{self.total}  eta {eta:4.0f} s  {label[:40]:<40}")
            sys.stderr.flush()
            if self.done == self.total:
                sys.stderr.write("\n")


def graded_already(path: Path) -> bool:
    try:
        res = json.loads(path.read_text())
        return bool(res.get("tests") or res.get("complete"))
    except (OSError, ValueError):
        return False


def find_rmsnorm(folder: Path):
    found = sorted(folder.rglob("rmsnorm.py"))
    return found[0] if len(found) == 1 else None


def regrade(export: Path, out_csv: Path, jobs: int = 1) -> list[dict]:
    subs = submissions(export)
    results_dir = export / "regrade"
    results_dir.mkdir(exist_ok=True)
    todo = [(sid, folder) for sid, folder, _ in subs if not graded_already(results_dir / f"{sid}.json")]
    devices = gpus()
    workers = len(devices) or max(1, jobs)
    print(f"{len(subs)} submissions, {len(subs) - len(todo)} already graded; {workers} worker(s)"
          + (f" on GPUs {','.join(devices)}" if devices else " on the CPU"), file=sys.stderr)
    slots = list(devices) if devices else [None] * workers
    free = queue.Queue()
    for s in slots:
        free.put(s)
    progress = Progress(len(todo))

    def one(item):
        sid, folder = item
        device = free.get()
        try:
            env = dict(os.environ)
            if device is not None:
                env["CUDA_VISIBLE_DEVICES"] = device
            if workers > 1:
                env["RMSNORM_SANDBOX_USER"] = ""    # concurrent jobs: no per-user kill (it would reach the others)
            sub = find_rmsnorm(folder)
            out = results_dir / f"{sid}.json"
            if sub is None:
                out.write_text(json.dumps({"tests": [], "complete": True,
                                            "output": "no single rmsnorm.py in the submission"}))
            else:
                grade.grade(sub, out, env=env)
        finally:
            free.put(device)
            progress.step(sid)

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, todo))
    return write_csv(subs, results_dir, out_csv)


def write_csv(subs, results_dir: Path, out_csv: Path) -> list[dict]:
    rows = []
    for sid, _, people in subs:
        try:
            res = json.loads((results_dir / f"{sid}.json").read_text())
        except (OSError, ValueError):
            res = {"tests": [], "output": "not graded"}
        by_item = grade.scores_by_item(res)
        base = {"submission": sid}
        for it in ITEMS:
            base[f"{it.number} {it.name}"] = by_item.get(it.number, (0.0, 0.0))[0]
        base["total"] = sum(v for k, v in base.items() if k.split(" ")[0] in
                            {i.number for i in ITEMS if not i.extra_credit})
        base["extra credit"] = sum(by_item.get(i.number, (0, 0))[0] for i in ITEMS if i.extra_credit)
        base["note"] = res.get("output", "") if not res.get("tests") else ""
        for person in people or [{}]:
            rows.append({"name": person.get("name", ""), "sid": person.get("sid", ""),
                         "email": person.get("email", ""), **base})
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with out_csv.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["submission"])
        w.writeheader()
        w.writerows(rows)
    return rows


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m autograder.grade_all", description=__doc__.split("\n\n")[0])
    ap.add_argument("export", type=Path, help="the unzipped Gradescope export")
    ap.add_argument("--out", type=Path, default=None, help="CSV path (default EXPORT/regrade.csv)")
    ap.add_argument("--jobs", type=int, default=1, help="workers on a CPU machine (GPU machines: one per GPU)")
    args = ap.parse_args(argv)
    if not args.export.is_dir():
        ap.error(f"{args.export} is not a folder (unzip the Gradescope export first)")
    out = args.out or args.export / "regrade.csv"
    rows = regrade(args.export, out, args.jobs)
    print(f"{len(rows)} rows written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
