"""Grading what an export holds and is not graded yet: one worker per visible GPU on a GPU machine (each pinned to
its GPU), otherwise ``jobs`` workers; each submission's results.json in ``EXPORT/regrade/``, so that a rerun skips
those already graded and an interrupted regrade resumes.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path

from .. import config, grade
from ..config import SCAN_SKIPPED
from ..errors import GraderError
from ..plugin import open_private
from ..rubric import PARTS, item_of
from .export import META, export_folder, gradescope_scores, submissions, warn
from . import leaderboard
from .shards import shard_of
from .table import write_csv


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


def graded_already(path: Path, gpu: bool = False) -> bool:
    """Does ``path`` hold a finished grading for this machine? Every rubric part it grades must be in it
    (item 10's only where a GPU is visible), or there was nothing to grade (no rmsnorm.py). A grading cut
    short (Ctrl-C, a crash, an autograder error) leaves parts out, so it is graded again, never kept as 0."""
    try:
        res = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if res.get("complete"):
        return True
    if config.scan_enabled() and any(SCAN_SKIPPED in t.get("output", "") for t in res.get("tests", [])):
        return False                                   # graded with RMSNORM_SCAN=off: grade it again, scanned
    done = {t.get("number") for t in res.get("tests", [])}
    return {n for n in PARTS if gpu or not item_of(n).gpu_only} <= done


def keep_private(export: Path) -> None:
    """Take everyone else's access to the export away, its group's too: submissions run as sandbox accounts,
    which must not read each other's code (each job gets its own copy of its rmsnorm.py). The grader's user
    keeps its own."""
    mode = export.stat().st_mode
    if mode & 0o077:
        export.chmod(mode & ~0o077)
        print(f"{export}: made readable by its owner only (submissions must not read each other's)",
              file=sys.stderr)


def regrade(export: Path, out_csv: Path | None, jobs: int = 1, shard=None, names: bool = False) -> tuple[list[dict],
                                                                                                       dict]:
    """Grade what is not graded yet (of ``shard`` only, when given); (CSV rows, {submission: autograder
    error}). No CSV is written for a shard (``out_csv`` None): a plain run afterwards writes it, and the speed
    leaderboard beside it (leaderboard.py; students named only with ``names``)."""
    export = export_folder(export)
    subs = submissions(export)
    grade.preflight()                      # a grader that cannot grade stops here, before any submission
    if not config.scan_enabled():
        warn(grade.SCAN_OFF_WARNING)
    keep_private(export)
    results_dir = export / "regrade"
    results_dir.mkdir(exist_ok=True)
    devices = gpus()
    ours = shard_of([sid for sid, folder, _ in subs if folder is not None], shard)
    mine = [(sid, folder) for sid, folder, _ in subs if sid in ours]
    todo = [(sid, folder) for sid, folder in mine if not graded_already(results_dir / f"{sid}.json", gpu=bool(devices))]
    workers = len(devices) or max(1, jobs)
    share = f" in shard {shard[0]}/{shard[1]}" if shard else ""
    print(f"{len(mine)} submissions{share}, {len(mine) - len(todo)} already graded; {workers} worker(s)"
          + (f" on GPUs {','.join(devices)}" if devices else " on the CPU"), file=sys.stderr)
    slots = list(devices) if devices else [None] * workers
    free = queue.Queue()
    for s in slots:
        free.put(s)
    progress = Progress(len(todo))
    errors = {}

    def one(item):
        sid, folder = item
        device = free.get()
        try:
            env = dict(os.environ)
            if device is not None:
                env["CUDA_VISIBLE_DEVICES"] = device
            sub, problem = grade.find_submission(folder)
            out = results_dir / f"{sid}.json"
            if sub is None:
                with open_private(out) as f:                 # like every results.json: root's alone when root
                    f.write(json.dumps({"tests": [], "complete": True, "output": problem}))
            else:
                grade.grade(sub, out, env=env)
        except GraderError as e:
            errors[sid] = str(e)
        finally:
            free.put(device)
            progress.step(sid)

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, todo))
    if out_csv is None:
        return [], errors
    rows = write_csv(subs, results_dir, out_csv, errors, gradescope_scores(export / META))
    leaderboard.write(subs, results_dir, out_csv.parent, names)
    return rows, errors
