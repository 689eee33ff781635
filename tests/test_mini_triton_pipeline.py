"""A loop that names ``num_stages`` keeps S - 1 trips' loads in shared memory, as Triton pipelines it, and a launch
that asks for more than the device has fails as it fails on a GPU (mini_triton/pipeline.py); loads and loops that
Triton does not pipeline are not counted."""
import importlib.util

import pytest
import torch

import mini_triton

LIMIT = 232448                                   # the shared memory of a program on an H100 or H200, in bytes
BACKENDS = {"mini_triton": "import mini_triton as triton\ntl = triton.language\n",
            "triton": "import triton\nimport triton.language as tl\n"}
KERNELS = """
@triton.jit
def chunked_sum(x_ptr, y_ptr, out_ptr, N, BLOCK: tl.constexpr, STAGES: tl.constexpr, SECOND: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.range(0, N, BLOCK, num_stages=STAGES):
        cols = i + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        if SECOND:
            v *= tl.load(y_ptr + row * N + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += v
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def plain_range_sum(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, N, BLOCK):
        cols = i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def outer_staged_sum(x_ptr, out_ptr, N, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in tl.range(0, 2, num_stages=STAGES):                    # a loop with a loop inside: not pipelined
        acc += tl.load(x_ptr + row * N + tl.arange(0, BLOCK))
        for i in range(0, N, BLOCK):
            acc += tl.load(x_ptr + row * N + i + tl.arange(0, BLOCK))
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def staged_sum_around_a_while(x_ptr, out_ptr, N, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.range(0, N, BLOCK, num_stages=STAGES):            # a while inside: still pipelined
        acc += tl.load(x_ptr + row * N + i + tl.arange(0, BLOCK))
        k = 0
        while k < 1:
            k += 1
    tl.store(out_ptr + row, tl.sum(acc, 0))


@triton.jit
def scaled_rows(x_ptr, w_ptr, y_ptr, n_rows, N, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        w = tl.load(w_ptr + row)                                     # one value: not pipelined
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
        tl.store(y_ptr + row * N + cols, x * w, mask=cols < N)


@triton.jit
def gathered_sum(x_ptr, idx_ptr, out_ptr, N, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.range(0, N, BLOCK, num_stages=STAGES):
        idx = tl.load(idx_ptr + i + tl.arange(0, BLOCK))              # a load whose values are addresses
        acc += tl.load(x_ptr + row * N + idx)
    tl.store(out_ptr + row, tl.sum(acc, 0))
"""


@pytest.fixture(scope="module")
def on(tmp_path_factory):
    """{backend: the module of KERNELS compiled by it}: mini_triton always, Triton where there is a GPU."""
    modules = {}
    for backend, header in BACKENDS.items():
        if backend == "triton" and not torch.cuda.is_available():
            continue
        path = tmp_path_factory.mktemp(backend) / "pipelined_kernels.py"
        path.write_text(header + KERNELS)
        spec = importlib.util.spec_from_file_location(f"pipelined_kernels_{backend}", path)
        modules[backend] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[backend])
    return modules


def launch(module, kernel, device, block, stages, *, second=False, dtype=torch.float32, trips=4, rows=2, short=0):
    """Launch one of KERNELS on ``device`` at rows of ``trips`` blocks (less ``short`` elements); its output against
    torch's."""
    n = trips * block - short
    x = torch.randn(rows, n, dtype=dtype, device=device)
    out = torch.empty(rows, device=device)
    if kernel == "chunked_sum":
        module.chunked_sum[(rows,)](x, x, out, n, BLOCK=block, STAGES=stages, SECOND=second)
        expected = (x.float() * x.float()).sum(1) if second else x.float().sum(1)
    elif kernel == "plain_range_sum":
        module.plain_range_sum[(rows,)](x, out, n, BLOCK=block, num_stages=stages)
        expected = x.float().sum(1)
    elif kernel == "staged_sum_around_a_while":
        module.staged_sum_around_a_while[(rows,)](x, out, n, BLOCK=block, STAGES=stages)
        expected = x.float().sum(1)
    elif kernel == "outer_staged_sum":
        module.outer_staged_sum[(rows,)](x, out, n, BLOCK=block, STAGES=stages)
        expected = 2 * x.float().sum(1) + 2 * x[:, :block].float().sum(1)
    elif kernel == "gathered_sum":
        idx = torch.randperm(n, device=device).to(torch.int32)
        module.gathered_sum[(rows,)](x, idx, out, n, BLOCK=block, STAGES=stages)
        expected = x.float().sum(1)
    else:                                                            # scaled_rows: one program per row
        w = torch.randn(rows, device=device)
        y = torch.empty_like(x)
        module.scaled_rows[(rows,)](x, w, y, rows, n, BLOCK=n, STAGES=stages)
        out, expected = y, x * w[:, None]
    if device == "cuda":
        torch.cuda.synchronize()
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-1)


# id: (kernel, BLOCK, num_stages, options, the shared memory the simulator counts (None: it runs), Triton's verdict
# on a GPU (True: OutOfResources)). Each count is (stages - 1) x the bytes a trip loads; every verdict and every
# count the GPU gives was measured on an H100 with Triton 3.6 (docs/perf.md, 2026-12-06 night).
CASES = {
    "one_load_4_stages": ("chunked_sum", 32768, 4, {}, 3 * 131072, True),
    "one_load_3_stages": ("chunked_sum", 32768, 3, {}, 2 * 131072, True),
    "one_load_2_stages": ("chunked_sum", 32768, 2, {}, None, False),
    "one_load_no_pipelining": ("chunked_sum", 65536, 1, {}, None, False),
    "two_loads_2_stages": ("chunked_sum", 32768, 2, {"second": True}, 2 * 131072, True),
    "two_loads_4_stages": ("chunked_sum", 16384, 4, {"second": True}, 3 * 2 * 65536, True),
    "two_loads_that_fit": ("chunked_sum", 8192, 4, {"second": True}, None, False),
    "one_load_that_fits_4_stages": ("chunked_sum", 16384, 4, {}, None, False),
    # a plain range pipelines only what feeds a tl.dot, whatever the launch's num_stages
    "plain_range_launch_stages": ("plain_range_sum", 65536, 4, {}, None, False),
    # a loop with a for loop inside is not pipelined; one with a while loop inside is
    "outer_loop_with_stages": ("outer_staged_sum", 65536, 4, {}, None, False),
    "loop_with_a_while_inside": ("staged_sum_around_a_while", 65536, 4, {}, 3 * 262144, True),
    # a persistent loop over rows: its row's load counts, and its scalar load of w (4 bytes)
    "persistent_rows_4_stages": ("scaled_rows", 32768, 4, {"trips": 1, "rows": 3}, 3 * (131072 + 4), True),
    "persistent_rows_2_stages": ("scaled_rows", 32768, 2, {"trips": 1, "rows": 3}, None, False),
    # a gather: the indices' load and the gathered load, each S - 1 times
    "gather_4_stages": ("gathered_sum", 16384, 4, {}, 3 * (65536 + 65536), True),
    # 16-bit loads: pipelined where Triton proves two aligned elements a lane (the row's length a multiple of 16),
    # not where it is not (a row 1 or 8 short)
    "bf16_load_4_stages": ("chunked_sum", 65536, 4, {"dtype": torch.bfloat16}, 3 * 131072, True),
    "bf16_load_odd_row": ("chunked_sum", 65536, 4, {"dtype": torch.bfloat16, "short": 1}, None, False),
    "fp16_load_row_8_short": ("chunked_sum", 65536, 4, {"dtype": torch.float16, "short": 8}, None, False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_simulator_fails_a_launch_whose_pipelined_loads_do_not_fit_and_names_the_loop(on, case):
    kernel, block, stages, options, counted, _ = CASES[case]
    if counted is None:
        launch(on["mini_triton"], kernel, "cpu", block, stages, **options)
        return
    assert counted > LIMIT
    with pytest.raises(mini_triton.OutOfResources) as e:
        launch(on["mini_triton"], kernel, "cpu", block, stages, **options)
    message = str(e.value)
    assert message.startswith(f"{kernel} line "), message                 # the `for` line
    assert "out of resource: shared memory" in message and f"num_stages={stages}" in message
    assert f"Required: at least {counted}, Hardware limit: {LIMIT}." in message


def test_the_advice_names_the_most_stages_that_fit(on):
    with pytest.raises(mini_triton.OutOfResources, match="Use num_stages=2, a smaller block"):
        launch(on["mini_triton"], "chunked_sum", "cpu", 32768, 4)
    with pytest.raises(mini_triton.OutOfResources, match=r"GPU\. Use a smaller block per trip"):     # none fits
        launch(on["mini_triton"], "chunked_sum", "cpu", 32768, 2, second=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA and Triton")
@pytest.mark.parametrize("case", sorted(CASES))
def test_triton_on_a_gpu_fails_the_launches_the_simulator_fails(on, case):
    """Each case as Triton runs it (docs/perf.md records the run): the simulator refuses what the GPU refuses, and
    runs what it runs."""
    kernel, block, stages, options, counted, gpu_fails = CASES[case]
    assert gpu_fails == (counted is not None)
    if not gpu_fails:
        launch(on["triton"], kernel, "cuda", block, stages, **options)
        return
    import triton
    with pytest.raises(triton.runtime.errors.OutOfResources, match="shared memory"):
        launch(on["triton"], kernel, "cuda", block, stages, **options)
