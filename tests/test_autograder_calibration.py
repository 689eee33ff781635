"""The calibration set: student-style submissions written for this project (tests/calibration/),
one per behaviour the grader must judge fairly. Each is graded in full; every graded part must
get its expected verdict, and each failed part's feedback must contain its key words. A part not
listed must pass: one defect costs one part. They are graded by the job's code and the judge without
the sandbox (tests/grade_in_process.py): what they test is the verdicts, and that `make grade`'s path
reports the same verdicts is test_mistakes_graded.py's.
"""
import sys

import pytest

from autograder import rubric
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
from grade_in_process import verdicts  # noqa: E402

CALIBRATION = ROOT / "tests" / "calibration"
NOT_IMPROVED = "partial dg buffer"                  # the lecture's M x N buffer: no extra credit

# submission: {part that must fail: words its feedback must contain}
EXPECTED = {
    # 16-bit partials summed in fp32 lose far less than the documented dg tolerance
    "partials_16bit": {"9": f"{NOT_IMPROVED} (part_ptr) has 32768 elements"},
    # a correct lock-based backward is fused (6) and race-free (8); its sums depend on lock order, which
    # changes between runs on the simulator as on a GPU (4.7), and the extra credit wants a fixed order (9)
    "spin_lock": {"4.7": "a lock taken with tl.atomic_cas on lock_ptr",
                  "9": "your dg is not deterministic: in rmsnorm_bwd_kernel, a lock taken with tl.atomic_cas "
                       "on lock_ptr"},
    "spin_lock_plain_release": {"4.7": "a lock taken with tl.atomic_cas on lock_ptr",
                                "9": "your dg is not deterministic: in rmsnorm_bwd_kernel, a lock taken with "
                                     "tl.atomic_cas on lock_ptr"},
    # float atomics: order-dependent on a GPU, and on the simulator, which shuffles the order
    "float_atomics": {"4.7": "in rmsnorm_bwd_kernel, tl.atomic_add on DG",
                      "9": "your dg is not deterministic: in rmsnorm_bwd_kernel, tl.atomic_add on DG"},
    # an int32 ticket counter hands out blocks of rows: a counter, no partial buffer; every point and item 9
    "ticket_counter": {},
    # float atomic_adds, each into a program's own zeroed row: deterministic; every point and item 9
    "float_atomics_own_rows": {},
    "wrong_eps": {"4.5": "y from rmsnorm (your TritonRMSNorm.forward) differs for x of shape (16, 64) fp32 "
                         "(eps = 0.01)", "9": NOT_IMPROVED},
    "strides_ignored": {"4.3": "views x[:, 0:80] of (24, 160) tensors, x.stride() = (160, 1): rows are 160 "
                               "elements apart", "9": NOT_IMPROVED},
    "nxn_block": {"4.4": "rmsnorm_bwd_kernel line 42: a block of shape [2048, 2048] has 4194304 elements; "
                         "Triton's maximum is 1048576", "9": NOT_IMPROVED},
}
CPU_PARTS = [p.number for i in rubric.ITEMS if not i.gpu_only for p in i.graded()]


@pytest.fixture(scope="module")
def graded():
    return verdicts({name: CALIBRATION / f"{name}.py" for name in EXPECTED})


def test_every_calibration_submission_is_listed():
    assert sorted(p.stem for p in CALIBRATION.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_calibration_submission_gets_its_expected_verdict_on_every_part(graded, name):
    failed = graded[name]["failed"]
    for part in CPU_PARTS:
        if part in EXPECTED[name]:
            assert part in failed, (part, graded[name])
            assert EXPECTED[name][part] in failed[part], (part, failed[part])
        else:
            assert part not in failed, (part, failed[part])
