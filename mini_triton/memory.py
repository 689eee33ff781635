"""Global memory: the pointers a kernel is given, and the loads, stores and atomics made through them.

A kernel argument that is a tensor becomes a :class:`Buffer`: the flat memory
its view spans, from its first element to its last. Every active lane of a
load, store or atomic must address an element of that span; anything else is
the out-of-bounds access that on a GPU silently reads garbage or corrupts a
neighbouring tensor (bounds.py says which lanes). Masked-off lanes touch no
memory and are never checked.

Each access leaves an :class:`Access` record: which programs touched which
offsets. The launcher uses the records to count traffic (stats.py) and to
find data races (races.py). What an atomic does to memory, and the locks built
from atomics, are atomics.py's; tensor descriptors (descriptors.py) load and
store through this module.

At about 600 lines this is the simulator's longest module, kept whole: it is the narrow seam between the
language and the memory it touches (every load, store and atomic passes through :class:`Buffer`), and the
fast paths of a chunk of programs (views, gathers, boxes of lanes) must agree with the records they leave.
"""
from __future__ import annotations

import enum
import math

import torch

from . import atomics, bounds, heap, pipeline, runtime
from . import dtypes
from .arithmetic import cast, offsets_of
from .blocks import Affine, as_block, broadcast_affine, broadcast_shape, full_handle, tensor
from .errors import CompilationError


class Buffer:
    """The memory behind one tensor argument of a launch."""

    def __init__(self, name: str, t: torch.Tensor):
        self.name = name
        self.tensor = t
        self.elem = dtypes.from_torch(t.dtype)
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


FEW = 512                   # programs' ranges up to which an analysis merges them in Python (program_ranges)


class Access:
    """One load, store or atomic executed by the programs of a chunk: the record that every check and count reads.

    - ``op``: "load", "store", "atomic_add"... (for messages); ``kind``: what it does to memory (:class:`Kind`).
    - ``buf``: the argument's memory (:class:`Buffer`); ``shape``: the block's shape; ``ptr``: the pointer block.
    - ``aff``: the offsets as an :class:`~mini_triton.blocks.Affine` (a base per program plus a stride per block
      dimension), or None where they follow no such rule (a gather through indices): then ``offsets()`` holds them.
    - ``mask_h``: the mask, (1 or programs, *shape) bool, or None when every lane is active.
    - ``pids``: the programs (linear ids) of the chunk; ``lead``: 1 or their number, the leading dimension.
    - ``lo``/``hi`` (one entry per program, or one shared entry) bound the offsets of each program's active lanes;
      ``count`` is the number of active lanes per program; ``dense`` says each program's offsets form one
      contiguous range, so that counting distinct elements needs no scan.
    - ``site``: (kernel function, line, file) of the access, for errors raised after the launch; ``line``: the same
      as "kernel line N", for messages.
    - ``locks``: per program, the lock it held during the access, or None (races.py exempts accesses under one lock).
    """

    __slots__ = ("kind", "op", "buf", "shape", "ptr", "mask_h", "lead", "aff", "lo", "hi", "count",
                 "dense", "pids", "line", "site", "path", "locks", "perm", "_offs", "_box")

    def __init__(self, op: str, ptr: tensor, mask_h, shape, pids, box=False):
        self.op = op                           # "load", "store", "atomic_add", ... (for messages)
        self.kind = Kind.ATOMIC if op.startswith("atomic") else Kind(op)
        self.buf, self.shape, self.ptr, self.mask_h = ptr.buf, shape, ptr, mask_h
        self.pids = pids
        self.lead = max(ptr.lead, 1 if mask_h is None else mask_h.shape[0])
        aff = ptr.affine()
        self.aff = broadcast_affine(aff, ptr.shape, shape) if aff is not None else None
        self._offs = None
        self._box = box                        # box_lanes(), once computed (False: not yet)
        self.perm = None                       # a store's view holds the programs in this order (view())
        self.line = ""
        self.site = ("", 0, "")                # (kernel function, line, file) of the access
        self.path = ()                         # (code, line) of each kernel frame, innermost first (call_path)
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
            self.count = _count(n)
            self.dense = _dense_box(self.aff.strides, self.shape)
            if llo == 0 and lhi == 0:                      # one lane: each program's range is its base
                self.lo = self.hi = self.aff.base
                return
        elif self._analyse_box():
            return
        else:
            lanes = _lanes(self.aff.strides, self.shape)
            active = lanes[self.mask_h.expand_as(lanes)]
            self.count = _count(active.numel())
            if active.numel() == 0:
                llo, lhi = 0, -1
                self.dense = True
            else:
                llo, lhi = (int(v) for v in torch.aminmax(active))
                # lanes that never share an element are dense when they fill their range; else count them
                distinct = active.numel() if _no_self_overlap(list(zip(self.shape, self.aff.strides))) \
                    else torch.unique(active).numel()
                self.dense = lhi - llo + 1 == distinct
        self.lo = self.aff.base + llo
        self.hi = self.aff.base + lhi
        if int(self.count[0]) == 0:
            self.hi = self.lo - 1

    def _analyse_box(self) -> bool:
        """A mask every program shares that keeps a box of lanes (``cols < n``): the range and count from the box's
        corners, without listing its lanes. False where there is no box, or lanes of the box share elements."""
        if self.mask_h.shape[0] != 1:
            return False
        box = self.box_lanes()
        if box is None:
            return False
        sizes = [n for _, n in box]
        strides = self.aff.strides
        if not _no_self_overlap(list(zip(sizes, strides))):
            return False
        ends = [(a * s, (a + n - 1) * s) for (a, n), s in zip(box, strides)]
        llo, lhi = sum(min(e) for e in ends), sum(max(e) for e in ends)
        self.count = _count(math.prod(sizes))
        self.dense = _dense_box(strides, sizes)
        self.lo = self.aff.base + llo
        self.hi = self.aff.base + lhi
        return True

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
        offs, pids, _ = self.active_lanes()
        return offs, pids

    def active_locks(self) -> torch.Tensor:
        """The lock each active lane's program held (-1: none), in active_offsets' order."""
        return self.active_lanes(locks=True)[2]

    def active_lanes(self, locks=False):
        """(offsets, program ids, and with ``locks`` the lock each one's program held or -1) of every active lane,
        in program order. A mask that every program shares selects its lanes once, not once per program."""
        P = int(self.pids.numel())
        flat = self.offsets().reshape(self.lead, -1)
        held = None
        if locks:
            held = self.locks if self.locks is not None else torch.full((P,), -1, dtype=torch.int64)
        if self.mask_h is None or self.mask_h.shape[0] == 1:
            if self.mask_h is not None:
                flat = flat[:, self.mask_h.reshape(-1).nonzero().reshape(-1)]
            n = flat.shape[1]
            rep = (lambda t: t.repeat_interleave(n)) if n != 1 else (lambda t: t)  # noqa: E731
            return (flat.expand(P, n).reshape(-1), rep(self.pids),
                    rep(held) if held is not None else None)
        rows, cols = self.mask_h.expand(P, *self.shape).reshape(P, -1).nonzero(as_tuple=True)
        return (flat.expand(P, flat.shape[1])[rows, cols], self.pids[rows],
                held[rows] if held is not None else None)

    def programs(self) -> int:
        """How many programs the record holds."""
        return int(self.pids.numel())

    def program_ranges(self, ids=None) -> list:
        """[(lo, hi, program id)] of each program with active lanes, as Python numbers: where there are few
        (``FEW``), the analyses that merge ranges do it in Python, faster than torch's fixed cost per op. ``ids``:
        a tensor, per program, to name it by instead of its id."""
        cnt, lo, hi = self.count.reshape(-1).tolist(), self.lo.reshape(-1).tolist(), self.hi.reshape(-1).tolist()
        at = lambda xs, i: xs[0] if len(xs) == 1 else xs[i]      # noqa: E731 -- one entry shared by all
        names = (self.pids if ids is None else ids).tolist()
        return [(at(lo, i), at(hi, i), pid) for i, pid in enumerate(names) if at(cnt, i) > 0]

    def total(self) -> int:
        """Active lanes summed over the chunk's programs."""
        c = int(self.count.sum())
        return c * int(self.pids.numel()) if self.count.numel() == 1 else c

    # -- checks -------------------------------------------------------------
    def check_bounds(self, op: str):
        if self.count.numel() == 1:                 # every program has the same active lanes: no selection
            if int(self.count[0]) == 0 or (int(self.lo.min()) >= 0 and int(self.hi.max()) < self.buf.span):
                return
            bounds.report(self, op)
            return
        has = self.count > 0
        if not bool(has.any()):
            return
        lo = self.lo[has] if self.lo.numel() == has.numel() else self.lo
        hi = self.hi[has] if self.hi.numel() == has.numel() else self.hi
        if int(lo.min()) >= 0 and int(hi.max()) < self.buf.span:
            return
        bounds.report(self, op)

    # -- fast path: a strided view of the buffer ------------------------------
    def view(self, for_store: bool, box: bool = False):
        """The accessed elements as a strided view of the buffer, or None. With ``box``: where a mask that every
        program shares keeps a box of lanes (``cols < n`` with a block wider than the row, say), (the view of
        that box, its index in the block), or None."""
        if self.aff is None or (self.mask_h is not None and self.mask_h.shape[0] != 1):
            return None
        if not self.shape and not for_store and self.mask_h is None and not box:
            return self.buf.flat[self.aff.base]         # one element per program: a gather of the programs' bases
        strides = self.aff.strides
        if any(s < 0 for s in strides):
            return None
        dims = self.box_lanes() if box else [(0, n) for n in self.shape]
        if dims is None:
            return None
        base = self.aff.base
        lead = int(base.numel())
        step = int(base[1] - base[0]) if lead > 1 else 0
        if lead > 1 and (step < 0 or not bool((base == base[0] + step * torch.arange(lead)).all())):
            return self._rows(for_store, dims, box)
        return self._stepped(int(base[0]), step, lead, dims, for_store, box)

    def _stepped(self, first_base, step, lead, dims, for_store, box):
        """The view of ``lead`` programs whose bases run from ``first_base`` by ``step``, each its lanes ``dims``;
        None where lanes stick out of the buffer (masked-off ones: gather instead) or a store's view would overlap
        itself."""
        strides = self.aff.strides
        sizes = [n for _, n in dims]
        start = first_base + sum(a * s for (a, _), s in zip(dims, strides))
        blo, bhi = Affine(self.aff.base, strides).lane_range(sizes)
        if start + blo < 0 or start + step * (lead - 1) + bhi >= self.buf.span:
            return None
        if for_store and not _no_self_overlap([(lead, step)] + list(zip(sizes, strides))):
            return None
        flat = self.buf.flat
        v = flat.as_strided((lead, *sizes), (step, *strides), flat.storage_offset() + start)
        return (v, tuple(slice(a, a + n) for a, n in dims)) if box else v

    def _rows(self, for_store, dims, box):
        """Programs whose bases follow no single step (a shuffled order, ``row % groups``): for a load, each program's
        block gathered from one view whose first dimension runs over every base (one index per program, not per
        lane); for a store, see :meth:`_sorted_rows`."""
        if for_store:
            return self._sorted_rows(dims, box)
        base, strides = self.aff.base, self.aff.strides
        sizes = [n for _, n in dims]
        lo, hi = int(base.min()), int(base.max())
        start = sum(a * s for (a, _), s in zip(dims, strides))
        blo, bhi = Affine(base, strides).lane_range(sizes)
        if lo + start + blo < 0 or hi + start + bhi >= self.buf.span:
            return None
        flat = self.buf.flat
        every = flat.as_strided((hi - lo + 1, *sizes), (1, *strides), flat.storage_offset() + lo + start)
        v = every.index_select(0, base - lo)
        return (v, tuple(slice(a, a + n) for a, n in dims)) if box else v

    def _sorted_rows(self, dims, box):
        """A store whose programs run in a shuffled order (an order-dependent launch runs so, launcher.py) while their
        bases, sorted, follow one step: the view of the sorted rows, ``perm`` the programs in its order (store()
        permutes the values to match); None where no such view exists (a view that would overlap itself: two
        programs storing one element, whose order matters). Not for one element per program: its scatter is one
        indexing already."""
        if not self.shape:
            return None
        order = torch.argsort(self.aff.base)
        ordered = self.aff.base[order]
        lead, step = int(ordered.numel()), int(ordered[1] - ordered[0])
        if step <= 0 or not bool((ordered == ordered[0] + step * torch.arange(lead)).all()):
            return None
        v = self._stepped(int(ordered[0]), step, lead, dims, True, box)
        if v is not None:
            self.perm = order
        return v

    def in_view_order(self, values: torch.Tensor) -> torch.Tensor:
        """Per-program ``values`` (lead first) in the order of the programs in this store's view."""
        return values if self.perm is None or values.shape[0] == 1 else values[self.perm]

    def box_lanes(self):
        """[(first, size)] per dimension of the lanes a shared mask keeps, where they form a box; else None."""
        if self._box is False:
            self._box = self._find_box()
        return self._box

    def _find_box(self):
        m = self.mask_h[0]
        count = int(m.sum())
        if m.dim() == 0 or count == 0:
            return None
        dims = []
        for d in range(m.dim()):
            kept = m.any(dim=[e for e in range(m.dim()) if e != d]) if m.dim() > 1 else m
            nz = kept.nonzero().reshape(-1)
            dims.append((int(nz[0]), int(nz[-1]) - int(nz[0]) + 1))
        return dims if math.prod(n for _, n in dims) == count else None


_LANES = {}
_COUNTS = {}


def _count(n: int) -> torch.Tensor:
    """``torch.tensor([n])``, one shared tensor per n (records never change their counts)."""
    if n not in _COUNTS:
        if len(_COUNTS) > 1024:
            _COUNTS.clear()
        _COUNTS[n] = torch.tensor([n])
    return _COUNTS[n]


def _lanes(strides, shape) -> torch.Tensor:
    """The lane offsets sum_d strides[d] * i_d, (1, *shape): the same in every iteration of a loop, so kept."""
    key = (tuple(strides), tuple(shape))
    if key not in _LANES:
        if len(_LANES) > 256:
            _LANES.clear()
        _LANES[key] = Affine(torch.zeros(1, dtype=torch.int64), strides).materialize(shape)
    return _LANES[key]


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
# the accesses: tl.load, tl.store, tl.atomic_*
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
    memo = _mask_memo(mask_blk, shape)
    ch.max_numel = max(ch.max_numel, math.prod(shape))
    acc = Access(op, ptr, memo.mask_h, shape, ch.pids, box=memo.box)
    if memo.mask_h is not None:
        memo.box = acc._box                     # what this access learnt of its mask, for the next one
    acc.path = runtime.call_path()              # one walk of the frames gives the line and the helpers' callers
    acc.site = runtime.site_of(acc.path)
    acc.line = runtime.location(acc.site)
    acc.locks = ch.held()
    return ch, acc


class _MaskMemo:
    """What is known of the last mask an access used: its handle at the access's shape (None: every lane active)
    and its box_lanes() (False: not computed yet)."""
    __slots__ = ("handle", "shape", "mask_h", "box")

    def __init__(self, handle=None, shape=None, mask_h=None):
        self.handle, self.shape, self.mask_h, self.box = handle, shape, mask_h, False


_NO_MASK = _MaskMemo()
_last_mask = _MaskMemo()


def _mask_memo(mask_blk, shape) -> _MaskMemo:
    """What is known of ``mask_blk`` at ``shape``. One mask usually guards several accesses of a program
    (``cols < n``): whether it keeps every lane, and the box it keeps, are learnt once. A block's handle never
    changes while it is in use (a chunk that writes memory it loaded copies its loads, runtime.Chunk.writing)."""
    global _last_mask
    if mask_blk is None:
        return _NO_MASK
    if _last_mask.handle is not mask_blk.handle or _last_mask.shape != shape:
        mask_h = full_handle(mask_blk, shape)
        _last_mask = _MaskMemo(mask_blk.handle, shape, None if bool(mask_h.all()) else mask_h)
    return _last_mask if _last_mask.mask_h is not None else _NO_MASK


def _broadcast_ptr(ptr, shape):
    a = ptr.affine()
    return None if a is None else broadcast_affine(a, ptr.shape, shape)


# What the masked-off lanes of a float tl.load without other= hold: NaN, which shows wherever they are
# used. A grader can set it to 0.0 for a second run, to see whether those lanes were the only problem.
UNDEFINED_FLOAT = float("nan")


def set_undefined_float(value: float) -> float:
    """What the masked-off lanes of a float ``tl.load`` without ``other=`` hold from now on (NaN by default, which
    shows wherever they reach a result; 0.0 tells whether they were a kernel's only problem); returns the
    previous value."""
    global UNDEFINED_FLOAT
    old, UNDEFINED_FLOAT = UNDEFINED_FLOAT, float(value)
    return old


def _poison(elem: dtypes.dtype):
    """What a masked-off lane holds when the load gives no ``other``: undefined in Triton's documentation.
    A float lane holds NaN, which shows wherever it reaches a result. An integer lane holds 0, as NVIDIA's
    backend gives (checked on an H200): an integer has no value that shows without also raising false alarms
    (a large one overflows the first ``+ 1`` of a correct kernel whose masked lanes are never stored)."""
    if elem.is_floating():
        return UNDEFINED_FLOAT
    return False if elem.is_bool() else 0


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
    boxed = acc.view(for_store=False, box=True) if view is None and acc.mask_h is not None else None
    size = elem.primitive_bitwidth // 8
    ch.note_load(acc.path, math.prod(acc.shape), max(1, size))
    if ch.loops:                                    # in a loop Triton may pipeline: its copies in shared memory
        pipeline.note_load(acc, size)
    if boxed is not None:
        ch.loaded.add(acc.buf.storage_key[0])
        ch.records.append(acc)
        return tensor(_load_box(ch, acc, elem, fill, *boxed), elem, acc.shape)
    if view is not None:
        vals = view
    else:
        offs = acc.offsets()
        if acc.mask_h is not None:
            offs = torch.where(acc.mask_h, offs, 0) if acc.buf.span > 0 else torch.zeros_like(offs)
        vals = acc.buf.flat[offs] if acc.buf.span > 0 else torch.zeros(offs.shape, dtype=elem.torch)
    store_ty = dtypes.storage_dtype(elem)
    ch.loaded.add(acc.buf.storage_key[0])
    if acc.mask_h is None and view is not None and ch.views and vals.dtype == store_ty:
        out = view                                  # the chunk writes no memory it loads (runtime.Chunk.writing)
    elif acc.mask_h is None:
        out = vals.to(store_ty, copy=True)
    else:
        f = full_handle(fill, acc.shape) if fill is not None else torch.tensor(_poison(elem), dtype=store_ty)
        out = torch.where(acc.mask_h, vals.to(store_ty), f.to(store_ty))
        if fill is None and ch.launch.undefined_lanes is None and elem.is_floating() and not bool(acc.mask_h.all()):
            ch.launch.undefined_lanes = acc.line          # masked-off lanes hold NaN: the statistics say where
    ch.records.append(acc)
    return tensor(out, elem, acc.shape)


def _load_box(ch, acc, elem, fill, sub, index) -> torch.Tensor:
    """A masked load whose active lanes form a box of the block: the fill, and the box copied from memory."""
    store_ty = dtypes.storage_dtype(elem)
    f = full_handle(fill, acc.shape) if fill is not None else torch.tensor(_poison(elem), dtype=store_ty)
    lead = max(sub.shape[0], f.shape[0] if f.dim() else 1)
    out = torch.empty((lead, *acc.shape), dtype=store_ty)
    out.copy_(f.to(store_ty).expand(out.shape) if f.dim() else f.to(store_ty))
    out[(slice(None), *index)] = sub
    if fill is None and ch.launch.undefined_lanes is None and elem.is_floating():
        ch.launch.undefined_lanes = acc.line              # masked-off lanes hold NaN: the statistics say where
    return out


def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    if boundary_check:
        raise NotImplementedError(f"{runtime.location()}: tl.store with boundary_check (block pointers) is not "
                                  f"supported by mini_triton; use a mask, or a tensor descriptor")
    value = _store_shape(pointer, value)
    ch, acc = _prepare("store", pointer, mask, value)
    ch.writing(acc.buf)
    acc.check_bounds("store")                       # a rejected store writes nothing
    val = cast(as_block(value), acc.buf.elem)
    view = acc.view(for_store=True) if acc.mask_h is None else None
    if ch.undo is not None:
        _populate_once(ch.launch, acc.buf)
    if _store_pending(ch, acc, val, view):
        ch.records.append(acc)
        return
    vh = full_handle(val, acc.shape).to(acc.buf.elem.torch)
    if acc.mask_h is not None:                      # a mask that keeps a box writes only the box
        done = _store_box(ch, acc, vh) or _store_view(ch, acc, acc.view(for_store=True), vh)
    else:
        done = _store_view(ch, acc, view, vh)
    if not done:
        _scatter(ch, acc, vh)
    ch.records.append(acc)
    if acc.locks is not None and acc.shape == ():
        atomics.release(ch, acc)                    # a plain store can release a lock too


def _store_view(ch, acc, view, vh) -> bool:
    """Store through a strided view of every accessed element (masked-off lanes keep what memory holds)."""
    if view is None or not (view.shape[0] == ch.P or vh.shape[0] == 1):
        return False
    vh = acc.in_view_order(vh)
    if ch.undo is not None:
        ch.undo.append((view, view.clone()))
    if acc.mask_h is None:
        view.copy_(vh.expand(view.shape) if vh.shape != view.shape else vh)
    else:
        view.copy_(torch.where(acc.mask_h, vh, view))
    return True


def _store_box(ch, acc, vh) -> bool:
    """A masked store whose active lanes form a box of the block: copy the box into memory."""
    boxed = acc.view(for_store=True, box=True)
    if boxed is None:
        return False
    sub, index = boxed
    if not (sub.shape[0] == ch.P or vh.shape[0] == 1):
        return False
    if ch.undo is not None:
        ch.undo.append((sub, sub.clone()))
    part = acc.in_view_order(vh)[(slice(None), *index)]
    sub.copy_(part.expand(sub.shape) if part.shape != sub.shape else part)
    return True


def _store_pending(ch, acc, val, view) -> bool:
    """Store a pending element-wise result (blocks.tensor.pending) by computing it into memory, where it fills the
    accessed elements exactly: no mask, one value per element, the buffer's dtype. Its operands cannot be views of
    this memory: a chunk that writes what it loaded copies its loads (runtime.Chunk.writing)."""
    if val.pending is None or view is None or acc.mask_h is not None or val.shape != acc.shape or acc.perm is not None:
        return False
    op, a, b, lead = val.pending
    if view.shape[0] != lead or view.dtype != torch.promote_types(a.dtype, b.dtype) or lead != ch.P:
        return False
    if ch.undo is not None:
        ch.undo.append((view, view.clone()))
    op(a, b, out=view)
    return True


def _store_shape(pointer, value):
    """Triton broadcasts a stored value to its pointers' shape, never the pointers to the value's: a value of
    higher rank, or wider along an axis, does not compile (a 2-D tile through 1-D pointers, say)."""
    p, v = as_block(pointer).shape, as_block(value).shape
    fits = len(v) <= len(p) and all(a == b or a == 1 for a, b in zip(reversed(v), reversed(p)))
    if fits:
        return value
    message = (f"{runtime.location()}: tl.store of a value of shape {list(v)} through pointers of shape {list(p)}: "
               f"Triton broadcasts the value to the pointers' shape only, so this does not compile on a GPU (\"Cannot "
               f"broadcast\"); store through pointers of the value's shape, or reduce the value first")
    if [d for d in v if d != 1] != [d for d in p if d != 1]:
        raise CompilationError(message)              # no one value per pointer to store
    runtime.refuse(message)                          # recorded: dims of 1 apart, one value per pointer, in order
    b = as_block(value)
    return tensor(b.handle.reshape(b.handle.shape[0], *p), b.dtype, p)


def _scatter(ch, acc, vh):
    """Store the values ``vh`` lane by lane, where the accessed elements are no strided view."""
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


def atomic(op, pointer, val, mask=None, cmp=None):
    """``tl.atomic_<op>``: every active lane reads, updates and writes its element in one step
    (atomics.py); returns the value each lane saw."""
    ch, acc = _prepare(f"atomic_{op}", pointer, mask, val, cmp)
    ch.writing(acc.buf)
    acc.check_bounds(f"atomic_{op}")
    elem = acc.buf.elem
    atomics.check_type(op, elem)
    P = ch.P
    offs = acc.offsets().expand(P, *acc.shape)
    v = full_handle(cast(as_block(val), elem), acc.shape).to(elem.torch).expand(P, *acc.shape)
    c = full_handle(cast(as_block(cmp), elem), acc.shape).to(elem.torch).expand(P, *acc.shape) \
        if cmp is not None else None
    m = acc.mask_h.expand(P, *acc.shape) if acc.mask_h is not None else torch.ones_like(offs, dtype=torch.bool)
    a, vv = offs[m], v[m]
    cc = c[m] if c is not None else None
    if ch.undo is not None:
        ch.undo.append((a, acc.buf.flat[a].clone(), acc.buf.flat))
    owned = op == "xchg" or (op == "add" and elem.is_floating())         # whose lanes: atomics.apply asks
    lanes = ch.pids.view(P, *(1,) * len(acc.shape)).expand(P, *acc.shape)[m] if owned else None
    old = atomics.apply(ch, acc, op, a, vv, cc, lanes)
    out = torch.full((P, *acc.shape), _poison(elem), dtype=dtypes.storage_dtype(elem))
    out[m] = old.to(out.dtype)
    ch.records.append(acc)
    if acc.shape == () and op in ("cas", "xchg") and elem.is_int():        # a lock is an integer word
        atomics.track_locks(ch, acc, op, old, vv, cc, m.reshape(-1))
    return tensor(out, elem, acc.shape)


def check_pointer_arg(t, name):
    if t.device.type != "cpu":
        raise ValueError(f"argument {name} is on {t.device}; mini_triton runs kernels on CPU tensors "
                         f"(use real Triton for CUDA tensors)")
    return Buffer(name, t)


__all__ = ["Buffer", "Access", "Kind", "load", "store", "atomic", "undo"]
