"""The layers import one way. Read from the source (ast), for mini_triton and the autograder:
no import cycle; no import of the package's own modules from inside a function, which is how a
cycle is usually dodged (imports of other libraries inside functions are fine).

Each package declares its layers, and every module is listed there once and imports only modules
of layers before its own: mini_triton in its README ("errors, dtypes, heap -> runtime -> ..."), the
grader and the test kit it shares with the public tests (rmsnorm_testkit) in docs/architecture.md (one row
per layer; the grader's first row is the test kit, as one unit). No module of the project uses another module's
private names (``from .m import _x``, ``m._x``, ``obj._x`` of an attribute another module owns).
"""
import ast
import re

import pytest

from conftest import ROOT

# each package, and the folder that holds it
FOLDERS = {"mini_triton": ROOT, "autograder": ROOT, "rmsnorm_testkit": ROOT / "starter"}
PACKAGES = tuple(FOLDERS)


def module_name(path, package):
    parts = list(path.relative_to(FOLDERS[package]).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports(package, also=()):
    """(module, imported module, line, inside a function?) for every import of the package's own modules, and of
    the packages ``also``."""
    out = []
    for path in sorted((FOLDERS[package] / package).rglob("*.py")):
        name = module_name(path, package)
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text())
        in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                # "from . import x" and "from pkg import x" import the module x when there is one; else the
                # name x of the module pkg
                targets = [_existing(f"{module}.{a.name}") for a in node.names]
            else:
                continue
            for t in targets:
                if t.split(".")[0] in (package, *also):
                    out.append((name, _existing(t), node.lineno, id(node) in in_function))
    return out


def _existing(target):
    """``target``, or the longest prefix of it that is a module of the project (an imported name is not)."""
    parts = target.split(".")
    while parts:
        path = FOLDERS.get(parts[0], ROOT).joinpath(*parts)
        if path.with_suffix(".py").exists() or (path / "__init__.py").exists():
            return ".".join(parts)
        parts.pop()
    return target


def cycle(edges):
    """One import cycle among ``edges`` {module: {imported}} as a list of modules, or None."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles(package):
    edges = {}
    for module, target, _, _ in project_imports(package):
        if target != module:
            edges.setdefault(module, set()).add(target)
    assert edges, "no imports found: the test reads nothing"
    found = cycle(edges)
    assert found is None, "import cycle: " + " -> ".join(found)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_project_imports_inside_functions(package):
    inside = [f"{m} line {line} imports {t}" for m, t, line, in_function in project_imports(package) if in_function]
    assert not inside, inside


def test_the_checker_finds_a_cycle_and_a_function_level_import(tmp_path):
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": {"c"}}) is None


# ---------------------------------------------------------------------------
# mini_triton: the declared layers
# ---------------------------------------------------------------------------
MINI_TRITON_README = ROOT / "mini_triton" / "README.md"


def declared_layers(readme: str) -> list[set]:
    """The layer chain of the README's file map, lowest first: "a, b -> c" is [{"a", "b"}, {"c"}]."""
    section = readme.split("## File map", 1)[1]
    chain = re.search(r"```\n([^`]*?->[^`]*?)\n```", section).group(1)
    return [{m.strip() for m in level.split(",")} for level in " ".join(chain.split()).split("->")]


def unit(module: str) -> str:
    """The name the chain gives a mini_triton module: "memory", "language" (the whole package), "__init__"."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def mini_triton_units() -> set:
    return {unit(module_name(p, "mini_triton")) for p in (ROOT / "mini_triton").rglob("*.py")}


def layer_violations(layers, edges) -> list[str]:
    """Each import (module, imported) of ``edges`` that does not go to a layer left of the module's; a module in no
    layer, named with the three places a new module goes."""
    level = {m: i for i, layer in enumerate(layers) for m in layer}
    unlisted = sorted({m for edge in edges for m in edge if m not in level})
    if unlisted:
        return [f"{m} is in no layer: add it to the chain and the file-map table of mini_triton/README.md "
                f"(\"File map\") and to the chain of docs/architecture.md (\"The simulator\")" for m in unlisted]
    return [f"{a} imports {b}, at {'its own level' if level[a] == level[b] else 'a later level'}"
            for a, b in sorted(edges) if a != b and level[a] <= level[b]]


def test_the_architecture_notes_show_the_readmes_chain():
    readme, notes = MINI_TRITON_README.read_text(), (ROOT / "docs" / "architecture.md").read_text()
    assert declared_layers(readme) == declared_layers(notes.replace("## The simulator", "## File map", 1))


def test_the_readme_chain_lists_every_mini_triton_module_once():
    layers = declared_layers(MINI_TRITON_README.read_text())
    listed = [m for layer in layers for m in layer]
    assert len(listed) == len(set(listed)), f"listed twice: {sorted(m for m in listed if listed.count(m) > 1)}"
    assert set(listed) == mini_triton_units(), (f"not in the chain: {sorted(mini_triton_units() - set(listed))}; "
                                                f"no such module: {sorted(set(listed) - mini_triton_units())}")


def test_mini_triton_imports_only_modules_of_earlier_layers():
    layers = declared_layers(MINI_TRITON_README.read_text())
    edges = {(unit(m), unit(t)) for m, t, _, _ in project_imports("mini_triton")}
    assert len(edges) > 20, "the test reads too few imports"
    assert layer_violations(layers, edges) == []


@pytest.mark.parametrize("edges, found", [
    ({("b", "a"), ("c", "a"), ("c", "b")}, []),
    ({("b", "b2")}, ["b imports b2, at its own level"]),
    ({("a", "c")}, ["a imports c, at a later level"]),
    ({("c", "a"), ("b", "c")}, ["b imports c, at a later level"]),
    ({("d", "a")}, ['d is in no layer: add it to the chain and the file-map table of mini_triton/README.md '
                    '("File map") and to the chain of docs/architecture.md ("The simulator")']),
])
def test_the_layer_checker_catches_imports_at_the_same_or_a_later_level(edges, found):
    layers = declared_layers("## File map\n\n```\na -> b, b2\n  -> c\n```\n")
    assert layers == [{"a"}, {"b", "b2"}, {"c"}]
    assert layer_violations(layers, edges) == found


def test_the_file_map_table_describes_every_mini_triton_module():
    table = MINI_TRITON_README.read_text().split("## File map", 1)[1].split("\n#", 1)[0]
    described = set(re.findall(r"^\| .*?`(\w+)(?:\.py|/)`", table, re.M))
    described |= set(re.findall(r"`(\w+)\.py`", " ".join(ln for ln in table.splitlines() if ln.startswith("| `"))))
    assert mini_triton_units() - described == set()


# ---------------------------------------------------------------------------
# the grader: the declared layers (docs/architecture.md)
# ---------------------------------------------------------------------------
TESTKIT = ROOT / "starter" / "rmsnorm_testkit"


def grader_layers(text: str, package: str = "autograder") -> list[set]:
    """The rows of the code block after "<!-- layers: PACKAGE -->", lowest first, as sets of modules."""
    block = text.split(f"<!-- layers: {package} -->", 1)[1].split("```", 2)[1]
    return [{m.strip() for m in row.split(",")} for row in block.strip().splitlines()]


def test_the_test_kit_imports_in_the_order_its_architecture_declares():
    """rmsnorm_testkit's modules, each listed once, import only modules of the rows above their own."""
    layers = grader_layers((ROOT / "docs" / "architecture.md").read_text(), "rmsnorm_testkit")
    edges = {(m.removeprefix("rmsnorm_testkit."), t.removeprefix("rmsnorm_testkit.")) for m, t, _, _ in
             project_imports("rmsnorm_testkit") if m != t}
    modules = {p.stem for p in TESTKIT.glob("*.py")} - {"__init__"}
    listed = [m for layer in layers for m in layer]
    assert sorted(listed) == sorted(modules), set(listed) ^ modules
    assert len(edges) >= 4, "the test reads too few imports"
    assert layer_violations(layers, edges) == []


def test_the_grader_imports_in_the_order_its_architecture_declares():
    layers = grader_layers((ROOT / "docs" / "architecture.md").read_text())
    files = list((ROOT / "autograder").rglob("*.py"))
    short = {p: module_name(p, "autograder").removeprefix("autograder").lstrip(".") for p in files}
    short[TESTKIT] = "rmsnorm_testkit"                   # the test kit, one unit here (its own layers below)
    edges = {(m.removeprefix("autograder."), t.removeprefix("autograder.")) for m, t, _, _ in
             project_imports("autograder", also=("rmsnorm_testkit",)) if m != t}
    edges = {(a, "rmsnorm_testkit" if b.startswith("rmsnorm_testkit") else b) for a, b in edges}
    assert any(b == "rmsnorm_testkit" for _, b in edges), "no import of the test kit found"
    # a package whose __init__ imports nothing of the project is only a folder: it is in no layer
    folders = {short[p] for p in files if p.name == "__init__.py"} - {a for a, _ in edges}
    edges = {(a, b) for a, b in edges if b not in folders and b != "autograder"}
    listed = [m for layer in layers for m in layer]
    assert len(listed) == len(set(listed)), f"listed twice: {sorted(m for m in listed if listed.count(m) > 1)}"
    assert set(listed) == set(short.values()) - folders, set(listed) ^ (set(short.values()) - folders)
    assert len(edges) > 40, "the test reads too few imports"
    assert layer_violations(layers, edges) == []


# ---------------------------------------------------------------------------
# the job's trust line: the judge's side and the submission's side meet only through the wire
# ---------------------------------------------------------------------------
SIDES = ("job.judge", "job.submission", "job.wire")


def side_of(module: str) -> str | None:
    return next((s for s in SIDES if module == s or module.startswith(s + ".")), None)


def crossings(edges) -> list[str]:
    """Each import (module, imported) across the trust line: between the judge's side and the submission's, or
    from the wire into either side."""
    out = []
    for a, b in sorted(edges):
        sa, sb = side_of(a), side_of(b)
        if sa and sb and sa != sb and sb != "job.wire":
            out.append(f"{a} imports {b}: the {sa.split('.')[1]}'s side and the {sb.split('.')[1]}'s meet only "
                       f"through job.wire")
    return out


def test_the_judges_side_and_the_submissions_side_never_import_each_other():
    edges = {(m.removeprefix("autograder."), t.removeprefix("autograder.")) for m, t, _, _ in
             project_imports("autograder") if m != t}
    assert {side_of(m) for edge in edges for m in edge} >= set(SIDES), "the test reads no module of some side"
    assert any(side_of(a) == "job.judge" and side_of(b) == "job.wire" for a, b in edges)
    assert crossings(edges) == []


@pytest.mark.parametrize("edge, crosses", [
    (("job.judge.remote", "job.wire.channel"), False),
    (("job.submission.host", "job.wire.phases"), False),
    (("job.main", "job.judge.remote"), False),
    (("job.judge.remote", "job.submission.host"), True),
    (("job.submission.client", "job.judge.launches"), True),
    (("job.wire.phases", "job.submission.phase"), True),
])
def test_the_trust_line_checker_finds_an_import_across_it(edge, crosses):
    assert bool(crossings({edge})) == crosses


# ---------------------------------------------------------------------------
# private names stay in their module
# ---------------------------------------------------------------------------
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def owned_attributes(tree) -> set:
    """Names a module defines on its objects: assigned attributes, class members, __slots__ entries."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
                    if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets):
                        names |= {c.value for c in ast.walk(item.value) if isinstance(c, ast.Constant)}
    return names


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


# The project's own modules, wherever they are imported from: the packages and the files the tests share.
PROJECT = {"mini_triton", "autograder", "starter", "rmsnorm_testkit", "rmsnorm"}


def private_uses(source: str, project=PROJECT) -> list[str]:
    """Uses of private names the module does not own: imported from a module of the project, or read as an
    attribute (``memory._poison``, ``arg._records``) that no code of this module defines. Attributes of other
    libraries (``sys._getframe``, ``torch.utils._pytree``) are theirs to judge."""
    tree = ast.parse(source)
    own, libraries, found = owned_attributes(tree), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            libraries |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] not in project}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] not in project:
            libraries |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            found += [f"line {node.lineno} imports {a.name}" for a in node.names if _private(a.name)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own \
                and _root(node) not in libraries:
            found.append(f"line {node.lineno} uses {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("folder", ["mini_triton", "autograder", "starter", "solution"])
def test_no_module_uses_another_modules_private_names(folder):
    found = {str(p.relative_to(ROOT)): uses for p in sorted((ROOT / folder).rglob("*.py"))
             for uses in [private_uses(p.read_text())] if uses}
    assert found == {}


@pytest.mark.parametrize("source, found", [
    ("from .memory import _poison\n", ["line 1 imports _poison"]),
    ("from . import _malloc\n", ["line 1 imports _malloc"]),
    ("from . import memory\nx = memory._poison(1)\n", ["line 2 uses memory._poison"]),
    ("def f(arg):\n    return arg._records\n", ["line 2 uses arg._records"]),
    ("class A:\n    def __init__(self):\n        self._h = 1\n\ndef f(a):\n    return a._h\n", []),
    ("import sys\nfrom torch.utils._pytree import tree_leaves\nf = sys._getframe(1)\n", []),
    ("from .blocks import is_literal as _is_literal\n", []),
])
def test_the_private_name_checker(source, found):
    assert private_uses(source) == found
