"""Many runs of the public tests, each in a fresh process, without paying for torch's import in each.

A run of ``python -m pytest starter/tests`` spends about 2 s of CPU importing torch before its first test.
Here one process imports torch and pytest once (multiprocessing's fork server, preloaded), and each run is a
child forked from it: a fresh process as far as the public tests can tell (its own modules, environment,
working folder and output), as ``python -m pytest`` would start it.

    run(args, env, cwd, timeout) -> (exit code, stdout and stderr together)
"""
import multiprocessing
import os
import sys
import tempfile

_CONTEXT = None


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(["torch", "pytest"])
    return _CONTEXT


def _child(args, env, cwd, out_path):
    """In the forked child: what ``python -m pytest ARGS`` does in ``cwd`` with ``env``, output to ``out_path``."""
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.path.insert(0, cwd)                          # what `python -m` puts first
    import pytest
    code = pytest.main(list(args))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def run(args, env: dict, cwd: str, timeout: float) -> tuple:
    """(exit code, output) of pytest ``args`` in a child of the fork server; a run past ``timeout`` is killed
    (exit code None)."""
    with tempfile.NamedTemporaryFile("r", suffix=".out", encoding="utf-8", errors="replace") as out:
        p = _context().Process(target=_child, args=(list(args), dict(env), str(cwd), out.name))
        p.start()
        p.join(timeout)
        if p.is_alive():
            p.kill()
            p.join()
            return None, out.read()
        return p.exitcode, out.read()
