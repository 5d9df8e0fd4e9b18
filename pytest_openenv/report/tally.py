"""The run's figures: a view of the ledger (``report/ledger.py``), and the run's clock."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields

from .ledger import Counts, Ledger
from .stats import wilson_interval

#: the fields of ``Counts`` (what ``Tally.live`` copies from the running totals)
COUNT_FIELDS = tuple(spec.name for spec in fields(Counts))


def clock_fields(clock: RunClock) -> dict[str, float | int | None]:
    return {spec.name: getattr(clock, spec.name) for spec in fields(RunClock)}


@dataclass
class RunClock:
    """When the run started, when episodes were counted, when it stopped.

    The run's wall time spans ``started`` (the session's start, after the pre-run checks)
    to the last episode counted; the end-of-run writing is not the run's."""

    started: float = field(default_factory=time.monotonic)
    #: when the first episode was counted, and how many the ledger counted then: the
    #: throughput is measured from there, past the workers' start-up
    first_report_at: float | None = None
    first_report_count: int = 0
    last_report_at: float | None = None
    #: when the session finished (the run's end when no episode report ever came)
    stopped_at: float | None = None

    def episode_reported(self, total: int, now: float | None = None) -> None:
        """An episode was counted (``total`` so far): the run's wall time reaches this far."""
        now = time.monotonic() if now is None else now
        if self.first_report_at is None:
            self.first_report_at, self.first_report_count = now, total
        self.last_report_at = now

    def stop(self, now: float | None = None) -> None:
        """The session finished: what comes after (files, report, Hub) is not the run's."""
        if self.stopped_at is None:
            self.stopped_at = time.monotonic() if now is None else now


@dataclass
class Tally(Counts):
    """The run's figures: the ledger's counted entries folded (``Counts``), with when the
    run's episodes came and what their rows name."""

    #: the most attempts any counted episode took: 1, unless --openenv-resume-failed played
    #: failed episodes again (the figures are then best of that many attempts)
    attempts: int = 1
    #: --openenv-replay: every answer came from the response cache, so the tokens above
    #: were replayed, not spent
    replayed: bool = False
    started: float = field(default_factory=time.monotonic)
    first_report_at: float | None = None
    first_report_count: int = 0
    last_report_at: float | None = None
    stopped_at: float | None = None
    envs: set[str] = field(default_factory=set)
    policies: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)

    @classmethod
    def of_ledger(cls, ledger: Ledger, clock: RunClock, *, replayed: bool = False) -> Tally:
        """The run's figures over every counted entry of ``ledger``."""
        tally = cls(replayed=replayed, **clock_fields(clock))
        for entry in ledger.counted():
            tally.add(entry)
            tally.attempts = max(tally.attempts, entry.attempt)
            if entry.env:
                tally.envs.add(entry.env)
            if entry.policy:
                tally.policies.add(entry.policy)
            if entry.model:
                tally.models.add(entry.model)
        return tally

    @classmethod
    def live(cls, totals: Counts, clock: RunClock, *, replayed: bool = False) -> Tally:
        """The figures the live line reads, from the ledger's running totals (no fold)."""
        tally = cls(replayed=replayed, **clock_fields(clock))
        for name in COUNT_FIELDS:
            setattr(tally, name, getattr(totals, name))
        return tally

    @property
    def played(self) -> int:
        """Episodes this run played itself (not counted from the folder's earlier rows)."""
        return self.ran - self.resumed - self.earlier_failures

    def wall_time(self, now: float | None = None) -> float:
        """Seconds from the session's start to the last episode report (to the session's
        end if none came; to ``now`` while the run goes on and no report came yet)."""
        end = self.last_report_at if self.last_report_at is not None else self.stopped_at
        if end is None:
            end = time.monotonic() if now is None else now
        return max(0.0, end - self.started)

    def token_spend(self) -> dict[str, int]:
        """What the tokens cost: spent, or (``--openenv-replay``) replayed from the cache."""
        tokens = self.prompt_tokens + self.completion_tokens
        if not self.replayed:
            return {"tokens_spent": tokens}
        return {
            "tokens_spent": 0,
            "replayed_prompt_tokens": self.prompt_tokens,
            "replayed_completion_tokens": self.completion_tokens,
        }

    def figures(self, confidence: float = 0.95) -> dict[str, object]:
        elapsed = self.wall_time()
        low, high = wilson_interval(self.passed, self.ran, confidence)
        return {
            "episodes": self.total,
            "ran": self.ran,
            "passed": self.passed,
            "failed": self.failed,
            "errored": self.errored,
            "skipped": self.skipped,
            "resumed": self.resumed,
            "rerun": self.rerun,
            "passed_on_rerun": self.passed_on_rerun,
            "earlier_failures": self.earlier_failures,
            "attempts": self.attempts,
            "played": self.played,
            "pass_rate": (self.passed / self.ran) if self.ran else None,
            # ``passed`` and ``pass_rate`` count test outcomes; these, the env's verdicts
            "verdict_passed": self.verdict_passed,
            "verdict_pass_rate": (self.verdict_passed / self.ran) if self.ran else None,
            "test_passed_verdict_failed": self.test_passed_verdict_failed,
            "test_failed_verdict_passed": self.test_failed_verdict_passed,
            "train_rows": self.train_rows,
            "pass_rate_ci95": [low, high],
            "mean_reward": self.reward.mean,
            "mean_reward_stderr": self.reward.stderr,
            "mean_turns": self.turns.mean,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            **self.token_spend(),
            # from the session's start to the last episode report, over the episodes this
            # run played (an earlier run's rows are not this run's speed)
            "wall_time_s": round(elapsed, 3),
            "episodes_per_s": round(self.played / elapsed, 3)
            if elapsed > 0 and self.played
            else None,
            "envs": sorted(self.envs),
            "policies": sorted(self.policies),
            "models": sorted(self.models),
        }
