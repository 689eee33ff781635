"""Run mutants of the solution through the public tests and the grader, and report the properties of issue
"Every mistake named and charged once", operator by operator:

    python tests/mutation/run.py [--sample N] [--seed S] [--only OPS] [--out build/mutants.md]
                                                                  # make mutants [SAMPLE=N] [ONLY=OPS]

(a) a mutant that fails a public test loses points in the grader; (c) it is charged in one part (and, beside it,
as the handout's rules allow: item 9 beside another part, a host error in every part whose case it stops); (d) the
grader's first message names its concept (domain operators: CONCEPTS), and so does the first failure of the public
tests; (e) every "charged once, in part P" the
feedback says names a part that failed. "silent" counts the mutants that neither fail a public test nor lose a point:
an equivalent change, or a mistake nothing sees. The table goes to --out, each mutant's verdict beside it (.json).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import itertools
import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "tests"), str(ROOT)]
import mutants  # noqa: E402

# words the first message of a domain mutant's charge should hold: the concept the student changed
CONCEPTS = {"mask_dropped": ("mask", "out-of-bounds", "out of bounds"), "other_dropped": ("other", "masked-off"),
            "program_id_axis": ("program_id", "grid"), "stride_dim": ("stride",),
            "arguments_swapped": ("order of", "the other way round"), "saved_order": ("saved",),
            "needs_input_grad_index": ("needs_input_grad",), "dtype_changed": ("dtype", "fp16", "float16"),
            "cast_dropped": ("dtype", "cast", "fp32", "float32"), "contiguous_dropped": ("contiguous", "stride"),
            "grid_truncates": ("grid", "program", "rows"), "eps_dropped": ("eps",)}
PART = re.compile(r"charged once, in part ([\d.]+)")
# A host error's cause (judge/outputs.error_cause): its site, then the task it stopped, in brackets
HOST_ERROR = re.compile(r"^error: (\w+):.*(\(rmsnorm\.py line \d+\)) \[[^\]]+\]$")
RUBRIC_ORDER = ("1", "2", "3", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7", "5", "6", "7", "8", "9")


def public_tests(path: Path, log: Path) -> str | None:
    """The first public test the file fails and its message, as the summary gives them; None if all pass."""
    from autograder import warm
    env = dict(os.environ, RMSNORM_IMPL=str(path), PYTHONDONTWRITEBYTECODE="1")
    log.touch()
    code = warm.pytest(["-q", "-x", "--tb=line", "-p", "no:cacheprovider", "starter/tests"], env=env, cwd=ROOT,
                       out=log, timeout=600)
    if code == 0:
        return None
    lines = log.read_text(errors="replace").splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.startswith(("FAILED ", "ERROR "))), None)
    if at is None:
        return f"exit code {code}"
    said = [lines[at], *itertools.takewhile(lambda ln: ln.startswith("    "), lines[at + 1:])]
    return " ".join(ln.strip() for ln in said)


def charged_once_by_the_rules(parts: list, causes: dict, checked: dict | None = None) -> bool:
    """(c) as the handout counts a charge ("Each mistake costs points once" in handout/README.md): item 9's extra
    credit goes only to a fused, deterministic backward with an exact dg whatever part charged their mistake, so it
    falls with another part; an error the file's host code raises (its type at its line) is charged in every part
    whose case it stops; and a mistake that leaves nothing to check (a kernel's crash, rows no program stored, a
    Function's forward that returns no tensor) is charged in one part and in each other part where it is all there
    is and nothing else of the part could be checked (``checked``: {part: the outputs of the part that could be
    checked}, from the judge's ledgers). Beyond those, one part."""
    rest = [p for p in parts if p != "9"] or parts
    if len(rest) <= 1:
        return True
    sites = set()
    for p in rest:
        hosts = {m.groups() for c in causes.get(p, []) for m in [HOST_ERROR.match(c)] if m}
        if not hosts:
            break
        sites |= hosts
    else:
        return len(sites) == 1
    return checked is not None and nothing_else_to_check(rest[0], rest, causes, checked)


def nothing_else_to_check(charging: str, parts: list, causes: dict, checked: dict) -> bool:
    """Whether each of ``parts`` but ``charging`` saw some of the causes ``charging`` charged and no other (a forward
    that stores nothing shows as y's rows and r never stored in item 1, as y's rows alone in item 5), and could
    check nothing of its own."""
    own = set(causes.get(charging, []))
    # item 1 owns y's and r's values, item 2 dx's: where it charges a cause of its own, a value of those no known
    # formula explains is its mistake too (the handout: "Item 1 owns the values of y and r")
    values = {"1": {"formula_fwd"}, "2": {"formula_bwd"}}.get(charging, set()) if own else set()
    return bool(own) and all(causes.get(p) and set(causes[p]) <= own | values and not checked.get(p)
                             for p in parts if p != charging)


def assess(m, public, verdict) -> dict:
    failed = verdict["failed"]
    parts = [p for p in RUBRIC_ORDER if p in failed]
    said = [*failed.values(), *(n for notes in verdict["notes"].values() for n in notes)]
    claimed = {p for s in said for p in PART.findall(s)}
    kind = m.operator.split("/")[-1]
    first = failed[parts[0]] if parts else ""
    return {"mutant": m.name, "operator": m.operator, "line": m.line, "before": m.before.strip(),
            "after": m.after.strip(), "public": public, "parts": parts, "first": first[:400],
            "causes": {p: c for p, c in verdict.get("causes", {}).items() if c}, "checked": verdict.get("checked"),
            "a": public is None or bool(parts), "c": len(parts) <= 1,
            "c_rules": charged_once_by_the_rules(parts, verdict.get("causes", {}), verdict.get("checked")),
            "d": None if kind not in CONCEPTS or not parts else any(w in first.lower() for w in CONCEPTS[kind]),
            "d_public": None if kind not in CONCEPTS or public is None else any(w in public.lower()
                                                                               for w in CONCEPTS[kind]),
            "e": claimed <= set(parts), "silent": public is None and not parts}


def run(chosen: list, workers: int = 2) -> list:
    from grade_in_process import verdicts
    from autograder import config
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        d, paths = Path(tmp), {}
        for m in chosen:
            paths[m.name] = d / m.name.replace("@", "_").replace(".", "_") / "rmsnorm.py"
            paths[m.name].parent.mkdir()
            paths[m.name].write_text(m.source)
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            public = dict(zip(paths, pool.map(lambda n: public_tests(paths[n], paths[n].parent / "public.log"),
                                              paths)))
        # each grading process capped as the sandbox caps a job's (a file whose kernels the simulator cannot hold
        # within it is charged as a grading charges it, and never takes the machine's memory)
        graded = verdicts(paths, workers=workers, memory_bytes=config.SIM_LIMITS.memory_bytes)
    return [assess(m, public[m.name], graded[m.name]) for m in chosen]


HEADER = ("| operator | mutants | fail a public test | lose points | (a) | (c) one part | (c) by the handout's rules "
          "| (d) the grader names it | (d) the public tests name it | (e) | silent |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


def row(name: str, rs: list) -> str:
    """One line of the table: counts of the mutants ``rs`` for which each property holds."""
    def share(key):
        held = [r[key] for r in rs if r[key] is not None]
        return f"{sum(held)}/{len(held)}" if held else "n/a"
    counts = [len(rs), sum(r["public"] is not None for r in rs), sum(bool(r["parts"]) for r in rs),
              sum(r["a"] for r in rs), sum(r["c"] for r in rs), sum(r["c_rules"] for r in rs),
              share("d"), share("d_public"), sum(r["e"] for r in rs), sum(r["silent"] for r in rs)]
    return f"| {name} | " + " | ".join(str(c) for c in counts) + " |"


def table(rows: list) -> str:
    by = collections.defaultdict(list)
    for r in rows:
        by[r["operator"]].append(r)
    return "\n".join([HEADER, *(row(op, rs) for op, rs in sorted(by.items())), row("**all**", rows)]) + "\n"


def sample(every: list, n: int | None, seed: int) -> list:
    """``n`` mutants, each operator's share of them in turn (all of them without ``n``)."""
    if n is None or n >= len(every):
        return every
    rng = random.Random(seed)
    by = collections.defaultdict(list)
    for m in every:
        by[m.operator].append(m)
    for ms in by.values():
        rng.shuffle(ms)
    chosen, ops = [], sorted(by)
    while len(chosen) < n:
        for op in ops:
            if by[op] and len(chosen) < n:
                chosen.append(by[op].pop())
    return chosen


def only(every: list, names: list) -> list:
    """The mutants of the operators ``names`` (by their last name: "dtype_changed", "NumberReplacer")."""
    unknown = set(names) - {m.operator.rpartition("/")[2] for m in every}
    if unknown:
        raise SystemExit(f"no mutants of the operators {sorted(unknown)}")
    return [m for m in every if m.operator.rpartition("/")[2] in names]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", help="operators, by their last name, comma-separated (dtype_changed,stride_dim)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "mutants.md")
    args = ap.parse_args(argv)
    every = mutants.every()
    if args.only:
        every = only(every, args.only.split(","))
    rows = run(sample(every, args.sample, args.seed))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = f"{len(rows)} of {len(every)} mutants of solution/rmsnorm.py\n\n" + table(rows)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
