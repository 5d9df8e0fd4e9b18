"""The run's ledger: one entry per episode, the store every figure is computed from.

An ``Entry`` holds what the figures need of one episode (its outcome, verdict, reward,
turns, group, seed, spend, attempt), never its row text: rows go to the files as they
arrive. Entries are keyed by the episode's item (its node id, which holds the episode
id: two test functions may play the same ``ep-000003``).

- A report that decides an episode ``record``\\ s it, replacing whatever the entry held
  (``--openenv-resume-failed`` plays an earlier failure again: the final attempt decides).
- pytest-rerunfailures' later attempts only ``amend`` the first: their tokens were spent,
  and the entry notes that a later attempt passed. The first attempt stays the figure:
  a rerun is drawn only after a failure, so counting the one that finally passed would
  report best-of-N as pass@1.
- ``--openenv-resume`` ``preload``\\ s the earlier run's rows (``add_row``): each waits,
  uncounted, until its item's skip is reported or the run ends (``reveal``), so the live
  line and a run budget see only what this run reached.

Tally, groups, pass@k, the gate's figures, ``summary.json`` and the card are views:
functions of ``counted()`` (``report/tally.py``, ``report/arms.py``, ``report/passk.py``),
the same whether the entries came from reports or from rows read back from
results.jsonl and failures.jsonl (``add_row`` with ``counted=True`` builds a ledger from
saved rows alone). The ledger also keeps ``totals``, the view the live line and a budget
read after every report, updated as entries change instead of summed again each time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..episode.outcome import agent_of, judge_figures
from ..policies.arms import arm_name
from .stats import RunningMean

#: where an entry's outcome comes from: this run's play, an earlier run's results.jsonl
#: row (a pass), or an earlier run's failures.jsonl row
PLAYED, RESUMED, KEPT = "played", "resumed", "kept"

#: a failures.jsonl row's ``failure.outcome`` -> how the figures count it (a verdict-failed
#: row's test passed: it counts as passed, with its verdict failed)
EARLIER_OUTCOME = {"error": "errored", "failed": "failed", "verdict-failed": "passed"}


@dataclass(slots=True)
class Entry:
    nodeid: str
    episode_id: str = ""
    #: passed, failed, errored or skipped (the test's outcome, as pytest's line counts it)
    outcome: str = "skipped"
    origin: str = PLAYED
    #: counted in the figures (an earlier run's row waits until its item is reached)
    counted: bool = True
    #: this run reported the episode's item (any of its reports)
    reported: bool = False
    #: the test judged the episode: its verdict counts beside the test's outcome
    judged: bool = False
    verdict: bool = False
    reward: float | None = None
    turns: int | None = None
    #: the name the run knows its model (or policy) by; "" puts it in no group
    arm: str = ""
    env: str = ""
    policy: str = ""
    model: str | None = None
    #: the agent program that played, with its version (``codex 0.171.0``); "" for our loop
    agent: str = ""
    seed: int | None = None
    repeat: int = 0
    #: every attempt's spend (a re-run's tokens were spent all the same)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    #: seconds the episode took
    seconds: float = 0.0
    #: which attempt at the episode the counted one is (``extra.attempt``)
    attempt: int = 1
    #: its row went to results.jsonl, the training split
    train: bool = False
    #: pytest failed the test (a passing gate excuses it in JUnit XML)
    test_failed: bool = False
    #: pytest-rerunfailures ran it again, and a later attempt passed
    rerun: bool = False
    passed_on_rerun: bool = False
    #: a judge model's figures (``episode/outcome.judge_figures``); None: no judge asked
    judge: dict[str, Any] | None = None
    #: the judge's tokens were this run's spend (not an earlier run's a resume counts)
    judge_spent: bool = True

    @property
    def function(self) -> str:
        """The test function: the node id without its parameters."""
        return self.nodeid.rpartition("[")[0] or self.nodeid

    @property
    def ran(self) -> bool:
        return self.outcome != "skipped"


def _number(value: Any, kind: Callable[[Any], Any]) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    with contextlib.suppress(TypeError, ValueError, OverflowError):
        return kind(value)
    return None


def attempt_of(row: dict[str, Any]) -> int:
    """Which attempt at its episode a row is (``extra.attempt``; 1 when not said)."""
    extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
    attempt = extra.get("attempt", 1)
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 1


def entry_of_row(row: dict[str, Any], *, failure_file: bool, played: bool = False) -> Entry:
    """The entry a saved row stands for: a results.jsonl row (``failure_file`` False)
    passed; a failures.jsonl row counts by its ``failure.outcome``.

    ``played`` False: an earlier run's row (``--openenv-resume``), whose spend is that
    run's, not this one's (no tokens, cost or time). ``played`` True: a row counted as
    played, its spend with it (a ledger built from the files of runs, e.g. shards)."""
    metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
    verify = row.get("verify_metrics") if isinstance(row.get("verify_metrics"), dict) else {}
    extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
    if failure_file:
        failure = row.get("failure") if isinstance(row.get("failure"), dict) else {}
        outcome = EARLIER_OUTCOME.get(str(failure.get("outcome")), "failed")
        verdict = bool(verify.get("verdict"))
    else:
        outcome, verdict = "passed", verify.get("verdict") is not False
    errored = outcome == "errored"
    entry = Entry(
        str(row.get("test", "")),
        str(row.get("episode_id", "")),
        outcome=outcome,
        origin=PLAYED if played else KEPT if failure_file else RESUMED,
        judged=not errored,
        verdict=verdict and not errored,
        reward=None if errored else _number(row.get("reward"), float),
        turns=None if errored else _number(metrics.get("turns"), int),
        arm=arm_name(str(row.get("policy") or ""), row.get("model")),
        env=str(row.get("env") or ""),
        policy=str(row.get("policy") or ""),
        model=row.get("model") or None,
        agent=agent_of(row),
        seed=_number(row.get("seed"), int),
        repeat=_number(extra.get("repeat", 0), int) or 0,
        attempt=attempt_of(row),
        train=not failure_file,
        test_failed=failure_file and outcome != "passed",
        judge=judge_figures(row.get("judge")),
        judge_spent=played,
    )
    if played:
        entry.prompt_tokens = _number(metrics.get("prompt_tokens"), int) or 0
        entry.completion_tokens = _number(metrics.get("completion_tokens"), int) or 0
        entry.cost_usd = _number(metrics.get("cost_usd"), float)
        entry.seconds = _number(metrics.get("wall_time_s"), float) or 0.0
    return entry


#: the figures ``Counts`` sums over entries (its running means apart)
SUMMED_FIELDS = (
    "passed",
    "failed",
    "errored",
    "skipped",
    "resumed",
    "earlier_failures",
    "rerun",
    "passed_on_rerun",
    "verdict_passed",
    "test_passed_verdict_failed",
    "test_failed_verdict_passed",
    "train_rows",
    "prompt_tokens",
    "completion_tokens",
    "unpriced",
    "cost_usd",
    "episode_seconds",
    "judge_tokens",
    "judge_cost_usd",
)


@dataclass
class Counts:
    """What a set of entries adds up to: the run's figures, or one group's.

    ``report/tally.py``'s ``Tally`` (the run) and ``report/arms.py``'s ``ArmTally`` (a
    group, an arm) are this fold with what each adds around it; one rule counts an
    entry for both."""

    passed: int = 0
    failed: int = 0
    errored: int = 0
    skipped: int = 0
    #: --openenv-resume: passing episodes of the earlier run, counted in ``passed`` (their
    #: rows are the dataset too), with their reward and turns; tokens stay this run's spend
    resumed: int = 0
    #: --openenv-resume: failures.jsonl rows of the earlier run this run did not play again,
    #: counted in ``failed``/``errored`` (a verdict-failed one in ``passed``, as its test was)
    earlier_failures: int = 0
    #: pytest-rerunfailures: episodes whose first attempt was re-run, and of those the ones
    #: a later attempt passed. Each episode counts by its first attempt.
    rerun: int = 0
    passed_on_rerun: int = 0
    #: episodes the env's verdict passed (at the run's threshold); errored ones never do
    verdict_passed: int = 0
    #: test passed, verdict failed: with --openenv-train-on=verdict they are failures.jsonl's
    test_passed_verdict_failed: int = 0
    #: test failed, verdict passed (a negative test, or a stricter test body)
    test_failed_verdict_passed: int = 0
    #: rows of results.jsonl, the training split (earlier runs' included)
    train_rows: int = 0
    reward: RunningMean = field(default_factory=RunningMean)
    turns: RunningMean = field(default_factory=RunningMean)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    #: episodes with tokens but no price (their model is not in --openenv-prices)
    unpriced: int = 0
    #: seconds the episodes took, summed
    episode_seconds: float = 0.0
    #: what a judge model spent deciding them (a budget counts it beside the policy's)
    judge_tokens: int = 0
    judge_cost_usd: float = 0.0

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.errored

    @property
    def total(self) -> int:
        return self.ran + self.skipped

    def add(self, entry: Entry, sign: int = 1) -> None:
        """Count ``entry`` (``sign`` -1: take it out again, as it is replaced)."""
        # straight-line: a view folds every entry, at every figure the end of a run shows
        outcome = entry.outcome
        setattr(self, outcome, getattr(self, outcome) + sign)
        if entry.origin == RESUMED:
            self.resumed += sign
        elif entry.origin == KEPT:
            self.earlier_failures += sign
        if entry.rerun:
            self.rerun += sign
            self.passed_on_rerun += sign * entry.passed_on_rerun
        if entry.judged:
            test_passed = outcome == "passed"
            if entry.verdict:
                self.verdict_passed += sign
                self.test_failed_verdict_passed += sign * (not test_passed)
            else:
                self.test_passed_verdict_failed += sign * test_passed
        self.train_rows += sign * entry.train
        if entry.prompt_tokens or entry.completion_tokens:
            self.prompt_tokens += sign * entry.prompt_tokens
            self.completion_tokens += sign * entry.completion_tokens
            self.unpriced += sign * (entry.cost_usd is None)
        if entry.reward is not None:
            self.reward.add(entry.reward, sign)
        if entry.turns is not None:
            self.turns.add(entry.turns, sign)
        if entry.cost_usd is not None:
            self.cost_usd += sign * entry.cost_usd
        self.episode_seconds += sign * entry.seconds
        judge = entry.judge
        if judge is not None and entry.judge_spent:
            tokens = int(judge.get("prompt_tokens") or 0) + int(judge.get("completion_tokens") or 0)
            self.judge_tokens += sign * tokens
            cost = judge.get("cost_usd")
            if isinstance(cost, (int, float)) and not isinstance(cost, bool):
                self.judge_cost_usd += sign * float(cost)

    @classmethod
    def of(cls, entries: Iterable[Entry], **fields: Any) -> Any:
        """The fold of ``entries`` (``fields``: the subclass's own, e.g. a group's key)."""
        counts = cls(**fields)
        for entry in entries:
            counts.add(entry)
        return counts

    def counted_figures(self) -> dict[str, Any]:
        """The summed figures by name (what two folds of the same entries agree on)."""
        return {
            **{name: round(getattr(self, name), 9) for name in SUMMED_FIELDS},
            "reward": (self.reward.count, round(self.reward.total, 9)),
            "turns": (self.turns.count, round(self.turns.total, 9)),
        }


class Ledger:
    """Every episode of the run, each once, by its item's node id."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        #: the counted entries' figures, kept up to date as entries change
        self.totals = Counts()
        #: how many times a counted entry changed: a view computed at one version holds
        #: until the next change (the end of a run reads each view several times)
        self.version = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, nodeid: str) -> Entry | None:
        return self._entries.get(nodeid)

    def counted(self) -> Iterator[Entry]:
        """The counted entries, in the order they were first counted."""
        return (entry for entry in self._entries.values() if entry.counted)

    def pending(self) -> Iterator[Entry]:
        """Earlier rows not counted yet (their item not reached, or not decided yet)."""
        return (
            entry
            for entry in self._entries.values()
            if not entry.counted and entry.origin != PLAYED
        )

    def reported(self) -> set[str]:
        return {entry.nodeid for entry in self._entries.values() if entry.reported}

    # -- what changes an entry ------------------------------------------------------
    def touch(self, nodeid: str, episode_id: str) -> Entry:
        """A report of the episode's item came: its entry (until one decides it, a
        placeholder that counts nothing), marked reported."""
        entry = self._entries.get(nodeid)
        if entry is None:
            entry = self._entries[nodeid] = Entry(nodeid, episode_id, counted=False)
        entry.reported = True
        return entry

    def record(self, entry: Entry) -> Entry:
        """An attempt that decides its episode: it replaces what the entry held."""
        old = self._entries.pop(entry.nodeid, None)
        if old is not None:
            entry.reported = entry.reported or old.reported
            if old.counted:
                self.totals.add(old, -1)
        entry.counted = True
        self.version += 1
        # re-inserted: the views list entries in the order they were counted
        self._entries[entry.nodeid] = entry
        self.totals.add(entry)
        return entry

    def amend(self, nodeid: str, change: Callable[[Entry], None]) -> Entry | None:
        """A later attempt adds to the counted entry (its spend, a pass on a re-run)."""
        entry = self._entries.get(nodeid)
        if entry is None or not entry.counted:
            return None
        self.totals.add(entry, -1)
        change(entry)
        self.totals.add(entry)
        self.version += 1
        return entry

    def preload(self, entry: Entry) -> None:
        """An earlier run's row: known, not counted until ``reveal``."""
        entry.counted = False
        self._entries[entry.nodeid] = entry

    def add_row(
        self,
        row: dict[str, Any],
        *,
        failure_file: bool,
        counted: bool = True,
        played: bool = False,
    ) -> Entry:
        """An entry from a saved row (a results.jsonl row, or with ``failure_file`` one of
        failures.jsonl; ``played``: see ``entry_of_row``). A ledger built from files alone
        adds every row of results.jsonl, then of failures.jsonl, and reads every figure
        from the same views as a run; a resume preloads them (``counted`` False). A
        results.jsonl row wins over a failures.jsonl one of the same test."""
        entry = entry_of_row(row, failure_file=failure_file, played=played)
        held = self._entries.get(entry.nodeid)
        if failure_file and held is not None and held.train:
            return held
        if counted:
            return self.record(entry)
        self.preload(entry)
        return entry

    def reveal(self, nodeid: str) -> Entry | None:
        """Count an earlier row that waited; None if there is none waiting."""
        entry = self._entries.get(nodeid)
        if entry is None or entry.counted:
            return None
        return self.record(entry)

    def reveal_rest(self) -> list[Entry]:
        """Count every earlier row still waiting (the end of the run)."""
        return [self.record(entry) for entry in list(self.pending())]

    # -- views ------------------------------------------------------------------------
    def attempts(self) -> int:
        """The most attempts any counted episode took (1 unless failures were replayed)."""
        return max((entry.attempt for entry in self.counted()), default=1)

    def failed_tests(self) -> set[str]:
        """Node ids of the episodes pytest failed (a passing gate excuses them)."""
        return {entry.nodeid for entry in self.counted() if entry.test_failed}
