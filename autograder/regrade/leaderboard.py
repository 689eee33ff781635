"""The regrade's speed leaderboard: each submission's item-10 shares of a copy's bandwidth, as its results.json's
``leaderboard`` entries hold them (measured on a GPU regrade, predicted on a CPU one), ranked by their mean.

Written beside the CSV as ``leaderboard.csv`` and ``leaderboard.md`` (a table a TA can post). Students are named
only when the TA asks for it (``--leaderboard-names``); otherwise a row shows its submission's folder, which a
student can recognise as their own (Gradescope shows it) and nobody else can tie to a name.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

from ..judge.speed import ITEM_10_PARTS as SPEED, board_name
from ..plugin import open_private
from ..rubric import PARTS


def entries(res: dict) -> dict:
    """{speed part: its share of copy, and whether it was predicted} from one results.json's leaderboard."""
    out = {}
    for e in res.get("leaderboard") or []:
        if not isinstance(e, dict) or not isinstance(e.get("value"), (int, float)):
            continue
        name = str(e.get("name", ""))
        for part in SPEED:
            for predicted in (False, True):
                if name == board_name(part, predicted):
                    out[part] = (float(e["value"]), predicted)
    return out


def rows(subs, results_dir: Path, names: bool = False) -> list:
    """One row per submission with a share: rank, who, each speed part's share, their mean; best first."""
    table = []
    for sid, folder, people in subs:
        try:
            got = entries(json.loads((results_dir / f"{sid}.json").read_text()))
        except (OSError, ValueError):
            continue
        if not got:
            continue
        who = "; ".join(p.get("name", "") for p in people if p.get("name")) if names else sid
        shares = {part: got[part][0] for part in SPEED if part in got}
        mean = round(sum(shares.values()) / len(SPEED), 1) if len(shares) == len(SPEED) else None
        table.append({"who": who or sid, **{PARTS[p].name: shares.get(p) for p in SPEED}, "mean": mean,
                      "predicted": any(pred for _, pred in got.values())})
    table.sort(key=lambda r: -(r["mean"] if r["mean"] is not None else -1))
    for i, r in enumerate(table, 1):
        r["rank"] = i
    return table


def write(subs, results_dir: Path, out_dir: Path, names: bool = False) -> list:
    """leaderboard.csv and leaderboard.md in ``out_dir``; the rows."""
    table = rows(subs, results_dir, names)
    cols = ["rank", "who", *(PARTS[p].name for p in SPEED), "mean", "predicted"]
    with open_private(out_dir / "leaderboard.csv", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(table)
    cell = lambda v: "-" if v is None else f"{v:.0f}%" if isinstance(v, float) else str(v)   # noqa: E731
    lines = ["| rank | " + ("student" if names else "submission") + " | " +
             " | ".join(PARTS[p].name for p in SPEED) + " | mean |", "|" + "---|" * (len(SPEED) + 3)]
    lines += [f"| {r['rank']} | {r['who']} | " + " | ".join(cell(r[PARTS[p].name]) for p in SPEED) +
              f" | {cell(r['mean'])} |" for r in table]
    kind = "predicted from the simulator" if any(r["predicted"] for r in table) else "measured on the course GPU"
    lines += ["", f"Item 10's GPU time of each step as a share of a copy's bandwidth at 16384 x 4096 ({kind}); "
                  f"no points ride on the ranking."]
    with open_private(out_dir / "leaderboard.md") as f:
        f.write("\n".join(lines) + "\n")
    return table
