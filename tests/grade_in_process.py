"""The grader's verdicts on many submissions, quickly: for the project's tests of what the verdicts say.

A real grading runs each job in a sandboxed process, and a process start (Python, torch) costs more than
the tasks of a small submission. Here two processes forked from a warm server (autograder/warm.py) run the
same jobs (cases.sim_jobs), with the job's own code (the submission's process forked as a job forks it,
job.judge.remote.run_tasks) and the grader's judge (judge.ledgers, judge.charge): only the sandbox is left
out, which tests/test_autograder_*.py test on their own.

    verdicts({"name": Path("rmsnorm.py"), ...}) -> {name: {"failed": {part: message}, "notes": {...},
                                                           "causes": {part: [cause, ...]},
                                                           "checked": {part: outputs it could check}}}

With ``gpu_cases=True`` the GPU jobs' robustness cases (cases.gpu_jobs(), all but "speed") run too, on the
simulator, and are judged as the GPU job's: what the GPU grading's judge makes of them, without a GPU (each case
at its own row length but on GPU_ROWS rows at most: what these gradings test is how the judge charges the GPU's
cases, and millions of elements on the simulator cost a make check about a minute);
``gpu_cases="as_written"`` runs them with every launch as the submission passed it, as a GPU does (no arguments
exchanged: job.judge.launches.Launcher.exchange), and ``gpu_cases="bare"`` also reports them as a GPU does, without
the simulator's record of the launches' reads and stores.
"""
import concurrent.futures
import multiprocessing
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPU_ROWS = 8        # the most rows of a GPU job's case run here (``gpu_cases``)


def _context():
    """The processes that grade: forked from the grader's warm server (autograder/warm.py: a process that has
    imported torch and nothing of a grading), so that each costs a fork, not an interpreter's start and torch's
    import (about 1.5 s of CPU; make check starts about sixty); spawned where there is no fork server."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from autograder import warm
    return warm._context() if warm.available() else multiprocessing.get_context("spawn")


def _in_a_process(fn, *args, timeout: float | None = None):
    """``fn(*args)`` in a grading process of its own (``_context``), as ``verdicts`` runs a grading."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=_context(), initializer=_start) as pool:
        return pool.submit(fn, *args).result(timeout=timeout)


def _start(memory_bytes: int | None = None):
    """A grading process set up as a job's (runner.py); ``memory_bytes``: the job's address-space cap
    (config.SIM_LIMITS.memory_bytes), which the sandbox sets and these processes leave out unless asked."""
    if memory_bytes is not None:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    os.environ["MINI_TRITON"] = "1"
    os.environ["MINI_TRITON_RACES"] = "record"           # as a job runs: a race is noted, not raised
    os.environ["OMP_NUM_THREADS"] = "1"                  # as a simulator job computes (runner.py), whatever the
    import torch                                         # server's environment said when it imported torch
    torch.set_num_threads(1)
    sys.path.insert(0, str(ROOT))
    import autograder  # noqa: F401 -- registers the test kit, rmsnorm_testkit (autograder/__init__.py)


def _grade(path: str, gpu_cases: bool | str = False, drawn: tuple | None = None, tall: tuple | None = None) -> dict:
    from rmsnorm_testkit.compare import reference
    from autograder.job.main import setup_backend
    from autograder.hidden import cases
    from autograder.hidden.cases import GPU_ROBUST, flat, gpu_jobs, make_inputs, sim_inputs, sim_jobs
    if drawn is not None:              # this grading's drawn shape (and dtype: (M, N, dtype)), chosen (cases.DRAWN)
        cases.DRAWN = cases.drawn_case(tuple(drawn[:2]), *drawn[2:])
    if tall is not None:                                  # item 9's drawn shape of many rows, chosen (cases.TALL)
        cases.TALL = cases.tall_case(tuple(tall))
    from autograder.judge import ledgers
    from autograder.judge.charge import charge
    triton = setup_backend(ROOT, "mini_triton")
    inputs = sim_inputs(lambda x, g, eps: reference(x, g, eps=eps)[1].float())
    submission = Path(path)
    groups = sim_jobs()
    outcome = _run(triton, submission, groups, flat(inputs))
    gpu = None
    if gpu_cases:
        for k, c in GPU_ROBUST.items():                   # in place: the judge reads the same dict
            GPU_ROBUST[k] = _on_fewer_rows(c)
        robust = {name: {k: v for k, v in task.items() if k != "device"}
                  for job, tasks in gpu_jobs().items() if job != "speed" for name, task in tasks.items()}
        gpu_inputs = make_inputs(GPU_ROBUST)
        from autograder.job.judge.launches import Launcher
        Launcher.exchanges = gpu_cases not in ("as_written", "bare")    # a GPU runs every launch as written
        try:
            gpu = (gpu_inputs, _run(triton, submission, {"robust": robust}, flat(gpu_inputs)))
        finally:
            Launcher.exchanges = True
        if gpu_cases == "bare":
            gpu = (gpu_inputs, _as_a_gpu_reports_it(gpu[1]))
    found = ledgers((inputs, outcome), gpu)
    verdicts = charge(found)
    return {"failed": {p: v.failure for p, v in verdicts.items() if v.failure},
            "notes": {p: v.notes for p, v in verdicts.items() if v.notes},
            "causes": {p: sorted({f.cause for f in L.findings if f.cause}) for p, L in found.items()},
            "checked": {p: L.checked for p, L in found.items()}}


def _on_fewer_rows(c):
    """A GPU job's case at its own row length, on GPU_ROWS rows at most, its story saying so."""
    shape = (min(c.shape[0], GPU_ROWS), *c.shape[1:])
    return c._replace(shape=shape, story=c.story.replace(str(tuple(c.shape)), str(shape)))


def _as_a_gpu_reports_it(outcome):
    """The GPU job's outcome as Triton on a GPU leaves it (job/submission/tasks.py, phase.py): outputs and what the
    host saw, but no simulator's record of what the launches read and stored, and no replay."""
    for info in outcome.info.values():
        for phase in ("fwd", "bwd"):
            if isinstance(info.get(phase), dict):
                info[phase] = {k: v for k, v in info[phase].items() if k == "norms" and v}
        for key in ("kernel_made", "kernel_stored", "host_made"):
            if isinstance(info.get(key), dict):
                info[key] = dict.fromkeys(info[key])
        info.pop("tainted", None)
    for key in [k for k in outcome.tensors if k.endswith(".stored") or ".fresh" in k]:
        del outcome.tensors[key]
    return outcome


def _run(triton, submission: Path, groups: dict, inputs: dict):
    """The outcome of one job's groups of tasks, each in a submission's process forked as a job forks them."""
    from autograder import config, runner
    from autograder.job import main
    from autograder.job.judge import remote
    hosts = main.fork_hosts(submission, triton, len(groups))
    results, tensors, error = remote.run_groups(hosts, groups, inputs, triton, submission,
                                                submission.read_text(encoding="utf-8", errors="replace"),
                                                config.SIM_LIMITS.timeout_s)
    return runner.Outcome(tensors, results, f"importing rmsnorm.py failed: {error}" if error else None, None)


def _draw() -> tuple:
    """(a drawn shape and its dtype, a tall shape), as a grading draws them (hidden/cases.py)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import secrets
    from autograder.hidden import cases
    return (*cases._drawn_shape(), secrets.choice(cases.DRAWN_DTYPES)), cases._tall_shape()


class Pool:
    """Gradings started now, each read when wanted: ``pool.start(name, path)``, then ``pool.verdict(name)`` waits
    for that one only, at most ``each_s`` seconds (a stuck grading fails its own test, not the others'). Every
    grading of a pool reads the same drawn shapes (``shapes``: (drawn, tall), drawn once for the pool unless given),
    so that a trick and its control are compared at the same shapes, whichever worker grades each."""

    def __init__(self, workers: int = 2, each_s: float = 300, shapes: tuple | None = None):
        shapes = shapes or _draw()
        self.each_s, self.shapes = each_s, shapes
        self.futures = {}
        self.pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=_context(),
                                                           initializer=_start)

    def start(self, name, path, gpu_cases: bool | str = False):
        if name not in self.futures:
            self.futures[name] = self.pool.submit(_grade, str(path), gpu_cases, *self.shapes)

    def verdict(self, name) -> dict:
        try:
            return self.futures[name].result(timeout=self.each_s)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"grading {name} took over {self.each_s:.0f} s") from None

    def close(self):
        """Cancel what has not started and wait for the rest: no thread of the pool outlives its tests (the speed
        tests count the threads running beside a timing)."""
        self.pool.shutdown(wait=True, cancel_futures=True)


def verdicts(paths: dict, workers: int = 2, gpu_cases: bool | str = False, drawn: tuple | None = None,
             tall: tuple | None = None, memory_bytes: int | None = None) -> dict:
    """{name: verdicts} of each submission (a path to its rmsnorm.py); ``drawn``: the shape items 5, 6 and 9 read
    besides the core ones (cases.DRAWN), and ``tall``: item 9's shape of many rows (cases.TALL), each drawn once for
    all the files unless given. With ``memory_bytes``, each grading runs in a fresh process under that address-space
    cap, as a job does (config.SIM_LIMITS.memory_bytes): a file whose kernels the simulator cannot hold within it is
    charged as a grading charges it (a process that graded others before holds more, and would fail sooner)."""
    drawn, tall = (d or new for d, new in zip((drawn, tall), _draw()))    # one draw for every file compared
    jobs = [str(p) for p in paths.values()]
    if memory_bytes is not None:
        def fresh(job):
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=_context(), initializer=_start,
                                                        initargs=(memory_bytes,)) as pool:
                return pool.submit(_grade, job, gpu_cases, drawn, tall).result()
        with concurrent.futures.ThreadPoolExecutor(workers) as threads:
            return dict(zip(paths, threads.map(fresh, jobs)))
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=_context(), initializer=_start) as pool:
        return dict(zip(paths, pool.map(_grade, jobs, [gpu_cases] * len(jobs), [drawn] * len(jobs),
                                        [tall] * len(jobs))))


def _most_masks_per_launch(path: str, shape: tuple) -> int:
    """The most (buffer, mask) pairs the judge's provenance was handed for one launch, in an autograd task of
    ``shape`` (fp32): a launch's records merged per buffer, or one per record as a row loop leaves them."""
    from rmsnorm_testkit.compare import reference  # noqa: F401 -- the grader's imports, in their order
    from autograder.hidden.cases import case, flat, make_inputs
    from autograder.job.judge import provenance
    from autograder.job.main import setup_backend
    triton = setup_backend(ROOT, "mini_triton")
    most, stored = [0], provenance.Memory.launch_stored

    def counted(self, stores, *marks):
        most[0] = max(most[0], len(stores))
        return stored(self, stores, *marks)
    provenance.Memory.launch_stored = counted
    inputs = make_inputs({"rows": case(shape)})
    task = {"op": "autograd", "tensors": {t: f"{t}.rows" for t in ("x", "g", "dy")}}
    outcome = _run(triton, Path(path), {"one": {"ag_rows": task}}, flat(inputs))
    assert outcome.info["ag_rows"].get("ok"), outcome.info["ag_rows"]
    return most[0]


def most_masks_per_launch(path: Path, shape: tuple) -> int:
    """``_most_masks_per_launch`` in a process of its own, as ``verdicts`` runs a grading."""
    return _in_a_process(_most_masks_per_launch, str(path), shape)


ROLES = {"forward": ("x", "g"), "backward": ("dy", "x", "g", "r"), "autograd": ("x", "g", "dy")}


def _one_case(case_name: str, shape: tuple, op: str, dtype: str = "float32") -> tuple:
    """(the inputs of one case, seeded by its name as the grader's are, with the reference r; a task of ``op``:
    "forward", "backward" or "autograd", on them)."""
    from rmsnorm_testkit.compare import reference
    from autograder.hidden.cases import case, make_inputs
    inputs = make_inputs({case_name: case(shape, dtype)})
    inputs[case_name]["r"] = reference(inputs[case_name]["x"], inputs[case_name]["g"])[1].float()
    return inputs, {"op": op, "tensors": {t: f"{t}.{case_name}" for t in ROLES[op]}, "eps": 1e-5}


def _stale(path: str, shape: tuple, dtype: str, op: str) -> dict:
    """The outputs of one task (``op``: "forward", "backward" or "autograd"), run twice in one submission's
    process, that the judge's replay on fresh inputs found stale the second time ({output: why})."""
    from autograder.hidden.cases import flat
    from autograder.job.main import setup_backend
    triton = setup_backend(ROOT, "mini_triton")
    inputs, task = _one_case("rows", shape, op, dtype)
    outcome = _run(triton, Path(path), {"one": {"first": task, "task": task}}, flat(inputs))
    assert outcome.info["task"].get("ok"), outcome.info["task"]
    return outcome.info["task"].get("stale") or {}


def _fresh_inputs(path: str, shape: tuple, op: str) -> dict:
    """{input: (the input given, the replay's fresh draw of it)} of one task of ``op`` at ``shape``."""
    from autograder.hidden.cases import flat
    from autograder.job.main import setup_backend
    from autograder.job.wire.protocol import fresh_key
    triton = setup_backend(ROOT, "mini_triton")
    inputs, task = _one_case("rows", shape, op)
    outcome = _run(triton, Path(path), {"one": {"task": task}}, flat(inputs))
    return {t: (inputs["rows"][t], outcome.tensors.get(fresh_key(f"{t}.rows"))) for t in ROLES[op]}


def fresh_inputs(path: Path, shape: tuple, op: str) -> dict:
    """``_fresh_inputs`` in a process of its own, as ``verdicts`` runs a grading."""
    return _in_a_process(_fresh_inputs, str(path), shape, op)


def stale(path: Path, shape: tuple, op: str, dtype: str = "float32") -> dict:
    """``_stale`` in a process of its own, as ``verdicts`` runs a grading."""
    return _in_a_process(_stale, str(path), shape, dtype, op)


def _made_on_a_draw(path: str, case_name: str, shape: tuple, op: str, seed: int) -> tuple:
    """(the judge's {output: whether the kernels made it}, {input: the replay's fresh draw of it}) of one task of
    ``op`` on case ``case_name`` at ``shape``, with the replay's fresh inputs drawn from ``seed``: a draw found to
    matter, made again."""
    import torch
    from autograder.hidden.cases import flat
    from autograder.job.judge import replay
    from autograder.job.main import setup_backend
    from autograder.job.wire.protocol import fresh_key
    triton = setup_backend(ROOT, "mini_triton")
    replay.generator = lambda: torch.Generator().manual_seed(seed)
    inputs, task = _one_case(case_name, shape, op)
    outcome = _run(triton, Path(path), {"one": {"task": task}}, flat(inputs))
    assert outcome.info["task"].get("ok"), outcome.info["task"]
    return (dict(outcome.info["task"].get("kernel_made") or {}),
            {t: outcome.tensors.get(fresh_key(f"{t}.{case_name}")) for t in ROLES[op]})


def made_on_a_draw(path: Path, case_name: str, shape: tuple, op: str, seed: int) -> tuple:
    """``_made_on_a_draw`` in a process of its own, as ``verdicts`` runs a grading."""
    return _in_a_process(_made_on_a_draw, str(path), case_name, shape, op, seed)


def _groups(path: str, groups: dict, cpu_seconds: dict) -> tuple:
    """(results, the import's error) of remote.run_groups on ``groups`` ({group: {task: task}}), each group with its
    budget of CPU seconds."""
    from autograder.job import main
    from autograder.job.judge import remote
    triton = main.setup_backend(ROOT, "mini_triton")
    submission = Path(path)
    hosts = main.fork_hosts(submission, triton, len(groups))
    results, _, error = remote.run_groups(hosts, groups, {}, triton, submission,
                                          submission.read_text(encoding="utf-8", errors="replace"), 60, cpu_seconds)
    return results, error


def groups(path: Path, groups: dict, cpu_seconds: dict, timeout: float = 300) -> tuple:
    """``_groups`` in a process of its own."""
    return _in_a_process(_groups, str(path), groups, cpu_seconds, timeout=timeout)


def _prediction(path: str) -> dict:
    """The note and leaderboard a CPU grading makes of item 10's prediction, its tasks run in a job's two processes
    (the judge's and the submission's), as cases.sim_jobs' "predict" group runs them."""
    from rmsnorm_testkit import predict
    from autograder.hidden.cases import predict_tasks, task_name
    from autograder.job.main import setup_backend
    from autograder.judge import speed as judged
    from autograder.rubric import COPY_NEEDED
    triton = setup_backend(ROOT, "mini_triton")
    outcome = _run(triton, Path(path), {"predict": predict_tasks()}, {})
    predicted = judged.predictions(outcome, {d: task_name("predict", d) for d in predict.DTYPES})
    return {"note": judged.prediction_note(predicted, COPY_NEEDED), "board": judged.predicted_leaderboard(predicted),
            "predicted": predicted}


def prediction(path: Path, timeout: float = 300) -> dict:
    """``_prediction`` in a process of its own, as ``verdicts`` runs a grading."""
    return _in_a_process(_prediction, str(path), timeout=timeout)


def _timed(path: str, shape: tuple, dtypes: tuple) -> dict:
    """Item 10's job on the fake GPU (tests/fake_gpu.py): the submission's process forked as a GPU job forks it
    records each step (host.py's "record"); the judge compiles its kernels with Triton's interpreter and replays,
    captures and times them as judge/timed.py does on a GPU, each whole step one fake kernel of 1 ms. Returns
    {task: info}, each with "wrong" (what is wrong with the timed replay's whole outputs, checked against the
    seeds as the grader checks them) and "refused" (judge/speed.refusal of each step), "_import" and "_tampered"."""
    import functools
    from rmsnorm_testkit import compare, timing
    from autograder.job import main
    from autograder.job.main import setup_backend
    from autograder.job.wire.protocol import timed_key
    from autograder.judge import speed as judged
    from autograder.speed import full_reference
    triton = setup_backend(ROOT, "mini_triton")
    submission = Path(path)
    (channel, pid), = main.fork_hosts(submission, triton, 1)
    os.environ.pop("MINI_TRITON", None)
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_gpu import FakeGPU
    from autograder.job.judge import timed
    gpu = FakeGPU()
    timing.CUDA.clear()
    timing.CUDA.update(gpu.table)
    timing.time_cuda = functools.partial(timing.time_cuda, warmup_ms=2.0, rep_ms=3.0, min_reps=3, rounds=2)
    real = timed.Step.__call__
    timed.Step.__call__ = lambda self, inputs: gpu.kernel_of(real)(self, inputs)
    tasks = {f"speed.{d}": {"op": "speed", "shape": shape, "dtype": d, "device": "cpu"} for d in dtypes}
    results, tensors, error = timed.run_job(channel, pid, triton, submission,
                                            submission.read_text(encoding="utf-8", errors="replace"), tasks)
    out = {"_import": error, "_tampered": results.get("_tampered")}
    for name, task in tasks.items():
        info = dict(results.get(name, {}))
        wrong = {}
        for kind, names in timed.OUTPUTS.items():
            seed = info.get("seeds", {}).get(kind)
            if f"{kind}_graph_ms" in info and isinstance(seed, int):
                x, ref = full_reference(shape, task["dtype"], seed, device="cpu")
                for n in names:
                    got = tensors.get(f"{name}.{timed_key(kind, n)}")
                    wrong[kind] = wrong.get(kind) or ("missing" if got is None else
                                                      compare.compare(n, got, ref[n], x, n_rows=shape[0]))
        info["wrong"], info["refused"] = wrong, {k: judged.refusal(k, info) for k in timed.OUTPUTS}
        out[name] = info
    return out


def timed_job(path: Path, shape: tuple = (64, 512), dtypes: tuple = ("float32",), timeout: float = 300) -> dict:
    """``_timed`` in a process of its own, as ``verdicts`` runs a grading."""
    return _in_a_process(_timed, str(path), tuple(shape), tuple(dtypes), timeout=timeout)


def _grade_with_ctx_unseen(path: str) -> dict:
    """``_grade``, with the submission's side blind to ctx's attributes (its check replaced, as a file that switched
    the seal off could replace it): what the judge decides from its own sight alone."""
    from rmsnorm_testkit import compare
    compare.ctx_tensors = lambda y: []
    return _grade(path)


def verdicts_with_ctx_unseen(path: Path) -> dict:
    """``_grade_with_ctx_unseen`` in a process of its own, as ``verdicts`` runs a grading."""
    return _in_a_process(_grade_with_ctx_unseen, str(path))
