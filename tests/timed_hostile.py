"""Tricks against item 10 as the judge's process times it (autograder/job/judge/timed.py), built by a red team
with the whole source: each entry is the reference solution, a prelude and one trick (tests/hostile_files/timed/),
which acts only while the submission's process records item 10's steps (it tells that from a tensor whose device
reads cuda while its storage is meta or the CPU's). The control of each is the solution itself: an entry earns
nothing over it when the step it attacks is refused.

``TIMED_TRICKS``: name -> (the trick, the step it attacks, its part, edits of the part, what stops it now).
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = ROOT / "tests" / "hostile_files" / "timed"

TIMED_TRICKS = {
    "fwdbwd_without_y": ("the forward+backward's forward stores r only, never y", "fwdbwd", "no_y", {},
                         "y is checked in the forward+backward too"),
    "fwdbwd_without_forward": ("the forward+backward launches no forward; the backward recomputes r", "fwdbwd",
                               "no_fwd", {}, "y is checked in the forward+backward too"),
    "torch_into_out_buffers": ("every large torch op written with out=, so that no op seems to compute", "fwd",
                               "torch_out", {}, "torch's work measured as the judge runs the ops"),
    "forged_fused_ops": ("the recipe rewritten as torch's fused RMSNorm ops, their outputs numbered as views of "
                         "their inputs", "fwd", "forged", {"FUSED_BWD = True": "FUSED_BWD = False"},
                         "torch's work measured as the judge runs the ops, never from the recipe's numbers"),
    "poisoned_inputs_forward": ("the first round's replays zero g, so that y = 0 passes a check built from the "
                                "inputs after the replay", "fwd", "poison_fwd", {},
                                "the check's reference from the inputs made again from their seed"),
    "poisoned_inputs_fwdbwd": ("the first round's replays zero dy, so that dx = dg = 0 pass", "fwdbwd",
                               "poison_fwdbwd", {}, "the check's reference from the inputs made again"),
    "cheap_until_the_last": ("cheap (and poisoned) on every timed replay but the predicted last one", "fwd",
                             "count_to_last", {}, "the inputs compared at every check"),
    "cheap_some_replays": ("the first round's replays skip the work, without poisoning", "fwd", "cheap_no_poison",
                           {}, "about 32 replays of each round checked, drawn unseen"),
    "forward_stores_16_bits": ("the fp32 forward stores y in bf16 (6 bytes an element moved instead of 8)", "fwd",
                               "bf16_y", {}, "the check's tolerance is the inputs' dtype's"),
}


def source(name: str) -> str:
    """The entry's rmsnorm.py: the solution, the prelude, the trick."""
    _, _, part, edits, _ = TIMED_TRICKS[name]
    text = (PARTS / f"{part}.py").read_text()
    for old, new in edits.items():
        assert text.count(old) == 1, (name, old)
        text = text.replace(old, new)
    return "\n".join([(ROOT / "solution" / "rmsnorm.py").read_text(), (PARTS / "prelude.py").read_text(), text])
