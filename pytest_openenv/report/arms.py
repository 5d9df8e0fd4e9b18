"""Per group figures of a run, per model (or policy), and each pair's paired comparison.

A *group* is (test function, env, arm): the episodes of one test function played on one
env by one model (or policy, without a model). Every figure the run reports is kept per
group, so three tests in one file, or two models on the same seeds, are never one pooled
pass rate. With several ``--openenv-model`` / ``--openenv-policy`` (or a marker's
``models=`` / ``policies=``) every arm plays the same seeds: each report is counted in
its group with its outcome, reward, tokens, cost and time, and its pass/reward is kept
by (test, seed, repeat), the key on which two arms' episodes are paired
(``report/paired.py``); an arm's figures are its groups merged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..episode.outcome import EpisodeOutcome, agent_of
from ..policies.arms import arm_name
from .paired import Outcome, compare_pair
from .passk import PassKTally
from .stats import RunningMean, wilson_interval

#: what pairs two arms' episodes: (test function, seed, repeat)
PairKey = tuple[str, int, int]
#: what a group is: (test function, env, arm id part)
GroupKey = tuple[str, str, str]


#: ``ep-000000`` or ``ep-000000-r0`` at the end of a node id's parameter
_EPISODE_AT_END = re.compile(r"ep-\d{6}(?:-r\d+)?\]$")


def arm_part(nodeid: str, prefix: str | None = None) -> str:
    """The arm's id part in a node id: ``test[P-M-ep-000003]`` gives ``M``; "" with one arm.

    The same for an episode that played, errored, crashed or was resumed, whatever its
    row says of its policy (a conftest policy may report its own name)."""
    match = _EPISODE_AT_END.search(nodeid)
    if match is None:
        return ""
    head = nodeid[: match.start()].rpartition("[")[2].removesuffix("-")
    if prefix and (head == prefix or head.startswith(prefix + "-")):
        head = head[len(prefix) :].removeprefix("-")
    return head


def pair_key(nodeid: str, seed: Any, repeat: Any) -> PairKey | None:
    try:
        return (nodeid.rpartition("[")[0], int(seed), int(repeat or 0))
    except (TypeError, ValueError):
        return None


def short_test(test: str) -> str:
    """``tests/evals/test_x.py::test_a`` -> ``test_x.py::test_a``: what a line has room for."""
    path, sep, function = test.rpartition("::")
    return path.rpartition("/")[2] + sep + function if sep else test


@dataclass
class ArmTally:
    """One group's tally (or, merged, one arm's over its groups)."""

    name: str
    policy: str | None = None
    model: str | None = None
    #: the agent program and its version (``codex 0.171.0``); None for our own loop
    agent: str | None = None
    #: the group's test function (node id without parameters) and env; "" when merged
    test: str = ""
    env: str = ""
    passed: int = 0
    failed: int = 0
    errored: int = 0
    skipped: int = 0
    resumed: int = 0
    reward: RunningMean = field(default_factory=RunningMean)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    #: episodes with tokens but no price (their model is not in --openenv-prices)
    unpriced: int = 0
    #: seconds the arm's episodes took, summed
    episode_seconds: float = 0.0
    outcomes: dict[PairKey, Outcome] = field(default_factory=dict)
    passk: PassKTally | None = None
    #: its names come from an episode that played (not only from skipped items' outcomes)
    named: bool = True

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.errored

    @property
    def label(self) -> str:
        """How lines name the group: ``test_x.py::test_a · openspiel:tic_tac_toe · expert``
        (``... · openai / gpt-4o-mini`` with a model)."""
        policy = f"agent:{self.agent}" if self.agent else self.policy
        played = f"{policy} / {self.model}" if policy and self.model else self.name
        return " · ".join(part for part in (short_test(self.test), self.env, played) if part)

    def absorb(self, other: ArmTally) -> None:
        """Add another group's figures to these (an arm's figures over its groups)."""
        for name in ("passed", "failed", "errored", "skipped", "resumed", "unpriced"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("prompt_tokens", "completion_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.cost_usd += other.cost_usd
        self.episode_seconds += other.episode_seconds
        self.reward.absorb(other.reward)
        self.outcomes.update(other.outcomes)
        if self.passk is not None and other.passk is not None:
            self.passk.absorb(other.passk)
        self.policy = self.policy or other.policy
        self.model = self.model or other.model
        self.agent = self.agent or other.agent

    def group_json(self, confidence: float = 0.95, priced: bool = False) -> dict[str, Any]:
        """summary.json's entry of ``groups``: the key fields, then the figures."""
        passk = self.passk.result().to_json() if self.passk is not None else None
        return {
            "test": self.test,
            "env": self.env,
            "policy": self.policy,
            "model": self.model,
            "agent": self.agent,
            "label": self.label,
            **self.figures(confidence, priced),
            "passk": passk,
        }

    def figures(self, confidence: float = 0.95, priced: bool = False) -> dict[str, Any]:
        low, high = wilson_interval(self.passed, self.ran, confidence)
        return {
            "name": self.name,
            "policy": self.policy,
            "model": self.model,
            "agent": self.agent,
            "ran": self.ran,
            "passed": self.passed,
            "failed": self.failed,
            "errored": self.errored,
            "skipped": self.skipped,
            "resumed": self.resumed,
            "pass_rate": self.passed / self.ran if self.ran else None,
            "pass_rate_ci95": [low, high],
            "mean_reward": self.reward.mean,
            "mean_reward_stderr": self.reward.stderr,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd if priced else None,
            "unpriced_episodes": self.unpriced,
            "episode_seconds": round(self.episode_seconds, 3),
        }


class ArmAccounts:
    """Every group's tally; arms (models or policies) in the order the run named them."""

    def __init__(
        self,
        declared: list[str],
        repeats: int = 1,
        *,
        priced: bool = False,
        id_prefix: str | None = None,
    ) -> None:
        self.declared = list(declared)
        self.repeats = repeats
        self.id_prefix = id_prefix
        #: a price table was given: costs are figures, not n/a
        self.priced = priced
        #: by (test function, env, the arm's id part in node ids: ``arm_part``)
        self.by_group: dict[GroupKey, ArmTally] = {}
        self.cost_usd = 0.0

    def _rank(self, name: str) -> int:
        return self.declared.index(name) if name in self.declared else len(self.declared)

    def groups(self) -> list[ArmTally]:
        """Every group: by test, env, then arm in the order named (the same on every run,
        whatever order xdist's reports arrived in)."""
        first_seen = {key: i for i, key in enumerate(self.by_group)}
        return [
            self.by_group[key]
            for key in sorted(
                self.by_group,
                key=lambda k: (k[0], k[1], self._rank(self.by_group[k].name), first_seen[k]),
            )
        ]

    @property
    def several_groups(self) -> bool:
        return len(self.by_group) > 1

    @property
    def arms(self) -> dict[str, ArmTally]:
        """Each arm by its name (the model, or the policy without one): its groups merged."""
        merged: dict[str, ArmTally] = {}
        for tally in self.by_group.values():
            arm = merged.get(tally.name)
            if arm is None:
                arm = merged[tally.name] = ArmTally(tally.name, passk=PassKTally(self.repeats))
            arm.absorb(tally)
        return merged

    def arm(
        self, nodeid: str, name: str, seen: dict[str, Any] | None = None, *, played: bool = True
    ) -> ArmTally:
        """The group of an episode: its test function, env and arm (by the arm's id part in
        the node id, as the row's policy name may be a conftest policy's own).

        ``played``: the report is of an episode that played (or an earlier run's row), so
        its names are the group's; a skipped item's outcome may name the run's default policy
        instead of the one its test would have used."""
        seen = seen or {}
        key = (
            nodeid.rpartition("[")[0] or nodeid,
            str(seen.get("env") or ""),
            arm_part(nodeid, self.id_prefix),
        )
        tally = self.by_group.get(key)
        if tally is None:
            tally = self.by_group[key] = ArmTally(
                name, test=key[0], env=key[1], passk=PassKTally(self.repeats)
            )
            tally.named = played
        elif played and not tally.named:
            tally.name, tally.policy, tally.model, tally.named = name, None, None, True
            tally.agent = None
        tally.policy = tally.policy or seen.get("policy")
        tally.model = tally.model or seen.get("model")
        tally.agent = tally.agent or seen.get("agent") or None
        return tally

    @property
    def several(self) -> bool:
        """Several arms (models or policies) played the same seeds: their table and paired
        tests show (three tests with a policy each are groups, not arms to compare)."""
        names = {tally.name for tally in self.by_group.values()}
        return len(names) == 2 or (len(names) > 2 and bool(self.comparisons()))

    def ordered(self) -> list[ArmTally]:
        arms = self.arms
        first_seen = {name: i for i, name in enumerate(arms)}
        return sorted(arms.values(), key=lambda t: (self._rank(t.name), first_seen[t.name]))

    def count(self, report: pytest.TestReport, outcome: EpisodeOutcome) -> None:
        """One episode report with its figures (not a resumed pass: ``count_earlier``)."""
        if not outcome.arm:
            return
        skipped = report.when == "setup" and report.skipped
        tally = self.arm(
            report.nodeid,
            outcome.arm,
            {
                "env": outcome.env,
                "policy": outcome.policy,
                "model": outcome.model,
                "agent": outcome.agent,
            },
            played=not skipped,
        )
        key = pair_key(report.nodeid, outcome.seed, outcome.repeat)
        result: Outcome | None = None
        if report.when == "setup" and report.skipped:
            tally.skipped += 1
        elif report.when == "call":
            passed = bool(report.passed)
            tally.passed += passed
            tally.failed += not passed
            reward = float(outcome.reward)
            tally.reward.add(reward)
            result = (passed, reward)
        elif report.failed and report.when != "teardown":
            tally.errored += 1  # setup error, or the crash report of a worker that died
            result = (False, None)
        else:
            return
        self.spend(tally, outcome)
        if result is not None:
            if tally.passk is not None:
                tally.passk.add(report.nodeid, result[0])
            if key is not None:
                tally.outcomes[key] = result

    def spend(self, tally: ArmTally, outcome: EpisodeOutcome) -> None:
        prompt, completion = outcome.prompt_tokens, outcome.completion_tokens
        tally.prompt_tokens += prompt
        tally.completion_tokens += completion
        tally.episode_seconds += outcome.wall_time_s or 0.0
        cost = outcome.cost_usd
        if isinstance(cost, (int, float)):
            tally.cost_usd += float(cost)
            self.cost_usd += float(cost)
        elif prompt or completion:
            tally.unpriced += 1

    def count_earlier(self, nodeid: str, earlier: dict[str, Any], outcome: str = "passed") -> None:
        """--openenv-resume: an episode of the earlier run, skipped now (or not reached);
        ``outcome``: passed, failed or errored, as its row says."""
        name = arm_name(str(earlier.get("policy") or ""), earlier.get("model"))
        if not name:
            return
        tally = self.arm(nodeid, name, {**earlier, "agent": agent_of(earlier)})
        passed = outcome == "passed"
        setattr(tally, outcome, getattr(tally, outcome) + 1)
        tally.resumed += passed
        reward = earlier.get("reward")
        reward = float(reward) if isinstance(reward, (int, float)) else None
        if reward is not None and outcome != "errored":
            tally.reward.add(reward)
        if tally.passk is not None:
            tally.passk.add(nodeid, passed)
        key = pair_key(nodeid, earlier.get("seed"), earlier.get("repeat"))
        if key is not None:
            tally.outcomes[key] = (passed, None if outcome == "errored" else reward)

    def figures(self, confidence: float = 0.95) -> list[dict[str, Any]]:
        return [tally.figures(confidence, self.priced) for tally in self.ordered()]

    def groups_json(self, confidence: float = 0.95) -> list[dict[str, Any]]:
        """summary.json's ``groups``: each group's key fields and figures."""
        return [tally.group_json(confidence, self.priced) for tally in self.groups()]

    def comparisons(self, confidence: float = 0.95) -> list[dict[str, Any]]:
        """Each pair, in the order named: the first against the second, ..."""
        arms = self.ordered()
        pairs = [
            compare_pair(a.name, b.name, a.outcomes, b.outcomes, confidence)
            for i, a in enumerate(arms)
            for b in arms[i + 1 :]
        ]
        if len(arms) <= 2:
            return pairs
        # arms of different tests share no episode: no pair of them to compare
        return [pair for pair in pairs if pair["paired_episodes"]]

    def to_json(self, confidence: float = 0.95) -> dict[str, Any] | None:
        """summary.json's ``models`` and ``comparisons``; None with one arm."""
        if not self.several:
            return None
        return {"models": self.figures(), "comparisons": self.comparisons(confidence)}
