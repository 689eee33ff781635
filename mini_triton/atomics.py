"""Atomics and locks: read-modify-write that other programs cannot interleave with.

``tl.atomic_add(ptr, v)`` reads an element, adds and writes it back in one step that no other
program can split: many programs may add into one element and none of their additions is lost.
The simulator applies a chunk's atomics lane by lane in program order (each lane sees the value
the lanes before it left), and hands every lane the value it saw. memory.atomic prepares the
access (bounds, mask, undo log, records); :func:`apply` does what the atomic does to memory.

The order matters for floats: a float sum depends on the order of its terms, and programs arrive
in no fixed order. A float ``atomic_add`` therefore marks its launch order-dependent (a warning,
once; the launcher then runs the launch in a shuffled order) and adds in a shuffled order itself.
So does an ``atomic_xchg`` of different values into one element: the last to arrive wins.

A *lock* is an integer word: a program that wins ``tl.atomic_cas(lock, 0, 1)`` (the old value
equals ``cmp`` and the new one differs) holds it until it writes the word again (an atomic_xchg,
an atomic_cas or a plain store). The chunk keeps which lock each program holds (runtime.Chunk),
every access notes it (races.py exempts accesses two programs made under one lock), and taking
one marks the launch order-dependent too: whoever takes the lock first goes first.
"""
from __future__ import annotations

import warnings

import torch

from . import runtime
from .errors import OrderDependenceWarning

OPS = {
    "add": lambda old, v: old + v,
    "max": torch.maximum,
    "min": torch.minimum,
    "xchg": lambda old, v: v,
    "and": torch.bitwise_and,
    "or": torch.bitwise_or,
    "xor": torch.bitwise_xor,
}


def check_type(op: str, elem):
    """Bitwise atomics need integers."""
    if op in ("and", "or", "xor") and not elem.is_int():
        raise TypeError(f"{runtime.location()}: atomic_{op} needs an integer tensor, got {elem!r}")


# torch has few ops for unsigned words (no index_put for uint32): their atomics run on the same bits read as signed
# words, which add, exchange, compare and combine bitwise alike; max and min compare them with the top bit flipped
SIGNED = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def apply(ch, acc, op, a, v, cmp, pids=None):
    """Apply ``op`` to the elements ``a`` of ``acc``'s buffer, one active lane each (``v``: the operands,
    ``cmp``: atomic_cas's comparands, ``pids``: each lane's program); returns the value each lane saw before its
    update."""
    flat = acc.buf.flat
    signed = SIGNED.get(flat.dtype)
    if signed is None:
        return _apply(ch, acc, op, flat, a, v, cmp, pids)
    flat, v = flat.view(signed), v.contiguous().view(signed)
    cmp = None if cmp is None else cmp.contiguous().view(signed)
    if op not in ("max", "min"):
        return _apply(ch, acc, op, flat, a, v, cmp, pids).view(acc.buf.flat.dtype)
    top = torch.iinfo(signed).min                   # unsigned order is signed order with the top bit flipped
    touched = torch.unique(a)
    flat[touched] ^= top
    try:
        return (_apply(ch, acc, op, flat, a, v ^ top, cmp, pids) ^ top).view(acc.buf.flat.dtype)
    finally:
        flat[touched] ^= top


def _apply(ch, acc, op, flat, a, v, cmp, pids):
    if op == "xchg" and (_different_values_at_one_address(a, v) or _exchanged_by_another(ch, acc, a, v, pids)):
        order_dependent(ch, f"tl.atomic_xchg of different values into one element of {acc.buf.describe()} at "
                            f"{acc.line}", acc)
    if op == "add" and acc.buf.elem.is_floating():
        if _shared_address(a) or _added_by_another(ch, acc, a, pids):
            order_dependent(ch, f"tl.atomic_add on {acc.buf.describe()} at {acc.line}", acc)
        perm = runtime.schedule(torch.arange(a.numel()))        # the lanes arrive in any order
        old = torch.empty_like(v)
        old[perm] = in_order(op, flat, a[perm], v[perm], None)
        return old
    return in_order(op, flat, a, v, cmp)


def _different_values_at_one_address(a, v) -> bool:
    """Do two lanes exchange different values into one element? Then the one that arrives last wins: the element
    keeps whichever value the order of arrival gives (a program's read, atomic or not, before another's xchg
    is the same race)."""
    if a.numel() < 2:
        return False
    order = torch.argsort(a, stable=True)
    sa, sv = a[order], v[order]
    return bool(((sa[1:] == sa[:-1]) & (sv[1:] != sv[:-1])).any())


def _exchanged_by_another(ch, acc, a, v, pids) -> bool:
    """Did another program of the launch exchange a different value into one of these elements, in an earlier
    chunk? (Programs the simulator runs one after another run at once on a GPU: whichever arrives last wins.)"""
    if pids is None or a.numel() == 0:
        return False
    key = acc.buf.storage_key
    n = acc.buf.flat.numel()
    values, owners = ch.launch.exchanged.setdefault(key, (torch.zeros(n, dtype=v.dtype), torch.full((n,), -1)))
    before, by = values[a], owners[a]
    other = (by >= 0) & (by != pids) & (before != v)
    values[a], owners[a] = v, pids
    return bool(other.any())


def _shared_address(a) -> bool:
    """Do two lanes add into one element (their order of arrival then fixes the float sum's last bits)?"""
    return a.numel() > 1 and torch.unique(a).numel() < a.numel()


def _added_by_another(ch, acc, a, pids) -> bool:
    """Did another program of the launch add into one of these elements, in an earlier chunk? One program's adds
    into elements no other program touches (its own row of partial sums) arrive in its own order: deterministic."""
    if pids is None or a.numel() == 0:
        return True                          # whose lanes these are is unknown: assume the worst, as before
    owners = ch.launch.added.setdefault(acc.buf.storage_key, torch.full((acc.buf.flat.numel(),), -1))
    by = owners[a]
    other = (by >= 0) & (by != pids)
    owners[a] = pids
    return bool(other.any())


def in_order(op, flat, a, v, cmp):
    """Apply in lane order; returns the value each lane saw before its update."""
    if a.numel() == 0:
        return flat[a]
    uniq = torch.unique(a).numel() == a.numel()
    if op == "add" and not uniq:
        return _add_repeated(flat, a, v)
    if uniq:
        old = flat[a].clone()
        if op == "cas":
            flat[a] = torch.where(old == cmp, v, old)
        else:
            flat[a] = OPS[op](old, v).to(flat.dtype)
        return old
    old = torch.empty_like(v)
    rank = _rank_at_address(a)
    for k in range(int(rank.max()) + 1):            # the k-th lane of every element at once
        sel = (rank == k).nonzero().reshape(-1)
        ak = a[sel]
        o = flat[ak].clone()
        old[sel] = o
        flat[ak] = torch.where(o == cmp[sel], v[sel], o) if op == "cas" else OPS[op](o, v[sel]).to(flat.dtype)
    return old


def _rank_at_address(a):
    """For each lane, how many lanes before it (in lane order) touch the same element."""
    order = torch.sort(a, stable=True).indices
    sa = a[order]
    first = torch.ones_like(sa, dtype=torch.bool)
    first[1:] = sa[1:] != sa[:-1]
    pos = torch.arange(sa.numel())
    rank = torch.empty_like(pos)
    rank[order] = pos - torch.cummax(torch.where(first, pos, 0), 0).values
    return rank


def _add_repeated(flat, a, v):
    """atomic_add where lanes share addresses: each lane sees the sum of the lanes before it, at once."""
    order = torch.sort(a, stable=True).indices
    sa, sv = a[order], v[order].to(torch.float64 if v.is_floating_point() else torch.int64)
    csum = torch.cumsum(sv, 0)
    first = torch.ones_like(sa, dtype=torch.bool)
    first[1:] = sa[1:] != sa[:-1]
    seg_start = torch.cummax(torch.where(first, torch.arange(sa.numel()), 0), 0).values
    before = csum - sv - (csum[seg_start] - sv[seg_start])
    old_sorted = flat[sa].to(before.dtype) + before
    old = torch.empty_like(old_sorted)
    old[order] = old_sorted
    flat.index_put_((a,), v, accumulate=True)
    return old.to(flat.dtype)


def order_dependent(ch, why: str, acc, stacklevel: int = 5):
    """Mark the launch order-dependent (the launcher then shuffles it) and say so, once per launch; ``acc``, the
    access that made it so. ``stacklevel`` 5 is the kernel's line: this, apply or track_locks, memory.atomic,
    tl.atomic_*."""
    launch = ch.launch
    if launch.order_dependent is None:
        launch.order_dependent, launch.order_on = why, acc.buf.name
        warnings.warn(f"{why}: programs then add in the order they arrive, which a GPU does not fix, so a "
                      f"float sum built this way changes in its last bits from run to run (mini_triton runs such "
                      f"launches in a shuffled order to show it). For a deterministic result, give each program "
                      f"its own partial result and reduce them in a fixed order.", OrderDependenceWarning,
                      stacklevel=stacklevel)


# ---------------------------------------------------------------------------
# locks: a program that wins atomic_cas(lock, 0, 1) holds the lock until it writes it back
# ---------------------------------------------------------------------------
def lock_keys(acc, active) -> list:
    """Launch-wide lock ids of the scalar addresses each program's lane touches."""
    offs = acc.offsets().expand(acc.pids.numel()).reshape(-1)[active]
    launch = runtime.current().launch
    base = (acc.buf.storage_key, acc.buf.storage_offset)
    return [launch.lock_id((base, o)) for o in offs.tolist()]


def track_locks(ch, acc, op, old, new, cmp, active):
    """A successful cas that changes the word takes a lock; xchg or cas on a held lock releases it."""
    positions = active.nonzero().reshape(-1)
    if positions.numel() == 0:
        return
    ids = lock_keys(acc, active)
    keys = torch.tensor(ids, dtype=torch.int64)
    if ch.held() is not None:
        release(ch, acc, positions, keys)
    if op == "cas" and ch.turns is None and len(set(ids)) < len(ids):     # two programs try one lock
        note_turns(ch, positions, keys)
    if op == "cas":
        took = (old == cmp) & (new != cmp)
        if bool(took.any()):
            ch.hold(positions[took], keys[took])
            order_dependent(ch, f"a lock taken with tl.atomic_cas on {acc.buf.describe()} at {acc.line}", acc)


def note_turns(ch, positions, keys):
    """Programs of the chunk that try one lock at once get it one after another, in lane order: note each one's
    turn. If they then take different paths (the losers spin), the launcher runs them turn by turn, one chunk
    per turn, so each chunk finds its locks free (and the same program gets the lock first as lane by lane)."""
    rank = _rank_at_address(keys)
    if int(rank.max()) > 0:
        ch.turns = torch.zeros(ch.P, dtype=torch.int64)
        ch.turns[positions] = rank


def release(ch, acc, positions=None, keys=None):
    """The programs that write the word of a lock they hold let go of it (a plain store too)."""
    if positions is None:
        P = acc.pids.numel()
        active = torch.ones(P, dtype=torch.bool) if acc.mask_h is None else acc.mask_h.expand(P).reshape(-1)
        positions = active.nonzero().reshape(-1)
        if positions.numel() == 0:
            return
        keys = torch.tensor(lock_keys(acc, active), dtype=torch.int64)
    held = ch.held()
    if held is None:
        return
    mine = held[positions] == keys
    if bool(mine.any()):
        ch.hold(positions[mine], torch.full((int(mine.sum()),), -1, dtype=torch.int64))
