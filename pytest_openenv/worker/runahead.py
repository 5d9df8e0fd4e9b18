"""Worker side: ``--openenv-concurrency C`` (episodes run ahead of their items) and the
``--openenv-timeout`` backstop.

pytest runs items one at a time and reports them in order; an LLM episode spends
its time waiting on the network. So when item k's ``episode`` fixture runs, the
episodes of the next episode items *this process is certain to run* are queued
on a pool of C threads (C running at most; a window of ``WINDOW_FACTOR * C``
queued, so one slow episode at the head does not idle the others), and item k
waits only for its own. Results stay in memory until their own item claims
them, so every item reports its own episode, in order, exactly once; an episode
whose item never runs (``-x``, a crash) is dropped and its staged cache writes
with it.

Which items are certain to run next:

* without xdist: the rest of ``session.items`` (after deselection and
  reordering; skip-marked items are left out);
* on an xdist worker: the items the controller has already handed to this worker
  (``xdist_queue.py``). Most schedulers take them back only to stop the run
  (``controller/stopping.py``); ``--dist worksteal`` may at any time, so there only
  the next item, already popped from the queue, is run ahead. The controller tells
  each worker which case it is (``controller/schedule.py: keeps_queued_items``). With
  ``--dist load`` the controller's scheduler keeps that queue about a window long,
  so ``-n W`` keeps up to W x C episodes in flight.

``--openenv-concurrency auto`` lets ``adaptive.AdaptiveLimit`` resize the pool (and
with it the window) as the endpoint answers: each finished episode's seconds per
turn is its signal, and overloads (429s, ``CAPACITY_REACHED``, timeouts: the service's
``OverloadSignal``) halve it.

Only items whose ``episode``, ``openenv_env`` and ``openenv_policy`` fixtures are
the plugin's own are run ahead: an override in a conftest may depend on other
fixtures, so such items run when their turn comes.

With ``--openenv-timeout`` every episode runs on the pool, and an episode still
running ``GRACE`` seconds past its budget (a hung env, a callable that never
returns) is abandoned: its item errors and a fresh thread takes its place.
Policies that wait on a network also bound each request by the budget.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from ..config.convert import WINDOW_FACTOR
from ..episode.loop import EpisodeTimeout
from ..episode.record import PreparedRow
from ..episode.result import Episode
from ..episode.service import EpisodeService
from ..episode.spec import EpisodeSpec
from ..policies.base import Policy
from .adaptive import AUTO, AdaptiveLimit, concurrency_ceiling
from .fixtures import OWN_FIXTURES, fixture_is_ours
from .items import PREPARED_KEY, SPEC_KEY
from .xdist_queue import WorkerQueue

#: seconds past --openenv-timeout before the waiting item gives up on the episode thread
GRACE = 0.5


class Job:
    """One episode on the pool: result or exception, and its staged cache writes."""

    def __init__(
        self,
        spec: EpisodeSpec,
        work: Callable[[], Episode],
        prepare: str | None = None,
        test: str = "",
    ) -> None:
        self.spec = spec
        self.work = work
        #: make the episode's row and line on the pool's thread, in this tool-arguments
        #: form, for the item ``test`` (its node id)
        self.prepare = prepare
        self.test = test
        self.done = threading.Event()
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.abandoned = False
        self.result: Episode | None = None
        #: the result's row and line, made here when ``prepare`` says in which form
        self.prepared: PreparedRow | None = None
        self.error: BaseException | None = None
        self.writes: list[Callable[[], None]] = []

    def run(self) -> None:
        from ..policies.cache import staged_writes  # only runs that use the pool pay for it

        with staged_writes() as writes:
            try:
                self.result = self.work()
            except BaseException as exc:  # re-raised in the item's own thread
                self.error = exc
            else:
                if self.prepare is not None:
                    # a row that cannot be made fails where it would without this: in its
                    # item's report
                    with contextlib.suppress(Exception):
                        self.prepared = PreparedRow.of(self.result, self.test, self.prepare)
            finally:
                self.writes = writes
                self.finished_at = time.monotonic()
                self.done.set()


class EpisodePool:
    """Up to ``size`` jobs running on daemon threads; waited-for jobs jump the queue.

    Daemon threads, so an abandoned episode (a hung request) never holds up exit.
    ``resize`` changes how many jobs may run at once (``--openenv-concurrency auto``):
    threads beyond the new size finish their job and then wait.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._queue: deque[Job] = deque()
        self._cv = threading.Condition()
        self._live = 0
        self._running = 0
        self._closed = False

    def submit(self, job: Job, *, urgent: bool = False) -> None:
        with self._cv:
            if self._closed:
                raise RuntimeError("the episode pool is closed")
            if urgent:
                self._queue.appendleft(job)
            else:
                self._queue.append(job)
            while self._live < self.size:
                self._start()
            self._cv.notify()

    def resize(self, size: int) -> None:
        with self._cv:
            self.size = max(1, size)
            while self._live < self.size and self._queue and not self._closed:
                self._start()
            self._cv.notify_all()

    def _start(self) -> None:
        self._live += 1
        threading.Thread(target=self._serve, name="openenv-episode", daemon=True).start()

    def _serve(self) -> None:
        while True:
            with self._cv:
                while (not self._queue or self._running >= self.size) and not self._closed:
                    self._cv.wait()
                if self._closed:
                    self._live -= 1
                    return
                job = self._queue.popleft()
                self._running += 1
                job.started_at = time.monotonic()
            job.run()
            with self._cv:
                if job.abandoned:  # a replacement thread already took this one's place
                    return
                self._running -= 1
                self._cv.notify()

    def abandon(self, job: Job) -> bool:
        """Give up on a running job; False if it finished meanwhile (use its result)."""
        with self._cv:
            if job.done.is_set():
                return False
            job.abandoned = True
            self._live -= 1
            self._running -= 1
            if not self._closed and self._queue:
                self._start()
            return True

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._queue.clear()
            self._cv.notify_all()


def may_run_ahead(item: pytest.Item) -> bool:
    """Whether the episode of ``item`` can be run before its item's own setup."""
    if SPEC_KEY not in item.stash:
        return False
    if item.get_closest_marker("skip") or item.get_closest_marker("skipif"):
        return False
    xfail = item.get_closest_marker("xfail")
    if xfail is not None and xfail.kwargs.get("run", True) is False:
        return False
    return all(fixture_is_ours(item, name) for name in OWN_FIXTURES)


class Runahead:
    """Per-process episode executor: inline, or on the pool with run-ahead and a backstop."""

    def __init__(
        self,
        config: pytest.Config,
        service: EpisodeService,
        *,
        concurrency: int | str,
        timeout: float | None,
        worker_queue: WorkerQueue | None = None,
        queue_is_certain: bool = False,
        warm_up: bool = False,
        prepare_rows: str | None = None,
    ) -> None:
        self.config = config
        #: the bundled test's rows are made on the pool's threads, in this tool-arguments
        #: form (``PreparedRow``); None: in the item's report, as it stands then
        self.prepare_rows = prepare_rows
        self.service = service
        #: most episodes in flight (auto: its ceiling); > 1 means episodes run ahead
        self.concurrency = concurrency_ceiling(concurrency)
        self.timeout = timeout
        self.adaptive: AdaptiveLimit | None = None
        self.pool = EpisodePool(self.concurrency) if self.concurrency > 1 or timeout else None
        if concurrency == AUTO and self.pool is not None:
            self.adaptive = AdaptiveLimit(ceiling=self.concurrency, on_change=self.pool.resize)
            self.pool.resize(self.adaptive.limit)
            # 429s, CAPACITY_REACHED and timeouts, from the policies and backends it built
            service.overload.listen(self.adaptive.overloaded)
        self.jobs: dict[int, Job] = {}
        self._eligible: dict[int, bool] = {}
        self._positions: dict[int, int] | None = None
        #: without xdist: positions in ``session.items`` of the eligible items queued
        #: ahead, and the first position not looked at yet
        self._ahead: deque[int] = deque()
        self._cursor = 0
        #: on an xdist worker: the items queued ahead (ids) and every item looked at, both
        #: in the order the worker runs them
        self._queue_ahead_ids: deque[int] = deque()
        self._looked_items: deque[pytest.Item] = deque()
        #: on an xdist worker: the items handed to it (None: this process runs them all)
        self._worker_queue = worker_queue
        #: items in a worker's queue are certain to run there unless the scheduler may take
        #: them back (worksteal), or we cannot tell (a controller that did not say)
        self._queue_is_certain = queue_is_certain
        #: the summary is printed here (not an xdist worker): warm its imports once busy
        self._warm_up = warm_up

    @property
    def window(self) -> int:
        """Items whose episodes may be queued or running: more than C, so a slow episode at
        the head (its item waits for it) does not leave the other threads idle."""
        if self.concurrency <= 1:
            return 1
        running = self.adaptive.limit if self.adaptive is not None else self.concurrency
        return WINDOW_FACTOR * running

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.adaptive is not None and self.adaptive.best is not None:
            terminalreporter.write_line(self.adaptive.describe())

    # -- the item's own episode ----------------------------------------------
    def episode(self, item: pytest.Item, spec: EpisodeSpec, env: Any, policy: Policy) -> Episode:
        if self.pool is None:
            return self.service.run(spec, env, policy)
        job = self.jobs.pop(id(item), None)
        if job is None:
            job = Job(
                spec, lambda: self.service.run(spec, env, policy), self.prepare_rows, item.nodeid
            )
            self.pool.submit(job, urgent=True)
        if self.concurrency > 1:
            self._run_ahead(item)
        finished = self._wait(job)
        if job.prepared is not None:  # the item's report finishes it (``reporting.py``)
            item.stash[PREPARED_KEY] = job.prepared
        return finished

    def _wait(self, job: Job) -> Episode:
        while not job.done.wait(0.25 if self.timeout else 1.0):
            started = job.started_at
            if (
                self.timeout is not None
                and started is not None
                and time.monotonic() - started > self.timeout + GRACE
                and self.pool is not None
                and self.pool.abandon(job)
            ):
                self.service.overload.fire()
                raise EpisodeTimeout(
                    f"episode {job.spec.episode_id} exceeded --openenv-timeout="
                    f"{self.timeout:g}s (still waiting on the env or the policy; abandoned)"
                )
        for write in job.writes:  # the item claims its episode: its cache entries may land
            write()
        if self.adaptive is not None and job.result is not None:
            self._observe(job, job.result)
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def _observe(self, job: Job, episode: Episode) -> None:
        if job.started_at is None or job.finished_at is None or self.adaptive is None:
            return
        self.adaptive.observe((job.finished_at - job.started_at) / max(1, episode.turns))

    # -- run-ahead -------------------------------------------------------------
    def _run_ahead(self, item: pytest.Item) -> None:
        session = item.session
        if session.shouldstop or session.shouldfail:
            return
        if self._worker_queue is None:
            self._run_ahead_in_order(item)
        else:
            self._run_ahead_from_queue(item, self._worker_queue)
        if self._warm_up and self.jobs:
            from ..util import warmup

            self._warm_up = False
            warmup.start(self.config)  # the episodes just queued wait on the network

    def _run_ahead_in_order(self, item: pytest.Item) -> None:
        """Keep ``window - 1`` eligible items after ``item`` queued, from ``session.items``.

        Items run in list order, so the items already looked at need no second look:
        a cursor moves on past them and each item is looked at once in the run, where
        walking the window again at every item cost more of the main thread (which runs
        every item's pytest protocol) than the rest of the plugin's per-item work.
        """
        items = item.session.items
        if self._positions is None:
            self._positions = {id(it): i for i, it in enumerate(items)}
        position = self._positions.get(id(item))
        if position is None:
            return
        ahead = self._ahead
        while ahead and ahead[0] <= position:
            ahead.popleft()
        wanted = self.window - 1
        cursor = max(self._cursor, position + 1)
        end = min(len(items), position + 1 + 2 * self.window)
        while len(ahead) < wanted and cursor < end:
            if self._queue_ahead(items[cursor]):
                ahead.append(cursor)
            cursor += 1
        self._cursor = cursor

    def _run_ahead_from_queue(self, item: pytest.Item, queue: WorkerQueue) -> None:
        """Keep ``window - 1`` eligible items of this worker's queue queued after ``item``.

        As in ``_run_ahead_in_order``, each queued item is looked at once: the queue only
        loses its head (the items that ran since) and grows at its tail, so what was looked
        at after ``item`` needs no second look. Where the queue changed otherwise (the
        controller took items back), the last item looked at is not where it was, and the
        window is looked at afresh.
        """
        ahead, looked = self._queue_ahead_ids, self._looked_items
        while ahead and ahead[0] not in self.jobs:  # claimed by their items (or dropped)
            ahead.popleft()
        while looked and looked.popleft() is not item:
            pass  # items that ran since without asking for their episode here
        if len(ahead) >= self.window - 1:
            return
        certain, limit = self._queue_is_certain, 2 * self.window
        if looked:
            last = queue.following(item, limit=len(looked), queued=certain, start=len(looked) - 1)
            if not last or last[0] is not looked[-1]:
                looked.clear()
        if not looked:
            ahead.clear()
        while len(ahead) < self.window - 1 and len(looked) < limit:
            # no more than the window still wants: each eligible item fills one place
            wanted = min(limit, len(looked) + self.window - 1 - len(ahead))
            fresh = queue.following(item, limit=wanted, queued=certain, start=len(looked))
            if not fresh:
                break
            for upcoming in fresh:
                looked.append(upcoming)
                if self._queue_ahead(upcoming):
                    ahead.append(id(upcoming))

    def _queue_ahead(self, upcoming: pytest.Item) -> bool:
        """Queue the episode of ``upcoming`` unless it is queued; False: it may not run ahead."""
        key = id(upcoming)
        eligible = self._eligible.get(key)
        if eligible is None:
            eligible = self._eligible[key] = may_run_ahead(upcoming)
        if not eligible:
            return False
        if key in self.jobs:
            return True
        spec = upcoming.stash[SPEC_KEY]
        try:
            env = self.service.env_factory(spec)
            policy = self.service.policy_for(spec)
        except Exception:  # e.g. a bad policy in its marker: that item reports it itself
            self._eligible[key] = False
            return False
        self.jobs[key] = job = Job(
            spec,
            lambda s=spec, e=env, p=policy: self.service.run(s, e, p),
            self.prepare_rows,
            upcoming.nodeid,
        )
        assert self.pool is not None
        self.pool.submit(job)
        return True

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.jobs.clear()
        self._eligible.clear()
        self._ahead.clear()
        self._queue_ahead_ids.clear()
        self._looked_items.clear()
