"""Build dist/rmsnorm-student.zip, the student bundle, from the sources (`make student`).

rmsnorm-student/
    README.md  Makefile  requirements*.txt  rmsnorm.py (the starter)  bench.py  viz.py
    benchmark/   the parts of bench.py: what a timed process measures, the schedule, tables, plots, traffic
    tests/       the public tests
    rmsnorm_testkit/  what the public tests share with the grader (never a file of the grader's own): the
                 reference and tolerance, the diagnosis, the scan, and the GPU timing bench.py uses
    mini_triton/ the simulator
    handout/     the handout
"""
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = "rmsnorm-student"


def files():
    """(source path, path inside the bundle) for every file of the bundle."""
    yield ROOT / "starter" / "README.student.md", "README.md"
    yield ROOT / "starter" / "Makefile.student", "Makefile"
    yield ROOT / "requirements.txt", "requirements.txt"
    yield ROOT / "requirements-triton.txt", "requirements-triton.txt"
    yield ROOT / "starter" / "rmsnorm.py", "rmsnorm.py"
    yield ROOT / "starter" / "bench.py", "bench.py"
    yield ROOT / "starter" / "viz.py", "viz.py"
    for p in sorted((ROOT / "starter" / "tests").glob("*.py")):
        yield p, f"tests/{p.name}"
    for folder in ("rmsnorm_testkit", "benchmark"):
        for p in sorted((ROOT / "starter" / folder).glob("*.py")):
            yield p, f"{folder}/{p.name}"
    for p in sorted((ROOT / "mini_triton").rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".md"):
            yield p, f"mini_triton/{p.relative_to(ROOT / 'mini_triton').as_posix()}"
    handout = ROOT / "handout"
    if handout.is_dir():
        for p in sorted(handout.rglob("*")):
            if p.is_file():
                yield p, f"handout/{p.relative_to(handout).as_posix()}"


REPO_ONLY = re.compile(r"^<!-- repo-only.*?-->\n.*?^<!-- /repo-only -->\n", flags=re.M | re.S)


def content(src: Path) -> bytes:
    """The file as the bundle holds it: Markdown loses its ``<!-- repo-only -->`` sections (recipes
    and benchmarks that name the project's own tests and scripts, which the bundle does not hold)."""
    if src.suffix == ".md":
        return REPO_ONLY.sub("", src.read_text(encoding="utf-8")).encode("utf-8")
    return src.read_bytes()


def build(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for src, name in files():
            info = zipfile.ZipInfo(f"{TOP}/{name}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, content(src))
    return out


if __name__ == "__main__":
    out = build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist" / "rmsnorm-student.zip")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
