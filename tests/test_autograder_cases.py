"""Hidden cases live in one file: the TA guide's example adds one to a copy of the grader, changing
autograder/hidden/cases.py alone, and a grading with that copy runs it. Also: the guide's rubric
table agrees with rubric.py."""
import re
import subprocess
import sys

import pytest

from autograder import rubric
from conftest import ROOT

GUIDE = (ROOT / "docs" / "ta-guide.md").read_text()


def guide_example():
    """The python block of the guide's "Adding a hidden case" section."""
    section = GUIDE[GUIDE.index("### Adding a hidden case"):]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


@pytest.mark.usefixtures("sandbox_accounts")          # grades through the sandbox (conftest.py)
def test_a_hidden_case_added_as_the_guide_shows_is_graded(grader_copy, tmp_path):
    example = guide_example()
    assert example.startswith("# autograder/hidden/cases.py")
    cases = grader_copy / "autograder" / "hidden" / "cases.py"
    cases.write_text(cases.read_text() + "\n" + example)          # the one file changed
    sub = tmp_path / "rmsnorm.py"                                  # right everywhere but at N = 5000
    sub.write_text((ROOT / "tests" / "corpus" / "simple.py").read_text().replace(
        "def rmsnorm_forward(x, g, eps=1e-5):\n",
        "def rmsnorm_forward(x, g, eps=1e-5):\n    eps = 0.5 if x.shape[-1] == 5000 else eps\n"))
    p = subprocess.run([sys.executable, "-m", "autograder.grade", str(sub), str(tmp_path / "r.json")],
                       cwd=grader_copy, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "4.4" in p.stdout and "x of shape (4, 5000) fp32 (N = 5000: longer than 4096, not a power of 2)" \
        in p.stdout, p.stdout
    assert "90 / 90" not in p.stdout and "87 / 90" in p.stdout      # 4.4 (3 points) lost, nothing else


def test_the_guides_rubric_table_matches_the_rubric():
    rows = re.findall(r"^\| (\d+) ([^|]+?) \| (\d+(?:\.\d+)?) \|", GUIDE, flags=re.M)
    table = {num: (name.strip(), float(points)) for num, name, points in rows}
    for item in rubric.ITEMS:
        name, points = table.pop(item.number)
        assert name.startswith(item.name) and points == item.points, (item, name, points)
        assert ("extra credit" in name) == item.extra_credit
    assert not table, f"rows the rubric does not have: {table}"
