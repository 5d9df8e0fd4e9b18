"""pass@1, unbiased pass@k and pass^k over repeated seeds (controller only).

Each seed of an episode test is one *problem*; ``--openenv-repeats K`` samples
it K times. Per problem we keep only ``(n, c)``: runs and passes, so memory grows
with the number of distinct seeds, never with transcripts.

- pass@1: mean over problems of c / n.
- pass@k: mean over problems of the unbiased estimator 1 - C(n-c, k) / C(n, k)
  (Chen et al., 2021, "Evaluating Large Language Models Trained on Code"):
  the chance that at least one of k samples drawn without replacement passes.
- pass^k: mean over problems of C(c, k) / C(n, k): the chance that all k pass
  (with n == k: the share of problems whose every run passed).

Problems with fewer than k runs (a resumed or interrupted run) are left out of
pass@k and pass^k rather than guessed at; ``problems_scored`` says how many count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from math import comb
from typing import Any

from .ledger import Entry

#: ``...[ep-000003-r1]`` -> ``...[ep-000003]``: the repeat suffix names a sample, not a problem.
_REPEAT_SUFFIX = re.compile(r"(ep-\d{6})-r\d+(?=(?:-.*)?\]$)")


def problem_key(nodeid: str) -> str:
    """The seed an episode item samples: its node id without the ``-rN`` repeat suffix."""
    # most runs draw one sample per seed: no repeat suffix to look for
    return _REPEAT_SUFFIX.sub(r"\1", nodeid) if "-r" in nodeid else nodeid


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with n samples of which c passed."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k for one problem: the chance that k samples all pass."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")


@dataclass(frozen=True)
class PassAtK:
    k: int
    problems: int
    problems_scored: int
    pass_at_1: float | None
    pass_at_k: float | None
    pass_hat_k: float | None

    def metric(self, name: str) -> float | None:
        return {"pass@1": self.pass_at_1, "pass@k": self.pass_at_k, "pass^k": self.pass_hat_k}[name]

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "problems": self.problems,
            "problems_scored": self.problems_scored,
            "pass@1": self.pass_at_1,
            "pass@k": self.pass_at_k,
            "pass^k": self.pass_hat_k,
        }


class PassKTally:
    """Per-problem (runs, passes): one finished or errored episode at a time, or ``of`` the
    ledger's entries."""

    def __init__(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = k
        self._counts: dict[str, list[int]] = {}

    def add(self, nodeid: str, passed: bool) -> None:
        counts = self._counts.setdefault(problem_key(nodeid), [0, 0])
        counts[0] += 1
        counts[1] += int(passed)

    @classmethod
    def of(cls, entries: Iterable[Entry], k: int) -> PassKTally:
        """Every entry that ran (passed, failed or errored) is one sample of its seed."""
        tally = cls(k)
        for entry in entries:
            if entry.ran:
                tally.add(entry.nodeid, entry.outcome == "passed")
        return tally

    def absorb(self, other: PassKTally) -> None:
        """Add another tally's problems (a problem in both adds its runs and passes)."""
        for key, (runs, passes) in other._counts.items():
            counts = self._counts.setdefault(key, [0, 0])
            counts[0] += runs
            counts[1] += passes

    def result(self) -> PassAtK:
        k = self.k
        counts = list(self._counts.values())
        scored = [(n, c) for n, c in counts if n >= k]
        return PassAtK(
            k=k,
            problems=len(counts),
            problems_scored=len(scored),
            pass_at_1=_mean([c / n for n, c in counts]),
            pass_at_k=_mean([pass_at_k(n, c, k) for n, c in scored]),
            pass_hat_k=_mean([pass_hat_k(n, c, k) for n, c in scored]),
        )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
