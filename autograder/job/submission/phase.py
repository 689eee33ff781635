"""A phase of a task (its forward, or its backward) as the submission's side records it: its launches and host
ops on the simulator (mini_triton.record), and on any backend the calls of torch's own norms (norms.py).

On the simulator the judge's process records the launches and tells what made each output from memory
(judge/remote.py, judge/provenance.py); what a Phase keeps here is advice that names a line in the feedback, and,
with the elements the judge says the kernels stored, which outputs the host only moved, converted or summed
from the kernels' memory (the lecture's ``dg_partial.sum(0)``: host.claim). On a GPU (tasks.py) nothing is
recorded but the calls of torch's own norms.
"""
import contextlib


from ..wire.phases import HOST_OP_CAP, TRANSPORT_OPS, carried_from, launch_records, storage


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
