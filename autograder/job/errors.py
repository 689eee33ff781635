"""An error of the submission's, in the student's terms: its type and message, where in rmsnorm.py, what to do.

The message is all the grader reports of a task that raised, so it says where the error was raised in
the student's file, and what to do when the cause is the grader's sandbox rather than the math.
"""
import traceback

from .shared import text


def describe(e: BaseException) -> str:
    """The error: its type and message (cut to fit MESSAGE_CHARS), the line of rmsnorm.py, a hint."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename.endswith("rmsnorm.py"):
            where = f" (rmsnorm.py line {frame.lineno})"
            break
    hint = _hint(e)
    return f"{type(e).__name__}: {e}"[:text.MESSAGE_CHARS - len(where) - len(hint)] + where + hint


def _hint(e: BaseException) -> str:
    """What to do about errors whose cause is the grader's sandbox rather than the math."""
    if isinstance(e, SystemExit):
        return ": rmsnorm.py must not end the process (exit(), sys.exit()); return the outputs instead"
    if isinstance(e, MemoryError) or "can't allocate memory" in str(e):
        try:
            import resource
            cap = resource.getrlimit(resource.RLIMIT_AS)[0]
        except (ImportError, OSError, ValueError):
            cap = -1
        size = f" at {cap / 2 ** 30:.0f} GiB" if cap > 0 else ""
        return (f": the grader caps a job's memory{size}; allocate only the outputs (y, r, dx, dg) and a small "
                f"partial-dg buffer, never a copy of the input per row or program")
    return ""
