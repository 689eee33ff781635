"""Many runs of the public tests, each in a fresh process, without paying for torch's import in each.

A run of ``python -m pytest starter/tests`` spends about 2 s of CPU importing torch before its first test. The
grader's warm interpreter (autograder/warm.py) is one process that has imported torch and pytest; each run here
is a child forked from it, as each grading's hidden tests are: a fresh process as far as the public tests can
tell (its own modules, environment, working folder and output), as ``python -m pytest`` would start it.

    run(args, env, cwd, timeout) -> (exit code, stdout and stderr together)
"""
import tempfile

from autograder import warm


def run(args, env: dict, cwd: str, timeout: float) -> tuple:
    """(exit code, output) of pytest ``args`` in a child of the warm interpreter; a run past ``timeout`` is killed
    (exit code None)."""
    with tempfile.NamedTemporaryFile("r", suffix=".out", encoding="utf-8", errors="replace") as out:
        code = warm.pytest(args, env=env, cwd=cwd, out=out.name, timeout=timeout)
        return code, out.read()
