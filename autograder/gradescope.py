"""Gradescope's entry point: ``python -m autograder.gradescope AUTOGRADER_ROOT`` (run_autograder).

Finds rmsnorm.py in the submission folder, grades it (grade.py), and puts the
per-item table in results.json's top-level output. Whatever happens, a valid
results.json is left behind: a submission without rmsnorm.py gets a message
that says so; an autograder error gets ``errors.STUDENT_MESSAGE`` and no score,
its cause going to stdout, which only staff see (``stdout_visibility: hidden``),
with pytest's own log.
"""
import sys
import time
import traceback
from pathlib import Path

from . import grade
from .errors import STUDENT_MESSAGE, GraderError
from .plugin import write_results

LOG_CAP = 200_000           # characters of pytest's log printed for staff


def _staff_log(results: Path):
    """pytest's own output, for the staff-only stdout."""
    log = results.with_suffix(".log")
    if log.exists():
        print("--- pytest log (staff only) ---")
        print(log.read_text(errors="replace")[-LOG_CAP:])


def main(argv):
    root = Path(argv[0]) if argv else Path("/autograder")
    results = root / "results" / "results.json"
    start = time.monotonic()
    submission, problem = grade.find_submission(root / "submission")
    if problem:
        write_results(results, {"score": 0, "execution_time": 0, "stdout_visibility": "hidden", "tests": [],
                                "output": problem})
        return 0
    try:
        res = grade.grade(submission, results)
    except Exception as e:                                   # noqa: BLE001 -- the grader's own failure
        write_results(results, {"score": 0, "execution_time": round(time.monotonic() - start, 2),
                                "stdout_visibility": "hidden", "tests": [], "output": STUDENT_MESSAGE,
                                "extra_data": {"autograder_error": True}})
        print(grade.explain(e) if isinstance(e, GraderError) else
              "AUTOGRADER ERROR (the grader crashed):\n" + traceback.format_exc())
        _staff_log(results)
        return 0
    res["output"] = grade.table(res)
    res["output_format"] = "text"
    write_results(results, res)
    print(res["output"])
    _staff_log(results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
