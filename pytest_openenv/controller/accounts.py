"""The run's accounts: each report the controller receives, in the ledger's terms.

Every episode is one entry of the ledger (``report/ledger.py``): the report that decides
it records it, a pytest-rerunfailures attempt adds to it, a resumed item's skip counts
the earlier row that waited there. The figures (``Tally``, the groups, pass@k, which
episodes failed) are views of the ledger. Kept here beside it: the failures the gate
never excuses (not episodes), and per test function what a crashed worker's episode is
rebuilt from, so that a crash gets the ``EpisodeOutcome`` xdist could not give it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from ..config.settings import Settings
from ..episode.outcome import EpisodeOutcome, outcome_of, put_outcome
from ..episode.spec import REPEATS_FIX
from ..report.arms import ArmAccounts
from ..report.judge_tally import JudgeTally
from ..report.ledger import KEPT, PLAYED, Entry, Ledger
from ..report.passk import PassKTally
from ..report.tally import RunClock, Tally, clock_fields
from .output import Row

if TYPE_CHECKING:
    from ..episode.service import EpisodeService

EPISODE_ID_IN_NODEID = re.compile(r"\[(?:.*-)?(ep-\d{6}(?:-r\d+)?)(?:-.*)?\]$")


def episode_id_from_nodeid(nodeid: str) -> str | None:
    match = EPISODE_ID_IN_NODEID.search(nodeid)
    return match.group(1) if match else None


def run_arm_names(settings: Settings) -> list[str]:
    """The models (or policies) the run names, in order: the order of its figures."""
    from ..errors import EnvConfigError
    from ..policies.arms import arms_of

    policies = settings.run.named_policies or (settings.run.policy or "scripted",)
    try:
        return [arm.name for arm in arms_of(policies, settings.llm.named_models)]
    except EnvConfigError:  # refused before the run starts (worker/run_policy.py)
        return []


def crashed_arm(nodeid: str, episode_id: str, settings: Settings) -> tuple[str, Any]:
    """The id part and arm (``policies/arms.Arm``, None if not the run's) of a crashed item
    of a run with several models or policies: ``test[P-M-ep-000003]`` gives ``M``."""
    from ..policies.arms import arms_of, id_part

    inside = nodeid.rpartition("[")[2]
    head = inside[: inside.rfind(episode_id)].removesuffix("-")
    prefix = settings.run.id_prefix
    if prefix and (head == prefix or head.startswith(prefix + "-")):
        head = head[len(prefix) :].removeprefix("-")
    if not head:
        return "", None
    policies = settings.run.named_policies or ("openai",)
    try:
        arms = arms_of(policies, settings.llm.named_models)
    except Exception:  # refused before the run (worker/run_policy.py)
        arms = []
    return head, next((arm for arm in arms if id_part(arm.name) == head), None)


def dist_each_problem(nodeids: list[str], dist: str | None) -> str | None:
    """``--dist each`` runs the whole collection on every worker: each episode would be
    counted (a narrower interval) and written once per worker."""
    if dist != "each" or not any(episode_id_from_nodeid(nodeid) for nodeid in nodeids):
        return None
    return (
        "--dist each runs every episode once on every worker, so each would be counted "
        f"and written as many times; use --dist load (the default with -n), and {REPEATS_FIX}"
    )


def next_attempt(record: str, attempt: int) -> str:
    """The row of a failed episode played again, saying which attempt it is."""
    from ..episode.record import dumps_record

    row = json.loads(record)
    extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
    row["extra"] = {**extra, "attempt": attempt}
    return dumps_record(row)


def only_marks_reported(report: pytest.TestReport) -> bool:
    """Whether counting ``report`` does no more than mark its test reported: a passed
    setup or teardown that carries neither a row nor an episode's figures."""
    if not report.passed or report.when == "call" or getattr(report, "rerun", 0):
        return False
    outcome = outcome_of(report)
    return outcome is None or not (outcome.has_figures or outcome.line is not None)


def judge_gave_no_verdict(report: pytest.TestReport, outcome: EpisodeOutcome) -> bool:
    """A failed test body whose ``judge`` fixture's model gave no verdict."""
    judged = outcome.judge
    return report.failed and judged is not None and judged.get("passed") is None


class Accounts:
    """Turns each report into the ledger's terms: the entry it decides, the later attempt
    it adds to, the earlier row its skip reveals. Every figure is a view of the ledger."""

    def __init__(
        self, settings: Settings, service: EpisodeService, ledger: Ledger | None = None
    ) -> None:
        self.settings = settings
        #: the families of this process (a crashed episode's row names its policy)
        self.service = service
        #: every episode of the run, each once (with --openenv-resume the earlier rows wait)
        self.ledger = ledger if ledger is not None else Ledger()
        self.clock = RunClock()
        #: an episode report arrived: the run writes files and prints its summary
        self.active = False
        #: episode items collected (None until the collection is known)
        self.expected: int | None = None
        #: failures the gate never excuses: collection errors, failed teardowns, non-episodes
        self.other_failures = 0
        #: per test function: what a crashed item's row is rebuilt from
        self.seen_tests: dict[str, dict[str, Any]] = {}
        self.arm_names = run_arm_names(settings)
        #: each view as last computed, with the ledger's version it was computed at
        self._views: dict[str, tuple[int, Any]] = {}

    def _view(self, name: str, compute: Callable[[], Any]) -> Any:
        held = self._views.get(name)
        if held is not None and held[0] == self.ledger.version:
            return held[1]
        value = compute()
        self._views[name] = (self.ledger.version, value)
        return value

    # -- views of the ledger ------------------------------------------------------------
    @property
    def tally(self) -> Tally:
        """The run's figures over every counted episode."""
        tally: Tally = self._view(
            "tally",
            lambda: Tally.of_ledger(self.ledger, self.clock, replayed=self.settings.llm.replay),
        )
        # the clock moves apart from the entries (the session's end stops it)
        tally.__dict__.update(clock_fields(self.clock))
        return tally

    def live_tally(self) -> Tally:
        """The figures the live line shows, from the ledger's running totals."""
        return Tally.live(self.ledger.totals, self.clock, replayed=self.settings.llm.replay)

    @property
    def passk(self) -> PassKTally:
        return self._view(
            "passk", lambda: PassKTally.of(self.ledger.counted(), self.settings.run.repeats)
        )

    @property
    def arms(self) -> ArmAccounts:
        """Per group (test function, env, model or policy) and per model, and what pairs
        their episodes."""
        return self._view(
            "arms",
            lambda: ArmAccounts.of_ledger(
                self.ledger.counted(),
                self.arm_names,
                self.settings.run.repeats,
                priced=self.settings.budget.prices is not None,
                id_prefix=self.settings.run.id_prefix,
            ),
        )

    @property
    def judging(self) -> JudgeTally:
        """--openenv-judge and the judge fixture: the judge's verdicts, errors, agreement
        with the env and spend, apart from the episodes' figures."""
        return self._view("judging", lambda: JudgeTally.of_entries(self.ledger.counted()))

    @property
    def failed_episodes(self) -> set[str]:
        """Episodes that failed or errored: with a passing gate, JUnit shows them as gated."""
        return self._view("failed", self.ledger.failed_tests)

    @property
    def reported(self) -> set[str]:
        """Episode items this run reported."""
        return self.ledger.reported()

    @property
    def kept_counted(self) -> int:
        """--openenv-resume: failed episodes kept from the earlier run (not played again)
        whose skipped item this run reported: without a gate they fail the run as they did
        when played (a resume does not turn a failed dataset green)."""
        return sum(
            1
            for entry in self.ledger.counted()
            if entry.origin == KEPT and entry.reported and entry.outcome != "passed"
        )

    def spent_tokens(self) -> int:
        """Tokens this run spent, the judge's included (a budget counts both)."""
        totals = self.ledger.totals
        return totals.prompt_tokens + totals.completion_tokens + totals.judge_tokens

    def spent_usd(self) -> float:
        totals = self.ledger.totals
        return totals.cost_usd + totals.judge_cost_usd

    # -- reports ------------------------------------------------------------------------
    def expect(self, nodeids: list[str]) -> bool:
        """The collection is known (first time only): how many episodes it holds. Any?"""
        if self.expected is None:
            self.expected = sum(1 for nodeid in nodeids if episode_id_from_nodeid(nodeid))
        return bool(self.expected)

    def count_collect_report(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.other_failures += 1

    def count(self, report: pytest.TestReport) -> Row | None:
        """Count one report; the row it carries (taken off it), for the output folder."""
        outcome = outcome_of(report)
        if outcome is None or (report.when == "teardown" and report.failed):
            # not an episode's verdict: the gate never excuses it
            self.other_failures += int(report.failed)
            if outcome is None:
                return None
        self.active = True
        held = self.ledger.touch(report.nodeid, outcome.episode_id)
        if getattr(report, "rerun", 0):
            # pytest-rerunfailures' later attempt: the first one was counted and written
            self.count_later_attempt(report, outcome)
            if outcome.line is not None:
                put_outcome(report, outcome.written())
            return None
        self.decide(report, outcome, held)
        record = outcome.line
        if record is None:
            return None
        parsed = outcome.row
        attempt = self.ledger.get(report.nodeid)
        if attempt is not None and attempt.attempt > 1:
            record = next_attempt(record, attempt.attempt)
            parsed = None
        self.remember_test(report.nodeid, record, parsed)
        # Reports stay alive in the terminal reporter's stats for the whole session.
        put_outcome(report, outcome.written())
        # the training split: a passed test whose row carries no failure (verdict-failed)
        train = report.when == "call" and report.passed and outcome.train
        return Row(record, train, (outcome.episode_id, report.nodeid), parsed)

    def decide(self, report: pytest.TestReport, outcome: EpisodeOutcome, held: Entry) -> None:
        """The entry ``report`` decides, if it decides one: recorded in the ledger."""
        nodeid = report.nodeid
        if report.skipped and self.reveal_earlier(held):
            return
        if report.skipped and not hasattr(report, "wasxfail"):
            # a skip at setup (resume, a skip marker) or in the test body: out of the rate
            entry = Entry(nodeid, outcome.episode_id)
        elif report.when == "setup" and (report.failed or report.outcome == "rerun"):
            entry = self.entry_of(outcome, report, "errored")
        elif report.when == "call" and judge_gave_no_verdict(report, outcome):
            # the judge fixture's model gave no verdict: an error of the run, not the agent's
            entry = self.entry_of(outcome, report, "errored")
        elif report.when == "call":
            entry = self.entry_of(outcome, report, "passed" if report.passed else "failed")
            if outcome.has_figures:
                entry.judged, entry.verdict = True, outcome.verdict
                entry.reward, entry.turns = float(outcome.reward), int(outcome.turns)
                entry.train = bool(report.passed and outcome.train and outcome.line is not None)
        elif report.when not in ("setup", "teardown") and report.failed:
            # xdist's report for an item whose worker died (when="???")
            entry = self.entry_of(outcome, report, "errored")
            entry.test_failed = False
        else:
            return
        if self.settings.output.resume_failed and held.origin == KEPT and not held.counted:
            # a failed episode of the earlier run played again: the next attempt at it
            entry.attempt = held.attempt + int(held.outcome != "errored")
        self.ledger.record(entry)
        self.clock.episode_reported(self.ledger.totals.total)

    def entry_of(self, outcome: EpisodeOutcome, report: pytest.TestReport, word: str) -> Entry:
        """The entry of a played (or errored) episode: its figures, when the report has them."""
        entry = Entry(
            report.nodeid,
            outcome.episode_id,
            outcome=word,
            test_failed=report.failed or report.outcome == "rerun",
            rerun=report.outcome == "rerun",
            judge=outcome.judge,
        )
        if outcome.has_figures:
            entry.arm, entry.env, entry.policy = outcome.arm, outcome.env, outcome.policy
            entry.model, entry.seed, entry.repeat = outcome.model, outcome.seed, outcome.repeat
            entry.agent = outcome.agent
            entry.prompt_tokens = outcome.prompt_tokens
            entry.completion_tokens = outcome.completion_tokens
            cost = outcome.cost_usd
            entry.cost_usd = float(cost) if isinstance(cost, (int, float)) else None
            entry.seconds = outcome.wall_time_s or 0.0
        return entry

    def reveal_earlier(self, held: Entry) -> bool:
        """--openenv-resume: a skipped item whose earlier row counts as it is (a pass, or with
        no --openenv-resume-failed a failure that finished); an errored one plays again."""
        if held.counted or held.origin == PLAYED:
            return False
        if held.origin == KEPT and (
            held.outcome == "errored" or self.settings.output.resume_failed
        ):
            return False
        self.ledger.reveal(held.nodeid)
        self.clock.episode_reported(self.ledger.totals.total)
        return True

    def count_later_attempt(self, report: pytest.TestReport, outcome: EpisodeOutcome) -> None:
        """pytest-rerunfailures ran a failed episode again: this attempt is not counted.

        pass@1 is the chance that one attempt passes; counting the attempt that finally
        passed would report best-of-N as pass@1 (a 70% agent as 100%). Nor is a rerun
        another sample for pass@k: it is drawn only after a failure, not independently,
        and ``--openenv-repeats`` is what draws k samples per seed. So each episode
        counts by its first attempt, whose row is the one written, and the summary and
        the card say how many were re-run and how many passed on a later attempt.
        """

        def add(entry: Entry) -> None:
            entry.passed_on_rerun |= report.when == "call" and report.passed
            # the tokens were spent all the same
            entry.prompt_tokens += outcome.prompt_tokens
            entry.completion_tokens += outcome.completion_tokens

        self.ledger.amend(report.nodeid, add)

    def count_rest_of_folder(self) -> None:
        """--openenv-resume, at the end: the folder's rows this run did not reach.

        ``-k``, ``--lf`` or a smaller n leave items of the earlier run uncollected; their
        rows are still the dataset in the folder, so the gate, summary and card count them.
        """
        self.ledger.reveal_rest()

    def remember_test(self, nodeid: str, record: str, row: dict[str, Any] | None = None) -> None:
        """Per test function (not per episode): what a crashed item's row is rebuilt from;
        ``row``: what parsing ``record`` gives, when at hand."""
        function = nodeid.rpartition("[")[0]
        if function in self.seen_tests:
            return
        if row is None:
            row = json.loads(record)
        self.seen_tests[function] = {
            "env": row.get("env"),
            "policy": row.get("policy"),
            "base_seed": int(row["seed"]) - int(row.get("extra", {}).get("index", 0)),
            "config": row.get("task", {}).get("config"),
        }

    def decorate_crash_report(self, report: pytest.TestReport, crashitem: str) -> None:
        """A worker died mid-episode: xdist's report has none of our fields, so add them."""
        episode_id = episode_id_from_nodeid(crashitem)
        if episode_id is None:
            return
        why = str(report.longrepr)
        if self.settings.run.concurrency not in (None, 1):
            # xdist names the item the worker was on; its run-ahead episodes died too
            why += (
                "; with --openenv-concurrency other episodes of that worker were in "
                "flight and may have caused it (they run again on another worker)"
            )
        self._add_crashed_episode(report, episode_id, why)

    def _add_crashed_episode(self, report: pytest.TestReport, episode_id: str, why: str) -> None:
        from ..episode.record import dumps_record, placeholder_row
        from ..episode.spec import EpisodeSpec

        index_text, _, repeat_text = episode_id.removeprefix("ep-").partition("-r")
        index, repeat = int(index_text), int(repeat_text or 0)
        # A sibling episode of the same test tells env, policy and seeds; without one the
        # run's settings do (exact for the bundled test and for unmarked test functions).
        run = self.settings.run
        known = self.seen_tests.get(report.nodeid.rpartition("[")[0], {})
        env = known.get("env") or run.env or "unknown"
        config = known.get("config") or json.dumps(run.config, sort_keys=True)
        policy = known.get("policy") or run.policy
        if policy is None and env != "unknown":
            policy = self.service.family(env, config).default_policy()
        arm_part, arm = crashed_arm(report.nodeid, episode_id, self.settings)
        if arm is not None and arm.policy:
            policy = arm.policy
        spec = EpisodeSpec(
            env=env,
            index=index,
            seed=known.get("base_seed", run.seed) + index,
            repeat=repeat,
            repeats=run.repeats,
            policy=policy or "unknown",
            config=config,
            prefix=run.id_prefix or "",
            model=arm.model if arm is not None else None,
            arm=arm_part,
        )
        reason = f"{why} (the process running this episode died: os._exit, a signal or OOM)"
        record = placeholder_row(spec, reason, test=report.nodeid)
        put_outcome(report, EpisodeOutcome.of_row(spec.episode_id, record, dumps_record(record)))
