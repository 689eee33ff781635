"""Predicted GPU time: what a recorded launch would take on a real GPU.

The simulator knows what a kernel asks of memory: the bytes each argument reads and writes, the distinct
elements among them, how many programs there are and how many loads each one waits for, the atomics. A
memory-bound kernel's time on a GPU follows from those, the way a roofline model says:

- **bandwidth**: the bytes that come from device memory (HBM), over its bandwidth. The first touch of an element
  is such a byte; so is a re-read of a tensor larger than a quarter of the L2 cache (the programs in flight read
  far more between the two reads than the L2 holds), while a re-read of a small tensor (g, r, a partial buffer)
  is served by the L2, whose own bandwidth bounds every access;
- **latency**: a program waits for its loads (``load_us`` a round) and for each reduction across its block (its
  threads wait for each other: a round too). Loads issued one after another share a round (x, then dy, of one
  row); a loop's next iteration waits again, for an OVERLAP-th of a round where the compiler keeps several small
  loads in flight; a load of one element per program (r) rides along (runtime.Chunk.note_load counts them as the
  kernel runs). Programs on one SM overlap (as many as its warps allow, ``max_warps_per_sm``), so a grid runs
  ``programs / (SMs x resident)`` waves of a program's waits: a grid of few programs has little in flight and is
  latency-bound, whatever its bytes;
- **arithmetic**: each float operation of a program, once per element a thread holds (``issued``, counted as
  the kernel runs: blocks.tensor), is a warp instruction for each of its warps; an SM issues ``schedulers`` of
  them a clock. A kernel takes at least the time its SMs need to issue them all (the datasheet's peak), and a
  program whose scheduler has no other warp to switch to (one of 4 warps alone on its SM) waits for its own
  arithmetic beside its loads: their share that no other warp hides adds to its waits;
- **atomics**: updates of one address are serialised (``atomic_same_ns`` each), and all of them together
  go at ``atomic_rate``;
- each kernel has a fixed cost inside a CUDA graph (``launch_us``); a torch operation on the host side
  (record(host_ops=True)) is one kernel that reads its inputs and writes its outputs, at the share of the
  bandwidth torch's kernels of that kind reach.

Bandwidth and latency overlap only partly: a kernel takes sqrt(bandwidth² + latency² + atomics²), which is
how a copy kernel's time grows as its grid shrinks on the H200, and never less than its arithmetic's issue time.
The handout's part (e) shows the model beside the H200's measured times for kernels of seven designs.

    with triton.record(host_ops=True) as rec:
        y = rmsnorm(x, g)
    perf.predict(rec, "H200")     -> Prediction: each kernel's microseconds, and the total

Where it can be wrong: it counts the operations a kernel's code writes, not the instructions the compiler makes
of them (address arithmetic, conversions fused or split); no register spills, no cache behaviour beyond the rule
above, no slow access pattern beyond the bytes; and it times the grid the code launched where it was recorded
(rmsnorm_testkit/predict.py shows the code the course GPU, so that a grid taken from the device is the GPU's).
Its parameters are named below, each with its source; the course GPU's were measured on it.
"""
from __future__ import annotations

import dataclasses
import math

import torch

from .memory import Kind


@dataclasses.dataclass(frozen=True)
class GPU:
    """One GPU's parameters, each with where it comes from."""
    name: str
    hbm_gbs: float              # device memory: the bandwidth a large device-to-device copy reaches, GB/s
    sms: int                    # streaming multiprocessors
    l2_bytes: int               # L2 cache
    l2_gbs: float               # L2: bandwidth of re-reads it serves, GB/s
    load_us: float = 0.61       # a program's wait for one load from device memory, microseconds
    launch_us: float = 0.98     # a kernel's fixed cost inside a CUDA graph, microseconds
    graph_us: float = 1.8       # a graph replay's own fixed cost, microseconds
    atomic_same_ns: float = 27.4    # one update of an address other programs update too, nanoseconds
    atomic_rate: float = 2.8e11     # atomic updates per second, all addresses together
    max_warps_per_sm: int = 64
    max_programs_per_sm: int = 32
    clock_ghz: float = 1.98     # the SMs' clock under load, GHz
    schedulers: int = 4         # warp schedulers per SM, each issuing one warp instruction a clock
    device_name: str = ""       # as torch.cuda.get_device_name says it
    memory_gb: float = 0.0      # device memory, GB
    capability: tuple = (9, 0)  # compute capability
    source: str = ""


# The H200 (the course GPU): measured on it, 2026-12-04, by the course's benchmark of this model: a 512 MB copy;
# a row-copy kernel over 16 to 16384 programs (one load wait: 0.61 us); graphs of 1 and 64 tiny kernels; re-reads
# of rows served by L2; fp32 atomic_add of 16384 rows into one row of 4096, and into rows of their own. SMs and L2
# as torch.cuda.get_device_properties reports them. The issue rate is the datasheet's: 1980 MHz (the SM clock
# nvidia-smi showed while the benchmark ran), 4 warp schedulers per SM (Hopper's four SM partitions), so 132 x 4 x
# 1.98e9 warp instructions a second; 32 lanes each, 128 FP32 lanes an SM: the datasheet's 67 TFLOPS of FP32 FMA.
H200 = GPU("H200", hbm_gbs=4183, sms=132, l2_bytes=62914560, l2_gbs=14100, device_name="NVIDIA H200",
           memory_gb=141, source="measured on an H200 SXM (141 GB), 2026-12-04")
# The others: datasheet bandwidth times the H200's measured share of its own (4183 of 4800 GB/s: 0.87), their
# datasheet SMs, L2 and boost clock, the L2 bandwidth scaled by SMs, and the H200's latencies and atomic costs (not
# measured on them: a prediction there is rougher).
_COPY_SHARE = 4183 / 4800


def _like_h200(name, device_name, peak_gbs, sms, l2_mb, clock_ghz, memory_gb, capability, source):
    return dataclasses.replace(H200, name=name, device_name=device_name, hbm_gbs=round(peak_gbs * _COPY_SHARE),
                               sms=sms, l2_bytes=int(l2_mb * 2 ** 20), l2_gbs=round(H200.l2_gbs * sms / H200.sms),
                               clock_ghz=clock_ghz, memory_gb=memory_gb, capability=capability, source=source)


GPUS = {g.name: g for g in (
    H200,
    _like_h200("H100", "NVIDIA H100 80GB HBM3", 3350, 132, 50, 1.98, 80, (9, 0),
               "datasheet H100 SXM5: 3.35 TB/s HBM3, 132 SMs, 50 MB L2, 1.98 GHz"),
    _like_h200("A100", "NVIDIA A100-SXM4-80GB", 2039, 108, 40, 1.41, 80, (8, 0),
               "datasheet A100 SXM4 80 GB: 2.04 TB/s HBM2e, 108 SMs, 40 MB L2, 1.41 GHz"),
    _like_h200("L4", "NVIDIA L4", 300, 58, 48, 2.04, 24, (8, 9), "datasheet L4: 300 GB/s GDDR6, 58 SMs, 48 MB L2, "
                                                                 "2.04 GHz"),
    _like_h200("RTX 4090", "NVIDIA GeForce RTX 4090", 1008, 128, 72, 2.52, 24, (8, 9),
               "datasheet GeForce RTX 4090: 1008 GB/s GDDR6X, 128 SMs, 72 MB L2, 2.52 GHz"),
)}

# A tensor larger than this share of the L2 is re-read from device memory (a small one, from the L2).
L2_REUSE_SHARE = 0.25
# A program keeps OVERLAP_BYTES / (a load's bytes per thread) executions of that load in flight, from 1 to
# OVERLAP_MAX: the compiler unrolls and pipelines small loads. Fitted on the H200 to loops over 128-column blocks
# (4 and 2 bytes per thread: their loads hidden behind the bandwidth) and a row copy (64 bytes: one at a time).
OVERLAP_BYTES, OVERLAP_MAX = 64, 8


def overlap(per_thread: float) -> float:
    """How many executions of a load of ``per_thread`` bytes per thread a program keeps in flight."""
    return max(1.0, min(OVERLAP_MAX, OVERLAP_BYTES / max(per_thread, 1e-9)))
# torch's own kernels, as a share of the copy's bandwidth (H200, 2026-12-04): a broadcast element-wise op
# (x * r[:, None], 0.61), a reduction over rows (sum(0), 0.77), a copy or a cast (0.98).
TORCH_SHARE = {"elementwise": 0.61, "reduction": 0.77, "copy": 0.98, "fill": 0.98}
REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm",
                        "var", "std", "var_mean", "std_mean", "logsumexp", "cumsum", "argmax", "argmin"})
COPIES = frozenset({"_to_copy", "copy_", "clone", "contiguous", "to", "_copy_from", "cat", "stack"})
FILLS = frozenset({"zeros", "zero_", "fill_", "ones", "full", "zeros_like", "ones_like", "full_like", "new_zeros",
                   "new_ones", "new_full"})


@dataclasses.dataclass
class Work:
    """What one kernel launch (or one torch op) asks of the GPU: the numbers the model turns into time, each a
    count that grows with the work. Per tensor argument: the bytes its view spans, those of its elements'
    first touches, those touched again, and every byte accessed."""
    name: str
    kind: str = "kernel"          # or, for a torch op: "elementwise", "reduction", "copy", "fill"
    programs: float = 0.0
    warps: int = 4
    rounds: float = 0.0           # load (and reduction) waits, summed over programs
    issued: float = 0.0           # block operations in elements per thread, summed over programs (the issue term)
    atomics: float = 0.0
    contended: float = 0.0        # the most updates any one element received
    arg_names: tuple = ()
    spans: tuple = ()
    first: tuple = ()
    again: tuple = ()
    touched: tuple = ()

    @property
    def all_bytes(self) -> float:
        return sum(self.touched)

    def hbm_bytes(self, gpu: GPU) -> float:
        """Bytes from and to device memory: every first touch, and the second touches of tensors too large for
        the L2 to keep between them (L2_REUSE_SHARE)."""
        limit = gpu.l2_bytes * L2_REUSE_SHARE
        return sum(self.first) + sum(again for span, again in zip(self.spans, self.again) if span > limit)

    def at(self, planned) -> "Work":
        """This launch's work at the shape where ``planned`` (a stats.PlannedLaunch of the same kernel) was noted:
        its programs are the planned ones, each argument's bytes grow with the bytes its view spans there, and
        the waits and atomics with the launch's distinct elements (as a launch over rows or over a partial
        buffer grows)."""
        spans = [float(planned.spans.get(n, s)) for n, s in zip(self.arg_names, self.spans)]
        ratio = [(t / s) if s else 1.0 for s, t in zip(self.spans, spans)]
        distinct = sum(self.first)                # the launch's size: its elements, each once
        whole = sum(f * r for f, r in zip(self.first, ratio)) / distinct if distinct else 1.0
        return dataclasses.replace(
            self, programs=float(max(1, planned.programs)), warps=planned.num_warps, spans=tuple(spans),
            first=tuple(b * r for b, r in zip(self.first, ratio)), again=tuple(b * r for b, r in zip(self.again,
                                                                                                       ratio)),
            touched=tuple(b * r for b, r in zip(self.touched, ratio)), rounds=self.rounds * whole,
            issued=self.issued * whole,
            atomics=self.atomics * whole, contended=self.contended * whole)

    def times(self, factor: float) -> "Work":
        """This work grown ``factor`` times, its grid too (a launch that did not plan: scaled with the rows)."""
        grow = lambda xs: tuple(x * factor for x in xs)      # noqa: E731
        return dataclasses.replace(self, programs=max(1.0, round(self.programs * factor)), rounds=self.rounds * factor,
                                   issued=self.issued * factor,
                                   atomics=self.atomics * factor, contended=self.contended * factor,
                                   spans=grow(self.spans), first=grow(self.first), again=grow(self.again),
                                   touched=grow(self.touched))


def _element_size(a) -> int:
    for r in a.records:
        return max(1, r.buf.elem.primitive_bitwidth // 8)
    return max(1, a.loaded_bytes // a.loaded) if a.loaded else 1


def _contended(a) -> int:
    """The most atomic updates any one element of this argument received."""
    offs = [r.active_offsets()[0].reshape(-1) for r in a.records if r.kind is Kind.ATOMIC]
    offs = [o for o in offs if o.numel()]
    if not offs:
        return 0
    flat = torch.cat(offs)
    return int(torch.bincount(flat - int(flat.min())).max())


def launch_work(launch) -> Work:
    """The Work of one recorded launch (stats.LaunchStats)."""
    warps = int(getattr(launch, "num_warps", 4) or 4)
    w = Work(launch.kernel, programs=float(launch.programs), warps=warps)
    names, spans, first, again, touched = [], [], [], [], []
    for name, a in launch.args.items():
        size = _element_size(a)
        loaded, stored = (a.distinct_loaded, a.distinct_stored) if a.records else (0, 0)
        names.append(name)
        spans.append(float(a.span * size))
        first.append(float((loaded + stored) * size))
        again.append(float(max(0, a.loaded - loaded) * size + max(0, a.stored - stored) * size))
        touched.append(float(a.loaded_bytes + a.stored_bytes))
        w.atomics += a.atomics
        if a.atomics:
            w.contended = max(w.contended, _contended(a))
    w.rounds = sum(programs / overlap(per_thread) for per_thread, programs in (launch.rounds or {}).items()) + \
        launch.waits                              # the waits runtime.Chunk.note_load and note_wait counted
    w.issued = float(getattr(launch, "issued", 0) or 0)
    w.arg_names, w.spans, w.first, w.again, w.touched = (tuple(names), tuple(spans), tuple(first), tuple(again),
                                                         tuple(touched))
    return w


def host_op_work(op) -> Work | None:
    """The Work of one host-side torch op (stats.HostOp), or None for one that moves no data (a view, an
    allocation)."""
    name = op.name
    if op.is_view or name in ("empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "detach",
                              "alias", "lift_fresh", "size", "stride", "_local_scalar_dense"):
        return None
    reads, writes = sum(getattr(op, "in_bytes", ()) or ()), sum(getattr(op, "out_bytes", ()) or ())
    kind = "fill" if name in FILLS else "reduction" if name in REDUCTIONS else "copy" if name in COPIES \
        else "elementwise"
    moved = writes if kind == "fill" else reads + writes
    return torch_work(name, kind, moved) if moved else None


def torch_work(name: str, kind: str, moved: float) -> Work:
    """The Work of a torch op of ``kind`` (a key of TORCH_SHARE) that moves ``moved`` bytes: one kernel."""
    return Work(f"torch {name}", kind=kind, programs=1.0, spans=(float(moved),), first=(float(moved),),
                again=(0.0,), touched=(float(moved),))


def issue_seconds(w: Work, gpu: GPU) -> float:
    """The time the SMs take to issue a kernel's arithmetic: its warp instructions (each float operation of a
    program, per element a thread holds, once per warp: ``issued`` x warps) over the SMs its programs occupy, each
    issuing ``schedulers`` warp instructions a clock. A datasheet's peak: the least time that work can take."""
    return w.issued * w.warps / (min(gpu.sms, max(1.0, w.programs)) * gpu.schedulers * gpu.clock_ghz * 1e9)


def warps_per_scheduler(w: Work, gpu: GPU) -> float:
    """How many warps each scheduler of an occupied SM can choose from: the programs an SM holds at once (as
    many as there are, up to what its warps allow), times their warps, over its schedulers."""
    resident = max(1, min(gpu.max_programs_per_sm, gpu.max_warps_per_sm // max(1, w.warps)))
    held = min(resident, math.ceil(max(1.0, w.programs) / gpu.sms))
    return max(1.0, min(held * w.warps, gpu.max_warps_per_sm) / gpu.schedulers)


def seconds(w: Work, gpu: GPU | str = "H200") -> float:
    """The model's time for one Work on ``gpu``, in seconds (its fixed cost inside a graph included)."""
    gpu = GPUS[gpu] if isinstance(gpu, str) else gpu
    launch = gpu.launch_us * 1e-6
    if w.kind != "kernel":
        return sum(w.first) / (gpu.hbm_gbs * 1e9 * TORCH_SHARE[w.kind]) + launch
    hbm = w.hbm_bytes(gpu)
    bandwidth = max(hbm / (gpu.hbm_gbs * 1e9), w.all_bytes / (gpu.l2_gbs * 1e9))
    resident = max(1, min(gpu.max_programs_per_sm, gpu.max_warps_per_sm // max(1, w.warps)))
    waves = max(1.0, w.programs / (gpu.sms * resident))
    latency = waves * (w.rounds / max(1.0, w.programs)) * gpu.load_us * 1e-6
    atomics = max(w.contended * gpu.atomic_same_ns * 1e-9, w.atomics / gpu.atomic_rate)
    issue = issue_seconds(w, gpu)
    # a program's issue waits beside its loads where no other warp of its scheduler has work to issue meanwhile
    chain = latency + issue / warps_per_scheduler(w, gpu)
    return max(math.sqrt(bandwidth ** 2 + chain ** 2 + atomics ** 2), issue) + launch


def copy_seconds(nbytes: float, gpu: GPU | str = "H200") -> float:
    """The model's time for a device-to-device copy that reads and writes ``nbytes`` in all (item 10's
    baseline): the bandwidth the GPU's copy reaches, plus one kernel's fixed cost."""
    gpu = GPUS[gpu] if isinstance(gpu, str) else gpu
    return nbytes / (gpu.hbm_gbs * 1e9) + gpu.launch_us * 1e-6


@dataclasses.dataclass
class Prediction:
    """A step's predicted time on one GPU: each kernel (and torch op) with its microseconds, in launch order."""
    gpu: str
    kernels: list                   # [(name, microseconds)]

    @property
    def us(self) -> float:
        return sum(us for _, us in self.kernels) + GPUS[self.gpu].graph_us

    def by_kernel(self) -> list:
        """[(name, microseconds, share of the kernels' time)] summed per name, the largest first (the graph's own
        fixed cost, in ``us``, is no kernel's)."""
        total = {}
        for name, us in self.kernels:
            total[name] = total.get(name, 0.0) + us
        whole = sum(total.values()) or 1.0
        return sorted(((n, us, us / whole) for n, us in total.items()), key=lambda t: -t[1])

    def table(self) -> str:
        rows = [f"{'predicted on an ' + self.gpu:<34}{'us':>9}{'share':>7}"]
        rows += [f"{name[:34]:<34}{us:>9.1f}{100 * share:>6.0f}%" for name, us, share in self.by_kernel()]
        return "\n".join(rows)


def works(rec) -> list:
    """Every launch's Work in a recording, then its host ops' (when it kept them)."""
    out = [launch_work(L) for L in rec.launches]
    for op in rec.host_ops or []:
        w = host_op_work(op)
        if w is not None:
            out.append(w)
    return out


def predict_works(items, gpu: GPU | str = "H200") -> Prediction:
    """The Prediction of a list of Work."""
    gpu = GPUS[gpu] if isinstance(gpu, str) else gpu
    return Prediction(gpu.name, [(w.name, seconds(w, gpu) * 1e6) for w in items])


def predict(rec, gpu: GPU | str = "H200") -> Prediction:
    """The Prediction of a recording (``triton.record(host_ops=True)`` also counts the host's torch ops)."""
    return predict_works(works(rec), gpu)
