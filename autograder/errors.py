"""The one error that is never a student's: the grader itself could not grade.

A grading ends in one of three ways: a grade the student earned, a grade whose lost
points each name the student's defect, or an *autograder error*. The last is raised as
:class:`GraderError` wherever the grader finds that it cannot do its job (no sandbox
account, an interpreter the account cannot run, torch that does not load under the
limits, a job folder it cannot write). The student sees only ``STUDENT_MESSAGE`` (Gradescope
shows 0 and no tests: not a grade, to be regraded); staff see the cause and the fix.
"""
from __future__ import annotations

# No apostrophes: run_autograder writes the same text from a shell string (a test checks they agree).
STUDENT_MESSAGE = ("autograder error: contact course staff. The grader could not grade this submission, for a "
                   "reason that has nothing to do with your code: the 0 shown here is not your grade. Course "
                   "staff have the details and will regrade it.")


class GraderError(Exception):
    """The grader cannot grade: ``cause`` says what is wrong, ``fix`` what staff should do."""

    def __init__(self, cause: str, fix: str = ""):
        super().__init__(cause)
        self.cause, self.fix = cause, fix

    def __str__(self) -> str:
        return self.cause + (f"\nFix: {self.fix}" if self.fix else "")
