"""``triton.testing``: ``do_bench`` and friends, timed with the CPU clock."""
from __future__ import annotations

import statistics
import time

import torch


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Time ``fn`` like triton.testing.do_bench: warm up for ``warmup`` ms, then run for
    about ``rep`` ms; return milliseconds ('mean', 'median', 'min', 'max' or 'all'),
    or the requested ``quantiles``."""
    if return_mode not in ("min", "max", "mean", "median", "all"):
        raise ValueError(f"return_mode must be min, max, mean, median or all, not {return_mode!r}")
    t0 = time.perf_counter()
    fn()
    estimate = max(time.perf_counter() - t0, 1e-7) * 1e3
    for _ in range(max(0, int(warmup / estimate) - 1)):
        fn()
    n = max(1, int(rep / estimate))
    times = []
    for _ in range(n):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        s = time.perf_counter()
        fn()
        times.append((time.perf_counter() - s) * 1e3)
    t = torch.tensor(times, dtype=torch.float64)
    if quantiles is not None:
        out = torch.quantile(t, torch.tensor(quantiles, dtype=torch.float64)).tolist()
        return out[0] if len(out) == 1 else out
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.fmean, "median": statistics.median}[return_mode](times)


def assert_close(x, y, atol=None, rtol=None, err_msg=""):
    torch.testing.assert_close(x, y, atol=atol, rtol=rtol, msg=err_msg or None)
