"""``Runahead`` without xdist: which items run ahead, and what each item costs the main thread."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.util.overload import OverloadSignal
from pytest_openenv.worker import runahead
from pytest_openenv.worker.items import SPEC_KEY


class CountingDict(dict):  # type: ignore[type-arg]
    """Counts the look-ups of the run-ahead's eligibility memo: one per item looked at."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


class Service:
    """Plays nothing: each episode is its spec, and the pool's threads finish at once."""

    def __init__(self) -> None:
        self.overload = OverloadSignal()
        self.started: list[int] = []
        self._lock = threading.Lock()

    def env_factory(self, spec: EpisodeSpec) -> Any:
        return None

    def policy_for(self, spec: EpisodeSpec) -> Any:
        return None

    def run(self, spec: EpisodeSpec, env: Any, policy: Any) -> Any:
        with self._lock:
            self.started.append(spec.index)
        return spec


def session_of(n: int) -> Any:
    session = SimpleNamespace(shouldstop=False, shouldfail=False, items=[])
    for i in range(n):
        spec = EpisodeSpec(env="openspiel:tic_tac_toe", seed=i, index=i, repeat=0)
        stash = pytest.Stash()
        stash[SPEC_KEY] = spec
        item = SimpleNamespace(session=session, stash=stash, nodeid=f"t.py::test[{i}]")
        session.items.append(item)
    return session


def test_each_item_is_looked_at_once_whatever_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runahead, "may_run_ahead", lambda item: item.stash[SPEC_KEY].index % 5)
    service = Service()
    ahead = runahead.Runahead(
        SimpleNamespace(),
        service,
        concurrency=16,
        timeout=None,  # type: ignore[arg-type]
    )
    ahead._eligible = memo = CountingDict()
    session = session_of(400)
    try:
        for item in session.items:
            spec = item.stash[SPEC_KEY]
            if spec.index % 5:  # an eligible item claims the episode queued for it
                assert ahead.episode(item, spec, None, None) is spec  # type: ignore[arg-type]
                # the window ahead of it is full: window - 1 eligible items queued (or all
                # that are left), and none past twice the window
                later = [
                    it for it in session.items[spec.index + 1 :] if it.stash[SPEC_KEY].index % 5
                ]
                queued = [it for it in later if id(it) in ahead.jobs]
                assert queued == later[: ahead.window - 1]
    finally:
        ahead.close()
    # every eligible item played once, itself or ahead; every item looked at once (the old
    # walk looked at the whole window again for each item: some 60 times each here)
    assert sorted(service.started) == [i for i in range(400) if i % 5]
    assert memo.lookups <= len(session.items)


class WorkerQueueOf:
    """An xdist worker's queue as ``WorkerQueue`` reads it: the items handed to this worker
    and not run yet, which lose their head as items run and grow at the tail as the
    controller sends more; counts the positions it hands out."""

    def __init__(self) -> None:
        self.waiting: list[Any] = []
        self.handed_out = 0

    def following(self, item: Any, *, limit: int, queued: bool, start: int = 0) -> list[Any]:
        assert queued
        positions = self.waiting[start:limit]
        self.handed_out += len(positions)
        return positions


def on_a_worker(service: Service, queue: WorkerQueueOf, *, concurrency: int) -> Any:
    """A ``Runahead`` as an xdist worker of ``--dist load`` makes it: its queue is certain."""
    return runahead.Runahead(
        SimpleNamespace(),  # type: ignore[arg-type]
        service,  # type: ignore[arg-type]
        concurrency=concurrency,
        timeout=None,
        worker_queue=queue,  # type: ignore[arg-type]
        queue_is_certain=True,
    )


def play_from_queue(
    ahead: runahead.Runahead, queue: WorkerQueueOf, items: list[Any], eligible: Any
) -> None:
    """Run ``items`` in order as a worker does, the controller topping its queue up in
    batches; after each eligible item, the window ahead of it is full."""
    handed = 0
    for position, item in enumerate(items):
        while handed < len(items) and handed - position < 3 * ahead.window:
            handed += 50  # a batch of the controller's
        queue.waiting = items[position + 1 : handed]
        spec = item.stash[SPEC_KEY]
        if eligible(item):
            assert ahead.episode(item, spec, None, None) is spec  # type: ignore[arg-type]
            later = [it for it in queue.waiting if eligible(it)]
            queued = [it for it in later if id(it) in ahead.jobs]
            assert queued == later[: ahead.window - 1]


def test_a_worker_looks_at_each_queued_item_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def eligible(item: Any) -> bool:
        return bool(item.stash[SPEC_KEY].index % 5)

    monkeypatch.setattr(runahead, "may_run_ahead", eligible)
    service, queue = Service(), WorkerQueueOf()
    ahead = on_a_worker(service, queue, concurrency=16)
    ahead._eligible = memo = CountingDict()
    items = session_of(600).items
    try:
        play_from_queue(ahead, queue, items, eligible)
    finally:
        ahead.close()
    assert sorted(service.started) == [i for i in range(600) if i % 5]
    # each item looked at once, and handed out at most twice (once new, once to check
    # the queue is as it was): the old walk took the whole window again at every item
    assert memo.lookups <= len(items)
    assert queue.handed_out <= 2 * len(items)


def test_a_queue_the_controller_took_items_from_is_looked_at_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runahead, "may_run_ahead", lambda item: True)
    service, queue = Service(), WorkerQueueOf()
    ahead = on_a_worker(service, queue, concurrency=4)
    items = session_of(40).items
    try:
        queue.waiting = items[1:20]
        ahead.episode(items[0], items[0].stash[SPEC_KEY], None, None)  # type: ignore[arg-type]
        assert [it for it in items if id(it) in ahead.jobs] == items[1 : ahead.window]
        # the controller takes items 2-19 back and hands this worker 30-39 instead
        queue.waiting = items[30:40]
        ahead.episode(items[1], items[1].stash[SPEC_KEY], None, None)  # type: ignore[arg-type]
        window = [it for it in items[30:40] if id(it) in ahead.jobs]
        assert window == items[30 : 30 + ahead.window - 1]
    finally:
        ahead.close()
