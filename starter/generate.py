"""Build starter/rmsnorm.py, and partial answers, from solution/rmsnorm.py (one source of truth).

The solution marks each answer as a block:

    # [TODO] Part (b): message              the answer of part (b)
    ...solution lines...
    # [/TODO]

In the starter a block becomes ``raise NotImplementedError("TODO: message")``; the comments
around it (the hints) stay. A block may instead say what stands there before its part is done:

    # [TODO] Part (d): message
    ...solution lines...
    # [ELSE]
    # ...lines, commented out in the solution...
    # [/TODO]

and then the starter holds those lines, uncommented (nothing at all when the [ELSE] is empty).
Code that is the staff's alone (launch machinery that no part asks for) sits between
``# [STAFF] why`` and ``# [/STAFF]``: neither the starter nor a partial answer has it.
Blocks nest: part (c)'s wrapper holds the part (d) block that changes its launch, so a student
who stopped after part (c) has part (c)'s answer with part (b)'s launch in it.

    python starter/generate.py                          # rewrite starter/rmsnorm.py
    python starter/generate.py --check                  # exit 1 if it is out of date
    python starter/generate.py --parts abc --out F.py   # the solution with only parts a-c answered
"""
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solution" / "rmsnorm.py"
STARTER = ROOT / "starter" / "rmsnorm.py"
PARTS = "abcd"                          # the parts with code; part (e) is a written answer

HEADER = '''# STARTER CODE. Fill in every TODO below: each `raise NotImplementedError` marks
# code for you to write. `make test` runs the public tests; the handout explains each part.
'''
# Words of the solution that name the project's own files, which students do not get.
REWRITES = {"measured on an NVIDIA H200 (tests/tune_kernels.py; docs/perf.md).":
            "measured on an NVIDIA H200 by the course staff."}
BEGIN = re.compile(r"^(\s*)# \[TODO\] (.*)$")
ELSE = re.compile(r"^\s*# \[ELSE\]\s*$")
END = re.compile(r"^\s*# \[/TODO\]\s*$")
PART = re.compile(r"^Part \(([a-e])\)")
STAFF = re.compile(r"^# \[STAFF\] .*?^# \[/STAFF\]\n", re.M | re.S)


def without_staff(text: str) -> str:
    """The solution without its [STAFF] blocks (unindented, never nested in a [TODO] block)."""
    return STAFF.sub("", text)


@dataclass
class Block:
    """One answer: its part's letter, the TODO message, the solution's lines (which may hold
    blocks), and the lines that stand there before the part is done (None: a TODO raise)."""
    indent: str
    message: str
    answer: list = field(default_factory=list)
    before: list = None

    @property
    def part(self) -> str:
        m = PART.match(self.message)
        if not m:
            raise ValueError(f"generate: a [TODO] message must start with 'Part (x)': {self.message!r}")
        return m.group(1)


def parse(text: str) -> list:
    """The solution as a list of lines (str) and Blocks."""
    top, stack = [], []                 # stack: the open blocks, innermost last
    for n, line in enumerate(text.splitlines(), 1):
        here = stack[-1].before if stack and stack[-1].before is not None else (
            stack[-1].answer if stack else top)
        if m := BEGIN.match(line):
            block = Block(m.group(1), m.group(2))
            block.part                                          # noqa: B018  (checks the message)
            here.append(block)
            stack.append(block)
        elif ELSE.match(line):
            if not stack or stack[-1].before is not None:
                raise ValueError(f"generate: line {n}: [ELSE] outside a [TODO] block")
            stack[-1].before = []
        elif END.match(line):
            if not stack:
                raise ValueError(f"generate: line {n}: [/TODO] without its [TODO]")
            stack.pop()
        elif stack and stack[-1].before is not None:
            here.append(_uncomment(line, stack[-1].indent, n))
        else:
            here.append(line)
    if stack:
        raise ValueError(f"generate: the block {stack[-1].message!r} has no [/TODO]")
    return top


def _uncomment(line: str, indent: str, n: int) -> str:
    """An [ELSE] line as the starter holds it: ``indent + "# " + code`` becomes ``indent + code``."""
    if line.strip() == "#":
        return ""
    if not line.startswith(indent + "# "):
        raise ValueError(f"generate: line {n}: an [ELSE] line must be commented out at the block's indent")
    return indent + line[len(indent) + 2:]


def render(items: list, parts: str) -> list:
    """The lines of a student's file who has done ``parts`` (e.g. "abc")."""
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif item.part in parts:
            out += render(item.answer, parts)
        elif item.before is not None:
            out += item.before
        else:
            out += todo_raise(item.indent, item.message)
    return out


def blocks(items: list, part: str):
    """Every block of ``part`` in ``items``, nested ones included."""
    for item in items:
        if isinstance(item, Block):
            if item.part == part:
                yield item
            yield from blocks(item.answer, part)


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


def make_starter(text: str, parts: str = "") -> str:
    """The starter made from the solution's ``text``, with the answers of ``parts`` kept
    (``parts="abc"``: a student who has done parts (a) to (c) and not the extra credit)."""
    if set(parts) - set(PARTS):
        raise ValueError(f"parts are letters among {PARTS!r} (part (e) has no code), got {parts!r}")
    items = parse(without_staff(text))
    body = re.sub(r"\n{4,}", "\n\n\n", "\n".join(render(items, parts)) + "\n")   # where a block was
    for old, new in REWRITES.items():
        if old not in body:
            raise ValueError(f"generate.REWRITES: the solution no longer says {old!r}")
        body = body.replace(old, new)
    # a module docstring stays first; the header goes right after it
    end = body.index('"""', 3) + 3 if body.startswith('"""') else 0
    header = HEADER if not parts else (
        f"# A PARTIAL ANSWER (make partial PARTS={parts}): the solution's answers of part{'s' * (len(parts) > 1)} "
        f"{', '.join(parts)},\n# the starter's code everywhere else.\n")
    return body[:end] + "\n" + header + "\n" + body[end:].lstrip("\n")


def main(argv):
    if "--parts" in argv:
        parts, out = argv[argv.index("--parts") + 1], Path(argv[argv.index("--out") + 1])
        try:
            text = make_starter(SOLUTION.read_text(), parts)
        except ValueError as e:
            print(f"make partial: {e}")
            return 2
        out.write_text(text)
        print(f"wrote {out}: the solution's answers of part{'s' * (len(parts) != 1)} "
              f"{', '.join(parts) or '(none)'}, the starter's everywhere else")
        return 0
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
