"""Items 1-4: the values of every output, case by case.

Items 1-3 run on the core cases (2-D fp32 rows), the backward given the reference r; 4.1-4.5 on the
cases of their own part (hidden/cases.py); 4.6 checks the properties of every run (dtypes, shapes,
inputs untouched, r saved) and, on cases of its own, the steps where not every input requires grad; 4.7
runs the same step twice.
"""
from __future__ import annotations

import torch
from rmsnorm_testkit import text
from rmsnorm_testkit.compare import (compare, ctx_tensors_message, offloaded_message, partial_dtype_problem,
                                     reference)

from ..hidden.cases import CORE, GPU_ROBUST, HOST_CASES, ROBUST, again, kind_of, robust_parts, task_name
from .charge import Finding, Ledger
from .counts import IO_ROLES, order_dependence, others, racing
from .outputs import (BOTH, GRAD_OF, backward_failure, backward_outputs, seen_on_the_simulator, failed, forward_outputs,
                      given, got, got_instead, needs_input_grad, no_dg, no_r_saved, not_made, overlap_cause)


def item_1(inputs, outcome) -> Ledger:
    L = Ledger()
    for k in CORE:
        if failed(L, outcome, task_name("fwd", k)):
            continue
        x, g, _, story = given(inputs, k, CORE[k])
        forward_outputs(L, outcome, task_name("fwd", k), x, g, CORE[k].eps, story)
    return L


def items_2_3(inputs, outcome) -> tuple:
    dx, dg = Ledger(), Ledger()
    for k in CORE:
        task = task_name("bwd", k)
        if failed(dx, outcome, task) | failed(dg, outcome, task):
            continue
        x, g, dy, story = given(inputs, k, CORE[k])
        story += " (given the reference r)"
        backward_outputs(dx, dg, outcome, task, x, g, dy, CORE[k].eps, story, r=inputs[k]["r"])
    return dx, dg


def robust_part(part, inputs, outcome, gpu=None) -> Ledger:
    """Every case of one robustness part: y (and r) of a forward task, y, dx and dg of an autograd one (the
    gradients its inputs ask for, when not both require grad)."""
    L = Ledger()
    cases = [(k, ROBUST[k], inputs, outcome) for k in robust_parts()[part]]
    if gpu is not None:                                # the GPU job's cases of this part, graded with the rest
        cases += [(k, c, gpu[0], gpu[1]) for k, c in GPU_ROBUST.items() if c.part == part]
    for k, c, ins, out in cases:
        task = task_name(c.kind, k)
        x, g, dy, story = given(ins, k, c)
        late = backward_failure(out, task, x, story)
        if late is None and failed(L, out, task):
            continue
        if c.forward_only:
            forward_outputs(L, out, task, x, g, c.eps, story)
            continue
        forward_outputs(L, out, task, x, g, c.eps, story, names=("y",))
        if c.offload:
            _offloaded(L, ins, out, task, k, c, late)
        elif late:
            L.add(late)
        elif tuple(c.requires_grad) != BOTH:
            _gradients_asked_for(L, out, task, x, g, dy, c, story)
        else:
            backward_outputs(L, L, out, task, x, g, dy, c.eps, story)
    return L


def _offloaded(L, inputs, outcome, task, k, c, late):
    """The step whose saved tensors were offloaded: the judge overwrote x, g and what the forward's kernels stored
    before the backward (remote.Task.offload), and saw whether a backward launch loaded what it overwrote. One that
    did read a tensor it did not get through ctx.saved_tensors: ctx_tensors's cause, whatever its values. Else its
    outputs are judged as any case's; a mistake the core step shows too is the other parts' to name there."""
    x, g, dy, story = given(inputs, k, c)
    read = outcome.info.get(task, {}).get("read_overwritten")
    if read:
        L.add(Finding("dx", offloaded_message(outcome.info[task].get("ctx_tensors"), read, story), "ctx_tensors"))
        return
    first = Ledger()
    if late:
        first.add(late)
    else:
        backward_outputs(first, first, outcome, task, x, g, dy, c.eps, story)
    L.checked += first.checked
    if first.findings and _step_right(inputs, outcome, "d", CORE["d"]):
        L.findings += first.findings                    # wrong in this step alone: named and owned as found


def _step_right(inputs, outcome, k, c) -> bool:
    """Are y, dx and dg of case ``k``'s autograd step right (and the step ran)?"""
    task = task_name("ag", k)
    if outcome.task_error(task) or k not in inputs:
        return False
    x, g, dy, story = given(inputs, k, c)
    L = Ledger()
    forward_outputs(L, outcome, task, x, g, c.eps, story, names=("y",))
    backward_outputs(L, L, outcome, task, x, g, dy, c.eps, story)
    return not L.findings


def _gradients_asked_for(L, outcome, task, x, g, dy, c, story):
    """A step where only x, only g or neither requires grad: each gradient came back as asked (needs_input_grad),
    then the values of those asked for (none: y alone, which the call had to give without failing)."""
    wrong = needs_input_grad(outcome, task, c.requires_grad, story)
    if wrong:
        L.add(wrong)
        return
    names = tuple(GRAD_OF[leaf] for leaf in c.requires_grad)
    if names:
        backward_outputs(L, L, outcome, task, x, g, dy, c.eps, story, names=names)


def _properties(outcome, task, x, story, requires_grad=BOTH) -> Finding | None:
    """The first broken property of one run: inputs untouched, g.grad set, output dtypes and shapes. In a step where
    not every input requires grad, of the gradients that came back (whether each should is _gradients_asked_for's
    to say)."""
    info = outcome.info[task]
    if info.get("dy_modified"):
        return Finding("dy", f"your backward modified dy for {story}: callers may reuse dy, so never write into it "
                             f"(store dx in a tensor of its own)", "dy_modified")
    changed = [k for k in info.get("inputs_modified") or [] if k in ("x", "g", "r")]
    if changed:
        return Finding(changed[0], f"your code wrote into {changed[0]} for {story}: callers may reuse their inputs, so "
                                   f"never write into them (keep partial results in a buffer of your own)",
                       "input_modified")
    both = tuple(requires_grad) == BOTH
    if both and info.get("not_tensors", {}).get("dg") == "NoneType":
        cause, fix = no_dg(outcome, task)
        fix = fix if cause == "no_dg_backward" else ": return dg for g from your backward"
        return Finding("dg", f"g.grad is None after backward for {story}{fix}", cause)
    grads = ("dx", "dg") if both else tuple(GRAD_OF[leaf] for leaf in requires_grad
                                            if GRAD_OF[leaf] in info.get("dtypes", {}))
    names = ("y", *grads) if kind_of(task) == "ag" else grads
    for name in names:
        dtype = info.get("dtypes", {}).get(name)
        if dtype is None:
            what = info.get("not_tensors", {}).get(name)
            return Finding(name, f"{name} was not returned for {story}"
                           + (f" (got {got_instead(what)})" if what else ""))
        if dtype != str(x.dtype).removeprefix("torch."):
            direct = " from rmsnorm_backward" if kind_of(task) == "bwd" else ""
            also = (" (autograd casts g.grad back to g's dtype, but rmsnorm_backward is also called on its own)"
                    if direct and name == "dg" else "")
            return Finding(name, f"{name}{direct} has dtype {dtype} for {story}; it must match the input "
                                 f"({text.dtype_name(x.dtype)}){also}", "output_dtype")
        shape = tuple(got(outcome, task, name).shape)
        want = tuple(x.shape) if name != "dg" else (x.shape[-1],)
        if shape != want:
            return Finding(name, f"{name} has shape {shape} for {story}; expected {want}", "output_shape")
    return _partial_dtype(outcome, task, story)


def _partial_dtype(outcome, task, story) -> Finding | None:
    """A partial dg buffer in 16 bits (partial_dtype_problem)."""
    launches = outcome.info.get(task, {}).get("bwd", {}).get("launches", [])
    scratch = [(k, n, a["dtype"], a["stored"], a["loaded"], a["numel"], a["storage"])
               for k, n, a in others(launches, IO_ROLES)]
    problem = partial_dtype_problem(scratch, story)
    return Finding("dg", problem, "partial_dtype") if problem else None


def part_4_6(inputs, outcome, own=None) -> Ledger:
    """Checked on every input where the forward and backward otherwise ran: a crash costs its own part. ``own``:
    the ledger of 4.6's own cases (robust_part), whose findings join these after them."""
    L = Ledger()
    runs = [(task_name("ag", k), k, case) for k, case in [("d", CORE["d"]), *HOST_CASES.items(),
                                                    *((k, c) for k, c in ROBUST.items() if not c.forward_only)]]
    runs += [(task_name("bwd", k), k, c) for k, c in {**CORE, **HOST_CASES}.items()]     # 16-bit dg's dtype too
    skipped = []                                   # why an input could not be checked: its own part's cause
    # the judge's own sight of ctx first (the offloaded step); a report of a tensor kept on ctx charges too (a file
    # does not lie to its own cost), and one that reports nothing is judged by that sight alone
    offloaded = any((outcome.info.get(task_name("ag", k)) or {}).get("read_overwritten")
                    for k, c in ROBUST.items() if c.offload)
    for task, k, c in runs:
        x, _, _, story = given(inputs, k, c)
        late = backward_failure(outcome, task, x, story)
        if late is not None and late.cause and not c.offload:      # (the offloaded step: _offloaded)
            L.add(late)
        why = outcome.task_error(task) or next((f.message for f in (not_made(outcome, task, n, story)
                                                                       for n in ("y", "dx", "dg")) if f), None)
        if why:
            skipped.append(why)
            continue
        L.add(_properties(outcome, task, x, story, c.requires_grad))
        if kind_of(task) == "ag" and not c.offload:      # (the offloaded step names its own cause: _offloaded)
            no_r = no_r_saved(outcome, task, x, story)
            if no_r and _gradients_wrong(inputs, outcome, task, k, c):
                L.add(no_r)
            kept = outcome.info.get(task, {}).get("ctx_tensors")
            if kept and not offloaded:
                L.add(Finding("dx", ctx_tensors_message(kept, story), "ctx_tensors"))
    for k in ("fp16_fwd", "bf16_fwd"):                 # rmsnorm_forward on 16 bits: y like x, r fp32 (M,)
        task, c = task_name("fwd", k), ROBUST[k]
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
        elif tuple(got(outcome, task, "r").shape) != (rows,):
            L.add(Finding("r", f"r from rmsnorm_forward has shape {tuple(got(outcome, task, 'r').shape)} for "
                               f"{c.story}; expected ({rows},), one value per row", "output_shape"))
        else:
            L.right()
    if own is not None:
        L.extend(own)
    if not L.findings and not L.checked:
        L.add(Finding("task", skipped[0] if skipped else "your forward and backward did not run, so their outputs "
                                                         "could not be checked"))
    return L


def _gradients_wrong(inputs, outcome, task, k, c) -> bool:
    """Is the first gradient the step asks for (dx, unless only g requires grad) missing or wrong?"""
    asked = [GRAD_OF[leaf] for leaf in c.requires_grad]
    if not asked:
        return False                                   # nothing requires grad: no backward ran
    x, g, dy, story = given(inputs, k, c)
    _, _, dx, dg = reference(x, g, dy, c.eps)
    returned = got(outcome, task, asked[0])
    return returned is None or compare(asked[0], returned, {"dx": dx, "dg": dg}[asked[0]], x) is not None


def part_4_7(outcome, gpu=None) -> Ledger:
    L = Ledger()
    twice = [(outcome, task_name(kind, "d"), CORE["d"].story, "on the simulator") for kind in ("fwd", "bwd")]
    if gpu is not None:
        twice += [(gpu[1], task_name(c.kind, k), c.story, "on the GPU")
                  for k, c in GPU_ROBUST.items() if c.part == "4.7"]
    for out, first, story, where in twice:
        second = again(first)
        if failed(L, out, first) | failed(L, out, second):
            continue
        gate = next((f for n in ("y", "r", "dx", "dg") for f in [not_made(out, first, n, story)] if f), None)
        if gate:                                       # outputs the kernels did not make prove nothing here
            L.add(gate)
            continue
        why = order_dependence(out.info[first], raced_too=False) or order_dependence(out.info[second], raced_too=False)
        names = {"fwd": ("y", "r"), "bwd": ("dx", "dg")}.get(kind_of(first), ("y", "dx", "dg"))
        differ = [n for n in names if not _same(out, first, second, n)]
        race = differ and not why and next(((k, p, r) for k in (first, second) for p in ("fwd", "bwd")
                                            if (r := racing({p: out.info[k].get(p, {})}))), None)
        if race:                                       # a race's results differ from run to run: item 8's charge, or
            k, phase, race = race                      # that of the address fault that made it (overlap_cause)
            L.add(Finding(differ[0], race, overlap_cause(out, k, phase, race) or "race", checked=True))
        elif why:
            what = f"gave different {differ[0]}" if differ else "gave the same bits this time, by luck"
            run = {"fwd": "forward", "bwd": "backward"}.get(kind_of(first), "forward and backward")
            L.add(Finding("dg", f"running the same {run} twice on {story} {what} {where}: {why}. "
                                f"Results must be deterministic: give each program its own row of a partial "
                                f"buffer and sum the rows in a fixed order", "order_dependent"))
        elif differ:
            L.add(seen_on_the_simulator(out, Finding(differ[0], f"running the same step twice on {story} gave "
                                                               f"different {differ[0]} {where}: results must be "
                                                               f"deterministic (no atomics whose order changes a "
                                                               f"sum)")))
        else:
            L.right()
    return L


def _same(outcome, first, second, name) -> bool:
    """The same bits in both runs (NaN where the other has NaN counts as the same); the same thing returned,
    when neither was a tensor (both None: a missing output is its own part's, not a sign of chance)."""
    a, b = got(outcome, first, name), got(outcome, second, name)
    if a is None and b is None:
        nots = [outcome.info.get(t, {}).get("not_tensors", {}).get(name) for t in (first, second)]
        return nots[0] == nots[1]
    if a is None or b is None or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all()) if a.is_floating_point() else torch.equal(a, b)
