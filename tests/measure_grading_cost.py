"""Wall time and peak memory of one full grading on this machine (docs/ta-guide.md records it).

    .venv/bin/python tests/measure_grading_cost.py [SUBMISSION]

Peak memory is the largest sum of the resident sets of the grader's whole process tree
(pytest, the sandboxed jobs), sampled every 20 ms.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def main(argv):
    sub = argv[0] if argv else str(ROOT / "solution" / "rmsnorm.py")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "autograder.grade", sub, str(ROOT / "build" / "cost.json")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.02)
    wall = time.monotonic() - start
    total = [ln for ln in proc.stdout.read().decode().splitlines() if ln.startswith("total")]
    print(f"{Path(sub).name}: {wall:.1f} s wall, peak {peak / 2 ** 30:.2f} GiB resident ({os.cpu_count()} CPUs); "
          f"{total[0].split(None, 1)[1] if total else 'no total'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
