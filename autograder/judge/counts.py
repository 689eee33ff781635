"""What the simulator counted of a task's launches: the elements each buffer moved, by role.

A job reports, per launch, every argument's loads, stores and distinct elements, and the roles it
plays (x, dy, dx, g, y, r, dg); a buffer with no role is scratch (a partial dg buffer, lock words).
Every count is in elements of the role's dtype (scratch: of the case's dtype), by bytes, whatever dtype a
launch viewed the memory as (job/phases.launch_records): reading x through an int64 view moves as much of x
as reading it in fp32.
Items 5, 6 and 9 read these counts to tell a fused kernel from one that makes extra passes.
"""
from __future__ import annotations


# Buffers a backward kernel may touch besides these are its scratch: the partial dg buffer, lock words.
IO_ROLES = ("x", "dy", "dx", "g", "y", "r", "dg")


def roles_of(a) -> list:
    return a.get("roles") or ([a["role"]] if a.get("role") else [])


def by_role(launches, role, key):
    return sum(a[key] for L in launches for a in L["args"].values() if role in roles_of(a))


def others(launches, roles):
    return [(L["kernel"], name, a) for L in launches for name, a in L["args"].items()
            if not set(roles_of(a)) & set(roles)]


def io(launches, role, key):
    """(elements moved, distinct elements) of one role in the launches."""
    args = [a for L in launches for a in L["args"].values() if role in roles_of(a) and a[key]]
    return sum(a[key] for a in args), sum(a["distinct"] for a in args)


def extent(a) -> int:
    """The elements a buffer argument covers: the largest of its numel, the memory its view spans (a
    one-column view of an M x N buffer spans M·N) and the distinct elements the launch touched there."""
    return max(a["numel"], a.get("span", 0), a.get("distinct", 0))


def scratch_extents(scratch) -> dict:
    """{storage: (elements it covers, the name it was first passed as)} of scratch arguments
    ((kernel, name, counts) each): one buffer passed as several views counts once, at its largest."""
    out = {}
    for _, name, a in scratch:
        size, first = out.get(a["storage"], (0, name))
        out[a["storage"]] = (max(size, extent(a)), first)
    return out


def wrote_a_whole_output(launches, M, N, roles) -> bool:
    """Did a kernel store all M·N elements of a buffer that is none of ``roles`` (an output of its own, which
    the wrapper then replaced with one the host computed)?"""
    return any(a["stored"] and a.get("distinct", 0) >= M * N for _, _, a in others(launches, roles))


def backward_io_problems(launches, M, N, idle: bool | frozenset = False) -> list:
    """[(kind, message)] of a backward that is not fused: "repeat" when an element of x or dy is loaded twice
    or one of dx stored twice (an extra pass), "coverage" when some are never loaded or stored (a grid or mask
    that misses elements: its cause is elsewhere), "scratch" for partial buffers that move too much."""
    if not launches:
        return [("none", "your backward launched no kernel")]
    out = []
    for role, key, what in (("x", "loaded", "loaded x"), ("dy", "loaded", "loaded dy"), ("dx", "stored", "stored dx")):
        moved, distinct = io(launches, role, key)
        distinct = min(distinct, M * N)                # two launches that each read all of x read it twice
        if moved > distinct and (distinct == M * N or moved > M * N):
            out.append(("repeat", f"your backward {what} {moved / max(1, distinct):.1f} times per element; a fused "
                                  f"backward reads x and dy once and writes dx once"))
        elif distinct < M * N:
            # (some elements twice and others never, no more in all than one pass: an address that takes one
            # program's or tile's rows for another's, not a second pass)
            twice = f", some of them {moved / max(1, distinct):.1f} times" if moved > distinct else ""
            out.append(("coverage", f"your backward {what} for only {distinct} of the {M * N} elements{twice}"))
    problem = scratch_problem(launches, M, N, idle)
    if problem:
        out.append(("scratch", problem))
    return out


def scratch_problem(launches, M, N, idle: bool | frozenset = False):
    """Why a backward's dg reduction moves too much through its scratch buffers (None if it does not).

    Counts are in elements of the case's dtype, by bytes, whatever a view's dtype (phases.launch_records), and
    every scratch buffer counts, whatever its dtype: at most M·N + M + N stores (each row's contribution to dg
    written once, as the lecture's M x N buffer is, or far fewer when programs sum rows in registers), and at
    most M·N + (the partial buffers' size) + M loads (each contribution read back once, as a lock-protected
    read-modify-write does, plus one pass over the partial buffers), each with room for lock words and counters
    (integers: a few accesses per row or program, the programs counted up to one per row).

    With ``idle`` (the shapes besides the core case d), a grid of more programs than rows may also store a row of
    N zeros for each program left without rows (a persistent grid of a fixed size at a few rows); ``idle`` may be
    the set of (kernel, programs) of the grids the core cases launched, and then only a grid of that fixed size gets
    the room (one that grows with the rows, 8 programs a row say, is no persistent grid).
    """
    scratch = others(launches, IO_ROLES)
    stored = sum(a["stored"] for _, _, a in scratch)
    loaded = sum(a["loaded"] for _, _, a in scratch)
    size = sum(covered for covered, _ in scratch_extents(scratch).values())
    # memory in dx's or dg's storage past the output (dg as row 0 of its partial buffer, or copies kept there) is
    # scratch as much as a buffer of its own
    for kernel, name, a in ((L["kernel"], n, a) for L in launches for n, a in L["args"].items()):
        sizes = [{"dx": M * N, "dg": N}[r] for r in roles_of(a) if r in ("dx", "dg")]
        over = extent(a) - max(sizes, default=0)
        if sizes and over > 0 and (a["stored"] or a["loaded"]):
            stored += max(0, a["stored"] - max(sizes))
            loaded += a["loaded"]
            size += over
            scratch.append((kernel, f"{name} (past the output in its memory)", a))
    ints = sum(a["loaded"] + a["stored"] for _, _, a in scratch if "int" in a.get("dtype", "float"))
    room = min(ints, 8 * (M + min(M, sum(L["programs"] for L in launches))))
    if idle:
        programs = max((L["programs"] for L in launches if any(a["stored"] for a in L["args"].values()
                                                               if not set(roles_of(a)) & set(IO_ROLES))
                        and (idle is True or (L.get("kernel"), L["programs"]) in idle)), default=0)
        room += max(0, programs - M) * N
    detail = "; ".join(f"{name} in {k} ({a['numel']} elements): {a['stored']} stored, {a['loaded']} loaded"
                       for k, name, a in scratch)
    padded = 1 << max(0, N - 1).bit_length()        # a partial row may be stored whole, padded to its block
    pad = f" (a row padded to {padded} counts as one)" if padded > N else ""
    mn = "M·N" if padded == N else f"M·{padded}"
    if stored > M * padded + M + N + room:
        return (f"your backward stored {stored} elements into scratch buffers for x of {M}x{N} ({detail}): a fused "
                f"backward writes each row's contribution to dg at most once (at most {mn} + M + N = "
                f"{M * padded + M + N}{pad}" + (f", and {room} for lock words" if room else "") + "); another M x N "
                "buffer written by one kernel and read by the next is an extra pass over memory")
    if loaded > M * padded + size + M + room:
        return (f"your backward loaded {loaded} elements from scratch buffers for x of {M}x{N} ({detail}): a fused "
                f"backward reads each contribution to dg back at most once, plus one pass over its partial "
                f"buffers (at most {mn} + {size} + M = {M * padded + size + M}{pad}" +
                (f", and {room} for lock words" if room else "") + ")")
    return None


def order_dependence(info, raced_too: bool = True) -> str:
    """Why a run's result depends on the order programs run, as the simulator saw it ('' if it does not). With
    ``raced_too`` False (item 4.7's one point), a launch whose order dependence comes from a buffer it also races on
    (a plain load, then an atomic_xchg of the sum: a lost update) is left to the race's charge, item 8's five; item 9
    never leaves it (a race added on purpose must not buy a float sum built by atomics its extra credit)."""
    for phase in ("fwd", "bwd"):
        for L in info.get(phase, {}).get("launches", []):
            if L.get("order_dependent") and (raced_too or L.get("order_on") not in (L.get("race_on") or ())):
                return (f"in {L['kernel']}, {L['order_dependent']} makes the result depend on the order programs "
                        f"run, which changes from run to run on a GPU (the simulator shuffles it too)")
    return ""


def racing(info) -> str:
    """The first data race of a run (item 8's), '' if none: what makes its results differ from run to run when no
    atomic does."""
    return next((L["race"] for phase in ("fwd", "bwd") for L in info.get(phase, {}).get("launches", [])
                 if L.get("race")), "")
