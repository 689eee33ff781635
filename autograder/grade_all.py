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
import sys
from pathlib import Path

from . import grade
from .errors import GraderError
from .regrade.export import META, export_folder
from .regrade.run import gpus, regrade
from .regrade.shards import parse_shard


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m autograder.grade_all", description=__doc__.split("\n\n")[0])
    ap.add_argument("export", type=Path, help="the unzipped Gradescope export")
    ap.add_argument("--out", type=Path, default=None, help="CSV path (default EXPORT/regrade.csv)")
    ap.add_argument("--jobs", type=int, default=1, help="workers on a CPU machine (GPU machines: one per GPU)")
    ap.add_argument("--leaderboard-names", action="store_true",
                    help="name the students in leaderboard.md and .csv (by default each row shows its submission)")
    ap.add_argument("--shard", default=None, metavar="K/N",
                    help="grade only the K-th of N shares of the class (no CSV: run without --shard afterwards)")
    args = ap.parse_args(argv)
    shard = parse_shard(args.shard) if args.shard else None
    if not args.export.is_dir():
        ap.error(f"{args.export} is not a folder (unzip the Gradescope export first)")
    export = export_folder(args.export)
    out = args.out or export / "regrade.csv"
    try:
        rows, errors = regrade(export, None if shard else out, args.jobs, shard, args.leaderboard_names)
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
    print(f"{len(rows)} rows written to {out}; the speed leaderboard to {out.parent / 'leaderboard.md'} (and .csv)")
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
