"""Per-run counts and running figures, fed one episode report at a time (controller)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .stats import RunningMean, wilson_interval


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    errored: int = 0
    skipped: int = 0
    #: --openenv-resume: passing episodes of the earlier run, counted in ``passed`` (their
    #: rows are the dataset too), with their reward and turns; tokens stay this run's spend
    resumed: int = 0
    #: pytest-rerunfailures: episodes whose first attempt was re-run, and of those the ones
    #: a later attempt passed. Each episode counts by its first attempt (see accounts.py).
    rerun: int = 0
    passed_on_rerun: int = 0
    #: --openenv-resume: failed or errored episodes of the earlier run this run did not play
    #: again (deselected, past a smaller n), counted in ``failed``/``errored`` (a
    #: verdict-failed one in ``passed``, as its test was): the folder's failures.jsonl holds
    #: them, so the figures describe the whole dataset there
    earlier_failures: int = 0
    #: episodes the env's verdict passed (at the run's threshold); errored ones never do
    verdict_passed: int = 0
    #: test passed, verdict failed: with --openenv-train-on=verdict they are failures.jsonl's
    test_passed_verdict_failed: int = 0
    #: test failed, verdict passed (a negative test, or a stricter test body)
    test_failed_verdict_passed: int = 0
    #: rows of results.jsonl, the training split (earlier runs' included)
    train_rows: int = 0
    #: the most attempts any counted episode took: 1, unless --openenv-resume-failed played
    #: failed episodes again (the figures are then best of that many attempts)
    attempts: int = 1
    reward: RunningMean = field(default_factory=RunningMean)
    turns: RunningMean = field(default_factory=RunningMean)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: --openenv-replay: every answer came from the response cache, so the tokens above
    #: were replayed, not spent
    replayed: bool = False
    #: the run's wall time spans ``started`` (the session's start, after the pre-run
    #: checks) to the last episode report; the end-of-run writing is not the run's
    started: float = field(default_factory=time.monotonic)
    #: when the first episode report came, and how many episodes it made: the throughput
    #: is measured from there, past the workers' start-up
    first_report_at: float | None = None
    first_report_count: int = 0
    last_report_at: float | None = None
    #: when the session finished (the run's end when no episode report ever came)
    stopped_at: float | None = None
    envs: set[str] = field(default_factory=set)
    policies: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.errored

    @property
    def played(self) -> int:
        """Episodes this run played itself (not counted from the folder's earlier rows)."""
        return self.ran - self.resumed - self.earlier_failures

    @property
    def total(self) -> int:
        return self.ran + self.skipped

    def episode_reported(self, now: float | None = None) -> None:
        """An episode's report was counted: the run's wall time reaches this far."""
        now = time.monotonic() if now is None else now
        if self.first_report_at is None:
            self.first_report_at, self.first_report_count = now, self.total
        self.last_report_at = now

    def stop(self, now: float | None = None) -> None:
        """The session finished: what comes after (files, report, Hub) is not the run's."""
        if self.stopped_at is None:
            self.stopped_at = time.monotonic() if now is None else now

    def wall_time(self, now: float | None = None) -> float:
        """Seconds from the session's start to the last episode report (to the session's
        end if none came; to ``now`` while the run goes on and no report came yet)."""
        end = self.last_report_at if self.last_report_at is not None else self.stopped_at
        if end is None:
            end = time.monotonic() if now is None else now
        return max(0.0, end - self.started)

    def add_outcome(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)

    def count_verdict(self, test_passed: bool, verdict: bool) -> None:
        """An episode whose test was judged: the env's verdict beside the test's outcome."""
        self.verdict_passed += int(verdict)
        self.test_passed_verdict_failed += int(test_passed and not verdict)
        self.test_failed_verdict_passed += int(verdict and not test_passed)

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
