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
    started: float = field(default_factory=time.monotonic)
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

    def add_outcome(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)

    def count_verdict(self, test_passed: bool, verdict: bool) -> None:
        """An episode whose test was judged: the env's verdict beside the test's outcome."""
        self.verdict_passed += int(verdict)
        self.test_passed_verdict_failed += int(test_passed and not verdict)
        self.test_failed_verdict_passed += int(verdict and not test_passed)

    def figures(self, confidence: float = 0.95) -> dict[str, object]:
        elapsed = time.monotonic() - self.started
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
            "wall_time_s": round(elapsed, 3),
            "episodes_per_s": round(self.ran / elapsed, 3) if elapsed > 0 else None,
            "envs": sorted(self.envs),
            "policies": sorted(self.policies),
            "models": sorted(self.models),
        }
