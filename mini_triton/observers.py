"""The seam between the launcher and the analyses that watch its launches.

A GPU reports nothing after a launch; the simulator does. Each analysis is an
*observer*: once every program of a launch has run, the launcher hands the
launch and the record of every memory access its programs made (memory.Access,
each with a kind: load, store or atomic) to every registered observer, in
order. An observer raises to reject the launch (races.py: a data race) or keeps
what it needs (stats.py: the traffic counts). Adding a check is one new module
that calls :func:`register` when it is imported (README: "How to add a check").
"""
from __future__ import annotations

import contextlib

_OBSERVERS: list = []          # (order, name, callback)

# When each observer runs after a launch, lowest first. A check that may reject the launch runs before the
# statistics that count it, so that a rejected launch is never counted; an analysis that reads the counts runs
# after them (``AFTER_STATISTICS`` is the default for a new one).
CHECKS = 10                    # races.check
STATISTICS = 20                # stats.commit_launch
AFTER_STATISTICS = 100


def register(on_launch, order: int = AFTER_STATISTICS):
    """Call ``on_launch(launch, records)`` after every launch, lower ``order`` first (``CHECKS``, then
    ``STATISTICS``, then ``AFTER_STATISTICS``). Returns ``on_launch``."""
    name = f"{on_launch.__module__}.{on_launch.__qualname__}"
    _OBSERVERS[:] = [o for o in _OBSERVERS if o[1] != name]          # re-registering replaces
    _OBSERVERS.append((order, name, on_launch))
    _OBSERVERS.sort(key=lambda o: o[0])
    return on_launch


def unregister(on_launch):
    """Stop calling ``on_launch`` (registered with :func:`register`)."""
    name = f"{on_launch.__module__}.{on_launch.__qualname__}"
    _OBSERVERS[:] = [o for o in _OBSERVERS if o[1] != name]


def launched(launch, records):
    """Tell every observer about one finished launch."""
    for _, _, on_launch in _OBSERVERS:
        on_launch(launch, records)


def registered() -> list[str]:
    """The observers' names, in the order they run."""
    return [name for _, name, _ in _OBSERVERS]


@contextlib.contextmanager
def silenced():
    """No observer hears of the launches run inside: a *replay* of a launch (the same programs again, on other
    data, to see which stored values depend on which loaded ones) is not a second launch to check or count."""
    saved = _OBSERVERS[:]
    _OBSERVERS.clear()
    try:
        yield
    finally:
        _OBSERVERS[:] = saved
