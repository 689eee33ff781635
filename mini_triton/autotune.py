"""``triton.autotune``, ``triton.Config`` and ``triton.heuristics``.

On a GPU, autotuning times every config and keeps the fastest. CPU timings say
nothing about GPU speed, so the simulator is deterministic instead: it uses
the first config that survives pruning, for every key. Use
``MINI_TRITON_AUTOTUNE=all`` to run every config once on each new key, which
checks that all of them are correct (bounds, races) before the first is kept.
"""
from __future__ import annotations

import functools
import os

import torch


class Config:
    """Meta-parameters for one autotuning candidate."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None, **extra):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self):
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __repr__(self):
        kw = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return f"Config({kw}, num_warps: {self.num_warps}, num_stages: {self.num_stages})"


class Autotuner:
    def __init__(self, fn, configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, **_):
        self.fn = fn
        self.configs = list(configs) or [Config({})]
        self.key = list(key)
        self.prune = (prune_configs_by or {}).get("early_config_prune")
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.cache = {}
        self.best_config = None
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __getitem__(self, grid):
        return functools.partial(self.run, grid=grid)

    def named(self, args, kwargs) -> dict:
        """Every argument by its name, positional ones by the kernel's parameters."""
        target = self.fn
        while not hasattr(target, "arg_names"):
            target = target.fn
        return {**dict(zip(target.arg_names, args)), **kwargs}

    def by_position(self, args) -> dict:
        """The positional arguments by their names, as Triton passes them to ``early_config_prune``."""
        target = self.fn
        while not hasattr(target, "arg_names"):
            target = target.fn
        return dict(zip(target.arg_names, args))

    def run(self, *args, grid, **kwargs):
        __tracebackhide__ = True                 # pytest: an error ends at the kernel's line
        named = self.named(args, kwargs)
        key = tuple(_key_value(named.get(k)) for k in self.key)
        if key not in self.cache:
            configs = self.configs
            if self.prune and len(configs) > 1:              # as Triton calls it: positional args by name,
                configs = list(self.prune(configs, self.by_position(args), grid=grid, **kwargs))  # keywords as such
                if not configs:
                    raise ValueError(f"{self.__name__}: early_config_prune returned no config")
            if os.environ.get("MINI_TRITON_AUTOTUNE") == "all":
                for cfg in configs[1:]:
                    self._launch(cfg, args, kwargs, grid, named, trial=True)
            self.cache[key] = configs[0]
        self.best_config = self.cache[key]
        return self._launch(self.best_config, args, kwargs, grid, named)

    def _launch(self, cfg, args, kwargs, grid, named, trial=False):
        saved = {n: named[n].clone() for n in self.restore_value + self.reset_to_zero
                 if isinstance(named.get(n), torch.Tensor)} if trial else {}
        for n in self.reset_to_zero:
            if isinstance(named.get(n), torch.Tensor):
                named[n].zero_()
        if cfg.pre_hook:
            cfg.pre_hook({**named, **cfg.kwargs})
        out = self.fn[grid](*args, **kwargs, **cfg.all_kwargs())
        for n, t in saved.items():
            named[n].copy_(t)
        return out


def _key_value(v):
    if isinstance(v, torch.Tensor):
        return (tuple(v.shape), v.dtype)
    return v


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, **kwargs):
    """Decorator: ``@triton.autotune(configs=[...], key=["n_cols"])`` above ``@triton.jit``."""
    def deco(fn):
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value, **kwargs)
    return deco


class Heuristics:
    def __init__(self, fn, values):
        self.fn = fn
        self.values = values
        self.__name__ = getattr(fn, "__name__", "kernel")

    @property
    def arg_names(self):
        target = self.fn
        while not hasattr(target, "arg_names"):
            target = target.fn
        return target.arg_names

    def __getitem__(self, grid):
        return functools.partial(self.run, grid=grid)

    def run(self, *args, grid, **kwargs):
        __tracebackhide__ = True
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        for k, f in self.values.items():
            kwargs[k] = f(named)
            named[k] = kwargs[k]
        return self.fn[grid](*args, **kwargs)


def heuristics(values):
    """Decorator: compute constexpr arguments from the others, e.g. {"EVEN": lambda a: a["n"] % 128 == 0}."""
    def deco(fn):
        return Heuristics(fn, values)
    return deco
