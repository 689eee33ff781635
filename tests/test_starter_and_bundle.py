"""The starter is the solution with its answers removed; the student bundle works on its own."""
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "starter"))
import build_bundle  # noqa: E402
import generate  # noqa: E402
from rmsnorm_testkit.compare import load_impl  # noqa: E402


def solution_code_lines(parts=generate.PARTS):
    """Substantial lines written inside the solution's TODO blocks of ``parts`` (the answers), but not
    outside them too (a decorator, a line that another, given function also has)."""
    lines, items = set(), generate.parse(generate.SOLUTION.read_text())
    given = {line.strip() for line in items if isinstance(line, str)}
    for part in parts:
        for block in generate.blocks(items, part):
            for line in generate.render(block.answer, generate.PARTS):
                s = line.strip()
                if len(s) > 12 and not s.startswith("#") and s not in given:
                    lines.add(s)
    return lines


def code_lines(text: str) -> set:
    return {line.strip() for line in text.splitlines()}


def test_committed_starter_is_generated_from_the_solution():
    assert (ROOT / "starter" / "rmsnorm.py").read_text() == generate.make_starter(generate.SOLUTION.read_text()), \
        "starter/rmsnorm.py is out of date: run `make starter`"


def test_starter_contains_no_solution_code():
    starter = {line.strip() for line in (ROOT / "starter" / "rmsnorm.py").read_text().splitlines()}
    leaked = solution_code_lines() & starter
    assert not leaked, f"solution lines in the starter: {sorted(leaked)[:5]}"
    assert len(solution_code_lines()) > 40


def test_part_d_s_answer_is_in_neither_the_starter_nor_a_student_s_file_after_part_c():
    """Part (d) is the student's own work: no line of its answer (the many-rows kernel, its helpers, the
    program count, the launch) is given, in the starter or in the file of a student who did parts a-c."""
    answer = solution_code_lines("d")
    assert len(answer) > 30, sorted(answer)
    starter = (ROOT / "starter" / "rmsnorm.py").read_text()
    leaked = answer & code_lines(starter)
    assert not leaked, f"part (d)'s answer in the starter: {sorted(leaked)[:5]}"
    # after part (c), the part (b) answer shares generic lines with part (d)'s (`c = start + cols`): none of
    # part (d)'s own names may appear
    after_c = generate.make_starter(generate.SOLUTION.read_text(), "abc")
    for name in ("rows_per_program", "_num_programs_bwd", "_bwd_config", "_sm_count", "row_tile", "load_rows",
                 "bwd_tile", "per_sm"):
        assert name in generate.SOLUTION.read_text() and name not in starter and name not in after_c, name


def test_a_partial_answer_keeps_the_parts_it_names_and_the_starter_elsewhere():
    solution = generate.SOLUTION.read_text()
    full = generate.make_starter(solution, "abcd")
    assert "[TODO]" not in full and "[ELSE]" not in full and "NotImplementedError(\"TODO" not in full
    assert code_lines(full) >= solution_code_lines()
    abc = generate.make_starter(solution, "abc")
    assert "rmsnorm_bwd_kernel[(m,)](" in abc and 'NotImplementedError("TODO' not in abc
    a = generate.make_starter(solution, "a")
    assert a.count('raise NotImplementedError("TODO: Part (b)') == 1 and "TODO: Part (c)" in a
    with pytest.raises(ValueError, match="part \\(e\\) has no code"):
        generate.make_starter(solution, "abce")


def test_starter_imports_and_every_entry_point_raises_not_implemented():
    import torch
    S = load_impl(ROOT / "starter" / "rmsnorm.py", backend="mini_triton", name="starter")
    x, g = torch.randn(4, 8), torch.randn(8)
    for call in (lambda: S.rmsnorm_forward(x, g), lambda: S.rmsnorm_backward(x, x, g, torch.ones(4)),
                 lambda: S.rmsnorm(x, g),
                 lambda: S.rmsnorm_fwd_kernel[(1,)](x, g, x, x, 4, 8, 8, 8, 1e-5, BLOCK_M=4, BLOCK_N=8,
                                                    SINGLE_PASS=True)):
        with pytest.raises(NotImplementedError, match="TODO"):
            call()
    for name in ("rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel", "TritonRMSNorm", "rmsnorm_forward",
                 "rmsnorm_backward", "rmsnorm", "BACKEND", "DEVICE"):
        assert hasattr(S, name)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = build_bundle.build(tmp_path_factory.mktemp("dist") / "rmsnorm-student.zip")
    dest = tmp_path_factory.mktemp("unzipped")
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        z.extractall(dest)
    return out, names, dest / "rmsnorm-student"


def test_bundle_holds_the_starter_simulator_tests_and_no_answers(bundle):
    _, names, top = bundle
    for must in ("rmsnorm.py", "Makefile", "README.md", "requirements.txt", "bench.py", "viz.py",
                 "tests/test_part_a.py", "tests/test_part_b.py", "tests/test_part_c.py", "tests/test_part_d.py",
                 "tests/conftest.py", "rmsnorm_testkit/__init__.py", "rmsnorm_testkit/text.py",
                 "rmsnorm_testkit/compare.py", "rmsnorm_testkit/timing.py", "rmsnorm_testkit/diagnose.py",
                 "benchmark/__init__.py", "benchmark/measure.py", "benchmark/traffic.py",
                 "mini_triton/__init__.py", "mini_triton/README.md", "mini_triton/viz.py",
                 "handout/img/traffic_fused.png", "handout/img/traffic_reads_x_twice.png"):
        assert f"rmsnorm-student/{must}" in names
    assert not any("autograder" in n or "solution" in n for n in names), names
    answers = solution_code_lines()
    for path in top.rglob("*.py"):
        leaked = answers & {line.strip() for line in path.read_text().splitlines()}
        assert not leaked, f"{path.name} holds solution code: {sorted(leaked)[:3]}"


def _student_env():
    """A student's environment without a GPU: the simulator, nothing of the project's own settings."""
    env = dict(os.environ, MINI_TRITON="1")
    env.pop("TRITON_INTERPRET", None)
    env.pop("RMSNORM_IMPL", None)
    return env


def _make(top, *targets):
    return subprocess.run(["make", *targets, f"PY={sys.executable}"], cwd=top, env=_student_env(),
                          capture_output=True, text=True, timeout=600)


def test_bundle_part_a_passes_alone_while_parts_b_and_c_are_stubs(bundle, tmp_path):
    """A student who has written part (a) only: `make test PART=a` passes, PART=b, c and d fail on TODOs."""
    _, _, top = bundle
    work = tmp_path / "student"
    shutil.copytree(top, work)
    (work / "rmsnorm.py").write_text(generate.make_starter(generate.SOLUTION.read_text(), "a"))
    out = _make(work, "test", "PART=a")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "test_part_a.py" not in out.stdout.split("passed")[-1]
    for part, todo in (("b", "TODO: Part (b)"), ("c", "TODO: Part (c)"), ("d", "part (d) is not done yet")):
        out = _make(work, "test", f"PART={part}")
        assert out.returncode != 0 and todo in out.stdout, out.stdout[-2000:]
    out = _make(work, "test", "PART=e")
    assert out.returncode == 0 and "it has no tests" in out.stdout and "holds no answer yet" in out.stdout
    with open(work / "rmsnorm.py", "a") as f:
        f.write("# My forward is 3.1x faster than eager. It reaches 90% of copy bandwidth.\n")
    out = _make(work, "test", "PART=e")
    assert out.returncode == 0 and "holds 1 line of answer (about 2 sentences)" in out.stdout, out.stdout
    out = _make(work, "test", "PART=f")
    assert out.returncode != 0 and "PART is a, b, c, d or e" in out.stdout + out.stderr


def student_with_solution(bundle, tmp_path):
    """A copy of the unzipped bundle whose rmsnorm.py is the reference solution: a student who is done."""
    work = tmp_path / "student"
    shutil.copytree(bundle[2], work)
    shutil.copy(ROOT / "solution" / "rmsnorm.py", work / "rmsnorm.py")
    return work


def test_bundle_make_test_k_runs_the_matching_tests_only(bundle, tmp_path):
    work = student_with_solution(bundle, tmp_path)
    out = _make(work, "test", "K=strided")
    assert out.returncode == 0, out.stdout[-2000:]
    strided = sum(len(re.findall(r"^def test_\w*strided", p.read_text(), flags=re.M))
                  for p in (work / "tests").glob("test_*.py"))
    assert strided >= 3 and re.search(rf"\b{strided} passed, \d+ deselected", out.stdout), out.stdout[-1000:]


def test_bundle_bench_runs_on_the_files_the_bundle_holds(bundle, tmp_path):
    """bench.py takes its timing and traffic model from rmsnorm_testkit/timing.py, which the bundle holds."""
    work = student_with_solution(bundle, tmp_path)
    run = subprocess.run([sys.executable, "-I", "bench.py", "--shapes", "4x64"], cwd=work, env=_student_env(),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and re.search(r"^ +4x64 +forward +yours .* 1\.00 ", run.stdout, flags=re.M), \
        run.stdout + run.stderr


def test_bundle_make_viz_draws_the_solutions_traffic(bundle, tmp_path):
    work = student_with_solution(bundle, tmp_path)
    out = _make(work, "viz")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    for name in ("traffic_forward.png", "traffic_backward.png"):
        png = (work / "build" / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000
        assert f"build/{name}" in out.stdout


def test_bundle_make_test_fails_on_the_starter_with_todo_messages(bundle):
    _, _, top = bundle
    out = _make(top, "test")
    assert out.returncode != 0
    assert "NotImplementedError: TODO" in out.stdout and "failed" in out.stdout


def test_bundle_make_submit_passes_every_public_test_with_the_solution_and_zips_it(bundle, tmp_path):
    """`make submit` runs the public tests (as `make test` does, with shorter failures) before it zips."""
    work = student_with_solution(bundle, tmp_path)
    out = _make(work, "submit")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert re.search(r"^\d+ passed in ", out.stdout, flags=re.M) and "failed" not in out.stdout, out.stdout[-2000:]
    assert "Some public tests fail" not in out.stdout
    with zipfile.ZipFile(work / "submission.zip") as z:
        assert z.namelist() == ["rmsnorm.py"]
        assert z.read("rmsnorm.py") == (ROOT / "solution" / "rmsnorm.py").read_bytes()


# -- the bundle names only what it holds -----------------------------------------------------------
PATH = re.compile(r"(?<![\w/.-])((?:\.\./|\./)?[\w.-]+(?:/[\w.*-]+)*/?)")
EXTENSIONS = (".py", ".md", ".txt", ".png", ".zip", ".json", ".jsonl", ".yml", ".yaml", ".csv", ".toml", ".sh")
ROOTS = ("tests", "mini_triton", "handout", "build", "docs", "solution", "autograder", "starter", "dist", "img",
         "language", ".venv", "shared")
MADE_BY_RUNNING = ("build/", ".venv/", "path/to/", "submission.zip", "bench_sim.png", "bench_gpu.png",
                   "bench_gpu.json", "bench_gpu.jsonl", "traffic_", "Scripts/python.exe")
TARGET = re.compile(r"(?:`|^[ \t]*(?:#[ \t]*)?)make ([a-z][\w-]*)", flags=re.M)


def named_paths(text):
    """The file and folder paths a text names: words with a known extension, or that start at a known folder."""
    for word in PATH.findall(text):
        word = word.rstrip(".")
        first, base = word.lstrip("./").split("/")[0], word.split("/")[-1]
        if base.startswith(".") or (base.startswith("_") and not base.startswith("__")):
            continue                                     # a piece of a name built in code: f"..._{x}.png"
        if word.endswith(EXTENSIONS) or ("/" in word and first in ROOTS):
            yield word


def test_the_scan_finds_paths_and_targets():
    text = "Run `make bench-sim`, then read docs/perf.md and tests/tune_kernels.py (fp16/bf16 at 3 GB/s).\n#   make viz"
    assert list(named_paths(text)) == ["docs/perf.md", "tests/tune_kernels.py"]
    assert TARGET.findall(text) == ["bench-sim", "viz"]


def test_every_path_and_make_target_named_in_the_bundle_exists_in_it(bundle):
    _, _, top = bundle
    targets = set(re.findall(r"^([\w-]+):", (top / "Makefile").read_text(), flags=re.M))
    names = {p.name for p in top.rglob("*") if p.is_file()}
    missing = []
    for f in sorted(p for p in top.rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".txt", "")):
        text = f.read_text(encoding="utf-8")
        where = f.relative_to(top)
        for target in TARGET.findall(text):
            if target not in targets:
                missing.append(f"{where}: make {target}")
        for path in named_paths(text):
            if any(path.startswith(m) or path.split("/")[-1].startswith(m) for m in MADE_BY_RUNNING):
                continue
            clean = path.lstrip("./") if path.startswith("./") else path
            if (top / clean).exists() or (f.parent / clean).exists() or ("/" not in clean and clean in names):
                continue
            missing.append(f"{where}: {path}")
    assert not missing, "the bundle names what it does not hold:\n" + "\n".join(missing)


def test_bundle_make_viz_draws_a_race_and_every_program_s_out_of_bounds_lanes(bundle, tmp_path):
    from mistakes import mistake
    work = student_with_solution(bundle, tmp_path)
    (work / "rmsnorm.py").write_text(mistake("dg_into_one_row"))
    out = _make(work, "viz")
    assert out.returncode == 0 and "a data race, drawn in red: data race in rmsnorm_bwd_kernel" in out.stdout, \
        out.stdout[-2000:] + out.stderr[-2000:]
    assert (work / "build" / "traffic_backward.png").read_bytes().startswith(b"\x89PNG")
    (work / "rmsnorm.py").write_text(mistake("no_mask"))
    out = _make(work, "viz")
    assert "forward: out-of-bounds access, drawn in" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    assert (work / "build" / "traffic_forward_out_of_bounds.png").read_bytes().startswith(b"\x89PNG")


def test_the_solutions_staff_block_is_in_no_students_file():
    """The launch cache ([STAFF] ... [/STAFF]) is the staff's machinery: not in the starter, not in a partial
    answer, and every [STAFF] line is closed, so that the rest of the solution stays as students write it."""
    solution = generate.SOLUTION.read_text()
    assert solution.count("# [STAFF] ") == solution.count("# [/STAFF]") == 1
    assert "class CachedLaunch" in solution
    for parts in ("", "abc", "abcd"):
        text = generate.make_starter(solution, parts)
        assert "CachedLaunch" not in text and "[STAFF]" not in text, parts
    assert generate.without_staff("a\n# [STAFF] why\nb\n# [/STAFF]\nc\n") == "a\nc\n"
