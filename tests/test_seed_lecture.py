"""The lecture file this assignment grew from runs unchanged on mini_triton.

It lives outside the repository (../shared/seed/, or $SEED_DIR): the course
keeps lecture files and the assignment side by side.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED_DIR = Path(os.environ.get("SEED_DIR", ROOT.parent / "shared" / "seed"))
SEEDS = sorted(SEED_DIR.glob("*.txt")) if SEED_DIR.is_dir() else []


@pytest.mark.skipif(not SEEDS, reason=f"no lecture file in {SEED_DIR}")
def test_seed_lecture_runs_unchanged_and_prints_the_traffic_figures(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, str(SEEDS[0])], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "mini_triton" in text
    M, N = 256, 1024
    figures = [int(v.replace(",", "")) for v in re.findall(r"[读写] ([\d,]+)", text)]
    assert figures == [2 * M * N, M * N + M, 3 * M * N + M, 2 * M * N], text
    diffs = [float(v) for v in re.findall(r"差异 ([\d.e+-]+)", text)]
    assert len(diffs) == 9 and max(diffs) < 1e-4, text
