"""Item 7 by dataflow: host work is a torch op on the host whose result the graded work uses.

A fused RMSNorm does its arithmetic in kernels. The host may allocate, view, and sum a partial dg buffer, but a
value computed on the host from an activation (x, dy; or M·N elements of anything, as a clone of y) and then
loaded by a kernel or returned as an output is work the kernels should have done. A host op whose result reaches
neither (a check of the values, say) changes nothing graded here: on a GPU it costs time, which item 10 measures.

``Flow`` follows a step's events in the order they ran: host ops, launches (which buffers they loaded and stored)
and the outputs read at the end. It follows values by the buffer (the memory) they live in: an op's outputs carry
the host work of any of its inputs; a kernel's stores make a buffer the kernels' own again. The grader feeds it the
step it replays on new inputs (its own record, whatever the submission's process reports); the public test of
item 7 feeds it mini_triton's record of the same step.
"""
from __future__ import annotations

from . import compare

# ops that only move a result: a copy, a dtype conversion, a view, the sum of a partial buffer over rows. Run on
# what the kernels stored, they carry the kernels' work (autograd casting dx to x's dtype, say)
TRANSPORT_OPS = frozenset({"_to_copy", "copy_", "clone", "contiguous", "sum", "view", "_unsafe_view", "reshape",
                           "expand", "squeeze", "unsqueeze", "t", "transpose", "permute", "as_strided", "slice",
                           "select", "alias", "detach"})


class Flow:
    """Which host op's work, if any, the step's kernels loaded or its outputs returned (``used``)."""

    def __init__(self, M: int, N: int):
        self.M, self.N = M, N
        self.made = set()               # buffers the kernels stored last (or a transport op carried from theirs)
        self.host = {}                  # buffer -> the host op (its dict) whose work it holds
        self.data = set()               # buffers whose values come from the inputs (not made from shapes alone)
        self.used = None                # (the op, what it reached: "a kernel" or an output's name), first found
        # the dtype autograd casts dy to before the backward: y's, when the forward returned y in another dtype than
        # x's (a mistake of y's dtype, charged there; the cast is autograd's, not the file's work)
        self.dy_cast = None

    def op(self, op: dict, ins, outs, in_place: bool = False, carried: bool | None = None):
        """A host op (``op``: compare.host_work_problem's dict) that read buffers ``ins`` (not those it only writes
        into) and wrote ``outs``.
        ``carried``: did it only carry the kernels' values (None: a transport op whose inputs all are theirs)?"""
        if carried is None:
            carried = op["op"] in TRANSPORT_OPS and all(b in self.made for b in ins)
        carried = carried or (op["op"] in ("_to_copy", "to") and op["roles"] == ["dy"] and self.dy_cast is not None
                              and op["dtype"] == self.dy_cast)
        # a table made from shapes and strides alone (torch.arange(M) * stride) holds no data, whatever its size;
        # a copy of an activation in its own dtype (a contiguous copy of a strided x: "moves") moves data, as the
        # handout allows, where a cast to another dtype is the kernels' work (load 16 bits, convert in registers)
        data = bool(op["roles"]) or any(b in self.data for b in ins)
        source = op["reads"] > 0 and data and not carried and not op.get("moves") and \
            compare.host_work_op([op], self.M, self.N) is not None
        culprit = next((self.host[b] for b in ins if b in self.host), op if source else None)   # the first
        for b in outs:
            if data:
                self.data.add(b)
            elif not in_place:
                self.data.discard(b)
            if culprit is not None:
                self.host[b] = culprit
            elif not in_place:
                self.host.pop(b, None)
            if carried:
                self.made.add(b)
            elif op["reads"] > 0 or not in_place:
                self.made.discard(b)

    def launch(self, loads, stores, whole=()):
        """A launch that loaded buffers ``loads`` and stored into ``stores``; the kernels have now stored every
        byte of those in ``whole``, which hold none of the host's work any more."""
        self._reached(loads, "a kernel")
        self.made |= set(stores)
        self.data |= set(stores)
        for b in whole:
            self.host.pop(b, None)

    def output(self, name: str, b):
        """Output ``name``, read back from buffer ``b``."""
        self._reached([b], name)

    def _reached(self, buffers, what: str):
        if self.used is None:
            culprit = next((self.host[b] for b in buffers if b in self.host), None)
            if culprit is not None:
                self.used = (culprit, what)


def problem(used, M: int, N: int, where: str) -> str | None:
    """Why the host did the kernels' work in ``where``, from ``Flow.used`` (None if it did not)."""
    if used is None:
        return None
    op, what = used
    reached = ", and a kernel loaded its result" if what == "a kernel" else f", and its result became {what}"
    return compare.host_work_problem([op], M, N, where, reached=reached)


def of_recording(rec, tensors: dict, outputs: dict, M: int, N: int, dy_cast: str | None = None):
    """(``Flow.used``, whether a launch loaded memory that no input, torch op or kernel made) for a mini_triton
    ``record(host_ops=True)``: ``tensors`` names the step's inputs and activations by role ({"x": x, "dy": dy});
    ``outputs`` the tensors the step returned ({"y": y}); ``dy_cast``: Flow.dy_cast. Memory no torch op made holds
    values the host brought in another way (numpy's, after ``x.numpy()``): the grader, running the launches again
    on new inputs, finds them stale there."""
    role = {t.untyped_storage().data_ptr(): n for n, t in tensors.items() if t is not None}
    flow, known, foreign = Flow(M, N), set(role), False
    flow.dy_cast = dy_cast
    order = sorted(range(len(rec.host_ops)), key=lambda i: (rec.host_ops[i].launches_before, i))
    done = 0

    def launch(L):
        nonlocal foreign
        loads = [a.storage for a in L.args.values() if a.loaded]
        foreign = foreign or any(b not in known and b not in flow.made for b in loads)
        stores = [a for a in L.args.values() if a.stored or a.atomics]
        flow.launch(loads, [a.storage for a in stores], [a.storage for a in stores if a.distinct("store") >= a.numel])
    for i in order:
        o = rec.host_ops[i]
        while done < min(o.launches_before, len(rec.launches)):
            launch(rec.launches[done])
            done += 1
        size = [b // n for b, n in zip((*o.in_bytes, *o.out_bytes), (*o.in_numels, *o.out_numels)) if n]
        op = {"op": o.name, "reads": o.reads, "output_numel": o.output_numel, "dtype": o.out_dtype,
              "where": o.where, "roles": sorted({role[s] for s in o.storages if s in role}),
              "moves": o.name in TRANSPORT_OPS and len(set(size)) == 1}      # a copy in its own dtype
        known |= set(o.out_storages)
        if o.reads or not set(o.out_storages) <= set(o.storages):       # a view or an allocation moves no values
            reads = o.storages[1:] if o.name in ("copy_", "fill_") else o.storages    # x.copy_(src) reads src
            flow.op(op, reads if o.reads else (), o.out_storages, in_place=o.name.endswith("_"))
    for L in rec.launches[done:]:
        launch(L)
    for name, t in outputs.items():
        if t is not None:
            flow.output(name, t.untyped_storage().data_ptr())
    return flow.used, foreign
