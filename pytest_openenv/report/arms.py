"""Per group figures of a run, per model (or policy), and each pair's paired comparison.

A *group* is (test function, env, arm): the episodes of one test function played on one
env by one model (or policy, without a model). Every figure the run reports is kept per
group, so three tests in one file, or two models on the same seeds, are never one pooled
pass rate. With several ``--openenv-model`` / ``--openenv-policy`` (or a marker's
``models=`` / ``policies=``) every arm plays the same seeds. The groups are a view of
the ledger (``report/ledger.py``): each entry is counted in its group with its outcome,
reward, tokens, cost and time, and its pass/reward is kept by (test, seed, repeat), the
key on which two arms' episodes are paired (``report/paired.py``); an arm's figures are
its groups merged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .ledger import SUMMED_FIELDS, Counts, Entry
from .paired import Outcome, compare_pair
from .passk import PassKTally
from .stats import wilson_interval

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
class ArmTally(Counts):
    """One group's figures (or, merged, one arm's over its groups): ``Counts`` of its
    entries, with the group's names and each episode's result by what pairs it."""

    name: str = ""
    policy: str | None = None
    model: str | None = None
    #: the agent program and its version (``codex 0.171.0``); None for our own loop
    agent: str | None = None
    #: the group's test function (node id without parameters) and env; "" when merged
    test: str = ""
    env: str = ""
    outcomes: dict[PairKey, Outcome] = field(default_factory=dict)
    passk: PassKTally | None = None

    def add_entry(self, entry: Entry) -> None:
        """Count one entry of the group: its figures, its pair and its pass@k sample."""
        self.add(entry)
        self.policy = self.policy or entry.policy or None
        self.model = self.model or entry.model
        self.agent = self.agent or entry.agent or None
        if not entry.ran:
            return
        passed = entry.outcome == "passed"
        if self.passk is not None:
            self.passk.add(entry.nodeid, passed)
        key = pair_key(entry.nodeid, entry.seed, entry.repeat)
        if key is not None:
            self.outcomes[key] = (passed, None if entry.outcome == "errored" else entry.reward)

    @property
    def label(self) -> str:
        """How lines name the group: ``test_x.py::test_a · openspiel:tic_tac_toe · expert``
        (``... · openai / gpt-4o-mini`` with a model)."""
        policy = f"agent:{self.agent}" if self.agent else self.policy
        played = f"{policy} / {self.model}" if policy and self.model else self.name
        return " · ".join(part for part in (short_test(self.test), self.env, played) if part)

    def absorb(self, other: ArmTally) -> None:
        """Add another group's figures to these (an arm's figures over its groups)."""
        for name in SUMMED_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.reward.absorb(other.reward)
        self.turns.absorb(other.turns)
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
    """Every group's figures, a view of the ledger's entries (``of_ledger``); arms (models
    or policies) in the order the run named them."""

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

    @classmethod
    def of_ledger(
        cls,
        entries: Iterable[Entry],
        declared: list[str],
        repeats: int = 1,
        *,
        priced: bool = False,
        id_prefix: str | None = None,
    ) -> ArmAccounts:
        """Each entry that names its arm, in its group (the run's other entries, a skip or
        a test that never built its episode, belong to no group)."""
        accounts = cls(declared, repeats, priced=priced, id_prefix=id_prefix)
        for entry in entries:
            if entry.arm:
                accounts.group_of(entry).add_entry(entry)
        return accounts

    def group_of(self, entry: Entry) -> ArmTally:
        """The group of an episode: its test function, env and arm (by the arm's id part in
        the node id, as the row's policy name may be a conftest policy's own)."""
        key = (entry.function, entry.env, arm_part(entry.nodeid, self.id_prefix))
        tally = self.by_group.get(key)
        if tally is None:
            tally = self.by_group[key] = ArmTally(
                name=entry.arm, test=key[0], env=key[1], passk=PassKTally(self.repeats)
            )
        return tally

    @property
    def cost_usd(self) -> float:
        return sum(tally.cost_usd for tally in self.by_group.values())

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
                arm = merged[tally.name] = ArmTally(name=tally.name, passk=PassKTally(self.repeats))
            arm.absorb(tally)
        return merged

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
