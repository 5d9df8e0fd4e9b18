"""Greedy turns of episodes in flight share one ``generate``: a batch per model step.

On CPU a small model's decoding step costs much the same for several sequences as for
one: the step's Python and per-kernel overhead, not the arithmetic, sets its pace
(SmolLM2-135M on 2 cores: 17 tokens/s alone, 41 in a batch of 4, 62 in a batch of 8).
So with ``--openenv-concurrency`` above 1, turns waiting for the model are generated
together: whichever waiting thread takes the model next gathers every turn queued
(up to ``limit``) and runs them as one left-padded batch, the others wait for their
reply. No thread of its own, nothing to shut down.

Greedy decoding only: a sampled reply stays seeded per episode and turn, which a batch's
shared random stream could not keep. Left padding under the attention mask gives each
sequence the tokens it gets alone (checked on SmolLM2: 12 of 12 prompts of 94-141 tokens,
40 tokens each, the same).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: how long the thread that takes the model waits for more turns once none arrive: an
#: episode's next turn comes within milliseconds of its reply (env step, template), a
#: generation takes seconds
QUIET_S = 0.01
#: and at most this long in all
GATHER_S = 0.05


@dataclass(eq=False)
class Waiting:
    """One turn queued for the model: its prompt's ids and when its time runs out."""

    ids: list[int]
    max_new: int
    #: ``time.monotonic()`` past which the reply is out of time
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    tokens: list[int] | None = None
    #: when its generation ended (``time.monotonic()``)
    finished_at: float = 0.0
    error: BaseException | None = None


#: runs one batch: each member's new tokens, in the members' order
Generate = Callable[[Sequence[Waiting]], list[list[int]]]


class TurnBatcher:
    """Queued turns, generated ``limit`` at a time under ``model_lock``.

    ``model_lock`` is the lock every other use of the model takes too, so a batch and a
    lone generation never run at once.
    """

    def __init__(self, limit: int, model_lock: threading.Lock, generate: Generate) -> None:
        if limit < 1:
            raise ValueError(f"a batch holds at least 1 turn, not {limit}")
        self.limit = limit
        self._model_lock = model_lock
        self._generate = generate
        self._queued: list[Waiting] = []
        self._arrived = threading.Condition()
        #: how many batches ran and how many turns they held (for tests and the docs' figures)
        self.batches = 0
        self.turns = 0

    def reply(self, waiting: Waiting) -> Waiting:
        """Queue the turn and return it answered (``tokens``) or failed (``error``)."""
        with self._arrived:
            self._queued.append(waiting)
            self._arrived.notify_all()
        while not waiting.done.is_set():
            with self._model_lock:
                if waiting.done.is_set():
                    break
                self._run(self._gather())
        return waiting

    def _gather(self) -> list[Waiting]:
        """The next batch, first come first served, after a short wait for stragglers."""
        started = time.monotonic()
        with self._arrived:
            seen = len(self._queued)
            while seen < self.limit:
                left = started + GATHER_S - time.monotonic()
                if left <= 0:
                    break
                self._arrived.wait(min(QUIET_S, left))
                if len(self._queued) == seen:  # quiet: nobody else is on the way
                    break
                seen = len(self._queued)
            batch, self._queued = self._queued[: self.limit], self._queued[self.limit :]
        return batch

    def _run(self, batch: list[Waiting]) -> None:
        now = time.monotonic()
        late = [w for w in batch if w.deadline <= now]
        ready = [w for w in batch if w.deadline > now]
        for waiting in late:  # its time ran out in the queue: no generation for it
            waiting.error = TimeoutError("its time ran out while it waited for the model")
            waiting.finished_at = now
            waiting.done.set()
        if not ready:
            return
        try:
            replies = self._generate(ready)
        except BaseException as exc:  # every member's turn raised it
            for waiting in ready:
                waiting.error = exc
        else:
            for waiting, tokens in zip(ready, replies, strict=True):
                waiting.tokens = tokens
        finally:
            ended = time.monotonic()
            self.batches += 1
            self.turns += len(ready)
            for waiting in ready:
                waiting.finished_at = ended
                waiting.done.set()
