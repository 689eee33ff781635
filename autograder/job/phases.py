"""A phase of a task (its forward, or its backward) as the submission's side sees it: what ran, and what made
each output.

On the simulator the judge's process records the launches and tells what made each output from memory
(remote.py, provenance.py); in the submission's process a Phase keeps the host-side torch ops between the
launches and the calls of torch's norms, with their lines (mini_triton.record, norms.py): advice that names a
line in the feedback, and, with the elements the judge says the kernels stored, which outputs the host only
moved, converted or summed from the kernels' memory (the lecture's ``dg_partial.sum(0)``: host.claim). On a
GPU (tasks.py) nothing is recorded but the calls of torch's own norms.
"""
import contextlib

HOST_OP_CAP = 64            # host ops reported per phase: enough to name the culprit, bounded for outputs.json
PHASES = {"fwd": "forward", "bwd": "backward"}                     # each phase's key in a task's info: its name
MADE_IN = {"y": "fwd", "r": "fwd", "dx": "bwd", "dg": "bwd"}       # the phase whose kernels make each output
MADE_BY = {output: PHASES[phase] for output, phase in MADE_IN.items()}
# Host ops that carry a kernel's result without computing anything new: a copy, a dtype
# conversion, a view, or the sum of a partial buffer (the lecture's dg_partial.sum(0)).
TRANSPORT_OPS = frozenset({"_to_copy", "copy_", "clone", "contiguous", "sum", "view", "_unsafe_view", "reshape",
                           "expand", "squeeze", "unsqueeze", "t", "transpose", "permute", "as_strided", "slice",
                           "select", "alias", "detach"})


def carried_from(op) -> int:
    """How many elements of its input kernels must have stored for a transport op's output to carry their work: the
    whole input; for a sum, as many as it returns (a partial buffer padded to a power of two, its padding left to
    ``torch.zeros``, then summed and sliced: ``dg_partial.sum(0)[:N]``). The judge checks which values the kernels
    made, element by element (remote.summed_partials)."""
    return op.output_numel if op.name == "sum" else op.max_input_numel


def storage(t):
    """The memory ``t`` lives in (its storage's address), or None."""
    return t.untyped_storage().data_ptr() if t is not None else None


class Phase:
    """Record one phase (forward or backward) on the simulator: its launches and host ops, and on any
    backend the calls of torch's own norms (norms.watch_norms)."""
    current = None

    def __init__(self, triton):
        self.triton, self.rec, self.norms = triton, None, []

    def __enter__(self):
        # torch.empty memory holds NaN here, as it holds old data on a GPU: a read before a write shows
        self._cm = self.triton.record(host_ops=True, poison=True) if self.triton else contextlib.nullcontext()
        self.rec = self._cm.__enter__()
        Phase.current = self
        return self

    def __exit__(self, *exc):
        Phase.current = None
        return self._cm.__exit__(*exc)

    def stored(self, t):
        """A bool tensor like ``t``: which of its elements this phase's kernels wrote (None off the simulator)."""
        if self.rec is None:
            return None
        import mini_triton                             # a recording exists on the simulator only
        with mini_triton.unrecorded():                 # the grader's own ops are not the submission's host ops
            return self.rec.stored_mask(t).clone()

    def summary(self, roles):
        """Launch statistics and host reads, each buffer tagged with its role (x, y, dy...) if it has one."""
        if self.rec is None:
            return {"norms": self.norms} if self.norms else {}
        by_storage = {v: k for k, v in roles.items() if v}
        out = {"launches": launch_records(self.rec.launches, roles), "norms": self.norms}
        if self.rec.host_ops is not None:
            reads = [o for o in self.rec.host_ops if o.reads > 0]
            out["host_ops"] = [{"op": o.name, "reads": o.reads, "output_numel": o.output_numel,
                                "dtype": o.out_dtype, "where": getattr(o, "where", ""),
                                "roles": sorted({by_storage[s] for s in o.storages if s in by_storage})}
                               for o in reads[:HOST_OP_CAP]]
        return out

    def kernel_made(self, t) -> tuple:
        """(did this phase's kernels make tensor ``t``, how many elements of its storage they stored);
        (None, None) when not on the simulator.

        Made means: kernels stored at least as many elements of its storage as ``t`` has, or a
        host op that only carries data (TRANSPORT_OPS) produced it from such a buffer.
        """
        if self.rec is None:
            return None, None
        covered = {}                                 # storage -> elements kernels stored into it
        for L in self.rec.launches:
            for a in L.args.values():
                if a.stored:
                    covered[a.storage] = covered.get(a.storage, 0) + a.distinct("store")
        derived = set()
        for op in self.rec.host_ops or ():
            sources = op.storages[1:] if op.name == "copy_" else op.storages
            if op.name in TRANSPORT_OPS and any(s in derived or covered.get(s, 0) >= carried_from(op)
                                                for s in sources):
                derived |= set(op.out_storages)
        where = storage(t)
        stored = covered.get(where, 0)
        return where in derived or stored >= t.numel(), stored

    def host_made(self, t) -> bool:
        """Did a host-side torch op that reads data write ``t``'s memory? (Allocations, torch.zeros included,
        read none.) If neither a kernel nor the host wrote it, it holds whatever its allocation held."""
        if self.rec is None:
            return False
        where = storage(t)
        return any(where in op.out_storages and op.reads for op in self.rec.host_ops or ())


def launch_records(launches, roles: dict, copy_of: dict | None = None, units: dict | None = None) -> list:
    """Each launch's statistics in the job's format, every argument tagged with the roles of its storage (``roles``:
    {role: storage}; dx written into dy's memory has both) and, given ``copy_of`` ({storage: role}), the role of
    what a host copy there copies.

    Given ``units`` ({storage: bytes per element}, and None: the unit of any other storage), every count is in
    those elements, whatever dtype a launch viewed the memory as: bytes, not view elements (x read twice through
    two int64 views moves 2·M·N elements of x, not M·N; a partial buffer kept as int32 words is as big as one
    kept in fp32). Without it, counts are in the view's own elements."""
    by_storage = {v: k for k, v in roles.items() if v}
    all_roles = {}
    for k, v in roles.items():
        if v:
            all_roles.setdefault(v, []).append(k)

    def arg(a):
        unit = (units or {}).get(a.storage, (units or {}).get(None)) or a.itemsize or 1
        scale = (a.itemsize or unit) / unit

        def n(count):
            v = count * scale
            return int(v) if v == int(v) else round(v, 3)
        out = {"loaded": n(a.loaded), "stored": n(a.stored), "atomics": n(a.atomics), "numel": n(a.numel),
               "span": n(a.span), "dtype": a.dtype, "role": by_storage.get(a.storage),
               "roles": all_roles.get(a.storage, []), "distinct": n(a.distinct()),
               "distinct_loaded": n(a.distinct_loaded), "storage": a.storage}
        return out if copy_of is None else {**out, "copy_of": copy_of.get(a.storage)}
    return [{"kernel": L.kernel, "programs": L.programs, "order_dependent": L.order_dependent, "race": L.race,
             "race_on": list(L.race_on), "race_kind": L.race_kind, "order_on": L.order_on,
             "undefined_lanes": L.undefined_lanes, "rule": L.rule,
             "args": {k: arg(a) for k, a in L.args.items()}}
            for L in launches]
