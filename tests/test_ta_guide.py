"""docs/ta-guide.md is true line by line: every command in its code blocks names a real target, variable,
module or script, and runs. The cheap ones run here as written; `make -n` shows what the others would run
(their real runs are other tests': grading in test_autograder_grade, the Gradescope rehearsal in
test_autograder_zip, a regrade in test_autograder_grade_all); GPU-only ones run on the GPU machine
(docs/perf.md)."""
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

GUIDE = (ROOT / "docs" / "ta-guide.md").read_text(encoding="utf-8")
MAKEFILE = (ROOT / "Makefile").read_text()


def commands(lang_pattern=r"\w*"):
    """Every command line of the guide's code blocks (continuations joined, comments and [optional] words
    dropped), as (block language, text)."""
    out = []
    for lang, block in re.findall(rf"^```({lang_pattern})\n(.*?)^```", GUIDE, flags=re.M | re.S):
        text = re.sub(r"\\\n\s*", " ", block)
        for line in text.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            line = re.sub(r"\s*\[[^\]]*\]", "", line)
            if line and not line.startswith("#"):
                out.append((lang, line))
    return out


MAKE_LINES = [c for _, c in commands() if c.startswith("make ")]


def test_the_guide_has_commands_of_every_kind():
    assert len(MAKE_LINES) >= 8 and any(c.startswith(".venv/bin/python -m") for _, c in commands())


@pytest.mark.parametrize("line", MAKE_LINES)
def test_every_make_command_names_a_target_and_variables_the_makefile_has(line):
    words = shlex.split(line.replace("$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT", "1/8"))
    targets = set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, flags=re.M))
    assert words[1] in targets, line
    for w in words[2:]:
        var = w.split("=")[0]
        assert "=" in w and re.search(rf"^{var}\s*\?=|\$\({var}\)", MAKEFILE, flags=re.M), (line, var)


@pytest.mark.parametrize("line", MAKE_LINES)
def test_every_make_command_expands_to_what_the_guide_says(line, tmp_path):
    """`make -n`: the command runs its recipe (a dry run: the heavy ones are run by other tests)."""
    line = line.replace("$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT", "1/8")
    line = line.replace("EXPORT=dir", f"EXPORT={tmp_path}").replace("EXPORT=/shared/export", f"EXPORT={tmp_path}")
    line = line.replace("SUBMISSION=path", "SUBMISSION=solution").replace("RESULTS=path", "RESULTS=build/r.json")
    out = subprocess.run(["make", "-n", *shlex.split(line)[1:], f"PY={sys.executable}", f"PYTHON={sys.executable}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    if "SHARD=" in line:
        assert "--shard 1/8" in out.stdout
    if "grade-all" in line:
        assert f"-m autograder.grade_all \"{tmp_path}\"" in out.stdout


def test_make_partial_as_the_guide_writes_it(tmp_path):
    line = next(c for c in MAKE_LINES if c.startswith("make partial"))
    out = tmp_path / "abc.py"
    run = subprocess.run([*shlex.split(line.replace("OUT=build/abc.py", f"OUT={out}")), f"PYTHON={sys.executable}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "rmsnorm_bwd_kernel[(m,)](" in out.read_text(), run.stdout + run.stderr


@pytest.mark.usefixtures("sandbox_accounts")          # grades through the sandbox (conftest.py)
def test_the_python_commands_run_or_print_their_usage(tmp_path):
    env = dict(os.environ)
    for _, line in commands():
        if not line.startswith((".venv/bin/python", "python3 tests/")):
            continue
        words = shlex.split(line)
        if "autograder.preflight" in line:                  # it grades nothing: run it as written
            run = subprocess.run([sys.executable, "-m", "autograder.preflight"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=300)
            assert run.returncode == 0 and "preflight: ok" in run.stdout, run.stdout + run.stderr
        elif "autograder.calibrate" in line:                # GPU-only (docs/perf.md): its usage here
            run = subprocess.run([sys.executable, "-m", "autograder.calibrate", "--help"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=60)
            assert run.returncode == 0 and "--runs" in run.stdout and "--show" in run.stdout
        elif words[:2] == ["python3", "tests/corpus/variants.py"]:
            run = subprocess.run([sys.executable, words[1], str(tmp_path / "v")], cwd=ROOT, capture_output=True,
                                 text=True, timeout=60)
            assert run.returncode == 0 and (tmp_path / "v" / "rows_partial_dg.py").is_file(), run.stderr
        else:
            raise AssertionError(f"a command of the guide no test runs: {line}")


def test_the_slurm_script_is_valid_bash_and_shards_by_its_array():
    script = next(block for lang, block in re.findall(r"^```(\w*)\n(.*?)^```", GUIDE, flags=re.M | re.S)
                  if "#SBATCH" in block)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "--array=1-" in script and "SHARD=$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT" in script
