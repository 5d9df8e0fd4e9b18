"""A pytest plugin for benchmarks: the CPU a run spends between collection and its end.

Loaded with ``-p cpu_probe`` (``bench/`` on ``PYTHONPATH``); writes JSON to the file named
by ``OPENENV_BENCH_CPU`` (an xdist worker to that name plus ``.gw0``, ``.gw1``, ...): the
process's CPU seconds (every thread) and the main thread's from the end of collection to
the end of the session, so start-up and imports, which a longer run pays once, are left
out of a per-episode figure. An xdist controller collects nothing: its figures start at
its session start (which starts the workers).
"""

from __future__ import annotations

import json
import os
import time

import pytest

_marks: dict[str, float] = {}


def mark() -> None:
    _marks["process"] = time.process_time()
    _marks["main"] = time.thread_time()


def pytest_sessionstart(session: pytest.Session) -> None:
    mark()  # an xdist controller's only mark: it never finishes a collection of its own


def pytest_collection_finish(session: pytest.Session) -> None:
    mark()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("OPENENV_BENCH_CPU")
    if not target or "process" not in _marks:
        return
    # xdist's own mark of a worker: the environment may carry an outer run's variables
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if worker:
        target = f"{target}.{worker}"
    with open(target, "w", encoding="utf-8") as out:
        json.dump(
            {
                "process_s": time.process_time() - _marks["process"],
                "main_thread_s": time.thread_time() - _marks["main"],
            },
            out,
        )
