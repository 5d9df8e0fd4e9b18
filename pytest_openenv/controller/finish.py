"""The end of the session on the controller: gate, JUnit, files, card, Hub, summaries.

In order: the gate decides the exit code (when set), JUnit XML follows a passing
gate, the rows are rewritten sorted and ``metadata.json``, ``summary.json`` and the
card are written, the folder is pushed to the Hub, and the Markdown summary goes to
``$GITHUB_STEP_SUMMARY``. The terminal summary is printed after all of that.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..config.settings import Settings
from ..dataset.card import render_card
from ..dataset.folder import card_is_generated
from ..dataset.hub import HubPublisher
from ..dataset.writer import CARD, METADATA, REPORT, RESULTS, SUMMARY
from ..report.baseline import DEFAULT_CONFIDENCE
from ..report.gates import GateConfig, Verdict
from ..report.judge import RunCounts, best_of_unjudged, judge
from ..report.step_summary import append_step_summary, summary_markdown
from ..report.summary import (
    SummarySection,
    arm_lines,
    passk_lines,
    render_sections,
    summary_sections,
    verdict_lines,
)
from ..util.secrets import KnownSecrets
from .accounts import Accounts
from .budget import RunBudget
from .exports import FolderExports
from .metadata import RunMetadata
from .output import OutputFolder
from .subset import subset_text

if TYPE_CHECKING:
    from ..episode.service import EpisodeService


def unsorted_message(unsorted: list[tuple[Path, str]]) -> str:
    """A final sorted rewrite failed (a full disk): the rows are all there, in arrival order."""
    files = ", ".join(str(path) for path, _ in unsorted)
    why = "; ".join(dict.fromkeys(why for _, why in unsorted))
    return (
        f"the final sorted rewrite of {files} failed ({why}): every row is intact there, only "
        "not sorted by episode id. Free some space and run the same command with "
        "--openenv-resume to sort it (nothing is played again)"
    )


class SessionEnd:
    def __init__(
        self,
        config: pytest.Config,
        service: EpisodeService,
        *,
        output: OutputFolder,
        accounts: Accounts,
        run: RunMetadata,
        publisher: HubPublisher | None,
        secrets: KnownSecrets,
        notes: list[str],
        budget: RunBudget | None = None,
    ) -> None:
        self.config = config
        self.settings: Settings = service.settings
        self.service = service
        self.output = output
        self.accounts = accounts
        self.run = run
        self.gate: GateConfig = run.gate
        self.publisher = publisher
        self.secrets = secrets
        self.notes = notes
        #: --openenv-max-cost / --openenv-max-total-tokens
        self.budget = budget
        self.verdict: Verdict | None = None
        self.step_summary_error: str | None = None
        self.exit_status: int | None = None
        #: the exit code pytest ends with (after the files and the push), for the summary
        self.final_exit_status: int | None = None
        #: report.html was written (the end of run links each failed episode into it)
        self.report_written = False
        #: ``--lf`` without ``--openenv-resume``: the episodes it re-runs (``subset.py``)
        self.last_failed: int | None = None
        #: preferences.jsonl and --openenv-inspect-log (checked here: before any episode)
        self.exports = FolderExports(self.settings, secrets, notes)

    def figures(self) -> dict[str, Any]:
        """The run's figures; episodes a run budget kept from starting count as skipped."""
        figures = self.accounts.tally.figures()
        arms = self.accounts.arms
        not_started = self.budget.not_started if self.budget is not None else 0
        figures["skipped"] += not_started
        figures["episodes"] += not_started
        figures["cost_usd"] = arms.cost_usd if arms.priced else None
        figures["unpriced_episodes"] = sum(arm.unpriced for arm in arms.by_group.values())
        # the run's figures pool its groups: said so wherever there is more than one
        figures["pooled"] = arms.several_groups
        figures["group_count"] = len(arms.by_group)
        return figures

    def summary(self, exitstatus: int) -> dict[str, Any]:
        tally, arms = self.accounts.tally, self.accounts.arms
        compared = arms.to_json(self.gate.confidence or DEFAULT_CONFIDENCE)
        budget = self.budget
        from ..report.row_facts import row_facts

        return {
            "figures": self.figures(),
            # what decided the verdicts, and how far the seed reaches (read from the rows)
            **row_facts(
                self.output.writer.folder, self.output.digests.facts(self.output.writer.final)
            ),
            "passk": self.accounts.passk.result().to_json(),
            "gate": self.verdict.to_json() if self.verdict else None,
            "exit_status": int(exitstatus),
            "output": str(self.output.writer.folder),
            "episodes_expected": self.accounts.expected,
            "interrupted": int(exitstatus) == pytest.ExitCode.INTERRUPTED,
            "groups": arms.groups_json(self.gate.confidence or DEFAULT_CONFIDENCE),
            **(compared or {}),
            **self.judge_json(),
            **(
                {
                    "budget": budget.to_json(
                        tally.prompt_tokens
                        + tally.completion_tokens
                        + self.accounts.judging.tokens,
                        arms.cost_usd + self.accounts.judging.cost_usd if arms.priced else None,
                    )
                }
                if budget is not None and (budget.active or budget.episode_max_tokens)
                else {}
            ),
        }

    def judge_json(self) -> dict[str, Any]:
        """``judge``: the judge's own figures (--openenv-judge), apart from the episodes'."""
        judging = self.accounts.judging
        if not judging.asked:
            return {}
        confidence = self.gate.confidence or DEFAULT_CONFIDENCE
        priced = self.settings.budget.prices is not None
        return {"judge": judging.to_json(confidence, priced=priced)}

    def apply_gate(self, session: pytest.Session) -> None:
        """With a gate set the gate decides the exit code; other failures still fail it."""
        if self.budget is not None:
            self.budget.count_not_started(self.accounts.expected, self.accounts.tally.total)
        if not (self.accounts.active and self.gate.active):
            return
        unjudged = best_of_unjudged(self.accounts.tally.attempts, self.settings.output.gate_best_of)
        if unjudged is not None:
            self.notes.append(unjudged)
            return
        stopped = session.shouldfail or session.shouldstop
        last_failed = self.last_failed
        self.verdict = judge(
            self.gate,
            self.counts(),
            other_failures=self.accounts.other_failures,
            stopped_early=str(stopped) if stopped else None,
            subset=(lambda judged: subset_text(last_failed, judged)) if last_failed else None,
        )
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = (
                pytest.ExitCode.OK if self.verdict.passed else pytest.ExitCode.TESTS_FAILED
            )

    def counts(self) -> RunCounts:
        """What the gate reads of the run (``report/judge.py``)."""
        accounts = self.accounts
        return RunCounts(accounts.tally, accounts.arms, accounts.passk, self.settings.run.repeats)

    def align_junit(self) -> None:
        """A passing gate: the episodes it accepted are not failures in JUnit XML either."""
        from ..report.junit import excuse_gated_episodes, junit_path, testcase_address

        failed = self.accounts.failed_episodes
        if self.verdict is None or not self.verdict.passed or not failed:
            return
        path = junit_path(self.config)
        if path is None or not path.exists():
            return
        prefix = self.config.getoption("junitprefix", None)
        addresses = {testcase_address(nodeid, prefix) for nodeid in failed}
        try:
            excuse_gated_episodes(path, addresses, "accepted by the openenv gate (exit code 0)")
        except (OSError, SyntaxError) as exc:  # ET.ParseError is a SyntaxError
            self.notes.append(f"WARNING: {path} was left as pytest wrote it: {exc}")

    def finish(self, exitstatus: int) -> None:
        """Write the final files, publish them, append the step summary."""
        self.exit_status = exitstatus
        if not self.accounts.active:
            return
        self.write_files(exitstatus)
        self.publish(exitstatus)
        markdown = summary_markdown(
            self.figures(),
            self.accounts.passk.result(),
            self.verdict,
            str(self.settings.output.folder),
            self.accounts.arms.to_json(self.gate.confidence or DEFAULT_CONFIDENCE),
            groups=self.accounts.arms.groups_json(self.gate.confidence or DEFAULT_CONFIDENCE),
        )
        judged = self.accounts.judging.lines(self.gate.confidence or DEFAULT_CONFIDENCE)
        if judged:  # the judge's own figures, as the terminal shows them
            markdown += "\n" + "".join(f"- {line}\n" for line in judged)
        self.step_summary_error = append_step_summary(self.secrets.scrub(markdown))

    def write_files(self, exitstatus: int) -> None:
        output, writer = self.output, self.output.writer
        try:
            if not writer.opened and not self.settings.output.folder.exists():
                writer.open()
            writer.finalize()
            if writer.unsorted:
                output.write_error = output.write_error or unsorted_message(writer.unsorted)
            if writer.restored:
                output.write_error = output.write_error or (
                    f"output folder {self.settings.output.folder} was deleted or replaced "
                    "during the run; the rows written so far were restored to "
                    + ", ".join(str(path) for path in writer.restored)
                )
            template = self.run.template
            if template is not None:
                template.check_rows(writer.folder / RESULTS)
            self.exports.write_preferences(writer.folder, template)
            if template is not None:
                self.notes.extend(template.terminal_lines())
            summary = self.summary(exitstatus)
            metadata = self.run.to_json(played=self.accounts.tally.policies)
            writer.write_json(METADATA, metadata)
            writer.write_json(SUMMARY, summary)
            self.write_report()
            if self.card_is_ours():
                card = render_card(
                    writer.folder,
                    summary,
                    metadata,
                    repo_id=self.settings.publish.repo,
                    counted=writer.row_counts(),
                )
                writer.write_text(CARD, card)
            else:
                self.notes.append(
                    f"{writer.folder / CARD} has no generated-card marker (edited by "
                    "hand): kept as it is"
                )
            self.exports.write_inspect_logs(writer.folder)
            self.notes.extend(self.exports.terminal_lines())
        except OSError as exc:
            problem = f"cannot write to {writer.folder}: {exc}"
            if output.write_error:  # the first error is the one the summary leads with
                self.notes.append(f"ERROR: {problem}")
            else:
                output.write_error = problem

    def write_report(self) -> None:
        """report.html and the card's chart; a failure is a warning, never a failed run."""
        from ..report.page import write_report

        writer = self.output.writer
        folder = writer.folder
        try:
            found = self.output.digests.folder_rows(folder, writer.final)
            write_report(folder, secrets=self.secrets, found=found)
        except Exception as exc:  # the data files are written; the report is a view of them
            self.notes.append(f"WARNING: {folder / REPORT} was not written: {exc}")
        else:
            self.report_written = True

    def report_link(self, episode_id: str, nodeid: str) -> str | None:
        """``file://.../report.html#ep-000123``: the episode's transcript, if there is a report."""
        if not self.report_written:
            return None
        from urllib.parse import quote

        from ..report.page.rows import anchor

        function = nodeid.rpartition("[")[0] or nodeid
        fragment = anchor(episode_id, function, len(self.accounts.seen_tests) > 1)
        return (self.output.writer.folder / REPORT).as_uri() + "#" + quote(fragment, safe="@:/-._~")

    def excused_by_gate(self) -> set[str] | None:
        """Episodes a passing gate accepted (pytest counts them as ``gated``), else None."""
        if self.verdict is None or not self.verdict.passed:
            return None
        return self.accounts.failed_episodes

    def card_is_ours(self) -> bool:
        folder = self.output.writer.folder
        return not (folder / CARD).exists() or card_is_generated(folder)

    def publish(self, exitstatus: int) -> None:
        """Push the final output folder to the Hub, once (see dataset/hub.py)."""
        if self.publisher is None:
            return
        folder = self.output.writer.folder
        if self.output.write_error:
            self.publisher.skip(folder, "the output folder was not written completely")
        elif exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            self.publisher.skip(folder, f"the run ended early (exit code {exitstatus})")
        else:
            self.publisher.publish(folder)

    def settle_exit_status(self, session: pytest.Session) -> None:
        """Files that could not be written, or a failed push, fail an otherwise good run."""
        push_failed = self.publisher is not None and self.publisher.failed
        if (self.output.write_error or push_failed) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if (
            self.verdict is None
            and self.accounts.kept_counted
            and session.exitstatus == pytest.ExitCode.OK
        ):
            # failed episodes a resume kept (not played again) fail the run as they did
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.publisher is not None and self.publisher.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        self.final_exit_status = int(session.exitstatus)

    # -- the terminal summary ----------------------------------------------------
    def stronger_teacher(self) -> str | None:
        """``expert``, if it plays the run's env and this run did not use it; else None."""
        tally = self.accounts.tally
        if not self.settings.run.env or "expert" in tally.policies or not tally.failed:
            return None
        try:
            family = self.service.run_family()
        except Exception:  # a hint is not worth a failed summary
            return None
        if family is None or not family.offers_expert:
            return None
        return "expert" if family.expert_problem() is None else None

    def terminal_lines(self) -> list[str]:
        return [self.secrets.scrub(line) for line in render_sections(self.terminal_sections())]

    def terminal_sections(self) -> list[SummarySection]:
        """The run's figures (``report/summary.py``), then what the controller adds: pass@k,
        the models side by side, the budget, the gate's verdict, notes, and what became of
        the folder and its push."""
        arms = self.accounts.arms
        confidence = self.gate.confidence or DEFAULT_CONFIDENCE
        figures = self.figures()
        sections = summary_sections(
            figures,
            str(self.settings.output.folder),
            gated=self.gate.active,
            teacher=self.stronger_teacher(),
            exit_status=self.final_exit_status,
            groups=arms.groups_json(confidence),
            verdicts=verdict_lines(figures, self.settings.output.train_on),
        )
        passk = self.accounts.passk.result()
        sections.append(SummarySection("repeats", tuple(passk_lines(passk, arms.several_groups))))
        sections.append(SummarySection("judge", tuple(self.accounts.judging.lines(confidence))))
        if arms.several:
            sections.append(SummarySection("models", tuple(arm_lines(arms, confidence))))
        if self.budget is not None:
            sections.append(SummarySection("budget", tuple(self.budget.lines())))
        if self.verdict is not None:
            sections.append(SummarySection("gate", tuple(self.verdict.lines())))
        sections.append(SummarySection("notes", tuple(self.note_lines())))
        sections.append(SummarySection("folder", tuple(self.folder_lines())))
        return sections

    def note_lines(self) -> list[str]:
        """A failed step summary, earlier files moved aside, and the notes of the run."""
        lines = []
        if self.step_summary_error:
            lines.append(f"WARNING: {self.step_summary_error}")
        for moved in self.output.writer.moved:
            stem, _, suffix = moved.name.partition(".")
            lines.append(f"earlier run's {stem}.{suffix.rpartition('.')[2]} kept as {moved}")
        return lines + self.notes

    def folder_lines(self) -> list[str]:
        """What an interruption left in the folder, the push, and what could not be written."""
        tally, output = self.accounts.tally, self.output
        lines = []
        if self.exit_status == pytest.ExitCode.INTERRUPTED:
            expected = self.accounts.expected
            of = f" of {expected}" if expected is not None else ""
            # a write error stopped the run: the episodes it could not save are not there
            where = (
                f"{tally.total - output.unsaved} of them are in {output.writer.folder}, "
                f"{output.unsaved} could not be written there"
                if output.unsaved
                else f"everything finished is in {output.writer.folder}"
            )
            lines.append(
                f"interrupted after {tally.total}{of} episodes; {where}. Run the same command "
                "with --openenv-resume to finish"
                + (" (it plays the unwritten ones again)" if output.unsaved else "")
            )
        if self.publisher is not None:
            lines.extend(self.publisher.terminal_lines())
        if output.write_error:
            lines.append(f"ERROR: {output.write_error}")
            if output.unsaved:
                lines.append(
                    f"ERROR: {output.unsaved} finished episode(s) could not be saved; fix the "
                    "output folder and run again with --openenv-resume to redo them"
                )
        return lines
