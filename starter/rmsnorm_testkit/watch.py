"""Is a loop that ran out of time getting anywhere? Samples of where rmsnorm.py's code is, and of what its
loop's condition reads, taken while it runs: the grader's time-outs and the public tests' say from them
"no progress" (a ``while`` loop whose condition's variables kept their values across the last samples)
or "still making progress" (far more work than needed).
"""
from __future__ import annotations

import ast
import functools
import hashlib
import linecache
import os

import torch

STUCK_SAMPLES = 3              # the same loop, its condition's variables unchanged, this many samples in a row


def loops(path: str) -> tuple:
    """(first line, last line, the names a ``while`` loop's condition reads, or None for a ``for``) of every
    loop of ``path``: parsed once per version of the file (a grading watches every launch of the same file)."""
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return _loops(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=16)
def _loops(path: str, _mtime_ns: int, _size: int) -> tuple:
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple((n.lineno, n.end_lineno or n.lineno,
                  tuple(sorted({m.id for m in ast.walk(n.test) if isinstance(m, ast.Name)}))
                  if isinstance(n, ast.While) else None)
                 for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While)))


def fingerprint(value) -> str:
    """What a variable holds, to tell whether it changed: a block's values (mini_triton keeps them in
    ``.handle``), or the value itself."""
    try:
        h = getattr(value, "handle", value)
        if isinstance(h, torch.Tensor):
            return hashlib.sha1(h.detach().cpu().contiguous().numpy().tobytes()).hexdigest() + str(tuple(h.shape))
        return hashlib.sha1(repr(h).encode()).hexdigest()
    except Exception:                      # noqa: BLE001 -- an unreadable value: count it as changing
        return os.urandom(8).hex()


def _and(names) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


class Watch:
    """The samples of one run of rmsnorm.py's code: where it was, and its loop's condition, at each."""

    def __init__(self, path: str, every_s: float):
        self.path, self.every_s = os.path.abspath(path), every_s
        self._loops = None                 # read at the first sample: most launches end before one
        self.samples = []                  # (function, line, the loop around it, fingerprint of its condition)

    def frame(self, frame):
        """The innermost frame running rmsnorm.py's code, or None."""
        while frame is not None and os.path.abspath(frame.f_code.co_filename) != self.path:
            frame = frame.f_back
        return frame

    @property
    def loops(self) -> tuple:
        if self._loops is None:
            self._loops = loops(self.path)
        return self._loops

    def loop(self, line: int | None):
        """The innermost loop of the file around ``line`` (None: none, or a frame between lines, whose f_lineno
        Python leaves None)."""
        if line is None:
            return None
        return max((lp for lp in self.loops if lp[0] <= line <= lp[1]), default=None)

    def sample(self, frame):
        """Note where rmsnorm.py's code is: its innermost frame inside a loop (a helper called from a kernel's
        loop counts as that loop), or its innermost frame."""
        f = self.frame(frame)
        while f is not None and self.loop(f.f_lineno) is None:
            outer = self.frame(f.f_back)
            if outer is None:
                break
            f = outer
        if f is None or f.f_lineno is None:
            return
        lp = self.loop(f.f_lineno)
        state = None if lp is None or lp[2] is None else tuple(fingerprint(f.f_locals.get(n)) for n in lp[2])
        self.samples = (self.samples + [(f.f_code.co_name, f.f_lineno, lp, state)])[-16:]

    def stuck(self) -> list | None:
        """The names of the condition of the ``while`` loop the last samples were all in, unchanged; else None."""
        last = self.samples[-STUCK_SAMPLES:]
        if len(last) < STUCK_SAMPLES or last[0][3] is None or any(s[2:] != last[0][2:] for s in last):
            return None
        return last[0][2][2]

    def where(self) -> str:
        """', in rmsnorm_fwd_kernel, line 71 of rmsnorm.py (`i = i * 1`), inside the loop of line 70 (`while i <
        n_cols:`)' at the last sample; '' when there was none."""
        if not self.samples:
            return ""
        name, line, lp, _ = self.samples[-1]
        code = linecache.getline(self.path, line).strip()
        text = f", in {name}, line {line} of {os.path.basename(self.path)}" + (f" (`{code}`)" if code else "")
        if lp is not None and lp[0] != line:
            text += f", inside the loop of line {lp[0]} (`{linecache.getline(self.path, lp[0]).strip()}`)"
        return text

    def progress(self) -> str:
        """', where `i` and `n` kept the same values over the last 0.75 s: the loop's condition never changes'
        (no progress), or ', still making progress'."""
        names = self.stuck()
        if names:
            return (f", where {_and(names)} kept the same {'value' if len(names) == 1 else 'values'} over the last "
                    f"{STUCK_SAMPLES * self.every_s:.2g} s: the loop's condition never changes")
        return ", still making progress"
