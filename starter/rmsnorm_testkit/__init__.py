"""The assignment's test kit: what the public tests and the autograder share, so that both judge alike.

    text       the words of the messages: dtype names, how long a quoted line or log may grow (imports nothing)
    compare    load an implementation, the float64 reference, the tolerance, and messages that say where an
               output is off and by how much
    timing     GPU timing (a CUDA graph's replay) and the least traffic of each kernel, for `make bench` and item 10
    watch      during a time-out: is the loop that runs still making progress?
    dataflow   item 7: which host op's work on an activation a kernel loaded or an output returned
    readbacks  values the file reads back to the host (x.numpy(), x.cpu()...), named by the public test of item 7
    causes     the known mistakes: each cause's message and fix, and the wrong formulas that identify them
    diagnose   why an output is wrong: elements never stored, a known formula, what the kernels read instead
    scan       the static scan the grader runs before any of a submission runs (`make submit` runs it too)

The package imports nothing here: ``text`` and ``scan`` import no torch, and a module is loaded when it is
imported. The autograder registers this folder from its own path; the public tests and
bench.py find it beside rmsnorm.py.
"""
