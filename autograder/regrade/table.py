"""The regrade's CSV: one row per student, every rubric item, the total and the extra credit, Gradescope's score
for the same submission and ``changed``, the items whose points differ from Gradescope's. A submission that could
not be graded as submitted has a row that says NOT GRADED and why, and no numbers.
"""
from __future__ import annotations

import collections
import csv
import json
from pathlib import Path

from rmsnorm_testkit.text import SUMMARY_CHARS

from .. import grade
from ..plugin import open_private
from ..rubric import BY_NUMBER, ITEMS
from .export import META


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
    return reasons.most_common(1)[0][0][:SUMMARY_CHARS] if reasons else ""


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
