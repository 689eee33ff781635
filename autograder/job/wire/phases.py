"""What both sides of a job call a phase's parts: the phases and the outputs each makes, the host ops that only
carry data, and a phase's launches in the job's format (``launch_records``). The submission's side records a
phase (submission/phase.py), the judge's side judges one (judge/remote.py); both read these names.
"""
from rmsnorm_testkit.dataflow import TRANSPORT_OPS  # noqa: F401 -- the host ops that only carry a kernel's result

HOST_OP_CAP = 64            # host ops reported per phase: enough to name the culprit, bounded for outputs.json
PHASES = {"fwd": "forward", "bwd": "backward"}                     # each phase's key in a task's info: its name
MADE_IN = {"y": "fwd", "r": "fwd", "dx": "bwd", "dg": "bwd"}       # the phase whose kernels make each output
MADE_BY = {output: PHASES[phase] for output, phase in MADE_IN.items()}


def carried_from(op) -> int:
    """How many elements of its input kernels must have stored for a transport op's output to carry their work: the
    whole input; for a sum, as many as it returns (a partial buffer padded to a power of two, its padding left to
    ``torch.zeros``, then summed and sliced: ``dg_partial.sum(0)[:N]``). The judge checks which values the kernels
    made, element by element (remote.summed_partials)."""
    return op.output_numel if op.name == "sum" else op.max_input_numel


def storage(t):
    """The memory ``t`` lives in (its storage's address), or None."""
    return t.untyped_storage().data_ptr() if t is not None else None


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
        if "g" in out["roles"]:                      # item 5's g: once per program that loads it (a cache)
            out["loaded_per_program"] = n(a.loaded_per_program())
        return out if copy_of is None else {**out, "copy_of": copy_of.get(a.storage)}
    return [{"kernel": L.kernel, "programs": L.programs, "order_dependent": L.order_dependent, "race": L.race,
             "race_on": list(L.race_on), "race_kind": L.race_kind, "order_on": L.order_on,
             "undefined_lanes": L.undefined_lanes, "rule": L.rule,
             "args": {k: arg(a) for k, a in L.args.items()}}
            for L in launches]
