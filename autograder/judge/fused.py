"""Items 5-9: the fused kernels, read from the simulator's counts of the core case "d" (items 5 and 6: of another
core case when d's task failed, whose error is charged once where it first shows, then of the other core cases and
the shape drawn for this grading, hidden/cases.traffic_cases; item 8: of every task that ran).

Item 5 (the forward) and 6 (the backward) read each element of their inputs once and write each
output once; 7 finds torch doing on the host what the kernels should; 8 is the race detector's
verdict; 9 the improved dg reduction (deterministic, a small partial buffer, dg right).
"""
from __future__ import annotations

import dataclasses

from rmsnorm_testkit import compare, dataflow, text

from ..hidden.cases import CORE, HOST_CHECK, all_sim_cases, kind_of, reduction_cases, task_name, traffic_cases
from .charge import Finding, Ledger
from .correctness import robust_part
from .counts import (IO_ROLES, backward_io_problems, by_role, extent, io, order_dependence,
                     others, roles_of, scratch_extents, wrote_a_whole_output)
from .outputs import (backward_failure, backward_outputs, coverage_cause, failed, forward_outputs, given, laundered,
                      made, overlap_cause, task_error, traffic)

FWD_D, BWD_D = task_name("fwd", "d"), task_name("bwd", "d")      # the core case the traffic items read


def traffic_case(L: Ledger, outcome, phase: str) -> str | None:
    """The core case whose traffic an item reads: "d"; or, when d's task failed, the first other core case whose
    task ran, d's error in the ledger. A crash is charged once, where it first shows (item 1 or 2 meet it on their
    own inputs too), and the item still checks the traffic of kernels that ran; None when none ran."""
    if not failed(L, outcome, task_name(phase, "d")):
        return "d"
    return next((k for k in CORE if k != "d" and not outcome.task_error(task_name(phase, k))), None)


def other_shapes(outcome, phase: str, first: str) -> list:
    """The core cases besides ``first`` whose ``phase`` task ran, then the shape drawn for this grading: a kernel
    fused at one shape is fused at every shape, so the traffic items read these too once ``first`` is fused (a file
    fused only at the shapes the handout or the grader's source names is not)."""
    return [k for k in traffic_cases() if k != first and not outcome.task_error(task_name(phase, k))]


def at_every_shape(L: Ledger, inputs, outcome, phase: str, first: str, check) -> Ledger:
    """``L`` (``check`` on the case ``first``), or, when it found nothing, the findings of ``check`` on the first
    other core case where it finds something, each message naming that case's shape; then, at the drawn shape,
    the task's own error or wrong outputs (``drawn_outputs``)."""
    if L.findings:
        return L
    for k in other_shapes(outcome, phase, first):
        if k == "drawn" and traffic_cases()[k].dtype != "float32" and host_work_at_16_bits(outcome, phase):
            return L                            # (16-bit inputs converted on the host: item 7's, once)
        more = check(inputs, outcome, k)
        if more.findings:
            return named(L, more, k)
    return named(L, drawn_outputs(inputs, outcome, phase), "drawn")


def host_work_at_16_bits(outcome, phase: str) -> bool:
    """Did the host do work on 16-bit inputs in this phase at item 7's 16-bit cases (x converted to fp32 on the
    host for the kernels, y converted back)? Then a 16-bit drawn shape's traffic (the kernels read the host's copy,
    not x; y is the host's cast) is that work again, which item 7 charges once."""
    for k in HOST_CHECK:
        c = HOST_CHECK[k]
        info = outcome.info.get(task_name(phase, k)) or {}
        if c.dtype != "float32" and isinstance(info.get(phase), dict) and host_problem(info, phase, *c.shape, ""):
            return True
    return False


def named(L: Ledger, more: Ledger, k: str) -> Ledger:
    """``more``'s findings added to ``L``, each message naming traffic case ``k``'s shape."""
    case = {**traffic_cases(), **reduction_cases()}[k]
    (M, N), dtype = case.shape, text.dtype_name(case.dtype)
    drawn = ", a shape drawn for this grading" if k not in CORE else ""
    for f in more.findings:
        said = f"x of shape ({M}, {N}) {dtype}" in f.message    # an output's message names its case already
        L.add(f if said else dataclasses.replace(f, message=f"{f.message} (for x of shape ({M}, {N}) {dtype}{drawn})"))
    return L


def right_at_the_core_shapes(inputs, outcome, phase: str) -> bool:
    """Did every core case's ``phase`` task run and give right outputs (items 1-3's findings, none)?"""
    for k, case in CORE.items():
        L, task = Ledger(), task_name(phase, k)
        if failed(L, outcome, task):
            return False
        x, g, dy, story = given(inputs, k, case)
        if phase == "fwd":
            forward_outputs(L, outcome, task, x, g, case.eps, story)
        else:
            backward_outputs(L, L, outcome, task, x, g, dy, case.eps, story, r=inputs[k]["r"])
        if L.findings:
            return False
    return True


def drawn_outputs(inputs, outcome, phase: str) -> Ledger:
    """The drawn shape's task as items 1-3 would judge it, which never read it: its error, or its outputs wrong.
    The traffic of kernels that do not compute the outputs there (or of a task that stopped) proves nothing."""
    L = Ledger()
    k = "drawn"
    case, task = traffic_cases()[k], task_name(phase, k)
    if failed(L, outcome, task) or not right_at_the_core_shapes(inputs, outcome, phase):
        return L                                # (wrong at a core shape too: items 1-3 charge it)
    if case.dtype != "float32" and robust_part("4.1", inputs, outcome).findings:
        return Ledger()                         # (wrong for 16-bit inputs too: 4.1 charges it)
    x, g, dy, story = given(inputs, k, case)
    if phase == "fwd":
        forward_outputs(L, outcome, task, x, g, case.eps, story)
    else:
        backward_outputs(L, L, outcome, task, x, g, dy, case.eps, story + " (given the reference r)",
                         r=inputs[k]["r"])
    return L


def item_5(inputs, outcome) -> Ledger:
    """The fused forward on "d" (or the core case traffic_case picks), then on the other core cases: each of its
    checks is a finding or a check passed."""
    L = Ledger()
    k = traffic_case(L, outcome, "fwd")
    if k is None:
        return L
    L.extend(forward_traffic(inputs, outcome, k))
    return at_every_shape(L, inputs, outcome, "fwd", k, forward_traffic)


def forward_traffic(inputs, outcome, k) -> Ledger:
    """Item 5's checks on core case ``k``'s forward."""
    L = Ledger()
    task = task_name("fwd", k)
    info = outcome.info[task]
    M, N = traffic_cases()[k].shape
    launches = info["fwd"]["launches"]
    if not launches:
        L.add(no_kernel(outcome, task, "forward", ("y", "r"), (M, N)))
        return L
    moved = other_work(outcome, task, "forward", "y")
    if moved:
        L.add(moved)
        return L
    taint = laundered(outcome, task, ("y", "r"), "a fused forward computes y and r from x and g")
    if taint:
        L.add(taint)
        return L
    x_loads = by_role(launches, "x", "loaded")
    y_stores = by_role(launches, "y", "stored")
    r_stores = by_role(launches, "r", "stored")
    g_loads = sum(a.get("loaded_per_program", a["loaded"]) for Lc in launches for a in Lc["args"].values()
                  if "g" in roles_of(a))                  # a program's second load of an element: its cache
    g_max = max(sum(Lc["programs"] for Lc in launches), M) * N    # once per program, or once per row (a
    # persistent grid that reloads g for each of its rows loads it as often as the lecture's one row per program)
    scratch = others(launches, ("x", "y", "r", "g"))
    extra = sum(a["loaded"] + a["stored"] for _, _, a in scratch)     # every buffer but x, g, y and r, together
    rows_missed = coverage_cause(outcome, task, "y") or coverage_cause(outcome, task, "r")
    x_distinct = min(io(launches, "x", "loaded")[1], M * N)
    read = traffic(outcome, task, "fwd", inputs[k]["x"])        # a tensor read for another: an address, not fusion
    because, read_cause = (f", because {read[1]}", read[0]) if read else ("", None)
    # rows read by several programs while others go unstored: one address fault (the grid, the row index), its owner's
    L.add(None if x_loads == x_distinct == M * N else
          Finding("x", f"your forward loaded x {x_loads / max(1, x_distinct):.1f} times per element; a fused kernel "
                       f"reads it once{because}", rows_missed or read_cause) if x_loads > x_distinct else
          Finding("x", f"your forward loaded only {x_distinct} of the {M * N} elements of x"
                       f"{'' if rows_missed else because}", rows_missed or read_cause))     # rows missed: the grid's
    if y_stores == M * N:
        L.right()
    elif not made(outcome, task, "y") and not y_stores:
        # a kernel that wrote a y of its own, which the wrapper then replaced, is fused all the same
        L.add(Finding("y", "your forward's kernels stored none of the y it returned: y was made outside them",
                      "y_not_from_kernels" if wrote_a_whole_output(launches, M, N, ("x", "y", "r", "g")) else None))
    else:
        L.add(Finding("y", f"your forward's kernels stored {y_stores / (M * N):.1f} values per element of the y it "
                           f"returned; a fused kernel writes each element of y once, into the tensor the forward "
                           f"returns", coverage_cause(outcome, task, "y") if y_stores < M * N else None))
    r_cause = (("r_not_from_kernels" if (info.get("host_made") or {}).get("r") else "r_not_stored") if r_stores == 0
               else coverage_cause(outcome, task, "r") if r_stores < M else None)
    L.add(None if r_stores == M else
          Finding("r", f"your forward stored {r_stores} values of r for {M} rows; store each row's 1/rms once",
                  r_cause))
    L.add(None if g_loads <= g_max else
          Finding("g", f"your forward loaded g {g_loads} times ({g_max} allowed: once per program, or once "
                       f"per row where programs take several rows)"))
    if extra >= M * N // 4:
        names = "; ".join(f"{name} in {k}: {a['loaded']} loaded, {a['stored']} stored" for k, name, a in scratch
                          if a["loaded"] or a["stored"])
        host_y = not made(outcome, task, "y")       # the kernel's own y, which the wrapper then replaced
        L.add(Finding("x", f"your forward moves {extra} elements through buffers other than x, g, y and r "
                           f"({names}): an extra pass over memory; a fused forward reads x and g and writes y and r, "
                           f"nothing else", "y_not_from_kernels" if host_y else None))
    return L


def item_6(inputs, outcome) -> Ledger:
    """The fused backward: rmsnorm_backward on "d" (or the core case traffic_case picks), given the reference r,
    then on the other core cases. No element of x or dy loaded twice, none of dx stored twice, and a dg reduction
    whose scratch traffic is bounded (at "d": a fixed number of programs' partial rows is most of a few rows' data);
    elements never loaded or stored are the grid's or the mask's doing, charged where their cause is."""
    L = Ledger()
    k = traffic_case(L, outcome, "bwd")
    if k is None:
        return L
    L.extend(backward_traffic(inputs, outcome, k))
    fixed = fixed_grids(outcome)
    return at_every_shape(L, inputs, outcome, "bwd", k, lambda i, o, other: backward_traffic(i, o, other, idle=fixed))


def fixed_grids(outcome) -> frozenset:
    """{(kernel, programs)} of the backward launches that launched the same number of programs at two core cases of
    different rows: a persistent grid's size, the same at every shape, which may leave programs without rows at a
    shape of few rows (counts.scratch_problem's ``idle``); a grid that grows with the rows is none."""
    seen = {}
    for k, case in CORE.items():
        for Lc in outcome.info.get(task_name("bwd", k), {}).get("bwd", {}).get("launches", []):
            seen.setdefault((Lc.get("kernel"), Lc["programs"]), set()).add(case.shape[0])
    return frozenset(key for key, rows in seen.items() if len(rows) > 1)


def backward_traffic(inputs, outcome, k, idle: bool | frozenset = False) -> Ledger:
    """Item 6's checks on traffic case ``k``'s backward (``idle``: its scratch may also hold a row of zeros for each
    program left without rows, counts.scratch_problem)."""
    L = Ledger()
    task = task_name("bwd", k)
    M, N = traffic_cases()[k].shape
    taint = laundered(outcome, task, ("dx", "dg"), "a fused backward computes dx and dg from x, dy, g and r")
    if taint:
        L.add(taint)
        return L
    moved = other_work(outcome, task, "backward", "dx")
    if moved:
        L.add(moved)
        return L
    problems = backward_io_problems(outcome.info[task]["bwd"]["launches"], M, N, idle)
    if problems and problems[0][0] == "none":
        L.add(no_kernel(outcome, task, "backward", ("dx",), (M, N)))
        return L
    launches = outcome.info[task]["bwd"]["launches"]
    host_dx = (not made(outcome, task, "dx") and (outcome.info[task].get("host_made") or {}).get("dx")
               and wrote_a_whole_output(launches, M, N, IO_ROLES))
    coverage = "dx_not_from_kernels" if host_dx else coverage_cause(outcome, task, "dx")
    read = traffic(outcome, task, "bwd", inputs[k]["x"])        # a tensor read for another: an address, not fusion
    for kind, message in problems:
        cause = coverage if kind == "coverage" else "dx_not_from_kernels" if kind == "scratch" and host_dx else None
        if read and kind in ("repeat", "coverage") and not (kind == "coverage" and cause):   # (rows never stored)
            message, cause = f"{message}, because {read[1]}", read[0]
        L.add(Finding("dx", message, cause))
    for _ in range(4 - len(problems)):
        L.right()                                     # the checks that passed
    return L


def no_kernel(outcome, task, where: str, outputs: tuple, shape: tuple) -> Finding:
    """A phase that launched no kernel at a core shape. Where its outputs are not the host's either, no row of them
    was written: a grid of no programs (one that rounds M / BLOCK_M down, say), the grid's mistake, charged where
    rows never stored are; otherwise the work was done without kernels."""
    host = any((outcome.info[task].get("host_made") or {}).get(o) for o in outputs)
    cause = None if host else next(filter(None, (coverage_cause(outcome, task, o) for o in outputs)), None)
    rows = f": no row of {outputs[0]} was written, so the grid had no programs" if cause else ""
    return Finding(outputs[0], f"your {where} launched no kernel for x of shape {shape}{rows}", cause)


def other_work(outcome, task, where: str, output: str) -> Finding | None:
    """A finding when the judge's replay of the task on fresh inputs (job/judge/replay.py) ran the same launches and
    they moved other amounts of memory, or raced where they had not: the traffic the items count is what the
    kernels do on any inputs of the shape, and a kernel that tells the grader's inputs from others does other work
    on each."""
    moved = outcome.info.get(task, {}).get("replay_moved")
    if not moved:
        return None
    return Finding(output, f"your {where}'s kernels did other work when the grader ran the same launches again on new "
                           f"inputs of the same shape: {str(moved)[:text.ERROR_LINE_CHARS]}. What a kernel reads and "
                           f"writes depends on the shapes it is given, never on the values; the traffic counted is "
                           f"what your kernels do on any inputs")


def stale_output(outcome, task, forward: bool, where: str) -> Finding | None:
    """A finding when an output of the phase was right on the grader's inputs and wrong when the judge ran the
    phase's launches and recorded torch ops again on fresh ones (job/judge/replay.py): the host computed what the
    kernels stored, from the first inputs, where no record shows it."""
    stale = outcome.info.get(task, {}).get("stale") or {}
    name = next((n for n in (("y", "r") if forward else ("dx", "dg")) if n in stale), None)
    if name is None:
        return None
    why = str(stale[name])[:text.ERROR_LINE_CHARS]
    return Finding(name, f"your {where} returned {name}, but when the grader ran the same launches and torch ops "
                         f"again on new inputs, {why}: the host computed it from the first inputs, where no recorded "
                         f"op or kernel shows the work")


def autograds_cast(outcome, k, task, out, dtype) -> str | None:
    """The dtype of the dx that rmsnorm_backward returns for case ``k``, when it is not x's (``dtype``): then the
    dx of the autograd step ``task`` is autograd's own conversion of it, which no kernel stores. An output's
    dtype is 4.6's (output_dtype), not a sign of host work."""
    if out != "dx" or kind_of(task) != "ag":
        return None
    returned = (outcome.info.get(task_name("bwd", k)) or {}).get("dtypes", {}).get("dx")
    return returned if isinstance(returned, str) and returned != dtype else None


def item_7(inputs, outcome) -> Ledger:
    """No value a host-side op computed from an M·N activation reaches a kernel or an output (the judge's replay
    follows it: host_problem), in any dtype: the forward, the backward given the reference r,
    and both through autograd (where TritonRMSNorm's own code runs)."""
    L = Ledger()
    M, N = CORE["d"].shape
    by_line = {}                                       # a host line's cause, once known from any phase
    for k, c in HOST_CHECK.items():
        name = text.dtype_name(c.dtype)
        phases = []
        for task, phase, where, out in ((task_name("fwd", k), "fwd", f"forward ({name} x)", "y"),
                                        (task_name("bwd", k), "bwd", f"backward ({name} x)", "dx"),
                                        (task_name("ag", k), "fwd", f"forward through rmsnorm ({name} x)", "y"),
                                        (task_name("ag", k), "bwd", f"backward through rmsnorm ({name} x)", "dx")):
            x, _, _, story = given(inputs, k, c)
            late = backward_failure(outcome, task, x, story)
            if phase in outcome.info.get(task, {}) and not (late and phase == "bwd"):
                phases.append((task, outcome.info[task][phase], where, out))
            elif c.dtype != "float32":
                continue                               # a 16-bit input that stops a step is 4.1's (16-bit inputs)
            elif late and phase == "bwd":
                L.add(late)
            elif not (late and phase == "fwd"):
                L.add(task_error(outcome, task))
        for task, phase, where, out in phases:
            if not phase["launches"]:
                L.add(no_kernel(outcome, task, where, (out,), (M, N)))
                continue
            unseen = stale_output(outcome, task, phase is outcome.info[task].get("fwd"), where)
            if unseen:
                L.add(unseen)                          # host work out of the grader's sight: this item's own charge
                continue
            kind = "fwd" if phase is outcome.info[task].get("fwd") else "bwd"
            problem = host_problem(outcome.info[task], kind, M, N, where)
            culprit = host_culprit(outcome.info[task], kind) if problem else None
            if problem:
                outs = ("y", "r") if phase is outcome.info[task].get("fwd") else ("dx", "dg")
                host = next((n for n in outs if not made(outcome, task, n)), None)
                if host in ("y", "dx") and not wrote_a_whole_output(phase["launches"], M, N, IO_ROLES):
                    host = None                        # the kernels never computed it: this part's own finding
                line = source_line(culprit)
                cause = f"{host}_not_from_kernels" if host else by_line.get(line)
                if cause and line:
                    by_line[line] = cause
                L.add(Finding(out, problem, cause))
                continue
            taint = laundered(outcome, task, (out,), "the work must happen in the kernels")
            if taint:
                L.add(taint)
                continue
            # the elements of the output kernels wrote, by the judge's memory (every launch's together: one launch
            # per chunk of rows covers it all); the most one launch stored, where the judge did not say
            covered = (outcome.info[task].get("kernel_stored") or {}).get(out)
            if not isinstance(covered, int):
                covered = max((a["distinct"] for Lc in phase["launches"] for a in Lc["args"].values()
                               if out in roles_of(a) and a["stored"]), default=0)
            if covered != M * N:
                whole = wrote_a_whole_output(phase["launches"], M, N, IO_ROLES)
                cast = autograds_cast(outcome, k, task, out, c.dtype) if whole and not covered else None
                if cast:
                    L.add(Finding(out, f"{out} returned by your {where} is autograd's conversion of the {cast} {out} "
                                       f"your backward returns (x.grad takes x's dtype), not a tensor your kernels "
                                       f"stored", "output_dtype"))
                    continue
                host_wrote = (outcome.info[task].get("host_made") or {}).get(out)
                # nothing stored, and neither a kernel nor the host wrote it: the grid's rows never stored
                cause = f"{out}_not_from_kernels" if not covered and (whole or host_wrote) else \
                    coverage_cause(outcome, task, out)
                L.add(Finding(out, f"{out} returned by your {where} was not written by kernel stores ({covered} of "
                                   f"{M * N} elements were)", cause))
                continue
            L.right()
    if not L.findings:
        L.extend(host_work_elsewhere(outcome))
    return L


def host_problem(info: dict, kind: str, M: int, N: int, where: str) -> str | None:
    """Why the host did the kernels' work in phase ``kind`` ("fwd", "bwd") of a task of an M x N case (None if it
    did not), from what the judge saw itself: its replay of the task found a host op whose work on an activation a
    kernel loaded or an output returned (``info["host_work"]``: rmsnorm_testkit/dataflow.py); a copy of an input
    the judge found in the memory the kernels were given (made outside torch, through numpy, say: ``copies``); or
    the kernels loaded values the host computed, one or more per row. A host op whose result reaches neither (a
    check of the values) costs time on a GPU, item 10's, and no point here."""
    phase = info.get(kind) or {}
    work = info.get("host_work")
    problem = None
    if isinstance(work, dict) and work.get("phase") == kind:
        problem = dataflow.problem((work["op"], work["reached"]), M, N, where)
        norms = phase.get("norms") or []
        if problem and norms:
            problem = (f"your {where} called torch's {norms[0]['name']}" +
                       (f" at {norms[0]['where']}" if norms[0]["where"] else "") +
                       ": torch's own norm does the work your kernels should")
    if not problem:                                    # copies of inputs the judge found in the kernels' memory
        problem = compare.host_work_problem(phase.get("copies") or [], M, N, where, file="rmsnorm.py")
    if not problem and phase.get("host_loaded", 0) >= M:
        problem = (f"your kernels loaded {phase['host_loaded']} values the host computed in your {where} "
                   f"(not inputs, not copies of them, not fills): the host did work the kernels must do")
    return problem


def host_culprit(info: dict, kind: str) -> dict | None:
    """The host op item 7 charged in phase ``kind`` (host_problem), or None."""
    work = info.get("host_work")
    if isinstance(work, dict) and work.get("phase") == kind:
        return work["op"]
    return next(iter((info.get(kind) or {}).get("copies") or []), None)


def host_work_elsewhere(outcome) -> Ledger:
    """Item 7's host-op checks at the other traffic cases (the core shapes and the drawn one), then the replay's
    dataflow of every other case: host work done only at the shapes d is not (the row dots on the host for small
    inputs, or for long rows) is host work all the same. Only the host's own work (stores, errors and wrong outputs
    there are other items')."""
    L = Ledger()
    for k, c in traffic_cases().items():
        if k in HOST_CHECK:
            continue
        (M, N), story = c.shape, f"x of shape {c.shape} {text.dtype_name(c.dtype)}"
        for kind, name in (("fwd", "forward"), ("bwd", "backward")):
            phase = (outcome.info.get(task_name(kind, k)) or {}).get(kind)
            if not isinstance(phase, dict) or not phase.get("launches"):
                continue
            problem = host_problem(outcome.info.get(task_name(kind, k)) or {}, kind, M, N, f"{name} ({story})")
            if problem:
                L.add(Finding("y" if kind == "fwd" else "dx", problem))
                return L
    # every other case's replay: host work done only at shapes the checks above do not read (long rows, say)
    for k, c in all_sim_cases().items():
        if k in HOST_CHECK or k in traffic_cases():
            continue
        for kind in ("fwd", "bwd", "ag"):
            work = (outcome.info.get(task_name(kind, k)) or {}).get("host_work")
            if not isinstance(work, dict) or not isinstance(work.get("shape"), list):
                continue
            M, N = work["shape"]
            name = "forward" if work["phase"] == "fwd" else "backward"
            where = f"{name}{' through rmsnorm' if kind == 'ag' else ''} ({text.dtype_name(c.dtype)} x of {M} rows " \
                    f"of {N})"
            out = "y" if work["phase"] == "fwd" else "dx"
            reached = work["reached"] if work["reached"] in ("y", "r", "dx", "dg") else None
            # its result is an output no kernel stored there: the output made on the host, charged where that
            # output's cause is (the case's own part finds it too), not a second mistake
            host = reached if reached and not made(outcome, task_name(kind, k), reached) else None
            L.add(Finding(reached or out, dataflow.problem((work["op"], work["reached"]), M, N, where),
                          f"{host}_not_from_kernels" if host else None))
            return L
    return L


def source_line(op: dict | None) -> str | None:
    """The line of rmsnorm.py a host op ran at ("rmsnorm.py line 57"), from its ``where`` field, or None."""
    words = str((op or {}).get("where") or "").split()
    return " ".join(words[:3]) if words[:2] == ["rmsnorm.py", "line"] and len(words) > 2 else None


def item_8(inputs, outcome) -> Ledger:
    L = Ledger()
    overlap = None                                     # a race that an address fault made, charged where it is
    for task in sorted(outcome.info):
        for phase in ("fwd", "bwd"):
            race = next((Lc["race"] for Lc in outcome.info[task].get(phase, {}).get("launches", []) if Lc.get("race")),
                        None) if isinstance(outcome.info[task], dict) else None
            cause = race and overlap_cause(outcome, task, phase, race)
            if race and not cause:
                L.add(Finding("race", race, "race"))
                return L
            overlap = overlap or (race and Finding("race", race, cause))
    if overlap:
        L.add(overlap)
        L.right()                                      # and no race of its own anywhere else
        return L
    kernel_made = [v for task in (FWD_D, BWD_D) for v in (outcome.info.get(task, {}).get("kernel_made") or {}).values()]
    err = task_error(outcome, BWD_D)
    if err:
        L.add(err)                                     # charged where it first shows; the tasks that ran are checked
        if any(not outcome.task_error(task_name(kind, k)) for kind in ("bwd", "ag") for k in CORE if k != "d"):
            L.right()
    elif not any(kernel_made):
        L.add(Finding("race", "no output of yours was stored by a kernel, so there was nothing for the race detector "
                              "to check"))
    else:
        L.right()
    return L


INPUT_ROLES = ("x", "dy", "g", "r")


def beyond_outputs(launches, M, N) -> dict:
    """scratch_extents' entries for arguments in an input's or output's storage that reach past it (dg returned as
    row 0 of a buffer whose other rows are the partial dg rows): the elements past it are scratch."""
    size = {"x": M * N, "dy": M * N, "dx": M * N, "g": N, "dg": N, "r": M}
    out = {}
    for _, name, a in ((L["kernel"], n, a) for L in launches for n, a in L["args"].items()):
        roles = [r for r in roles_of(a) if r in size]
        if roles and a["stored"]:
            over = extent(a) - max(size[r] for r in roles)
            if over > 0:
                key = ("beyond", a["storage"])
                out[key] = (max(over, out.get(key, (0, name))[0]), name)
    return out


def item_9(inputs, outcome) -> Ledger:
    """The improved reduction: a fused backward (item 6) whose dg is deterministic (no float atomics that two programs
    make into one element, no sums built under a lock) and whose partial buffer is at most M·N/8 elements, and dg
    right, at the core case d and at a shape of many rows drawn for this grading ("tall": a file that keeps its
    improved reduction for the shapes it knows does not keep the bound there); at the other drawn shape, of few
    rows, fused and deterministic (a persistent grid of one program per SM may hold more than M·N/8 there). dg's
    exactness is d's alone: a wrong dg at the drawn shapes is items 5 and 6's, and masked-off rows read without
    other= (4.5's, once) show only there."""
    L = Ledger()
    if failed(L, outcome, BWD_D):
        return L
    L = improved_reduction(inputs, outcome, "d")
    for k, whole in (("tall", True), ("drawn", False)):
        if L.findings:
            return L
        more = Ledger()
        if not failed(more, outcome, task_name("bwd", k)):     # a task that stopped earns no extra credit
            more = improved_reduction(inputs, outcome, k, whole=whole, exact=False)
        L = named(L, more, k)
    return L


def improved_reduction(inputs, outcome, k, whole: bool = True, exact: bool = True) -> Ledger:
    """Item 9's checks on the backward of traffic case ``k``: fused and deterministic, then (``whole``) the partial
    buffer's size, and (``exact``) dg."""
    L = Ledger()
    M, N = reduction_cases()[k].shape
    task = task_name("bwd", k)
    info = outcome.info[task]
    launches = info["bwd"]["launches"]
    moved = other_work(outcome, task, "backward", "dg")
    if moved:
        L.add(dataclasses.replace(moved, message=f"the improved reduction starts from a fused backward (item 6): "
                                                 f"{moved.message}"))
        return L
    problems = backward_io_problems(launches, M, N, idle=False if whole else fixed_grids(outcome))  # as item 6 does
    problem = problems[0][1] if problems else None
    why = order_dependence({"bwd": info["bwd"]})
    if problem:
        read = traffic(outcome, task, "bwd", inputs[k]["x"])     # an address mistake, item 2's, named
        L.add(Finding("dg", f"the improved reduction starts from a fused backward (item 6): {problem}"
                            + (f", because {read[1]}" if read else "")))
        return L
    if why:
        L.add(Finding("dg", f"your dg is not deterministic: {why}. The improved reduction has each program sum its "
                            f"rows in registers and store one partial row; the partial rows are then added in a fixed "
                            f"order"))
        return L
    if not whole:
        return L
    # of any dtype; but counters and lock words (integers written only by atomics, a few per row or program: a
    # ticket that hands out rows, a lock) hold no partial sums
    programs = sum(Lc["programs"] for Lc in launches)
    sizes = scratch_extents([s for s in others(launches, IO_ROLES) if s[2]["stored"] and not (
        "int" in s[2].get("dtype", "float") and s[2]["stored"] == s[2].get("atomics", 0)
        and extent(s[2]) <= M + programs)])
    sizes.update(beyond_outputs(launches, M, N))        # a partial buffer in the same storage as dg, past it
    total = sum(size for size, _ in sizes.values())         # every partial buffer together, however it is split
    names = ", ".join(name for _, name in sizes.values())
    # the partial values stored, wherever: one small buffer filled again and again, or slices of a big one given
    # to one launch each, is the lecture's M x N buffer all the same (and so are dg's own rows stored past dg);
    # dg itself may be stored once more, in fp32 before its cast
    # (an integer sum built by atomics, deterministic, stores nothing a second pass reads; a float atomic that one
    # program alone makes into an element is a store)
    partials = sum(a["stored"] - (a["atomics"] if "int" in a.get("dtype", "float") else 0)
                   for _, _, a in others(launches, IO_ROLES)) + max(0, by_role(launches, "dg", "stored") - N)
    for _, name, a in ((Lc["kernel"], n, a) for Lc in launches for n, a in Lc["args"].items()):
        roles = roles_of(a)                 # partial sums kept in an input's memory (not an output put there)
        if a["stored"] and any(r in INPUT_ROLES for r in roles) and not any(r in ("y", "dx", "dg") for r in roles):
            key = ("input", a["storage"])
            sizes[key] = (max(extent(a), sizes.get(key, (0, name))[0]), name)
            partials += a["stored"]
    total = sum(size for size, _ in sizes.values())
    if total > M * N // 8:
        buffers = f"buffer ({names}) has" if len(sizes) == 1 else f"buffers ({names}) have, together,"
        L.add(Finding("dg", f"your partial dg {buffers} {total} elements for M·N = {M * N}; the improved reduction "
                            f"keeps it at most M·N/8 = {M * N // 8}: give each program many rows and accumulate dg in "
                            f"registers"))
    elif partials > M * N // 8 + N:
        L.add(Finding("dg", f"your backward stored {partials} partial dg values for M·N = {M * N} ({names}, reused or "
                            f"in slices); the improved reduction stores at most M·N/8 = {M * N // 8} of them (and dg "
                            f"once): give each program many rows and accumulate dg in registers"))
    elif exact:
        case = reduction_cases()[k]
        x, g, dy, story = given(inputs, k, case)
        backward_outputs(Ledger(), L, outcome, task, x, g, dy, case.eps, story + " (given the reference r)",
                         r=inputs[k]["r"])
    return L
