"""Grade a small known-good submission end to end: ``python -m autograder.selftest [SUBMISSION]``.

The last step of the Gradescope build (setup.sh): if the sandbox, its accounts, the
limits or torch are broken, the build fails here, with the cause, instead of every
student's grading failing later. The submission is a plain lecture-style one
(tests/corpus/simple.py, shipped as autograder/selftest/rmsnorm.py; not the answer
key): it must earn every regular point on the CPU and no extra credit.
"""
import sys
import tempfile
from pathlib import Path

from rmsnorm_testkit import text

from . import grade, rubric
from .errors import GraderError

HERE = Path(__file__).resolve().parent
CANDIDATES = (HERE / "selftest" / "rmsnorm.py", HERE.parent / "tests" / "corpus" / "simple.py")


def main(argv) -> int:
    submission = Path(argv[0]) if argv else next(p for p in CANDIDATES if p.exists())
    with tempfile.TemporaryDirectory() as d:
        try:
            res = grade.grade(submission, Path(d) / "results.json")
        except GraderError as e:
            print(f"self-test: {grade.explain(e)}", file=sys.stderr)
            return 1
    lost = [t for t in res["tests"] if t["status"] == "failed" and t["number"] in rubric.PARTS
            and not rubric.item_of(t["number"]).extra_credit]
    if lost:
        print("self-test: the known-good submission lost points, so grading is broken here:\n  "
              + "\n  ".join(f"{t['number']} {t['name']}: {t['output'][:text.SUMMARY_CHARS]}" for t in lost),
              file=sys.stderr)
        return 1
    print(f"self-test: ok, {submission.name} graded end to end through the sandbox: "
          f"{sum(t['score'] for t in res['tests']):g} / {rubric.total(gpu=False):g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
