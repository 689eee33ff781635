"""The judge's side of a launch (autograder/job/judge/launches.py): the kernel a launch describes, compiled from the
judge's own copy of rmsnorm.py, with its helpers bound as the submission's side described them."""
from autograder.job.judge import launches

SOURCE = '''import triton
import triton.language as tl


@triton.jit
def inner(x):
    return x + 1


@triton.jit
def outer(x):
    return inner(x) * 2


@triton.jit
def forward_kernel(p):
    tl.store(p, outer(tl.load(p)) + inner(0))


@triton.jit
def backward_kernel(p):
    tl.store(p, outer(tl.load(p)) + inner(1))
'''
LINES = {"inner": 5, "outer": 10, "forward_kernel": 15, "backward_kernel": 20}


def described(kernel: str) -> dict:
    """``kernel``'s description as the submission's side makes it (client.RemoteKernel.identity): each kernel
    described once per launch, where first met, and named by its number after that."""
    def ident(name, number, names):
        return {"kind": "kernel", "id": number, "name": name, "line": LINES[name], "defaults": {}, "globals": names}
    tl = {"kind": "module", "name": "triton.language"}
    return ident(kernel, 0, {"tl": tl, "outer": ident("outer", 1, {"inner": ident("inner", 2, {})}),
                             "inner": {"kind": "kernel", "ref": 2}})


def test_two_kernels_that_share_nested_helpers_compile_each_with_its_helpers(tmp_path):
    """The second kernel's outer helper is the first's (compiled once), and inner, described inside outer, is
    named by its number afterwards: both kernels get the same helpers (was: "a kernel that refers to one not
    described" for the second)."""
    path = tmp_path / "rmsnorm.py"
    path.write_text(SOURCE)
    kernels = launches.Kernels(str(path), SOURCE)
    first = kernels.kernel(described("forward_kernel"), {})
    second = kernels.kernel(described("backward_kernel"), {})
    for jit in (first, second):
        bound = jit.fn.__globals__
        assert bound["outer"].fn.__globals__["inner"] is bound["inner"], jit
