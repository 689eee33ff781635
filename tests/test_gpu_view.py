"""The course GPU as a file's wrappers see it while item 10's prediction runs them (rmsnorm_testkit/gpu_view.py).

A file written into a temporary folder plays the submission: inside ``course_gpu`` its own code sees CUDA, the
H200's properties and its tensors on cuda:0, while what it allocates stays on the step's device, torch and the
simulator see the truth, and everything is put back on leaving.
"""
import importlib.util
import sys

import pytest
import torch
import torch.autograd.function as autograd_function

import mini_triton as triton
from mini_triton import perf
from rmsnorm_testkit.gpu_view import course_gpu

tl = triton.language

FILE = '''
import torch
import mini_triton as triton
tl = triton.language


def ask(x):
    props = torch.cuda.get_device_properties(x.device)
    return {"available": torch.cuda.is_available(), "count": torch.cuda.device_count(),
            "current": torch.cuda.current_device(), "sms": props.multi_processor_count, "name": props.name,
            "memory": props.total_memory, "l2": props.L2_cache_size, "capability": torch.cuda.get_device_capability(),
            "device_name": torch.cuda.get_device_name(0), "is_cuda": x.is_cuda, "device": x.device,
            "get_device": x.get_device()}


def allocate(x):
    with torch.cuda.device(x.device.index):
        return [torch.empty(4, device=x.device), torch.empty_like(x), torch.zeros(2, device="cuda"), x.cuda(),
                x.to("cuda:0"), x.new_empty(3, device=0), torch.arange(3, device=torch.device("cuda", 0))]


@triton.jit
def double(x_ptr, y_ptr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(y_ptr + cols, tl.load(x_ptr + cols) * 2)


def launch(x):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    double[(1,)](x, y, BLOCK=x.numel())
    return y


SEEN = []


class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        props = torch.cuda.get_device_properties(grad.device)
        SEEN.append((grad.is_cuda, grad.device.type, props.multi_processor_count))
        return grad * 2
'''


@pytest.fixture
def file(tmp_path):
    """The file, imported from its own folder (its frames are a submission's)."""
    (tmp_path / "wrappers.py").write_text(FILE)
    spec = importlib.util.spec_from_file_location("wrappers_under_view", tmp_path / "wrappers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_inside_the_view_the_files_code_sees_the_course_gpu(file, device):
    x = torch.ones(8, device=device)
    with course_gpu(perf.H200, device) as view:
        seen = file.ask(x)
    assert seen == {"available": True, "count": 1, "current": 0, "sms": 132, "name": "NVIDIA H200",
                    "memory": 141 * 10 ** 9, "l2": perf.H200.l2_bytes, "capability": (9, 0),
                    "device_name": "NVIDIA H200", "is_cuda": True, "device": torch.device("cuda", 0),
                    "get_device": 0}
    assert {"torch.cuda.get_device_properties", "torch.cuda.is_available", "x.is_cuda"} <= view.asked


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_what_the_file_allocates_for_cuda_lands_on_the_steps_device(file, device):
    x = torch.ones(8, device=device)
    with course_gpu(perf.H200, device):
        made = file.allocate(x)
    assert [t.device.type for t in made] == [device] * len(made)


def test_the_simulator_runs_the_files_kernels_on_its_tensors_inside_the_view(file):
    x = torch.arange(16, dtype=torch.float32)
    with course_gpu(perf.H200, "cpu"):
        y = file.launch(x)
        inside = y.is_cuda                              # the test's own frame is not trusted: it is told cuda too
    assert inside and y.device.type == "cpu" and torch.equal(y, 2 * x)


def test_code_in_a_trusted_folder_and_torch_are_told_the_truth(file, tmp_path):
    trusted = tmp_path / "grader"
    trusted.mkdir()
    (trusted / "judge.py").write_text("import torch\n\ndef look(x):\n    return x.is_cuda, x.device.type, "
                                      "torch.cuda.is_available()\n")
    spec = importlib.util.spec_from_file_location("judge_under_view", trusted / "judge.py")
    judge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(judge)
    x, truth = torch.ones(4), torch.cuda.is_available()
    with course_gpu(perf.H200, "cpu", trusted=(trusted,)):
        assert judge.look(x) == (False, "cpu", truth)
        assert file.ask(x)["is_cuda"] is True


def test_a_custom_functions_backward_sees_the_view_too(file):
    """torch's autograd engine runs a backward outside the caller's torch function modes: the view enters its
    own around it."""
    x = torch.ones(4, requires_grad=True)
    with course_gpu(perf.H200, "cpu"):
        torch.autograd.grad(file.Twice.apply(x).sum(), x)
    assert file.SEEN == [(True, "cuda", 132)]


def test_with_tensors_false_the_tensors_keep_their_device_but_is_cuda_and_torch_cuda_speak_of_the_gpu(file):
    x = torch.ones(8)
    with course_gpu(perf.H200, "cpu", tensors=False):
        seen = file.ask(x)
    assert (seen["device"], seen["is_cuda"], seen["sms"]) == (torch.device("cpu"), True, 132)


def test_everything_is_put_back_on_leaving_even_after_an_error(file):
    before = {name: getattr(torch.cuda, name) for name in ("is_available", "get_device_properties", "device")}
    apply = autograd_function.BackwardCFunction.__dict__["apply"]
    with pytest.raises(RuntimeError, match="inside"):
        with course_gpu(perf.H200, "cpu"):
            raise RuntimeError("inside")
    assert {name: getattr(torch.cuda, name) for name in before} == before
    assert autograd_function.BackwardCFunction.__dict__["apply"] is apply
    assert torch._C._len_torch_function_stack() == 0
    x = torch.ones(2)
    assert file.ask.__globals__["torch"].cuda.is_available() == torch.cuda.is_available()
    assert x.is_cuda is False and x.device.type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises((AssertionError, RuntimeError)):
            file.ask(x)                                 # no CUDA here once the view is gone
    assert "wrappers_under_view" not in sys.modules
