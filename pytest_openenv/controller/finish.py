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
from ..report.arms import ArmTally
from ..report.baseline import DEFAULT_CONFIDENCE
from ..report.gates import GateConfig, RunFigures, Verdict, evaluate
from ..report.passk import PassKTally
from ..report.step_summary import append_step_summary, summary_markdown
from ..report.summary import arm_lines, summary_lines
from ..util.format import percent
from ..util.secrets import KnownSecrets
from .accounts import Accounts
from .budget import RunBudget
from .exports import FolderExports
from .metadata import RunMetadata
from .output import OutputFolder
from .subset import subset_text

if TYPE_CHECKING:
    from ..episode.service import EpisodeService

PASSK_NAMES = ("pass@1", "pass@k", "pass^k")


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
            **(
                {
                    "budget": budget.to_json(
                        tally.prompt_tokens + tally.completion_tokens,
                        arms.cost_usd if arms.priced else None,
                    )
                }
                if budget is not None and (budget.active or budget.episode_max_tokens)
                else {}
            ),
        }

    def gate_figures(self) -> RunFigures | list[RunFigures]:
        """What the gate reads: each group's figures (the groups of ``--openenv-gate-model``
        only, or with ``--openenv-gate-vs`` every other model's), or with one group or
        ``--openenv-gate-pooled`` the pooled figures; each with its episodes for the paired
        tests (``--openenv-gate-vs``, a paired ``--openenv-baseline``)."""
        arms = self.accounts.arms
        groups = arms.groups()
        baseline = self.gate.baseline
        baseline_groups = len(baseline.groups) if baseline is not None else 0
        if self.gate.pooled or not groups or (len(groups) == 1 and baseline_groups <= 1):
            return self.pooled_gate_figures()
        judged = [
            group
            for group in groups
            if (self.gate.model is None or group.name == self.gate.model)
            and (self.gate.model is not None or group.name != self.gate.vs)
        ]
        figures = []
        for group in judged:
            vs = self.vs_group(group) if self.gate.vs else None
            figures.append(
                RunFigures(
                    passed=group.passed,
                    ran=group.ran,
                    reward=group.reward,
                    passk=(group.passk or PassKTally(self.settings.run.repeats)).result(),
                    judged=group.passed + group.failed,
                    model=group.name,
                    outcomes=group.outcomes,
                    vs_outcomes=vs.outcomes if vs is not None else None,
                    envs=frozenset({group.env} - {""}),
                    policies=frozenset({group.policy} - {None}),  # type: ignore[arg-type]
                    models=frozenset({group.model} - {None}),  # type: ignore[arg-type]
                    group=group.label,
                    group_key=(group.test, group.env, group.name),
                    attempts=self.accounts.tally.attempts,
                )
            )
        return figures

    def vs_group(self, group: ArmTally) -> ArmTally | None:
        """``--openenv-gate-vs``'s group beside ``group``: the same test and env."""
        for other in self.accounts.arms.by_group.values():
            if (other.test, other.env, other.name) == (group.test, group.env, self.gate.vs):
                return other
        return None

    def pooled_gate_figures(self) -> RunFigures | list[RunFigures]:
        """The pooled figures: the whole run's, or with several models the gated one's
        (``--openenv-gate-model``), or each model's but ``--openenv-gate-vs``'s."""
        tally, arms = self.accounts.tally, self.accounts.arms
        merged = arms.arms
        vs = merged.get(self.gate.vs) if self.gate.vs else None
        vs_outcomes = vs.outcomes if vs is not None else None
        ordered = arms.ordered()
        if not arms.several or (self.gate.model is None and self.gate.vs is None):
            only = ordered[0] if len(ordered) == 1 else None
            outcomes: dict[Any, Any] = {}
            for arm in ordered:
                outcomes.update(arm.outcomes)
            return RunFigures(
                passed=tally.passed,
                ran=tally.ran,
                reward=tally.reward,
                passk=self.accounts.passk.result(),
                judged=tally.passed + tally.failed,
                model=only.name if only is not None else None,
                outcomes=outcomes if only is not None else None,
                vs_outcomes=vs_outcomes,
                envs=frozenset(tally.envs),
                policies=frozenset(tally.policies),
                models=frozenset(tally.models),
                group="pooled (all groups)" if arms.several_groups else None,
                attempts=tally.attempts,
            )
        names = [arm.name for arm in ordered]
        if self.gate.model is None:
            # every model is judged against the reference, each over all its groups
            others = [name for name in names if name != self.gate.vs] or names[:1]
            return [self.pooled_model_figures(name, vs_outcomes) for name in others]
        return self.pooled_model_figures(self.gate.model, vs_outcomes)

    def pooled_model_figures(self, name: str, vs_outcomes: dict[Any, Any] | None) -> RunFigures:
        """One model's figures pooled over its groups."""
        tally, arms = self.accounts.tally, self.accounts.arms
        gated = arms.arms.get(name) or ArmTally(name)
        return RunFigures(
            passed=gated.passed,
            ran=gated.ran,
            reward=gated.reward,
            passk=(gated.passk or PassKTally(self.settings.run.repeats)).result(),
            judged=gated.passed + gated.failed,
            model=name,
            outcomes=gated.outcomes,
            vs_outcomes=vs_outcomes,
            # the gated model is compared with the baseline's: only the env must agree
            envs=frozenset(tally.envs),
            group=f"pooled ({name}, all its groups)" if arms.several_groups else None,
            attempts=tally.attempts,
        )

    def apply_gate(self, session: pytest.Session) -> None:
        """With a gate set the gate decides the exit code; other failures still fail it."""
        if self.budget is not None:
            self.budget.count_not_started(self.accounts.expected, self.accounts.tally.total)
        if not (self.accounts.active and self.gate.active):
            return
        attempts = self.accounts.tally.attempts
        if attempts > 1 and not self.settings.output.gate_best_of:
            # a failure played again until it passed is no pass@1: nothing to gate on
            self.notes.append(
                f"WARNING: the gate was not judged: the figures are best of up to {attempts} "
                "attempts per episode (--openenv-resume-failed played failed episodes again); "
                "pass --openenv-gate-best-of to judge them anyway"
            )
            return
        figures = self.gate_figures()
        stopped = session.shouldfail or session.shouldstop
        self.verdict = evaluate(
            self.gate,
            figures,
            other_failures=self.accounts.other_failures,
            stopped_early=str(stopped) if stopped else None,
            subset=subset_text(self.last_failed, judged_count(figures))
            if self.last_failed
            else None,
        )
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = (
                pytest.ExitCode.OK if self.verdict.passed else pytest.ExitCode.TESTS_FAILED
            )

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
        tally, output = self.accounts.tally, self.output
        arms = self.accounts.arms
        groups = arms.groups_json(self.gate.confidence or DEFAULT_CONFIDENCE)
        lines = summary_lines(
            self.figures(),
            str(self.settings.output.folder),
            gated=self.gate.active,
            teacher=self.stronger_teacher(),
            exit_status=self.final_exit_status,
            groups=groups,
        )
        # beside the pass rate they qualify, indented as it is (under the pooled heading)
        at, indent = next(
            (
                (i + 1, line[: len(line) - len(line.lstrip())])
                for i, line in enumerate(lines)
                if line.lstrip().startswith("pass rate:")
            ),
            (2, ""),
        )
        verdicts = verdict_lines(self.figures(), self.settings.output.train_on)
        lines[at:at] = [indent + line for line in verdicts]
        passk = self.accounts.passk.result()
        if passk.k > 1:
            lines.append(
                ("pooled " if arms.several_groups else "")
                + f"repeats: {passk.k} per seed over {passk.problems} seed(s): "
                + "    ".join(
                    f"{name.replace('k', str(passk.k))} {percent(passk.metric(name))}"
                    for name in PASSK_NAMES
                )
                + (
                    f" (pass@{passk.k}/pass^{passk.k} over {passk.problems_scored} seeds "
                    f"with all {passk.k} runs)"
                    if passk.problems_scored != passk.problems
                    else ""
                )
            )
        if arms.several:
            lines.extend(arm_lines(arms, self.gate.confidence or DEFAULT_CONFIDENCE))
        if self.budget is not None:
            lines.extend(self.budget.lines())
        if self.verdict is not None:
            lines.extend(self.verdict.lines())
        if self.step_summary_error:
            lines.append(f"WARNING: {self.step_summary_error}")
        for moved in output.writer.moved:
            stem, _, suffix = moved.name.partition(".")
            lines.append(f"earlier run's {stem}.{suffix.rpartition('.')[2]} kept as {moved}")
        lines.extend(self.notes)
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
        return [self.secrets.scrub(line) for line in lines]


def judged_count(figures: RunFigures | list[RunFigures]) -> int:
    """How many episodes the gate's figures cover (each group's, or the pooled ones)."""
    return sum(one.ran for one in figures) if isinstance(figures, list) else figures.ran


def verdict_lines(figures: dict[str, Any], train_on: str) -> list[str]:
    """Where the tests' outcomes and the env's verdicts differ, what each counts and which
    rule filled results.jsonl (the summary's ``passed`` and pass rate count test outcomes)."""
    kept_out = figures.get("test_passed_verdict_failed", 0)
    stricter = figures.get("test_failed_verdict_passed", 0)
    if not kept_out and not stricter:
        return []
    rate = figures.get("verdict_pass_rate")
    shown = f" ({100 * rate:.1f}%)" if rate is not None else ""
    lines = [
        f"env verdict: {figures.get('verdict_passed', 0)} of {figures['ran']} passed{shown}; "
        f"tests passed: {figures['passed']} (the episodes line and pass rate count tests)"
    ]
    if kept_out and train_on == "verdict":
        lines.append(
            f"training split: {figures.get('train_rows', 0)} rows in results.jsonl; "
            f"{kept_out} test-passed episode(s) the env's verdict failed went to "
            "failures.jsonl as verdict-failed (--openenv-train-on=test keeps them)"
        )
    elif kept_out:
        lines.append(
            f"training split: {figures.get('train_rows', 0)} rows in results.jsonl, "
            f"{kept_out} of them failed by the env's verdict (--openenv-train-on=test)"
        )
    return lines
