"""The run's budget: ``--openenv-max-cost`` and ``--openenv-max-total-tokens`` (controller).

Spend is counted as episode reports arrive (this run's episodes; a resumed run's
earlier passes cost nothing now). Once it reaches a budget the run stops through
``RunStop`` (the one stop mechanism: under xdist the scheduler hands out nothing more
and takes queued items back); episodes already in flight finish and are recorded, so
the spend may pass the budget by what they use. The episodes that never started are
reported as skipped with the reason, and ``--openenv-resume`` runs them later.

A budget counts what endpoints report. An answer whose usage is missing (``usage:
null``) or unreadable (negative, not a number, past ``MAX_ANSWER_TOKENS``) spent tokens
no budget can see: the first one warns that the budget cannot be enforced (with
``--openenv-strict-budget`` it stops the run instead), and the summary says how many.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..config.settings import Settings


class RunBudget:
    def __init__(self, settings: Settings) -> None:
        budget = settings.budget
        self.max_cost = budget.max_cost
        self.max_tokens = budget.max_total_tokens
        self.episode_max_tokens = budget.episode_max_tokens
        self.prices = budget.prices
        #: why the run stopped, once a budget was reached
        self.stopped: str | None = None
        #: episodes that never started because of it (known at the end)
        self.not_started = 0
        self.strict = budget.strict
        #: model answers with no readable usage, and the episodes that had them
        self.unknown_answers = 0
        self.unknown_episodes = 0
        if self.max_cost is not None:
            self.check_priced(settings)

    def check_priced(self, settings: Settings) -> None:
        """A cost budget needs every named model's price: unpriced spend cannot be counted."""
        if self.prices is None:
            raise pytest.UsageError(
                f"--openenv-max-cost={self.max_cost:g} needs --openenv-prices FILE (a JSON "
                'object of USD per million tokens per model, e.g. {"gpt-4o-mini": '
                '{"input": 0.15, "output": 0.6}}): without prices no cost can be counted'
            )
        missing = [model for model in settings.llm.named_models if model not in self.prices]
        if missing:
            raise pytest.UsageError(
                f"--openenv-max-cost={self.max_cost:g}: --openenv-prices has no price for "
                f"{', '.join(map(repr, missing))} (it prices {', '.join(sorted(self.prices))}); "
                "add each model the run plays"
            )

    @property
    def active(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None

    def reached(self, tokens: int, cost: float) -> str | None:
        """The stop reason the first time the spend reaches a budget, else None."""
        if self.stopped is not None or not self.active:
            return None
        if self.max_tokens is not None and tokens >= self.max_tokens:
            self.stopped = (
                f"run budget reached: {tokens} tokens used, --openenv-max-total-tokens="
                f"{self.max_tokens}"
            )
        elif self.max_cost is not None and cost >= self.max_cost:
            self.stopped = (
                f"run budget reached: {cost:.4g} USD spent, --openenv-max-cost={self.max_cost:g}"
            )
        return self.stopped

    def unknown_usage(self, answers: int, where: str) -> str | None:
        """An episode's answers with no readable usage; the warning (or, strict, the stop
        reason) the first time a budget cannot count them, else None."""
        first = self.unknown_answers == 0
        self.unknown_answers += answers
        self.unknown_episodes += 1
        if not first or not self.active:
            return None
        what = " and ".join(self.budget_names())
        if self.strict and self.stopped is None:
            self.stopped = (
                f"{where} reported no readable usage (missing, negative or not a count), so "
                f"{what} cannot count its spend; --openenv-strict-budget stops the run"
            )
            return self.stopped
        return (
            f"{where} reported no readable usage (missing, negative or not a count): {what} "
            "cannot be enforced, as such answers count 0 tokens and cost nothing "
            "(--openenv-strict-budget stops the run instead)"
        )

    def budget_names(self) -> list[str]:
        names = []
        if self.max_tokens is not None:
            names.append(f"--openenv-max-total-tokens={self.max_tokens}")
        if self.max_cost is not None:
            names.append(f"--openenv-max-cost={self.max_cost:g}")
        return names

    def unenforced(self) -> str | None:
        """Why the budget was not enforced, if answers with no usage passed through it."""
        if not self.unknown_answers or not self.active:
            return None
        return (
            f"{self.unknown_answers} model answer(s) in {self.unknown_episodes} episode(s) "
            "reported no readable usage: the spent figures leave them out, so "
            f"{' and '.join(self.budget_names())} was not enforced on them"
        )

    def count_not_started(self, expected: int | None, reported: int) -> int:
        """At the end of a stopped run: the episodes that never started."""
        if self.stopped is None or expected is None:
            return 0
        self.not_started = max(0, expected - reported)
        return self.not_started

    def to_json(self, tokens: int, cost: float | None) -> dict[str, Any]:
        return {
            "max_cost_usd": self.max_cost,
            "max_total_tokens": self.max_tokens,
            "episode_max_tokens": self.episode_max_tokens,
            "spent_tokens": tokens,
            "spent_usd": cost,
            "stopped": self.stopped,
            "not_started": self.not_started,
            "answers_without_usage": self.unknown_answers,
            "unenforced": self.unenforced(),
        }

    def lines(self) -> list[str]:
        lines = []
        if self.stopped is not None:
            lines.append(
                f"stopped: {self.stopped}; {self.not_started} episode(s) not started, "
                "reported as skipped (--openenv-resume runs them)"
            )
        unenforced = self.unenforced()
        if unenforced is not None:
            lines.append(f"WARNING: budget not enforced: {unenforced}")
        elif self.unknown_answers:
            lines.append(
                f"tokens: {self.unknown_answers} model answer(s) reported no readable usage; "
                "the token figures leave them out"
            )
        return lines
