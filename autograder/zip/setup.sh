#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder image is built.
#   AUTOGRADER_ROOT      default /autograder (the project's tests use a temporary root)
#   TORCH_INDEX_URL      where the CPU build of torch comes from ("" = pip's configured index)
#   RMSNORM_SANDBOX_USER the unprivileged user submissions run as (default student)
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SRC="$ROOT/source"
PYTHON="${PYTHON:-python3}"
TORCH_INDEX_URL="${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"
SANDBOX_USER="${RMSNORM_SANDBOX_USER-student}"

# 1. A venv of its own: Gradescope's harness keeps the system python3 untouched.
"$PYTHON" -m venv "$ROOT/venv"
PIP=("$ROOT/venv/bin/python" -m pip install --quiet --disable-pip-version-check)
TORCH_PIN="$(grep -E '^torch==' "$SRC/requirements.txt")"
if [ -n "$TORCH_INDEX_URL" ]; then
    "${PIP[@]}" --index-url "$TORCH_INDEX_URL" "$TORCH_PIN"        # the CPU build: no CUDA libraries
fi
"${PIP[@]}" -r "$SRC/requirements.txt"
chmod -R a+rX "$ROOT/venv"

# 2. What a submission's process needs (the worker and the simulator), readable by everyone.
rm -rf "$ROOT/runtime"
mkdir -p "$ROOT/runtime/autograder"
cp "$SRC/autograder/worker.py" "$ROOT/runtime/autograder/"
cp -r "$SRC/mini_triton" "$ROOT/runtime/"
find "$ROOT/runtime" -name __pycache__ -prune -exec rm -rf {} +
chmod -R a+rX "$ROOT/runtime"
chmod o+x "$ROOT"

# 3. The unprivileged user; the grader's own files become root's alone.
if [ "$(id -u)" = 0 ] && [ -n "$SANDBOX_USER" ]; then
    id "$SANDBOX_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$SANDBOX_USER"
    chmod -R go-rwx "$SRC"
else
    echo "setup.sh: not root: submissions will run as $(id -un)" >&2
fi
echo "setup.sh: done"
