"""The verdict of every graded part: what is wrong, why, and which part pays for it.

The submission's jobs (runner.py) bring back its outputs and what the simulator saw. Here every
output is compared with the float64 reference, and each difference becomes a *finding* whose cause
is named by the diagnosis the public tests share (starter/rmsnorm_testkit/diagnose.py): elements no
kernel stored, a known wrong formula, a data race, an exception at the student's line... The rubric
says which part owns each cause (rubric.CAUSE_OWNERS), and each cause is charged once:

* a part fails on a finding it owns, or one whose cause has no owner (an exception, an unexplained
  difference), or one whose owner did not see it;
* a finding whose cause another part owns, and charged, costs this part nothing: the part passes,
  with a note that says where the mistake was charged, provided something of its own was checked
  (an output that is right, or that matches the named mistake exactly). A part never passes on
  other parts' findings alone (it then fails with the same message), so a submission without
  kernels, or one whose kernels crash, passes nothing they reach.

    verdicts = judge(sim, gpu)       # (inputs, outcome) of the simulator job, and of the GPU job or None
    verdicts["4.2"].failure          # the message that fails the part, or None
    verdicts["4.2"].notes            # findings another part charged ("... charged in part 4.5")

The judge is five modules, each reading only those above it:

    charge.py       Ledger, Verdict: a part's findings, and each cause charged once
    counts.py       what the simulator counted of a launch (loads, stores, scratch buffers)
    outputs.py      one output of one task: missing, not made by kernels, or wrong, and why
    correctness.py  items 1-4: the values, case by case (hidden/cases.py)
    fused.py        items 5-9: the traffic, the host's work and the races of the core case "d"
"""
from __future__ import annotations

import dataclasses

from rmsnorm_testkit.compare import widened

from ..hidden.cases import input_key, robust_parts, task_name
from ..job.wire.protocol import FRESH, fresh_key
from .charge import Finding, charge, one_crash
from .correctness import item_1, items_2_3, part_4_6, part_4_7, robust_part
from .fused import item_5, item_6, item_7, item_8, item_9
from .outputs import exchanged, traffic


WIDER = 2           # the replay's dx and dg where N = 1 are held to twice the tolerance (compare.widened): room for
                    # the cancellation an fp32 kernel holds to about the tolerance there; every other value is held
                    # to the first run's tolerance, so an error the host corrects on the first inputs only shows
AGAIN = ("on new inputs of the same shapes, which the grader drew after your code had run and gave to your "
         "launches and torch ops itself: ")


def ledgers(sim, gpu=None) -> dict:
    """{part: Ledger} for every part graded on the CPU (and 4.4, 4.7 with their GPU cases when ``gpu``). A part
    whose outputs are right is judged again on the judge's replay of the same work on fresh inputs
    (job/judge/replay.py):
    it earns its points only when both runs are right."""
    parts = first_ledgers(sim, gpu)
    fresh = again(*sim)
    if fresh is not None:
        with widened(WIDER):
            replayed = values_ledgers(fresh)
        for part, L in replayed.items():
            if not parts[part].findings:
                parts[part].findings += [dataclasses.replace(f, message=AGAIN + f.message) for f in L.findings]
    return one_crash(parts)


def again(inputs, outcome):
    """(inputs, outcome) of the judge's replay: its fresh draw of each input and the outputs the replay read back
    (``<task>.<output>.fresh``), the first run's where it read none; None when the job made no replay."""
    tensors = getattr(outcome, "tensors", None)
    if not tensors or not any(k.startswith(fresh_key("")) for k in tensors):
        return None
    def drawn(case, t, first):
        new = tensors.get(fresh_key(input_key(t, case)))
        return new.reshape(first.shape) if new is not None and new.numel() == first.numel() else first
    fresh_inputs = {case: {t: drawn(case, t, v) for t, v in ts.items()} for case, ts in inputs.items()}
    replayed = dict(tensors)
    replayed.update({k.removesuffix(f".{FRESH}"): v for k, v in tensors.items() if k.endswith(f".{FRESH}")})
    return fresh_inputs, Replayed(outcome, replayed)


class Replayed:
    """An outcome whose outputs are the replay's: everything else (what the launches did, each task's error) is
    the first run's."""

    def __init__(self, outcome, tensors: dict):
        self.outcome, self.tensors, self.info = outcome, tensors, outcome.info

    def task_error(self, name: str) -> str | None:
        return self.outcome.task_error(name)

    def __getattr__(self, name):
        return getattr(self.outcome, name)


def values_ledgers(sim, gpu=None) -> dict:
    """{part: Ledger} of the parts that judge outputs' values case by case (items 1-3, 4.1-4.6's cases)."""
    inputs, outcome = sim
    dx, dg = items_2_3(inputs, outcome)
    parts = {"1": item_1(inputs, outcome), "2": dx, "3": dg}
    for part in robust_parts():
        parts[part] = robust_part(part, inputs, outcome, gpu)
    return parts


def first_ledgers(sim, gpu=None) -> dict:
    """{part: Ledger} of the first run, on the grader's inputs."""
    inputs, outcome = sim
    gpu = None if gpu is None else (gpu[0], GpuView(gpu[1], outcome, inputs))
    parts = values_ledgers(sim, gpu)
    parts["4.6"] = part_4_6(inputs, outcome, parts.get("4.6"))       # its properties, then its own cases
    parts["4.7"] = part_4_7(outcome, gpu)
    parts.update({"5": item_5(inputs, outcome), "6": item_6(inputs, outcome), "7": item_7(inputs, outcome),
                  "8": item_8(inputs, outcome), "9": item_9(inputs, outcome)})
    return parts


class GpuView:
    """The GPU job's outcome, also answering for the simulator's direct backward task: whether rmsnorm_backward
    called on its own returns no dg decides which part owns a dg missing on the GPU (outputs.no_dg), and a launch
    the simulator ran with two tensors exchanged, or the addresses a phase's kernels read there instead of what they
    need, name the cause of the GPU's wrong outputs of that phase (outputs.seen_on_the_simulator), so that one
    mistake has one owner on both machines."""

    DIRECT = task_name("bwd", "d")

    def __init__(self, gpu, sim, inputs):
        self.tensors, self.task_error = gpu.tensors, gpu.task_error
        self.info = {self.DIRECT: sim.info.get(self.DIRECT, {}), **gpu.info}
        # a launch that passed two tensors the other way round, seen on the simulator (which ran it with them
        # exchanged): the cause of what that phase's kernels got wrong on the GPU, where they ran as written
        self.exchanged = exchanged(sim, task_name("fwd", "d"), "fwd") or exchanged(sim, task_name("bwd", "d"), "bwd")
        # what each phase's kernels read instead of what they need, seen on the simulator's core case d: the cause
        # of a wrong output of that phase on the GPU, which keeps no record of the addresses a launch read
        d = inputs.get("d", {})
        reads = {phase: traffic(sim, task_name(phase, "d"), phase, d["x"], d.get("dy")) if "x" in d else None
                 for phase in ("fwd", "bwd")}
        self.misread = {phase: Finding("task", read[1], read[0]) for phase, read in reads.items() if read is not None}


def judge(sim, gpu=None) -> dict:
    """{part: Verdict} for every part but item 10's."""
    return charge(ledgers(sim, gpu))
