"""The job: the child side of grading, which imports a submission and runs the grader's tasks on it.

It runs sandboxed (sandbox.py), from the runtime folder (runtime.py), in namespaces of its own where the
machine allows (isolation.py), as

    python -I RUNTIME/autograder/job/__main__.py SUBMISSION.py JOB_DIR

JOB_DIR holds ``job.json`` (the tasks) and ``inputs.pt`` (their tensors, written by the grader).
The job writes ``outputs.pt`` (tensors only) and ``outputs.json`` (per task: "ok" or the error,
traffic statistics, the host-side torch ops and which tensors they read), signed. The grader
loads both without pickle (``torch.load(weights_only=True)``) and does every comparison itself.

On the simulator a job is two processes. The *judge* (main.py, remote.py) forks the *submission's
process* (host.py) before it reads its key, its tasks or its inputs; the submission's process imports
rmsnorm.py and calls it as the judge asks, and every launch it makes is a message (client.py) that the
judge runs on its own simulator, against its own copy of the memory (launches.py, provenance.py). So
what the judge reports is what it saw, never what the submission's process says. A GPU job runs the
tasks in one process with the submission (tasks.py), where real Triton launches the kernels.

The package imports nothing of the grader: only itself, mini_triton and the six modules of the test kit it
shares with the public tests (``rmsnorm_testkit``: text, compare, timing, watch, gpu_view, predict;
``runtime.FOR_JOBS``).
Three packages and the job's start, with a trust line between them (docs/architecture.md draws it):

    main        the job from start to end: the grader's setup, the fork, the tasks, the signed outputs
    judge/      the judge's side: remote, launches, provenance, replay, watchdog
    submission/ the submission's side: host, client, recipe, phase, norms, tasks, speed
    wire/       what crosses between them: channel, protocol, errors, phases, names

The judge's side and the submission's side never import each other (tests/test_architecture.py); main.py,
which starts both, is the only module that imports from both.
"""
