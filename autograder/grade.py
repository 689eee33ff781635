"""Grade one submission: ``python -m autograder.grade SUBMISSION [RESULTS]`` (``make grade``).

Writes a fallback results.json first (so a crash still leaves a valid file),
runs the hidden tests in a pytest process that never imports the submission (warm.py), then
prints a table per rubric item. A grading that the grader could not carry out raises GraderError:
the results.json then says "autograder error" (no score), and ``main`` prints the cause and the fix
and exits 1. Whether this machine can grade is checked by each grading's own jobs, which do all that the
preflight's probe does before they load the submission (runner._collect): a grading runs no probe of
its own; ``make grade-all`` runs the preflight once, before the first submission (preflight.py).
"""
import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from rmsnorm_testkit import text

from . import config, isolation, runtime, warm
from .config import RESULTS_VAR, RUNTIME_VAR, SUBMISSION_VAR
from .errors import STUDENT_MESSAGE, GraderError
from .plugin import open_private, write_results
from .rubric import ITEMS, PARTS

HERE = Path(__file__).resolve().parent
FALLBACK = {"score": 0, "execution_time": 0, "stdout_visibility": "hidden", "tests": [], "output": STUDENT_MESSAGE,
            "extra_data": {"autograder_error": True}}      # replaced when grading completes


def find_submission(folder: Path):
    """(the one rmsnorm.py in ``folder``, at any depth; None) or (None, a message saying what is wrong)."""
    found = sorted(p for p in folder.rglob("rmsnorm.py") if "__MACOSX" not in p.parts)
    if not found:
        names = ", ".join(sorted(p.name for p in folder.rglob("*") if p.is_file())[:10]) or "nothing"
        return None, f"No rmsnorm.py was found in your submission (it contained: {names}). Upload rmsnorm.py."
    if len(found) > 1:
        return None, ("Your submission contains several rmsnorm.py files: "
                      + ", ".join(str(p.relative_to(folder)) for p in found) + ". Upload exactly one.")
    return found[0], None


def resolve(submission: Path) -> Path:
    """The file to grade: ``submission`` itself, or the one rmsnorm.py inside that folder."""
    submission = Path(submission)
    if submission.is_dir():
        found, problem = find_submission(submission)
        if problem:
            raise FileNotFoundError(f"{submission}: {problem}")
        return found
    if not submission.is_file():
        raise FileNotFoundError(f"{submission}: no such file or folder")
    return submission


SCAN_OFF_WARNING = ("RMSNORM_SCAN=off: the static scan is skipped, so nothing is refused (part 0 says so in "
                    "results.json); for testing the sandbox only, never for grades (grade-all grades such results "
                    "again once the variable is unset)")


def grade(submission: Path, results: Path, env: dict | None = None, select: str | None = None) -> dict:
    """Run the hidden tests on ``submission`` (a file, or a folder holding one rmsnorm.py); return results.json.

    ``select``: a pytest ``-k`` expression, to run some tests only (calibrate.py times item 10 alone).
    Raises FileNotFoundError when there is nothing to grade, and GraderError when the grader, not the
    submission, failed (results.json then says so).
    """
    submission = resolve(submission)
    write_results(results, FALLBACK)
    try:
        config.group_cpu_s(env)
    except ValueError as e:
        raise GraderError(str(e), f"unset {config.GROUP_CPU_VAR} (each group then gets "
                                  f"{config.SIM_LIMITS.group_cpu_s:.0f} s), or give it a number of seconds") from None
    said = isolation.note()
    if said:
        print(f"grade: {said}", file=sys.stderr)
    if not config.scan_enabled(env or os.environ):
        print(f"grade: {SCAN_OFF_WARNING}", file=sys.stderr)
    env = dict(os.environ if env is None else env, **{SUBMISSION_VAR: str(submission.resolve()),
                                                      RESULTS_VAR: str(Path(results).resolve())})
    log = Path(results).with_suffix(".log")           # pytest's own output: for the staff, never for students
    with _runtime(env) as env:
        open_private(log, "wb").close()
        # no per-test timeout (the project's own tests have one): each job has its limits, and the GPU jobs'
        # compile allowance alone may exceed any fixed one; the whole run has config.grading_s()
        # (nor pytest's hunt for unraisable exceptions, two full garbage collections of torch's heap at exit)
        try:
            code = warm.pytest(["-q", "-p", "autograder.plugin", "-p", "no:cacheprovider", "-p", "no:timeout",
                                "-p", "no:unraisableexception", str(HERE / "hidden"),
                                *(["-k", select] if select else [])],
                               env=env, cwd=HERE.parent, out=log, timeout=config.grading_s(),
                               preload=warm.GRADER_PRELOAD)
        except warm.ServerLost as e:
            write_results(results, FALLBACK)           # a run lost with the warm server: no grade
            raise GraderError(str(e), "grade it again; if it recurs, see whether the machine ran short of "
                                      "memory (dmesg names what the kernel killed)") from e
    if code is None:
        write_results(results, FALLBACK)
        raise GraderError(f"the hidden tests ran past {config.grading_s():.0f} s, longer than every job's "
                          f"limits together: the grader is stuck (see {log})")
    res = json.loads(Path(results).read_text())
    cause = res.pop("autograder_error", None)
    if cause:
        write_results(results, res)                    # the student's copy: the message, not the cause
        cause, _, fix = str(cause).partition("\nFix: ")  # as the hidden tests' process wrote it (GraderError.__str__)
        raise GraderError(cause, fix)
    if not res.get("tests"):
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        raise GraderError("the hidden tests did not run; pytest said (" + str(log) + "):\n  " + "\n  ".join(tail))
    return res


@contextlib.contextmanager
def _runtime(env: dict):
    """``env`` with RMSNORM_RUNTIME set: the folder the submission's jobs import the job package and the
    simulator from. Gradescope's setup.sh makes one; grading from a checkout, a fresh copy of them is
    made for this grading (world-readable, removed afterwards), never the checkout itself, whose solution
    and hidden tests a submission could otherwise import."""
    if env.get(RUNTIME_VAR):
        yield env
        return
    private = keep_checkout_private()
    if private:
        names = ", ".join(private[:4]) + (f" and {len(private) - 4} more" if len(private) > 4 else "")
        venv = _venv_entry() or ".venv"
        print(f"grade: as root, this checkout ({config.ROOT}) is closed to other users but for {venv}: "
              f"submissions run as sandbox accounts, who need only the grader's Python ({names} changed; "
              f"`chmod o+rX NAME` gives one back)", file=sys.stderr)
    folder = Path(tempfile.mkdtemp(prefix="rmsnorm-runtime-"))
    try:
        yield {**env, RUNTIME_VAR: str(runtime.copy_into(folder))}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _venv_entry(root: Path = config.ROOT) -> str | None:
    """The entry of ``root`` that holds the running interpreter's venv (what the sandbox runs), if any."""
    try:
        return Path(sys.prefix).resolve().relative_to(root.resolve()).parts[0]
    except (ValueError, IndexError):
        return None


def keep_checkout_private(root: Path = config.ROOT) -> list:
    """Grading as root from a checkout: take other users' rights off every entry at its top but the venv
    the sandbox runs, and return the names changed. Submissions run as sandbox accounts, "other users"
    to the checkout; one that got past the static scan could otherwise read the answer key, the hidden
    tests, earlier results or the git history by path (Gradescope's setup.sh does `chmod -R go-rwx`)."""
    if os.geteuid() != 0:
        return []
    keep = {".venv", _venv_entry(root)}
    changed = []
    for path in sorted(root.iterdir()):
        if path.name in keep or path.is_symlink():
            continue
        mode = path.stat().st_mode
        if mode & 0o007:
            path.chmod(mode & 0o7770)
            changed.append(path.name)
    return changed


_PREFLIGHT_PASSED: set = set()


def preflight() -> None:
    """Raise GraderError unless this machine can grade (preflight.py), checked once per process: before a class's
    regrade, so that a grader that cannot grade stops before the first submission."""
    check_preflight(start_preflight())


def start_preflight():
    """Start the preflight (preflight.py) in a child process, unless this process has passed it already:
    what check_preflight judges. The probe imports torch; forked from the warm server (warm.py) that the
    hidden tests are forked from, it shares their one import of torch, and the grader's own process stays small
    while the submission's jobs run."""
    key = (sys.executable, os.environ.get(RUNTIME_VAR), os.geteuid(), config.ACCOUNT_PREFIX)
    if key in _PREFLIGHT_PASSED:
        return None
    out = tempfile.NamedTemporaryFile("r", prefix="rmsnorm-preflight-", suffix=".out", encoding="utf-8",
                                      errors="replace")
    env, made = dict(os.environ), None
    if not env.get(RUNTIME_VAR):              # a runtime folder made here and removed here: a child forked from the
        made = Path(tempfile.mkdtemp(prefix="rmsnorm-runtime-"))    # warm server ends without its exit handlers
        env[RUNTIME_VAR] = str(runtime.copy_into(made))
    return key, warm.start("autograder.preflight", [], env=env, cwd=config.ROOT, out=out.name,
                           preload=warm.GRADER_PRELOAD), out, made


def check_preflight(started) -> None:
    """Wait for a preflight that start_preflight started; raise GraderError (cause and fix) if it failed."""
    if started is None:
        return
    key, run, out, made = started
    try:
        with out:
            code = run.wait()
            said = out.read()
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    if code:
        text = said.strip().rpartition("preflight failed: ")[2] or f"exit code {code}"
        cause, _, fix = text.partition("\nFix: ")
        raise GraderError(cause, fix)
    _PREFLIGHT_PASSED.add(key)


def scores_by_item(res: dict) -> dict:
    """{item number: (score, max_score)} summed over the item's parts."""
    out = {}
    for t in res["tests"]:
        num = t["number"].split(".")[0]
        s, m = out.get(num, (0.0, 0.0))
        out[num] = (s + t["score"], m + t["max_score"])
    return out


def table(res: dict) -> str:
    """The per-item table `make grade` prints (failure messages shortened; results.json has them whole)."""
    by_num = {t["number"]: t for t in res["tests"]}
    row = "{:<8}{:<54}{:>6} / {:<5}"
    lines = [row.format("item", "", "score", "max"), "-" * 78]
    notes, last = {}, None                      # each message -> the part that printed it first
    for it in ITEMS:
        parts = [by_num[p.number] for p in it.graded() if p.number in by_num]
        if not parts:
            if it.gpu_only:
                lines.append(row.format(it.number, it.name + " (on the course GPU machine only)", "-",
                                        f"{it.points:g}"))
            continue
        got = sum(t["score"] for t in parts)
        out_of = it.points if it.extra_credit else sum(t["max_score"] for t in parts)
        label = it.name + (" (extra credit)" if it.extra_credit else "")
        lines.append(row.format(it.number, label, f"{got:g}", f"{out_of:g}"))
        for t in parts:
            if len(it.graded()) > 1:
                lines.append(row.format("  " + t["number"], "  " + PARTS[t["number"]].name,
                                        f"{t['score']:g}", f"{t['max_score']:g}"))
            if t["output"] and (t["status"] == "failed" or it.gpu_only):
                said = ("(the same reason as above)" if t["output"] == last else
                        f"(the same reason as {notes[t['output']]})" if t["output"] in notes else
                        t["output"][:text.SUMMARY_CHARS])
                lines.append("          " + said)
                notes.setdefault(t["output"], t["number"])
                last = t["output"]
    for t in res["tests"]:
        if t["number"] == "0" and (t["status"] == "failed" or t["output"]):
            lines.append(f"static checks: {t['output'][:text.SUMMARY_CHARS]}")
    extra_items = {i.number for i in ITEMS if i.extra_credit}
    regular = [t for t in res["tests"] if t["number"].split(".")[0] not in extra_items]
    extra = sum(t["score"] for t in res["tests"] if t["number"].split(".")[0] in extra_items)
    lines += ["-" * 78, row.format("total", "", f"{sum(t['score'] for t in regular):g}",
                                   f"{sum(t['max_score'] for t in regular):g}") + f" + {extra:g} extra credit"]
    if res.get("output"):
        lines.append(res["output"])
    return "\n".join(lines)


def explain(e: GraderError) -> str:
    """What `make grade` and grade-all print for an autograder error: for staff."""
    return f"AUTOGRADER ERROR (the grader failed, not the submission): {e}"


def main(argv):
    submission = Path(argv[0]) if argv else HERE.parent / "solution" / "rmsnorm.py"
    results = Path(argv[1]) if len(argv) > 1 else HERE.parent / "build" / "results.json"
    try:
        res = grade(submission, results)
    except FileNotFoundError as e:
        print(f"nothing to grade: {e}", file=sys.stderr)
        return 2
    except GraderError as e:
        print(explain(e), file=sys.stderr)
        print(f"\nresults: {results} (an autograder error: not a grade)", file=sys.stderr)
        return 1
    print(table(res))
    print(f"\nresults: {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
