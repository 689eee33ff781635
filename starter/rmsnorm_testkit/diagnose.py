"""Why an output is wrong: the diagnosis the public tests and the grader share.

``compare`` (rmsnorm_testkit/compare.py) says *that* an output is off, and where. ``diagnose`` says *why*,
looking for the most fundamental cause first:

1. elements no kernel stored (the simulator's log of stores, or the value a test filled the output
   with): their values are whatever the memory held, so comparing them says nothing about the math;
2. a data race in the launch that made the output (the grader records races instead of stopping);
3. a known mistake: the output matches, within the tolerance, a float64 reference computed the
   wrong way: eps left out, a mean over the block instead of N, r² for r³... (``CAUSES``);
4. NaN where the reference has none (a masked load without ``other=``), a sum kept in 16 bits;
5. otherwise the story of the elements (compare's message), with a note that says whether it looks
   like rounding (a few elements, a little off) or like the formula (many rows, far off).

Every cause has a key. The grader's rubric says which part owns each key, so that one mistake costs
points once, in that part (the handout's grading section).

About 600 lines, kept in one module: the order above is the diagnosis, and each step reads what the steps
before it found (the stores, the race, the traffic); the known mistakes themselves live in causes.py, and what
only the public tests use is at the end.
"""
from __future__ import annotations

import contextlib
import dataclasses

import torch

from .causes import (CAUSES, DEFAULT_EPS, FORMULA, Later, backward_plain, forward_alternatives,
                            cols_adjacent, forward_alternatives_plain, next_pow2, pick, rows_k_apart)
from .compare import DTYPE_NAMES, compare, describe, saved_for_backward, tolerance
from .text import PARAM_ROLES, param_role  # noqa: F401 -- the launch check's words, re-exported

@dataclasses.dataclass(frozen=True)
class Finding:
    """Why one output is wrong: ``cause`` is a key of CAUSES (None: not a known cause), ``message`` what the
    student reads, ``checked`` whether the rest of the output was verified (it matches a known wrong formula,
    or its stored elements are right), so that the mistake alone explains it."""
    output: str
    message: str
    cause: str | None = None
    checked: bool = False

    def __str__(self):
        return self.message


def _close(got64, want64, atol, rtol):
    """Element by element: within atol + rtol·|want| (NaN where want is NaN, and equal infinities, count)."""
    err = (got64 - want64).abs()
    same = (got64 == want64) | (torch.isnan(got64) & torch.isnan(want64))
    return (err <= atol + rtol * want64.abs()) | same


def _fits(got64, want64, atol, rtol):
    """Every element within atol + rtol·|want|."""
    return bool(_close(got64, want64, atol, rtol).all())


def _worst(got64, want64, atol, rtol):
    """How far the worst element is outside its tolerance (<= 1: inside)."""
    err = (got64 - want64).abs()
    err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
    return float((err / (atol + rtol * want64.abs())).max()) if err.numel() else 0.0


def _region(missing) -> str:
    """'[0:2, 4096:32768]' for the bounding box of the True elements of a 2-D mask ('[18:37]' for one column)."""
    index = missing.nonzero()
    lo, hi = index.min(0).values.tolist(), index.max(0).values.tolist()
    if missing.shape[1] == 1:
        lo, hi = lo[:1], hi[:1]
    return "[" + ", ".join(f"{a}" if a == b else f"{a}:{b + 1}" for a, b in zip(lo, hi)) + "]"


def _row_list(rows) -> str:
    """'rows 0-3, 8 and 10-11' for a sorted list of row indices."""
    runs, start = [], None
    for i, r in enumerate(rows):
        if start is None:
            start = r
        if i + 1 == len(rows) or rows[i + 1] != r + 1:
            runs.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    text = runs[0] if len(runs) == 1 else ", ".join(runs[:-1]) + " and " + runs[-1]
    return ("row " if len(rows) == 1 else "rows ") + text


def _unstored(name, got, want, stored, atol, rtol, phase):
    """(cause key, the region never written, its rows in words, whether the stored elements are right, the
    first column never written)."""
    n = 1 if got.dim() < 2 else got.shape[-1]
    missing = ~stored.reshape(-1, n).cpu()
    g2, w2 = got.reshape(-1, n), want.reshape(-1, n)
    right = bool((~missing).any()) and _fits(g2[~missing], w2[~missing], atol, rtol)
    rows = missing.all(-1)
    first = int(missing.any(0).nonzero()[0])
    # dg is one value per column, summed over x's rows: its "rows" are none of x's, so none are named
    words = _row_list(rows.nonzero().reshape(-1).tolist()) if bool(rows.any()) and name != "dg" else ""
    if name == "r" and bool(missing.all()):
        key = "r_not_stored"
    elif name == "dg":                             # one value per column, summed over the rows: item 3's
        key = "dg_not_stored"
    elif bool((missing.any(-1) == rows).all()):
        key = f"rows_not_stored_{phase}"
    elif bool(missing[:, first:].all()) and not bool(missing[:, :first].any()) and first >= 16 and \
            first & (first - 1) == 0:              # from a block boundary on: a row longer than its block
        key, words = "columns_not_stored", ""
    else:
        key, words = f"elements_not_stored_{phase}", ""
    return key, _region(missing), words, right, first


FP32_NOISE = 2.0 ** -21          # a few roundings to fp32 (its 24 bits), relative


def closest_cause(got, want, alternatives) -> str | None:
    """The alternative ``got`` is nearest to, when it is far nearer (10 times) to it than to ``want``: the
    cause of an output whose error is within the tolerance, but shows through a later step (the r a
    backward is given: 1/(sqrt(mean) + eps) differs from the right r by less than its tolerance at N = 1,
    and dx there is a small difference of large terms)."""
    g64, w64 = got.detach().cpu().double().reshape(-1), want.detach().cpu().double().reshape(-1)
    base = float((g64 - w64).abs().max())
    if not base or not bool(torch.isfinite(g64).all()):
        return None
    if bool(((g64 - w64).abs() <= FP32_NOISE * w64.abs()).all()):
        return None                     # as right as fp32 holds it: no formula can be ten times nearer and differ
    dist = {k: float((g64 - alt.reshape(-1)).abs().max()) for k, alt, _ in _alternatives(alternatives)}
    key = min(dist, key=dist.get, default=None)
    return key if key is not None and dist[key] * 10 < base else None


def _words(x, dtype=None, fmt=None) -> dict:
    """The values the causes' words name, with a default for each ({N}, {B}, {stride}...)."""
    n = x.shape[-1]
    dtype = dtype or x.dtype
    return {"N": n, "B": next_pow2(n), "eps": DEFAULT_EPS, "stride": x.stride(0) if x.dim() > 1 else n,
            "dy_stride": "N", "col_stride": x.stride(-1) if x.dim() else 1, "dy_col_stride": 1, "loads": "",
            "first": 0, "rows": "some rows", "race": "a data race",
            "dtype": DTYPE_NAMES.get(dtype, str(dtype)), **(fmt or {})}


def saved_r_finding(saved, want, x, g, eps=DEFAULT_EPS, *, story=None, stored=None, fmt=None,
                    traffic=None) -> Finding | None:
    """What is wrong with the r an autograd Function saved for its backward (``want``: the reference r), or
    None: r's own diagnosis, or, when r is within its tolerance but far nearer a known wrong formula, that
    cause (it can still show in dx: at N = 1, dx is a small difference of large terms). ``traffic``: the
    forward's traffic_cause."""
    story = story or describe(x)
    choices = Later(lambda: pick(forward_alternatives(x, g, eps), 1) + [(k, yr[1], "") for k, yr, _ in
                                                                       read_instead_fwd(traffic, x, g, eps)])
    found = diagnose("r", saved, want, x, alternatives=choices, stored=stored, story=story,
                     source=" (saved by your TritonRMSNorm.forward)", fmt=fmt,
                     traffic=traffic[:2] if traffic else None)
    if found is not None:
        return found
    key = closest_cause(saved, want, choices)
    if key is None:
        return _off_within_tolerance(saved, want, story)
    key, _, variant = key.partition("@")
    words = _words(x, fmt={"eps": eps, "variant": variant.partition("/")[0], **(fmt or {})})
    return Finding("r", f"r (saved by your TritonRMSNorm.forward) for {story} is within its tolerance, but "
                        f"{CAUSES[key].says.format(**words)}", key, True)


def _off_within_tolerance(saved, want, story) -> Finding | None:
    """A saved r within its tolerance but off by more than fp32's rounding (r kept in fewer bits, say): a finding
    of no known cause, so that a dx or dg right for that r names it; None when r is as right as fp32 holds it."""
    s64, w64 = saved.detach().cpu().double().reshape(-1), want.detach().cpu().double().reshape(-1)
    rel = (s64 - w64).abs() / w64.abs().clamp_min(1e-30)
    if not bool(torch.isfinite(s64).all()) or not bool((rel > FP32_NOISE).any()):
        return None
    i = int(rel.argmax())
    return Finding("r", f"r (saved by your TritonRMSNorm.forward) for {story} is within its tolerance, but off by "
                        f"more than fp32's rounding: r[{i}] is {float(s64[i]):.6g} where {float(w64[i]):.6g} was "
                        f"expected ({100 * float(rel[i]):.2g}% off), and the backward multiplies r up to three times. "
                        f"Compute r in fp32 from fp32 values and store it as it is (no 16-bit step, no rounding)")


def unstored_cause(name, stored) -> str | None:
    """The cause key of an output only partly written by kernels (``stored``: True where a kernel stored),
    or None when every element was."""
    if bool(stored.all()):
        return None
    phase = "fwd" if name in ("y", "r") else "bwd"
    return _unstored(name, torch.zeros(stored.shape, dtype=torch.float64), torch.zeros(stored.shape,
                                                                                       dtype=torch.float64),
                     stored, 1.0, 0.0, phase)[0]


def diagnose(name, got, want, x, *, alternatives=(), stored=None, race=None, story=None, source="",
             dtype=None, n_rows=None, fmt=None, who="your kernels", nan_cause=None, if_zero=None,
             traffic=None) -> Finding | None:
    """None if ``got`` matches ``want`` (the float64 reference) under the tolerance rule, else a Finding.

    ``alternatives``: (cause key, the output computed that wrong way) pairs, from forward_alternatives or
    backward_alternatives (or a key of your own with ``fmt["says"]``); ``stored``: a bool tensor, True
    where a kernel stored (None: unknown); ``race``: the data race of the launch that made it, if any;
    ``fmt``: values for the causes' messages ({N}, {B}, {eps}, {stride}...); ``nan_cause``: the cause of NaN
    found in an output made alongside (dg's NaN comes from dx's masked loads, not old memory, when dx has
    them too); ``if_zero``: the same output from a run whose masked-off lanes read 0.0 instead of NaN (a
    masked load without other= is then the only mistake if it is right); ``traffic``: (cause key, what it says)
    from traffic_cause, which comes before any formula: an alternative under the same key (the output computed
    from the tensors the kernels read instead) says whether it explains the output exactly. The rest is as for
    compare().
    """
    dtype = dtype or x.dtype
    story = story or describe(x)
    what = f"{name}{source}"
    phase = "fwd" if name in ("y", "r") else "bwd"
    n = x.shape[-1]
    fmt = _words(x, dtype, fmt)
    first = compare(name, got, want, x, dtype=dtype, story=story, source=source, n_rows=n_rows, hints=False)
    unstored = stored is not None and isinstance(got, torch.Tensor) and got.numel() == want.numel() and \
        stored.numel() == got.numel() and not bool(stored.all())
    if first is None and not unstored:
        return None                       # (elements never stored are named even when they happen to be right)
    if not isinstance(got, torch.Tensor) or got.numel() != want.numel():
        return Finding(name, first)
    g64 = got.detach().cpu().double().reshape(want.shape)
    w64 = want.detach().cpu().double()
    rows = n_rows if n_rows is not None else max(1, x.numel() // max(1, n))
    atol, rtol, _ = tolerance(name, dtype, want, rows)

    def said(key, evidence=True, says=None, **extra):
        key, _, variant = key.partition("@")           # "sum_stops_early@4096": the cause and its number
        variant = variant.partition("/")[0]             # ("@256/dot": one of the number's several forms)
        cause = CAUSES[key]
        values = {**fmt, "variant": variant, **extra}
        says = says or cause.says.format(**values)
        text = f"{what} differs for {story}: {says}. {_sentence(cause.fix.format(**values))}"
        return text + (f" ({_evidence(first, story)})" if evidence else "")

    # (masked lanes have their own cause; a row only partly read and partly stored is named by what was not stored)
    if traffic and first is not None and nan_cause != "masked_nan" and if_zero is None and \
            not (unstored and traffic[0].startswith("unread_")):
        key, says = traffic
        alt = next((a for k, a, _ in _alternatives(alternatives) if k == key), None)
        exact = alt is not None and _fits(g64, alt.reshape(want.shape), atol, rtol)
        return Finding(name, said(key, says=says, traffic=says), key, exact)
    if unstored:
        key, region, rows_words, right, first_col = _unstored(name, g64, w64, stored, atol, rtol, phase)
        cause, values = CAUSES[key], {**fmt, "first": first_col}
        count = int((~stored).sum())
        of = f", {rows_words} of {g64.reshape(-1, 1 if g64.dim() < 2 else n).shape[0]}" if rows_words else ""
        text = (f"{name}{region}{source} was never written by {who} for {story}: {count} of {want.numel()} "
                f"elements{of} hold whatever the memory held before, since no program stored there: "
                f"{cause.says.format(**values)}. {_sentence(cause.fix.format(**values))}")
        text += ("; the elements that were stored are right" if right else
                 "" if not bool(stored.any()) else "; the elements that were stored are wrong too")
        return Finding(name, text + _rows_apart_said(name, stored), key, right)
    if race:
        subset = _subset_rows(g64, x, alternatives, atol, rtol) if name == "dg" else None
        return Finding(name, said("race", race=race), "race", subset is not None)
    off = ~_close(g64, w64, atol, rtol) & torch.isfinite(g64)      # the evidence: finite elements that are off
    fits = [(key, _worst(g64, alt.reshape(want.shape), atol, rtol), says)
            for key, alt, says in _alternatives(alternatives)
            if bool(off.any()) and _fits(g64, alt.reshape(want.shape), atol, rtol)]
    if fits:
        key, _, says = min(fits, key=lambda f: f[1])
        if says:
            return Finding(name, f"{what} differs for {story}: {says} ({_evidence(first, story)})", key, True)
        return Finding(name, said(key), key.partition("@")[0], True)
    if name == "dg":
        subset = _subset_rows(g64, x, alternatives, atol, rtol)
        if subset:
            return Finding(name, said("dg_some_rows", rows=subset), "dg_some_rows", True)
    nan = torch.isnan(g64) & ~torch.isnan(w64)
    if bool(nan.any()):
        if _only_zero_rows(nan, x, name):
            key = "eps_forgotten" if name in ("y", "r") else "r_recomputed_without_eps"   # the backward has no eps
            return Finding(name, said(key, says="it is NaN in the rows of x that are all zeros, as the formula "
                                                "with eps left out gives there: r = 1/sqrt(mean(x²)) = 1/sqrt(0)"),
                           key)
        key = nan_cause or ("old_memory_nan" if name == "dg" and fmt.get("old_memory") else
                            "padding_nan" if name == "dg" else "masked_nan")
        if key == "masked_nan" and if_zero is not None:
            return _with_zero_lanes(name, if_zero, want, x, said, alternatives=alternatives, stored=stored,
                                    race=race, story=story, source=source, dtype=dtype, n_rows=n_rows, fmt=fmt,
                                    who=who)
        return Finding(name, said(key), key)
    # a sum of squares in 16 bits: off by less than 1% on short rows, by more on long ones (N = 65536)
    if name == "r" and dtype != torch.float32 and float(((g64 - w64).abs() / w64.abs().clamp_min(1e-30)).max()) < 0.2:
        return Finding(name, said("sum_in_16_bits"), "sum_in_16_bits")
    share = _rounded_to_16_bits(g64, w64, dtype, atol, rtol)
    if share:
        # every element within a few 16-bit roundings of the right value: the formula checked, to that precision
        return Finding(name, said(f"held_in_16_bits_{phase}", share=share), f"held_in_16_bits_{phase}", True)
    return Finding(name, first + _story_note(name, g64, w64, atol, rtol))


ROUNDED_16 = 4 * 2.0 ** -11        # four roundings to fp16's 11 significant bits, relative to the largest value


def _rows_apart_said(name, stored) -> str:
    """What to say when the elements stored are exactly the first (M−1)·k + N of the output in memory order, 1 ≤ k <
    N: the programs stored their rows k elements apart (a column stride, stride(1) = 1, passed as the row stride)."""
    if name not in ("y", "dx") or stored.dim() < 2:
        return ""
    rows = stored.reshape(-1, stored.shape[-1])
    m, n = rows.shape
    flat = rows.reshape(-1)
    count = int(flat.sum())
    if m < 2 or count == flat.numel() or not bool(flat[:count].all()):
        return ""
    k, rest = divmod(count - n, m - 1)
    if rest or not 1 <= k < n:
        return ""
    return (f". The elements stored are the first {count} of {name} in memory, as programs that step {k} element"
            f"{'s' if k > 1 else ''} from row to row store them, while {name}'s rows are {n} apart: pass the kernel "
            f"{name}'s row stride, {name}.stride(0), not its column stride, {name}.stride(1)")


def _rounded_to_16_bits(g64, w64, dtype, atol, rtol) -> str | None:
    """For fp32 inputs: the error as a share of the output's largest value ("0.03%") when many elements are off
    (a tenth or more: a few are _story_note's rounding), none by more than a few roundings to fp16 would make (a
    16-bit cast or buffer on the way); else None. A formula's mistake moves values by far more, and rounding in
    fp32 by far less."""
    if dtype != torch.float32 or not bool(torch.isfinite(g64).all()) or g64.numel() < 2:
        return None
    scale = float(w64.abs().max())
    err = (g64 - w64).abs()
    off = err > atol + rtol * w64.abs()
    if scale == 0 or float(off.double().mean()) < 0.1 or float(err.max()) > ROUNDED_16 * scale:
        return None
    return f"{100 * float(err.max()) / scale:.2g}%"


def swapped_argument(args) -> tuple | None:
    """(kernel, parameter, the role it is named for, the role of the tensor it got, the parameter named for that
    role which got the first's tensor, or None) of the first parameter named for one role that gets another role's
    tensor; None when there is none."""
    for kernel, param, roles, *_ in args:
        named = param_role(param)
        if named and roles and named not in roles and set(roles) <= set(PARAM_ROLES.values()):
            passed = roles[0]
            back = next((p for k, p, rs, *_ in args if k == kernel and param_role(p) == passed and named in rs), None)
            return kernel, param, named, passed, back
    return None


def handed_by_the_function(swap, mapping) -> tuple:
    """traffic_cause's finding for an autograd step whose backward gets one tensor for another (``swap``, from
    swapped_argument) where rmsnorm_backward itself passes each where it belongs: the autograd Function handed
    rmsnorm_backward the wrong tensor (what it saved, or the order it unpacked ctx.saved_tensors in)."""
    kernel, param, named, passed, _ = swap
    return ("saved_tensor_swapped", f"your backward (TritonRMSNorm.backward) passes {passed} as {kernel}'s {param}, "
                                    f"where rmsnorm_backward called directly passes {named}: the Function hands "
                                    f"rmsnorm_backward {passed} in place of {named}, so what it saved or the order it "
                                    f"unpacked ctx.saved_tensors in is off", mapping)


def launch_swap(phase: str, args) -> tuple | None:
    """traffic_cause's first kind alone: a parameter named for one role that gets another role's tensor."""
    swap = swapped_argument(args)
    if swap is None:
        return None
    kernel, param, named, passed, back = swap
    which = "backward" if phase == "bwd" else "forward"
    also = f", and {named} as {back}" if back else ""
    return (f"wrong_tensor_{phase}", f"your {which} passes {passed} as {kernel}'s {param}{also}: the launch's "
            f"arguments are not in the order of the kernel's parameters",
            {named: passed, passed: named} if back else {named: passed})


def traffic_cause(phase: str, args, M: int, N: int, strides: dict | None = None) -> tuple | None:
    """(cause key, what it says, {role: the role whose tensor stood in for it}) when a phase's kernels read
    another tensor than the one they need, else None. Only a simulator knows this: which tensor each
    argument of each launch was, and how much was loaded through it. ``phase``: "fwd" or "bwd"; ``args``:
    (kernel, parameter, roles of the tensor passed, elements loaded through it) of every tensor argument of
    the phase's launches, and optionally the distinct elements loaded through it. Three kinds: a parameter
    named for one role that gets another's tensor (the launch's arguments in another order than the kernel's
    parameters); a tensor the phase needs that no kernel loads while another is loaded twice as much (a tl.load
    with the wrong pointer); and a tensor the phase needs of which fewer distinct elements were loaded than it
    has (a row stride or offsets that miss part of each row), although every element enters every result of
    its row. Nothing is said of the last two when an argument with the role "copy" was read: the caller's
    word for a tensor that may be a copy the host made of the missing one (x.contiguous()), which only the
    grader can tell apart. ``strides`` ({role: the tensor's strides}, where known) tells a row stride passed
    wrong from columns that are not adjacent, which the kernels read as if they were."""
    key, which = f"wrong_tensor_{phase}", "backward" if phase == "bwd" else "forward"
    swap = launch_swap(phase, args)
    if swap:
        return swap
    loaded, distinct = {}, {}
    for a in args:
        for role in a[2]:
            loaded[role] = loaded.get(role, 0) + a[3]
            if len(a) > 4 and a[4] is not None:
                distinct[role] = distinct.get(role, 0) + a[4]
    if any(a[2] == ["copy"] and a[3] for a in args):
        return None                 # what may be a copy of x or dy (x.contiguous()) was read
    for role in ("x", "dy") if phase == "bwd" else ("x",):
        if loaded.get(role, 0) == 0:
            other = next((o for o in ("x", "dy") if o != role and loaded.get(o, 0) >= 1.5 * M * N), None)
            if other:
                return (key, f"your {which}'s kernels never load {role} and load {other} "
                             f"{loaded[other] / max(1, M * N):.1f} times per element: a tl.load reads "
                             f"{other}'s pointer where {role}'s is meant", {role: other})
            return key, f"your {which}'s kernels never load {role}", {}
    return _unread(phase, loaded, distinct, M, N, strides or {})


def _unread(phase, loaded, distinct, M, N, strides) -> tuple | None:
    """traffic_cause's third kind: fewer distinct elements of a needed tensor loaded than it has (the sum over
    launches bounds the elements loaded at all from above, so this is proof)."""
    which = "backward" if phase == "bwd" else "forward"
    for role, size in (("x", M * N), ("dy", M * N), ("g", N)) if phase == "bwd" else (("x", M * N), ("g", N)):
        if role not in distinct or not loaded.get(role) or distinct[role] >= size:
            continue
        seen = distinct[role]
        step = (seen - N) // (M - 1) if M > 1 and (seen - N) % (M - 1) == 0 else None
        stepped = loaded[role] == size and role != "g" and step is not None and 0 <= step < N
        row_stride, col_stride = (tuple(strides.get(role) or ()) + (None, None))[:2]
        if stepped and col_stride not in (None, 1) and step == row_stride:
            return _cols_adjacent(phase, role, seen, size, col_stride)
        how = ("the loads stop before the end of each row, or skip parts of it" if loaded[role] < size or role == "g"
               else f"each of them {loaded[role] / seen:.1f} times on average: the rows your loads read overlap"
               + (f", {step} element{'s' if step != 1 else ''} apart ({role}.stride(1) passed as the row stride, "
                  f"where {role}.stride(0) is meant?)" if stepped else f": check the row stride passed for {role}"))
        return (f"unread_{phase}", f"your {which}'s kernels load only {seen} of the {size} elements of {role}, "
                                   f"{how}", {role: ("rows", step)} if stepped else {})
    return None


def _cols_adjacent(phase, role, seen, size, col_stride) -> tuple:
    """traffic_cause's finding for a tensor whose columns are ``col_stride`` apart, read as if adjacent."""
    which = "backward" if phase == "bwd" else "forward"
    return (f"{role}_cols_adjacent", f"your {which}'s kernels load only {seen} of the {size} elements of {role}: "
                                     f"{role}'s columns are {col_stride} elements apart ({role}.stride(-1) = "
                                     f"{col_stride}), and your kernels step by 1 from column to column. "
            + _sentence(CAUSES[f"{role}_cols_adjacent"].fix),
            {role: ("cols",)})


def read_instead(read, x, g, dy, r) -> list:
    """[(cause key, (dx, dg), what it says)]: the gradients computed from the tensors the kernels read instead,
    when traffic_cause named them (dy where x is meant, say); diagnose then knows whether they explain the output
    exactly. [] when it named none."""
    sub = _read(read, {"x": x, "dy": dy})
    return [(read[0], backward_plain(sub["x"], g, sub["dy"], r), read[1])] if sub else []


def read_instead_fwd(read, x, g, eps=DEFAULT_EPS) -> list:
    """read_instead for the forward: [(cause key, (y, r), what it says)]."""
    sub = _read(read, {"x": x})
    return [(read[0], forward_alternatives_plain(sub["x"], g, eps), read[1])] if sub else []


def _read(read, given: dict) -> dict | None:
    """{role: the tensor the kernels read as it} from traffic_cause's mapping, when every role it names is
    given: another role's tensor, or ("rows", k), the role's own memory with rows k elements apart."""
    if not read or not read[2]:
        return None
    sub = dict(given)
    for role, instead in read[2].items():
        if role not in given:
            return None
        if instead == ("cols",):
            sub[role] = cols_adjacent(given[role])
        elif isinstance(instead, tuple):
            sub[role] = rows_k_apart(given[role], instead[1])
        elif instead in given:
            sub[role] = given[instead]
        else:
            return None
    return None if any(t is None for t in sub.values()) else sub


def _with_zero_lanes(name, if_zero, want, x, said, **kw) -> Finding:
    """The finding of an output with NaN from masked loads without other=, given ``if_zero``, the same output
    with those lanes read as 0.0: the rule alone when that is right; else what is wrong with it then (a known
    formula, say, or one no cause explains: then the lanes cannot be what made it wrong, and it is charged where it
    is found, as the same values without NaN would be), which is the mistake to charge, with the lanes named after
    it."""
    again = diagnose(name, if_zero, want, x, **kw)
    if again is None:
        return Finding(name, said("lanes_undefined"), "lanes_undefined", True)
    lanes = CAUSES["masked_nan"].fix.format(**kw["fmt"])
    return dataclasses.replace(again, message=f"{again.message}. Also, {lanes}")


def _only_zero_rows(nan, x, name) -> bool:
    """Are the NaN elements of a y or dx exactly in the rows of x that are all zeros (r = 1/sqrt(0))?"""
    if name not in ("y", "dx", "r") or x.numel() == 0:
        return False
    zero = (x.detach().reshape(-1, x.shape[-1]) == 0).all(-1).cpu()
    rows = nan.reshape(zero.shape[0], -1).any(-1)
    return bool(zero.any()) and bool(rows.any()) and bool((rows & ~zero).sum() == 0)


def _alternatives(alternatives):
    """(key, tensor, own words or "") for each alternative, whichever way it was given."""
    for a in alternatives:
        if not a[0].startswith("_"):                      # "_dg_rows" is data for _subset_rows, not an output
            yield (a[0], a[1], a[2] if len(a) > 2 else "")


def _sentence(text) -> str:
    return text[:1].upper() + text[1:]


def _evidence(message, story) -> str:
    """The part of compare's message that says how many elements are off and the worst of them."""
    return message.split(f" for {story}: ", 1)[-1]


def _story_note(name, g64, w64, atol, rtol) -> str:
    """Rounding, or the formula? Said only when the elements say which."""
    err = (g64 - w64).abs()
    bound = atol + rtol * w64.abs()
    bad = err > bound
    worst = float((err / bound).max())
    count, total = int(bad.sum()), bad.numel()
    if worst < 10 and count <= max(1, total // 100):
        return (f". Only {count} of {total} elements are off, by at most {worst:.1f} times their tolerance: that "
                f"looks like rounding rather than a formula. Keep every sum in fp32 (convert loaded values with "
                f".to(tl.float32) before multiplying), sum each row once with tl.sum, and multiply by r rather "
                f"than divide by its reciprocal")
    rows_off = bad.reshape(bad.shape[0], -1).any(-1) if bad.dim() > 1 else bad
    if name in FORMULA and (bad.dim() < 2 or float(rows_off.double().mean()) > 0.5):
        return f". Most rows are off, by far: check the formula, {FORMULA[name]}"
    return ""


def _subset_rows(g64, x, alternatives, atol, rtol):
    """'rows 0-31' if dg is the sum of the right contributions over only some rows (a contiguous run, or any
    subset when there are no more rows than columns), else None."""
    contrib = dict((a[0], a[1]) for a in alternatives).get("_dg_rows")
    if contrib is None or not bool(torch.isfinite(g64).all()):
        return None
    m = contrib.shape[0]
    if _fits(g64, torch.zeros_like(g64), atol, rtol):
        return "none of the rows (dg is 0)"
    prefix = torch.cat([torch.zeros(1, contrib.shape[1], dtype=contrib.dtype), contrib.cumsum(0)])
    for length in range(m - 1, 0, -1):                  # the longest run first
        sums = prefix[length:] - prefix[:-length]           # (m - length + 1, N): every run of this length
        ok = ((sums - g64).abs() <= atol + rtol * sums.abs()).all(-1)
        if bool(ok.any()):
            start = int(ok.nonzero()[0])
            return _row_list(list(range(start, start + length)))
    if m <= contrib.shape[1] and bool(torch.isfinite(g64).all()):
        coef = torch.linalg.lstsq(contrib.T, g64.reshape(-1, 1)).solution.reshape(-1)
        pick = coef.round().clamp(0, 1)
        if bool((pick == 0).any()) and bool((pick > 0).any()) and _fits(g64, (contrib * pick[:, None]).sum(0),
                                                                         atol, rtol):
            return _row_list(pick.nonzero().reshape(-1).tolist())
    return None


# -- for the public tests --------------------------------------------------------------------------------------

def diagnose_all(checks) -> Finding | None:
    """The first finding of several outputs, ``checks`` = [(name, got, want, x, diagnose's keywords)], in
    order, except that an output with elements no kernel stored comes before any value comparison: the
    outputs computed from those elements are wrong because of them."""
    def missing(check):
        stored = check[4].get("stored")
        return stored is not None and not bool(stored.all())
    # y before r among those: its pattern of missing rows and columns says more (a grid that ran no program)
    for name, got, want, x, kw in sorted(checks, key=lambda c: (not missing(c), missing(c) and c[0] == "r")):
        found = diagnose(name, got, want, x, **kw)
        if found is not None:
            return found
    return None


def fail_if(finding: Finding | None):
    """Raise the finding's message, the diagnosis in a student's terms, as the test's failure."""
    __tracebackhide__ = True                    # pytest: the failure shows at the test's line
    if finding is not None:
        raise AssertionError(finding.message)


@contextlib.contextmanager
def strides_named(x, dy=None):
    """An out-of-bounds access on an input whose rows are not N apart (a strided view, or x and dy with
    different strides) most likely stepped by the wrong row stride: the error says so."""
    try:
        yield
    except Exception as e:
        n = x.shape[-1]
        strides = {"x": x.stride(0) if x.dim() > 1 else n, **({"dy": dy.stride(0)} if dy is not None else {})}
        if type(e).__name__ != "OutOfBoundsError" or all(s == n for s in strides.values()):
            raise
        said = ", ".join(f"{k}'s rows are {s} elements apart" for k, s in strides.items())
        raise AssertionError(f"{e}\nIn this test {said}, and the outputs' rows are {n} apart (they are "
                             f"contiguous): step through each tensor with its own row stride (x_row_stride, "
                             f"dy_row_stride, y_row_stride), never with another tensor's or with n_cols") from e


def simulated(impl) -> bool:
    """Does ``impl`` (a loaded rmsnorm.py) run on mini_triton, which can say what its kernels stored?"""
    return getattr(getattr(impl, "triton", None), "__name__", "") == "mini_triton"


class KernelLog:
    """What the kernels did inside a ``with KernelLog(impl) as log:`` block, on the simulator (elsewhere it
    knows nothing): which elements of an output they stored, whether a launch's result depends on the
    order its programs run, where a masked load left lanes undefined. Memory from torch.empty holds NaN
    inside the block, as it holds old data on a GPU."""

    def __init__(self, impl, host_ops=True):
        self.impl, self.host_ops, self.rec = impl, host_ops, None

    def __enter__(self):
        if simulated(self.impl):
            self._cm = self.impl.triton.record(host_ops=self.host_ops, poison=self.host_ops)
            self.rec = self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc) if self.rec is not None else None

    def stored(self, t):
        """True where the block's kernels wrote ``t`` (None off the simulator, or for what is not a tensor)."""
        if self.rec is None or not isinstance(t, torch.Tensor):
            return None
        import mini_triton                     # a recording exists on the simulator only
        with mini_triton.unrecorded():         # reading the mask is the checker's work, not the program's
            mask = self.rec.stored_mask(t).clone()
        storage = t.untyped_storage().data_ptr()
        if not bool(mask.any()) and any(storage in op.out_storages and op.reads for op in self.rec.host_ops or ()):
            return None                  # the host made it (from a buffer a kernel stored, say): not "never written"
        return mask

    def order_dependent(self) -> str | None:
        return next((L.order_dependent for L in self.rec.launches if L.order_dependent), None) if self.rec else None

    def undefined_lanes(self) -> str | None:
        return next((L.undefined_lanes for L in self.rec.launches if L.undefined_lanes), None) if self.rec else None

    def traffic(self, phase: str, tensors: dict, x) -> tuple | None:
        """traffic_cause of the block's launches (None off the simulator): ``tensors`` ({role: tensor}, the
        tensors as the kernels were given them) says which memory is which."""
        args = self.args(tensors, x)
        if args is None:
            return None
        N = x.shape[-1] if x.dim() else 1
        strides = {role: t.stride() for role, t in tensors.items() if isinstance(t, torch.Tensor) and t.dim() == 2}
        return traffic_cause(phase, args, x.numel() // max(1, N), N, strides) if args else None

    def args(self, tensors: dict, x) -> list | None:
        """traffic_cause's (kernel, parameter, roles, elements loaded, distinct elements loaded) of every tensor
        argument of the block's launches (None off the simulator); ``tensors`` as for :meth:`traffic`."""
        if self.rec is None:
            return None
        roles = {}
        for role, t in tensors.items():
            if isinstance(t, torch.Tensor):
                roles.setdefault(t.untyped_storage().data_ptr(), []).append(role)
        copy = lambda a: ["copy"] if a.numel == x.numel() else []       # noqa: E731 -- x-sized, unknown: maybe a copy
        return [(L.kernel, name, roles.get(a.storage) or copy(a), a.loaded, a.distinct_loaded)
                for L in self.rec.launches for name, a in L.args.items()]

    def nan_source(self) -> tuple:
        """(nan_cause, fmt) for diagnose: NaN from masked tl.loads without other=, and the first such load's line,
        when the kernels made one; else (None, {})."""
        loads = self.undefined_lanes()
        return ("masked_nan", {"loads": f" (the first: {loads})"}) if loads else (None, {})

    def adds_into_scratch(self, outputs) -> bool:
        """Does a kernel load and store one buffer that is none of ``outputs`` and no input (a partial buffer
        it adds into)?"""
        if self.rec is None:
            return False
        known = {t.untyped_storage().data_ptr() for t in outputs if isinstance(t, torch.Tensor)}
        return any(a.loaded and a.stored and a.storage not in known for L in self.rec.launches
                   for a in L.args.values())


def saved_r(y, rows):
    """(the fp32 tensor of one value per row that y's autograd Function saved for its backward, or None;
    the shapes and dtypes of everything it saved, or None when y has no custom Function behind it)."""
    r, tensors = saved_for_backward(y, rows)
    if tensors is None:
        return None, None
    return r, [(tuple(t.shape), DTYPE_NAMES.get(t.dtype, str(t.dtype))) for t in tensors]


def saved_too_few(kinds, error: str, story) -> str:
    """The message for a backward that unpacks more saved tensors than the Function saved ('' when ``error`` is
    no such unpacking): ctx.save_for_backward called twice keeps only the second call's tensors."""
    if kinds is None or "values to unpack" not in error or len(kinds) >= 3:
        return ""
    shapes = ", ".join(f"{s} {d}" for s, d in kinds) or "nothing"
    return (f"your TritonRMSNorm.forward saved only {shapes} for {story} ({len(kinds)} of the 3 tensors x, g, r), "
            f"and the backward unpacks more ({error}): ctx.save_for_backward keeps the tensors of its last call "
            f"only, so save them all in one call, ctx.save_for_backward(x, g, r)")


def called_wrong(kinds, error: str, story) -> str:
    """The message for an autograd step whose backward raised where rmsnorm_backward itself, called directly, runs:
    the Function's call of it is at fault (the saved tensors unpacked in another order than they were saved, or
    passed in another order than rmsnorm_backward's parameters)."""
    shapes = ", ".join(f"{s} {d}" for s, d in kinds or []) or "nothing"
    return (f"y.backward(dy) failed for {story} ({error}), but rmsnorm_backward runs when called directly: look at how "
            f"TritonRMSNorm.backward calls it. Your forward saved {shapes}, in that order: unpack ctx.saved_tensors "
            f"in the order ctx.save_for_backward was given them, and pass them in rmsnorm_backward's order "
            f"(dy, x, g, r)")


def no_r_saved(kinds, rows, story) -> str:
    """The message for an autograd Function that saved no r."""
    shapes = ", ".join(f"{s} {d}" for s, d in kinds) or "nothing"
    return (f"your TritonRMSNorm.forward saved {shapes} for {story}, and the backward needs r: ({rows},) fp32, "
            f"one reciprocal RMS per row, from rmsnorm_forward. Save it: ctx.save_for_backward(x, g, r)")
