# RMSNorm assignment: see README.md.
# Every target sets up .venv/ (pinned, see requirements.txt) on first use.

PYTHON   ?= python3
VENV     := .venv
PY       := $(VENV)/bin/python
IMPL     ?= starter
PART     ?=
K        ?=
SHAPES   ?=
SAMPLE   ?=
# `make check`'s pytest workers (pytest-xdist): modules run side by side, each whole on one worker
CHECK_WORKERS ?= 2
impl_path = $(if $(filter starter solution,$(1)),$(1)/rmsnorm.py,$(1))

.PHONY: help setup sandbox-accounts check test bench bench-sim mutants grade grade-all autograder starter partial student clean

help:
	@echo "make grade        grade the reference solution (sets up .venv/ first)"
	@echo "make check        run the project's full test suite"
	@echo "make test         public tests against starter/ (IMPL=solution or IMPL=path/to/rmsnorm.py)"
	@echo "make bench        time the implementation against PyTorch"
	@echo "make bench-sim    mini_triton against Triton's interpreter, side by side"
	@echo "make mutants [SAMPLE=N] [ONLY=OPS]   the solution's mutants through the public tests and the grader (build/mutants.md)"
	@echo "make grade SUBMISSION=path [RESULTS=path]   grade one submission (file or folder)"
	@echo "make grade-all EXPORT=dir [JOBS=N] [OUT=csv] [SHARD=K/N] [NAMES=1] regrade a Gradescope export into a CSV"
	@echo "make autograder   build dist/autograder.zip, the Gradescope autograder"
	@echo "make student      build dist/rmsnorm-student.zip, the student bundle"
	@echo "make sandbox-accounts   as root: create the accounts submissions run as (grade and check do it)"
	@echo "make starter      regenerate starter/rmsnorm.py from solution/rmsnorm.py"
	@echo "make partial PARTS=abc OUT=file   the solution with only those parts answered (the starter elsewhere)"
	@echo "make clean        remove build outputs"

setup: $(VENV)/.ready

# Without a GPU, torch's CPU build (PyPI's Linux torch is the CUDA build, which the sandbox's address-space cap
# cannot load); TORCH_INDEX= leaves it to pip's configured index.
TORCH_INDEX ?= $(if $(shell nvidia-smi -L 2>/dev/null),,https://download.pytorch.org/whl/cpu)

# As root, the venv's Python must be one the sandbox accounts can run (autograder/pick_python.py).
$(VENV)/.ready: requirements.txt requirements-triton.txt requirements-dev.txt
	@echo "setting up $(VENV)/ with the pinned requirements (a few minutes, once)"
	@python=$$($(PYTHON) autograder/pick_python.py $(PYTHON)) && echo "$$python -m venv $(VENV)" && \
	    $$python -m venv $(VENV)
	@test -z "$(TORCH_INDEX)" || $(PY) -m pip install --quiet --disable-pip-version-check --retries 1 --timeout 20 \
	    --index-url $(TORCH_INDEX) \
	    "$$(grep -E '^torch==' requirements.txt)" 2>/dev/null || echo "(torch's CPU build could not be fetched from \
	    $(TORCH_INDEX): pip's own index decides which build; the grader needs the CPU one without a GPU)"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-triton.txt \
	    -r requirements-dev.txt
	touch $@

# As root, submissions run as the accounts rmsnorm-sbx0..7 (autograder/accounts.py): never as root.
sandbox-accounts: setup
	@$(PY) -m autograder.accounts create

check: setup sandbox-accounts
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(CHECK_WORKERS) --dist loadscope --durations=12 tests

test: setup
ifeq ($(PART),e)
	$(PY) starter/tests/part_e.py $(call impl_path,$(IMPL))
else
	RMSNORM_IMPL=$(call impl_path,$(IMPL)) $(PY) -m pytest -q --tb=short starter/tests$(if $(PART),/test_part_$(PART).py) $(if $(K),-k "$(K)")
endif

bench: setup
	RMSNORM_IMPL=$(call impl_path,$(IMPL)) BENCH_OUT=build $(PY) starter/bench.py $(if $(FULL),--full)

SUBMISSION ?= solution
RESULTS    ?= build/results.json

grade: setup sandbox-accounts
	$(PY) -m autograder.grade "$(call impl_path,$(SUBMISSION))" "$(RESULTS)"

EXPORT ?=
JOBS   ?= 1
OUT    ?=
SHARD  ?=
NAMES  ?=

grade-all: setup sandbox-accounts
	@test -n "$(EXPORT)" || { echo "usage: make grade-all EXPORT=path/to/unzipped/export [JOBS=N] [OUT=grades.csv] [SHARD=K/N] [NAMES=1]"; exit 2; }
	$(PY) -m autograder.grade_all "$(EXPORT)" --jobs $(JOBS) $(if $(OUT),--out "$(OUT)") $(if $(SHARD),--shard $(SHARD)) \
	    $(if $(NAMES),--leaderboard-names)

autograder: setup
	$(PY) -m autograder.package

starter:
	$(PYTHON) starter/generate.py

PARTS ?=
OUT_PARTIAL = $(or $(OUT),build/partial_$(PARTS).py)

partial:
	@test -n "$(PARTS)" || { echo "usage: make partial PARTS=abc [OUT=file]   (letters among a b c d; default OUT=build/partial_PARTS.py)"; exit 2; }
	@mkdir -p $(dir $(OUT_PARTIAL))
	$(PYTHON) starter/generate.py --parts $(PARTS) --out $(OUT_PARTIAL)

student: setup
	$(PY) starter/build_bundle.py

bench-sim: setup
	$(PY) tests/bench_simulator.py $(SHAPES)

mutants: setup
	$(PY) tests/mutation/run.py $(if $(SAMPLE),--sample $(SAMPLE)) $(if $(ONLY),--only $(ONLY))

clean:
	rm -rf build dist .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
