"""GPU only: the shared memory Triton gives a loop it pipelines, and where a launch runs out of it.

A loop over a row in chunks (``for i in tl.range(0, N, BLOCK, num_stages=S)``) may be software-pipelined: Triton
copies the loads of later iterations into shared memory while the current one computes. This prints, for each
design below, the compiled kernel's ``metadata.shared`` (bytes) or the error of its launch, so that the simulator's
rule for a pipelined loop (mini_triton/pipeline.py, docs/perf.md) is the one Triton 3.6 follows:

    python3 tests/probe_shared_memory.py          # on a machine with a GPU; a table on stdout

A plain ``range`` under the launch's ``num_stages`` pipelines none of these loads: tests/test_mini_triton_pipeline.py
launches it on a GPU (and the table of launches that fail or run, which this probe's figures explain).
"""
import itertools
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def row_loop(x_ptr, y_ptr, w_ptr, out_ptr, N, BLOCK: tl.constexpr, STAGES: tl.constexpr, MASKED: tl.constexpr,
             SECOND: tl.constexpr, SCALAR: tl.constexpr):
    """A row's sum in chunks: of x (masked, or not), of x·y (SECOND: two loads a trip), of w[trip]·x (SCALAR)."""
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.range(0, N, BLOCK, num_stages=STAGES):
        cols = i + tl.arange(0, BLOCK)
        if MASKED:
            v = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        else:
            v = tl.load(x_ptr + row * N + cols).to(tl.float32)
        if SECOND:
            v *= tl.load(y_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        if SCALAR:
            v *= tl.load(w_ptr + i // BLOCK)
        acc += v
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def nested(x_ptr, out_ptr, N, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in tl.range(0, 2, num_stages=STAGES):
        for i in tl.range(0, N, BLOCK, num_stages=STAGES):
            cols = i + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def stored_in_loop(x_ptr, y_ptr, N, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0)
    for i in tl.range(0, N, BLOCK, num_stages=STAGES):
        cols = i + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
        tl.store(y_ptr + row * N + cols, v * 2, mask=cols < N)


def shared(kernel, args, grid, **kw):
    try:
        compiled = kernel[grid](*args, **kw)
        torch.cuda.synchronize()
        return str(compiled.metadata.shared)
    except Exception as e:                       # noqa: BLE001 -- the error is the measurement
        return f"{type(e).__name__}: {str(e).splitlines()[0][:90]}"


def main():
    print(torch.cuda.get_device_name(), "triton", triton.__version__,
          "max shared", triton.runtime.driver.active.utils.get_device_properties(0)["max_shared_mem"])
    print("design | dtype | BLOCK | stages | num_warps | metadata.shared or the error")
    for dtype, block, stages in itertools.product((torch.float32, torch.bfloat16), (1024, 8192, 16384, 32768),
                                                  (1, 2, 3, 4)):
        N = 4 * block
        x = torch.randn(2, N, device="cuda", dtype=dtype)
        out = torch.empty(2, device="cuda", dtype=torch.float32)
        name = str(dtype).split(".")[1]
        w = torch.rand(4, device="cuda")
        for design, flags in (("one_load", (1, 0, 0)), ("two_loads", (1, 1, 0)), ("unmasked", (0, 0, 0)),
                              ("with_scalar_load", (1, 0, 1))):
            print(design, name, block, stages, 4, shared(row_loop, (x, x.clone(), w, out, N, block, stages, *flags),
                                                         (2,)), sep=" | ")
        print("nested", name, block, stages, 4, shared(nested, (x, out, N, block, stages), (2,)), sep=" | ")
        print("stored_in_loop", name, block, stages, 4, shared(stored_in_loop, (x, torch.empty_like(x), N, block,
                                                                                 stages), (2,)), sep=" | ")
    for dtype, block in itertools.product((torch.bfloat16, torch.float16, torch.float32), (32768, 65536)):
        for N in (4 * block, 4 * block - 1, 4 * block - 8):        # sizes Triton proves divisible by 16, or not
            x = torch.randn(2, N, device="cuda", dtype=dtype)
            out = torch.empty(2, device="cuda", dtype=torch.float32)
            got = shared(row_loop, (x, x.clone(), x, out, N, block, 4, 1, 0, 0), (2,))
            print(f"one_load(N={N})", str(dtype).split(".")[1], block, 4, 4, got, sep=" | ")
    for warps in (1, 8, 16):
        x = torch.randn(2, 4 * 8192, device="cuda")
        out = torch.empty(2, device="cuda")
        got = shared(row_loop, (x, x, x, out, 4 * 8192, 8192, 3, 1, 0, 0), (2,), num_warps=warps)
        print("one_load", "float32", 8192, 3, warps, got, sep=" | ")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
