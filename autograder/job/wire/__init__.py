"""The wire: what crosses between the job's two sides, and between the job and the grader. Both sides import
it; it imports neither.

    channel     framed messages and shared memory between the judge and the submission's process
    protocol    the files, the lines printed, the signature; plain data checked where it enters
    errors      an error in the student's terms, scrubbed of the grader's paths
    phases      the phases, the outputs each makes, the host ops that only carry data, a launch's record
    names       the modules of Triton's language a kernel may name, as both sides call them
"""
