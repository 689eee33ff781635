"""The submission's side of a job: the process that imports rmsnorm.py and calls it. Nothing here decides a
grade, and nothing here imports the judge's side (judge/): on the simulator every launch is a message to the
judge (client.py); item 10's steps are recorded here and timed by the judge (host.py's "record"); the GPU's
robustness cases run in a job of this one process, with real Triton (tasks.py).

    host        the submission's process: imports rmsnorm.py, answers the judge's requests
    client      ``@triton.jit`` in the submission's process: a launch is a message to the judge
    recipe      the report of a task's host ops, for the judge's replay
    phase       a forward or backward phase as this side records it: launches, host ops, norms
    norms       calls of torch's own norms, logged with the submission's line
    seal        the grader's code in this process before the import, checked after each request
    tasks       the GPU's robustness cases (forward, backward, autograd), dispatched from a table
"""
