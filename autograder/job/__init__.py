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
One module each:

    protocol    what crosses the boundary with the grader: the files, the lines printed, the signature
    main        the job from start to end: the grader's setup, then the submission's tasks
    channel     the line between the judge and the submission's process: framed messages, shared memory
    host        the submission's process: imports rmsnorm.py, answers the judge's requests
    client      ``@triton.jit`` in the submission's process: a launch is a message to the judge
    remote      the judge's side of a simulator job: each task's phases, judged from what it saw
    launches    the judge's side of a launch: the kernel compiled from the judge's copy, run, noted
    provenance  where each byte of the job's memory came from, as the judge sees it
    recipe      the submission's process's report of a task's host ops, for the judge's replay
    replay      the judge runs a task's recipe and launches again, on fresh inputs it drew itself
    watchdog    a kernel that never ends, stopped inside the judge at the group's CPU budget
    phases      a forward or backward phase: its launches, host ops, what it made
    norms       calls of torch's own norms, logged with the submission's line
    tasks       a GPU job's tasks (forward, backward, autograd, speed), dispatched from a table
    speed       the speed task: item 10's timings on the GPU
    errors      an error in the student's terms
"""
