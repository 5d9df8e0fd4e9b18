"""The queue that gathers greedy turns of episodes in flight into one generation."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from pytest_openenv.policies.llm.local_batch import TurnBatcher, Waiting


class Recorder:
    """A generation that answers each turn with its own ids reversed, and notes each batch."""

    def __init__(self) -> None:
        self.batches: list[list[list[int]]] = []

    def __call__(self, batch: Sequence[Waiting]) -> list[list[int]]:
        self.batches.append([w.ids for w in batch])
        return [list(reversed(w.ids)) for w in batch]


def queue_all(batcher: TurnBatcher, lock: threading.Lock, turns: list[Waiting]) -> None:
    """Every turn queued while the model is held, then released: the batches are known."""
    threads = [threading.Thread(target=batcher.reply, args=(w,)) for w in turns]
    with lock:
        for thread in threads:
            thread.start()
        while len(batcher._queued) < len(turns):
            time.sleep(0.002)
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def later(seconds: float = 60.0) -> float:
    return time.monotonic() + seconds


def test_turns_queued_together_go_in_batches_of_the_limit_first_come_first_served() -> None:
    lock, generate = threading.Lock(), Recorder()
    batcher = TurnBatcher(3, lock, generate)
    turns = [Waiting([i, i + 100], 4, later()) for i in range(7)]
    queue_all(batcher, lock, turns)
    sizes = [len(batch) for batch in generate.batches]
    assert sizes == [3, 3, 1]
    assert sorted(ids for batch in generate.batches for ids in batch) == [w.ids for w in turns]
    assert [w.tokens for w in turns] == [[i + 100, i] for i in range(7)]
    assert (batcher.batches, batcher.turns) == (3, 7)


def test_a_lone_turn_does_not_wait_long_for_company() -> None:
    lock = threading.Lock()
    batcher = TurnBatcher(8, lock, Recorder())
    started = time.monotonic()
    answered = batcher.reply(Waiting([1, 2], 4, later()))
    assert answered.tokens == [2, 1]
    assert time.monotonic() - started < 1.0  # the gather gives up within 50 ms when quiet


def test_a_turn_whose_time_ran_out_in_the_queue_is_not_generated() -> None:
    lock, generate = threading.Lock(), Recorder()
    batcher = TurnBatcher(4, lock, generate)
    gone = Waiting([9], 4, deadline=time.monotonic() + 0.05)
    live = Waiting([1], 4, later())
    threads = [threading.Thread(target=batcher.reply, args=(w,)) for w in (gone, live)]
    with lock:  # a generation that outlasts the first turn's time
        for thread in threads:
            thread.start()
        time.sleep(0.2)
    for thread in threads:
        thread.join(10)
    assert isinstance(gone.error, TimeoutError) and gone.tokens is None
    assert live.tokens == [1]
    assert generate.batches == [[[1]]]


def test_a_generation_that_raises_fails_every_turn_of_its_batch() -> None:
    lock = threading.Lock()

    def broken(batch: Sequence[Waiting]) -> list[list[int]]:
        raise RuntimeError("out of memory")

    batcher = TurnBatcher(4, lock, broken)
    turns = [Waiting([i], 4, later()) for i in range(3)]
    queue_all(batcher, lock, turns)
    assert all(isinstance(w.error, RuntimeError) and w.done.is_set() for w in turns)


def test_a_batch_of_no_turns_is_an_error_naming_the_limit() -> None:
    with pytest.raises(ValueError, match="at least 1 turn, not 0"):
        TurnBatcher(0, threading.Lock(), Recorder())
