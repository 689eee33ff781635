"""Values rmsnorm.py reads back to the host (``x.numpy()``, ``np.asarray(x)``, ``x.tolist()``, ``x.cpu()``), with
the line that read them: the public test of item 7 names them when a kernel loads memory no torch op made.

On a GPU a tensor's values reach Python only through a copy from the device. On the CPU the tensors already live
in host memory: ``x.cpu()`` returns x itself and ``x.numpy()`` shares its memory, with no torch op, so values the
host computes from them in numpy and hands back to the kernels leave no trace in a record of host ops (the grader,
running the launches again on new inputs, finds them stale). :func:`watch` wraps these methods (once,
for good), and inside :func:`logged` each call that the file's own code makes, directly or through a library's
(numpy's ``np.copy``, a ``default=`` of json's), is logged with its line.

    watch(path_of_rmsnorm_py)
    with logged() as seen, triton.record(host_ops=True) as rec:
        y, r = impl.rmsnorm_forward(x, g)
    used, foreign = dataflow.of_recording(rec, inputs, outputs, M, N)     # foreign and seen: numpy's values
"""
from __future__ import annotations

import contextlib
import linecache
import os
import sys

import torch

from . import text

METHODS = ("numpy", "__array__", "tolist", "cpu", "__dlpack__")
WATCHED = {"file": None, "logs": []}       # the file whose own calls are logged; the logs open now
# the grader's own code (the kit, the simulator, the grader's package): a readback made under it is the grader's,
# even where the file called it (a torch op the file ran, which the grader's dispatch mode records); set by watch()
TRUSTED = []


def watch(path) -> None:
    """Log, inside :func:`logged`, every read of a tensor's values to the host made by ``path``'s own code."""
    WATCHED["file"] = os.path.abspath(str(path))
    TRUSTED[:] = [os.path.dirname(os.path.abspath(m.__file__)) + os.sep
                  for m in (sys.modules[__name__], sys.modules.get("mini_triton"), sys.modules.get("autograder"))
                  if m is not None and getattr(m, "__file__", None)]
    for name in METHODS:
        fn = getattr(torch.Tensor, name, None)
        if fn is not None and not getattr(fn, "_rmsnorm_readback", False):
            setattr(torch.Tensor, name, _logging(name, fn))


@contextlib.contextmanager
def logged():
    """A list that collects the readbacks of the watched file made in the block: {op, reads, storage, where}."""
    seen = []
    WATCHED["logs"].append(seen)
    try:
        yield seen
    finally:
        WATCHED["logs"].remove(seen)


def _file_frame():
    """The frame of the watched file that made the current readback, directly or through a library's code (numpy's
    np.copy, json's default=, a callback of the standard library's), or None: made by the grader's own code (the
    simulator, the kit, the job) or by no line of the file."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if os.path.abspath(path) == WATCHED["file"]:
            return frame
        if path.startswith(tuple(TRUSTED)):
            return None
        frame = frame.f_back
    return None


def _logging(name, fn):
    def readback(self, *args, **kwargs):
        if WATCHED["logs"]:
            frame = _file_frame()
            if frame is not None:
                line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
                seen = {"op": name, "reads": int(self.numel()), "storage": _storage(self),
                        "where": f"rmsnorm.py line {frame.f_lineno}" +
                                 (f" (`{line[:text.CODE_LINE_CHARS]}`)" if line else "")}
                for log in WATCHED["logs"]:
                    log.append(seen)
        return fn(self, *args, **kwargs)
    readback._rmsnorm_readback = True
    readback.__name__, readback.__qualname__, readback.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return readback


def _storage(t) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0
