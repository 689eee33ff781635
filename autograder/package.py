"""Build dist/autograder.zip, the Gradescope autograder (``make autograder``).

The zip holds setup.sh and run_autograder at its root, the grader (autograder/),
the simulator (mini_triton/), the test kit it shares with the public tests (rmsnorm_testkit/), the known-good
submission of setup.sh's self-test (tests/corpus/simple.py) and the pinned
requirements minus what grading on a CPU does not need (triton, matplotlib).
It never holds the reference solution: a check below refuses to build if any
line of the solution's answers would end up inside.
"""
import os
import re
import sys
import zipfile
from pathlib import Path

from . import TESTKIT

ROOT = Path(__file__).resolve().parent.parent
NOT_ON_GRADESCOPE = ("triton", "matplotlib")


def files():
    """(path in the zip, source path) of every file shipped."""
    out = [("setup.sh", ROOT / "autograder" / "zip" / "setup.sh"),
           ("run_autograder", ROOT / "autograder" / "zip" / "run_autograder"),
           *((f"starter/rmsnorm_testkit/{p.name}", p) for p in sorted(TESTKIT.glob("*.py"))),
           ("autograder/selftest/rmsnorm.py", ROOT / "tests" / "corpus" / "simple.py")]   # setup.sh's self-test
    for folder in ("autograder", "mini_triton"):
        for p in sorted((ROOT / folder).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".md") \
                    and p.parent.name != "zip":
                out.append((str(p.relative_to(ROOT)), p))
    return out


def requirements() -> str:
    keep = [ln for ln in (ROOT / "requirements.txt").read_text().splitlines()
            if not re.match(rf"^({'|'.join(NOT_ON_GRADESCOPE)})\b", ln) and not ln.startswith("#")]
    return "\n".join(keep) + "\n"


def solution_lines() -> set:
    """The solution's answer lines (inside its TODO blocks, nested ones too, and the commented-out lines
    after an ``# [ELSE]``: part (b)'s answer that part (d) replaces) that are long enough to be distinctive."""
    lines, depth, before = set(), 0, False
    for ln in (ROOT / "solution" / "rmsnorm.py").read_text().splitlines():
        s = ln.strip()
        if s.startswith("# [TODO]"):
            depth += 1
        elif s.startswith("# [/TODO]"):
            depth, before = depth - 1, False
        elif s.startswith("# [ELSE]"):
            before = True
        elif depth:
            s = s[2:].strip() if before and s.startswith("# ") else s
            if len(s) >= 40:
                lines.add(s)
    return lines


def build(out: Path) -> Path:
    """Write the zip. It holds the hidden tests, so it is private from birth: the folder (when made here)
    and the zip are created readable by their owner only, never opened first and closed later."""
    answers = solution_lines()
    old_umask = os.umask(0o077)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)                  # a new file takes the umask; an old one keeps its mode
        return _write(out, answers)
    finally:
        os.umask(old_umask)


def _write(out: Path, answers: set) -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, src in files():
            text = src.read_text()
            leaked = [ln for ln in text.splitlines() if ln.strip() in answers]
            if leaked:
                raise SystemExit(f"refusing to build: {name} contains solution code: {leaked[0].strip()!r}")
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
        info = zipfile.ZipInfo("requirements.txt", date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        z.writestr(info, requirements())
    return out


def main(argv):
    out = build(Path(argv[0]) if argv else ROOT / "dist" / "autograder.zip")
    with zipfile.ZipFile(out) as z:
        print(f"{out}: {len(z.namelist())} files; upload it as the Gradescope autograder (see docs/ta-guide.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
