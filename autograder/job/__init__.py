"""The job: the child side of grading, which imports a submission and runs the grader's tasks on it.

It runs sandboxed (sandbox.py), from the runtime folder (runtime.py), as

    python -I RUNTIME/autograder/job/__main__.py SUBMISSION.py JOB_DIR

JOB_DIR holds ``job.json`` (the tasks) and ``inputs.pt`` (their tensors, written by the grader).
The job writes ``outputs.pt`` (tensors only) and ``outputs.json`` (per task: "ok" or the error,
traffic statistics, the host-side torch ops and which tensors they read), signed. The grader
loads both without pickle (``torch.load(weights_only=True)``) and does every comparison itself.

The package runs in one process with the submission, so it imports nothing of the grader: only
itself, mini_triton and the files it shares with the public tests (``shared``). One module each:

    protocol   what crosses the boundary: the files, the lines the job prints, the signature
    shared     rmsnorm_check and rmsnorm_timing (starter/tests/), loaded by their paths
    phases     a forward or backward phase on the simulator: its launches, host ops, what it made
    norms      calls of torch's own norms, logged with the submission's line
    tasks      the tasks (forward, backward, autograd, speed), dispatched from a table
    speed      the speed task: item 10's timings on the GPU
    errors     an error in the student's terms
    main       the job from start to end
"""
