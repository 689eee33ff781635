"""The judge's side of a job: it holds the key, the tasks and the inputs, runs every kernel itself and
judges each task from what it saw. It never imports the submission's side (submission/): the two meet only through
the wire (wire/), and main.py forks the submission's process before anything secret is read.

    remote      each task's phases, asked of the submission's process and judged from what the judge saw
    launches    a launch: the kernel compiled from the judge's copy of rmsnorm.py, run, noted
    provenance  where each byte of the job's memory came from
    replay      a task's recipe run again, on fresh inputs the judge drew itself
    watchdog    a kernel that never ends, stopped at the group's CPU budget
    timed       item 10 on a GPU: each recorded step replayed, captured and timed with the judge's own Triton
"""
