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
