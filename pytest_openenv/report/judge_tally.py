"""The judge's own figures (``--openenv-judge``), counted one episode at a time.

Apart from the episodes' figures on purpose: a judge that gave no verdict made its item
error, and ``judge_errors`` says how many of the errored episodes were the judge's doing;
its tokens and cost are its own (a run budget counts them with the policy's); and where the
env states its own verdict too, how often the judge agreed with it, with a Wilson interval.
Fed by the controller from each report's figures and by ``rescore`` from saved rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..util.format import interval, percent
from .stats import wilson_interval

if TYPE_CHECKING:
    from .ledger import Entry


@dataclass
class JudgeTally:
    #: episodes the judge was asked about (an answer or not; a resumed folder's earlier rows
    #: included, their tokens not: those were an earlier run's spend)
    asked: int = 0
    #: its verdicts, and the passing ones
    judged: int = 0
    judge_passed: int = 0
    #: asked, no verdict: each made its item error
    judge_errors: int = 0
    #: verdicts on episodes the env states its own verdict on, and those the two agree on
    compared: int = 0
    agreed: int = 0
    #: judge passed what the env failed, and failed what the env passed
    judge_only_passed: int = 0
    env_only_passed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    #: spend the price table had no price for
    unpriced: int = 0
    models: set[str] = field(default_factory=set)

    @classmethod
    def of_entries(cls, entries: Iterable[Entry]) -> JudgeTally:
        """The judge's figures over a ledger's counted entries."""
        tally = cls()
        for entry in entries:
            tally.add(entry.judge, spent=entry.judge_spent)
        return tally

    def add(self, figures: dict[str, Any] | None, *, spent: bool = True) -> None:
        """One episode's judge figures (``episode/outcome.judge_figures``); None: not judged.
        ``spent``: its tokens were spent by this run (not by an earlier one a resume counts)."""
        if not figures:
            return
        self.asked += 1
        if figures.get("model"):
            self.models.add(str(figures["model"]))
        if spent:
            self.count_spend(figures)
        passed = figures.get("passed")
        if passed is None:
            self.judge_errors += 1
            return
        self.judged += 1
        self.judge_passed += int(bool(passed))
        env = figures.get("env_passed")
        if isinstance(env, bool):
            self.compared += 1
            self.agreed += int(env == passed)
            self.judge_only_passed += int(passed and not env)
            self.env_only_passed += int(env and not passed)

    def count_spend(self, figures: dict[str, Any]) -> None:
        self.prompt_tokens += int(figures.get("prompt_tokens") or 0)
        self.completion_tokens += int(figures.get("completion_tokens") or 0)
        cost = figures.get("cost_usd")
        if isinstance(cost, (int, float)):
            self.cost_usd += float(cost)
        elif figures.get("prompt_tokens") or figures.get("completion_tokens"):
            self.unpriced += 1

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self, confidence: float = 0.95, *, priced: bool = False) -> dict[str, Any]:
        low, high = wilson_interval(self.agreed, self.compared, confidence)
        return {
            "models": sorted(self.models),
            "asked": self.asked,
            "judged": self.judged,
            "judge_passed": self.judge_passed,
            "judge_pass_rate": self.judge_passed / self.judged if self.judged else None,
            "judge_errors": self.judge_errors,
            # the judge's verdict against the env's own, where the env states one
            "agreement": {
                "compared": self.compared,
                "agreed": self.agreed,
                "rate": self.agreed / self.compared if self.compared else None,
                "ci": [low, high] if self.compared else None,
                "confidence": confidence,
                "judge_passed_env_failed": self.judge_only_passed,
                "judge_failed_env_passed": self.env_only_passed,
            },
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd if priced else None,
        }

    def lines(self, confidence: float = 0.95) -> list[str]:
        """The terminal summary's judge section."""
        if not self.asked:
            return []
        models = ", ".join(sorted(self.models)) or "?"
        lines = [
            f"judge {models}: {self.judged} verdict(s), {self.judge_passed} passed; "
            f"judge errors: {self.judge_errors} (their items errored, counted apart from "
            "failures)"
        ]
        if self.compared:
            low, high = wilson_interval(self.agreed, self.compared, confidence)
            lines.append(
                f"judge agrees with the env's own verdict: {percent(self.agreed / self.compared)}"
                f" ({self.agreed}/{self.compared}; {confidence:.0%} CI {interval(low, high)}); "
                f"judge passed / env failed: {self.judge_only_passed}, judge failed / env "
                f"passed: {self.env_only_passed}"
            )
        else:
            lines.append("judge agreement: the env stated no verdict of its own to compare")
        lines.append(
            f"judge tokens: {self.prompt_tokens} in / {self.completion_tokens} out "
            "(apart from the policy's; run budgets count both)"
        )
        return lines
