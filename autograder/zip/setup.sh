#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder image is built (a fresh Ubuntu).
# Any problem fails the build here, with its cause, rather than every student's grading later.
#   AUTOGRADER_ROOT           default /autograder (the project's tests use a temporary root)
#   PYTHON                    the Python to build the grader's venv from (default python3; 3.10-3.12)
#   TORCH_INDEX_URL           where the CPU build of torch comes from ("" = pip's configured index)
#   RMSNORM_SANDBOX_ACCOUNTS  prefix of the sandbox accounts (default rmsnorm-sbx: rmsnorm-sbx0..7)
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SRC="$ROOT/source"
PYTHON="${PYTHON:-python3}"
TORCH_INDEX_URL="${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
say() { echo "setup.sh: $*"; }
die() { echo "setup.sh: FAILED: $*" >&2; exit 1; }

# 1. A Python 3.10-3.12 that can make a venv. Stock Ubuntu leaves venv and ensurepip out of python3.
"$PYTHON" -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))' \
    || die "$PYTHON is $("$PYTHON" -V 2>&1); the grader needs Python 3.10-3.12 (set PYTHON=)"
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    VER="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    say "$PYTHON has no venv/ensurepip module: installing python3-venv and python$VER-venv"
    command -v apt-get >/dev/null || die "no apt-get to install python3-venv with; use a Python that has venv"
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv "python$VER-venv" \
        || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv \
        || die "apt-get could not install python3-venv"
    "$PYTHON" -c 'import venv, ensurepip' || die "$PYTHON still has no venv/ensurepip after installing python3-venv"
fi

# 2. A venv of its own (Gradescope's harness keeps the system python3), with the CPU build of torch, from a
#    Python the sandbox accounts can run: not one under a private home folder (a pyenv shim in /root).
PYTHON="$("$PYTHON" "$SRC/autograder/pick_python.py" "$PYTHON")" \
    || die "no Python the sandbox accounts can run (why and what to install: above); set PYTHON= to a Python 3.10-3.12 outside private home folders, e.g. PYTHON=/usr/bin/python3"
"$PYTHON" -m venv "$ROOT/venv"
PIP=("$ROOT/venv/bin/python" -m pip install --quiet --disable-pip-version-check)
TORCH_PIN="$(grep -E '^torch==' "$SRC/requirements.txt")"
if [ -n "$TORCH_INDEX_URL" ]; then
    "${PIP[@]}" --index-url "$TORCH_INDEX_URL" "$TORCH_PIN" \
        || die "could not install $TORCH_PIN from $TORCH_INDEX_URL (the CPU build); without it pip would take the CUDA build"
fi
"${PIP[@]}" -r "$SRC/requirements.txt"
chmod -R a+rX "$ROOT/venv"

# 3. What a submission's process needs (the job, the simulator, the files they share with the public tests),
#    readable by everyone (autograder/runtime.py).
rm -rf "$ROOT/runtime"
(cd "$SRC" && "$ROOT/venv/bin/python" -m autograder.runtime "$ROOT/runtime" >/dev/null) \
    || die "could not make the runtime folder $ROOT/runtime"
chmod o+x "$ROOT"
export RMSNORM_RUNTIME="$ROOT/runtime"

# 4. The sandbox accounts submissions run as; the grader's own files become root's alone.
cd "$SRC"
if [ "$(id -u)" = 0 ]; then
    "$ROOT/venv/bin/python" -m autograder.accounts create || die "could not create the sandbox accounts"
    chmod -R go-rwx "$SRC"
else
    say "not root: submissions will run as $(id -un)"
fi

# 5. Can it grade? torch is the CPU build and loads under the sandbox's limits; a known-good
#    submission (not the answer key) gets every regular point, end to end through the sandbox.
"$ROOT/venv/bin/python" -m autograder.preflight || die "the grader's preflight failed (cause and fix above)"
"$ROOT/venv/bin/python" -m autograder.selftest || die "the self-test failed (above)"
say "done"
