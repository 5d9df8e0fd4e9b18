"""The run's accounts: each episode counted once, with its final outcome.

Fed every report the controller receives. Counts outcomes, reward, turns and tokens
(``Tally``), per-seed runs for pass@k (``PassKTally``), which episodes failed (a
passing gate excuses them in JUnit XML), the failures the gate never excuses, and
with ``--openenv-resume`` the earlier run's passes, counted once when their items
are skipped. It also gives a crashed worker's report the ``EpisodeOutcome`` xdist
could not.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from ..config.settings import Settings
from ..episode.outcome import EpisodeOutcome, outcome_of, put_outcome
from ..episode.spec import REPEATS_FIX
from ..report.arms import ArmAccounts
from ..report.judge_tally import JudgeTally
from ..report.passk import PassKTally
from ..report.tally import Tally
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
    def __init__(
        self, settings: Settings, service: EpisodeService, earlier: dict[str, dict[str, Any]]
    ) -> None:
        self.settings = settings
        #: the families of this process (a crashed episode's row names its policy)
        self.service = service
        self.tally = Tally(replayed=settings.llm.replay)
        self.passk = PassKTally(settings.run.repeats)
        #: --openenv-judge: the judge's verdicts, errors, agreement with the env and spend
        self.judging = JudgeTally()
        #: an episode report arrived: the run writes files and prints its summary
        self.active = False
        #: episode items collected (None until the collection is known)
        self.expected: int | None = None
        #: failures the gate never excuses: collection errors, failed teardowns, non-episodes
        self.other_failures = 0
        #: episodes that failed or errored: with a passing gate, JUnit shows them as gated
        self.failed_episodes: set[str] = set()
        #: --openenv-resume: the earlier run's passing episodes count once, as passed, when
        #: their item is skipped, so gate and card cover the whole dataset, not the re-runs
        self.earlier = earlier
        #: per test function: what a crashed item's row is rebuilt from
        self.seen_tests: dict[str, dict[str, Any]] = {}
        #: episodes this run reported (an earlier failure among them was played again)
        self.reported: set[str] = set()
        #: --openenv-resume: failed episodes of the earlier run whose item is skipped; each
        #: counts once, as failed, by that first attempt (``keep_earlier_failures``)
        self.kept_failures: dict[str, dict[str, Any]] = {}
        #: --openenv-resume-failed: failed episodes played again, by node id -> the attempt
        #: their earlier row was; the new row says it is the next one
        self.replayed: dict[str, int] = {}
        #: kept failures whose skipped item this run reported: without a gate they fail the
        #: run as they did when played (a resume does not turn a failed dataset green)
        self.kept_counted = 0
        #: per group (test function, env, model or policy) and per model, and what pairs
        #: their episodes
        self.arms = ArmAccounts(
            run_arm_names(settings),
            settings.run.repeats,
            priced=settings.budget.prices is not None,
            id_prefix=settings.run.id_prefix,
        )

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
        self.reported.add(report.nodeid)
        if getattr(report, "rerun", 0):
            # pytest-rerunfailures' later attempt: the first one was counted and written
            self.count_later_attempt(report, outcome)
            if outcome.line is not None:
                put_outcome(report, outcome.written())
            return None
        if report.outcome == "rerun":
            self.tally.rerun += 1
        counted = self.tally.total
        self.count_outcome(report, outcome)
        if self.tally.total != counted:
            self.tally.episode_reported()
        if outcome.has_figures:
            self.count_spend(outcome)
            self.arms.count(report, outcome)
        record = outcome.line
        if record is None:
            return None
        parsed = outcome.row
        if report.nodeid in self.replayed:
            record = self.next_attempt(report.nodeid, record)
            parsed = None
        self.remember_test(report.nodeid, record, parsed)
        # Reports stay alive in the terminal reporter's stats for the whole session.
        put_outcome(report, outcome.written())
        # the training split: a passed test whose row carries no failure (verdict-failed)
        train = report.when == "call" and report.passed and outcome.train
        if train:
            self.tally.train_rows += 1
        return Row(record, train, (outcome.episode_id, report.nodeid), parsed)

    def count_later_attempt(self, report: pytest.TestReport, outcome: EpisodeOutcome) -> None:
        """pytest-rerunfailures ran a failed episode again: this attempt is not counted.

        pass@1 is the chance that one attempt passes; counting the attempt that finally
        passed would report best-of-N as pass@1 (a 70% agent as 100%). Nor is a rerun
        another sample for pass@k: it is drawn only after a failure, not independently,
        and ``--openenv-repeats`` is what draws k samples per seed. So each episode
        counts by its first attempt, whose row is the one written, and the summary and
        the card say how many were re-run and how many passed on a later attempt.
        """
        if report.when == "call" and report.passed:
            self.tally.passed_on_rerun += 1
        # the tokens were spent all the same
        self.tally.prompt_tokens += outcome.prompt_tokens
        self.tally.completion_tokens += outcome.completion_tokens

    def keep_earlier_failures(self, failures: dict[str, dict[str, Any]], *, replay: bool) -> None:
        """--openenv-resume: the failed rows of failures.jsonl are kept, counted once each by
        that first attempt, or (``replay``: --openenv-resume-failed) played again."""
        for nodeid, row in failures.items():
            if row["outcome"] == "errored":
                continue  # an errored episode never finished: it plays again
            # failed, or "passed": a test-passed episode the env's verdict failed
            if replay:
                self.replayed[nodeid] = int(row.get("attempt", 1))
            else:
                self.kept_failures[nodeid] = row

    def next_attempt(self, nodeid: str, record: str) -> str:
        """The row of a failed episode played again, saying which attempt it is."""
        from ..episode.record import dumps_record

        attempt = self.replayed[nodeid] + 1
        self.tally.attempts = max(self.tally.attempts, attempt)
        row = json.loads(record)
        extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
        row["extra"] = {**extra, "attempt": attempt}
        return dumps_record(row)

    def count_outcome(self, report: pytest.TestReport, outcome: EpisodeOutcome) -> None:
        earlier = self.earlier.pop(report.nodeid, None) if report.skipped else None
        kept = self.kept_failures.pop(report.nodeid, None) if report.skipped else None
        if earlier is not None:
            self.count_earlier_pass(report.nodeid, earlier)
        elif kept is not None:
            self.count_earlier_failure(report.nodeid, kept)
            # a verdict-failed row's test passed: it fails no run
            self.kept_counted += kept["outcome"] != "passed"
        elif report.skipped and not hasattr(report, "wasxfail"):
            # a skip at setup (resume, a skip marker) or in the test body: out of the rate
            self.tally.add_outcome("skipped")
        elif report.when == "setup" and (report.failed or report.outcome == "rerun"):
            self.tally.add_outcome("errored")
            self.passk.add(report.nodeid, False)
            self.failed_episodes.add(report.nodeid)
        elif report.when == "call" and judge_gave_no_verdict(report, outcome):
            # the judge fixture's model gave no verdict: an error of the run, not the agent's
            self.tally.add_outcome("errored")
            self.passk.add(report.nodeid, False)
            self.failed_episodes.add(report.nodeid)
        elif report.when == "call":
            self.tally.add_outcome("passed" if report.passed else "failed")
            if report.failed or report.outcome == "rerun":
                self.failed_episodes.add(report.nodeid)
            self.passk.add(report.nodeid, report.passed)
            if outcome.has_figures:
                self.tally.reward.add(float(outcome.reward))
                self.tally.turns.add(int(outcome.turns))
                self.tally.count_verdict(report.passed, outcome.verdict)
        elif report.when not in ("setup", "teardown") and report.failed:
            # xdist's report for an item whose worker died (when="???")
            self.tally.add_outcome("errored")
            self.passk.add(report.nodeid, False)

    def count_spend(self, outcome: EpisodeOutcome) -> None:
        """Tokens, and which envs, policies and models the run used."""
        self.tally.prompt_tokens += outcome.prompt_tokens
        self.tally.completion_tokens += outcome.completion_tokens
        self.judging.add(outcome.judge)
        self._count_names({"env": outcome.env, "policy": outcome.policy, "model": outcome.model})

    def count_earlier_pass(self, nodeid: str, earlier: dict[str, Any]) -> None:
        self.tally.attempts = max(self.tally.attempts, int(earlier.get("attempt", 1)))
        self.arms.count_earlier(nodeid, earlier)
        self.tally.add_outcome("passed")
        self.tally.count_verdict(True, earlier.get("verdict") is not False)
        self.tally.train_rows += 1
        self.tally.resumed += 1
        self.judging.add(earlier.get("judge"), spent=False)  # its verdict, not this run's spend
        self.passk.add(nodeid, True)
        with contextlib.suppress(TypeError, ValueError):
            self.tally.reward.add(float(earlier["reward"]))
        with contextlib.suppress(TypeError, ValueError):
            self.tally.turns.add(int(earlier["turns"]))
        self._count_names({key: str(value) for key, value in earlier.items() if value})

    def count_rest_of_folder(self, failures: dict[str, dict[str, Any]]) -> None:
        """--openenv-resume, at the end: the folder's rows this run did not reach.

        ``-k``, ``--lf`` or a smaller n leave items of the earlier run uncollected; their
        rows are still the dataset in the folder, so the gate, summary and card count them
        (passes from results.jsonl, ``failures``: what failures.jsonl still holds).
        """
        for nodeid, earlier in self.earlier.items():
            self.count_earlier_pass(nodeid, earlier)
        self.earlier = {}
        for nodeid, row in failures.items():
            if nodeid in self.reported:
                continue  # played again (or kept, counted at its skip) this run
            self.count_earlier_failure(nodeid, row)

    def count_earlier_failure(self, nodeid: str, row: dict[str, Any]) -> None:
        """A row of the folder's failures.jsonl, counted as it is: failed, errored, or a
        test-passed episode the env's verdict failed (its outcome is then ``passed``)."""
        self.arms.count_earlier(nodeid, row, row["outcome"])
        self.tally.add_outcome(row["outcome"])
        self.judging.add(row.get("judge"), spent=False)
        if row["outcome"] != "errored":
            self.tally.count_verdict(row["outcome"] == "passed", bool(row.get("verdict")))
        self.tally.earlier_failures += 1
        self.tally.attempts = max(self.tally.attempts, int(row.get("attempt", 1)))
        self.passk.add(nodeid, row["outcome"] == "passed")
        with contextlib.suppress(TypeError, ValueError):
            self.tally.reward.add(float(row["reward"]))
        with contextlib.suppress(TypeError, ValueError):
            self.tally.turns.add(int(row["turns"]))
        self._count_names({key: str(value) for key, value in row.items() if value})

    def _count_names(self, seen: dict[str, Any]) -> None:
        for key, bucket in (
            ("env", self.tally.envs),
            ("policy", self.tally.policies),
            ("model", self.tally.models),
        ):
            if seen.get(key):
                bucket.add(seen[key])

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
