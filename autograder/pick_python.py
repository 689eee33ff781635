"""Which Python the grader's .venv is built from: ``python3 autograder/pick_python.py [CANDIDATE]``.

``make setup`` runs this (standard library only) and builds .venv/ from the interpreter it
prints. As root, the grader runs submissions as sandbox accounts (accounts.py), which must be
able to execute the venv's interpreter and read its standard library: every folder on the way
must be searchable by others. A Python in a private home folder (pyenv or conda under /root,
mode 700) is not. Then this picks another Python 3.10-3.12 that is, and says why on stderr; when
there is none, it builds nothing and says what to install (exit status 1). As an ordinary user
the candidate is kept: submissions run as that user.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ALTERNATIVES = ("/usr/bin/python3", "/usr/local/bin/python3", "/usr/bin/python3.12", "/usr/bin/python3.11",
                "/usr/bin/python3.10", "python3.12", "python3.11", "python3.10")
PROBE = ("import sys, os, venv, ensurepip; print(os.path.realpath(sys.executable)); print(sys.base_prefix); "
         "print(sys.version_info[0] * 100 + sys.version_info[1])")


def blocked_at(path: str) -> Path | None:
    """The first folder on the way to ``path`` that other users may not enter, or None."""
    p = Path(path)
    for folder in [*reversed(p.parents), *([p] if p.is_dir() else [])]:
        try:
            if not os.stat(folder).st_mode & 0o001:
                return folder
        except OSError:
            return folder
    return None


def probe(python: str):
    """(executable, base prefix, version as 310/311/312) of ``python``, or None if it lacks venv/ensurepip."""
    exe = shutil.which(python)
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "-I", "-c", PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode:
        return None
    real, base, version = out.stdout.split("\n")[:3]
    return real, base, int(version)


def usable(python: str) -> str | None:
    """Why sandbox accounts could not run ``python``'s venv (None when they can)."""
    found = probe(python)
    if found is None:
        return f"{python} has no venv module (or does not run)"
    real, base, version = found
    if not 310 <= version <= 312:
        return f"{python} is Python {version // 100}.{version % 100}; the grader needs 3.10-3.12"
    for path in (real, base):
        folder = blocked_at(path)
        if folder is not None:
            mode = oct(os.stat(folder).st_mode)[-3:]
            return f"{python} lives under {folder}, which other users may not enter (mode {mode})"
    return None


def pick(candidate: str) -> str | None:
    """The Python to build .venv/ from, or None (after saying why and what to install) when, as root,
    none that the sandbox accounts can run exists: such a .venv would make every grading an autograder
    error, so none is built."""
    if os.geteuid() != 0:
        return candidate
    why = usable(candidate)
    if why is None:
        return candidate
    tried = {}
    for alt in ALTERNATIVES:
        exe = shutil.which(alt)
        if exe and not any(os.path.realpath(exe) == os.path.realpath(t) for t in tried):
            tried[exe] = usable(alt)
            if tried[exe] is None:
                print(f"setup: {why}; building .venv/ from {exe} instead, so that the sandbox accounts can run it",
                      file=sys.stderr)
                return exe
    print(f"setup: refusing to build .venv/ as root: {why}, and no other Python 3.10-3.12 that the sandbox "
          f"accounts can run was found, so every grading would be an autograder error.", file=sys.stderr)
    for exe, problem in tried.items():
        print(f"  {exe}: {problem}", file=sys.stderr)
    print("Fix, then run `make setup` again:\n" + "\n".join(f"  - {fix}" for fix in fixes(candidate, tried)),
          file=sys.stderr)
    return None


def fixes(candidate: str, tried: dict) -> list:
    """What to install or open, most likely first."""
    out = []
    for exe, problem in tried.items():
        if problem and "no venv module" in problem:
            version = Path(exe).name.replace("python", "") if Path(exe).name != "python3" else "3"
            out.append(f"install the venv module for {exe}: `apt-get install python{version}-venv` (Debian, "
                       f"Ubuntu), or your system's equivalent")
    found = probe(candidate)
    for path in (found or ())[:2]:
        folder = blocked_at(path)
        if folder is not None:
            out.append(f"or let the sandbox accounts reach {candidate}: `chmod o+x {folder}` (and every folder "
                       f"below it on the way to {path})")
            break
    if not tried:
        out.append("install Python 3.10-3.12 with its venv module outside private home folders (/usr/bin, "
                   "/usr/local/bin), then `make setup PYTHON=/path/to/python3`")
    return out or ["build .venv/ from a Python 3.10-3.12 outside private home folders: `make setup "
                   "PYTHON=/path/to/python3`"]


if __name__ == "__main__":
    chosen = pick(sys.argv[1] if len(sys.argv) > 1 else "python3")
    if chosen is None:
        sys.exit(1)
    print(chosen)
