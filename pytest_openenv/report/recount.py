"""A run's counts recomputed from its rows, as the controller counted its reports.

Each row of results.jsonl / failures.jsonl is one episode's deciding report: a passed call
(results.jsonl, or a failures.jsonl row whose test passed while the env's verdict failed), a
failed call (``failure.outcome = "failed"``) or a setup error (``"error"``). ``RowCounts``
makes each the ledger entry its report made (``report/ledger.py``'s ``entry_of_row``) and
folds it into the same ``Tally``, ``PassKTally`` and ``ArmAccounts`` the controller's views
fold, so ``report/judge.py`` and the summary read the same counts as a run on one machine
would give them. The entries are folded as they come, not kept: a ledger of a million
entries is what a merge must not hold.

Memory stays flat in the number of rows when the rows come in episode-id order (a merge of
sorted shard files does): pass@k keeps only the seeds still open (``FoldingPassK``), and the
per-episode outcomes that pair two models or a baseline are kept only when something pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .arms import ArmAccounts, ArmTally
from .judge import RunCounts
from .ledger import Entry, entry_of_row
from .passk import PassAtK, PassKTally, pass_at_k, pass_hat_k
from .tally import Tally


def base_id(episode_id: str) -> str:
    """``ep-000003-r1`` -> ``ep-000003``: the seed every repeat of it samples."""
    head, sep, tail = episode_id.rpartition("-r")
    return head if sep and tail.isdigit() else episode_id


class FoldingPassK(PassKTally):
    """pass@1, pass@k and pass^k over problems that close in order: ``fold`` adds the open
    problems to running sums and forgets them (rows in id order close a seed when the next
    seed starts), so memory holds one seed's problems, not the run's."""

    def __init__(self, k: int) -> None:
        super().__init__(k)
        self.problems = 0
        self.scored = 0
        self.sum_at_1 = 0.0
        self.sum_at_k = 0.0
        self.sum_hat_k = 0.0

    def fold(self) -> None:
        for runs, passes in self._counts.values():
            self.problems += 1
            self.sum_at_1 += passes / runs
            if runs >= self.k:
                self.scored += 1
                self.sum_at_k += pass_at_k(runs, passes, self.k)
                self.sum_hat_k += pass_hat_k(runs, passes, self.k)
        self._counts.clear()

    def absorb(self, other: PassKTally) -> None:
        if isinstance(other, FoldingPassK):
            self.problems += other.problems
            self.scored += other.scored
            self.sum_at_1 += other.sum_at_1
            self.sum_at_k += other.sum_at_k
            self.sum_hat_k += other.sum_hat_k
        super().absorb(other)

    def result(self) -> PassAtK:
        self.fold()
        return PassAtK(
            k=self.k,
            problems=self.problems,
            problems_scored=self.scored,
            pass_at_1=self.sum_at_1 / self.problems if self.problems else None,
            pass_at_k=self.sum_at_k / self.scored if self.scored else None,
            pass_hat_k=self.sum_hat_k / self.scored if self.scored else None,
        )


class FoldingArms(ArmAccounts):
    """``ArmAccounts`` whose groups' pass@k folds, and which keeps each episode's outcome only
    when something pairs episodes (several models, ``--openenv-gate-vs``, a baseline)."""

    def __init__(self, declared: list[str], repeats: int, *, pairs: bool, **kwargs: Any) -> None:
        super().__init__(declared, repeats, **kwargs)
        self.pairs = pairs

    def group_of(self, entry: Entry) -> ArmTally:
        tally = super().group_of(entry)
        if not isinstance(tally.passk, FoldingPassK):
            tally.passk = FoldingPassK(self.repeats)
        return tally

    @property
    def arms(self) -> dict[str, ArmTally]:
        merged: dict[str, ArmTally] = {}
        for tally in self.by_group.values():
            arm = merged.get(tally.name)
            if arm is None:
                arm = merged[tally.name] = ArmTally(
                    name=tally.name, passk=FoldingPassK(self.repeats)
                )
            arm.absorb(tally)
        return merged

    def in_collection_order(self, tests: dict[str, dict[str, Any]]) -> None:
        """Meet the groups in the order a run on one machine meets them: its tests in
        collection order (``tests``: each with its models' id parts in order), not in the
        id order the rows came in; that order ranks models the run did not name."""
        test_rank = {test: i for i, test in enumerate(tests)}

        def rank(key: tuple[str, str, str]) -> tuple[int, int]:
            arms = list(tests.get(key[0], {}).get("arms") or [])
            return (
                test_rank.get(key[0], len(test_rank)),
                arms.index(key[2]) if key[2] in arms else len(arms),
            )

        self.by_group = {key: self.by_group[key] for key in sorted(self.by_group, key=rank)}

    def fold(self) -> None:
        for tally in self.by_group.values():
            if isinstance(tally.passk, FoldingPassK):
                tally.passk.fold()
            if not self.pairs:
                tally.outcomes.clear()


@dataclass
class RowCounts:
    """The counts of a run rebuilt from its rows, fed in (episode id, test) order."""

    tally: Tally
    passk: FoldingPassK
    arms: FoldingArms
    repeats: int
    _open_seed: str | None = None

    @classmethod
    def start(
        cls,
        repeats: int,
        declared: list[str],
        *,
        pairs: bool,
        priced: bool,
        id_prefix: str | None,
        replayed: bool = False,
    ) -> RowCounts:
        return cls(
            Tally(replayed=replayed),
            FoldingPassK(repeats),
            FoldingArms(declared, repeats, pairs=pairs, priced=priced, id_prefix=id_prefix),
            repeats,
        )

    def add(self, row: dict[str, Any], line: str, *, train: bool) -> None:
        """One row; ``train``: it is a results.jsonl row (the training split). It becomes
        the ledger entry the run made of its deciding report, folded as it comes."""
        seed = base_id(str(row["episode_id"]))
        if seed != self._open_seed:
            self.fold()
            self._open_seed = seed
        entry = entry_of_row(row, failure_file=not train, played=True)
        tally = self.tally
        tally.add(entry)
        tally.attempts = max(tally.attempts, entry.attempt)
        for value, bucket in (
            (entry.env, tally.envs),
            (entry.policy, tally.policies),
            (entry.model, tally.models),
        ):
            if value:
                bucket.add(value)
        if entry.ran:
            self.passk.add(entry.nodeid, entry.outcome == "passed")
        if entry.arm:
            self.arms.group_of(entry).add_entry(entry)

    def fold(self) -> None:
        self.passk.fold()
        self.arms.fold()

    def counts(self) -> RunCounts:
        self.fold()
        return RunCounts(self.tally, self.arms, self.passk, self.repeats)
