"""The parts of bench.py (`make bench`), one concern each:

    measure    what the process that times one shape runs: every provider, GPU time, kernels, wall time
    schedule   one process per shape, one per GPU at a time, the next one importing while this one is timed
    tables     the rows printed for each shape and for the model
    plots      GB/s against N (GPU); bytes moved against the fused minimum (simulator)
    traffic    the simulator's report: your kernels' bytes beside PyTorch eager's
"""
