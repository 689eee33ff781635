"""The submission's side of a job: the process that imports rmsnorm.py and calls it. Nothing here decides a
grade, and nothing here imports the judge's side (judge/): on the simulator every launch is a message to the
judge (client.py); on a GPU the job is this one process, with real Triton (tasks.py, speed.py).

    host        the submission's process on the simulator: imports rmsnorm.py, answers the judge's requests
    client      ``@triton.jit`` in the submission's process: a launch is a message to the judge
    recipe      the report of a task's host ops, for the judge's replay
    phase       a forward or backward phase as this side records it: launches, host ops, norms
    norms       calls of torch's own norms, logged with the submission's line
    tasks       a GPU job's tasks (forward, backward, autograd, speed), dispatched from a table
    speed       the speed task: item 10's timings on the GPU
"""
