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

__all__ = [
    "BASIS_UNFINISHED",
    "GUESS_NOTE",
    "JUDGE_AT",
    "Decision",
    "PassRule",
    "decide",
    "is_outcome_value",
    "shown_reward",
    "stated_outcome",
]

PASS, FAIL, UNFINISHED = "pass", "fail", "unfinished"

#: what decided a verdict (``Decision.basis``): the env's own word, or a rule of ours
BASIS_SUCCESS_FIELD = "success-field"
BASIS_OUTCOME_FIELD = "outcome-field"
BASIS_LAST_STEP = "last-step-reward"
BASIS_TOTAL = "total-reward"
BASIS_MIN_REWARD = "min-reward"
#: no verdict was reached: the env never ended the episode (and the rule does not judge one
#: the turn limit ends), so it is unfinished, which never passes
BASIS_UNFINISHED = "unfinished"
#: the rule of an unfinished episode, in words (the same for every such episode: the rows'
#: rules are grouped by it in the summary and card)
UNFINISHED_RULE = (
    "none: the env did not end the episode, so it is unfinished and does not pass "
    "(--openenv-judge-at=turn-limit judges one the turn limit ends on its reward)"
)
#: the bases that are the env's own verdict (the others are thresholds)
ENV_BASES = (BASIS_SUCCESS_FIELD, BASIS_OUTCOME_FIELD)
#: what a verdict by a threshold the plugin guessed says of itself
GUESS_NOTE = "a threshold the plugin guessed, not the env's verifier; --openenv-min-reward sets it"

#: the words an outcome field (``status``, ``result``...) uses, by what they mean
WIN_WORDS = frozenset(
    {"win", "won", "winner", "success", "succeeded", "solved", "victory", "passed", "correct"}
)
LOSS_WORDS = frozenset(
    {"lose", "lost", "loss", "fail", "failed", "failure", "defeat", "incorrect", "dead"}
)
DRAW_WORDS = frozenset({"draw", "drawn", "tie", "stalemate"})
#: the words an outcome field uses while the game is still on (its outcome comes later in
#: the same field: a maze's ``status: "playing"``, a PGN result ``*``); not ``ready`` or
#: ``running``, which say the service is up, not how a game stands
PENDING_WORDS = frozenset(
    {"playing", "in_progress", "in progress", "in-progress", "ongoing", "undecided", "*"}
)
#: a chess-style result, by the side that scored: ``1-0`` white won
RESULT_SCORES = {"1-0": "white", "0-1": "black", "1/2-1/2": "draw"}
#: fields that say which side the agent plays (``white``/``black``, or a player number)
SIDE_FIELDS = ("agent_color", "agent_side", "player_color", "agent_player")
SIDE_NAMES = {"0": "white", "1": "black", "white": "white", "black": "black"}


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
    #: observation, metadata or state fields in which the env states the outcome in words
    #: (``status: "win"``, ``result: "1-0"``): where one says win, loss or draw, it decides
    outcome_fields: tuple[str, ...] = ()
    #: where earlier steps scored too (step penalties, shaping), a done episode is judged
    #: on its last step's reward, not the total
    last_step_when_shaped: bool = False
    #: the reward threshold is the plugin's guess at the env's pass mark, not the env's own
    guessed: bool = False
    #: ``--openenv-min-reward`` (or the marker's ``min_reward``) set the threshold
    set_by_run: bool = False

    def holds(self, reward: float) -> bool:
        return reward > self.min_reward if self.above else reward >= self.min_reward

    def threshold_text(self) -> str:
        """``reward >= 1`` or ``reward > 0``."""
        return f"reward {'>' if self.above else '>='} {self.min_reward:g}"

    def describe(self) -> str:
        """The whole rule in words (summaries, ``explain``, docs)."""
        text = self.threshold_text()
        if self.last_step_when_shaped:
            text = f"the last step's {text} where earlier steps scored too, else the total's"
        if self.guessed:
            text += " (a threshold the plugin guessed; --openenv-min-reward sets the env's own)"
        stated = [*self.success_fields, *self.outcome_fields]
        if stated:
            fields = " / ".join(stated)
            text = f"the outcome the server states ({fields}) where it states one, else {text}"
        if self.at_turn_limit:
            text += ", judged at the turn limit when the env never says done"
        return text

    def overridden(self, *, min_reward: float | None, judge_at: str | None) -> PassRule:
        """This rule with a run's or a marker's overrides: a ``min_reward`` replaces the whole
        reward test (reward >= it, the env's success fields ignored); ``judge_at`` says when
        an episode is judged."""
        rule = self
        if min_reward is not None:
            rule = replace(
                rule,
                min_reward=float(min_reward),
                above=False,
                success_fields=(),
                outcome_fields=(),
                last_step_when_shaped=False,
                guessed=False,
                set_by_run=True,
            )
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


def _side(sources: tuple[dict[str, Any], ...]) -> str | None:
    for name in SIDE_FIELDS:
        for source in sources:
            value = source.get(name)
            if value is not None and not isinstance(value, bool):
                side = SIDE_NAMES.get(str(value).strip().lower())
                if side:
                    return side
    return None


def stated_outcome(
    fields: tuple[str, ...], sources: tuple[tuple[str, dict[str, Any]], ...]
) -> tuple[str, str, str] | None:
    """The outcome a server states in words: (where, value, ``win``/``loss``/``draw``).

    ``sources`` are (name, fields) pairs (``observation``, ``metadata``, ``state``);
    ``where`` is ``metadata.status``. A chess-style result (``1-0``) says who won only
    with the agent's side (``agent_color`` or ``agent_player`` in a source); a ``winner``
    field names the agent's side, ``agent`` or ``opponent``.
    """
    side = _side(tuple(fields_ for _, fields_ in sources))
    for name in fields:
        for where, source in sources:
            value = source.get(name)
            if not isinstance(value, str) or not value.strip():
                continue
            word = value.strip().lower()
            meaning = None
            if word in WIN_WORDS:
                meaning = "win"
            elif word in LOSS_WORDS:
                meaning = "loss"
            elif word in DRAW_WORDS or RESULT_SCORES.get(word) == "draw":
                meaning = "draw"
            elif word in RESULT_SCORES and side is not None:
                meaning = "win" if RESULT_SCORES[word] == side else "loss"
            elif name == "winner":
                if word in ("agent", "you", "player"):
                    meaning = "win"
                elif word in ("opponent", "env", "house"):
                    meaning = "loss"
                elif side is not None and SIDE_NAMES.get(word):
                    meaning = "win" if SIDE_NAMES[word] == side else "loss"
            if meaning is not None:
                return f"{where}.{name}", value, meaning
    return None


def is_outcome_value(value: Any) -> bool:
    """``value`` is what an outcome field holds: a win, loss or draw word, a chess-style
    result, a word of a game still on (``playing``), a flag or a number (a winner's
    number); not a service's status (``ready``)."""
    if isinstance(value, (bool, int, float)):
        return True
    if not isinstance(value, str):
        return False
    word = value.strip().lower()
    return word in WIN_WORDS | LOSS_WORDS | DRAW_WORDS | PENDING_WORDS or word in RESULT_SCORES


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
    #: what decided (``BASIS_*``) and that rule in words (``basis_text``)
    basis: str = BASIS_TOTAL
    basis_text: str = ""

    @property
    def guessed(self) -> bool:
        """The verdict is a threshold the plugin guessed, not the env's own."""
        return self.rule.guessed and self.basis not in (*ENV_BASES, BASIS_UNFINISHED)

    def rule_text(self) -> str:
        """What decided, in words, saying so when it is a guess (rows' ``verdict_rule``)."""
        return f"{self.basis_text} ({GUESS_NOTE})" if self.guessed else self.basis_text

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def reward_text(self) -> str:
        return shown_reward(self.reward, self.rule.min_reward)

    def needs(self) -> str:
        """``pass needs reward >= 1`` (what the rule asks, in the terms that decided)."""
        if self.decided_by is not None:
            return f"pass needs {self.decided_by[0]}=true"
        if self.basis == BASIS_OUTCOME_FIELD:
            return "pass needs the server to state a win"
        if self.basis == BASIS_LAST_STEP:
            return f"pass needs the last step's {self.rule.threshold_text()}"
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
    state: dict[str, Any] | None = None,
    last_reward: float | None = None,
    shaped: bool = False,
    default_turns: str | None = None,
) -> Decision:
    """The one verdict on an episode.

    ``label(reward, done, status)`` is the family's word for it (``Verdict.outcome``);
    ``stopped``: why the episode ended before the env said done, when not for lack of
    turns (the model's context is full); ``turn_limit``: the ``--openenv-max-turns`` the
    episode had; ``mistakes``: the agent's tool errors, for an unfinished episode's reason;
    ``state``: the env's state after the last step (an outcome it states there);
    ``last_reward``: the last step's reward, and ``shaped``: an earlier step scored too;
    ``default_turns``: whose default ``turn_limit`` is, when no option set it.
    """
    detail = f" ({mistakes})" if mistakes else ""
    if not done and (stopped or not rule.at_turn_limit):
        if stopped:
            why = f"{stopped}{detail}"
        elif default_turns:
            why = (
                f"ran out of turns: the episode did not end within {default_turns} of "
                f"{turn_limit} turns{detail}; --openenv-max-turns sets more"
            )
        else:
            why = (
                f"ran out of turns: the episode did not end within --openenv-max-turns="
                f"{turn_limit}{detail}"
            )
        return Decision(
            UNFINISHED,
            label(reward, done, UNFINISHED),
            rule,
            reward,
            why,
            basis=BASIS_UNFINISHED,
            basis_text=UNFINISHED_RULE,
        )
    observation, metadata = observation or {}, metadata or {}
    found = success_field(rule, observation, metadata)
    stated = None
    if found is None and rule.outcome_fields:
        sources = (("observation", observation), ("metadata", metadata), ("state", state or {}))
        stated = stated_outcome(rule.outcome_fields, sources)
    on_last = (
        found is None
        and stated is None
        and rule.last_step_when_shaped
        and shaped
        and done
        and last_reward is not None
    )
    judged = last_reward if on_last and last_reward is not None else reward
    if found is not None:
        passed, basis, basis_text = found[1], BASIS_SUCCESS_FIELD, f"the server's {found[0]}"
    elif stated is not None:
        passed, basis = stated[2] == "win", BASIS_OUTCOME_FIELD
        basis_text = f"the server's {stated[0]}={stated[1]!r} ({stated[2]})"
    else:
        passed = rule.holds(judged)
        basis = BASIS_MIN_REWARD if rule.set_by_run else BASIS_LAST_STEP if on_last else BASIS_TOTAL
        basis_text = (
            f"the last step's {rule.threshold_text()} (earlier steps scored too)"
            if on_last
            else f"total {rule.threshold_text()}"
        )
        if rule.set_by_run:
            basis_text += " (--openenv-min-reward)"
    word = label(reward, done, PASS if passed else FAIL)
    if passed:
        return Decision(PASS, word, rule, reward, None, found, basis, basis_text)
    shown = shown_reward(reward, rule.min_reward)
    lead = f"{word}: "
    if found is not None:
        why = f"{lead}the server's {found[0]} is false (reward {shown})"
    elif stated is not None:
        why = f"{lead}the server states {stated[0]}={stated[1]!r} ({stated[2]}; reward {shown})"
    elif on_last:
        last = shown_reward(judged, rule.min_reward)
        why = (
            f"{lead}the last step's reward {last} is below the pass threshold "
            f"{rule.min_reward:g} (total {shown}; earlier steps scored too)"
        )
    elif rule.above:
        why = f"{lead}reward {shown} is not above {rule.min_reward:g}"
    else:
        why = f"{lead}reward {shown} is below the pass threshold {rule.min_reward:g}"
    if not done:
        why += f" when the turn limit ({turn_limit}) ended it"
    if basis not in ENV_BASES and rule.guessed:
        why += f" ({GUESS_NOTE})"
    return Decision(FAIL, word, rule, reward, why, found, basis, basis_text)
