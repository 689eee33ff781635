import os
import sys
from pathlib import Path

# Triton's interpreter must be chosen before triton is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
