"""Build starter/rmsnorm.py from solution/rmsnorm.py (one source of truth).

Every block between ``# [TODO] message`` and ``# [/TODO]`` in the solution
becomes ``raise NotImplementedError("TODO: message")`` in the starter; the
comments around the blocks (the hints) stay. ``make starter`` runs this, and
a test checks that the committed starter is up to date.

    python starter/generate.py            # rewrite starter/rmsnorm.py
    python starter/generate.py --check    # exit 1 if it is out of date
"""
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solution" / "rmsnorm.py"
STARTER = ROOT / "starter" / "rmsnorm.py"

HEADER = '''# STARTER CODE. Fill in every TODO below: each `raise NotImplementedError` marks
# code for you to write. `make test` runs the public tests; the handout explains each part.
'''
# Words of the solution that name the project's own files, which students do not get.
REWRITES = {"measured on an NVIDIA H200 (tests/tune_kernels.py; docs/perf.md).":
            "measured on an NVIDIA H200 by the course staff."}
BEGIN = re.compile(r"^(\s*)# \[TODO\] (.*)$")
END = re.compile(r"^\s*# \[/TODO\]\s*$")


def solution_blocks(text):
    """Yield (indent, message, [lines]) for each TODO block of the solution."""
    lines, i = text.splitlines(), 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if m:
            j = i + 1
            while not END.match(lines[j]):
                j += 1
            yield m.group(1), m.group(2), lines[i + 1:j]
            i = j
        i += 1


def todo_raise(indent: str, message: str, width: int = 120) -> list:
    """``raise NotImplementedError("TODO: message")``, split into adjacent string literals (one
    message) when it would be longer than ``width``."""
    one = f'{indent}raise NotImplementedError("TODO: {message}")'
    if len(one) <= width:
        return [one]
    pieces = textwrap.wrap(f"TODO: {message}", width - len(indent) - 8, drop_whitespace=False)
    lines = [f'{indent}raise NotImplementedError(']
    lines += [f'{indent}    "{piece}"' for piece in pieces]
    return lines[:-1] + [lines[-1] + ")"]


def make_starter(text: str, keep=()) -> str:
    """The starter made from the solution's ``text``. ``keep``: prefixes of TODO messages whose
    solution code stays (``keep=("Part (a)",)`` is a student who has done part (a), for tests)."""
    out, skipping = [], False
    for line in text.splitlines():
        m = BEGIN.match(line)
        if m and m.group(2).startswith(tuple(keep)):
            continue
        if m:
            out += todo_raise(*m.groups())
            skipping = True
        elif END.match(line):
            if not skipping:
                continue
            skipping = False
        elif not skipping:
            out.append(line)
    body = "\n".join(out) + "\n"
    for old, new in REWRITES.items():
        if old not in body:
            raise ValueError(f"generate.REWRITES: the solution no longer says {old!r}")
        body = body.replace(old, new)
    # a module docstring stays first; the header goes right after it
    end = body.index('"""', 3) + 3 if body.startswith('"""') else 0
    return body[:end] + "\n" + HEADER + "\n" + body[end:].lstrip("\n")


def main(argv):
    text = make_starter(SOLUTION.read_text())
    if "--check" in argv:
        if STARTER.read_text() != text:
            print("starter/rmsnorm.py is out of date: run `make starter`")
            return 1
        return 0
    STARTER.write_text(text)
    print(f"wrote {STARTER.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
