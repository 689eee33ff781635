"""The handout (English and Chinese) agrees with the rubric, the tolerances, the tools and itself,
and every code snippet in it runs."""
import os
import re
import subprocess
import sys

import pytest
from rmsnorm_testkit import compare, scan
from rmsnorm_testkit.compare import DTYPE_NAMES, TOLERANCES
from rmsnorm_testkit.text import DTYPE_SHORT

from autograder import config, rubric
from conftest import ROOT

HANDOUTS = {"en": ROOT / "handout" / "README.md", "zh-CN": ROOT / "handout" / "README.zh-CN.md"}
TEXT = {k: p.read_text(encoding="utf-8") for k, p in HANDOUTS.items()}


def sections(text):
    return re.findall(r"^## (\d+)\. ", text, flags=re.M)


def section(text, number):
    """The text of section ``number`` (from its heading to the next one)."""
    m = re.search(rf"^## {number}\. .*?(?=^## \d+\. |\Z)", text, flags=re.M | re.S)
    assert m, f"no section {number}"
    return m.group(0)


def table_rows(text):
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in text.splitlines()
            if ln.startswith("|") and not re.match(r"^\|[-| ]+\|$", ln.strip())]


def code_blocks(text, lang):
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.M | re.S)


def test_both_handouts_have_the_same_numbered_sections():
    en, zh = sections(TEXT["en"]), sections(TEXT["zh-CN"])
    assert en == zh == [str(i) for i in range(1, 11)]


@pytest.mark.parametrize("lang", HANDOUTS)
def test_points_table_matches_the_rubric(lang):
    grading = section(TEXT[lang], 8)
    rows = [r for r in table_rows(grading) if r[0].isdigit()]
    table = {r[0]: float(r[-1]) for r in rows if len(r) == 3}
    assert table == {i.number: i.points for i in rubric.ITEMS}
    if lang == "en":
        for r in rows:
            item = rubric.BY_NUMBER[r[0]]
            assert item.name.lower() in r[1].lower(), (item.name, r[1])
            assert ("extra credit" in r[1].lower()) == item.extra_credit
    for item in rubric.ITEMS:                 # each part by its number and points, as the grader prints it
        row = next(r for r in rows if r[0] == item.number)[1]
        for part in item.parts:
            assert f"{part.number} " in row and (f"({part.points:g})" in row or f"（{part.points:g}）" in row), part
            if lang == "en":
                assert f"{part.number} {part.name} ({part.points:g})" in row, part
    total = rubric.total()
    extra = rubric.total(include_extra_credit=True) - total
    assert f"{total:g}" in grading and f"{extra:g}" in grading
    gpu_free = rubric.total(gpu=False)
    assert f"{gpu_free:g}" in grading            # what Gradescope's CPU run is out of


@pytest.mark.parametrize("lang", HANDOUTS)
def test_tolerance_table_matches_the_graders(lang):
    rows = {r[0]: (float(r[1]), float(r[2])) for r in table_rows(section(TEXT[lang], 8))
            if r[0] in DTYPE_SHORT.values()}
    assert rows == {DTYPE_NAMES[dtype]: tol for dtype, tol in TOLERANCES.items()}


@pytest.mark.parametrize("lang", HANDOUTS)
def test_every_python_snippet_runs(lang, tmp_path):
    blocks = code_blocks(TEXT[lang], "python")
    assert len(blocks) >= 3
    for i, code in enumerate(blocks):
        compile(code, f"{lang} snippet {i}", "exec")
        script = tmp_path / f"snippet_{i}.py"
        script.write_text("import torch\n" + code)
        env = dict(os.environ, MINI_TRITON="1", PYTHONPATH=str(ROOT))
        p = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, f"{lang} snippet {i} failed:\n{code}\n{p.stderr[-2000:]}"


@pytest.mark.parametrize("lang", HANDOUTS)
def test_commands_exist_in_the_student_makefile(lang):
    makefile = (ROOT / "starter" / "Makefile.student").read_text()
    targets = set(re.findall(r"^([a-z-]+):", makefile, flags=re.M))
    commands = [ln.split("#")[0].split() for block in code_blocks(TEXT[lang], "bash") for ln in block.splitlines()]
    used = {c[1] for c in commands if c and c[0] == "make"}
    assert used == {"test", "bench", "viz", "submit"} and used <= targets
    options = {w.split("=")[0] for c in commands if c[:2] == ["make", "test"] for w in c[2:]}
    assert options == {"PART", "K"} and all(re.search(rf"^{o}\s*\?=", makefile, flags=re.M) for o in options)
    parts = {w.split("=")[1] for c in commands if c[:2] == ["make", "test"] for w in c[2:] if w.startswith("PART=")}
    assert parts == {"a", "e"} and '""|a|b|c|d|e)' in makefile and "ifeq ($(PART),e)" in makefile


@pytest.mark.parametrize("lang", HANDOUTS)
def test_part_d_says_what_the_tests_launch_and_part_b_what_its_buffer_needs(lang):
    """Part (d) names the parameters the public tests pass once the kernel takes many rows; part (b) says its
    buffer may come from torch.empty and part (d) why the chunked one needs torch.zeros; part (c) names
    element_ty; part (e) says it has no tests."""
    sys.path.insert(0, str(ROOT / "starter" / "tests"))
    from test_part_b import PART_B_PARAMS, PART_D_PARAMS
    part_b, part_c, part_d, part_e = (section(TEXT[lang], k) for k in (4, 5, 6, 7))
    assert "`n_rows, rows_per_program`" in part_d and "`BLOCK_M: tl.constexpr`" in part_d
    assert set(PART_D_PARAMS) == {"n_rows", "rows_per_program", "BLOCK_M"} and "dx_row_stride" in PART_B_PARAMS
    assert "`dx_row_stride`" in part_d and "`rows_per_program=1`" in part_d
    assert "torch.empty" in part_b and "torch.zeros" in part_d and "`rmsnorm_backward`" in part_d
    assert "element_ty" in part_c and "(M,)" in part_b
    assert "make test PART=e" in " ".join(part_e.split()) or "make test\nPART=e" in part_e


@pytest.mark.parametrize("lang", HANDOUTS)
def test_quoted_error_messages_are_the_real_ones(lang):
    """Each error the handout explains is worded as the simulator or the grader words it."""
    sources = "".join(p.read_text() for p in [*(ROOT / "mini_triton").rglob("*.py"),
                                               *(ROOT / "autograder").rglob("*.py"),
                                               *(ROOT / "starter" / "rmsnorm_testkit").glob("*.py"),
                                               *(ROOT / "starter" / "tests").glob("*.py")])
    errors = " ".join(section(TEXT[lang], 9).split())          # quoted messages may wrap across lines
    for phrase in ("out-of-bounds {op} in", "are {where} of", "data race in", "both write",
                   "your forward loaded x", "a fused kernel reads it once", "a host-side `{host_op_name(op)}` read",
                   "returned {name} without any kernel storing it", "timed out after", "ran out of CPU time (",
                   "differs for {story}: {int(bad.sum())} of", "elements are off; the worst, ",
                   "it is right for the r your forward saved, and", "autograder error: contact course staff",
                   "Columns {n} and up are past the end of a row of {n}", "it has NaN where the reference has none",
                   "a tensor of shape ", "was not written by kernel stores", "was never written by {who}",
                   "the columns from {first} on were never written in any row", "r² where the derivation gives r³",
                   "lanes masked off in a tl.load without other=", "with those lanes read as 0.0, it is right"):
        assert phrase in sources, phrase
    limits = config.SIM_LIMITS
    for shown in ("out-of-bounds load in", "past the end of x_ptr", "data race in", "both write",
                  "your forward loaded x 2.0 times per element", "a host-side `mul` read all 32768 elements of x",
                  "a host-side `to(float32)` read all", "your forward returned y without any kernel storing it",
                  f"timed out after {limits.group_cpu_s:.0f} s of CPU time", f"ran out of CPU time ({limits.cpu_s} s)",
                  "elements are off; the worst, y[5, 17], is", "it is right for the r your forward saved, and",
                  "x_ptr[36, 100:128] are past the end of x_ptr, a tensor of shape (37, 100)",
                  "Columns 100 and up are past the end of a row of 100", "it has NaN where the reference has none",
                  "was never written by rmsnorm_fwd_kernel", "r² where the derivation gives r³",
                  "y returned by your forward (fp32 x) was not written by kernel stores"):
        assert shown in errors, shown
    assert "autograder error: contact course staff" in section(TEXT[lang], 8)


@pytest.mark.parametrize("lang", HANDOUTS)
def test_integrity_section_names_only_what_the_scan_forbids(lang):
    integrity = section(TEXT[lang], 10)
    named = re.findall(r"`([a-z_]+)`", integrity)
    modules = [n for n in named if n in scan.FORBIDDEN_MODULES or n in ("os",)]
    assert len(modules) >= 8
    for n in ("subprocess", "socket", "ctypes", "importlib", "signal", "threading", "multiprocessing", "pickle",
              "inspect", "gc"):
        assert n in scan.FORBIDDEN_MODULES and f"`{n}`" in integrity
    for call in ("open", "exec", "eval", "compile", "__import__"):
        assert f"`{call}`" in integrity
        assert scan.scan(f"{call}('x')\n")[1], call
    assert scan.scan("import torch\ntorch.allclose = 1\n")[1]


@pytest.mark.parametrize("lang", HANDOUTS)
def test_integrity_section_lists_exactly_the_scans_rules(lang):
    """Section 10's list of refusals is scan.RULES, one bullet per rule (in English, in the rules' words)."""
    integrity = section(TEXT[lang], 10)
    bullets = [" ".join(b.split()) for b in re.findall(r"^- (.*?)(?=\n- |\n\n)", integrity, flags=re.M | re.S)]
    assert len(bullets) == len(scan.RULES), bullets
    if lang == "en":
        for bullet, rule in zip(bullets, scan.RULES.values()):
            assert bullet.rstrip(";.") == rule.says, (bullet, rule.says)


def test_student_bundle_ships_both_handouts(tmp_path):
    sys.path.insert(0, str(ROOT / "starter"))
    import build_bundle
    import zipfile
    names = zipfile.ZipFile(build_bundle.build(tmp_path / "b.zip")).namelist()
    assert "rmsnorm-student/handout/README.md" in names and "rmsnorm-student/handout/README.zh-CN.md" in names


@pytest.mark.parametrize("lang", HANDOUTS)
def test_the_dg_tolerance_rule_in_the_handout_is_the_codes(lang):
    """The handout states the one dg rule with the constants rmsnorm_testkit.compare.tolerance uses."""
    grading = section(TEXT[lang], 8)
    per_sqrt_m = re.search(r"([\d.e-]+)·√M", grading)
    eps_multiple = re.search(r"(\d+)·eps\(dtype\)·max\|dg\|", grading)
    assert per_sqrt_m and float(per_sqrt_m.group(1)) == compare.DG_FP32_ATOL_PER_SQRT_ROW
    assert eps_multiple and int(eps_multiple.group(1)) == compare.DG_16BIT_EPS_MULTIPLE
    import torch
    ref = torch.tensor([3.0, -40.0])
    assert compare.tolerance("dg", torch.float32, ref, 10_000)[0] == 5e-6 * 100
    assert compare.tolerance("dg", torch.bfloat16, ref, 4)[0] == 2 * 2 ** -7 * 40
    assert compare.tolerance("dx", torch.bfloat16, ref, 10_000)[:2] == TOLERANCES[torch.bfloat16]


@pytest.mark.parametrize("lang", HANDOUTS)
def test_every_picture_the_handout_shows_exists(lang):
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", TEXT[lang])
    assert {"img/traffic_fused.png", "img/traffic_reads_x_twice.png"} <= set(pictures)
    for p in pictures:
        png = (HANDOUTS[lang].parent / p).read_bytes()
        assert png.startswith(b"\x89PNG"), p


@pytest.mark.parametrize("lang", HANDOUTS)
def test_item_10_thresholds_in_the_handout_are_the_graders(lang):
    grading = section(TEXT[lang], 8)
    for part, pct in rubric.COPY_NEEDED.items():
        assert f"{pct}%" in grading, (part, pct)


@pytest.mark.parametrize("lang", HANDOUTS)
def test_the_extra_credit_check_shape_in_the_handout_is_the_graders(lang):
    from autograder.hidden.cases import CORE
    M, N = CORE["d"].shape
    assert f"M, N = {M}, {N}" in section(TEXT[lang], 6)


@pytest.mark.parametrize("lang", HANDOUTS)
def test_r_is_held_to_fp32s_tolerance_as_the_handout_says(lang):
    import torch
    from rmsnorm_testkit.compare import TOLERANCES, tolerance
    for dtype in (torch.float16, torch.bfloat16):
        assert tolerance("r", dtype, torch.ones(4), 4)[:2] == TOLERANCES[torch.float32]
        assert tolerance("y", dtype, torch.ones(4), 4)[:2] == TOLERANCES[dtype]
    said = {"en": "r is fp32 whatever x's dtype, so it is held to fp32's tolerance",
            "zh-CN": "r 都是 fp32，因此在所有输入上都按 fp32 的容差比较"}[lang]
    assert said in " ".join(section(TEXT[lang], 8).split())


def test_part_d_s_program_count_is_the_handouts_in_the_public_test_that_checks_it(tmp_path):
    """The public test of part (d)'s buffer tells a student how many programs to launch: the course GPU's SM count on
    the CPU and at most ⌈M / 8⌉, as the handout's part (d) (in both languages) and the solution say."""
    import test_part_d
    from rmsnorm_testkit.compare import load_impl

    from mini_triton.perf import H200
    subprocess.run([sys.executable, "starter/generate.py", "--parts", "abc", "--out", str(tmp_path / "abc.py")],
                   cwd=ROOT, check=True, capture_output=True)
    lecture = load_impl(tmp_path / "abc.py", backend="mini_triton", name="part_d_count")   # an M x N partial dg
    with pytest.raises(AssertionError) as e:
        test_part_d.test_partial_dg_buffer_holds_at_most_an_eighth_of_x(lecture, test_part_d.GRADER_SHAPE)
    said = " ".join(str(e.value).split())
    assert f"the course GPU's {H200.sms}" in said and "never more than ⌈M / 8⌉" in said, said
    for lang, text in TEXT.items():
        part_d = " ".join(section(text, 6).split())
        assert f"{H200.sms}" in part_d and "⌈M / 8⌉" in part_d, lang
    assert f"COURSE_GPU_SMS = {H200.sms}" in (ROOT / "solution" / "rmsnorm.py").read_text()
