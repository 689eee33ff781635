"""The child side of grading: import a submission and run the grader's tasks.

Runs sandboxed (sandbox.py) as

    python -I worker.py SUBMISSION.py JOB_DIR

JOB_DIR holds ``job.json`` (the tasks) and ``inputs.pt`` (their tensors,
written by the grader). The worker writes ``outputs.pt`` (tensors only) and
``outputs.json`` (per task: "ok" or the error, plus traffic statistics). The
grader loads both without pickle (``torch.load(weights_only=True)``) and does
every comparison itself: nothing this process says about correctness is
trusted.
"""
import json
import os
import sys
import traceback
from pathlib import Path

ERROR_CAP = 4000


def _load_submission(path: Path, root: Path, backend: str):
    import importlib.util
    sys.path.insert(0, str(root))                 # mini_triton lives beside the grader
    if backend == "mini_triton":
        os.environ["MINI_TRITON"] = "1"
    spec = importlib.util.spec_from_file_location("rmsnorm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stats(rec):
    return [{"kernel": L.kernel, "programs": L.programs, "args": {
        k: {"loaded": a.loaded, "stored": a.stored, "atomics": a.atomics, "numel": a.numel,
            "data_ptr": a.data_ptr, "distinct": a.distinct()} for k, a in L.args.items()}}
        for L in rec.launches]


def run_task(mod, task, inputs):
    """Run one task; returns (tensors, info)."""
    import torch
    import mini_triton as triton
    t = {k: inputs[v] for k, v in task.get("tensors", {}).items()}
    op = task["op"]
    with triton.record(host_ops=task.get("host_ops", False)) as rec:
        if op == "forward":
            y, r = mod.rmsnorm_forward(t["x"], t["g"], task.get("eps", 1e-5))
            out = {"y": y, "r": r}
        elif op == "backward":
            dx, dg = mod.rmsnorm_backward(t["dy"], t["x"], t["g"], t["r"])
            out = {"dx": dx, "dg": dg}
        elif op == "autograd":
            x = t["x"].clone().requires_grad_(True)
            g = t["g"].clone().requires_grad_(True)
            y = mod.rmsnorm(x, g, task.get("eps", 1e-5))
            y.backward(t["dy"])
            out = {"y": y.detach(), "dx": x.grad, "dg": g.grad}
        else:
            raise ValueError(f"unknown task {op!r}")
    info = {"launches": _stats(rec)}
    if rec.host_ops is not None:
        info["host_reads"] = max((o.reads for o in rec.host_ops), default=0)
    tensors = {}
    for k, v in out.items():
        if isinstance(v, torch.Tensor):
            tensors[k] = v.detach().as_subclass(torch.Tensor).clone().contiguous().cpu()   # plain tensors only
        else:
            info.setdefault("not_tensors", {})[k] = type(v).__name__
    return tensors, info


def main(argv):
    submission, job_dir = Path(argv[0]), Path(argv[1])
    root = Path(__file__).resolve().parent.parent if len(argv) < 3 else Path(argv[2])
    job = json.loads((job_dir / "job.json").read_text())
    results, tensors = {}, {}
    try:
        import torch
        inputs = torch.load(job_dir / "inputs.pt", weights_only=True)
        mod = _load_submission(submission, root, job.get("backend", "mini_triton"))
    except BaseException as e:                     # noqa: BLE001 -- report, never crash silently
        results["_import"] = {"error": _describe(e)}
        (job_dir / "outputs.json").write_text(json.dumps(results))
        return 0
    for name, task in job["tasks"].items():
        try:
            out, info = run_task(mod, task, inputs)
            tensors.update({f"{name}.{k}": v for k, v in out.items()})
            results[name] = {"ok": True, **info}
        except BaseException as e:                 # noqa: BLE001
            results[name] = {"error": _describe(e)}
    torch.save(tensors, job_dir / "outputs.pt")
    (job_dir / "outputs.json").write_text(json.dumps(results))
    return 0


def _describe(e: BaseException) -> str:
    """The error in a student's terms: its type and message, and where in rmsnorm.py."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename.endswith("rmsnorm.py"):
            where = f" (rmsnorm.py line {frame.lineno})"
            break
    text = f"{type(e).__name__}: {e}{where}"
    return text[:ERROR_CAP]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
