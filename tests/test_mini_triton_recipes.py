"""mini_triton/README.md's "How to add a check", run as it stands there: the module it shows is
loaded into the package, its observer registered; the observer sees the launches' accesses and
rejects the one it is about; unregistered, it sees nothing more."""
import linecache
import re
import types

import pytest
import torch

import mini_triton as triton
from conftest import ROOT
from mini_triton import observers

tl = triton.language


def readme_check_module():
    """The recipe's code block, run as the module it names (``# mini_triton/readonly.py``)."""
    section = (ROOT / "mini_triton" / "README.md").read_text().split("### How to add a check", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    name = re.match(r"# mini_triton/(\w+)\.py\n", code).group(1)
    module = types.ModuleType(f"mini_triton.{name}")
    module.__package__ = "mini_triton"
    exec(compile(code, f"mini_triton/README.md ({name}.py)", "exec"), module.__dict__)
    return module


@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def double_in_place(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_the_readme_check_sees_every_launch_and_rejects_a_write_of_an_input():
    check = readme_check_module()
    name = f"{check.__name__}.check"
    x, y = torch.randn(100), torch.empty(100)
    try:
        assert observers.registered().index(name) == observers.registered().index("mini_triton.races.check") + 1
        double[(4,)](x, y, 100, BLOCK=32)                       # reads x_ptr, writes y_ptr: accepted
        torch.testing.assert_close(y, 2 * x)
        with pytest.raises(check.ReadOnlyError, match=r"^store into x_ptr in double_in_place line \d+: "
                                                      r"double_in_place must only read it$") as e:
            double_in_place[(4,)](x, 100, BLOCK=32)
        line = int(re.search(r"line (\d+)", str(e.value)).group(1))
        assert "tl.store(x_ptr + offs" in linecache.getline(double_in_place.fn.__code__.co_filename, line)
    finally:
        observers.unregister(check.check)
    assert name not in observers.registered()
    before = x.clone()
    double_in_place[(4,)](x, 100, BLOCK=32)                     # nobody checks it any more
    torch.testing.assert_close(x, 2 * before)


def test_the_check_recipe_places_its_module_in_the_lists_every_module_is_in():
    """The recipe's last step, performed: its module, in no list, is named with the three places it goes; placed
    where the recipe says (beside races), the layering, file-map and architecture checks hold."""
    from test_architecture import declared_layers, layer_violations
    readme = (ROOT / "mini_triton" / "README.md").read_text()
    section = readme.split("### How to add a check", 1)[1].split("\n## ", 1)[0]
    for place in ("layer chain", "file-map table", "docs/architecture.md", "beside `races`"):
        assert place in section, place
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    name = re.match(r"# mini_triton/(\w+)\.py\n", code).group(1)
    edges = {(name, m) for m in re.findall(r"^from \.(\w*) import|^from \. import (\w+)", code, re.M) for m in m if m}
    edges.add(("__init__", name))
    notes = (ROOT / "docs" / "architecture.md").read_text().replace("## The simulator", "## File map", 1)
    missing = layer_violations(declared_layers(readme), edges)
    assert missing and all(f"{name} is in no layer" in m and "docs/architecture.md" in m for m in missing), missing
    for text in (readme, notes):
        placed = text.replace("races, stats, frontend", f"races, {name}, stats, frontend", 1)
        assert placed != text
        assert layer_violations(declared_layers(placed), edges) == []
