"""One output of one task: missing, not made by the kernels, or wrong, and why.

Every output is compared with the float64 reference, and a difference becomes a *finding* whose
cause the shared diagnosis names (starter/rmsnorm_testkit/diagnose.py). Before the values, a task's
own record may name the cause first, so that one mistake is one charge: its crash (``task_error``,
``error_cause``: a launch's by the judge's record of its kind and line, a host error by its text and task), a
compile rule it broke (``rule_broken``, with
Triton's refusals on the GPU in ``REFUSALS``), two tensors passed the other way round (``exchanged``;
on the GPU, ``seen_on_the_simulator`` takes the simulator's word for it), an output the kernels did not
make or stored from the host (``not_made``, ``laundered``), r saved wrong or not at all. The names of
tasks and of their outputs come from hidden/cases.py.
"""
from __future__ import annotations

import dataclasses
import math
import re

import torch
from rmsnorm_testkit import causes, diagnose, text
from rmsnorm_testkit.compare import apply_view, describe, reference

from ..hidden.cases import CORE, kind_of, task_name
from ..job.wire.errors import Crash
from ..job.wire.phases import MADE_BY, MADE_IN
from ..job.wire.protocol import output_key
from .charge import Finding, Ledger
from .counts import IO_ROLES, others, roles_of


def got(outcome, task, name, what=""):
    """An output a task returned (or what is known of it: ``what`` as in cases.output_key), or None."""
    return outcome.tensors.get(output_key(task, name, what))


SOURCES = {"fwd": {"y": " from rmsnorm_forward", "r": " from rmsnorm_forward"},
           "bwd": {"dx": " from rmsnorm_backward", "dg": " from rmsnorm_backward"},
           "ag": {"y": " from rmsnorm (your TritonRMSNorm.forward)",
                  "dx": " (x.grad) from your backward (TritonRMSNorm.backward)",
                  "dg": " (g.grad) from your backward (TritonRMSNorm.backward)"}}
SOURCES["speed"] = SOURCES["ag"]


def crash_site(err: str) -> str:
    """The cause of an error: where it happened, without what differs from input to input, so that one crash met in
    several parts is one mistake (charged in the first of them; the others keep their points only if something else
    of theirs could be checked). A simulator error's site is its kind and the kernel's line ("OutOfBoundsError:
    out-of-bounds load in load_tile line 58", whatever program, offsets or dtype); another error's, its type and
    what it says before its details ("RuntimeError: Mismatch in shape")."""
    head = err.split(", program ", 1)[0] if ", program " in err else ":".join(err.split(":", 2)[:2])
    line = re.search(r"\(rmsnorm\.py line \d+\)", err)          # the same error at the same line
    return f"error: {head.strip()}" + (f" {line.group(0)}" if line and line.group(0) not in head else "")


# How the errors of a kernel Triton refuses begin (a GPU's, or the simulator's of a rule it cannot run on): its
# compiler's, a grid given as an int, and a call of a plain Python function (Triton 3.6 says so at the call).
REFUSALS = ("CompilationError", "TypeError: object of type 'int' has no len()",
            "RuntimeError: Unsupported function referenced")


def task_error(outcome, task) -> Finding | None:
    """The exception (or time-out, or crash) that stopped a task. A kernel's crash is one mistake: the same error
    in several parts (at one line, or anywhere in one kernel: judge.charge.one_crash) is charged in the first of
    them, and the others keep their points only if something else of theirs could be checked. An error raised on
    the host (a ``raise`` or ``assert`` of rmsnorm.py's own, a torch call it makes: it may refuse that input on
    purpose) is charged in every part whose case it stops. Which of the two it was, the simulator job's judge says
    from its own record of the launches it served (``crash``: job.wire.errors.Crash); only a GPU job, whose tasks
    run in the submission's process, is taken at that process's word."""
    err = outcome.task_error(task)
    if not err:
        return None
    return Finding("task", err, error_cause(outcome, task, err))


def error_cause(outcome, task, err: str) -> str:
    """The cause of ``err``, the error that stopped ``task``: a compile rule; a kernel's crash, by its site (one
    mistake wherever it shows); or the file's own host error, by its site and the task (charged wherever it stops
    a case)."""
    entry = outcome.info.get(task) or {}
    crash = Crash.read(entry.get("crash")) if entry.get("judged") is True and entry.get("error") == err else None
    if crash is not None:
        return "compile_rule" if f"{crash.type}: {crash.message}".startswith(REFUSALS) else crash.site()
    own = raised_by_file(outcome, task)
    # a kernel Triton's compiler refuses (the GPU's, or a rule the simulator cannot run on as written), or a grid it
    # cannot launch (an int: "object of type 'int' has no len()"), is one mistake: Triton's, never the file's own
    if err.startswith(REFUSALS) and not own:
        return "compile_rule"
    return crash_site(err) + (f" [{task}]" if own else "")


def raised_by_file(outcome, task) -> bool:
    """Did rmsnorm.py's host code raise the error that stopped ``task``? A simulator job's judge says so where no
    launch it served raised it (job/judge/remote.Failed); a GPU job's process, from the error's traceback
    (wire/errors.raised_in_file)."""
    return (outcome.info.get(task) or {}).get("raised_in_file") is True


def rule_broken(outcome, task, phase) -> Finding | None:
    """The first of Triton's compile rules a launch of the phase broke, recorded by the simulator, which ran the
    kernel as written (mini_triton's rule mode "record"): one mistake, charged once, in the first part (in the
    rubric's order) whose outputs it made; the rest of what those kernels did is checked as usual."""
    for launch in outcome.info.get(task, {}).get(phase, {}).get("launches", []):
        if launch.get("rule"):
            return Finding("task", f"{launch['rule']} (Triton refuses this kernel or its launch, so it fails on any "
                                   f"GPU; the grader ran it as written to check the rest)", "compile_rule")
    return None


def rule_broken_anywhere(outcome, phase) -> str | None:
    """The first compile rule the phase's kernels broke in any task, recorded (rule_broken) or raised (a launch
    Triton refuses): where those kernels also give values no known formula explains, at a shape where they broke no
    rule (a block of one row, a row of one column), those values are the rule's, one mistake charged once."""
    for task, info in outcome.info.items():
        if not isinstance(info, dict):
            continue
        launches = (info.get(phase) or {}).get("launches", [])
        rule = next((L["rule"] for L in launches if isinstance(L, dict) and L.get("rule")), None)
        err = outcome.task_error(task)
        failed_in = info.get("failed_in") or ("fwd" if kind_of(task) == "fwd" else "bwd" if kind_of(task) == "bwd"
                                              else None)
        if not rule and err and failed_in == phase and error_cause(outcome, task, err) == "compile_rule":
            rule = err
        if rule:
            return str(rule)
    return None


def the_rules_values(outcome, f: Finding | None, phase: str) -> Finding | None:
    """``f``, a wrong output of the phase that no known formula explains, as the values of a compile rule its kernels
    broke elsewhere (rule_broken_anywhere), where they did; else ``f`` as it is."""
    rule = rule_broken_anywhere(outcome, phase) if f is not None and f.cause is None else None
    if rule is None:
        return f
    return dataclasses.replace(f, message=f"{f.message}. The kernels that made it break one of Triton's compile rules "
                                          f"at some input ({rule[:text.ERROR_LINE_CHARS]}): on a GPU they do not "
                                          f"compile, and run as written they give these values", cause="compile_rule")


def exchanged(outcome, task, phase) -> Finding | None:
    """The first launch of the phase that passed two tensors the other way round (x as ``y_ptr`` and y as ``x_ptr``,
    say), which the judge ran with the two exchanged (job.judge.launches.Launcher.exchange): one mistake, charged once,
    in the part that owns the phase's wrong tensors; the rest of what the kernels did is checked as usual."""
    info = outcome.info.get(task, {}).get(phase, {})
    for e in info.get("exchanged") or []:
        kernel, params = e.get("kernel"), list(e.get("params") or [])
        launch = next((L for L in info.get("launches", []) if L["kernel"] == kernel), {"args": {}})
        order = list(launch["args"])
        first, second = sorted(params, key=lambda n: order.index(n) if n in order else len(order))
        now = {n: "/".join(roles_of(launch["args"].get(n, {}))) or "another tensor" for n in params}
        which = "backward" if phase == "bwd" else "forward"
        return Finding("task", f"your {which} passes {now[second]} as {kernel}'s {first}, and {now[first]} as "
                               f"{second}: the launch's arguments are not in the order of the kernel's parameters. "
                               f"Pass the tensors in the order of {kernel}'s parameters (the grader ran this launch "
                               f"with the two exchanged, to check the rest)", f"wrong_tensor_{phase}")
    return None


def seen_on_the_simulator(outcome, f: Finding | None, phase: str | None = None) -> Finding | None:
    """``f``, a GPU case's wrong output, with the cause the simulator saw in the same kernels (judge.GpuView): a
    launch that passed two tensors the other way round, which on the GPU ran as written, so that what any later
    phase computes is suspect too (a forward that stores y into x leaves the backward a wrong x, and the second of
    two runs another x than the first); or, for an output of ``phase`` whose cause the GPU cannot show (it keeps no
    record of what the launches read), the addresses that phase's kernels read on the simulator instead of what
    they need (a row stride of 1, say). One mistake, one owner on both machines."""
    if f is None:
        return f
    seen = getattr(outcome, "exchanged", None)
    if seen is None and f.cause is None:
        seen = (getattr(outcome, "misread", None) or {}).get(phase)
    if seen is None:
        return f
    return dataclasses.replace(f, message=f"{f.message}. The cause, seen on the simulator: {seen.message}",
                               cause=seen.cause, checked=False)


def failed(ledger, outcome, task) -> bool:
    f = task_error(outcome, task)
    if f:
        ledger.add(f)
    return f is not None


def not_made(outcome, task, name, story) -> Finding | None:
    """Why ``name`` earns nothing, if no kernel of the submission stored any of it (known on the simulator)."""
    info = outcome.info.get(task, {})
    if (info.get("kernel_made") or {}).get(name) is not False:
        return None
    if _nan_from_lanes(outcome, task, name):
        return None
    stale = (info.get("stale") or {}).get(name)
    if stale:
        why = str(stale)[:text.ERROR_LINE_CHARS]
        return Finding(name, f"your {MADE_BY[name]} returned {name} for {story}, but when the grader ran the same "
                             f"launches and torch ops again on new inputs of the same shape, {why}: "
                             f"values the host computed from the first inputs and handed the kernels (in constexprs or "
                             f"scalars, by skipping stores, or through torch ops the grader did not see) are not your "
                             f"kernels' work", f"{name}_not_from_kernels")
    if (info.get("tainted") or {}).get(name):
        if name in ("dx", "dg") and kind_of(task) == "ag" and info.get("saved_r_made") is False:
            # the backward loaded the r its forward saved, which no kernel made: that r's mistake, item 1's
            return Finding(name, laundered_message(name, outcome, task) + f", for {story}: the r your forward saved "
                                 f"was not made by its kernels, and the backward computed {name} from it",
                           "r_not_from_kernels")
        return Finding(name, laundered_message(name, outcome, task) + f", for {story}: points for correct values go "
                             f"only to values your Triton kernels compute from the inputs", f"{name}_not_from_kernels")
    mask = got(outcome, task, name, "stored")
    if mask is not None and (bool(mask.any()) or not (info.get("host_made") or {}).get(name)):
        return None                # partly stored, or never written at all: the diagnosis says which elements
    unlaunched = _nothing_launched(outcome, task, name)
    if unlaunched:                                   # a backward that returned before its launches: its grid's
        return Finding(name, f"your {MADE_BY[name]} returned {name} without launching any kernel, for {story}: "
                             f"no row of dx was stored either, so the launch never happened (a return, or a grid of no "
                             f"programs, before it)", unlaunched)
    how = (" (stored by a kernel, or summed on the host from a partial buffer your kernels stored)"
           if name == "dg" else "")
    norms = info.get(MADE_IN[name], {}).get("norms", [])
    called = (f"; it called torch's {norms[0]['name']}" + (f" at {norms[0]['where']}" if norms[0]["where"] else "")
              + ", which does the work your kernels should") if norms else ""
    host = [op for op in info.get(MADE_IN[name], {}).get("host_ops", [])
            if op.get("roles") and (op.get("where") or "").startswith("rmsnorm.py line")]
    if host and not called:
        called = f"; torch computed it on the host, last at {host[-1]['where']}"
    return Finding(name, f"your {MADE_BY[name]} returned {name} without any kernel storing it{how}, for {story}"
                         f"{called}: points for correct values go only to values your Triton kernels compute",
                   f"{name}_not_from_kernels")


def _nothing_launched(outcome, task, name) -> str | None:
    """The cause of a dg the host filled where the backward launched no kernel at all and left dx unstored: the
    rows its grid never stored (dx's cause, item 2's), one mistake in both outputs; None otherwise (a backward
    done in torch, say, whose dx the host made too)."""
    info = outcome.info.get(task, {})
    if name != "dg" or (info.get(MADE_IN[name]) or {}).get("launches") or (info.get("host_made") or {}).get("dx"):
        return None
    return coverage_cause(outcome, task, "dx")


def _nan_from_lanes(outcome, task, name) -> bool:
    """Is ``name`` all NaN (which memory records as a fill, not as the kernels' values) in a task whose kernels
    loaded masked-off lanes without other=, while the run with those lanes read as 0.0 made it in kernels? The
    NaN is then the lanes', and the diagnosis charges them (a dg summed from partial rows of NaN, say)."""
    value = got(outcome, task, name)
    zero_made = (outcome.info.get(task, {}).get("if_zero_made") or {}).get(name)
    return zero_made is True and value is not None and bool(torch.isnan(value).all())


FROM = {"y": "x and g", "r": "x", "dx": "x, dy, g and r", "dg": "x, dy and r"}


def laundered_message(name, outcome, task) -> str:
    """An output the kernels stored, whose values they loaded from memory the host wrote (provenance)."""
    return (f"your {MADE_BY[name]}'s kernels stored {name} from values the host computed (memory the host wrote, "
            f"then loaded by them), not from {FROM[name]}")


def laundered(outcome, task, names, what: str) -> Finding | None:
    """A finding (charged where it is found: no kernel computed anything) for outputs stored from host memory."""
    tainted = [n for n in names if (outcome.info.get(task, {}).get("tainted") or {}).get(n)]
    if not tainted:
        return None
    return Finding(tainted[0], laundered_message(tainted[0], outcome, task) + f": {what}")


def made(outcome, task, name) -> bool:
    return (outcome.info.get(task, {}).get("kernel_made") or {}).get(name) is not False


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


def function_output(outcome, task, story) -> Finding | None:
    """What an autograd step says when rmsnorm (TritonRMSNorm.apply) returned no tensor at all (a tuple (y, r),
    say): the Function's output is 4.6's (output_type), in every part whose step it stops, and the grader's own
    y.backward(dy) that then fails is no second mistake. None for any other task, and for a tensor the grader
    cannot read (a quantized one: named by its dtype where it is compared)."""
    what = outcome.info.get(task, {}).get("not_tensors", {}).get("y")
    if kind_of(task) != "ag" or not what or " " in what:      # a type's name ("tuple"), not a tensor described
        return None
    return Finding("y", f"y was not returned for {story}: rmsnorm (your TritonRMSNorm.forward, through apply) gave "
                        f"{got_instead(what)}, so y.backward(dy) could not run. A Function's forward returns y alone; "
                        f"keep r for the backward with ctx.save_for_backward", "output_type")


def got_instead(what: str) -> str:
    """What came back instead of a tensor, as the feedback says it: a type's name, "NoneType instead of a
    tensor"; a description (a subclass of torch.Tensor, a tensor on another device) as it is."""
    return what if " " in what else f"{what} instead of a tensor"


def no_dg(outcome, task) -> tuple:
    """(cause, what to do) of a dg that came back as None: rmsnorm_backward's own (item 3's, wherever it shows,
    when the backward called directly returns None too), or the autograd Function's, which drops it (4.6's)."""
    if kind_of(task) == "bwd" or outcome.info.get(task_name("bwd", "d"), {}).get("not_tensors", {}).get("dg") \
            == "NoneType":
        return "no_dg_backward", ": rmsnorm_backward must return (dx, dg), dg the sum over rows of dy·x·r"
    return "no_dg", ": g.grad is None after backward; return dg for g from your backward"


def traffic(outcome, task, phase, x, dy=None) -> tuple | None:
    """What the phase's launches read instead of what they need (diagnosis.traffic_cause), or None."""
    args = launch_args(outcome, task, phase)
    N = x.shape[-1] if x.dim() else 1
    # the strides of the tensors as given, for the roles whose own memory the kernels got (not a host copy)
    launches = outcome.info.get(task, {}).get(phase, {}).get("launches", [])
    copied = {a["copy_of"] for L in launches for a in L["args"].values() if a.get("copy_of") and not roles_of(a)}
    strides = {role: t.stride() for role, t in (("x", x), ("dy", dy))
               if t is not None and t.dim() == 2 and role not in copied}
    return diagnose.traffic_cause(phase, args, x.numel() // max(1, N), N, strides) if args else None


def through_the_function(outcome, task, read) -> tuple | None:
    """An autograd step's backward that passes one input's tensor where a kernel's parameter names another (y or g as
    x_ptr, say), where rmsnorm_backward called directly passes each where it belongs: the autograd Function handed
    rmsnorm_backward the wrong tensor (what it saved, or the order it unpacked ctx.saved_tensors in), 4.6's
    mistake, not the launch's. ``read``: traffic()'s finding of the step's backward, returned as it is otherwise."""
    if not read or read[0] != "wrong_tensor_bwd":
        return read
    direct = task_name("bwd", "d")
    swap = diagnose.swapped_argument(launch_args(outcome, task, "bwd"))
    if swap is None or not outcome.info.get(direct, {}).get("ok") or \
            diagnose.swapped_argument(launch_args(outcome, direct, "bwd")) is not None or \
            any(outcome.info.get(t, {}).get("bwd", {}).get("exchanged") for t in (task, direct)):
        return read                       # rmsnorm_backward's own launch passes them the other way round
    return diagnose.handed_by_the_function(swap, read[2])


def launch_args(outcome, task, phase) -> list:
    """(kernel, parameter, roles, elements loaded, distinct elements loaded) of every tensor argument of a task's
    phase's launches; a host copy of a tensor (x.contiguous(), found in memory) has the role of what it copies."""
    launches = outcome.info.get(task, {}).get(phase, {}).get("launches", [])
    return [(L["kernel"], name, roles_of(a) or ([a["copy_of"]] if a.get("copy_of") else []), a.get("loaded", 0),
             a.get("distinct_loaded")) for L in launches for name, a in L["args"].items()]


# the cause of a wrong y, r or dx that matches no known wrong formula (rubric.OWNER_ONLY)
FORMULA = {"y": "formula_fwd", "r": "formula_fwd", "dx": "formula_bwd"}


def output(ledger: Ledger, outcome, task, name, x, want, story, alternatives=(), n_rows=None, fmt=None,
           rewrite=None, nan_cause=None, read=None) -> Finding | None:
    """Check one output of a task into ``ledger``. ``rewrite``: {cause key: Finding} that stands for a
    cause found elsewhere (the dx that is right for a wrong r gets r's cause); ``read``: traffic()'s finding of
    the phase that made it."""
    returned = got(outcome, task, name)
    if returned is None:
        what = outcome.info.get(task, {}).get("not_tensors", {}).get(name)
        made = function_output(outcome, task, story)
        if name == "y" and made:
            ledger.add(made)
            return made
        cause, fix = no_dg(outcome, task) if name == "dg" and what == "NoneType" else (None, "")
        f = Finding(name, f"{name} was not returned for {story}" + (f" (got {got_instead(what)})" if what else "")
                    + fix, cause)
        ledger.add(f)
        return f
    gate = not_made(outcome, task, name, story)
    if gate:
        ledger.add(gate)
        return gate
    loads = undefined_lanes(outcome, task, MADE_IN[name])
    fmt = {**(fmt or {}), **({"loads": f" (the first: {loads})"} if loads else {})}
    f = diagnose.diagnose(name, returned, want, x, alternatives=alternatives, stored=got(outcome, task, name, "stored"),
                   race=race_of(outcome, task, MADE_IN[name]), story=story, source=SOURCES[kind_of(task)].get(name, ""),
                   n_rows=n_rows, fmt=fmt, nan_cause=nan_cause, if_zero=got(outcome, task, name, "if_zero"),
                   traffic=read[:2] if read else None)
    f = seen_on_the_simulator(outcome, f, MADE_IN[name])
    if f is not None and rewrite and f.cause in rewrite:
        f = dataclasses.replace(f, cause=rewrite[f.cause].cause, checked=f.checked and rewrite[f.cause].checked)
    for also in (rule_broken(outcome, task, MADE_IN[name]), exchanged(outcome, task, MADE_IN[name])):
        if also is not None:
            ledger.add(also)
    f = the_rules_values(outcome, f, MADE_IN[name])
    if f is not None and f.cause is None and name in FORMULA and returned.numel() == want.numel():
        f = dataclasses.replace(f, cause=FORMULA[name])     # a wrong value no known formula explains: the formula's
    if f is not None and name == "r" and returned.dtype != torch.float32:
        # r in another dtype holds r rounded to it: the dtype is the mistake (4.6's), not what the values say
        f = dataclasses.replace(f, message=f"{f.message}; r has dtype {text.dtype_name(returned.dtype)}, and it must "
                                           f"be fp32 (allocate r with dtype=torch.float32)", cause="output_dtype")
    ledger.add(f)
    return f


def given(inputs, k, case):
    """x and dy as the submission saw them (views where the case says so), g, and the case's story."""
    t = inputs[k]
    x = apply_view(t["x"], case.view)
    dy = apply_view(t["dy"], None if case.dy_contiguous else case.view) if "dy" in t else None
    return x, t["g"], dy, case.story or describe(x)


def fmt_of(x, dy, eps):
    return {"eps": eps, "stride": x.stride(0) if x.dim() > 1 else 1,
            "dy_stride": dy.stride(0) if dy is not None and dy.dim() > 1 else 1,
            "dy_col_stride": dy.stride(-1) if dy is not None and dy.dim() else 1}


def forward_outputs(ledger, outcome, task, x, g, eps, story, names=("r", "y")):
    """r and y of a forward task (r first: y is made from it)."""
    y, r, _, _ = reference(x, g, eps=eps)
    alts = causes.once(lambda: causes.forward_alternatives(x, g, eps))    # for an output found wrong
    order = [("r", r, 1), ("y", y, 0)]
    unstored = [n for n, _, _ in order if _partly_stored(outcome, task, n)]
    if unstored:                                   # elements never stored come first: y is made from r
        order.sort(key=lambda o: (o[0] not in unstored, o[0] == "r"))    # y's pattern says more than r's
    order.sort(key=lambda o: got(outcome, task, o[0]) is not None)    # what did not come back says most of all
    rewrite, extra, read = {}, [], traffic(outcome, task, "fwd", x)
    instead = diagnose.read_instead_fwd(read, x, g, eps)          # from the memory the kernels read instead
    for name, want, i in order:
        if name not in names:
            continue
        mine = [(k, yr[i], says) for k, yr, says in instead]
        choices = causes.Later(lambda i=i, mine=mine, more=extra if name == "y" else []:
                               causes.pick(alts(), i) + mine + more)
        f = output(ledger, outcome, task, name, x, want, story, choices,
                   fmt=fmt_of(x, None, eps), rewrite=rewrite, read=read)
        got_r = got(outcome, task, "r")
        if name == "r" and f is not None and f.cause and got_r is not None and got_r.numel() == r.numel():
            # a y that is right for the r this forward made has r's cause: one mistake, not two
            y_of_r = causes.forward_alternatives_plain(x, g, eps)[0] * (got_r.double().reshape(-1, 1) / r.reshape(-1, 1)
                                                                   ).reshape(*x.shape[:-1], 1)
            extra = [("r_from_forward", y_of_r, f"it is right for the r your forward made, and that r is wrong "
                                                f"({f.message})")]
            rewrite = {"r_from_forward": f}


def _partly_stored(outcome, task, name) -> bool:
    mask = got(outcome, task, name, "stored")
    return mask is not None and not bool(mask.all())


def coverage_cause(outcome, task, name) -> str | None:
    """The cause of an output only partly stored by kernels (its stored mask's pattern), or None."""
    mask = got(outcome, task, name, "stored")
    if mask is None or got(outcome, task, name) is None or bool(mask.all()):
        return None
    return diagnose.unstored_cause(name, mask)


def backward_outputs(ledger_dx, ledger_dg, outcome, task, x, g, dy, eps, story, r=None, names=("dx", "dg")):
    """dx and dg of a backward or autograd task (those in ``names``: an autograd step gives only the gradients
    its inputs ask for). ``r``: the r the backward was given (the reference's when None). In an autograd task, a
    dx that is right for the r the forward saved gets that r's cause."""
    _, r_ref, dx_ref, dg_ref = reference(x, g, dy, eps)
    r_used = r_ref.float() if r is None else r
    # the known wrong gradients, made once, for the first output found wrong
    alts = causes.once(lambda: causes.backward_alternatives(x, g, dy, r_used, eps))
    fmt = {**fmt_of(x, dy, eps), "old_memory": _adds_into_scratch(outcome, task)}
    extra, rewrite = {}, {}
    wrong_r = _wrong_saved_r(outcome, task, x, g, eps, r_ref, story, fmt) if kind_of(task) == "ag" else None
    wrong_r = seen_on_the_simulator(outcome, wrong_r, "fwd")        # on the GPU: the forward's cause, if it has one
    if wrong_r is not None:
        saved = _saved_r(outcome, task)
        dx_r, dg_r = causes.backward_plain(x, g, dy, saved)
        says = f"it is right for the r your forward saved, and that r is wrong ({wrong_r.message})"
        extra = {"dx": [("r_from_forward", dx_r, says)], "dg": [("r_from_forward", dg_r, says)]}
        rewrite = {"r_from_forward": wrong_r}
        if not bool(torch.isfinite(saved).all()):      # NaN in r: every NaN of dx and dg comes from it
            rewrite.update({k: wrong_r for k in ("masked_nan", "old_memory_nan", "padding_nan")})
    no_r = no_r_saved(outcome, task, x, story)
    # NaN from a masked load without other=, when the kernels made one (the forward's, in an autograd task, reach
    # the backward through r); else old memory, for dg
    nan_cause = "masked_nan" if undefined_lanes(outcome, task, "bwd") or undefined_lanes(outcome, task, "fwd") \
        else None
    read = traffic(outcome, task, "bwd", x, dy)
    if kind_of(task) == "ag":
        read = through_the_function(outcome, task, read)
    for key, grads, says in diagnose.read_instead(read, x, g, dy, r_used):   # from the tensors the kernels read instead
        extra = {n: [*extra.get(n, []), (key, grads[i], says)] for i, n in enumerate(("dx", "dg"))}
    for ledger, name, want, i in ((ledger_dx, "dx", dx_ref, 0), (ledger_dg, "dg", dg_ref, 1)):
        if name not in names:
            continue
        choices = causes.Later(lambda i=i, name=name: causes.pick(alts(), i) + extra.get(name, []) +
                               ([causes.dg_rows(x, dy, r_used)] if name == "dg" else []))
        f = output(ledger, outcome, task, name, x, want, story, choices, fmt=fmt, rewrite=rewrite, nan_cause=nan_cause,
                   read=read)
        if f is not None and f.cause == "masked_nan":
            nan_cause = "masked_nan"                       # dg's NaN then comes from the same loads
        if f is not None and f.cause in ("rows_not_stored_bwd", "elements_not_stored_bwd"):
            rewrite = {**rewrite, **{k: f for k in (*causes.CAUSES, None)}}   # rows the backward skipped: dg lacks them
        if no_r and f is not None and f.cause is None:
            ledger.findings[ledger.findings.index(f)] = no_r
        elif f is not None and f.cause in (None, "formula_bwd", "held_in_16_bits_bwd") and kind_of(task) == "ag" and \
                "x" in (outcome.info.get(task, {}).get("inputs_modified") or []):
            # the forward wrote into x, and the backward read the x it saved: that write's mistake (4.6's)
            ledger.findings[ledger.findings.index(f)] = dataclasses.replace(
                f, message=f"{f.message}. Your forward wrote into x, and the backward computed {name} from the x it "
                           f"saved, changed: keep y in a tensor of its own (torch.empty_like(x))",
                cause="input_modified")


GRAD_OF = {"x": "dx", "g": "dg"}      # the gradient an autograd step gives each input that requires grad
BOTH = tuple(GRAD_OF)                   # the inputs that require grad in every step but 4.6's own cases


def needs_input_grad(outcome, task, requires_grad, story) -> Finding | None:
    """What is wrong with the gradients of a step where not every input requires grad, before their values: a
    gradient asked for that came back None although the step with both inputs requiring grad gets it (a backward
    that reads ctx.needs_input_grad at the other input's index), or a gradient set for an input that asked for
    none. None when each came back as asked (a gradient missing everywhere is output()'s to name)."""
    info = outcome.info.get(task, {})
    for i, (leaf, grad) in enumerate(GRAD_OF.items()):
        returned = got(outcome, task, grad) is not None
        if leaf not in requires_grad and returned:
            return Finding(grad, f"{leaf}.grad is set after y.backward(dy) for {story}, though {leaf} does not require "
                                 f"grad: autograd gives a gradient only to the inputs that require one, so leave "
                                 f"{leaf}.grad alone and return None for {leaf} (ctx.needs_input_grad[{i}] is False)",
                           "needs_input_grad")
        if leaf in requires_grad and not returned and (info.get("not_tensors") or {}).get(grad) == "NoneType" and \
                got(outcome, task_name("ag", "d"), grad) is not None:
            return Finding(grad, f"{leaf}.grad is None after y.backward(dy) for {story}, though it is set when x and g "
                                 f"both require grad: your TritonRMSNorm.backward returned None for {leaf} while "
                                 f"ctx.needs_input_grad[{i}] is True. ctx.needs_input_grad has one flag per input of "
                                 f"forward(ctx, x, g, eps), in that order: [0] is x's, [1] is g's, [2] is eps's. "
                                 f"Return {grad} where [{i}] is True (or return dx and dg always: autograd drops the "
                                 f"gradient of an input that does not require grad)", "needs_input_grad")
    return None


def _wrong_saved_r(outcome, task, x, g, eps, r_ref, story, fmt) -> Finding | None:
    """What is wrong with the r an autograd task's forward saved for the backward, or None: a finding of r
    against the reference, or, when it is within r's tolerance but near a known wrong formula, that cause
    (it can still show in dx, at N = 1 say)."""
    saved = _saved_r(outcome, task)
    if saved is None or saved.numel() != r_ref.numel():
        return None
    f = diagnose.saved_r_finding(saved, r_ref, x, g, eps, story=story, stored=got(outcome, task, "r_saved", "stored"),
                                 traffic=traffic(outcome, task, "fwd", x), fmt=fmt)
    f = the_rules_values(outcome, f, "fwd")
    if f is not None and f.cause is None:
        f = dataclasses.replace(f, cause=FORMULA["r"])     # the forward's formula, as output() names a wrong r
    return f


def _saved_r(outcome, task):
    """The r an autograd task's forward saved; from the run whose masked-off lanes read 0.0 when that run was
    made and this one's r has NaN (so a dx is judged against the r its forward computes, not against the
    NaN the simulator put in undefined lanes, which is charged once, on its own)."""
    saved, if_zero = got(outcome, task, "r_saved"), got(outcome, task, "r_saved", "if_zero")
    if saved is not None and if_zero is not None and not bool(torch.isfinite(saved).all()):
        return if_zero
    return saved


def _adds_into_scratch(outcome, task) -> bool:
    """Does a kernel of the task's backward load and store the same scratch buffer (adding into it)? Then NaN
    in dg may be old data of a buffer that was not zeroed."""
    launches = outcome.info.get(task, {}).get("bwd", {}).get("launches", [])
    return any(a["loaded"] and a["stored"] for _, _, a in others(launches, IO_ROLES))


def no_r_saved(outcome, task, x, story, error="") -> Finding | None:
    """In an autograd task whose Function saved no (M,) fp32 tensor: the likely cause of a wrong gradient
    (or of ``error``, raised by the backward)."""
    info = outcome.info.get(task, {})
    saved = info.get("saved")
    if kind_of(task) != "ag" or saved is None or info.get("saved_r"):
        return None
    rows = x.numel() // max(1, x.shape[-1])
    shapes = ", ".join(f"{tuple(s)} {text.dtype_name(d)}" for s, d in saved) or "nothing"
    then = f" Your backward then failed: {error}" if error else ""
    return Finding("dx", f"your TritonRMSNorm.forward saved {shapes} for {story}, and the backward needs r: "
                         f"({rows},) fp32, one reciprocal RMS per row, from rmsnorm_forward. Save it: "
                         f"ctx.save_for_backward(x, g, r).{then}", "no_r_saved")


def _r_saved_shaped(saved, x) -> tuple | None:
    """The shape of an fp32 tensor the Function saved that holds one value per row in another shape than (M,)
    (x's leading dimensions, say), or None."""
    rows = x.numel() // max(1, x.shape[-1]) if x.dim() else 0
    for shape, dtype in saved or []:
        if dtype == "float32" and math.prod(int(s) for s in shape) == rows and tuple(shape) != (rows,) and \
                len(shape) != x.dim():
            return tuple(shape)
    return None


def backward_failure(outcome, task, x, story) -> Finding | None:
    """The error of an autograd task whose forward ran and whose backward raised: named no_r_saved when
    the forward saved no r and the backward fails on the core input too (the likely cause), else as it is,
    the crash first, in the part whose input it is; None for any other task."""
    err = outcome.task_error(task)
    if not err or outcome.info.get(task, {}).get("failed_in") != "bwd":
        return None
    made = function_output(outcome, task, story)
    if made:                                        # no y to call backward on: the Function's output, 4.6's
        return made
    cause = error_cause(outcome, task, err)
    if cause == "compile_rule":                     # a backward kernel Triton refuses
        return Finding("dx", f"your backward failed for {story}: {err}", "compile_rule")
    if text.autograd_hint(err):                     # the Function's own fault, wherever it shows: 4.6's
        return Finding("dx", f"your backward failed for {story}: {err}", "gradient_count")
    saved = outcome.info.get(task, {}).get("saved")
    too_few = diagnose.saved_too_few(None if saved is None else [(tuple(s), text.dtype_name(d)) for s, d in saved], err,
                              story)
    if too_few:                                     # what the Function saved: 4.6's too
        return Finding("dx", too_few, "saved_tensors")
    shaped = _r_saved_shaped(saved, x)
    if shaped:                                      # r of another shape than (M,): 4.6's, whatever refused it
        return Finding("dx", f"your backward failed for {story}: {err}. The cause: the r your forward saved has shape "
                             f"{shaped}; r has one fp32 value per row, shape ({x.numel() // max(1, x.shape[-1])},) "
                             f"whatever x's leading dimensions", "output_shape")
    swap = diagnose.launch_swap("bwd", launch_args(outcome, task_name("bwd", "d"), "bwd"))
    if swap:                                        # the launch's arguments out of order: a crash where shapes differ
        return Finding("dx", f"your backward failed for {story}: {err}. The cause: {swap[1]}", swap[0])
    if outcome.task_error(task_name("ag", "d")) is None:
        return Finding("dx", f"your backward failed for {story}: {err}", cause)
    said = err
    if saved and not any(outcome.task_error(task_name("bwd", k)) for k in CORE):
        # rmsnorm_backward runs where items 2 and 3 call it directly: the Function's call of it is the suspect (the
        # message says so; the charge is the error's own, by the crash rules)
        said = diagnose.called_wrong([(tuple(s), text.dtype_name(d)) for s, d in saved], err, story)
    return no_r_saved(outcome, task, x, story, err) or Finding("dx", said, cause)


def overlap_cause(outcome, task, phase, race) -> str | None:
    """The cause of a race on an output some of whose rows no program stored, in the same task: programs whose
    shares overlap where others are missing (a row index that ignores the program, say) make both, one address
    fault, charged once where rows never stored are; None for any other race. In a step that returned no such
    output (only g asks for a gradient, and dx goes to a buffer of the file's own), the same kernel's race through
    the same argument in a step that returned it tells."""
    for Lc in outcome.info[task][phase]["launches"]:
        if Lc.get("race") != race:
            continue
        for name, a in Lc["args"].items():
            if not _stored_racing(Lc, name):
                continue
            if a.get("role") in ("y", "r", "dx") and got(outcome, task, a["role"]) is not None:
                return coverage_cause(outcome, task, a["role"])
            if a.get("role") is None:
                return _overlap_elsewhere(outcome, task, phase, Lc["kernel"], name)
    return None


def _stored_racing(Lc, arg) -> bool:
    """Whether launch record ``Lc``'s race is programs storing into one element through argument ``arg``."""
    return Lc.get("race_kind") == "store" and arg in (Lc.get("race_on") or ())


def _overlap_elsewhere(outcome, task, phase, kernel, arg) -> str | None:
    """overlap_cause of ``kernel``'s store race through argument ``arg`` in another task, where that argument was
    an output the task returned."""
    for other in sorted(outcome.info):
        info = outcome.info[other]
        if other == task or not isinstance(info, dict) or not isinstance(info.get(phase), dict):
            continue
        for Lc in info[phase].get("launches", []):
            a = Lc["args"].get(arg) or {}
            if (Lc.get("kernel") == kernel and _stored_racing(Lc, arg) and a.get("role") in ("y", "r", "dx")
                    and got(outcome, other, a["role"]) is not None):
                cause = coverage_cause(outcome, other, a["role"])
                if cause:
                    return cause
    return None
