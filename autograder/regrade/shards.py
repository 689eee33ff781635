"""Shares of a class, so that N machines (a Slurm job array, say) grade one export over a shared folder:
``--shard K/N`` grades every N-th submission folder in sorted order, from the K-th on.
"""
from __future__ import annotations


def parse_shard(text: str) -> tuple[int, int]:
    """"K/N" -> (K, N), 1 <= K <= N; anything else exits with a message."""
    try:
        k, n = (int(v) for v in text.split("/"))
        if 1 <= k <= n:
            return k, n
    except ValueError:
        pass
    raise SystemExit(f"--shard takes K/N with 1 <= K <= N (the K-th of N shares, e.g. 2/8), not {text!r}")


def shard_of(sids, shard) -> set:
    """The submission folders of ``shard`` (K, N): every N-th of them in sorted order, from the K-th on. The
    same on every machine that sees the same export, and the shares differ by one at most."""
    if shard is None:
        return set(sids)
    return {sid for i, sid in enumerate(sorted(sids)) if i % shard[1] == shard[0] - 1}
