"""An episode's verdict: one decision (``decide``), and every text about it made from that.

The family says what a passing episode needs (``PassRule``, from ``Verdict.pass_rule``);
``--openenv-min-reward`` / ``--openenv-judge-at`` and the marker's ``min_reward`` /
``judge_at`` override it (``PassRule.overridden``). ``decide`` then reads what the episode
did (its total reward, whether the env said done, the last observation) and returns a
``Decision``: pass, fail or unfinished, the family's word for it, and why it did not pass.
The item status line, ``Episode.explain()``, ``extra.reason`` and ``verify_metrics`` are
all made from that one ``Decision``, so none can say another thing than the verdict.

Rewards are shown with ``shown_reward``: ``:g`` where that is exact enough, the full
``repr`` where ``:g`` would put the reward on the other side of the threshold (a sum of
0.9999999999999999 is not shown as 1 next to "below 1").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..config.convert import JUDGE_AT

__all__ = ["JUDGE_AT", "Decision", "PassRule", "decide", "shown_reward"]

PASS, FAIL, UNFINISHED = "pass", "fail", "unfinished"


def shown_reward(reward: float, threshold: float | None = None) -> str:
    """``reward`` for a reader: ``:g``, or its ``repr`` where ``:g`` would round it onto or
    across ``threshold`` (``0.9999999999999999`` next to a threshold of 1)."""
    text = f"{reward:g}"
    if threshold is None:
        return text
    rounded = float(text)
    if (rounded >= threshold) != (reward >= threshold) or (rounded > threshold) != (
        reward > threshold
    ):
        return repr(reward)
    return text


@dataclass(frozen=True)
class PassRule:
    """What a passing episode needs."""

    #: the reward a passing episode reaches (or, with ``above``, exceeds)
    min_reward: float = 0.0
    #: the reward must exceed ``min_reward``, not merely reach it
    above: bool = False
    #: observation (or metadata) fields of the env's own verdict: where the last observation
    #: carries one as true or false, it decides instead of the reward
    success_fields: tuple[str, ...] = ()
    #: the env has no terminal state: an episode the turn limit ends is judged like one the
    #: env ended (otherwise it is unfinished, never a pass)
    at_turn_limit: bool = False

    def holds(self, reward: float) -> bool:
        return reward > self.min_reward if self.above else reward >= self.min_reward

    def threshold_text(self) -> str:
        """``reward >= 1`` or ``reward > 0``."""
        return f"reward {'>' if self.above else '>='} {self.min_reward:g}"

    def describe(self) -> str:
        """The whole rule in words (summaries, ``explain``, docs)."""
        text = self.threshold_text()
        if self.success_fields:
            fields = " / ".join(self.success_fields)
            text = f"the server's {fields} where it sends one, else {text}"
        if self.at_turn_limit:
            text += ", judged at the turn limit when the env never says done"
        return text

    def overridden(self, *, min_reward: float | None, judge_at: str | None) -> PassRule:
        """This rule with a run's or a marker's overrides: a ``min_reward`` replaces the whole
        reward test (reward >= it, the env's success fields ignored); ``judge_at`` says when
        an episode is judged."""
        rule = self
        if min_reward is not None:
            rule = replace(rule, min_reward=float(min_reward), above=False, success_fields=())
        if judge_at is not None:
            rule = replace(rule, at_turn_limit=judge_at == "turn-limit")
        return rule


def success_field(rule: PassRule, observation: dict[str, Any], metadata: dict[str, Any]) -> Any:
    """The first of ``rule.success_fields`` the server sent as true or false: (name, value)."""
    for name in rule.success_fields:
        for source in (observation, metadata):
            value = source.get(name)
            if isinstance(value, bool):
                return name, value
    return None


@dataclass(frozen=True)
class Decision:
    """The verdict on one episode; every text about the episode's outcome is made from it."""

    #: ``pass``, ``fail`` or ``unfinished``
    status: str
    #: the family's word for what happened (``win``, ``draw``, ``correct``, ``pass``...)
    label: str
    rule: PassRule
    reward: float
    #: why it did not pass (None when it passed)
    reason: str | None = None
    #: the success field that decided and its value; None: the reward decided
    decided_by: tuple[str, bool] | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def reward_text(self) -> str:
        return shown_reward(self.reward, self.rule.min_reward)

    def needs(self) -> str:
        """``pass needs reward >= 1`` (what the rule asks, in the terms that decided)."""
        if self.decided_by is not None:
            return f"pass needs {self.decided_by[0]}=true"
        return f"pass needs {self.rule.threshold_text()}"

    def status_line(self, turns: int) -> str:
        """The item status line's detail: ``reward=1 turns=3 win``."""
        return f"reward={self.reward_text()} turns={turns} {self.label}"


def decide(
    rule: PassRule,
    *,
    reward: float,
    done: bool,
    label: Callable[[float, bool, str], str],
    observation: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    stopped: str | None = None,
    turn_limit: int | None = None,
    mistakes: str = "",
) -> Decision:
    """The one verdict on an episode.

    ``label(reward, done, status)`` is the family's word for it (``Verdict.outcome``);
    ``stopped``: why the episode ended before the env said done, when not for lack of
    turns (the model's context is full); ``turn_limit``: the ``--openenv-max-turns`` the
    episode had; ``mistakes``: the agent's tool errors, for an unfinished episode's reason.
    """
    detail = f" ({mistakes})" if mistakes else ""
    if not done and (stopped or not rule.at_turn_limit):
        if stopped:
            why = f"{stopped}{detail}"
        else:
            why = (
                f"ran out of turns: the episode did not end within --openenv-max-turns="
                f"{turn_limit}{detail}"
            )
        return Decision(UNFINISHED, label(reward, done, UNFINISHED), rule, reward, why)
    found = success_field(rule, observation or {}, metadata or {})
    passed = found[1] if found is not None else rule.holds(reward)
    word = label(reward, done, PASS if passed else FAIL)
    if passed:
        return Decision(PASS, word, rule, reward, None, found)
    shown = shown_reward(reward, rule.min_reward)
    if found is not None:
        why = f"{word}: the server's {found[0]} is false (reward {shown})"
    elif rule.above:
        why = f"{word}: reward {shown} is not above {rule.min_reward:g}"
    else:
        why = f"{word}: reward {shown} is below the pass threshold {rule.min_reward:g}"
    if not done:
        why += f" when the turn limit ({turn_limit}) ended it"
    return Decision(FAIL, word, rule, reward, why, found)
