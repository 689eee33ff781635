"""Global memory: loads, stores and atomics, with bounds checks and access records.

A kernel argument that is a tensor becomes a :class:`Buffer`: the flat memory
its view spans, from its first element to its last. Every active lane of a
load, store or atomic must address an element of that span; anything else is
the out-of-bounds access that on a GPU silently reads garbage or corrupts a
neighbouring tensor. Masked-off lanes touch no memory and are never checked.

Each access leaves an :class:`Access` record: which programs touched which
offsets. The launcher uses the records to count traffic (stats.py) and to
find data races (races.py).
"""
from __future__ import annotations

import enum
import math
import warnings

import torch

from . import heap
from . import dtypes as D
from . import runtime
from .blocks import (Affine, as_block, broadcast_affine, broadcast_shape, cast, check_shape, full_handle, make_int,
                     offsets_of, tensor, unwrap)
from .errors import CompilationError, OrderDependenceWarning, OutOfBoundsError, format_offsets


class Buffer:
    """The memory behind one tensor argument of a launch."""

    def __init__(self, name: str, t: torch.Tensor):
        self.name = name
        self.tensor = t
        self.elem = D.from_torch(t.dtype)
        self.span = 0 if t.numel() == 0 else 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
        self.flat = t.as_strided((self.span,), (1,), t.storage_offset())
        # accesses of two arguments that share storage must be compared with each other
        self.storage_key = (t.untyped_storage().data_ptr(), t.dtype)
        self.storage_offset = t.storage_offset()
        self.tensor_element_size = t.element_size()

    def describe(self) -> str:
        return f"{self.name} ({self.elem!r}, {self.span} elements)"

    def release(self):
        """Let go of the tensor once the launch is over: access records outlive the launch (in a
        ``record()``), and a tensor the kernel wrote must not look shared to its caller (autograd
        copies a gradient it cannot take over)."""
        self.tensor = self.flat = None

    def index_of(self, offset: int) -> str:
        """Show a flat offset as an index of the argument tensor where possible."""
        t = self.tensor
        if t.is_contiguous() and t.dim() > 1:
            idx, rem = [], offset
            for n in reversed(t.shape):
                idx.append(rem % n)
                rem //= n
            return f"{self.name}[{', '.join(str(i) for i in reversed(idx))}]"
        return f"{self.name}[{offset}]"


class Kind(enum.Enum):
    """What an access does to memory. An atomic reads and writes its element in one step."""
    LOAD = "load"
    STORE = "store"
    ATOMIC = "atomic"

    def reads(self) -> bool:
        return self is not Kind.STORE

    def writes(self) -> bool:
        return self is not Kind.LOAD


class Access:
    """One load, store or atomic executed by the programs of a chunk.

    ``lo``/``hi`` (one entry per program, or one shared entry) bound the
    offsets of each program's active lanes; ``count`` is the number of
    active lanes per program; ``dense`` says each program's offsets form one
    contiguous range, so that counting distinct elements needs no scan.
    """

    __slots__ = ("kind", "op", "buf", "shape", "ptr", "mask_h", "lead", "aff", "lo", "hi", "count",
                 "dense", "pids", "line", "site", "locks", "_offs")

    def __init__(self, op: str, ptr: tensor, mask_h, shape, pids):
        self.op = op                           # "load", "store", "atomic_add", ... (for messages)
        self.kind = Kind.ATOMIC if op.startswith("atomic") else Kind(op)
        self.buf, self.shape, self.ptr, self.mask_h = ptr.buf, shape, ptr, mask_h
        self.pids = pids
        self.lead = max(ptr.lead, 1 if mask_h is None else mask_h.shape[0])
        aff = ptr.affine()
        self.aff = broadcast_affine(aff, ptr.shape, shape) if aff is not None else None
        self._offs = None
        self.line = ""
        self.site = ("", 0, "")                # (kernel function, line, file) of the access
        self.locks = None                      # per program: the lock held during the access (races.py)
        if self.aff is not None and (mask_h is None or mask_h.shape[0] == 1):
            self._analyse_affine()
        else:
            self._analyse_general()

    # -- analysis -----------------------------------------------------------
    def _analyse_affine(self):
        n = math.prod(self.shape)
        if self.mask_h is None:
            llo, lhi = self.aff.lane_range(self.shape)
            self.count = torch.tensor([n])
            self.dense = _dense_box(self.aff.strides, self.shape)
        else:
            lanes = Affine(torch.zeros(1, dtype=torch.int64), self.aff.strides).materialize(self.shape)
            active = lanes[self.mask_h.expand_as(lanes)]
            self.count = torch.tensor([active.numel()])
            if active.numel() == 0:
                llo, lhi = 0, -1
                self.dense = True
            else:
                llo, lhi = (int(v) for v in torch.aminmax(active))
                self.dense = lhi - llo + 1 == torch.unique(active).numel()
        self.lo = self.aff.base + llo
        self.hi = self.aff.base + lhi
        if int(self.count[0]) == 0:
            self.hi = self.lo - 1

    def _analyse_general(self):
        offs = self.offsets()
        flat = offs.reshape(offs.shape[0], -1)
        if self.mask_h is None:
            self.count = torch.full((offs.shape[0],), flat.shape[1])
            self.lo, self.hi = flat.amin(1), flat.amax(1)
        else:
            m = self.mask_h.expand(offs.shape[0], *self.shape).reshape(offs.shape[0], -1)
            self.count = m.sum(1)
            big = torch.iinfo(torch.int64).max
            self.lo = torch.where(m, flat, big).amin(1)
            self.hi = torch.where(m, flat, -big).amax(1)
        self.dense = False

    def offsets(self) -> torch.Tensor:
        """All offsets, (lead, *shape) int64 (masked-off lanes included)."""
        if self._offs is None:
            h = full_handle(offsets_of(self.ptr), self.shape)
            self._offs = h.expand(self.lead, *self.shape) if h.shape[0] != self.lead else h
        return self._offs

    def active_offsets(self):
        """(offsets, program ids) of every active lane, flattened in program order."""
        P = int(self.pids.numel())
        offs = self.offsets().expand(P, *self.shape) if self.lead != P else self.offsets()
        pid = self.pids.view(P, *([1] * len(self.shape))).expand(P, *self.shape)
        if self.mask_h is None:
            return offs.reshape(-1), pid.reshape(-1)
        m = self.mask_h.expand(P, *self.shape)
        return offs[m], pid[m]

    def active_locks(self) -> torch.Tensor:
        """The lock each active lane's program held (-1: none), in active_offsets' order."""
        P = int(self.pids.numel())
        locks = self.locks if self.locks is not None else torch.full((P,), -1, dtype=torch.int64)
        held = locks.view(P, *([1] * len(self.shape))).expand(P, *self.shape)
        return held.reshape(-1) if self.mask_h is None else held[self.mask_h.expand(P, *self.shape)]

    def total(self) -> int:
        """Active lanes summed over the chunk's programs."""
        c = int(self.count.sum())
        return c * int(self.pids.numel()) if self.count.numel() == 1 else c

    # -- checks -------------------------------------------------------------
    def check_bounds(self, op: str):
        has = self.count > 0
        if not bool(has.any()):
            return
        lo = self.lo[has] if self.lo.numel() == has.numel() else self.lo
        hi = self.hi[has] if self.hi.numel() == has.numel() else self.hi
        if int(lo.min()) >= 0 and int(hi.max()) < self.buf.span:
            return
        self._report_out_of_bounds(op)

    def _report_out_of_bounds(self, op):
        offs = self.offsets()
        P = int(self.pids.numel())
        offs = offs.expand(P, *self.shape) if offs.shape[0] != P else offs
        m = torch.ones_like(offs, dtype=torch.bool) if self.mask_h is None else self.mask_h.expand(P, *self.shape)
        bad = m & ((offs < 0) | (offs >= self.buf.span))
        prog = int(bad.reshape(P, -1).any(1).nonzero()[0])
        values = offs[prog][bad[prog]].tolist()
        launch = runtime.current().launch
        pid = int(self.pids[prog])
        where = "before the start" if min(values) < 0 else "past the end"
        head = f"out-of-bounds {op} in {runtime.location()}, {launch.describe(pid)}: "
        lanes = tensor_lanes(self.buf, offs[prog], bad[prog])
        if lanes is None:
            hint = ("Check the offset arithmetic (or mask those lanes)." if where == "before the start" else
                    "Mask the lanes past the end (mask=offs < n) or fix the offset arithmetic.")
            raise self._lanes_error(prog, values, OutOfBoundsError(
                f"{head}offsets {format_offsets(values)} are {where} of {self.buf.describe()}; "
                f"valid offsets are 0–{self.buf.span - 1}. {hint}"))
        shown, hints = lanes
        t = self.buf.tensor
        raise self._lanes_error(prog, values, OutOfBoundsError(
            f"{head}{shown} {'is' if len(values) == 1 else 'are'} {where} of {self.buf.name}, a tensor of shape "
            f"{tuple(t.shape)} ({self.buf.elem!r}, rows {t.stride(-2)} element{'' if t.stride(-2) == 1 else 's'} "
            f"apart; flat offsets {format_offsets(values)}, valid 0–{self.buf.span - 1}). {' '.join(hints)}"))

    def _lanes_error(self, prog, values, err):
        """``err`` with what viz.draw_out_of_bounds needs: the argument, its layout and the bad offsets."""
        t = self.buf.tensor
        err.argument, err.span, err.offsets = self.buf.name, self.buf.span, values
        err.row = t.stride(-2) if t.dim() >= 2 and t.stride(-1) == 1 else max(1, self.buf.span)
        err.program = int(self.pids[prog])
        n = t.shape[-1] if t.dim() >= 2 and t.stride(-1) == 1 else err.row
        err.cells_by_program = {}                  # every program of this access whose lanes left their row
        for k in range(int(self.pids.numel())):
            offs = self.offsets()
            offs = offs[k] if offs.shape[0] > 1 else offs[0]
            mask = self.mask_h
            active = torch.ones_like(offs, dtype=torch.bool) if mask is None else mask[k if mask.shape[0] > 1 else 0]
            cells = lane_cells(offs, active & ((offs < 0) | (offs >= self.buf.span)), err.row, n, active)
            if cells:
                err.cells_by_program[int(self.pids[k])] = cells
            if k == prog:
                err.cells = cells
            if sum(map(len, err.cells_by_program.values())) > 4096 and k > prog:
                break                              # enough to draw
        return err

    # -- fast path: a strided view of the buffer ------------------------------
    def view(self, for_store: bool):
        """The accessed elements as a strided view of the buffer, or None."""
        if self.aff is None or (self.mask_h is not None and self.mask_h.shape[0] != 1):
            return None
        strides = self.aff.strides
        if any(s < 0 for s in strides):
            return None
        base = self.aff.base
        lead = int(base.numel())
        step = int(base[1] - base[0]) if lead > 1 else 0
        if lead > 1 and (step < 0 or not bool((base == base[0] + step * torch.arange(lead)).all())):
            return None
        blo, bhi = self.aff.lane_range(self.shape)
        first, last = int(base[0]) + blo, int(base[-1]) + bhi
        if first < 0 or last >= self.buf.span:
            return None                        # masked-off lanes stick out: gather instead
        if for_store and not _no_self_overlap([(lead, step)] + list(zip(self.shape, strides))):
            return None
        flat = self.buf.flat
        return flat.as_strided((lead, *self.shape), (step, *strides), flat.storage_offset() + int(base[0]))


def lane_cells(offs, bad, row: int, n: int | None = None, active=None):
    """(row, column) of each bad lane, a run of lanes along the block's last dimension placed in the row
    where the run starts: ``x_ptr + 5 * 12 + cols`` with cols 12-15 is row 5, columns 12-15.

    With ``n`` (the tensor's row length) and ``active``, the active lanes of a run that reach past
    column n of their row count as bad too: inside the tensor, they read or write the next row."""
    cells = []
    width = offs.shape[-1] if offs.dim() else 1
    act = active.reshape(-1, width).tolist() if active is not None else None
    for i, (o, b) in enumerate(zip(offs.reshape(-1, width).tolist(), bad.reshape(-1, width).tolist())):
        one_run = max(o) - min(o) < width
        start = (min(o) // row) * row
        if one_run and n is not None and act is not None:
            b = [is_bad or (a and v - start >= n) for v, is_bad, a in zip(o, b, act[i])]
        if not any(b):
            continue
        cells += [((start // row, v - start) if one_run else (v // row, v % row)) for v, is_bad in zip(o, b) if is_bad]
    return cells


def tensor_lanes(buf, offs, bad, shown=3):
    """The bad lanes of one program as indices of the argument tensor, or None where flat offsets say more.

    ``offs``/``bad``: the program's offsets and out-of-bounds lanes, in the block's shape. Lanes that
    share all but the last block index are one run of a row: they are shown against the row where the
    run starts, so that ``x_ptr + row * stride + cols`` with cols past N reads ``x_ptr[36, 100:128]``
    (row 36, columns 100-127: past the end of a row of 100), as its author meant it. Returns
    (text, hints): "x_ptr[36, 100:128] and x_ptr[37:40, 0:128]" and what to mask.
    """
    t = buf.tensor
    if t is None or t.dim() < 2 or t.stride(-1) != 1 or any(s <= 0 for s in t.stride()):
        return None
    width = offs.shape[-1] if offs.dim() else 1
    runs = []                                   # [lead index tuple, first col, last col]
    for o, b in zip(offs.reshape(-1, width).tolist(), bad.reshape(-1, width).tolist()):
        if not any(b):
            continue
        if max(o) - min(o) >= width:            # not one run along a row: show each lane as its own index
            return None
        lead, rem = [], min(o)
        for stride in t.stride()[:-1]:
            lead.append(rem // stride)
            rem -= lead[-1] * stride
        base = min(o) - rem
        cols = [v - base for v, is_bad in zip(o, b) if is_bad]
        runs.append([tuple(lead), min(cols), max(cols)])
    merged = []                                 # consecutive rows with the same columns: one slice
    for lead, c0, c1 in sorted(runs):
        last = merged[-1] if merged else None
        if last and last[0][:-1] == lead[:-1] and last[1] + 1 == lead[-1] and last[2:] == [c0, c1]:
            last[1] = lead[-1]
        else:
            merged.append([lead, lead[-1], c0, c1])

    def index(lead, last_row, c0, c1):
        rows = f"{lead[-1]}" if last_row == lead[-1] else f"{lead[-1]}:{last_row + 1}"
        cols = f"{c0}" if c0 == c1 else f"{c0}:{c1 + 1}"
        return f"{buf.name}[{', '.join([*map(str, lead[:-1]), rows, cols])}]"
    texts = [index(*r) for r in merged[:shown]]
    text = " and ".join(texts) if len(merged) <= shown else ", ".join(texts) + f" and {len(merged) - shown} more"
    n, rows = t.shape[-1], t.shape[0]
    hints = []
    if any(c1 >= n for *_, c1 in merged):
        if all(0 < c0 < n for *_, c0, _ in merged):
            # a run that starts inside a row and runs past its end: the row's offset is off, not the mask
            hints.append(f"These lanes start at column {merged[0][2]} of a row, not at column 0: the offset of "
                         f"each row is not a multiple of the row's {n} elements; step from row to row by the "
                         f"tensor's row length or stride (n_cols, or the stride the wrapper passes), not by the "
                         f"block width.")
        else:
            hints.append(f"Columns {n} and up are past the end of a row of {n}: mask them (cols < n_cols).")
    if t.dim() == 2 and any(r[1] >= rows for r in merged):
        hints.append(f"Rows {rows} and up do not exist ({buf.name} has {rows} rows): if a tile runs past the "
                     f"last row, mask them (rows < n_rows for x, y and dx); if no program should reach them, "
                     f"check how the row index is computed.")
    elif any(i >= size for r in merged for i, size in zip((*r[0][:-1], r[1]), t.shape)):
        hints.append("Some indices are past their dimension's size: mask those lanes.")
    if any(r[0][0] < 0 or r[2] < 0 for r in merged):
        hints.append("Negative indices come before the tensor's start: check the offset arithmetic.")
    return text, hints or ["Mask those lanes or fix the offset arithmetic."]


def _dense_box(strides, shape) -> bool:
    """Do the offsets sum_d s_d*i_d cover a contiguous range (no holes)?"""
    dims = sorted((s, n) for s, n in zip(strides, shape) if s != 0 and n > 1)
    expect = 1
    for s, n in dims:
        if s != expect:
            return False
        expect = s * n
    return True


def _no_self_overlap(dims) -> bool:
    """Sufficient test that a (size, stride) layout never maps two indices to one element."""
    extent = 1
    for n, s in sorted(((n, s) for n, s in dims if n > 1), key=lambda d: d[1]):
        if s < extent:
            return False
        extent = s * (n - 1) + extent
    return True


# ---------------------------------------------------------------------------
def _prepare(op, pointer, mask, *extra):
    ch = runtime.current()
    ptr = as_block(pointer)
    if not ptr.dtype.is_ptr():
        raise TypeError(f"{runtime.location()}: tl.{op} expects a pointer (a tensor argument plus "
                        f"offsets), got a {ptr.dtype!r} block")
    if ptr.buf is None:
        raise TypeError(f"{runtime.location()}: tl.{op} through a None pointer")
    shape = ptr.shape
    mask_blk = None
    if mask is not None:
        mask_blk = as_block(mask)
        if not mask_blk.dtype.is_bool():
            mask_blk = mask_blk != 0
        shape = broadcast_shape(shape, mask_blk.shape)
    for e in extra:
        if e is not None:
            shape = broadcast_shape(shape, as_block(e).shape)
    if shape != ptr.shape:
        ptr = tensor(None if ptr.aff is not None else full_handle(ptr, shape), ptr.dtype, shape,
                     aff=_broadcast_ptr(ptr, shape), buf=ptr.buf)
    mask_h = None if mask_blk is None else full_handle(mask_blk, shape)
    if mask_h is not None and bool(mask_h.all()):
        mask_h = None                           # every lane active: the fast, unmasked case
    ch.max_numel = max(ch.max_numel, math.prod(shape))
    acc = Access(op, ptr, mask_h, shape, ch.pids)
    acc.site = runtime.site()
    acc.line = runtime.location(acc.site)
    acc.locks = ch.held()
    return ch, acc


def _broadcast_ptr(ptr, shape):
    a = ptr.affine()
    return None if a is None else broadcast_affine(a, ptr.shape, shape)


# What the masked-off lanes of a float tl.load without other= hold: NaN, which shows wherever they are
# used. A grader can set it to 0.0 for a second run, to see whether those lanes were the only problem.
UNDEFINED_FLOAT = float("nan")


def _poison(elem: D.dtype):
    """What a masked-off lane holds when the load gives no ``other``: garbage on a GPU."""
    if elem.is_floating():
        return UNDEFINED_FLOAT
    if elem.is_bool():
        return False
    return D.int_range(elem)[1]


def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    if boundary_check or padding_option:
        raise NotImplementedError(f"{runtime.location()}: tl.load with boundary_check/padding_option (block "
                                  f"pointers) is not supported by mini_triton; use mask= and other=, or a tensor "
                                  f"descriptor")
    ch, acc = _prepare("load", pointer, mask, other)
    acc.check_bounds("load")
    elem = acc.buf.elem
    fill = cast(as_block(other), elem) if other is not None else None
    view = acc.view(for_store=False)
    if view is not None:
        vals = view
    else:
        offs = acc.offsets()
        if acc.mask_h is not None:
            offs = torch.where(acc.mask_h, offs, 0) if acc.buf.span > 0 else torch.zeros_like(offs)
        vals = acc.buf.flat[offs] if acc.buf.span > 0 else torch.zeros(offs.shape, dtype=elem.torch)
    store_ty = D.storage_dtype(elem)
    if acc.mask_h is None:
        out = vals.to(store_ty, copy=True)
    else:
        f = full_handle(fill, acc.shape) if fill is not None else torch.tensor(_poison(elem), dtype=store_ty)
        out = torch.where(acc.mask_h, vals.to(store_ty), f.to(store_ty))
        if fill is None and ch.launch.undefined_lanes is None and elem.is_floating() and not bool(acc.mask_h.all()):
            ch.launch.undefined_lanes = acc.line          # masked-off lanes hold NaN: the statistics say where
    ch.records.append(acc)
    return tensor(out, elem, acc.shape)


def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    if boundary_check:
        raise NotImplementedError(f"{runtime.location()}: tl.store with boundary_check (block pointers) is not "
                                  f"supported by mini_triton; use a mask, or a tensor descriptor")
    ch, acc = _prepare("store", pointer, mask, value)
    acc.check_bounds("store")                       # a rejected store writes nothing
    val = cast(as_block(value), acc.buf.elem)
    vh = full_handle(val, acc.shape).to(acc.buf.elem.torch)
    view = acc.view(for_store=True)
    if ch.undo is not None:
        _populate_once(ch.launch, acc.buf)
    if view is not None and (view.shape[0] == ch.P or vh.shape[0] == 1):
        if ch.undo is not None:
            ch.undo.append((view, view.clone()))
        if acc.mask_h is None:
            view.copy_(vh.expand(view.shape) if vh.shape != view.shape else vh)
        else:
            view.copy_(torch.where(acc.mask_h, vh, view))
    else:
        lead = max(acc.lead, vh.shape[0])
        offs = acc.offsets().expand(lead, *acc.shape)
        vh = vh.expand(lead, *acc.shape)
        if acc.mask_h is not None:
            m = acc.mask_h.expand(lead, *acc.shape)
            offs, vh = offs[m], vh[m]
        else:
            offs, vh = offs.reshape(-1), vh.reshape(-1)
        if ch.undo is not None:
            ch.undo.append((offs, acc.buf.flat[offs].clone(), acc.buf.flat))
        acc.buf.flat[offs] = vh
    ch.records.append(acc)
    if acc.locks is not None and acc.shape == ():
        _release(ch, acc)                           # a plain store can release a lock too


def _populate_once(launch, buf):
    """Before the undo log first reads a buffer in this launch, map its fresh pages for writing (heap.py)."""
    if buf.storage_key not in launch.populated:
        launch.populated.add(buf.storage_key)
        heap.populate(buf.tensor.data_ptr(), buf.span * buf.tensor.element_size())


def undo(chunk):
    """Put back every element the chunk's stores and atomics changed, newest first."""
    for entry in reversed(chunk.undo or []):
        if len(entry) == 2:
            entry[0].copy_(entry[1])
        else:
            idx, old, flat = entry
            flat[idx] = old
    chunk.undo = [] if chunk.undo is not None else None


# ---------------------------------------------------------------------------
# atomics: read-modify-write that other programs cannot interleave with
# ---------------------------------------------------------------------------
_ATOMIC_OPS = {
    "add": lambda old, v: old + v,
    "max": torch.maximum,
    "min": torch.minimum,
    "xchg": lambda old, v: v,
    "and": torch.bitwise_and,
    "or": torch.bitwise_or,
    "xor": torch.bitwise_xor,
}


def atomic(op, pointer, val, mask=None, cmp=None):
    ch, acc = _prepare(f"atomic_{op}", pointer, mask, val, cmp)
    acc.check_bounds(f"atomic_{op}")
    elem = acc.buf.elem
    if op in ("and", "or", "xor") and not elem.is_int():
        raise TypeError(f"{runtime.location()}: atomic_{op} needs an integer tensor, got {elem!r}")
    P = ch.P
    offs = acc.offsets().expand(P, *acc.shape)
    v = full_handle(cast(as_block(val), elem), acc.shape).to(elem.torch).expand(P, *acc.shape)
    c = full_handle(cast(as_block(cmp), elem), acc.shape).to(elem.torch).expand(P, *acc.shape) \
        if cmp is not None else None
    m = acc.mask_h.expand(P, *acc.shape) if acc.mask_h is not None else torch.ones_like(offs, dtype=torch.bool)
    a, vv = offs[m], v[m]
    cc = c[m] if c is not None else None
    flat = acc.buf.flat
    if ch.undo is not None:
        ch.undo.append((a, flat[a].clone(), flat))
    if op == "add" and elem.is_floating():
        _order_dependent(ch, f"tl.atomic_add on {acc.buf.describe()} at {acc.line}")
        perm = runtime.schedule(torch.arange(a.numel()))        # the lanes arrive in any order
        old = torch.empty_like(vv)
        old[perm] = _atomic_apply(op, flat, a[perm], vv[perm], None)
    else:
        old = _atomic_apply(op, flat, a, vv, cc)
    out = torch.full((P, *acc.shape), _poison(elem), dtype=D.storage_dtype(elem))
    out[m] = old.to(out.dtype)
    ch.records.append(acc)
    if acc.shape == () and op in ("cas", "xchg") and elem.is_int():        # a lock is an integer word
        _track_locks(ch, acc, op, old, vv, cc, m.reshape(-1))
    return tensor(out, elem, acc.shape)


# ---------------------------------------------------------------------------
# locks: a program that wins atomic_cas(lock, 0, 1) holds the lock until it writes it back
# ---------------------------------------------------------------------------
def _lock_keys(acc, active):
    """Launch-wide lock ids of the scalar addresses each program's lane touches."""
    offs = acc.offsets().expand(acc.pids.numel()).reshape(-1)[active]
    launch = runtime.current().launch
    base = (acc.buf.storage_key, acc.buf.storage_offset)
    return torch.tensor([launch.lock_id((base, int(o))) for o in offs.tolist()], dtype=torch.int64)


def _track_locks(ch, acc, op, old, new, cmp, active):
    """A successful cas that changes the word takes a lock; xchg or cas on a held lock releases it."""
    positions = active.nonzero().reshape(-1)
    if positions.numel() == 0:
        return
    keys = _lock_keys(acc, active)
    held = ch.held()
    if held is not None:
        _release(ch, acc, positions, keys)
    if op == "cas":
        took = (old == cmp) & (new != cmp)
        if bool(took.any()):
            ch.hold(positions[took], keys[took])
            _order_dependent(ch, f"a lock taken with tl.atomic_cas on {acc.buf.describe()} at {acc.line}",
                             stacklevel=5)


def _release(ch, acc, positions=None, keys=None):
    if positions is None:
        P = acc.pids.numel()
        active = torch.ones(P, dtype=torch.bool) if acc.mask_h is None else acc.mask_h.expand(P).reshape(-1)
        positions = active.nonzero().reshape(-1)
        if positions.numel() == 0:
            return
        keys = _lock_keys(acc, active)
    held = ch.held()
    if held is None:
        return
    mine = held[positions] == keys
    if bool(mine.any()):
        ch.hold(positions[mine], torch.full((int(mine.sum()),), -1, dtype=torch.int64))


def _order_dependent(ch, why: str, stacklevel: int = 4):
    """Mark the launch order-dependent (the launcher then shuffles it) and say so, once per place."""
    launch = ch.launch
    if launch.order_dependent is None:
        launch.order_dependent = why
        warnings.warn(f"{why}: programs then add in the order they arrive, which a GPU does not fix, so a "
                      f"float sum built this way changes in its last bits from run to run (mini_triton runs such "
                      f"launches in a shuffled order to show it). For a deterministic result, give each program "
                      f"its own partial result and reduce them in a fixed order.", OrderDependenceWarning,
                      stacklevel=stacklevel)


def _atomic_apply(op, flat, a, v, cmp):
    """Apply in program order; returns the value each lane saw before its update."""
    if a.numel() == 0:
        return flat[a]
    uniq = torch.unique(a).numel() == a.numel()
    if op == "add" and not uniq:
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
    if uniq:
        old = flat[a].clone()
        if op == "cas":
            flat[a] = torch.where(old == cmp, v, old)
        else:
            flat[a] = _ATOMIC_OPS[op](old, v).to(flat.dtype)
        return old
    old = torch.empty_like(v)
    for i in range(a.numel()):                     # repeated addresses: one lane at a time
        o = flat[a[i]].clone()
        old[i] = o
        flat[a[i]] = (v[i] if o == cmp[i] else o) if op == "cas" else _ATOMIC_OPS[op](o, v[i])
    return old


# ---------------------------------------------------------------------------
# tensor descriptors: blocks addressed by their offsets in a tensor of known shape
# ---------------------------------------------------------------------------
class TensorDescriptor:
    """``tl.make_tensor_descriptor``: a tensor in global memory (base, shape, strides), read and
    written a block of ``block_shape`` at a time.

    On a Hopper GPU a descriptor load is one TMA copy of a whole block, and what lies outside
    the descriptor's shape reads as zero; a store writes only what lies inside. The simulator
    turns both into a masked load or store through ordinary pointers, so bounds checks, race
    checks and traffic counts apply as they do to pointer arithmetic.
    """

    def __init__(self, base, shape, strides, block_shape, padding_option="zero"):
        self.base = as_block(base)
        if not self.base.dtype.is_ptr() or self.base.shape:
            raise TypeError(f"{runtime.location()}: tl.make_tensor_descriptor needs a tensor argument as its base "
                            f"(a scalar pointer), got a {self.base.dtype!r} block of shape {list(self.base.shape)}")
        self.shape, self.strides = list(shape), list(strides)
        self.block_shape = check_shape(tuple(block_shape), "block_shape")
        if not len(self.shape) == len(self.strides) == len(self.block_shape):
            raise CompilationError(f"{runtime.location()}: tl.make_tensor_descriptor: shape, strides and "
                                   f"block_shape must have one entry per dimension")
        if not isinstance(unwrap(self.strides[-1]), tensor) and unwrap(self.strides[-1]) != 1:
            raise CompilationError(f"{runtime.location()}: a tensor descriptor's last dimension must be contiguous "
                                   f"(stride 1), got stride {unwrap(self.strides[-1])}")
        size = max(1, self.base.dtype.element_ty.primitive_bitwidth // 8)
        for d, stride in enumerate(self.strides[:-1]):
            v = unwrap(stride)
            values = v.handle.reshape(-1).tolist() if isinstance(v, tensor) else [v]
            bad = next((int(x) for x in values if int(x) * size % 16), None)
            if bad is not None:
                raise CompilationError(f"{runtime.location()}: stride must be 16-byte aligned: dimension {d} of the "
                                       f"tensor descriptor has stride {bad} ({bad * size} bytes); the GPU's TMA copies "
                                       f"need every stride but the last to be a multiple of 16 bytes")
        if padding_option != "zero":
            raise NotImplementedError(f"{runtime.location()}: tensor descriptors with padding_option="
                                      f"{padding_option!r} are not supported by mini_triton (only 'zero')")

    def _block(self, offsets):
        """Pointers to the block at ``offsets``, and the mask of its elements inside the descriptor."""
        offsets = list(offsets)
        if len(offsets) != len(self.block_shape):
            raise CompilationError(f"{runtime.location()}: a tensor descriptor of {len(self.block_shape)} "
                                   f"dimensions needs {len(self.block_shape)} offsets, got {len(offsets)}")
        ptr, mask, ndim = self.base, None, len(self.block_shape)
        for d, (off, size) in enumerate(zip(offsets, self.block_shape)):
            lanes = make_int(D.int32, (size,), Affine(torch.zeros(1, dtype=torch.int64), (1,)))
            idx = (lanes + off)[tuple(slice(None) if i == d else None for i in range(ndim))]
            inside = idx < self.shape[d]
            ptr = ptr + idx * self.strides[d]
            mask = inside if mask is None else mask & inside
        return ptr, mask

    def load(self, offsets):
        ptr, mask = self._block(offsets)
        return load(ptr, mask=mask, other=0)

    def store(self, offsets, value):
        ptr, mask = self._block(offsets)
        store(ptr, value, mask=mask)


def check_pointer_arg(t, name):
    if t.device.type != "cpu":
        raise ValueError(f"argument {name} is on {t.device}; mini_triton runs kernels on CPU tensors "
                         f"(use real Triton for CUDA tensors)")
    return Buffer(name, t)


__all__ = ["Buffer", "Access", "Kind", "TensorDescriptor", "load", "store", "atomic", "undo", "CompilationError"]
