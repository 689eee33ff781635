"""The hidden autograder (trusted side): rubric, sandboxed runs of submissions, comparisons."""
