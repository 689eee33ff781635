#!/usr/bin/env bash
# The H200 runs of docs/perf.md, in stages that each fit one call of the device (10 minutes):
#   bash tests/gpu_runs.sh fidelity_and_designs OUT   # compile rules; item 10's shares of tests/perf_designs.py's
#                                                     # designs and the microbenchmarks; the model held to them
#   bash tests/gpu_runs.sh styles_and_solution OUT    # the other library styles' shares; the solution graded whole
#   bash tests/gpu_runs.sh regrade OUT                # 24 submissions (22 with SLOW=0) through grade-all, resumable
#                                                     # across calls and sessions (STATE=a .tar that OUT/regrade.tar
#                                                     # came back as)
#   bash tests/gpu_runs.sh item10 OUT "A B"         # item 10 alone of the named entries (or files), at once;
#                                                     # a name given twice is graded twice
#                                                     # (speed_hostile's, timed_hostile's, solution, control)
#   bash tests/gpu_runs.sh speed_hostile OUT ["A B"]  # item 10 of tests/speed_hostile.py's entries, AT_ONCE at once
#   bash tests/gpu_runs.sh shared OUT                 # a pipelined loop's shared memory (tests/probe_shared_memory.py)
# Run from the repository root with the machine's python3 (torch and Triton); OUT collects tables and logs.
set -uo pipefail
stage=$1 out=$2
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv,noheader
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
case $stage in
  fidelity_and_designs)
    python3 -m pytest -q -p no:cacheprovider tests/test_compile_rules_gpu.py 2>&1 | tail -3 | tee "$out/fidelity.txt"
    python3 tests/perf_model_gpu.py measure "$out/designs.json" designs 2>&1 | tee "$out/designs.log"
    PERF_MEASURED="$out/designs.json" python3 -m pytest -q -p no:cacheprovider tests/test_perf_model_gpu.py 2>&1 \
      | tail -15 | tee "$out/model_test.txt" ;;
  styles_and_solution)
    python3 -m autograder.accounts create >/dev/null
    (time python3 -m autograder.grade solution/rmsnorm.py "$out/solution.json") 2>&1 | tail -40 > "$out/solution.log"
    python3 - "$out/solution.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("solution:", sum(t["score"] for t in r["tests"]), [(t["number"], t["score"], t["max_score"]) for t in r["tests"] if t["number"].startswith("10")])
print(r.get("leaderboard"))
PY
    python3 tests/perf_model_gpu.py measure "$out/styles.json" styles 2>&1 | tee "$out/styles.log" ;;
  speed_hostile)                  # in AT_ONCE gradings at once (each with the control): the checks decide these
    python3 -m autograder.accounts create >/dev/null
    names=${3:-$(python3 -c "import sys; sys.path.insert(0, 'tests'); import speed_hostile as s, speed_hostile_more as m; print(*sorted({**s.HOSTILE, **m.MORE}))")}
    groups=${AT_ONCE:-6} i=0 logs=$(mktemp -d)
    for n in $names; do g[$((i % groups))]+="${g[$((i % groups))]:+,}$n"; i=$((i + 1)); done
    for k in "${!g[@]}"; do
      SPEED_HOSTILE_REPORT="$logs/$k.md" SPEED_HOSTILE_ONLY="${g[$k]}" timeout 560 python3 -m pytest -q -s \
        -p no:cacheprovider tests/test_autograder_speed_hostile.py -k gpu >"$logs/$k.log" 2>&1 &
    done
    wait
    cat "$logs"/*.log > "$out/speed_hostile.log"; cat "$logs"/*.md | tee "$out/speed_hostile.md"
    grep -h "passed\|failed\|Error" "$logs"/*.log | tail -12 ;;
  regrade)                        # a class of 24 (18 library styles, 6 mistakes) through make grade-all's warm
                                  # server, about 90 s a submission on one GPU (so more than one session's device
                                  # time): resumable, with the same EXPORT on a warm machine, or on a fresh one
                                  # from STATE (the OUT/regrade.tar of the last call, carried)
    python3 -m autograder.accounts create >/dev/null
    ex=${EXPORT:-/tmp/class_export}
    python3 - "$ex" <<'PY'
import os, sys
from pathlib import Path
sys.path.insert(0, "tests")
import mistakes
ex = Path(sys.argv[1])
if not (ex / "submission_metadata.yml").exists():
    slow = ("attorch", "fla")          # Triton compiles these for many minutes (docs/perf.md, 2026-12-03): last,
    styles = sorted(Path("tests/library_styles").glob("*.py"))       # after the mistakes
    files = {p.stem: p.read_text() for p in styles if p.stem not in slow}
    files.update({f"mistake_{m}": mistakes.mistake(m) for m in list(mistakes.EDITS)[:6]})
    if os.environ.get("SLOW", "1") != "0":                           # SLOW=0: a class of 22, without them
        files.update({p.stem: p.read_text() for p in styles if p.stem in slow})
    meta = ["---"]
    for i, (name, src) in enumerate(files.items()):
        (ex / f"submission_{1000 + i}").mkdir(parents=True)
        (ex / f"submission_{1000 + i}" / "rmsnorm.py").write_text(src)
        meta += [f"submission_{1000 + i}:", "  :submitters:", f"  - :name: {name}", f"    :sid: '{i}'",
                 f"    :email: s{i}@example.edu", "  :score: 0.0"]
    (ex / "submission_metadata.yml").write_text("\n".join(meta) + "\n")
print(sum(p.is_dir() for p in ex.glob("submission_*")), "submissions in", ex)
PY
    if [ -n "${STATE:-}" ] && [ -f "$STATE" ]; then mkdir -p "$ex/regrade" && tar -xf "$STATE" -C "$ex/regrade"; fi
    (time timeout ${LIMIT:-560} python3 -m autograder.grade_all "$ex" --out "$out/grades.csv") 2>&1 | tail -30
    tar -cf "$out/regrade.tar" -C "$ex/regrade" .          # the gradings so far, for STATE next time
    ls "$ex/regrade" | wc -l ;;
  shared)                         # what Triton gives a pipelined loop in shared memory, and where a launch fails
    python3 tests/probe_shared_memory.py 2>&1 | tee "$out/shared.txt" ;;
  item10)                         # item 10 alone of the named entries (speed_hostile's, or "solution"), at once
    python3 -m autograder.accounts create >/dev/null
    script=$(mktemp --suffix=.py)       # a file, not stdin: the warm server's processes import it again
    cat > "$script" <<'PY'
import concurrent.futures, json, os, sys, tempfile
from pathlib import Path
sys.path[:0] = ["tests", "starter", "."]
import speed_hostile, speed_hostile_more, timed_hostile
from autograder import config, grade
every = {"solution": Path("solution/rmsnorm.py").read_text(), "control": speed_hostile.CONTROL,
         **{k: v[2] for k, v in {**speed_hostile.HOSTILE, **speed_hostile_more.MORE}.items()},
         **{k: timed_hostile.source(k) for k in timed_hostile.TIMED_TRICKS}}
d = Path(tempfile.mkdtemp())


def one(name, i):
    source = every[name] if name in every else Path(name).read_text()       # an entry, or a file's path
    name = (Path(name).stem if name not in every else name) + (f".{i}" if sys.argv[1:].count(name) > 1 else "")
    (d / name).mkdir()
    (d / name / "rmsnorm.py").write_text(source)
    res = grade.grade(d / name / "rmsnorm.py", d / f"{name}.json", env=dict(os.environ, **{config.GPU_TASKS_VAR: "speed"}),
                      select="gpu_speed")
    parts = {t["number"]: t for t in res["tests"] if t["number"].startswith("10.")}
    return name, sum(t["score"] for t in parts.values()), {n: t.get("output", "")[:240] for n, t in parts.items()}
if __name__ == "__main__":            # (the warm server imports this file again: nothing runs then)
    with concurrent.futures.ThreadPoolExecutor(int(os.environ.get("AT_ONCE", len(sys.argv) - 1))) as pool:
        for done in concurrent.futures.as_completed([pool.submit(one, n, i) for i, n in enumerate(sys.argv[1:])]):
            name, score, said = done.result()                   # each as it ends
            print(f"== {name}: {score:g} / 10", json.dumps(said, indent=1), flush=True)
PY
    python3 "$script" $3 ;;
  *) echo "unknown stage $stage"; exit 2 ;;
esac
