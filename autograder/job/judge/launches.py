"""The judge's side of a launch: the kernel compiled from the judge's own copy of rmsnorm.py, run on the
simulator against the judge's mirrors of the shared memory, and what it read and stored noted.

A launch request (client.py) names a kernel by its name and first line; the judge finds that ``def`` in the
file it read itself, binds the kernel's outside names from the request's plain descriptions (a kernel,
a constexpr's value, a dtype's name, a module or an op of the language: nothing else exists here), and
compiles it in Triton's language (mini_triton/frontend.py). Its tensor arguments are views of the judge's
mirrors (provenance.py). After the launch, the simulator's own records say which elements each argument
loaded and stored. A launch that loaded memory the host filled is replayed (:meth:`Launcher.replay`) on that
memory made random: the stored values that change with it derive from the host's values.
"""
from __future__ import annotations

import ast
import linecache
import time
import types

import torch

import mini_triton
from mini_triton import dtypes
from mini_triton import frontend, observers
from mini_triton.blocks import constexpr
from mini_triton.launcher import JITFunction
from mini_triton.memory import Kind
from rmsnorm_testkit import text

from ..wire.errors import Crash
from ..wire.names import LANGUAGE, NAMESPACES
from .provenance import TAINTED, Memory, Refused

REPLAY_S = (2.0, 4.0)          # a replay's CPU time: at most this many seconds, plus this many times the launch's


def plain(d):
    """A constant described by client.plain, or raise Refused."""
    if not isinstance(d, dict):
        raise Refused(f"a value described as {type(d).__name__}")
    if "value" in d and (d["value"] is None or isinstance(d["value"], (bool, int, str))):
        return d["value"]
    if "float" in d and isinstance(d["float"], str):
        return float(d["float"])
    if "dtype" in d:
        return dtype(d["dtype"])
    if "other" in d:
        return type(str(d["other"])[:60] or "object", (), {})()       # an object of that name: the simulator refuses it
    raise Refused("a value the judge does not know how to read")


def dtype(name):
    value = getattr(mini_triton.language, str(name), None) if str(name) in mini_triton.language.__all__ else None
    if not isinstance(value, dtypes.dtype):
        raise Refused(f"no dtype named {name!r}")
    return value


def footprint(records, race, launch=None) -> dict:
    """What one launch did, as its replay on other inputs must do it again (replay.Replay.launch): each argument's
    plain loads, plain stores and atomics (but compare-and-swaps: a spin lock's tries depend on the order programs
    arrive), from the simulator's records of its accesses, whether it raced, whether its result depended on the
    order programs ran, and whether it loaded masked lanes without other= (``launch``'s). A kernel's traffic and
    these depend on the shapes it is given, never on the values."""
    out = {}
    for r in records:
        if r.kind is Kind.ATOMIC and getattr(r, "op", None) == "atomic_cas":
            continue
        counts = out.setdefault(r.buf.name, [0, 0, 0])
        counts[0 if r.kind is Kind.LOAD else 1 if r.kind is Kind.STORE else 2] += int(r.total())
    return {"args": out, "race": bool(race), "order": bool(getattr(launch, "order_dependent", None)),
            "lanes": bool(getattr(launch, "undefined_lanes", None))}


class Kernels:
    """The submission's kernels, compiled from the judge's copy of its file, by (name, first line)."""

    def __init__(self, path: str, source: str):
        self.path = path
        linecache.cache[path] = (len(source), None, source.splitlines(True), path)
        try:
            tree = ast.parse(source)
        except SyntaxError:
            tree = ast.Module([], [])
        self.defs = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                self.defs[(node.name, first)] = node
        self.compiled = {}

    def kernel(self, ident: dict, seen: dict) -> JITFunction:
        """The kernel a request describes (its helpers and constexprs bound as described)."""
        if "ref" in ident:
            if ident["ref"] not in seen:
                raise Refused("a kernel that refers to one not described")
            return seen[ident["ref"]]
        name, line = str(ident.get("name")), ident.get("line")
        node = self.defs.get((name, line))
        if node is None:
            raise Refused(f"the kernel {name} (line {line}) is not a def of rmsnorm.py; Triton compiles a kernel "
                          f"from its source, so define it with def in the file")
        key = repr(ident)
        if key in self.compiled:                # and the helpers described inside it, which later names may refer to
            jit, inside = self.compiled[key]
            seen.update(inside)
            return jit
        before = set(seen)
        proto = self._proto(node, line, ident.get("defaults") or {})
        jit = self.make(proto)
        seen[ident.get("id")] = jit
        for k, v in (ident.get("globals") or {}).items():
            proto.__globals__[str(k)] = self._bound(v, seen)
        self.compiled[key] = jit, {i: f for i, f in seen.items() if i not in before}
        return jit

    def parameters(self, ident: dict) -> list:
        """The names of a described kernel's parameters, in order, from its def."""
        node = self.defs.get((str(ident.get("name")), ident.get("line")))
        if node is None:
            raise KeyError(ident.get("name"))
        return [p.arg for p in (*node.args.args, *node.args.kwonlyargs)]

    def make(self, proto):
        """The kernel compiled from its def: here, on the simulator (timed.py's kernels compile with Triton)."""
        return JITFunction(proto)

    def _proto(self, node: ast.FunctionDef, line: int, defaults: dict):
        """A function with the kernel's signature, file and first line: the simulator reads its source from the
        file (linecache) and compiles that again; the stub's own body is never run."""
        a = node.args
        if a.vararg or a.kwarg or a.posonlyargs:
            raise Refused(f"{node.name}: a kernel takes named parameters only (no *args, **kwargs or /)")
        stub = f"def {node.name}({', '.join(p.arg for p in a.args)}" + \
               (f", *, {', '.join(p.arg for p in a.kwonlyargs)}" if a.kwonlyargs else "") + "):\n    pass\n"
        code = next(c for c in compile(stub, self.path, "exec").co_consts if isinstance(c, types.CodeType))
        fn = types.FunctionType(code.replace(co_firstlineno=line), {"__name__": "rmsnorm"}, node.name)
        with_default = [p.arg for p in a.args[len(a.args) - len(a.defaults):]]
        fn.__defaults__ = tuple(self.plain(defaults.get(n, {"other": "missing"})) for n in with_default) or None
        fn.__kwdefaults__ = {p.arg: self.plain(defaults.get(p.arg, {"other": "missing"}))
                             for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None} or None
        fn.__annotations__ = {p.arg: "tl.constexpr" for p in (*a.args, *a.kwonlyargs)
                              if p.annotation is not None and ast.unparse(p.annotation).endswith("constexpr")}
        fn.__module__ = "rmsnorm"
        return fn

    plain = staticmethod(plain)             # a described constant, in the language the kernels compile in

    def _bound(self, d, seen):
        """An outside name of a kernel, from its description (client.describe)."""
        kind = d.get("kind") if isinstance(d, dict) else None
        if kind == "kernel":
            return self.kernel(d, seen)
        if kind == "constexpr":
            return constexpr(plain(d.get("value")))
        if kind == "dtype":
            return dtype(d.get("name"))
        if kind == "module" and d.get("name") in LANGUAGE:
            return LANGUAGE[d["name"]]
        if kind == "op" and d.get("space") in NAMESPACES and d.get("name") in NAMESPACES[d["space"]].__all__:
            return getattr(NAMESPACES[d["space"]], d["name"])
        return frontend.Foreign(str(d.get("type", "object"))[:60], bool(d.get("module")), bool(d.get("function")),
                                plain(d["plain"]) if isinstance(d.get("plain"), dict) else frontend.Foreign.NONE,
                                str(d.get("name", ""))[:60], self._as_written(d, seen))

    def _as_written(self, d: dict, seen: dict):
        """A plain function's def in rmsnorm.py, compiled as a @jit helper: what the simulator runs in its place
        when it records the rule Triton enforces (rule mode "record"); None for anything else."""
        ident = d.get("as_written") if d.get("function") else None
        if not isinstance(ident, dict) or ("ref" not in ident and (str(ident.get("name")), ident.get("line"))
                                           not in self.defs):
            return None
        try:
            return self.kernel(ident, seen)
        except Refused:
            return None


class Launcher:
    """Runs each launch request against the judge's memory, in the current phase's record."""
    exchanges = True                       # run a launch that passed two tensors the other way round with them
                                           # exchanged (:meth:`exchange`); the project's tests turn it off to judge
                                           # the GPU's cases, which run as written, on the simulator

    def __init__(self, memory: Memory, kernels: Kernels):
        self.memory, self.kernels = memory, kernels
        self.record = None                 # the current phase's mini_triton.record()
        self.stored = None                 # the buffers the launch stored into ({id: Buffer}); None: unknown
        self.replay_until = None           # while a replay runs: the CPU time (process_time) it must end by
        self.replay_spent = False          # its time ran out (the watchdog asked: over_replay)
        self.inputs = {}                   # {storage: role} of the task's inputs (x, g, dy, r)
        self.exchanged = []                # this phase's launches run with two arguments exchanged (:meth:`exchange`)
        self.recipe = None                 # the task's replay.Recipe: each launch noted as it ran, for the replay
        self.refs = {}                     # {id of a launch's tensor argument: its ref} (recipe.py)
        self.failed = []                   # this phase's launches that raised, as the judge saw them (:class:`Crash`)

    def over_replay(self) -> bool:
        """Has a running replay used its time? (The watchdog asks, beside the group's budget.)"""
        if self.replay_until is not None and time.process_time() > self.replay_until:
            self.replay_spent = True
        return self.replay_spent

    def run(self, request: dict, fds: list) -> dict:
        """The reply: {"stored": [distinct elements stored, for each tensor argument in order]} when it ran,
        {"error": {type, message}} when it did not."""
        args = []
        try:
            kernel = self.kernels.kernel(request.get("kernel") or {}, {})
            views, fresh = {}, set()
            self.refs = {}
            pos = [self._arg(a, fds, views, fresh) for a in request.get("args", [])]
            kw = {str(k): self._arg(v, fds, views, fresh) for k, v in (request.get("kwargs") or {}).items()}
            pos, kw = self.exchange(kernel, pos, kw)
            raw = request.get("grid", [])
            grid = int(raw) if isinstance(raw, int) else tuple(int(g) for g in raw)   # an int: a rule broken
            args = list(views.values())
            self.note(request, kernel, pos, kw, grid, views)
            stored = self.execute(kernel, pos, kw, grid, views)
            return {"stored": [stored.get(key, 0) for key in views]}
        except Refused as e:
            return {"error": {"type": "ValueError", "message": f"the grader cannot take this launch: {e}"}}
        except Exception as e:                               # noqa: BLE001 -- the kernel's error, the student's
            self.failed.append(Crash.of(e, request, self.kernels.path))
            return {"error": {"type": type(e).__name__, "message": str(e)}}
        finally:
            for b in {id(b): b for b, *_ in args}.values():
                if self.stored is None or id(b) in self.stored:
                    b.write_back()
            self.stored = None

    def note(self, request, kernel, pos, kw, grid, views):
        """The launch as it is about to run (its arguments exchanged, if they were), for the task's replay: each
        tensor argument as the ref the submission's side gave it (recipe.py), the rest as the kernel gets it; and
        the bytes of each buffer the task's launches had not been given before (a workspace kept from an earlier
        call: the replay starts it from what this launch found there, replay.Recipe.found)."""
        if self.recipe is None:
            return
        placed = {}
        for a in [*pos, *kw.values()]:
            if id(a) in views:              # where the judge itself sees it, not where the submission says it is
                buf, dtype, offset, shape, strides = views[id(a)][:5]
                placed[id(a)] = self.recipe.place(self.refs.get(id(a)), buf, dtype, offset, shape, strides)
                if placed[id(a)]["b"] not in self.recipe.found:
                    self.recipe.found[placed[id(a)]["b"]] = buf.mirror.clone()
        arg = lambda a: ("ref", placed[id(a)]) if id(a) in placed else a    # noqa: E731
        self.recipe.launches.append({"kernel": request.get("kernel") or {}, "at": request.get("at"), "grid": grid,
                                     "state": kernel.schedule_state(), "pos": [arg(a) for a in pos],
                                     "kw": {k: arg(v) for k, v in kw.items()}})

    def exchange(self, kernel, pos: list, kw: dict) -> tuple:
        """(pos, kw), with the arguments of two parameters exchanged when the launch passes them the other way
        round: a parameter named for one role (``x_ptr``; text.param_role) given another role's input (dy, say),
        while the parameter named for that role is given anything but it (x, or a tensor the phase returns, as
        y or dx). The kernel then runs with each tensor where its name says, so that one mistake in the order of
        a launch's arguments is charged once, as what it is (self.exchanged, the phase's info "exchanged"), and
        everything else the kernels do is checked as usual."""
        if not self.exchanges:
            return pos, kw
        bound = kernel.bind(pos, kw)
        role = {name: self.inputs.get(v.untyped_storage().data_ptr()) if isinstance(v, torch.Tensor) else None
                for name, v in bound.items()}
        by_role = {}
        for name in bound:
            by_role.setdefault(text.param_role(name), name)
        for p in bound:
            named, given = text.param_role(p), role[p]
            q = by_role.get(given) if named and given and given != named else None
            if q is None or q == p or role[q] == given or not isinstance(bound[q], torch.Tensor):
                continue
            swap = {id(bound[p]): bound[q], id(bound[q]): bound[p]}
            self.exchanged.append({"kernel": kernel.fn.__name__, "params": [p, q]})
            return ([swap.get(id(a), a) for a in pos], {k: swap.get(id(v), v) for k, v in kw.items()})
        return pos, kw

    def execute(self, kernel, pos, kw, grid, views) -> dict:
        """Run the launch on the judge's memory and note what it did (:meth:`_ran`). ``views``: {id of each tensor
        argument: (Buffer, dtype, offset, shape, strides, the view)}."""
        args = list(views.values())
        before = {id(b): b.mirror.clone() for b, *_ in args}
        count, state, started = len(self.record.launches), kernel.schedule_state(), time.process_time()
        try:
            kernel.run(*pos, grid=grid, **kw)
        except BaseException:
            self._failed(args, before)
            if self.recipe is not None and self.recipe.launches:
                self.recipe.launches[-1]["raised"] = True      # its replay must raise too (replay.Replay.launch)
            raise
        again = Replay(kernel, pos, kw, grid, {id(b): b for b, *_ in args}, before, state,
                       time.process_time() - started)
        stats = self.record.launches[count:]
        if self.recipe is not None and self.recipe.launches and stats:
            self.recipe.launches[-1]["footprint"] = footprint(
                [r for a in stats[0].args.values() for r in a.records], stats[0].race, stats[0])
        return self._ran(kernel, pos, kw, views, stats, again)

    def _arg(self, a, fds, views, fresh: set):
        """A launch's argument as the kernel gets it; a tensor's memory is taken in (``refresh``) once per launch,
        however many of its views the launch is given (``fresh``: the buffers taken in so far). What the host
        writes after that is seen at the next look, as a write during the launch would be."""
        if isinstance(a, dict) and "tensor" in a:
            h = a["tensor"]
            fd = fds[int(h["fd"])]
            buf = self.memory.buffer(fd, int(h["nbytes"]))
            if id(buf) not in fresh:
                fresh.add(id(buf))
                self.memory.refresh(buf)
            geometry = (getattr(torch, str(h["dtype"])), int(h["offset"]), [int(s) for s in h["shape"]],
                        [int(s) for s in h["strides"]])
            if not isinstance(geometry[0], torch.dtype):
                raise Refused(f"no torch dtype {h['dtype']!r}")
            view = self.memory.settle(buf, *geometry)
            views[id(view)] = (buf, *geometry, view)
            if isinstance(a.get("ref"), dict):
                self.refs[id(view)] = a["ref"]
            return view
        if isinstance(a, dict) and "constexpr" in a:
            return constexpr(plain(a["constexpr"]))
        return plain(a)

    def _ran(self, kernel, pos, kw, views, stats, again=None) -> dict:
        """Note what the launch read and stored, by the simulator's records of each argument; returns the distinct
        elements it stored through each tensor argument ({id of its view: count})."""
        bound = kernel.bind(pos, kw)
        by_name = {name: views[id(v)] for name, v in bound.items() if id(v) in views}
        if not stats:
            return {}
        reads, stores = {}, {}                       # {(buffer, element size): Touched}, whatever the records' number
        for a in stats[0].args.values():
            if a.name not in by_name:
                continue
            buf, dt, offset, shape, strides, view = by_name[a.name]
            size = view.element_size()
            for r in a.records:
                if r.kind.reads() and (buf.dirty() or id(buf) in self.memory.overwritten):
                    touched(reads, buf, size).add(r)
                if r.kind.writes():
                    touched(stores, buf, size).add(r)
        reads, stores = [t.masked() for t in reads.values()], [t.masked() for t in stores.values()]
        loaded = self.memory.dirty_loaded(reads)
        self.memory.loaded_overwritten(reads, stores)
        whole = loaded is None                       # loads the judge cannot weigh: all it stored is the host's
        derived = self.replay(again, stores) if loaded and stores and not whole and again is not None else None
        self.memory.launch_stored(stores, whole, derived)
        self.stored = {id(buf): buf for buf, _, _ in stores}
        if not whole:
            for name, (buf, dt, offset, shape, strides, view) in by_name.items():
                if id(buf) in self.stored:
                    self.memory.add_kernel_view(buf, dt, offset, shape, strides)
        args = stats[0].args
        return {id(bound[name]): args[name].distinct("store") for name in by_name if name in args}

    def replay(self, again: "Replay", stores) -> dict:
        """Which stored elements derive from the dirty memory the launch loaded: the launch run again, unseen by
        every check and count, in the same program order, on the memory as it was before it with each dirty byte
        made random (provenance.Memory.perturbed); an element stored whose bytes then differ took its value from
        the host's memory, by whatever path (arithmetic, an address, a mask, a branch, an atomic). A replay that
        fails or runs out of time (random values as an index or a loop bound) makes everything it stored
        derived. Returns {(id of the Buffer, element size): mask over its elements}; the memory is left as the
        launch left it."""
        after = {k: b.mirror.clone() for k, b in again.buffers.items()}
        kept = again.kernel.schedule_state()
        failed = False
        try:
            for k, b in again.buffers.items():
                b.mirror.copy_(self.memory.perturbed(b, again.before[k]))
            again.kernel.set_schedule_state(again.state)
            self.replay_until, self.replay_spent = time.process_time() + REPLAY_S[0] + REPLAY_S[1] * again.cpu, False
            try:
                with observers.silenced():
                    again.kernel.run(*again.pos, grid=again.grid, **again.kw)
            except Exception:                   # noqa: BLE001 -- the kernel's error on random data: "derived"
                failed = True
            except BaseException:               # the watchdog: the replay's own time is "derived", the group's ends it
                if not self.replay_spent:
                    raise
                failed = True
            derived = {}
            for buf, size, elements in stores:
                if buf.nbytes % size:
                    continue
                now, then = buf.mirror.view(-1, size), after[id(buf)].view(-1, size)
                changed = elements if failed else elements & (now != then).any(1)
                key = (id(buf), size)
                derived[key] = derived[key] | changed if key in derived else changed
            return derived
        finally:
            self.replay_until, self.replay_spent = None, False
            for k, b in again.buffers.items():
                b.mirror.copy_(after[k])
            again.kernel.set_schedule_state(kept)

    def _failed(self, args, before):
        """A launch that raised may have stored part of its work, as a GPU would have: keep it, as tainted."""
        for b, *_ in args:
            b.mark(b.mirror != before[id(b)], TAINTED)


class Replay:
    """What running a launch again takes: the kernel, its arguments and grid, its buffers ({id: Buffer}) and their
    bytes before it ran, its schedule's state then (launcher.JITFunction.schedule_state), and its CPU seconds."""

    def __init__(self, kernel, pos, kw, grid, buffers, before, state, cpu):
        self.kernel, self.pos, self.kw, self.grid = kernel, pos, kw, grid
        self.buffers, self.before, self.state, self.cpu = buffers, before, state, cpu


def touched(by_buffer: dict, buf, size: int) -> "Touched":
    key = (id(buf), size)
    if key not in by_buffer:
        by_buffer[key] = Touched(buf, size)
    return by_buffer[key]


class Touched:
    """The elements of one buffer that a launch's access records touched, as one mask over its elements of
    ``size`` bytes, counted from its first. A kernel with a row loop leaves a record per iteration: their ranges
    are summed as edges (+1 where a range starts, -1 past its end) and the mask is made once, so the cost
    grows with the records plus the buffer, never with their product."""

    def __init__(self, buf, size: int):
        self.buf, self.size, self.count = buf, size, buf.nbytes // size
        self.edges = torch.zeros(self.count + 1, dtype=torch.int32)
        self.lanes = None                           # the elements of records with lanes listed one by one

    def add(self, r):
        base = r.buf.storage_offset
        if r.dense:
            P = int(r.pids.numel())
            lo = (r.lo.expand(P) if r.lo.numel() == 1 else r.lo) + base
            hi = (r.hi.expand(P) if r.hi.numel() == 1 else r.hi) + base
            keep = (r.count.expand(P) if r.count.numel() == 1 else r.count) > 0
            lo, hi = lo[keep].clamp(0, self.count), (hi[keep] + 1).clamp(0, self.count)
            self.edges.index_add_(0, lo, torch.ones_like(lo, dtype=torch.int32))
            self.edges.index_add_(0, hi, -torch.ones_like(hi, dtype=torch.int32))
            return
        if self.lanes is None:
            self.lanes = torch.zeros(self.count, dtype=torch.bool)
        self.lanes[(r.active_offsets()[0] + base).clamp(0, max(0, self.count - 1))] = True

    def masked(self) -> tuple:
        """(Buffer, element size, mask over its elements), as provenance.Memory takes a launch's accesses."""
        mask = torch.cumsum(self.edges, 0)[:self.count] > 0
        return self.buf, self.size, mask if self.lanes is None else mask | self.lanes
