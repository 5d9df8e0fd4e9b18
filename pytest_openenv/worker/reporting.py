"""What a worker puts on an episode item's reports: an ``EpisodeOutcome`` each.

The controller is the only writer of files, so each finished episode travels to it
on the call (or setup) report, as one ``episode/outcome.py`` ``EpisodeOutcome``: the
row as JSON text and the figures the live line and the counts need. The item's other
reports carry an outcome with only the episode id.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from ..config.prices import PriceTable, cost_usd
from ..episode.outcome import EpisodeOutcome, put_outcome
from ..episode.record import (
    VERDICT_FAILED,
    PreparedRow,
    dumps_record,
    placeholder_row,
    with_failure,
)
from ..episode.result import Episode
from ..policies.arms import arm_name
from .items import EPISODE_KEY, ERROR_KEY, PREPARED_KEY, STOP_KEY, spec_of
from .judge_fixture import judge_failure, judge_section_of


def failure_message(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    text = message if message else str(report.longrepr)
    return text[-4000:]


def shorten_crash_message(report: pytest.TestReport) -> None:
    """One line for pytest's short test summary, whatever the environment.

    On a terminal pytest shows the first line of the crash message; under ``CI`` it
    shows all of it, so each failed episode's whole transcript would fill the summary
    of a CI log. The row keeps the full message; the report's longrepr is unchanged.
    """
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    if not isinstance(message, str) or "\n" not in message:
        return
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return
    reason = next(
        (line for line in lines[1:] if line.startswith(("reason:", "episode error:"))), ""
    )
    crash.message = f"{lines[0]} - {reason}" if reason else lines[0]  # type: ignore[union-attr]


def played_row(
    item: pytest.Item, episode: Episode, passed: bool, tool_arguments: str
) -> tuple[dict[str, Any], PreparedRow | None]:
    """The row of the item's finished episode for a test outcome of ``passed``, and the
    row made ahead it was finished from (None: made here, none was made in that form)."""
    prepared = item.stash.get(PREPARED_KEY, None)
    if prepared is not None:
        del item.stash[PREPARED_KEY]  # one report finishes it
        if prepared.tool_arguments == tool_arguments:
            return prepared.row_for(item.nodeid, passed), prepared
    return episode.record(test=item.nodeid, passed=passed, tool_arguments=tool_arguments), None


def attach_to_report(
    item: pytest.Item,
    report: pytest.TestReport,
    tool_arguments: str = "string",
    prices: PriceTable | None = None,
    train_on: str = "verdict",
    keep_row: bool = False,
) -> EpisodeOutcome | None:
    """Put the episode's outcome on the report: the controller is the only writer.

    Returns that outcome (None: ``item`` is no episode item).

    ``tool_arguments`` (``--openenv-tool-arguments``): how the row's messages carry them;
    ``prices`` (``--openenv-prices``): the row's ``metrics.cost_usd`` is priced by it;
    ``train_on`` (``--openenv-train-on``): ``verdict`` sends a test-passed episode the env's
    verdict failed to failures.jsonl (``verdict-failed``), ``test`` keeps it for training;
    ``keep_row``: the outcome keeps the row dict too (one process, nothing to scrub).
    """
    spec = spec_of(item)
    if spec is None:
        return None
    episode = item.stash.get(EPISODE_KEY, None)
    record: dict[str, Any] | None = None
    prepared: PreparedRow | None = None
    if report.when == "setup" and report.failed:
        reason = item.stash.get(ERROR_KEY, None) or failure_message(report)
        if episode is None:
            record = placeholder_row(spec, reason, test=item.nodeid, tool_arguments=tool_arguments)
        else:
            record, prepared = played_row(item, episode, False, tool_arguments)
            with_failure(record, "error", reason)
    elif report.when == "call" and report.skipped and not hasattr(report, "wasxfail"):
        # ``pytest.skip()`` in the test body: a skip, not a verdict (no row, no failure)
        pass
    elif report.when == "call" and episode is not None:
        record, prepared = played_row(item, episode, report.passed, tool_arguments)
        judged = judge_section_of(item)
        if judged is not None:  # the judge fixture's verdict (or why it gave none)
            record["judge"] = dict(judged)
        judge_failed = judge_failure(item) if not report.passed else None
        if judge_failed is not None:
            report.judge_failed = True  # type: ignore[attr-defined]
            with_failure(record, "error", judge_failed)
        elif not report.passed:
            with_failure(record, "failed", failure_message(report))
        elif train_on == "verdict" and not episode.passed:
            # the test body passed it, the env judged it failed: not fit to train on
            why = episode.reason or episode.status_line()
            with_failure(record, VERDICT_FAILED, f"the test passed; the env's verdict: {why}")
    elif report.when == "call" and report.failed:
        # the test failed without ever building the episode (e.g. it raised before use)
        record = placeholder_row(spec, failure_message(report), test=item.nodeid)
    if record is not None:
        if prices is not None:
            metrics = record["metrics"]
            metrics["cost_usd"] = cost_usd(
                prices, record["model"], metrics["prompt_tokens"], metrics["completion_tokens"]
            )
            judged = record.get("judge")
            if isinstance(judged, dict):  # the judge's spend, priced by its own model
                judged["cost_usd"] = cost_usd(
                    prices, judged["model"], judged["prompt_tokens"], judged["completion_tokens"]
                )
        line = prepared.line_of(record) if prepared is not None else dumps_record(record)
        shorten_crash_message(report)
        outcome = EpisodeOutcome.of_row(
            spec.episode_id,
            record,
            line,
            # the name the run knows the arm by, for a played and an errored episode alike
            arm=arm_name(spec.policy, spec.model),
            # the verdict's own words for the item status line
            detail=episode.status_line() if episode is not None else None,
            # answers no token or cost budget can count
            usage_unknown=episode.usage.unknown if episode is not None else 0,
            keep_row=keep_row,
        )
        # junitxml writes the teardown report's user_properties, copied from the item
        # when that report is made; a few scalars only, never the record itself.
        item.user_properties.extend(
            [
                ("openenv.reward", record["reward"]),
                ("openenv.turns", record["metrics"]["turns"]),
                ("openenv.outcome", record["verify_metrics"]["outcome"]),
            ]
        )
    else:
        outcome = EpisodeOutcome(spec.episode_id)
    if STOP_KEY in item.stash and report.when != "teardown":
        # the controller stops the run, as for a full output disk
        outcome = dataclasses.replace(outcome, stop=item.stash[STOP_KEY])
    put_outcome(report, outcome)
    if report.when == "teardown":
        # release the transcript: items live for the whole session
        for key in (EPISODE_KEY, PREPARED_KEY):
            if key in item.stash:
                del item.stash[key]
    return outcome


# -- failures that show only their message ---------------------------------------------
# pytest filters the whole traceback of every failure (some 30 frames, each path
# resolved) even for ``pytest.fail(..., pytrace=False)``, whose report is the message
# alone. Failed episodes are common in an eval (the bundled test fails that way), and
# that walk was most of what each one cost. ``--fulltrace`` keeps pytest's own path.


def shows_message_only(item: pytest.Item, call: pytest.CallInfo[None]) -> bool:
    """A test body's ``pytest.fail(..., pytrace=False)`` on an episode item."""
    if call.when != "call" or call.excinfo is None or spec_of(item) is None:
        return False
    failed = call.excinfo.value
    return (
        isinstance(failed, pytest.fail.Exception)
        and not failed.pytrace
        and not item.config.getoption("fulltrace", False)
    )


class _MessageOnly:
    """``item`` for ``TestReport.from_item_and_call``, whose failure repr is the message.

    ``repr_failure`` is the method pytest asks an item for its failure's text; this
    answers it without the traceback walk and hands every other attribute to the item.
    """

    def __init__(self, item: pytest.Item) -> None:
        self._item = item

    def __getattr__(self, name: str) -> Any:
        return getattr(self._item, name)

    @staticmethod
    def repr_failure(excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        return excinfo.getrepr(style="value", tbfilter=False)


def message_only_report(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """The report pytest would make, with the failure shown as its message (no walk)."""
    return pytest.TestReport.from_item_and_call(cast(pytest.Item, _MessageOnly(item)), call)
