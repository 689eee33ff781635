"""Mutants of the reference solution: the mistakes a student makes, one at a time, in the code a student writes.

Each mutant is solution/rmsnorm.py with one change inside a ``# [TODO]`` block (the code the starter leaves to the
student). Two kinds of operator make them:

- **generic**, from a maintained mutation-testing library (cosmic-ray's operators, on the parse tree): a comparison
  flipped or widened, an arithmetic operator exchanged, a number off by one, a boolean or a condition negated, a
  loop that runs no trip;
- **domain**, which no general tool knows, written here on Python's ``ast``: a mask or an ``other`` dropped from a
  load or store, the program_id axis, a stride's dimension, two launch arguments exchanged, the saved tensors in
  another order, ``needs_input_grad``'s index, an accumulator's or allocation's dtype, a cast or ``.contiguous()``
  left out, a grid that truncates, eps left out.

    every() -> [Mutant(operator, line, before, after, source), ...]
"""
from __future__ import annotations

import ast
import collections
import dataclasses
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "solution" / "rmsnorm.py"

# The generic operators taken from cosmic-ray, by its names, grouped by the mistake each stands for
GENERIC = {
    "comparison": ["ReplaceComparisonOperator_Lt_LtE", "ReplaceComparisonOperator_Lt_Gt",
                   "ReplaceComparisonOperator_LtE_Lt", "ReplaceComparisonOperator_Gt_GtE",
                   "ReplaceComparisonOperator_GtE_Gt", "ReplaceComparisonOperator_Eq_NotEq",
                   "ReplaceComparisonOperator_NotEq_Eq"],
    "arithmetic": ["ReplaceBinaryOperator_Add_Sub", "ReplaceBinaryOperator_Sub_Add", "ReplaceBinaryOperator_Mul_Add",
                   "ReplaceBinaryOperator_Div_Mul", "ReplaceBinaryOperator_FloorDiv_Mul"],
    "number": ["NumberReplacer"],
    "condition": ["AddNot", "ReplaceTrueWithFalse", "ReplaceFalseWithTrue", "ReplaceAndWithOr", "ReplaceOrWithAnd"],
    "loop": ["ZeroIterationForLoop"],
}


@dataclasses.dataclass(frozen=True)
class Mutant:
    operator: str          # "comparison/ReplaceComparisonOperator_Lt_LtE", "domain/mask_dropped", ...
    line: int              # the line changed (1-based)
    before: str            # that line as it was, and as the mutant has it
    after: str
    source: str
    nth: int = 0           # the how-manieth mutant of this operator on this line (two strides on one line)

    @property
    def name(self) -> str:
        return f"{self.operator.split('/')[-1]}@{self.line}" + (f".{self.nth}" if self.nth else "")


def student_lines(source: str) -> set:
    """The lines of code inside ``# [TODO]`` blocks (nested blocks count once), comments and blank lines left out."""
    depth, lines = 0, set()
    for n, text in enumerate(source.splitlines(), 1):
        stripped = text.strip()
        if re.match(r"#\s*\[/TODO\]", stripped):
            depth -= 1
        elif re.search(r"#\s*\[TODO\]", text):            # on its own line, or after a signature's parameter
            depth += 1
        elif depth > 0 and stripped and not stripped.startswith("#"):
            lines.add(n)
    return lines


def _changed_line(before: str, after: str) -> int | None:
    a, b = before.splitlines(), after.splitlines()
    if len(a) != len(b):
        return None
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    return diff[0] + 1 if len(diff) == 1 else None


def generic(source: str, groups: dict | None = None) -> list:
    """Every mutant of the generic operators (``groups``: GENERIC's) whose one changed line is the student's."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator
    allowed, out = student_lines(source), []
    for group, names in (groups or GENERIC).items():
        for name in names:
            op = get_operator(f"core/{name}")()
            occurrence = 0
            while (code := mutate_code(source, op, occurrence)) is not None:
                occurrence += 1
                line = _changed_line(source, code)
                if line in allowed:
                    out.append(Mutant(f"{group}/{name}", line, source.splitlines()[line - 1],
                                      code.splitlines()[line - 1], code))
    return out


# -- domain operators: each yields (node, replacement text) for the sites it applies to --------------------------
def _call_name(node) -> str:
    f = node.func if isinstance(node, ast.Call) else None
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _without_keyword(src, node, keyword):
    kept = [ast.get_source_segment(src, a) for a in node.args]
    kept += [f"{k.arg}={ast.get_source_segment(src, k.value)}" for k in node.keywords if k.arg != keyword]
    return f"{ast.get_source_segment(src, node.func)}({', '.join(kept)})"


def _mask_dropped(src, tree):
    for node in ast.walk(tree):
        if _call_name(node) in ("load", "store") and any(k.arg == "mask" for k in node.keywords):
            yield node, _without_keyword(src, node, "mask")


def _other_dropped(src, tree):
    for node in ast.walk(tree):
        if _call_name(node) == "load" and any(k.arg == "other" for k in node.keywords):
            yield node, _without_keyword(src, node, "other")


def _program_id_axis(src, tree):
    for node in ast.walk(tree):
        if _call_name(node) == "program_id" and node.args and isinstance(node.args[0], ast.Constant):
            yield node.args[0], str(1 - int(node.args[0].value != 0))


def _stride_dim(src, tree):
    for node in ast.walk(tree):
        if _call_name(node) == "stride" and node.args and isinstance(node.args[0], (ast.Constant, ast.UnaryOp)):
            text = ast.get_source_segment(src, node.args[0])
            yield node.args[0], "1" if text == "0" else "0"


def _arguments_swapped(src, tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):      # kernel[grid](...)
            for a, b in zip(node.args, node.args[1:]):
                if isinstance(a, (ast.Name, ast.Attribute)) and isinstance(b, (ast.Name, ast.Attribute)):
                    args = [ast.get_source_segment(src, x) for x in node.args]
                    i = node.args.index(a)
                    args[i], args[i + 1] = args[i + 1], args[i]
                    kw = [ast.get_source_segment(src, k) for k in node.keywords]
                    yield node, f"{ast.get_source_segment(src, node.func)}({', '.join(args + kw)})"


def _saved_order(src, tree):
    for node in ast.walk(tree):
        if _call_name(node) == "save_for_backward" and len(node.args) > 1:
            args = [ast.get_source_segment(src, x) for x in node.args]
            yield node, f"{ast.get_source_segment(src, node.func)}({', '.join(args[1:] + args[:1])})"


def _needs_input_grad_index(src, tree):
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "needs_input_grad" and isinstance(node.slice, ast.Constant)):
            yield node.slice, "1" if node.slice.value == 0 else "0"


def _dtype_changed(src, tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "float32" and isinstance(node.value, ast.Name):
            yield node, f"{node.value.id}.float16"


def _cast_dropped(src, tree):
    for node in ast.walk(tree):
        if _call_name(node) == "to" and isinstance(node.func, ast.Attribute):
            yield node, ast.get_source_segment(src, node.func.value)


def _contiguous_dropped(src, tree):
    for node in ast.walk(tree):
        if _call_name(node) == "contiguous" and isinstance(node.func, ast.Attribute):
            yield node, ast.get_source_segment(src, node.func.value)


def _grid_truncates(src, tree):
    for node in ast.walk(tree):
        if _call_name(node) == "cdiv" and len(node.args) == 2:
            a, b = (ast.get_source_segment(src, x) for x in node.args)
            yield node, f"({a}) // ({b})"


def _eps_dropped(src, tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.Name) \
                and node.right.id == "eps":
            yield node, ast.get_source_segment(src, node.left)


DOMAIN = {"mask_dropped": _mask_dropped, "other_dropped": _other_dropped, "program_id_axis": _program_id_axis,
          "stride_dim": _stride_dim, "arguments_swapped": _arguments_swapped, "saved_order": _saved_order,
          "needs_input_grad_index": _needs_input_grad_index, "dtype_changed": _dtype_changed,
          "cast_dropped": _cast_dropped, "contiguous_dropped": _contiguous_dropped,
          "grid_truncates": _grid_truncates, "eps_dropped": _eps_dropped}


def _splice(source: str, node, text: str) -> str | None:
    """``source`` with ``node``'s text replaced by ``text`` (a node on one line only: None otherwise)."""
    if node.lineno != node.end_lineno:
        return None
    lines = source.splitlines(keepends=True)
    raw = lines[node.lineno - 1].encode()
    lines[node.lineno - 1] = (raw[:node.col_offset] + text.encode() + raw[node.end_col_offset:]).decode()
    return "".join(lines)


def domain(source: str) -> list:
    allowed, tree, out = student_lines(source), ast.parse(source), []
    for name, sites in DOMAIN.items():
        for node, text in sites(source, tree):
            code = _splice(source, node, text) if node.lineno in allowed else None
            if code is not None and code != source:
                ast.parse(code)
                out.append(Mutant(f"domain/{name}", node.lineno, source.splitlines()[node.lineno - 1],
                                  code.splitlines()[node.lineno - 1], code))
    return out


def every(source: str | None = None) -> list:
    """The mutants of the solution (or of ``source``), domain operators first, each once (by its code)."""
    source = source if source is not None else SOLUTION.read_text()
    return named(domain(source) + generic(source))


def named(made: list) -> list:
    """``made`` with each code once, and each mutant a name of its own (``nth`` where a line has two sites)."""
    seen, out, sites = set(), [], collections.Counter()
    for m in made:
        if m.source not in seen:
            seen.add(m.source)
            out.append(dataclasses.replace(m, nth=sites[m.operator, m.line]))
            sites[m.operator, m.line] += 1
    return out
