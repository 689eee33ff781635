"""The judge runs a task's recipe again, itself, on inputs the submission never saw.

A task ran on the grader's inputs; the judge served its launches and the submission's process reported its
host ops (recipe.py). Here the judge makes *fresh* inputs, drawn from a secret seed after the submission's
process was forked (same shapes, strides and dtypes; a case's zero rows stay zero rows, in a new order),
and replays the task: each host op by its aten name, on the replay's own tensors, and each launch with the
kernel the judge compiled from its own copy of the file, its grid and scalars as they were, and each tensor
argument the replay's tensor of the same buffer. The outputs it reads back go to the grader beside the first
run's, with the fresh inputs, and are judged as the first run's are (autograder/judge: ``ledgers``).

Work that the kernels and the recorded ops really do comes out right on any inputs. Whatever the host computed
from the grader's inputs and slipped past the recipe (values carried in constexprs or scalars, a store its data
suppressed, an op the log never saw, a buffer the recipe never made) is stale on the fresh ones: the output comes
out wrong, or the same as on the first inputs (``unchanged``), or the replay cannot run (``Stale``).

What each replayed launch moves is counted too, and held to what it moved on the first run (``moved``: each
argument's plain loads, stores and atomics, and whether it raced): a kernel's traffic follows the shapes it is
given, never the values, so one that tells the grader's inputs from others (and does cheap, host-fed work on them
only) is told apart, and the traffic items judge what the kernels do on any inputs.
"""
from __future__ import annotations

import os

import torch
from mini_triton import observers, races
from mini_triton.blocks import constexpr
from mini_triton.stats import NO_READ_OPS
from rmsnorm_testkit import compare, dataflow, text
from rmsnorm_testkit.timing import element_size

from ..wire.phases import TRANSPORT_OPS
from .launches import footprint

MAX_BYTES = 1 << 31                     # a buffer of the recipe larger than this is refused
DTYPES = {name: getattr(torch, name) for name in ("float32", "float16", "bfloat16", "float64", "int8", "int16",
                                                  "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
          if isinstance(getattr(torch, name, None), torch.dtype)}     # (the unsigned words: torch 2.3 on)
# ops with effects beyond the tensors they are given and return, or that rebind a storage, and the indexing ops
# that skip their bounds checks (``_unsafe_index``): never replayed
REFUSED = frozenset({"aten::from_file", "aten::set_", "aten::resize_", "aten::resize_as_", "aten::_resize_output_",
                     "aten::record_stream", "aten::_pin_memory", "aten::pin_memory", "aten::_share_memory_"})
ALLOCATIONS = frozenset({"aten::empty", "aten::empty_like", "aten::new_empty", "aten::empty_strided",
                         "aten::new_empty_strided"})           # their memory is poisoned, as the first run's was
# ops that take a tensor for its shape, dtype or device only (their outputs hold no value of it); a fill reads its
# value when that is a tensor
SHAPE_ONLY = NO_READ_OPS - {"zero_", "fill_"}
OUTPUTS = ("y", "r", "dx", "dg")
SNAPSHOT = (*OUTPUTS, "r_saved")          # and the r the autograd Function saved (the zero-lane replay reads it)


class Stale(Exception):
    """The recipe cannot be run again as reported: why, in the student's terms (``seen``: the outputs read before
    it broke off)."""
    seen: list = []


class Recipe:
    """What a task reported and what the judge saw of it: host ops, launches, and where its outputs were read."""

    def __init__(self):
        self.ops, self.roles, self.overflow = [], {}, False
        self.launches = []              # launches.Launcher's notes, in the order they ran
        self.found = {}                 # buffer number -> its bytes when a launch of the task first got it
        self.snapshots = []             # (host ops before, launches before, {output: ref}): where outputs were read
        self.numbers = {}               # id of the judge's Buffer -> the buffer number the recipe gave it
        self.memories = {}              # buffer number -> id of the judge's Buffer
        self.broken = None              # why the refs the submission gave contradict the memory the judge saw

    def place(self, ref, buf, dtype, offset, shape, strides) -> dict:
        """``ref`` (a tensor as the submission's side described it) with the geometry the judge itself saw: its
        buffer number, checked against every other ref of the same memory (one number for one memory, both
        ways), and the judge's own offset, shape, strides and dtype. A described view that is not the one the
        judge received would replay another program."""
        b = ref.get("b") if isinstance(ref, dict) else None
        b = self.numbers.get(id(buf), b)
        if not isinstance(b, int) or self.memories.setdefault(b, id(buf)) != id(buf):
            self.broken = self.broken or "the recipe named two of your buffers as one"
        self.numbers.setdefault(id(buf), b)
        return {"b": b, "n": buf.nbytes, "o": int(offset), "s": [int(v) for v in shape],
                "st": [int(v) for v in strides], "d": str(dtype).removeprefix("torch.")}

    def output(self, name: str, buf, dtype, offset, shape, strides):
        """The last snapshot's ref of output ``name``, placed where the judge read the output (``place``)."""
        if self.snapshots and name in SNAPSHOT:
            refs = self.snapshots[-1][2]
            refs[name] = self.place(refs.get(name), buf, dtype, offset, shape, strides)

    def answered(self, answer: dict, names):
        """A phase's answer: the recipe so far (its ops are the task's from the start) and its outputs' refs."""
        got = answer.get("recipe")
        if not isinstance(got, dict):
            return
        self.ops = got.get("ops") if isinstance(got.get("ops"), list) else []
        self.roles = got.get("roles") if isinstance(got.get("roles"), dict) else {}
        self.overflow = bool(got.get("overflow"))
        refs = got.get("refs") if isinstance(got.get("refs"), dict) else {}
        at = got.get("at")
        self.snapshots.append((at if isinstance(at, int) else len(self.ops), len(self.launches),
                               {k: refs[k] for k in names if k in SNAPSHOT and k in refs}))


def buffer_of(view: torch.Tensor) -> torch.Tensor:
    """The whole buffer ``view`` lies in, as a flat tensor of its dtype."""
    return torch.as_strided(view.detach(), (view.untyped_storage().nbytes() // view.element_size(),), (1,), 0)


def fresh(view: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A new draw like ``view``'s buffer (the whole of it): values of the same mean and spread, zeros kept, and the
    view's rows shuffled."""
    base = view.detach()
    data = buffer_of(base).double()
    finite = data[torch.isfinite(data)]
    mean = float(finite.mean()) if finite.numel() else 0.0
    std = float(finite.std()) if finite.numel() > 1 else 1.0
    new = torch.randn(data.shape, generator=gen, dtype=torch.float64) * (std or 1.0) + mean
    new = torch.where(data == 0, torch.zeros_like(new), new).to(base.dtype)
    if base.dim() >= 2 and base.shape[0] > 1:
        # the rows of the view in a new order: a zero row stays a zero row, elsewhere (where the host found them
        # on the first inputs is stale)
        rows = torch.as_strided(new, base.shape, base.stride(), base.storage_offset())
        rows.copy_(rows[torch.randperm(base.shape[0], generator=gen)].clone())
    return new


def generator() -> torch.Generator:
    """A generator of the judge's own, seeded now (after the fork) from the system's randomness."""
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)


class Buffers:
    """A recipe's memory while it is replayed: each buffer it names as a byte tensor of its own (on ``device``),
    and its host ops run again by their aten names. The simulator's replay (``Replay``) and the GPU's timed one
    (timed.py) both stand on it."""

    def __init__(self, device: str = "cpu"):
        self.device = torch.device(device)
        self.buffers = {}               # buffer number -> torch.uint8 tensor over its bytes
        self.found = {}                 # the recipe's buffers that no op of it made (Recipe.found)
        self.unknown = None             # or a function (buffer number, bytes) -> the memory to use for such a buffer

    def tensor(self, ref) -> torch.Tensor:
        """The replay's view of a ref."""
        try:
            b, n, dtype = int(ref["b"]), int(ref["n"]), DTYPES[str(ref["d"])]
            shape, strides, offset = [int(s) for s in ref["s"]], [int(s) for s in ref["st"]], int(ref["o"])
        except (KeyError, TypeError, ValueError) as e:
            raise Stale(f"a tensor the grader cannot read back ({e})") from None
        if b not in self.buffers and b in self.found and self.found[b].numel() == n:
            self.buffers[b] = self.found[b].clone()     # a workspace kept from an earlier call, as the launch found it
        if b not in self.buffers and self.unknown is not None and 0 <= n <= MAX_BYTES:
            self.buffers[b] = self.unknown(b, n)
        if b not in self.buffers:
            raise Stale("a launch or op read memory that no recorded op made and no input is: values the host "
                        "brought in some other way")
        data = self.buffers[b]
        size = element_size(dtype)
        if data.numel() != n or n % size:
            raise Stale("a buffer of another size than the recorded ops made")
        try:
            return data.view(dtype).as_strided(shape, strides, offset)
        except RuntimeError as e:
            raise Stale(f"a view past the end of its memory ({e})") from None

    def adopt(self, ref, t: torch.Tensor):
        """The buffer ``ref`` names is now ``t``'s storage (an op's output, or an input)."""
        try:
            b, n = int(ref["b"]), int(ref["n"])
        except (KeyError, TypeError, ValueError):
            raise Stale("an op's output the grader cannot read back") from None
        storage = t.untyped_storage()
        if storage.nbytes() != n or n > MAX_BYTES:
            raise Stale("an op made a buffer of another size than the recorded one")
        known = self.buffers.get(b)
        if known is not None and known.untyped_storage().data_ptr() == storage.data_ptr():
            return
        self.buffers[b] = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage, 0, (n,), (1,))

    def value(self, v):
        """An op's argument, from its plain description."""
        if not isinstance(v, dict) or len(v) != 1:
            raise Stale("an op argument the grader cannot read")
        (kind, x), = v.items()
        if kind == "t":
            return self.tensor(x)
        if kind == "v" and (x is None or isinstance(x, (bool, int, str))):
            return x
        if kind == "f":
            return float(x)
        if kind == "l" and isinstance(x, list):
            return [self.value(a) for a in x]
        if kind == "dtype" and str(x) in DTYPES:
            return DTYPES[str(x)]
        if kind == "device":
            return self.device
        if kind == "enum" and str(x) in ("contiguous_format", "preserve_format", "channels_last", "strided"):
            return getattr(torch, str(x))
        raise Stale(f"an op argument of a kind the grader does not replay ({str(x)[:40]})")

    def call(self, step: dict) -> tuple:
        """Run one host op of the recipe: (its name, overload, args, kwargs, tensor outputs, their refs)."""
        name, overload = str(step.get("op")), str(step.get("overload") or "default")
        if not name.startswith("aten::") or name in REFUSED or ("unsafe" in name and name != "aten::_unsafe_view"):
            raise Stale(f"the host op {name} is not a pure tensor op of torch's (aten) library")
        try:
            func = getattr(getattr(torch.ops.aten, name.removeprefix("aten::")), overload)
        except (AttributeError, RuntimeError):
            raise Stale(f"torch has no op {name}.{overload}") from None
        args = [self.value(a) for a in step.get("args") or []]
        kwargs = {str(k): self.value(v) for k, v in (step.get("kwargs") or {}).items()}
        if "device" in kwargs:
            kwargs["device"] = self.device
        try:
            out = func(*args, **kwargs)
        except Exception as e:          # noqa: BLE001 -- the op fails on the replay's tensors
            raise Stale(f"the host op {name} failed when run again ({text.error_line(e)})") from None
        outs = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
        refs = [r for r in step.get("out") or [] if r is not None]
        if len(outs) != len(refs):
            raise Stale(f"the host op {name} made other outputs than the recorded ones")
        return name, overload, args, kwargs, outs, refs


class Replay(Buffers):
    """The simulator's replay: which bytes of each buffer the replay's kernels wrote last (``made``: stored by a
    launch, or carried from such bytes by a transport op: a copy, a cast, a view, the sum of a partial buffer). An
    output the first run's kernels made must be the replay's kernels' work too: a recipe in which torch computes
    it describes another program than the one that ran."""

    def __init__(self, kernels):
        super().__init__("cpu")
        self.kernels = kernels
        self.made = {}                  # buffer number -> bool per byte: last written by the replay's kernels
        self.whole = {}                 # buffer number -> all its bytes made, none, or some (None): ``_whole``
        self.unmade = set()             # outputs read back where the replay's kernels had not made them
        self.moved = None               # how the first launch whose traffic differed from the first run's differed
        self.flow = None                # item 7's dataflow over the replay (rmsnorm_testkit/dataflow.py; ``run``)
        self.roles = {}                 # buffer number -> the input it is
        self.steps = 0                  # host ops replayed so far

    def _made(self, b: int) -> torch.Tensor:
        n = self.buffers[b].numel()
        if b not in self.made or self.made[b].numel() != n:
            self.made[b] = torch.zeros(n, dtype=torch.bool)
            self.whole[b] = False
        return self.made[b]

    def _whole(self, b: int) -> bool | None:
        """Did the replay's kernels make every byte of buffer ``b`` (True), none (False), or some (None)? Known
        until the flags change (``_flags_changed``): an input read by op after op is looked at once."""
        if b not in self.whole:
            made = self._made(b)
            self.whole[b] = True if bool(made.all()) else None if bool(made.any()) else False
        return self.whole[b]

    def _flags_changed(self, b: int):
        self.whole.pop(b, None)

    def _number(self, t: torch.Tensor | int):
        """The buffer number of a tensor's storage (or of a storage's address)."""
        ptr = t if isinstance(t, int) else t.untyped_storage().data_ptr()
        return next((b for b, data in self.buffers.items() if data.untyped_storage().data_ptr() == ptr), None)

    def _bytes(self, b: int, t: torch.Tensor) -> torch.Tensor:
        """The flags of ``t``'s bytes in its buffer ``b`` (``made``), as a view shaped (*t.shape, bytes of one): no
        copy and no index, whatever the size of the buffer the view lies in."""
        size = t.element_size()
        return self._made(b).as_strided((*t.shape, size), (*(s * size for s in t.stride()), 1),
                                        t.storage_offset() * size)

    def mark(self, t: torch.Tensor, made):
        """Note whether the replay's kernels made ``t``'s bytes: ``made``, one bool for all of it or one per element."""
        b = self._number(t)
        if b is not None and t.numel():
            at = self._bytes(b, t)
            value = (torch.tensor(made) if isinstance(made, bool) else made.reshape(*t.shape, 1)).expand_as(at)
            self._flags_changed(b)
            if torch._debug_has_internal_overlap(at) == 0:          # (0: none, as a view of distinct elements)
                at.copy_(value)
            else:                       # a view that names an element twice (stride 0): by index, the last one wins
                index = torch.arange(at.untyped_storage().nbytes()).as_strided(at.shape, at.stride(),
                                                                               at.storage_offset())
                self._made(b)[index.reshape(-1)] = value.reshape(-1)

    def made_each(self, t: torch.Tensor) -> torch.Tensor:
        """Per element of ``t``: were all its bytes last written by the replay's kernels?"""
        b = self._number(t)
        if b is None or not t.numel():
            return torch.zeros(t.shape, dtype=torch.bool)
        return self._bytes(b, t).all(-1)

    def is_made(self, t: torch.Tensor) -> bool:
        b = self._number(t)
        if b is None or not t.numel():
            return b is not None
        whole = self._whole(b)
        return whole if whole is not None else bool(self._bytes(b, t).all())

    def op(self, step: dict):
        name, overload, args, kwargs, outs, refs = self.call(step)
        written, ins = arguments(name, overload, args, kwargs)   # what the op writes into, and what it reads
        carried = name.removeprefix("aten::") in TRANSPORT_OPS and all(self.is_made(a) for a in ins)
        in_place = bool(written) or name.endswith("_") or overload.startswith("out") or "out" in kwargs
        summed = self.summed(name, args, kwargs, ins) if not in_place and len(outs) == 1 else None
        fresh = []                                  # the outputs that hold values it made (not views of its inputs)
        for ref, t in zip(refs, outs):
            if name in ALLOCATIONS and t.is_floating_point():
                t.fill_(float("nan"))
            self.adopt(ref, t)
            writes = any(same_memory(t, w) for w in written)
            aliased = any(same_memory(t, a) for a in ins)
            if summed is not None and summed.shape == t.shape:
                self.mark(t, summed)
            elif writes or not aliased:             # (a view of its input moves no data)
                self.mark(t, carried)
            if writes or not aliased:
                fresh.append(t)
        fresh += [w for w in written if not any(w is t for t in fresh)]
        self.follow(name.removeprefix("aten::"), ins, fresh, in_place,
                    carried or (summed is not None and bool(summed.all())))
        self.steps += 1

    def follow(self, short: str, ins: list, outs: list, in_place: bool, carried: bool):
        """Item 7's dataflow (``self.flow``): which buffers hold the host's work on an activation."""
        if self.flow is None or not outs:
            return
        reads = 0 if short in SHAPE_ONLY or not ins else max(a.numel() for a in ins)
        numbers = [self._number(a) for a in ins] if reads else []
        moves = short in TRANSPORT_OPS and all(a.dtype == outs[0].dtype for a in ins)
        op = {"op": short, "reads": reads, "output_numel": max((o.numel() for o in outs), default=0),
              "dtype": str(outs[0].dtype).removeprefix("torch."), "where": "", "step": self.steps, "moves": moves,
              "roles": sorted({self.roles[b] for b in numbers if b in self.roles})}
        self.flow.op(op, numbers, [self._number(o) for o in outs], in_place=in_place, carried=carried)

    def summed(self, name: str, args: list, kwargs: dict, ins: list) -> torch.Tensor | None:
        """For a sum, which elements of its output sum only the kernels' values (a padded partial buffer whose
        padding torch filled, summed, then sliced to dg: the columns dg keeps are the kernels' work); else None."""
        if name != "aten::sum" or len(ins) != 1 or not ins[0].dim():
            return None
        dims = args[1] if len(args) > 1 and isinstance(args[1], list) else kwargs.get("dim")
        keep = bool(args[2]) if len(args) > 2 and isinstance(args[2], bool) else bool(kwargs.get("keepdim", False))
        made = self.made_each(ins[0])
        if not dims:
            return made.all().reshape((1,) * made.dim() if keep else ())
        return made.amin(dim=tuple(int(d) for d in dims), keepdim=keep)

    def launch(self, note: dict):
        """One launch as the judge ran it, on the replay's tensors."""
        kernel = self.kernels.kernel(note["kernel"], {})
        pos = [self.arg(a) for a in note["pos"]]
        kw = {k: self.arg(a) for k, a in note["kw"].items()}
        kernel.set_schedule_state(note["state"])
        stored, did, loaded = [], {}, set()

        def note_stores(launch, records):
            stored.extend(r for r in records if r.kind.writes())
            loaded.update(r.buf.storage_key[0] for r in records if r.kind.reads())
            did.update(footprint(records, launch.race, launch))      # counted again, as the first run's was
        try:
            with observers.silenced():
                observers.register(races.check, order=observers.CHECKS)
                observers.register(note_stores)
                kernel.run(*pos, grid=note["grid"], **kw)
        except Exception as e:          # noqa: BLE001 -- the kernel's error on the fresh inputs
            if note.get("raised"):      # as on the grader's inputs, where the host went on without it
                return
            raise Stale(f"{kernel.fn.__name__} failed when run again on new inputs ({text.error_line(e)})") from None
        if note.get("raised") and self.moved is None:
            self.moved = (f"{kernel.fn.__name__} raised an error on the grader's inputs (the host went on without it) "
                          f"and ran on the new inputs")
        first = note.get("footprint")
        if isinstance(first, dict) and did and self.moved is None:
            self.moved = moved(kernel.fn.__name__, first, did)
        for r in stored:                # the bytes each store reached: the kernels' own, until an op writes there
            b = self._number(r.buf.storage_key[0])
            if b is not None:
                size = r.buf.tensor_element_size
                at = (r.active_offsets()[0].reshape(-1) + r.buf.storage_offset)[:, None] * size + torch.arange(size)
                self._made(b)[at.reshape(-1)] = True
                self._flags_changed(b)
        if self.flow is not None:
            stores = {self._number(r.buf.storage_key[0]) for r in stored} - {None}
            self.flow.launch([self._number(p) for p in loaded], stores, [b for b in stores if self._whole(b) is True])

    def arg(self, a):
        if isinstance(a, tuple) and a and a[0] == "ref":
            return self.tensor(a[1])
        if isinstance(a, tuple) and a and a[0] == "constexpr":
            return constexpr(a[1])
        return a


def same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def arguments(name: str, overload: str, args: list, kwargs: dict) -> tuple:
    """(the tensors an op writes into, the tensors it reads), from its schema: an argument marked written
    (``Tensor(a!)``: ``out=``, ``max=``, ``values=``, the self of an in-place op) is written, every other tensor
    argument read (a fill's value, an index, a source)."""
    try:
        schema = torch._C._get_schema(name, "" if overload == "default" else overload)
    except (AttributeError, RuntimeError):
        schema = None
    formal = list(schema.arguments) if schema is not None else []
    given = [(formal[i] if i < len(formal) else None, a) for i, a in enumerate(args)]
    by_name = {f.name: f for f in formal}
    given += [(by_name.get(k), v) for k, v in kwargs.items()]
    written, read = [], []
    for f, v in given:
        leaves = [t for t in torch.utils._pytree.tree_leaves(v) if isinstance(t, torch.Tensor)]
        writes = f is not None and f.alias_info is not None and f.alias_info.is_write
        (written if writes or (f is None and v is kwargs.get("out")) else read).extend(leaves)
    return written, read


def moved(kernel: str, first: dict, again: dict) -> str | None:
    """How a launch's replay did other work than the launch did on the first inputs (None: the same), in words."""
    if bool(first.get("race")) != again["race"]:
        return (f"{kernel} {'raced' if again['race'] else 'did not race'} on the new inputs and "
                f"{'did not' if again['race'] else 'did'} on the grader's")
    for key, what in (("order", "depended on the order its programs ran"),
                      ("lanes", "loaded masked-off lanes without other=")):
        if bool(first.get(key)) != bool(again.get(key)):
            did, did_not = ("the new inputs", "the grader's") if again.get(key) else ("the grader's", "the new ones")
            return f"{kernel} {what} on {did} and not on {did_not}"
    was = {k: list(v) for k, v in (first.get("args") or {}).items()}
    for name in sorted(set(was) | set(again["args"])):
        a, b = was.get(name, [0, 0, 0]), again["args"].get(name, [0, 0, 0])
        if a != b:
            said = lambda c: f"{c[0]} loads, {c[1]} stores and {c[2]} atomics"      # noqa: E731
            return f"{kernel} made {said(b)} through {name} on the new inputs, {said(a)} on the grader's"
    return None


def placed(ops: list, launches: list) -> list:
    """[(order key, "op" or "launch", what)] of a recipe: each launch just before the host op its "at" names (the
    ops reported before it ran), launches in the order they ran; sort by the key to replay them."""
    events = [((i, 1, 0), "op", op) for i, op in enumerate(ops)]
    for j, launch in enumerate(launches):
        at = launch.get("at") if isinstance(launch, dict) else None
        if not isinstance(at, int) or not 0 <= at <= len(ops):
            raise Stale("a launch the recipe does not place")
        events.append(((at, 0, j), "launch", launch))
    return events


def run(recipe: Recipe, replay: Replay, inputs: dict) -> list:
    """Replay ``recipe`` with ``inputs`` ({role: the fresh view of that input}); returns each snapshot's
    outputs, {name: tensor}, in the order the snapshots were taken."""
    if recipe.overflow:
        raise Stale("the host ran more torch ops than the grader replays")
    if recipe.broken:
        raise Stale(recipe.broken)
    replay.found = recipe.found
    replay.roles = {int(b): role for b, role in recipe.roles.items()}
    if "x" in inputs and inputs["x"].dim():
        x = inputs["x"]
        replay.flow = dataflow.Flow(x.numel() // max(1, x.shape[-1]), x.shape[-1])
    for b, role in recipe.roles.items():
        if role in inputs:
            t = inputs[role]
            replay.buffers[int(b)] = torch.empty(0, dtype=torch.uint8).set_(
                t.untyped_storage(), 0, (t.untyped_storage().nbytes(),), (1,))
    events = placed(recipe.ops, recipe.launches)
    for k, (at, launched, refs) in enumerate(recipe.snapshots):
        events.append(((min(max(at, 0), len(recipe.ops)), 0, launched - 0.5), "snapshot", k))
    seen = [None] * len(recipe.snapshots)
    try:
        for _, kind, what in sorted(events, key=lambda e: e[0]):
            if kind == "op":
                replay.op(what)
            elif kind == "launch":
                replay.launch(what)
            else:
                views = {k: replay.tensor(ref) for k, ref in recipe.snapshots[what][2].items()}
                seen[what] = {k: v.clone() for k, v in views.items()}
                for k, v in views.items():
                    if replay.flow is not None and k in OUTPUTS:
                        replay.flow.output(k, replay._number(v))
                y, x = views.get("y"), inputs.get("x")
                if replay.flow is not None and y is not None and x is not None and y.dtype != x.dtype:
                    replay.flow.dy_cast = str(y.dtype).removeprefix("torch.")       # autograd's cast of dy
                replay.unmade |= {k for k, v in views.items() if not replay.is_made(v)}
    except Stale as e:
        e.seen = [s for s in seen if s is not None]          # the outputs read before the replay broke off
        raise
    return seen


def unchanged(first: torch.Tensor, again: torch.Tensor, first_ref: torch.Tensor, again_ref: torch.Tensor) -> bool:
    """Did an output come out the same on the fresh inputs as on the first, in most of the elements whose right
    value changed (the float64 references ``first_ref`` and ``again_ref``, rounded to the output's dtype)? Work
    computed from the inputs changes with them: values that stay are the host's, computed from the first inputs."""
    if first.numel() != again.numel() or first.dtype != again.dtype or first_ref.numel() != first.numel():
        return False
    first, again = first.reshape(-1), again.reshape(-1)
    moved = first_ref.reshape(-1).to(first.dtype) != again_ref.reshape(-1).to(first.dtype)
    n = int(moved.sum())
    return n > 0 and 2 * int(((first == again) & moved).sum()) > n


def told_apart(name: str, again: torch.Tensor, first: torch.Tensor | None, again_ref: torch.Tensor,
               x: torch.Tensor) -> bool:
    """Does the replay's output ``again`` show that the kernels computed it from the fresh inputs? It must be right
    on them where neither the first run's values (``first``) nor nothing at all (zeros: a buffer the replay's
    kernels never filled) would be. Where every right value lies within the tolerance of zero (dx at N = 1, about
    r·dy·g·eps / x², on a draw of large x), any stale output passes, and the draw tells nothing apart."""
    if not right(name, again, again_ref, x):
        return False
    if first is not None and right(name, first, again_ref, x):
        return False
    return not right(name, torch.zeros_like(again), again_ref, x)


def right(name: str, got: torch.Tensor, expected: torch.Tensor, x: torch.Tensor) -> bool:
    """Is output ``name`` right on the first inputs? (Only a right output can be the host's stale values: a wrong
    one is the first run's to charge, with its own cause.)"""
    return compare.compare(name, got, expected, x, hints=False) is None


def references(x, g, dy, eps, requires) -> dict:
    """{output: its float64 reference} for the inputs given (dx and dg only where asked for and dy is given)."""
    y, r, dx, dg = compare.reference(x, g, dy, eps)
    return {"y": y, "r": r, **({"dx": dx} if dx is not None and "x" in requires else {}),
            **({"dg": dg} if dg is not None and "g" in requires else {})}
