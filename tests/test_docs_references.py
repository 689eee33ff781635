"""The guides name real files: every path in backquotes in the README, the TA guide, the architecture
notes and the simulator's README exists (a path under one of the repository's folders, or a bare file
name found somewhere in the project)."""
import functools
import re
import subprocess

import pytest

from conftest import ROOT

GUIDES = ["README.md", "docs/ta-guide.md", "docs/architecture.md", "mini_triton/README.md"]
FOLDERS = ("autograder/", "mini_triton/", "starter/", "solution/", "tests/", "docs/", "handout/")
# Names that are made by running something, or that live on other machines, not in the repository.
MADE = {"build/", "dist/", ".venv/", "notes.txt", "results.json", "regrade.csv", "submission.zip", "setup.sh",
        "run_autograder", "metadata.yml", "submission_metadata.yml"}


def references(text):
    """Backquoted words that look like a project path: a repository folder's path, or a bare *.py / *.md."""
    for word in re.findall(r"`([^`\s]+)`", text):
        word = word.rstrip(".,:;")
        if word.startswith(FOLDERS) or re.fullmatch(r"[\w.-]+\.(py|md)", word):
            yield word


def missing(word, project_files):
    if any(word.startswith(m) or word.endswith(m) for m in MADE):
        return False
    if word.startswith(FOLDERS):
        path = word.split("::")[0].split("#")[0]
        return not (ROOT / path.rstrip("/")).exists()
    return word not in project_files


@functools.cache
def project_file_names():
    """The names of the files git tracks, or would (untracked, not ignored)."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return {line.rsplit("/", 1)[-1] for line in out.splitlines()}


@pytest.mark.parametrize("guide", GUIDES)
def test_every_file_a_guide_names_exists(guide):
    project_files = project_file_names()
    found = sorted({w for w in references((ROOT / guide).read_text()) if missing(w, project_files)})
    assert not found, f"{guide} names files that do not exist: {found}"


def test_the_reference_checker_finds_a_missing_file():
    names = {"grade.py"}
    words = list(references("see `autograder/grade.py`, `autograder/nope.py`, `grade.py`, `gone.py` and `x = 1`"))
    assert words == ["autograder/grade.py", "autograder/nope.py", "grade.py", "gone.py"]
    assert [w for w in words if missing(w, names)] == ["autograder/nope.py", "gone.py"]
