"""The verdict of every graded part: what is wrong, why, and which part pays for it.

The submission's jobs (runner.py) bring back its outputs and what the simulator saw. Here every
output is compared with the float64 reference, and each difference becomes a *finding* whose cause
is named by the diagnosis the public tests share (starter/tests/rmsnorm_diagnose.py): elements no
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
"""
from __future__ import annotations

import dataclasses
import re

import torch

from .check import DTYPE_NAMES, compare, describe, diagnosis as D, host_work_problem, reference
from .hidden.cases import (CORE, GPU_ROBUST, GPU_ROBUST_PARTS, HOST_CASES, HOST_CHECK, ROBUST, ROBUST_PARTS,
                           core_case)
from .rubric import CAUSE_FAMILIES, CAUSE_OWNERS, NEVER_EXCUSED, PARTS
from .check import apply_view

Finding = D.Finding


@dataclasses.dataclass
class Ledger:
    """What one part found: its findings, and how many of its outputs were checked."""
    findings: list = dataclasses.field(default_factory=list)
    checked: int = 0

    def right(self):
        self.checked += 1

    def add(self, finding: Finding | None):
        if finding is None:
            self.right()
            return
        self.findings.append(finding)
        self.checked += finding.checked


@dataclasses.dataclass
class Verdict:
    failure: str | None                              # why the part scores 0, or None
    notes: list                                      # findings charged in another part


# ---- the charge: each cause once, in the part that owns it ---------------------------------------------------

def charge(ledgers: dict) -> dict:
    """{part: Verdict} from {part: Ledger}."""
    owner = owners(ledgers)
    verdicts = {}
    for part, L in ledgers.items():
        here = [f for f in L.findings if part in NEVER_EXCUSED or owner.get(f.cause, part) == part]
        elsewhere = [f for f in L.findings if f not in here]
        # the message: a cause this part owns, and one the diagnosis could check, first
        here.sort(key=lambda f: (CAUSE_OWNERS.get(f.cause) != part, not f.checked))
        if here:
            verdicts[part] = Verdict(here[0].message, [])
        elif elsewhere and not L.checked:                # nothing of this part's own could be checked
            verdicts[part] = Verdict(elsewhere[0].message, [])
        else:
            verdicts[part] = Verdict(None, [f.message + _charged_in(f, owner) for f in elsewhere])
    return verdicts


def owners(ledgers: dict) -> dict:
    """{cause: the part that charges it}: the part the rubric names, when that part found it; else the
    first part, in the rubric's order, that did (a dx with NaN charges item 2 when the forward is fine)."""
    seen = {}
    for part in (p for p in PARTS if p in ledgers):
        if part in NEVER_EXCUSED:
            continue
        for f in ledgers[part].findings:
            if f.cause:
                seen.setdefault(f.cause, []).append(part)
    def found_by_owner(cause, parts):
        owner = CAUSE_OWNERS.get(cause)
        return owner in parts or (owner in ledgers and any(f.cause in CAUSE_FAMILIES.get(cause, ())
                                                           for f in ledgers[owner].findings))
    return {cause: CAUSE_OWNERS.get(cause) if found_by_owner(cause, parts) else parts[0]
            for cause, parts in seen.items()}


def _charged_in(f: Finding, owner: dict) -> str:
    part = owner[f.cause]
    return f" (that mistake is charged once, in part {part}: {PARTS[part].name})"


def note(verdict: Verdict) -> str:
    """What a passing part says: nothing, or the mistakes it did not charge."""
    if not verdict.notes:
        return ""
    more = f" (and {len(verdict.notes) - 1} more like it)" if len(verdict.notes) > 1 else ""
    return "Full points here. " + verdict.notes[0] + more


# ---- one output ---------------------------------------------------------------------------------------------

SOURCES = {"fwd": {"y": " from rmsnorm_forward", "r": " from rmsnorm_forward"},
           "bwd": {"dx": " from rmsnorm_backward", "dg": " from rmsnorm_backward"},
           "ag": {"y": " from rmsnorm (your TritonRMSNorm.forward)",
                  "dx": " (x.grad) from your backward (TritonRMSNorm.backward)",
                  "dg": " (g.grad) from your backward (TritonRMSNorm.backward)"}}
SOURCES["speed"] = SOURCES["ag"]
# Who must have made each output: credit for correct values goes only to values the kernels computed.
MADE_BY = {"y": "forward", "r": "forward", "dx": "backward", "dg": "backward"}
PHASE = {"y": "fwd", "r": "fwd", "dx": "bwd", "dg": "bwd"}


def task_error(outcome, task) -> Finding | None:
    """The exception (or time-out, or crash) that stopped a task. Its cause is the error itself: the same
    error in several parts is charged in the first of them, and the others keep their points only if
    something else of theirs could be checked."""
    err = outcome.task_error(task)
    return Finding("task", err, f"error: {err}") if err else None


def not_made(outcome, task, name, story) -> Finding | None:
    """Why ``name`` earns nothing, if no kernel of the submission stored any of it (known on the simulator)."""
    info = outcome.info.get(task, {})
    if (info.get("kernel_made") or {}).get(name) is not False:
        return None
    mask = outcome.tensors.get(f"{task}.{name}.stored")
    if mask is not None and (bool(mask.any()) or not (info.get("host_made") or {}).get(name)):
        return None                # partly stored, or never written at all: the diagnosis says which elements
    how = (" (stored by a kernel, or summed on the host from a partial buffer your kernels stored)"
           if name == "dg" else "")
    norms = info.get(PHASE[name], {}).get("norms", [])
    called = (f"; it called torch's {norms[0]['name']}" + (f" at {norms[0]['where']}" if norms[0]["where"] else "")
              + ", which does the work your kernels should") if norms else ""
    host = [op for op in info.get(PHASE[name], {}).get("host_ops", [])
            if op.get("roles") and (op.get("where") or "").startswith("rmsnorm.py line")]
    if host and not called:
        called = f"; torch computed it on the host, last at {host[-1]['where']}"
    return Finding(name, f"your {MADE_BY[name]} returned {name} without any kernel storing it{how}, for {story}"
                         f"{called}: points for correct values go only to values your Triton kernels compute",
                   f"{name}_not_from_kernels")


def race_of(outcome, task, phase) -> str | None:
    """The first data race of a phase of a task, in short."""
    for L in outcome.info.get(task, {}).get(phase, {}).get("launches", []):
        if L.get("race"):
            return L["race"].split(" without an atomic")[0].split(". ")[0]
    return None


def undefined_lanes(outcome, task, phase) -> str | None:
    """Where a phase's kernels first loaded masked-off lanes without other= (NaN in the simulator)."""
    return next((L["undefined_lanes"] for L in outcome.info.get(task, {}).get(phase, {}).get("launches", [])
                 if L.get("undefined_lanes")), None)


def output(ledger: Ledger, outcome, task, name, x, want, story, alternatives=(), n_rows=None, fmt=None,
           rewrite=None, nan_cause=None) -> Finding | None:
    """Check one output of a task into ``ledger``. ``rewrite``: {cause key: Finding} that stands for a
    cause found elsewhere (the dx that is right for a wrong r gets r's cause)."""
    kind = task.split("_")[0]
    got = outcome.tensors.get(f"{task}.{name}")
    if got is None:
        what = outcome.info.get(task, {}).get("not_tensors", {}).get(name)
        cause = "no_dg" if name == "dg" and what == "NoneType" else None
        f = Finding(name, f"{name} was not returned for {story}" + (f" (got {what} instead of a tensor)"
                                                                   if what else "")
                    + (": g.grad is None after backward; return dg for g from your backward" if cause else ""), cause)
        ledger.add(f)
        return f
    gate = not_made(outcome, task, name, story)
    if gate:
        ledger.add(gate)
        return gate
    loads = undefined_lanes(outcome, task, PHASE[name])
    fmt = {**(fmt or {}), **({"loads": f" (the first: {loads})"} if loads else {})}
    f = D.diagnose(name, got, want, x, alternatives=alternatives, stored=outcome.tensors.get(f"{task}.{name}.stored"),
                   race=race_of(outcome, task, PHASE[name]), story=story, source=SOURCES[kind].get(name, ""),
                   n_rows=n_rows, fmt=fmt, nan_cause=nan_cause, if_zero=outcome.tensors.get(f"{task}.{name}.if_zero"))
    if f is not None and rewrite and f.cause in rewrite:
        f = dataclasses.replace(f, cause=rewrite[f.cause].cause, checked=f.checked and rewrite[f.cause].checked)
    ledger.add(f)
    return f


# ---- the inputs of a case -----------------------------------------------------------------------------------

def given(inputs, k, case):
    """x and dy as the submission saw them (views where the case says so), g, and the case's story."""
    t = inputs[k]
    x = apply_view(t["x"], case.view)
    dy = apply_view(t["dy"], None if case.dy_contiguous else case.view) if "dy" in t else None
    return x, t["g"], dy, case.story or describe(x)


def fmt_of(x, dy, eps):
    return {"eps": eps, "stride": x.stride(0) if x.dim() > 1 else 1,
            "dy_stride": dy.stride(0) if dy is not None and dy.dim() > 1 else 1}


def forward_outputs(ledger, outcome, task, x, g, eps, story, names=("r", "y")):
    """r and y of a forward task (r first: y is made from it)."""
    y, r, _, _ = reference(x, g, eps=eps)
    alts = D.forward_alternatives(x, g, eps)
    order = [("r", r, 1), ("y", y, 0)]
    unstored = [n for n, _, _ in order if _partly_stored(outcome, task, n)]
    if unstored:                                   # elements never stored come first: y is made from r
        order.sort(key=lambda o: (o[0] not in unstored, o[0] == "r"))    # y's pattern says more than r's
    rewrite, extra = {}, []
    for name, want, i in order:
        if name not in names:
            continue
        f = output(ledger, outcome, task, name, x, want, story, D.pick(alts, i) + (extra if name == "y" else []),
                   fmt=fmt_of(x, None, eps), rewrite=rewrite)
        got_r = outcome.tensors.get(f"{task}.r")
        if name == "r" and f is not None and f.cause and got_r is not None and got_r.numel() == r.numel():
            # a y that is right for the r this forward made has r's cause: one mistake, not two
            y_of_r = D.forward_alternatives_plain(x, g, eps)[0] * (got_r.double().reshape(-1, 1) / r.reshape(-1, 1)
                                                                   ).reshape(*x.shape[:-1], 1)
            extra = [("r_from_forward", y_of_r, f"it is right for the r your forward made, and that r is wrong "
                                                f"({f.message})")]
            rewrite = {"r_from_forward": f}


def _partly_stored(outcome, task, name) -> bool:
    mask = outcome.tensors.get(f"{task}.{name}.stored")
    return mask is not None and not bool(mask.all())


def backward_outputs(ledger_dx, ledger_dg, outcome, task, x, g, dy, eps, story, r=None):
    """dx and dg of a backward or autograd task. ``r``: the r the backward was given (the reference's when
    None). In an autograd task, a dx that is right for the r the forward saved gets that r's cause."""
    _, r_ref, dx_ref, dg_ref = reference(x, g, dy, eps)
    r_used = r_ref.float() if r is None else r
    alts = D.backward_alternatives(x, g, dy, r_used, eps)
    fmt = {**fmt_of(x, dy, eps), "old_memory": _adds_into_scratch(outcome, task)}
    extra, rewrite = {}, {}
    wrong_r = _wrong_saved_r(outcome, task, x, g, eps, r_ref, story, fmt) if task.startswith("ag") else None
    if wrong_r is not None:
        saved = outcome.tensors[f"{task}.r_saved"]
        dx_r, dg_r = D.backward_plain(x, g, dy, saved)
        says = f"it is right for the r your forward saved, and that r is wrong ({wrong_r.message})"
        extra = {"dx": [("r_from_forward", dx_r, says)], "dg": [("r_from_forward", dg_r, says)]}
        rewrite = {"r_from_forward": wrong_r}
        if not bool(torch.isfinite(saved).all()):      # NaN in r: every NaN of dx and dg comes from it
            rewrite.update({k: wrong_r for k in ("masked_nan", "old_memory_nan", "padding_nan")})
    no_r = _no_r_saved(outcome, task, x, story)
    # NaN from a masked load without other=, when the backward's kernels made one (else: old memory, for dg)
    nan_cause = "masked_nan" if undefined_lanes(outcome, task, "bwd") else None
    for ledger, name, want, i in ((ledger_dx, "dx", dx_ref, 0), (ledger_dg, "dg", dg_ref, 1)):
        choices = D.pick(alts, i) + extra.get(name, []) + ([D.dg_rows(x, dy, r_used)] if name == "dg" else [])
        f = output(ledger, outcome, task, name, x, want, story, choices, fmt=fmt, rewrite=rewrite, nan_cause=nan_cause)
        if f is not None and f.cause == "masked_nan":
            nan_cause = "masked_nan"                       # dg's NaN then comes from the same loads
        if f is not None and f.cause in ("rows_not_stored_bwd", "elements_not_stored_bwd"):
            rewrite = {**rewrite, **{k: f for k in (*D.CAUSES, None)}}   # rows the backward skipped: dg lacks them
        if no_r and f is not None and f.cause is None:
            ledger.findings[ledger.findings.index(f)] = no_r


def _wrong_saved_r(outcome, task, x, g, eps, r_ref, story, fmt) -> Finding | None:
    """What is wrong with the r an autograd task's forward saved for the backward, or None: a finding of r
    against the reference, or, when it is within r's tolerance but near a known wrong formula, that cause
    (it can still show in dx, at N = 1 say)."""
    saved = outcome.tensors.get(f"{task}.r_saved")
    if saved is None or saved.numel() != r_ref.numel():
        return None
    return D.saved_r_finding(saved, r_ref, x, g, eps, story=story, stored=outcome.tensors.get(f"{task}.r_saved.stored"),
                             fmt=fmt)


def _adds_into_scratch(outcome, task) -> bool:
    """Does a kernel of the task's backward load and store the same scratch buffer (adding into it)? Then NaN
    in dg may be old data of a buffer that was not zeroed."""
    launches = outcome.info.get(task, {}).get("bwd", {}).get("launches", [])
    return any(a["loaded"] and a["stored"] for _, _, a in _others(launches, IO_ROLES))


def _no_r_saved(outcome, task, x, story, error="") -> Finding | None:
    """In an autograd task whose Function saved no (M,) fp32 tensor: the likely cause of a wrong gradient
    (or of ``error``, raised by the backward)."""
    info = outcome.info.get(task, {})
    saved = info.get("saved")
    if not task.startswith("ag") or saved is None or info.get("saved_r"):
        return None
    rows = x.numel() // max(1, x.shape[-1])
    shapes = ", ".join(f"{tuple(s)} {DTYPE_NAMES.get(getattr(torch, d, None), d)}" for s, d in saved) or "nothing"
    then = f" Your backward then failed: {error}" if error else ""
    return Finding("dx", f"your TritonRMSNorm.forward saved {shapes} for {story}, and the backward needs r: "
                         f"({rows},) fp32, one reciprocal RMS per row, from rmsnorm_forward. Save it: "
                         f"ctx.save_for_backward(x, g, r).{then}", "no_r_saved")


def backward_failure(outcome, task, x, story) -> Finding | None:
    """The error of an autograd task whose forward ran and whose backward raised: named no_r_saved when
    the forward saved no r (the likely cause), else as it is; None for any other task."""
    err = outcome.task_error(task)
    if not err or outcome.info.get(task, {}).get("failed_in") != "bwd":
        return None
    return _no_r_saved(outcome, task, x, story, err) or Finding("dx", err, f"error: {err}")


# ---- items 1-4 -------------------------------------------------------------------------------------------------

def item_1(inputs, outcome) -> Ledger:
    L = Ledger()
    for k in CORE:
        if _failed(L, outcome, f"fwd_{k}"):
            continue
        x, g, _, story = given(inputs, k, core_case(k))
        forward_outputs(L, outcome, f"fwd_{k}", x, g, 1e-5, story)
    return L


def items_2_3(inputs, outcome) -> tuple:
    dx, dg = Ledger(), Ledger()
    for k in CORE:
        task = f"bwd_{k}"
        if _failed(dx, outcome, task) | _failed(dg, outcome, task):
            continue
        x, g, dy, story = given(inputs, k, core_case(k))
        story += " (given the reference r)"
        backward_outputs(dx, dg, outcome, task, x, g, dy, 1e-5, story, r=inputs[k]["r"])
    return dx, dg


def _failed(ledger, outcome, task) -> bool:
    f = task_error(outcome, task)
    if f:
        ledger.add(f)
    return f is not None


def robust_part(part, inputs, outcome, gpu=None) -> Ledger:
    """Every case of one robustness part: y (and r) of a forward task, y, dx and dg of an autograd one."""
    L = Ledger()
    cases = [(k, ROBUST[k], inputs, outcome) for k in ROBUST_PARTS[part]]
    if gpu is not None and part in GPU_ROBUST_PARTS:
        cases += [(k, GPU_ROBUST[k], gpu[0], gpu[1]) for k in GPU_ROBUST_PARTS[part]]
    for k, c, ins, out in cases:
        task = f"{c.task}_{k}"
        x, g, dy, story = given(ins, k, c)
        late = backward_failure(out, task, x, story)
        if late is None and _failed(L, out, task):
            continue
        if c.forward_only:
            forward_outputs(L, out, task, x, g, c.eps, story)
            continue
        forward_outputs(L, out, task, x, g, c.eps, story, names=("y",))
        if late:
            L.add(late)
        else:
            backward_outputs(L, L, out, task, x, g, dy, c.eps, story)
    return L


def _properties(outcome, task, x, story) -> Finding | None:
    """The first broken property of one run: dy untouched, g.grad set, output dtypes and shapes."""
    info = outcome.info[task]
    if info.get("dy_modified"):
        return Finding("dy", f"your backward modified dy for {story}: callers may reuse dy, so never write into it "
                             f"(store dx in a tensor of its own)", "dy_modified")
    if info.get("not_tensors", {}).get("dg") == "NoneType":
        return Finding("dg", f"g.grad is None after backward for {story}: return dg for g from your backward",
                       "no_dg")
    names = ("y", "dx", "dg") if task.startswith("ag") else ("dx", "dg")
    for name in names:
        got = info.get("dtypes", {}).get(name)
        if got is None:
            return Finding(name, f"{name} was not returned for {story}")
        if got != str(x.dtype).removeprefix("torch."):
            return Finding(name, f"{name} has dtype {got} for {story}; it must match the input "
                                 f"({DTYPE_NAMES[x.dtype]})", "output_dtype")
        shape = tuple(outcome.tensors[f"{task}.{name}"].shape)
        want = tuple(x.shape) if name != "dg" else (x.shape[-1],)
        if shape != want:
            return Finding(name, f"{name} has shape {shape} for {story}; expected {want}", "output_shape")
    return None


def part_4_6(inputs, outcome) -> Ledger:
    """Checked on every input where the forward and backward otherwise ran: a crash costs its own part."""
    L = Ledger()
    runs = [(f"ag_{k}", k, case) for k, case in [("d", core_case("d")), *HOST_CASES.items(),
                                                    *((k, c) for k, c in ROBUST.items() if not c.forward_only)]]
    runs += [(f"bwd_{k}", k, core_case(k)) for k in CORE]
    skipped = []                                   # why an input could not be checked: its own part's cause
    for task, k, c in runs:
        x, _, _, story = given(inputs, k, c)
        late = backward_failure(outcome, task, x, story)
        if late is not None and late.cause:
            L.add(late)
        why = outcome.task_error(task) or next((f.message for f in (not_made(outcome, task, n, story)
                                                                       for n in ("y", "dx", "dg")) if f), None)
        if why:
            skipped.append(why)
            continue
        L.add(_properties(outcome, task, x, story))
        if task.startswith("ag"):
            no_r = _no_r_saved(outcome, task, x, story)
            if no_r and _gradients_wrong(inputs, outcome, task, k, c):
                L.add(no_r)
    for k in ("fp16_fwd", "bf16_fwd"):                 # rmsnorm_forward on 16 bits: y like x, r fp32 (M,)
        task, c = f"fwd_{k}", ROBUST[k]
        if outcome.task_error(task) or any(not_made(outcome, task, n, c.story) for n in ("y", "r")):
            continue
        info, rows = outcome.info[task], c.shape[0]
        dtypes = info.get("dtypes", {})
        if dtypes.get("y") != c.dtype:
            L.add(Finding("y", f"y from rmsnorm_forward has dtype {dtypes.get('y')} for {c.story}; it must be "
                               f"{c.dtype}", "output_dtype"))
        elif dtypes.get("r") != "float32":
            L.add(Finding("r", f"r from rmsnorm_forward has dtype {dtypes.get('r')} for {c.story}; it must be "
                               f"float32 (one reciprocal RMS per row, kept in fp32 for the backward)", "output_dtype"))
        elif tuple(outcome.tensors[f"{task}.r"].shape) != (rows,):
            L.add(Finding("r", f"r from rmsnorm_forward has shape {tuple(outcome.tensors[f'{task}.r'].shape)} for "
                               f"{c.story}; expected ({rows},), one value per row", "output_shape"))
        else:
            L.right()
    if not L.findings and not L.checked:
        L.add(Finding("task", skipped[0] if skipped else "your forward and backward did not run, so their outputs "
                                                         "could not be checked"))
    return L


def _gradients_wrong(inputs, outcome, task, k, c) -> bool:
    x, g, dy, story = given(inputs, k, c)
    _, _, dx, _ = reference(x, g, dy, c.eps)
    got = outcome.tensors.get(f"{task}.dx")
    return got is None or compare("dx", got, dx, x) is not None


def part_4_7(outcome, gpu=None) -> Ledger:
    L = Ledger()
    pairs = [(outcome, "fwd_d", "fwd_d_again", core_case("d").story, "on the simulator"),
             (outcome, "bwd_d", "bwd_d_again", core_case("d").story, "on the simulator")]
    if gpu is not None:
        pairs.append((gpu[1], "ag_rerun_gpu", "ag_rerun_gpu_again", GPU_ROBUST["rerun_gpu"].story, "on the GPU"))
    for out, first, again, story, where in pairs:
        if _failed(L, out, first) | _failed(L, out, again):
            continue
        gate = next((f for n in ("y", "r", "dx", "dg") for f in [not_made(out, first, n, story)] if f), None)
        if gate:                                       # outputs the kernels did not make prove nothing here
            L.add(gate)
            continue
        why = _order_dependence(out.info[first]) or _order_dependence(out.info[again])
        names = {"fwd": ("y", "r"), "bwd": ("dx", "dg")}.get(first.split("_")[0], ("y", "dx", "dg"))
        differ = [n for n in names if not _same(out, first, again, n)]
        if why:
            what = f"gave different {differ[0]}" if differ else "gave the same bits this time, by luck"
            run = {"fwd": "forward", "bwd": "backward"}.get(first.split("_")[0], "forward and backward")
            L.add(Finding("dg", f"running the same {run} twice on {story} {what} {where}: {why}. "
                                f"Results must be deterministic: give each program its own row of a partial "
                                f"buffer and sum the rows in a fixed order", "order_dependent"))
        elif differ:
            L.add(Finding(differ[0], f"running the same step twice on {story} gave different "
                                     f"{differ[0]} {where}: results must be deterministic (no atomics whose order "
                                     f"changes a sum)"))
        else:
            L.right()
    return L


def _same(outcome, first, again, name) -> bool:
    """The same bits in both runs (NaN where the other has NaN counts as the same)."""
    a, b = outcome.tensors.get(f"{first}.{name}"), outcome.tensors.get(f"{again}.{name}")
    if a is None or b is None or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all()) if a.is_floating_point() else torch.equal(a, b)


def _order_dependence(info) -> str:
    """Why a run's result depends on the order programs run, as the simulator saw it ('' if it does not)."""
    for phase in ("fwd", "bwd"):
        for L in info.get(phase, {}).get("launches", []):
            if L.get("order_dependent"):
                return (f"in {L['kernel']}, {L['order_dependent']} makes the result depend on the order programs "
                        f"run, which changes from run to run on a GPU (the simulator shuffles it too)")
    return ""


# ---- items 5-9: traffic, from the simulator's counts ------------------------------------------------------------

def _roles(a) -> list:
    return a.get("roles") or ([a["role"]] if a.get("role") else [])


def _by_role(launches, role, key):
    return sum(a[key] for L in launches for a in L["args"].values() if role in _roles(a))


def _others(launches, roles):
    return [(L["kernel"], name, a) for L in launches for name, a in L["args"].items()
            if not set(_roles(a)) & set(roles)]


def _made(outcome, task, name) -> bool:
    return (outcome.info.get(task, {}).get("kernel_made") or {}).get(name) is not False


def item_5(inputs, outcome) -> Ledger:
    """The fused forward on "d": each of its checks is a finding or a check passed."""
    L = Ledger()
    if _failed(L, outcome, "fwd_d"):
        return L
    info = outcome.info["fwd_d"]
    M, N = CORE["d"]
    launches = info["fwd"]["launches"]
    if not launches:
        L.add(Finding("y", "your forward launched no kernel"))
        return L
    x_loads = _by_role(launches, "x", "loaded")
    y_stores = _by_role(launches, "y", "stored")
    r_stores = _by_role(launches, "r", "stored")
    g_loads = _by_role(launches, "g", "loaded")
    g_max = sum(Lc["programs"] for Lc in launches) * N
    extra = [(k, name, a) for k, name, a in _others(launches, ("x", "y", "r", "g"))
             if a["numel"] >= M * N and (a["loaded"] or a["stored"])]
    rows_missed = _coverage_cause(outcome, "fwd_d", "y") or _coverage_cause(outcome, "fwd_d", "r")
    x_distinct = min(_io(launches, "x", "loaded")[1], M * N)
    L.add(None if x_loads == x_distinct == M * N else
          Finding("x", f"your forward loaded x {x_loads / max(1, x_distinct):.1f} times per element; a fused kernel "
                       f"reads it once", None) if x_loads > x_distinct else
          Finding("x", f"your forward loaded only {x_distinct} of the {M * N} elements of x", rows_missed))
    if y_stores == M * N:
        L.right()
    elif not _made(outcome, "fwd_d", "y") and not y_stores:
        # a kernel that wrote a y of its own, which the wrapper then replaced, is fused all the same
        L.add(Finding("y", "your forward's kernels stored none of the y it returned: y was made outside them",
                      "y_not_from_kernels" if _wrote_a_whole_output(launches, M, N, ("x", "y", "r", "g")) else None))
    else:
        L.add(Finding("y", f"your forward's kernels stored {y_stores / (M * N):.1f} values per element of the y it "
                           f"returned; a fused kernel writes each element of y once, into the tensor the forward "
                           f"returns", _coverage_cause(outcome, "fwd_d", "y") if y_stores < M * N else None))
    r_cause = (("r_not_from_kernels" if (info.get("host_made") or {}).get("r") else "r_not_stored") if r_stores == 0
               else _coverage_cause(outcome, "fwd_d", "r") if r_stores < M else None)
    L.add(None if r_stores == M else
          Finding("r", f"your forward stored {r_stores} values of r for {M} rows; store each row's 1/rms once",
                  r_cause))
    L.add(None if g_loads <= g_max else
          Finding("g", f"your forward loaded g {g_loads} times ({g_max} allowed: once per program)"))
    if extra:
        k, name, a = extra[0]
        host_y = not _made(outcome, "fwd_d", "y")       # the kernel's own y, which the wrapper then replaced
        L.add(Finding("x", f"your forward moves an extra buffer of {a['numel']} elements ({name} in {k}); a fused "
                           f"forward reads x and g and writes y and r, nothing else",
                      "y_not_from_kernels" if host_y else None))
    return L


def _wrote_a_whole_output(launches, M, N, roles) -> bool:
    """Did a kernel store all M·N elements of a buffer that is none of ``roles`` (an output of its own, which
    the wrapper then replaced with one the host computed)?"""
    return any(a["stored"] and a.get("distinct", 0) >= M * N for _, _, a in _others(launches, roles))


def _coverage_cause(outcome, task, name) -> str | None:
    """The cause of an output only partly stored by kernels (its stored mask's pattern), or None."""
    mask = outcome.tensors.get(f"{task}.{name}.stored")
    got = outcome.tensors.get(f"{task}.{name}")
    if mask is None or got is None or bool(mask.all()):
        return None
    return D.unstored_cause(name, mask)


# Buffers a backward kernel may touch besides these are its scratch: the partial dg buffer, lock words.
IO_ROLES = ("x", "dy", "dx", "g", "y", "r", "dg")


def _io(launches, role, key):
    """(elements moved, distinct elements) of one role in the launches."""
    args = [a for L in launches for a in L["args"].values() if role in _roles(a) and a[key]]
    return sum(a[key] for a in args), sum(a["distinct"] for a in args)


def backward_io_problems(launches, M, N) -> list:
    """[(kind, message)] of a backward that is not fused: "repeat" when an element of x or dy is loaded twice
    or one of dx stored twice (an extra pass), "coverage" when some are never loaded or stored (a grid or mask
    that misses elements: its cause is elsewhere), "scratch" for partial buffers that move too much."""
    if not launches:
        return [("none", "your backward launched no kernel")]
    out = []
    for role, key, what in (("x", "loaded", "loaded x"), ("dy", "loaded", "loaded dy"), ("dx", "stored", "stored dx")):
        moved, distinct = _io(launches, role, key)
        distinct = min(distinct, M * N)                # two launches that each read all of x read it twice
        if moved > distinct:
            out.append(("repeat", f"your backward {what} {moved / max(1, distinct):.1f} times per element; a fused "
                                  f"backward reads x and dy once and writes dx once"))
        elif distinct < M * N:
            out.append(("coverage", f"your backward {what} for only {distinct} of the {M * N} elements"))
    problem = scratch_problem(launches, M, N)
    if problem:
        out.append(("scratch", problem))
    return out


def backward_traffic_problem(launches, M, N):
    """Why the backward is not fused, or None: the first of backward_io_problems."""
    problems = backward_io_problems(launches, M, N)
    return problems[0][1] if problems else None


def scratch_problem(launches, M, N):
    """Why a backward's dg reduction moves too much through its scratch buffers (None if it does not).

    Scratch in floats (partial dg buffers): at most M·N + M + N stores (each row's contribution to dg
    written once, as the lecture's M x N buffer is, or far fewer when programs sum rows in registers),
    and at most M·N + (their size) + M loads (each contribution read back once, as a lock-protected
    read-modify-write does, plus one pass over the partial buffers). Integer scratch (lock words,
    counters) is not counted as data, up to a few accesses per row and program.
    """
    scratch = _others(launches, IO_ROLES)
    floats = [(k, name, a) for k, name, a in scratch if "int" not in a.get("dtype", "float")]
    words = [a for _, _, a in scratch if "int" in a.get("dtype", "float")]
    stored = sum(a["stored"] for _, _, a in floats)
    loaded = sum(a["loaded"] for _, _, a in floats)
    size = sum({a["storage"]: a["numel"] for _, _, a in floats}.values())
    detail = "; ".join(f"{name} in {k} ({a['numel']} elements): {a['stored']} stored, {a['loaded']} loaded"
                       for k, name, a in floats)
    if stored > M * N + M + N:
        return (f"your backward stored {stored} elements into scratch buffers for x of {M}x{N} ({detail}): a fused "
                f"backward writes each row's contribution to dg at most once (at most M·N + M + N = "
                f"{M * N + M + N}); another M x N buffer written by one kernel and read by the next is an "
                f"extra pass over memory")
    if loaded > M * N + size + M:
        return (f"your backward loaded {loaded} elements from scratch buffers for x of {M}x{N} ({detail}): a fused "
                f"backward reads each contribution to dg back at most once, plus one pass over its partial "
                f"buffers (at most M·N + {size} + M = {M * N + size + M})")
    programs = sum(L["programs"] for L in launches)
    if sum(a["loaded"] + a["stored"] for a in words) > 8 * (M + programs):
        return (f"your backward moved {sum(a['loaded'] + a['stored'] for a in words)} elements of integer "
                f"scratch buffers for {M} rows; lock words and counters need a few accesses per program")
    return None


def item_6(inputs, outcome) -> Ledger:
    """The fused backward: rmsnorm_backward on "d", given the reference r. No element of x or dy loaded twice,
    none of dx stored twice, and a dg reduction whose scratch traffic is bounded; elements never loaded or
    stored are the grid's or the mask's doing, charged where their cause is."""
    L = Ledger()
    if _failed(L, outcome, "bwd_d"):
        return L
    M, N = CORE["d"]
    problems = backward_io_problems(outcome.info["bwd_d"]["bwd"]["launches"], M, N)
    if problems and problems[0][0] == "none":
        L.add(Finding("dx", problems[0][1]))
        return L
    launches = outcome.info["bwd_d"]["bwd"]["launches"]
    host_dx = (not _made(outcome, "bwd_d", "dx") and (outcome.info["bwd_d"].get("host_made") or {}).get("dx")
               and _wrote_a_whole_output(launches, M, N, IO_ROLES))
    coverage = "dx_not_from_kernels" if host_dx else _coverage_cause(outcome, "bwd_d", "dx")
    for kind, message in problems:
        cause = coverage if kind == "coverage" else "dx_not_from_kernels" if kind == "scratch" and host_dx else None
        L.add(Finding("dx", message, cause))
    for _ in range(4 - len(problems)):
        L.right()                                     # the checks that passed
    return L


def item_7(inputs, outcome) -> Ledger:
    """No host-side op reads an M·N activation, in any dtype: the forward, the backward given the reference r,
    and both through autograd (where TritonRMSNorm's own code runs)."""
    L = Ledger()
    M, N = CORE["d"]
    by_line = {}                                       # a host line's cause, once known from any phase
    for k, dtype in HOST_CHECK.items():
        name = DTYPE_NAMES[getattr(torch, dtype)]
        phases = []
        for task, phase, where, out in ((f"fwd_{k}", "fwd", f"forward ({name} x)", "y"),
                                        (f"bwd_{k}", "bwd", f"backward ({name} x)", "dx"),
                                        (f"ag_{k}", "fwd", f"forward through rmsnorm ({name} x)", "y"),
                                        (f"ag_{k}", "bwd", f"backward through rmsnorm ({name} x)", "dx")):
            x, _, _, story = given(inputs, k, all_cases()[k])
            late = backward_failure(outcome, task, x, story)
            if phase in outcome.info.get(task, {}) and not (late and phase == "bwd"):
                phases.append((task, outcome.info[task][phase], where, out))
            elif late and phase == "bwd":
                L.add(late)
            elif not (late and phase == "fwd"):
                L.add(task_error(outcome, task))
        for task, phase, where, out in phases:
            if not phase["launches"]:
                L.add(Finding(out, f"your {where} launched no kernel"))
                continue
            problem = host_work_problem(phase.get("host_ops", []), M, N, where, file="rmsnorm.py")
            norms = phase.get("norms") or []
            if norms and not problem:
                problem = (f"your {where} called torch's {norms[0]['name']}" +
                           (f" at {norms[0]['where']}" if norms[0]["where"] else "") +
                           ": torch's own norm does the work your kernels should")
            if problem:
                outs = ("y", "r") if phase is outcome.info[task].get("fwd") else ("dx", "dg")
                host = next((n for n in outs if not _made(outcome, task, n)), None)
                if host in ("y", "dx") and not _wrote_a_whole_output(phase["launches"], M, N, IO_ROLES):
                    host = None                        # the kernels never computed it: this part's own finding
                line = re.search(r"at (rmsnorm\.py line \d+)", problem)
                cause = f"{host}_not_from_kernels" if host else by_line.get(line and line.group(1))
                if cause and line:
                    by_line[line.group(1)] = cause
                L.add(Finding(out, problem, cause))
                continue
            covered = max((a["distinct"] for Lc in phase["launches"] for a in Lc["args"].values()
                           if out in _roles(a) and a["stored"]), default=0)
            if covered != M * N:
                whole = _wrote_a_whole_output(phase["launches"], M, N, IO_ROLES)
                cause = (f"{out}_not_from_kernels" if whole else None) if not covered else \
                    _coverage_cause(outcome, task, out)
                L.add(Finding(out, f"{out} returned by your {where} was not written by kernel stores ({covered} of "
                                   f"{M * N} elements were)", cause))
                continue
            L.right()
    return L


def all_cases() -> dict:
    return {**{k: core_case(k) for k in CORE}, **HOST_CASES, **ROBUST}


def item_8(inputs, outcome) -> Ledger:
    L = Ledger()
    for task in sorted(outcome.info):
        for phase in ("fwd", "bwd"):
            race = next((Lc["race"] for Lc in outcome.info[task].get(phase, {}).get("launches", []) if Lc.get("race")),
                        None) if isinstance(outcome.info[task], dict) else None
            if race:
                L.add(Finding("race", race, "race"))
                return L
    made = [v for task in ("fwd_d", "bwd_d") for v in (outcome.info.get(task, {}).get("kernel_made") or {}).values()]
    err = task_error(outcome, "bwd_d")
    if err:
        L.add(err)
    elif not any(made):
        L.add(Finding("race", "no output of yours was stored by a kernel, so there was nothing for the race detector "
                              "to check"))
    else:
        L.right()
    return L


def item_9(inputs, outcome) -> Ledger:
    """The improved reduction: a fused backward (item 6) whose dg is deterministic (no float atomics, no sums
    built under a lock) and whose partial buffer is at most M·N/8 elements, and dg right."""
    L = Ledger()
    M, N = CORE["d"]
    if _failed(L, outcome, "bwd_d"):
        return L
    info = outcome.info["bwd_d"]
    launches = info["bwd"]["launches"]
    problem = backward_traffic_problem(launches, M, N)
    why = _order_dependence({"bwd": info["bwd"]})
    scratch = [(name, a) for _, name, a in _others(launches, IO_ROLES)
               if a["stored"] and "int" not in a.get("dtype", "float")]
    biggest = max(scratch, key=lambda s: s[1]["numel"], default=None)
    if problem:
        L.add(Finding("dg", f"the improved reduction starts from a fused backward (item 6): {problem}"))
    elif why:
        L.add(Finding("dg", f"your dg is not deterministic: {why}. The improved reduction has each program sum its "
                            f"rows in registers and store one partial row; the partial rows are then added in a fixed "
                            f"order"))
    elif biggest and biggest[1]["numel"] > M * N // 8:
        L.add(Finding("dg", f"your partial dg buffer ({biggest[0]}) has {biggest[1]['numel']} elements for M·N = "
                            f"{M * N}; the improved reduction keeps it at most M·N/8 = {M * N // 8}: give each program "
                            f"many rows and accumulate dg in registers"))
    else:
        x, g, dy, story = given(inputs, "d", core_case("d"))
        backward_outputs(Ledger(), L, outcome, "bwd_d", x, g, dy, 1e-5, story + " (given the reference r)",
                         r=inputs["d"]["r"])
    return L


# ---- all parts --------------------------------------------------------------------------------------------------

def ledgers(sim, gpu=None) -> dict:
    """{part: Ledger} for every part graded on the CPU (and 4.4, 4.7 with their GPU cases when ``gpu``)."""
    inputs, outcome = sim
    dx, dg = items_2_3(inputs, outcome)
    parts = {"1": item_1(inputs, outcome), "2": dx, "3": dg}
    for part in ROBUST_PARTS:
        parts[part] = robust_part(part, inputs, outcome, gpu)
    parts["4.6"] = part_4_6(inputs, outcome)
    parts["4.7"] = part_4_7(outcome, gpu)
    parts.update({"5": item_5(inputs, outcome), "6": item_6(inputs, outcome), "7": item_7(inputs, outcome),
                  "8": item_8(inputs, outcome), "9": item_9(inputs, outcome)})
    return parts


def judge(sim, gpu=None) -> dict:
    """{part: Verdict} for every part but item 10's."""
    return charge(ledgers(sim, gpu))
