"""How the messages of the tests, the grader and `make bench` name dtypes, how long they may grow, and what a
kernel parameter's name says it takes.

Shared by the public tests (through compare.py), `make bench`, the grader and its sandboxed job. It
imports nothing, not even torch, so that the grader's own process (which stays small while the
submission's jobs run) reads it too.
"""

DTYPE_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}     # torch's name -> the messages' name


def dtype_name(dtype) -> str:
    """The short name of a dtype given as torch's (``torch.bfloat16``) or by its name (``"bfloat16"``): "bf16".
    Another dtype goes by torch's name for it ("float64")."""
    name = str(dtype).removeprefix("torch.")
    return DTYPE_SHORT.get(name, name)


# What a kernel parameter's name says it takes (lower case, without "_ptr"): the roles a launch check knows.
PARAM_ROLES = {"x": "x", "input": "x", "inp": "x", "dy": "dy", "do": "dy", "dout": "dy", "grad_out": "dy",
               "grad_output": "dy", "output_grad": "dy", "dx": "dx", "grad_in": "dx", "grad_input": "dx",
               "input_grad": "dx", "y": "y", "out": "y", "output": "y"}


def param_role(name: str) -> str | None:
    """The role a kernel parameter's name gives it ("dY_ptr" -> "dy"), or None."""
    n = name.lower()
    for suffix in ("_pointer", "_ptr", "ptr"):
        if n.endswith(suffix) and len(n) > len(suffix):
            n = n[:-len(suffix)]
            break
    return PARAM_ROLES.get(n.rstrip("_"))


# How much of a long text a message keeps, in characters.
MESSAGE_CHARS = 4000      # a whole message: a part's feedback from the grader, or the error a grading job reports.
                          # Far more than any message the grader writes; it stops a runaway one (an exception that
                          # prints a whole tensor) from burying the rest of the feedback
CODE_LINE_CHARS = 100     # a line of the student's code quoted in a message: one line of an editor
ERROR_LINE_CHARS = 200    # an error told in one line (what stopped a CUDA graph, a failed profile, a cell of
                          # `make bench`'s table): the first line of its message, where its cause is said
SUMMARY_CHARS = 300       # a message repeated in a one-line summary for the course staff (the grader's table of
                          # points, the commonest reason in a regrading, its self-test and calibration): enough to
                          # tell it; the feedback itself has it whole
LOG_TAIL_CHARS = 1500     # the end of a failed child process's stderr (the preflight, one shape of `make bench`):
                          # the error and the lines of traceback just above it


def error_line(e: BaseException) -> str:
    """``e`` in one line: its type and the first line of its message (ERROR_LINE_CHARS at most)."""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:ERROR_LINE_CHARS]}"


def autograd_hint(message: str) -> str:
    """What to do about an error PyTorch's autograd raised about the Function itself ('' for any other): a
    backward that returns fewer or more gradients than forward has inputs, returns them out of order (a
    gradient of the wrong shape), or returns a gradient for eps, which is no tensor."""
    order = "return dx, dg, None (None for eps, which needs none)"
    said = "returned an incorrect number of gradients (expected "
    if said in message:
        expected = message.split(said, 1)[1].split(",", 1)[0]
        return (f": TritonRMSNorm.backward must return one gradient for each input of forward(ctx, x, g, eps), "
                f"{expected} in all, in that order: {order}")
    said = "returned an invalid gradient at index "
    if said in message:
        index = message.split(said, 1)[1].split(" ", 1)[0]
        name = {"0": "x", "1": "g"}.get(index, "eps")
        return (f": TritonRMSNorm.backward returns the gradients in the order of forward(ctx, x, g, eps)'s inputs, "
                f"and the one at index {index} (the gradient of {name}) has another shape than {name}: {order}")
    if "returned a gradient different than None at position" in message and "not a Variable" in message:
        return (f": eps is a Python float, not a tensor, so TritonRMSNorm.backward must return None as its "
                f"gradient: {order}")
    return ""
