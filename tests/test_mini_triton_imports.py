"""Triton's import paths on the simulator (mini_triton/imports.py): a kernel file written against Triton
loads on mini_triton, whether or not Triton is installed, and Triton stays Triton outside."""
import sys

import pytest

import mini_triton
from mini_triton.imports import as_triton


@pytest.mark.parametrize("statement, name, expected", [
    ("import triton", "triton", mini_triton),
    ("import triton.language as tl", "tl", mini_triton.language),
    ("from triton import language as tl", "tl", mini_triton.language),
    ("from triton import cdiv", "cdiv", mini_triton.cdiv),
    ("from triton import jit, autotune, Config, heuristics, next_power_of_2", "heuristics", mini_triton.heuristics),
    ("import triton.language.math as tm", "tm", mini_triton.language.math),
    ("from triton.language.extra import libdevice", "libdevice", mini_triton.language.extra.libdevice),
    ("from triton.language.extra.libdevice import rsqrt", "rsqrt", mini_triton.language.extra.libdevice.rsqrt),
    ("from triton.language.extra.cuda.libdevice import rsqrt", "rsqrt", mini_triton.language.extra.libdevice.rsqrt),
    ("import triton.testing", "triton", mini_triton),
])
def test_triton_s_import_paths_give_the_simulator_s_modules(statement, name, expected):
    scope = {}
    with as_triton():
        exec(statement, scope)
    assert scope[name] is expected


def test_a_path_the_simulator_lacks_fails_with_its_name():
    with as_triton(), pytest.raises(ImportError, match="mini_triton, the simulator, has no triton.runtime"):
        exec("from triton.runtime import driver", {})


def test_outside_the_block_triton_is_what_it_was():
    before = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith("triton.")}
    with as_triton():
        exec("import triton.language", {})
        assert sys.modules["triton"] is mini_triton
    after = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith("triton.")}
    assert after == before


def test_a_simulator_module_imported_as_triton_keeps_its_own_name():
    """A module imported through ``import triton...`` is still mini_triton's module afterwards, under its own name
    (importlib.reload, which the README's recipe for a tl op uses in its test, looks a module up by its spec's)."""
    import mini_triton.language.math as tl_math
    with as_triton():
        exec("import triton.language.math", {})
    assert tl_math.__spec__.name == "mini_triton.language.math"
