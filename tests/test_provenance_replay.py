"""The judge's replay (autograder/job/judge/launches.Launcher.replay): which stored elements derive from memory the
host wrote, whatever path their values took through the kernel, and which are the kernel's own.

Each test runs one launch on a provenance.Memory, as the judge's process does: ``x`` is the grader's input
(2^16 values), ``h`` a buffer the host filled with its own values, ``out`` a buffer of zeros. Then it reads the
origin of each element of ``out``. A replay draws its bytes at random, so a value that carries b bits of the
host's escapes it with a chance of 2^-b: the paths here carry 16 bits or more (a tag the host wrote, an index
into 2^16 values), as any value that passes for an output must.
"""
import os

import pytest
import torch

import mini_triton as triton
from autograder.job.judge import provenance
from autograder.job.judge import launches
from autograder.job.judge import watchdog
from autograder.job.judge.launches import Launcher

tl = triton.language
N = 64
X = 1 << 16
TAG = 0x5EED                                  # the host's marker, in the low 16 bits of an fp32 value's bits


@triton.jit
def copy_h(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.load(h_ptr + i))


@triton.jit
def h_beside_zeros(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.where(i < N // 4, tl.load(h_ptr + i), 0.0))


@triton.jit
def h_as_an_address(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    k = tl.load(h_ptr + i).to(tl.int32, bitcast=True) & 0xFFFF       # the host's bits pick which x is stored
    tl.store(out_ptr + i, tl.load(x_ptr + k))


@triton.jit
def h_as_a_mask(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tagged = (tl.load(h_ptr + i).to(tl.int32, bitcast=True) & 0xFFFF) == 0x5EED
    tl.store(out_ptr + i, tl.load(x_ptr + i), mask=tagged)


@triton.jit
def h_as_a_branch(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    if (tl.load(h_ptr).to(tl.int32, bitcast=True) & 0xFFFF) == 0x5EED:
        tl.store(out_ptr + i, tl.load(x_ptr + i))
    else:
        tl.store(out_ptr + i, -tl.load(x_ptr + i))


@triton.jit
def h_through_an_atomic(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.atomic_xchg(out_ptr + i, tl.load(h_ptr + i))


@triton.jit
def h_as_a_loop_bound(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    acc = tl.zeros([N], dtype=tl.float32)
    for _ in range(tl.load(h_ptr).to(tl.int32, bitcast=True) & 0x7FFFFFFF):
        acc += 1.0
    tl.store(out_ptr + i, acc)


@triton.jit
def x_only_beside_h(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    h = tl.load(h_ptr + i)
    tl.store(out_ptr + i, tl.load(x_ptr + i) * 2.0 + tl.where(h > 0.0, 0.0, 0.0))


@triton.jit
def x_times_a_host_scale(x_ptr, h_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.load(x_ptr + i) * tl.load(h_ptr))        # one host value (an r) for every element


def _tagged() -> torch.Tensor:
    """N values whose bits carry TAG in their low 16 bits, every other one."""
    bits = torch.randn(N).view(torch.int32) & ~0xFFFF
    bits[::2] |= TAG
    return bits.view(torch.float32)


def _shared(t: torch.Tensor) -> int:
    """A memfd holding ``t``'s bytes, as the submission's side shares a buffer."""
    fd = os.memfd_create("test")
    data = t.contiguous().view(torch.uint8).numpy().tobytes()
    os.ftruncate(fd, len(data))
    os.pwrite(fd, data, 0)
    return fd


def _launch(kernel, h_values=None) -> tuple:
    """Run ``kernel`` on (x, h, out) in a fresh judge's memory; returns (memory, origins of out's elements)."""
    return _launch_grid(kernel, (1,), provenance.Memory(), h_values)


def _launch_grid(kernel, grid, memory, h_values=None) -> tuple:
    """``_launch`` with this ``grid``, in ``memory``."""
    x = torch.randn(X)
    h = torch.randn(N) if h_values is None else h_values
    views = {}
    xb, fd = memory.input(x)
    hb = memory.buffer(_shared(h), h.numel() * 4)
    ob = memory.buffer(_shared(torch.zeros(N)), N * 4)
    assert hb.dirty() and not ob.dirty()
    args = []
    for buf in (xb, hb, ob):
        view = memory.view(buf, torch.float32, 0, [buf.nbytes // 4], [1])
        views[id(view)] = (buf, torch.float32, 0, [buf.nbytes // 4], [1], view)
        args.append(view)
    launcher = Launcher(memory, None)
    with triton.record() as rec, watchdog.budgeted(launcher.over_replay, __file__):
        launcher.record = rec
        launcher.execute(kernel, args, {"N": N}, grid, views)
    return memory, memory.origins(ob, torch.float32, 0, [N], [1])


@pytest.mark.parametrize("kernel", [copy_h, h_as_an_address, h_as_a_mask, h_as_a_branch, h_through_an_atomic,
                                    h_as_a_loop_bound], ids=lambda k: k.__name__)
def test_a_value_that_took_the_hosts_memory_by_any_path_is_derived(kernel, monkeypatch):
    monkeypatch.setattr(launches, "REPLAY_S", (0.3, 2.0))      # a loop bound of random bits: the replay's time ends
    h = _tagged() if kernel in (h_as_a_mask, h_as_a_branch) else None
    h = torch.full((N,), 1e-44) if kernel is h_as_a_loop_bound else h               # a loop of 7 turns, as bits
    memory, origins = _launch(kernel, h)
    stored = origins != provenance.CONST
    assert bool(stored.any())
    derived = origins[stored] == provenance.DERIVED
    # the replay's secret bytes pick the same one of 2^16 addresses as the host's, by chance, with probability
    # 2^-16 an element (one run in a thousand, over 64 elements): that element is then, rightly, unchanged
    missed = 2 if kernel is h_as_an_address else 0
    assert int((~derived).sum()) <= missed, origins


def test_what_a_launch_stores_beside_the_hosts_values_is_its_own():
    _, origins = _launch(h_beside_zeros)
    assert bool((origins[:N // 4] == provenance.DERIVED).all()), origins
    assert bool((origins[N // 4:] == provenance.KERNEL).all()), origins


def test_a_host_value_that_changes_nothing_stored_leaves_the_kernels_work_clean():
    memory, origins = _launch(x_only_beside_h)
    assert bool((origins == provenance.KERNEL).all()), origins
    assert memory.host_loaded == N                     # still counted, for item 7


def test_a_few_host_values_are_forgiven_the_hosts_own_output_is_not():
    memory, origins = _launch(x_times_a_host_scale)
    assert bool((origins == provenance.DERIVED).all())
    assert memory.host_loaded == 1 and memory.forgiven(rows=1, elements=N)
    assert not memory.forgiven(rows=1, elements=1)           # an output that is the host's one value, carried
    memory, _ = _launch(copy_h)
    assert not memory.forgiven(rows=N, elements=N)


def test_the_replay_leaves_memory_as_the_launch_left_it_and_no_check_sees_it():
    seen = []

    def watch(launch, records):
        seen.append(launch.name)
    triton.observers.register(watch, order=200)
    try:
        memory, origins = _launch(copy_h)
    finally:
        triton.observers.unregister(watch)
    assert seen == ["copy_h"]
    h, out = (b for b in memory.buffers.values() if b.origin[0] in (provenance.HOST, provenance.DERIVED))
    assert torch.equal(out.mirror, h.mirror)          # the launch's copy of h, not the replay's random bytes


# -- host copies: what provenance.Memory.settle takes for a copy of something clean ----------------------------
def _host_writes(memory, values: torch.Tensor, dtype=None):
    """A buffer of the host's holding ``values``, settled as a view of ``dtype``; returns the origins of its
    elements (as the view sees them)."""
    buf = memory.buffer(_shared(values), values.numel() * values.element_size())
    dtype = dtype or values.dtype
    n = buf.nbytes // torch.empty((), dtype=dtype).element_size()
    memory.settle(buf, dtype, 0, [n], [1])
    return memory.origins(buf, dtype, 0, [n], [1])


def _kernel_made(memory, values: torch.Tensor, shape, strides):
    """A buffer clean kernels stored, holding ``values``, that a launch saw through a view of ``shape``/``strides``."""
    buf = memory.buffer(_shared(torch.zeros_like(values)), values.numel() * values.element_size())
    buf.mirror.copy_(values.view(torch.uint8))
    buf.mark(torch.ones(buf.nbytes, dtype=torch.bool), provenance.KERNEL)
    memory.add_kernel_view(buf, values.dtype, 0, list(shape), list(strides))


def test_a_host_copy_of_a_kernels_output_is_a_copy():
    memory = provenance.Memory()
    made = torch.randn(N)
    _kernel_made(memory, made, [N], [1])
    assert bool((_host_writes(memory, made.clone()) == provenance.COPY_KERNEL).all())
    assert bool((_host_writes(memory, made.to(torch.bfloat16)) == provenance.COPY_KERNEL).all())     # a cast too


@pytest.mark.parametrize("payload", ["nan_payloads", "signed_zeros", "nonzero_bytes_as_bool"])
def test_values_that_compare_equal_but_carry_other_bytes_are_the_hosts(payload):
    memory = provenance.Memory()
    bits = torch.randint(1, 1 << 22, (N,), dtype=torch.int32)
    if payload == "nan_payloads":                 # any NaN == NaN as values; its 22 payload bits are the host's
        _kernel_made(memory, torch.full((N,), float("nan")), [N], [1])
        host, dtype = (bits | 0x7FC00000).view(torch.float32), None
    elif payload == "signed_zeros":               # -0.0 == 0.0: one bit per element
        _kernel_made(memory, torch.zeros(N), [N], [1])
        host, dtype = torch.where(bits % 2 == 0, 0.0, -0.0), None
    else:                                         # any nonzero byte is True: seven bits per byte
        _kernel_made(memory, torch.ones(N, dtype=torch.bool), [N], [1])
        host, dtype = (bits % 255 + 1).to(torch.uint8), torch.bool
    assert bool((_host_writes(memory, host, dtype) == provenance.HOST).all())


def test_one_stored_element_seen_through_a_stride_0_view_is_no_candidate():
    memory = provenance.Memory()
    _kernel_made(memory, torch.full((1,), 0.5), [N], [0])           # one element, seen as N
    assert bool((_host_writes(memory, torch.full((N,), 0.5)) == provenance.HOST).all())


def test_a_view_only_partly_changed_to_a_clean_tensors_values_is_the_hosts():
    """Which bytes of a 0xFF fill the host zeroed carries its bits, though each zero equals a kernel's zero."""
    memory = provenance.Memory()
    _kernel_made(memory, torch.zeros(N, dtype=torch.uint8), [N], [1])
    buf = memory.buffer(_shared(torch.full((N,), 255, dtype=torch.uint8)), N)          # first seen: a fill
    zeroed = torch.full((N,), 255, dtype=torch.uint8)
    zeroed[torch.randperm(N)[:N // 2]] = 0
    os.pwrite(buf.fd, zeroed.numpy().tobytes(), 0)
    memory.refresh(buf)
    memory.settle(buf, torch.uint8, 0, [N], [1])
    assert bool((memory.origins(buf, torch.uint8, 0, [N], [1])[zeroed == 0] == provenance.HOST).all())


def test_a_nan_is_a_fill_only_as_torch_writes_it():
    canonical = torch.full((1,), float("nan"))
    payload = (canonical.view(torch.int32) | 0x1234).view(torch.float32)
    assert provenance.fill_value(canonical.view(torch.uint8)) and provenance.fill_value((-canonical).view(torch.uint8))
    assert not provenance.fill_value(payload.view(torch.uint8))


def test_a_phase_may_refill_a_buffer_any_number_of_times():
    """Whether a fill happened before each of many launches, and which, would carry bits; the replay on fresh
    inputs makes the same fills, so what they carried of the first inputs is stale there (test_job_replay.py):
    here each is a fill."""
    memory = provenance.Memory()
    buf = memory.buffer(_shared(torch.zeros(N)), N * 4)
    for k in range(40):
        fill = torch.full((N,), float("nan") if k % 2 == 0 else 0.0)
        os.pwrite(buf.fd, fill.numpy().tobytes(), 0)
        memory.refresh(buf)
        assert bool((memory.origins(buf, torch.float32, 0, [N], [1]) == provenance.CONST).all()), k


def test_a_phase_may_copy_clean_tensors_any_number_of_times():
    """Which of 16 one-byte clean tensors each of many one-byte host views equals would carry bits; the replay
    makes the same copies, so they are stale there: here each is a copy."""
    memory = provenance.Memory()
    for v in range(2, 18):                                     # (0 and 1 are fills)
        _kernel_made(memory, torch.tensor([v], dtype=torch.uint8), [1], [1])
    origins = [_host_writes(memory, torch.tensor([2 + k % 16], dtype=torch.uint8)) for k in range(40)]
    kinds = [int(o[0]) for o in origins]
    assert kinds == [provenance.COPY_KERNEL] * 40, kinds


def test_a_sample_taken_between_lines_never_stops_the_kernel(tmp_path):
    """Python leaves a frame's f_lineno None at some instants; the watchdog's sample then notes nothing (it raised a
    TypeError into the kernel, which a long-running honest backward was charged for, about 1 grading in 8)."""
    import types
    from rmsnorm_testkit.watch import Watch
    path = tmp_path / "rmsnorm.py"
    path.write_text("def k(n):\n    for i in range(n):\n        pass\n")
    watch = Watch(str(path), 0.25)
    code = compile(path.read_text(), str(path), "exec")
    frame = types.SimpleNamespace(f_code=code, f_lineno=None, f_back=None, f_locals={})
    assert watch.loop(None) is None and watch.loop(3) is not None
    watch.sample(frame)
    assert watch.samples == []
    frame.f_lineno = 3
    watch.sample(frame)
    assert watch.samples and watch.samples[-1][1] == 3
