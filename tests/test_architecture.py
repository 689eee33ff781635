"""The layers import one way. Read from the source (ast), for mini_triton and the autograder:
no import cycle, and no import of the package's own modules from inside a function, which is
how a cycle is usually dodged. (Imports of other libraries inside functions are fine.)
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
                # "from . import x" imports the module x; "from .m import x" the module m
                targets = [f"{module}.{a.name}" for a in node.names] if not node.module else [module]
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
