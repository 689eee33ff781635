"""The layers import one way. Read from the source (ast), for mini_triton and the autograder:
no import cycle; each module imports only modules of the layers its package declares above its own
(docs/architecture.md for the grader); no import of the package's own modules from inside a function,
which is how a cycle is usually dodged (imports of other libraries inside functions are fine); and no
module imports another's private (underscore) name.
"""
import ast

import pytest

from conftest import ROOT

PACKAGES = ("mini_triton", "autograder")


def module_name(path, package):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports(package):
    """(module, imported module, line, inside a function?) for every import of the package's own modules."""
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
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
                if t.split(".")[0] == package:
                    out.append((name, _existing(t), node.lineno, id(node) in in_function))
    return out


def _existing(target):
    """``target``, or the longest prefix of it that is a module of the project (an imported name is not)."""
    parts = target.split(".")
    while parts:
        path = ROOT.joinpath(*parts)
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


# ---- the declared order --------------------------------------------------------------------------------------

def declared_layers(text, package):
    """[[module, ...], ...] from the code block after "<!-- layers: package -->" in ``text``: one row per
    layer, lowest first, names relative to the package."""
    block = text.split(f"<!-- layers: {package} -->", 1)[1].split("```", 2)[1]
    return [[f"{package}.{m.strip()}" for m in row.split(",")] for row in block.strip().splitlines()]


def layer_violations(edges, layers):
    """"a imports b" for each import of a module of the same layer or a later one, and of an unlisted one."""
    row = {m: i for i, names in enumerate(layers) for m in names}
    out = []
    for a, targets in sorted(edges.items()):
        for b in sorted(targets):
            if a not in row or b not in row:
                out.append(f"{a} imports {b}: {a if a not in row else b} is in no layer")
            elif row[b] >= row[a]:
                out.append(f"{a} (layer {row[a] + 1}) imports {b} (layer {row[b] + 1})")
    return out


def test_the_grader_imports_in_the_order_its_architecture_declares():
    layers = declared_layers((ROOT / "docs" / "architecture.md").read_text(), "autograder")
    files = list((ROOT / "autograder").rglob("*.py"))
    modules = {module_name(p, "autograder") for p in files}
    edges = {}
    for module, target, _, _ in project_imports("autograder"):
        if target != module:
            edges.setdefault(module, set()).add(target)
    # a package whose __init__ imports nothing of the project is only a folder: it is in no layer
    packages = {module_name(p, "autograder") for p in files if p.name == "__init__.py"} - set(edges)
    edges = {m: targets - packages for m, targets in edges.items()}
    assert not layer_violations(edges, layers), layer_violations(edges, layers)
    listed = {m for row in layers for m in row}
    assert listed == modules - packages, listed ^ (modules - packages)


def test_the_order_checker_finds_an_import_upwards_and_an_unlisted_module():
    layers = [["p.a"], ["p.b", "p.c"], ["p.d"]]
    assert layer_violations({"p.d": {"p.a", "p.b"}, "p.b": {"p.a"}}, layers) == []
    assert layer_violations({"p.a": {"p.d"}}, layers) == ["p.a (layer 1) imports p.d (layer 3)"]
    assert layer_violations({"p.b": {"p.c"}}, layers) == ["p.b (layer 2) imports p.c (layer 2)"]
    assert layer_violations({"p.d": {"p.x"}}, layers) == ["p.d imports p.x: p.x is in no layer"]


# ---- private names -------------------------------------------------------------------------------------------

def private_uses(path):
    """Where a module imports a private name from another module of the project, or reads one as an attribute
    of an imported project module: [(line, what)]."""
    tree = ast.parse(path.read_text())
    own = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PROJECT):
            for a in node.names:
                own.add(a.asname or a.name)
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append((node.lineno, f"imports {a.name} from {node.module or '.'}"))
        elif isinstance(node, ast.Import):
            own.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in PROJECT)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in own
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            out.append((node.lineno, f"reads {node.value.id}.{node.attr}"))
    return out


PROJECT = {"mini_triton", "autograder", "rmsnorm_check", "rmsnorm_causes", "rmsnorm_diagnose", "starter"}


@pytest.mark.parametrize("folder", ["mini_triton", "autograder", "starter", "solution"])
def test_no_module_uses_another_modules_private_names(folder):
    found = [f"{p.relative_to(ROOT)} line {line}: {what}" for p in sorted((ROOT / folder).rglob("*.py"))
             for line, what in private_uses(p)]
    assert not found, found


def test_the_private_name_checker_finds_both_forms(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("from mini_triton.blocks import _hidden\nfrom . import memory\nmemory._records\nx._fine\n")
    assert private_uses(p) == [(1, "imports _hidden from mini_triton.blocks"), (3, "reads memory._records")]
