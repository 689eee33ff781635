"""Regrade a Gradescope export: ``python -m autograder.grade_all EXPORT [--out CSV] [--jobs N]``
(``make grade-all EXPORT=dir``).

EXPORT is Gradescope's "Export Submissions" folder, unzipped: one folder per
submission (``submission_123456/``) and ``submission_metadata.yml`` (YAML) naming
its submitters; the folder above it (holding only that folder) is accepted too.
Each submission is graded by the same hidden tests as on Gradescope (grade.py);
on a GPU machine that includes item 10. Results go to ``EXPORT/regrade/`` (one
results.json per submission: a rerun skips those already graded, so an
interrupted regrade resumes) and to a CSV with one row per student: every
rubric item, the total and the extra credit, Gradescope's score for the same
submission (from the export's metadata) and ``changed``, the items whose points
differ from Gradescope's. A submission that could not be graded as submitted (no
rmsnorm.py, several, an autograder error, a folder missing from the export) has
a row that says NOT GRADED and why, and no numbers.

Workers: one per visible GPU on a GPU machine (each pinned to its GPU),
otherwise ``--jobs N`` (default 1). ``--shard K/N`` grades only the K-th of N
shares of the class (every N-th submission folder in sorted order), so that N machines
(a Slurm job array, say) can grade one export over a shared folder; a plain run
afterwards grades nothing new and writes the whole CSV.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import csv
import json
import os
import queue
import sys
import threading
import time
from pathlib import Path

import yaml

from . import config, grade
from .config import SCAN_SKIPPED
from .errors import GraderError
from .job import shared
from .plugin import open_private
from .rubric import BY_NUMBER, ITEMS, PARTS, item_of

META = "submission_metadata.yml"
NOT_SUBMISSIONS = {"regrade", "__MACOSX"}     # our results folder; macOS's zip leftovers


def subfolders(folder: Path) -> list[Path]:
    """The folders of ``folder`` that may be submissions (no hidden ones, no NOT_SUBMISSIONS)."""
    return sorted(p for p in folder.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and p.name not in NOT_SUBMISSIONS)


def export_folder(path: Path) -> Path:
    """The folder holding submission_metadata.yml: ``path`` itself or its only subfolder.

    Gradescope's zip unzips to one folder (``assignment_123_export/``); a TA may
    pass that folder or the one above it. Anything else exits with a message.
    """
    if (path / META).is_file():
        return path
    inner = subfolders(path) if path.is_dir() else []
    if len(inner) == 1 and (inner[0] / META).is_file():
        return inner[0]
    raise SystemExit(f"{META} not found in {path} or in its only subfolder: "
                     f"pass the unzipped Gradescope export")


def load_yaml(path: Path):
    """``path`` parsed by yaml.safe_load; a missing or malformed file exits naming it."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{path} not found: pass the unzipped Gradescope export") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SystemExit(f"{path} is not valid YAML{where}: {getattr(err, 'problem', None) or err}") from None


def text(value) -> str:
    """A metadata value as text: sids may be numbers, absent values are empty."""
    return "" if value is None else str(value)


def submitters(entry) -> list[dict]:
    """[{"name", "sid", "email"}] from one submission's entry; its other keys (:results:...) are ignored."""
    people = entry.get(":submitters") if isinstance(entry, dict) else None
    return [{k: text(p.get(f":{k}")) for k in ("name", "sid", "email")}
            for p in people or [] if isinstance(p, dict)]


def read_metadata(path: Path) -> dict:
    """{submission folder: [{"name", "sid", "email"}]} from Gradescope's submission_metadata.yml.

    Only each submission's ``:submitters:`` are read. Exits with a message when
    the file is missing, is not valid YAML or lists no submissions.
    """
    data = load_yaml(path)
    if not isinstance(data, dict) or not data:
        raise SystemExit(f"{path} lists no submissions: pass the unzipped Gradescope export")
    return {str(folder): submitters(entry) for folder, entry in data.items()}


def number(value):
    """A score from the metadata as a float, or None."""
    try:
        return None if value is None or value == "" else float(value)
    except (TypeError, ValueError):
        return None


def gradescope_scores(path: Path) -> dict:
    """{submission folder: (Gradescope's score, {item number: its points there})} from the export's metadata:
    each submission's ``:score:`` and the tests of its ``:results:`` (None and {} where absent)."""
    data = load_yaml(path)
    out = {}
    for folder, entry in (data or {}).items():
        entry = entry if isinstance(entry, dict) else {}
        results = entry.get(":results") if isinstance(entry.get(":results"), dict) else {}
        items = {}
        for t in results.get("tests") or []:
            if isinstance(t, dict) and number(t.get("score")) is not None and t.get("number") not in (None, "0"):
                item = str(t["number"]).split(".")[0]
                items[item] = items.get(item, 0.0) + number(t["score"])
        score = number(entry.get(":score"))
        out[str(folder)] = (score if score is not None else number(results.get("score")), items)
    return out


def changed(res: dict, theirs: dict, their_score=None) -> str:
    """The items whose points in the regrade ``res`` differ from Gradescope's (``theirs``), e.g. "4, 10". Where
    the export has Gradescope's score but not its tests, "total" when the regrade's Gradescope items (all but
    item 10) add up to another score; nothing where it has neither."""
    ours = grade.scores_by_item(res)
    if theirs:
        return ", ".join(it.number for it in ITEMS if it.number in ours
                         and abs(ours[it.number][0] - theirs.get(it.number, 0.0)) > 1e-9)
    if their_score is None:
        return ""
    on_gradescope = sum(score for number, (score, _) in ours.items() if number in BY_NUMBER
                        and not BY_NUMBER[number].gpu_only)
    return "total" if abs(on_gradescope - their_score) > 1e-9 else ""


def warn(message: str):
    print(f"warning: {message}", file=sys.stderr)


def submissions(export: Path) -> list[tuple[str, Path, list]]:
    """(folder name, folder, submitters) for every submission folder of the export.

    A folder the metadata does not list is graded all the same (no name, sid or
    email); a listed submission without a folder cannot be, but keeps its place, with
    ``None`` for its folder, so that its students still get a CSV row saying so. Both
    are warned about.
    """
    meta = read_metadata(export / META)
    folders = subfolders(export)
    on_disk = {p.name for p in folders}
    for name in sorted(on_disk - set(meta)):
        warn(f"{name} is not in {META}: graded, with no name, sid or email")
    for name in sorted(set(meta) - on_disk):
        warn(f"{META} lists {name} but {export} has no such folder: not graded")
    found = [(p.name, p, meta.get(p.name, [])) for p in folders]
    return sorted(found + [(name, None, meta[name]) for name in set(meta) - on_disk], key=lambda s: s[0])


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


def _keep_private(export: Path) -> None:
    """Take everyone else's access to the export away, its group's too: submissions run as sandbox accounts,
    which must not read each other's code (each job gets its own copy of its rmsnorm.py). The grader's user
    keeps its own."""
    mode = export.stat().st_mode
    if mode & 0o077:
        export.chmod(mode & ~0o077)
        print(f"{export}: made readable by its owner only (submissions must not read each other's)",
              file=sys.stderr)


def parse_shard(text: str) -> tuple[int, int]:
    """"K/N" -> (K, N), 1 <= K <= N; anything else exits with a message."""
    try:
        k, n = (int(v) for v in text.split("/"))
        if 1 <= k <= n:
            return k, n
    except ValueError:
        pass
    raise SystemExit(f"--shard takes K/N with 1 <= K <= N (the K-th of N shares, e.g. 2/8), not {text!r}")


def shard_of(sids, shard) -> set:
    """The submission folders of ``shard`` (K, N): every N-th of them in sorted order, from the K-th on. The
    same on every machine that sees the same export, and the shares differ by one at most."""
    if shard is None:
        return set(sids)
    return {sid for i, sid in enumerate(sorted(sids)) if i % shard[1] == shard[0] - 1}


def regrade(export: Path, out_csv: Path | None, jobs: int = 1, shard=None) -> tuple[list[dict], dict]:
    """Grade what is not graded yet (of ``shard`` only, when given); (CSV rows, {submission: autograder
    error}). No CSV is written for a shard (``out_csv`` None): a plain run afterwards writes it."""
    export = export_folder(export)
    subs = submissions(export)
    grade.preflight()                      # a grader that cannot grade stops here, before any submission
    if not config.scan_enabled():
        warn(grade.SCAN_OFF_WARNING)
    _keep_private(export)
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
    return write_csv(subs, results_dir, out_csv, errors, gradescope_scores(export / META)), errors


def row_scores(res: dict) -> dict:
    """Each item's score, the total and the extra credit; an item that was not graded (item 10 without a
    GPU) is left empty, never 0. A submission without tests (no rmsnorm.py) scores 0 on every other item."""
    by_item = grade.scores_by_item(res)
    row = {f"{it.number} {it.name}": by_item[it.number][0] if it.number in by_item else
           ("" if it.gpu_only else 0.0) for it in ITEMS}
    row["total"] = float(sum(by_item.get(i.number, (0.0, 0.0))[0] for i in ITEMS if not i.extra_credit))
    row["extra credit"] = float(sum(by_item.get(i.number, (0.0, 0.0))[0] for i in ITEMS if i.extra_credit))
    return row


def note(res: dict) -> str:
    """Why a row scores what it does, when it scores nothing: no rmsnorm.py, or its most common failure."""
    if not res.get("tests"):
        return res.get("output", "")
    parts = [t for t in res["tests"] if t["number"] != "0"]
    if any(t.get("status") == "passed" for t in parts):
        return ""
    reasons = collections.Counter(t["output"] for t in parts if t.get("output"))
    return reasons.most_common(1)[0][0][:shared.text.SUMMARY_CHARS] if reasons else ""


NOT_GRADED = "NOT GRADED"


def write_csv(subs, results_dir: Path, out_csv: Path, errors: dict | None = None,
              gradescope: dict | None = None) -> list[dict]:
    """One row per student, with Gradescope's score and the items that changed beside the regrade's. A
    submission that could not be graded as submitted (no rmsnorm.py or several, an autograder error, a
    folder missing from the export) gets no numbers, only a note that starts NOT GRADED and says why."""
    rows = []
    errors, gradescope = errors or {}, gradescope or {}
    for sid, folder, people in subs:
        try:
            res = json.loads((results_dir / f"{sid}.json").read_text())
        except (OSError, ValueError):
            res = {"tests": [], "output": "not graded"}
        gs_score, gs_items = gradescope.get(sid, (None, {}))
        base = {"submission": sid, **row_scores(res), "gradescope score": "" if gs_score is None else gs_score,
                "changed": changed(res, gs_items, gs_score), "note": note(res)}
        why = None
        if folder is None:
            why = f"{META} lists this submission but the export has no {sid} folder (download the export again)"
        elif sid in errors:
            why = "autograder error (rerun to regrade): " + errors[sid].splitlines()[0]
        elif not res.get("tests"):
            why = res.get("output") or "nothing was graded"
        if why is not None:
            base = {**{k: "" for k in base}, "submission": sid, "gradescope score": base["gradescope score"],
                    "note": f"{NOT_GRADED}: {why}"}
        for person in people or [{}]:
            rows.append({"name": person.get("name", ""), "sid": person.get("sid", ""),
                         "email": person.get("email", ""), **base})
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with open_private(out_csv, newline="") as f:      # names, sids and grades: root's alone when root
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["submission"])
        w.writeheader()
        w.writerows(rows)
    return rows


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m autograder.grade_all", description=__doc__.split("\n\n")[0])
    ap.add_argument("export", type=Path, help="the unzipped Gradescope export")
    ap.add_argument("--out", type=Path, default=None, help="CSV path (default EXPORT/regrade.csv)")
    ap.add_argument("--jobs", type=int, default=1, help="workers on a CPU machine (GPU machines: one per GPU)")
    ap.add_argument("--shard", default=None, metavar="K/N",
                    help="grade only the K-th of N shares of the class (no CSV: run without --shard afterwards)")
    args = ap.parse_args(argv)
    shard = parse_shard(args.shard) if args.shard else None
    if not args.export.is_dir():
        ap.error(f"{args.export} is not a folder (unzip the Gradescope export first)")
    export = export_folder(args.export)
    out = args.out or export / "regrade.csv"
    try:
        rows, errors = regrade(export, None if shard else out, args.jobs, shard)
    except GraderError as e:
        print(grade.explain(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ninterrupted: the submissions graded to the end are kept in {export / 'regrade'}; the ones "
              f"cut short will be graded again. Run the same command to resume (no CSV was written).",
              file=sys.stderr)
        return 130
    if shard:
        for sid, why in errors.items():
            print(f"{sid}: {grade.explain(why)}", file=sys.stderr)
        print(f"shard {shard[0]}/{shard[1]} done ({len(errors)} autograder error(s)); once every shard is done, run "
              f"the same command without --shard: it grades nothing new and writes the CSV")
        return 1 if errors else 0
    print(f"{len(rows)} rows written to {out}")
    if not gpus() and any(r[k] == "" for r in rows for k in r if k.startswith("10 ")):
        print("item 10 (GPU speed) was not graded: no GPU is visible here, so its column is empty; regrade on "
              "the course GPU machine for it", file=sys.stderr)
    missing = sorted({r["submission"] for r in rows if "export has no" in r["note"]})
    if missing:
        print(f"{len(missing)} submission(s) listed in {META} have no folder in the export, so their rows "
              f"have no scores (marked NOT GRADED): {', '.join(missing)}", file=sys.stderr)
    moved = sorted({r["submission"] for r in rows if r.get("changed")})
    print(f"{len(moved)} submission(s) scored differently from Gradescope (column `changed` names the items)"
          + ("; which score stands for each item: docs/ta-guide.md, \"When the GPU regrade differs from "
             "Gradescope\"" if moved else ""), file=sys.stderr)
    for sid, why in errors.items():
        print(f"{sid}: {grade.explain(why)}", file=sys.stderr)
    if errors:
        print(f"{len(errors)} submission(s) not graded because of autograder errors (rows marked NOT GRADED: "
              f"autograder error); fix the cause and rerun: graded submissions are kept", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
