"""Per model (or policy) figures of a run, and each pair's paired comparison (controller).

With several ``--openenv-model`` / ``--openenv-policy`` (or a marker's ``models=`` /
``policies=``) every arm plays the same seeds. Each report is counted under its arm
(the model, or the policy without one: ``brief["arm"]``) with its outcome, reward,
tokens, cost and time, and its pass/reward is kept by (test, seed, repeat), the key
on which two arms' episodes are paired (``report/paired.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from .paired import Outcome, compare_pair
from .passk import PassKTally
from .stats import RunningMean, wilson_interval

#: what pairs two arms' episodes: (test function, seed, repeat)
PairKey = tuple[str, int, int]


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


@dataclass
class ArmTally:
    name: str
    policy: str | None = None
    model: str | None = None
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

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.errored

    def figures(self, confidence: float = 0.95, priced: bool = False) -> dict[str, Any]:
        low, high = wilson_interval(self.passed, self.ran, confidence)
        return {
            "name": self.name,
            "policy": self.policy,
            "model": self.model,
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
    """Every arm's tally, in the order the run named them (then as first seen)."""

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
        #: by the arm's id part in node ids (``arm_part``)
        self.by_part: dict[str, ArmTally] = {}
        self.cost_usd = 0.0

    @property
    def arms(self) -> dict[str, ArmTally]:
        """Each arm by its name (the model, or the policy without one)."""
        return {tally.name: tally for tally in self.by_part.values()}

    def arm(self, nodeid: str, name: str, seen: dict[str, Any] | None = None) -> ArmTally:
        part = arm_part(nodeid, self.id_prefix)
        tally = self.by_part.get(part)
        if tally is None:
            tally = self.by_part[part] = ArmTally(name, passk=PassKTally(self.repeats))
        if seen:
            tally.policy = tally.policy or seen.get("policy")
            tally.model = tally.model or seen.get("model")
        return tally

    @property
    def several(self) -> bool:
        return len(self.by_part) > 1

    def ordered(self) -> list[ArmTally]:
        rank = {name: i for i, name in enumerate(self.declared)}
        first_seen = {tally.name: i for i, tally in enumerate(self.by_part.values())}
        return sorted(
            self.by_part.values(),
            key=lambda t: (rank.get(t.name, len(rank)), first_seen[t.name]),
        )

    def count(self, report: pytest.TestReport, brief: dict[str, Any] | None) -> None:
        """One episode report (not a resumed pass: ``count_earlier``)."""
        if brief is None or not brief.get("arm"):
            return
        tally = self.arm(report.nodeid, str(brief["arm"]), brief)
        key = pair_key(report.nodeid, brief.get("seed"), brief.get("repeat"))
        outcome: Outcome | None = None
        if report.when == "setup" and report.skipped:
            tally.skipped += 1
        elif report.when == "call":
            passed = bool(report.passed)
            tally.passed += passed
            tally.failed += not passed
            reward = float(brief["reward"])
            tally.reward.add(reward)
            outcome = (passed, reward)
        elif report.failed and report.when != "teardown":
            tally.errored += 1  # setup error, or the crash report of a worker that died
            outcome = (False, None)
        else:
            return
        self.spend(tally, brief)
        if outcome is not None:
            if tally.passk is not None:
                tally.passk.add(report.nodeid, outcome[0])
            if key is not None:
                tally.outcomes[key] = outcome

    def spend(self, tally: ArmTally, brief: dict[str, Any]) -> None:
        prompt = int(brief.get("prompt_tokens") or 0)
        completion = int(brief.get("completion_tokens") or 0)
        tally.prompt_tokens += prompt
        tally.completion_tokens += completion
        tally.episode_seconds += float(brief.get("wall_time_s") or 0.0)
        cost = brief.get("cost_usd")
        if isinstance(cost, (int, float)):
            tally.cost_usd += float(cost)
            self.cost_usd += float(cost)
        elif prompt or completion:
            tally.unpriced += 1

    def count_earlier(self, nodeid: str, earlier: dict[str, Any], outcome: str = "passed") -> None:
        """--openenv-resume: an episode of the earlier run, skipped now (or not reached);
        ``outcome``: passed, failed or errored, as its row says."""
        name = earlier.get("model") or earlier.get("policy")
        if not name:
            return
        tally = self.arm(nodeid, str(name), earlier)
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

    def comparisons(self, confidence: float = 0.95) -> list[dict[str, Any]]:
        """Each pair, in the order named: the first against the second, ..."""
        arms = self.ordered()
        return [
            compare_pair(a.name, b.name, a.outcomes, b.outcomes, confidence)
            for i, a in enumerate(arms)
            for b in arms[i + 1 :]
        ]

    def to_json(self, confidence: float = 0.95) -> dict[str, Any] | None:
        """summary.json's ``models`` and ``comparisons``; None with one arm."""
        if not self.several:
            return None
        return {"models": self.figures(), "comparisons": self.comparisons(confidence)}
