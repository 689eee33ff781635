"""Where each byte of a job's memory came from, as the judge's process sees it.

Every tensor the kernels or the grader see lives in shared memory: the task's inputs in memory the judge
made, the submission's own buffers in memory its side shared (client.py). The judge never takes the
submission's word for what is there: it keeps its own copy of each buffer (a *mirror*, found by the
buffer's inode, which the submission cannot forge) and an *origin* for every byte:

- ``INPUT``: the grader's input, as given;
- ``CONST``: a whole buffer filled with 0, 1, -1, infinity or NaN (``torch.zeros``, ``torch.empty``'s poison,
  ``zero_()``): no information (any other value, even repeated, is the host's: a one-element output is one
  value; so is a fill of part of a buffer, whose extent is the host's number);
- ``COPY_INPUT`` / ``COPY_KERNEL``: written by the host, equal element for element to a copy or a cast of an
  input or of memory clean kernels stored (``x.contiguous()``, ``y32.to(bfloat16)``): clean, but moved on the
  host;
- ``KERNEL``: stored by a launch that read only clean memory;
- ``HOST``: anything else the host wrote: values no kernel computed from the inputs;
- ``TAINTED``: stored by a launch that failed part way, or whose loads the judge cannot weigh (a read of a
  buffer that is no whole number of the view's elements);
- ``DERIVED``: stored by a launch whose stored value depends on ``HOST``, ``TAINTED`` or ``DERIVED`` memory it
  loaded.

Before each launch the judge compares each buffer with its mirror: what changed, the host wrote (a
difference it classifies). A launch that loads no dirty byte stores ``KERNEL`` bytes. One that does is run a
second time (a *replay*, seen by no check and no count) on the same memory with every dirty byte replaced by
secret random bytes: each element it stores whose value changed derives from the host's memory (``DERIVED``,
whatever path the value took: arithmetic, an address, a mask, a branch, an atomic), and the rest is its own
(``KERNEL``). So an output counts as the kernels' work only if its values derive, through kernel operations,
from the grader's inputs: one loaded back from memory the host filled does not, padding stored beside it
changes nothing, and a second kernel that reads what a first one stored is as clean as the first. A few
host values in an output's making (an r the host recomputed: M values, one per row, for M·N outputs) are
forgiven when the judge reads the output (:meth:`Memory.forgiven`), and item 7 names the host's work.

What the host passes otherwise (scalar arguments, constexprs, grid sizes, which kernel it launches next, which
buffer it passes, which fill or copy it makes before a launch) is not counted here: the judge runs each task
again on fresh inputs (replay.py) with the same scalars, launches, buffers, fills and copies, so whatever they
carried of the first inputs is stale there and shows as a wrong output.
"""
from __future__ import annotations

import math
import os
import stat

import torch
from rmsnorm_testkit.timing import element_size

INPUT, CONST, COPY_INPUT, COPY_KERNEL, KERNEL, HOST, TAINTED, DERIVED = range(8)
DIRTY = (HOST, TAINTED, DERIVED)        # every code from HOST up
MADE = (KERNEL, COPY_KERNEL)            # what an output made by the kernels holds
_MADE = torch.tensor(MADE, dtype=torch.uint8)
MAX_BYTES = 1 << 30                     # one buffer: more than a job's memory could hold anyway


class Refused(Exception):
    """A description of memory the judge cannot take (too big, not shared memory, a view past its end)."""


class Buffer:
    """One storage: its descriptor, the judge's mirror of its bytes, their origins, what kernels wrote."""

    def __init__(self, fd: int, nbytes: int, origin: int):
        self.fd, self.nbytes = fd, nbytes
        self.mirror = torch.zeros(nbytes, dtype=torch.uint8)
        self.origin = torch.full((nbytes,), origin, dtype=torch.uint8)
        self.written = torch.zeros(nbytes, dtype=torch.bool)       # by kernels, in the current phase
        self.worst = origin                 # at least the largest origin code of any byte: HOST or more is dirty

    def mark(self, where, code: int, size: int = 1):
        """Set the origin of the bytes ``where`` (an index or mask over elements of ``size`` bytes)."""
        (self.origin if size == 1 else self.origin.view(-1, size))[where] = code
        self.worst = max(self.worst, code)

    def read(self) -> torch.Tensor:
        """The bytes as they are now in the shared memory (a short read leaves zeros: a file cut shorter)."""
        data = bytearray(self.nbytes)
        view, got = memoryview(data), 0
        while got < self.nbytes:
            n = os.preadv(self.fd, [view[got:]], got)
            if n <= 0:
                break
            got += n
        return torch.frombuffer(data, dtype=torch.uint8) if self.nbytes else torch.zeros(0, dtype=torch.uint8)

    def write_back(self):
        """The mirror into the shared memory: what the kernels stored, for the submission's side to see."""
        data, done = self.mirror.numpy().tobytes(), 0
        while done < len(data):
            n = os.pwrite(self.fd, data[done:], done)
            if n <= 0:
                break
            done += n

    def dirty(self) -> bool:
        if self.worst >= HOST:
            self.worst = int(self.origin.max()) if self.nbytes else CONST
        return self.worst >= HOST


class Memory:
    """Every buffer of a job, by inode; the candidates a host write may be a copy of."""

    def __init__(self):
        self.buffers = {}                  # (device, inode) -> Buffer
        self.inputs = []                   # the task's inputs, as the submission got them (views)
        self.kernel_views = {}             # key -> (Buffer, dtype, offset, shape, strides) clean launches stored
        self.copies = []                   # (source's address, elements, dtype, copy's address, source's dtype)
        self.host_loaded = 0               # dirty values (HOST, TAINTED) launches loaded, this phase (dirty_loaded)
        self._random = None                # the replays' secret bytes (seeded on first use: after the fork)
        self.kept = []                     # clean tensors as they were before the judge overwrote them (keep)
        self.kept_from = {}                # the address of each kept copy -> that of the memory it was kept from
        self.overwritten = {}              # id of a Buffer -> its bytes the judge overwrote and nothing wrote since
        self.read_overwritten = set()      # ids of the Buffers a launch loaded overwritten bytes of

    # -- arrival: a descriptor from either side ---------------------------------------------------------
    def buffer(self, fd: int, nbytes: int, origin=None) -> Buffer:
        """The Buffer behind ``fd`` (adopted on first sight: a dup of the descriptor is kept)."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("a tensor's memory that is not shared memory")
        if nbytes < 0 or nbytes > MAX_BYTES or st.st_size < nbytes:
            raise Refused(f"a tensor's memory of {nbytes} bytes in a file of {st.st_size}")
        key = (st.st_dev, st.st_ino)
        buf = self.buffers.get(key)
        if buf is None or buf.nbytes != nbytes:
            buf = Buffer(os.dup(fd), nbytes, CONST if origin is None else origin)
            self.buffers[key] = buf
            if origin is None:                        # the host's new buffer: what it holds is the host's
                self._arrived(buf, buf.read())
        return buf

    def input(self, t: torch.Tensor) -> tuple:
        """(Buffer, descriptor to hand the submission) of a new shared memory holding ``t``'s storage, an input."""
        data = t.untyped_storage()
        raw = torch.empty(data.nbytes(), dtype=torch.uint8)
        raw.untyped_storage().copy_(data)
        fd = os.memfd_create("rmsnorm-input")
        os.ftruncate(fd, raw.numel())
        payload, done = raw.numpy().tobytes(), 0
        while done < len(payload):
            done += os.pwrite(fd, payload[done:], done)
        buf = self.buffer(fd, raw.numel(), origin=INPUT)
        buf.mirror.copy_(raw)
        return buf, fd

    def view(self, buf: Buffer, dtype, offset, shape, strides) -> torch.Tensor:
        """The mirror seen as a tensor (the launch's argument, an output)."""
        size = element_size(dtype)
        if buf.nbytes % size:
            raise Refused(f"a {dtype} tensor in {buf.nbytes} bytes, not a whole number of elements")
        try:
            return buf.mirror.view(dtype).as_strided(shape, strides, offset)
        except RuntimeError as e:
            raise Refused(f"a tensor view past the end of its memory: {e}") from None

    def refresh(self, buf: Buffer):
        """Take in what the host wrote into ``buf`` since the judge last looked."""
        now = buf.read()
        if not torch.equal(now, buf.mirror):
            self._changed(buf, now)

    def _arrived(self, buf: Buffer, now: torch.Tensor):
        """A buffer of the host's, seen for the first time: a constant fill (torch.empty's poison, zeros), or
        the host's own values."""
        buf.mirror.copy_(now)
        if not _uniform(now):
            buf.origin.fill_(HOST)
            buf.worst = HOST

    def _changed(self, buf: Buffer, now: torch.Tensor):
        """Take in the bytes the host changed since the judge last looked: HOST, unless a constant fill."""
        changed = now != buf.mirror
        buf.mirror.copy_(now)
        if not bool(changed.any()):
            return
        if id(buf) in self.overwritten:
            self.overwritten[id(buf)][changed] = False
        buf.mark(changed, HOST)
        buf.written[changed] = False
        self._classify(buf, changed)

    # -- what the host wrote: a constant, a copy of something clean, or its own ---------------------------
    def _classify(self, buf: Buffer, changed: torch.Tensor):
        """Bytes the host wrote, ``changed``: one value repeated over whole elements is a constant fill."""
        for size in (4, 2, 8) if buf.nbytes % 2 == 0 else (1,):      # (single bytes only in a buffer of bytes)
            if buf.nbytes % size == 0 and _constant(buf.mirror, changed, size):
                buf.origin[changed] = CONST
                return

    def settle(self, buf: Buffer, dtype, offset, shape, strides) -> torch.Tensor:
        """The view's elements, after the host's writes there, when the whole view equals, element for element
        and byte for byte, a copy or a cast of one clean tensor (an input as the submission got it, or a view
        clean kernels stored), are marked as that copy; returns the view. The whole view, and one tensor: which
        elements the host changed, or which of two clean tensors each element copies, would carry the host's
        bits. Bytes, not values: a bool that is any nonzero byte, a NaN of any payload or a zero of either sign
        would carry them as "equal"."""
        view = self.view(buf, dtype, offset, shape, strides)
        if not buf.dirty():
            return view
        size = view.element_size()
        if size not in INTS:
            return view
        index = element_index(buf, size, offset, shape, strides).reshape(-1)
        origin = buf.origin.view(-1, size)
        host = (origin[index] == HOST).all(1)
        if not bool(host.any()):
            return view
        flat = view.reshape(-1).view(INTS[size])
        for src, code in self._candidates(flat.numel(), lambda t: torch.equal(flat, t.reshape(-1).to(view.dtype)
                                                                                      .view(INTS[size]))):
            buf.mark(index[host], code, size)
            source = src.untyped_storage().data_ptr()
            self.copies.append((self.kept_from.get(source, source), int(host.sum()), str(view.dtype),
                                buf.mirror.untyped_storage().data_ptr(), str(src.dtype)))
            break
        return view

    def _candidates(self, numel: int, wanted=None):
        """The clean tensors of ``numel`` elements a view could copy, those ``wanted`` (a test of the tensor) alone:
        the inputs, then views clean launches stored whose every element the kernels made (checked after
        ``wanted``, the dearer test where a file stores thousands of small views)."""
        for t in self.inputs:
            if t.numel() == numel and (wanted is None or wanted(t)):
                yield t, COPY_INPUT
        for b, dtype, offset, shape, strides in self.kernel_views.values():
            if math.prod(shape) != numel or not distinct(shape, strides):
                continue
            t = self.view(b, dtype, offset, shape, strides)
            if (wanted is None or wanted(t)) and bool(torch.isin(self.origins(b, dtype, offset, shape, strides),
                                                                  _MADE).all()):
                yield t, COPY_KERNEL
        for t, code in self.kept:
            if t.numel() == numel and (wanted is None or wanted(t)):
                yield t, code

    def keep(self):
        """Keep the clean tensors as they are now, as candidates for the host's copies, before the judge overwrites
        the memory they lie in (remote.Task.offload): a copy the host made earlier still copies them."""
        kept = []
        for numel in sorted({t.numel() for t in self.inputs} | {math.prod(v[3]) for v in self.kernel_views.values()}):
            for t, code in self._candidates(numel):
                copy = t.clone()
                self.kept_from[copy.untyped_storage().data_ptr()] = t.untyped_storage().data_ptr()
                kept.append((copy, code))
        self.kept = kept

    def overwrite(self, buf: Buffer, where: torch.Tensor | None = None) -> torch.Tensor:
        """Set the bytes ``where`` (a mask; all of them when None) to 0xff (NaN in any float dtype, -1 in an integer
        one), in the shared memory too, and watch for a load of them (:meth:`loaded_overwritten`) until something
        writes there; returns the bytes as they were, for :meth:`restore`."""
        where = torch.ones(buf.nbytes, dtype=torch.bool) if where is None else where.clone()
        was = buf.mirror.clone()
        buf.mirror[where] = 255
        buf.write_back()
        buf.mark(where, CONST)
        self.overwritten[id(buf)] = where
        return was

    def restore(self, buf: Buffer, was: torch.Tensor):
        """Put back what :meth:`overwrite` replaced where nothing wrote since (a module's own buffer, kept between
        calls, must not carry the judge's bytes into the file's next call)."""
        self.refresh(buf)
        where = self.overwritten.pop(id(buf), None)
        if where is not None and bool(where.any()):
            buf.mirror[where] = was[where]
            buf.write_back()

    def loaded_overwritten(self, reads, stores=()):
        """Note the buffers whose overwritten bytes a launch loaded (``reads`` and ``stores``: as dirty_loaded's and
        launch_stored's); an element the same launch stored too is given the benefit of the doubt (its own scratch,
        written before it was read)."""
        stored = {(id(buf), size): elements for buf, size, elements in stores}
        for buf, size, elements in reads:
            mask = self.overwritten.get(id(buf))
            if mask is None or buf.nbytes % size:
                continue
            own = stored.get((id(buf), size))
            loaded = elements & ~own if own is not None and own.shape == elements.shape else elements
            if bool((mask.view(-1, size).any(1) & loaded).any()):
                self.read_overwritten.add(id(buf))

    def add_kernel_view(self, buf: Buffer, dtype, offset, shape, strides):
        """A view a clean launch stored into (a candidate for copies and partial dg rows), once."""
        key = (id(buf), dtype, offset, tuple(shape), tuple(strides))
        self.kernel_views.setdefault(key, (buf, dtype, offset, shape, strides))

    def origins(self, buf, dtype, offset, shape, strides) -> torch.Tensor:
        """The origin of each element of a view (the worst of its bytes: the largest code), read from the view's
        own bytes only."""
        size = element_size(dtype)
        return buf.origin.as_strided((*shape, size), (*(st * size for st in strides), 1), offset * size).amax(-1)

    def stored(self, buf, dtype, offset, shape, strides) -> torch.Tensor:
        """Which elements of a view the kernels wrote in this phase."""
        size = element_size(dtype)
        return buf.written.view(-1, size).any(1).as_strided(shape, strides, offset)

    # -- a launch --------------------------------------------------------------------------------------
    def dirty_loaded(self, reads) -> int | None:
        """The bytes of dirty memory (``HOST``, ``TAINTED``, ``DERIVED``, as it was before the launch) the launch
        loaded; None when a buffer read is no whole number of the view's elements (the judge cannot weigh it: all
        the launch stores is the host's). The host's own values among them (``HOST``, ``TAINTED``: where its
        information enters the kernels) are added to the phase's ``host_loaded``, in values of the view, or in
        4-byte words where its elements are wider (an r is one value a row, of either count); a
        second kernel's load of what a first one derived from them is not counted again.
        ``reads``: (Buffer, element size, mask over its elements)."""
        dirty = 0
        for buf, size, elements in reads:
            if buf.dirty():
                if buf.nbytes % size:
                    return None
                origin = buf.origin.view(-1, size).amax(1)
                dirty += int(((origin >= HOST) & elements).sum()) * size
                n = int(((origin >= HOST) & (origin != DERIVED) & elements).sum())
                self.host_loaded += max(n, -(-n * size // 4))        # values, or 4-byte words where wider
        return dirty

    def perturbed(self, buf: Buffer, before: torch.Tensor) -> torch.Tensor:
        """``before`` (the buffer's bytes before a launch) with every dirty byte replaced by a secret random
        byte: the memory a replay runs on. The bytes are drawn from the OS when first needed, in the judge's
        process, after the submission's process was forked: nothing the submission holds predicts them."""
        if self._random is None:
            self._random = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little"))
        dirty = buf.origin >= HOST
        noise = torch.randint(0, 256, (int(dirty.sum()),), dtype=torch.uint8, generator=self._random)
        out = before.clone()
        out[dirty] = noise
        return out

    def forgiven(self, rows: int, elements: int) -> bool:
        """May an output of ``elements`` values hold ``DERIVED`` ones and still count as the kernels' work? When
        the host's values its phase's launches loaded are at most one per row of x (``rows``, M) and under a
        quarter of the output's values: an r the host recomputed, which item 7 names, leaves the kernels the
        work on M·N data. More (the host's copy of the output itself, laundered, or any large share of it, such
        as an r the kernels only carried) is never forgiven, however much the kernels stored beside it."""
        return self.host_loaded <= rows and self.host_loaded * 4 < elements

    def launch_stored(self, stores, whole: bool = False, derived=None):
        """Mark the elements the launch stored (``stores``: (Buffer, element size, elements)) as its work:
        ``TAINTED`` when ``whole`` (host_scalars, or a failed launch), ``DERIVED`` where ``derived`` ({(id of the
        Buffer, element size): mask over its elements}, from the replay) says the value came from dirty memory,
        ``KERNEL`` elsewhere."""
        for buf, size, elements in stores:
            if buf.nbytes % size:
                continue
            if id(buf) in self.overwritten:                 # written again: no longer what the judge overwrote
                self.overwritten[id(buf)].view(-1, size)[elements] = False
            if whole:
                buf.mark(elements, TAINTED, size)
            else:
                from_host = (derived or {}).get((id(buf), size))
                buf.mark(elements, KERNEL, size)
                if from_host is not None and bool(from_host.any()):
                    buf.mark(elements & from_host, DERIVED, size)
            buf.written.view(-1, size)[elements] = True

    def new_phase(self):
        self.copies, self.host_loaded = [], 0
        for buf in self.buffers.values():
            if buf.written.any():
                buf.written.zero_()

    def close(self):
        for buf in self.buffers.values():
            try:
                os.close(buf.fd)
            except OSError:
                pass
        self.buffers.clear()


def distinct(shape, strides) -> bool:
    """Does a view of ``shape`` and ``strides`` name each element of its memory once (no stride 0, no overlap)?
    A view that repeats elements is not the copy it looks like: one element stored, seen S times."""
    extent = 1
    for n, st in sorted(((n, abs(st)) for n, st in zip(shape, strides) if n > 1), key=lambda d: d[1]):
        if st < extent:
            return False
        extent = st * (n - 1) + extent
    return True


def element_index(buf: Buffer, size: int, offset, shape, strides) -> torch.Tensor:
    """Each element of a view, as its index among the buffer's elements of ``size`` bytes (the view fits in the
    buffer: ``Memory.view`` said so): built from the view's own shape, not from an index of the whole buffer."""
    index = torch.full((), offset, dtype=torch.long)
    for dim, (n, st) in enumerate(zip(shape, strides)):
        index = index + (torch.arange(n) * st).view([n if d == dim else 1 for d in range(len(shape))])
    return index.expand(tuple(shape))


INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


FLOATS = {2: (torch.float16, torch.bfloat16), 4: (torch.float32,), 8: (torch.float64,), 1: ()}


def fill_value(value: torch.Tensor) -> bool:
    """Is one element's bytes a value allocations and initialisations fill with: 0, 1, -1, infinity or torch's
    NaN (torch.zeros, torch.ones, torch.full(-inf) for a running max, torch.empty's poison)? Any other value
    repeated is information: the host's own."""
    size = value.numel()
    as_int = int(value.view(INTS[size])[0])
    if as_int in (0, 1, -1) or (size == 1 and as_int == 255):
        return True
    for dtype in FLOATS[size]:
        f = float(value.view(dtype)[0])
        if f in (1.0, -1.0, float("inf"), float("-inf")) or (f != f and (as_int | SIGN[size]) == NAN[dtype]):
            return True
    return False


SIGN = {n: -(1 << (8 * n - 1)) for n in INTS}           # the sign bit, as the signed int of n bytes holds it
NAN = {dtype: int(torch.tensor(float("nan"), dtype=dtype).view(INTS[n])) | SIGN[n]
       for n, dtypes in FLOATS.items() for dtype in dtypes}
"""The quiet NaN torch writes (torch.full(nan), torch.empty's poison), either sign: a NaN with any other payload
carries the host's bits."""


def _uniform(data: torch.Tensor) -> bool:
    """Is ``data`` a fill: one fill value (fill_value) of 1, 2, 4 or 8 bytes over and over?"""
    if data.numel() == 0:
        return True
    for size in (4, 2, 8, 1):
        if data.numel() % size == 0:
            v = data.view(INTS[size])
            if bool((v == v[0]).all()) and fill_value(data[:size].clone()):
                return True
    return False


def _constant(mirror: torch.Tensor, changed: torch.Tensor, size: int) -> bool:
    """Is the host's write a fill: does the whole buffer now hold one fill value, in elements of ``size`` bytes?
    Which elements of a buffer the host changed carries data (a 1 where a bit is set), and so does where a run of
    them ends (``buf[:k] = 1``, k the host's number): only a buffer the host filled whole carries nothing."""
    rows = changed.view(-1, size)
    values = mirror.view(-1, size)[rows.any(1)]
    if values.shape[0] == 0 or not fill_value(values[0].clone()):
        return False
    return bool((mirror.view(-1, size) == values[0]).all())
