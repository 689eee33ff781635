"""Run a job: ``python -I autograder/job/__main__.py SUBMISSION.py JOB_DIR`` (the package's docstring says more).

Run as a file, under -I, no folder of the runtime is on sys.path: the runtime's root (two folders up) is
put there first, so that the package imports as ``autograder.job``.
"""
import sys
from pathlib import Path

if not __package__:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autograder.job.main import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
