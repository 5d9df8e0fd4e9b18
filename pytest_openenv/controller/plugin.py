"""Controller side: the only writer of the output folder, and the run's figures.

Runs in the pytest process that receives every report: the xdist controller,
or the single process with ``-n 0``. It claims the output folder once episode
tests are collected (ownership, lock, resume identity: ``claim_output``) and
activates at the first episode report, so a run that collects no episode test
writes nothing and prints nothing.
"""

from __future__ import annotations

import contextlib
import json
import platform
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..config.settings import Settings
from ..dataset.card import render_card
from ..dataset.folder import LOCK, MARKER, card_is_generated, ownership_problem, read_metadata
from ..dataset.hub import HubPublisher
from ..dataset.identity import resume_problem, run_identity
from ..dataset.jsonl import CorruptLine, scan
from ..dataset.lock import FolderLocked, RunLock
from ..dataset.writer import CARD, METADATA, REPORT, RESULTS, SUMMARY, DatasetWriter
from ..report.gates import GateConfig, RunFigures, Verdict, evaluate
from ..report.passk import PassKTally
from ..report.slim import ReportSlimmer
from ..report.step_summary import append_step_summary, summary_markdown
from ..report.summary import summary_lines
from ..report.tally import Tally
from ..util.format import percent
from ..util.secrets import KnownSecrets
from .progress import LiveStatus, gate_so_far, status_text
from .terminal_end import EndOfRun

if TYPE_CHECKING:
    from ..worker.service import EpisodeService
    from .template import TemplateCheck

EPISODE_ID_IN_NODEID = re.compile(r"\[(?:.*-)?(ep-\d{6}(?:-r\d+)?)(?:-.*)?\]$")


def read_resume_set(settings: Settings) -> tuple[set[str], bool]:
    """Node ids already in results.jsonl; repairs a torn last line (older crash)."""
    path = settings.output.folder / "results.jsonl"
    holder = RunLock(settings.output.folder / LOCK).live_holder()
    if holder is not None:  # its last line may be half-written now: repair nothing
        raise pytest.UsageError(folder_in_use(settings.output.folder, holder))
    try:
        rows, torn = scan(path, repair_torn_tail=True)
    except CorruptLine as exc:
        raise pytest.UsageError(
            f"--openenv-resume cannot read {exc.path}:{exc.line}: {exc}. Fix or move that "
            "file, or run without --openenv-resume (the file is then moved aside, not deleted)"
        ) from None
    except OSError as exc:  # e.g. results.jsonl is a directory, or unreadable
        raise pytest.UsageError(
            f"--openenv-resume cannot read {path}: {exc.strerror or exc}. It must be the "
            "results.jsonl file of an earlier run: move it away or pass another --openenv-output"
        ) from None
    return {row.key[1] for row in rows}, torn


def earlier_passes(settings: Settings) -> dict[str, dict[str, Any]]:
    """--openenv-resume: what the gate and card need of each row already in results.jsonl."""
    from ..dataset.jsonl import iter_records

    earlier: dict[str, dict[str, Any]] = {}
    for row in iter_records(settings.output.folder / "results.jsonl"):
        metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
        earlier[str(row.get("test", ""))] = {
            "reward": row.get("reward"),
            "turns": metrics.get("turns"),
            "env": row.get("env"),
            "policy": row.get("policy"),
            "model": row.get("model"),
        }
    return earlier


class Controller:
    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        service: EpisodeService,
        *,
        template: TemplateCheck | None = None,
    ) -> None:
        self.config = config
        #: --openenv-chat-template: what the check found before the run; rows checked at the end
        self.template = template
        self.settings = settings
        #: the families and policies of this process (a crashed episode's row names its policy)
        self.service = service
        self.secrets = KnownSecrets.from_settings(settings)
        self.writer = DatasetWriter(
            settings.output.folder, resume=settings.output.resume, secrets=self.secrets
        )
        # ownership (issue 14): one run per folder, and only a folder that is ours
        self.lock = RunLock(settings.output.folder / LOCK)
        self.claimed = False
        self.created_folder = False
        self.notes: list[str] = []
        self.tally = Tally()
        self.active = False
        self.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.write_error: str | None = None
        # publishing (issue 6): a missing Hub token is a usage error before any episode
        self.publisher = HubPublisher.from_settings(settings)
        # evaluation (issue 5): gate config is read here so a bad baseline is a usage error
        self.gate = GateConfig.from_settings(
            settings, invocation_dir=Path(config.invocation_params.dir)
        )
        self.passk = PassKTally(settings.run.repeats)
        self.other_failures = 0
        self.verdict: Verdict | None = None
        self.step_summary_error: str | None = None
        # reliability (issue 7): how far a run got, and what could not be saved
        self.session: pytest.Session | None = None
        self.expected: int | None = None
        self.exit_status: int | None = None
        self.unsaved = 0
        self.seen_tests: dict[str, dict[str, Any]] = {}
        self.slimmer = ReportSlimmer(config)
        #: episodes that failed or errored: with a passing gate, JUnit shows them as gated
        self.failed_episodes: set[str] = set()
        #: --openenv-resume: the earlier run's passing episodes count once, as passed, when
        #: their item is skipped, so gate and card cover the whole dataset, not the re-runs
        self.earlier = earlier_passes(settings) if settings.output.resume else {}
        # what a person sees (issue 22): the live line, report.html, a short end of run
        self.live: LiveStatus | None = None
        self.report_written = False
        config.pluginmanager.register(
            EndOfRun(
                full_reports=settings.output.failure_reports,
                link=self.report_link,
                excused=self.excused_by_gate,
            ),
            "openenv-end-of-run",
        )

    # -- hooks (registered as a plugin on the controller only) -----------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session
        self.live = LiveStatus.for_run(self.config, self.settings.output.progress)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # -n 0: this process collected the items itself
        self.expected = sum(1 for item in session.items if episode_id_from_nodeid(item.nodeid))
        self.claim_output()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # xdist: the controller never collects; every worker collects the same ids
        if self.expected is None:
            self.expected = sum(1 for nodeid in ids if episode_id_from_nodeid(nodeid))
            self.claim_output()  # xdist schedules nothing before every node has collected
        if isinstance(ids, list):
            self.slimmer.share_collection(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A worker died mid-episode: xdist's report has none of our fields, so add them."""
        episode_id = episode_id_from_nodeid(crashitem)
        if episode_id is not None:
            why = str(report.longrepr)
            if self.settings.run.concurrency not in (None, 1):
                # xdist names the item the worker was on; its run-ahead episodes died too
                why += (
                    "; with --openenv-concurrency other episodes of that worker were in "
                    "flight and may have caused it (they run again on another worker)"
                )
            self.decorate_crash_report(report, episode_id, why)

    @pytest.hookimpl(tryfirst=True, specname="pytest_runtest_logreport")
    def pytest_runtest_logreport_first(self, report: pytest.TestReport) -> None:
        if getattr(report, "openenv_episode_id", None) is not None:
            self.slimmer.share(report)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.on_report(report)
        self.show_progress()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.other_failures += 1

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.live is not None:
            self.live.close()  # before pytest writes its summary
        try:
            self.apply_gate(session)
            self.align_junit()
            self.finish(int(session.exitstatus))
        finally:
            self.release_output()
        push_failed = self.publisher is not None and self.publisher.failed
        if (self.write_error or push_failed) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.publisher is not None and self.publisher.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.live is not None:
            self.live.close()
        self.release_output()  # a session that ended before its sessionfinish

    # -- the output folder -----------------------------------------------------
    def claim_output(self) -> None:
        """Before any episode: refuse a foreign or busy folder, or a mismatched resume.

        Then hold the folder (lock), move an earlier run's files aside (without
        resume) and record this run's identity and marker in metadata.json.
        """
        if self.claimed or not self.expected or self.config.option.collectonly:
            return
        folder = self.settings.output.folder
        # what this run writes itself may sit inside the output folder
        invoked = Path(self.config.invocation_params.dir)
        own_paths = [
            invoked / path
            for path in (self.settings.llm.cache, self.config.getoption("xmlpath", None))
            if path
        ]
        problem = ownership_problem(folder, own_paths)
        if problem is not None:
            raise pytest.UsageError(problem)
        try:
            if not folder.exists():
                folder.mkdir(parents=True)
                self.created_folder = True
            self.lock.acquire()
        except FolderLocked as exc:
            self.release_output()
            raise pytest.UsageError(folder_in_use(folder, str(exc))) from None
        except OSError as exc:
            self.release_output()
            raise pytest.UsageError(
                f"--openenv-output={str(folder)!r} cannot be locked for this run: {exc}"
            ) from None
        self.claimed = True
        if self.lock.took_over is not None:
            self.warn(
                f"{self.lock.path}: the run that held this folder "
                f"({self.lock.took_over.describe()}) ended without releasing it; "
                "this run took it over"
            )
        if self.settings.output.resume:
            mismatch = resume_problem(folder, read_metadata(folder), self.identity())
            if mismatch is not None:
                self.release_output()
                raise pytest.UsageError(mismatch)
        try:
            self.writer.move_earlier_run_aside()
            self.writer.write_json(METADATA, self.metadata(finished=False))
        except OSError as exc:
            self.release_output()
            raise pytest.UsageError(
                f"--openenv-output={str(folder)!r} is not writable: {exc}"
            ) from None

    def release_output(self) -> None:
        if self.lock.held:
            self.lock.release()
        self.claimed = False
        if self.created_folder and not self.active:
            # made for a run that wrote nothing but its metadata: leave no trace
            for name in (METADATA,):
                with contextlib.suppress(OSError):
                    (self.settings.output.folder / name).unlink()
            with contextlib.suppress(OSError):
                self.settings.output.folder.rmdir()  # only if empty
            self.created_folder = False

    def warn(self, message: str) -> None:
        self.notes.append(f"WARNING: {message}")
        self.config.issue_config_time_warning(pytest.PytestWarning(message), stacklevel=2)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.active:
            return
        terminalreporter.section("openenv")
        for line in self.terminal_lines():
            terminalreporter.write_line(line)

    # -- reports ---------------------------------------------------------------
    def on_report(self, report: pytest.TestReport) -> None:
        episode_id = getattr(report, "openenv_episode_id", None)
        if episode_id is None or (report.when == "teardown" and report.failed):
            # not an episode's verdict: the gate never excuses it
            self.other_failures += int(report.failed)
            if episode_id is None:
                return
        self.active = True
        if report.outcome == "rerun":
            # pytest-rerunfailures: an attempt that is run again; only the last one counts
            # (and is written), so each episode is counted once with its final outcome
            with contextlib.suppress(AttributeError):
                del report.openenv_record  # type: ignore[attr-defined]
            self.slimmer.slim(report)
            return
        record = getattr(report, "openenv_record", None)
        brief = getattr(report, "openenv_brief", None)
        earlier = self.earlier.pop(report.nodeid, None) if report.skipped else None
        if earlier is not None:
            self.count_earlier_pass(report.nodeid, earlier)
        elif report.when == "setup" and report.skipped:
            self.tally.add_outcome("skipped")
        elif report.when == "setup" and report.failed:
            self.tally.add_outcome("errored")
            self.passk.add(report.nodeid, False)
            self.failed_episodes.add(report.nodeid)
        elif report.when == "call":
            self.tally.add_outcome("passed" if report.passed else "failed")
            if report.failed:
                self.failed_episodes.add(report.nodeid)
            self.passk.add(report.nodeid, report.passed)
            if brief is not None:
                self.tally.reward.add(float(brief["reward"]))
                self.tally.turns.add(int(brief["turns"]))
        elif report.when not in ("setup", "teardown") and report.failed:
            # xdist's report for an item whose worker died (when="???")
            self.tally.add_outcome("errored")
            self.passk.add(report.nodeid, False)
        if brief is not None:
            self.tally.prompt_tokens += int(brief.get("prompt_tokens", 0))
            self.tally.completion_tokens += int(brief.get("completion_tokens", 0))
            for key, bucket in (
                ("env", self.tally.envs),
                ("policy", self.tally.policies),
                ("model", self.tally.models),
            ):
                if brief.get(key):
                    bucket.add(brief[key])
        if record is not None:
            self.remember_test(report.nodeid, record)
            self._write(
                record,
                passed=report.when == "call" and report.passed,
                key=(episode_id, report.nodeid),
            )
            # Reports stay alive in the terminal reporter's stats for the whole session.
            del report.openenv_record  # type: ignore[attr-defined]
        self.slimmer.slim(report)

    def count_earlier_pass(self, nodeid: str, earlier: dict[str, Any]) -> None:
        self.tally.add_outcome("passed")
        self.tally.resumed += 1
        self.passk.add(nodeid, True)
        with contextlib.suppress(TypeError, ValueError):
            self.tally.reward.add(float(earlier["reward"]))
        with contextlib.suppress(TypeError, ValueError):
            self.tally.turns.add(int(earlier["turns"]))
        for key, bucket in (
            ("env", self.tally.envs),
            ("policy", self.tally.policies),
            ("model", self.tally.models),
        ):
            if earlier.get(key):
                bucket.add(str(earlier[key]))

    def _write(self, line: str, *, passed: bool, key: tuple[str, str]) -> None:
        if self.write_error is not None:
            self.unsaved += 1
            return
        try:
            self.writer.append(line, passed=passed, key=key)
        except OSError as exc:
            self.unsaved += 1
            why = exc.strerror or str(exc)
            self.write_error = f"cannot write to {self.writer.path_of(passed)}: {why}"
            self.stop(f"openenv: {self.write_error}")

    def stop(self, reason: str) -> None:
        """End the run after the items in flight: episodes that cannot be saved are waste."""
        if self.session is not None:
            self.session.shouldstop = reason
        # xdist's controller loop reads its own flag, not the session's
        dsession = self.config.pluginmanager.getplugin("dsession")
        if dsession is not None and not getattr(dsession, "shouldstop", False):
            dsession.shouldstop = reason
            from .dispatch import cancel_queued_items

            cancel_queued_items(dsession)

    def remember_test(self, nodeid: str, record: str) -> None:
        """Per test function (not per episode): what a crashed item's row is rebuilt from."""
        function = nodeid.rpartition("[")[0]
        if function in self.seen_tests:
            return
        row = json.loads(record)
        self.seen_tests[function] = {
            "env": row.get("env"),
            "policy": row.get("policy"),
            "base_seed": int(row["seed"]) - int(row.get("extra", {}).get("index", 0)),
            "config": row.get("task", {}).get("config"),
        }

    def decorate_crash_report(self, report: pytest.TestReport, episode_id: str, why: str) -> None:
        from ..episode.record import brief, dumps_record, placeholder_row
        from ..episode.spec import EpisodeSpec

        index_text, _, repeat_text = episode_id.removeprefix("ep-").partition("-r")
        index, repeat = int(index_text), int(repeat_text or 0)
        # A sibling episode of the same test tells env, policy and seeds; without one the
        # run's settings do (exact for the bundled test and for unmarked test functions).
        known = self.seen_tests.get(report.nodeid.rpartition("[")[0], {})
        env = known.get("env") or self.settings.run.env or "unknown"
        config = known.get("config") or json.dumps(self.settings.run.config, sort_keys=True)
        policy = known.get("policy") or self.settings.run.policy
        if policy is None and env != "unknown":
            policy = self.service.family(env, config).default_policy()
        spec = EpisodeSpec(
            env=env,
            index=index,
            seed=known.get("base_seed", self.settings.run.seed) + index,
            repeat=repeat,
            repeats=self.settings.run.repeats,
            policy=policy or "unknown",
            config=config,
            prefix=self.settings.run.id_prefix or "",
        )
        episode_id = spec.episode_id
        reason = f"{why} (the process running this episode died: os._exit, a signal or OOM)"
        record = placeholder_row(spec, reason, test=report.nodeid)
        report.openenv_episode_id = episode_id  # type: ignore[attr-defined]
        report.openenv_record = dumps_record(record)  # type: ignore[attr-defined]
        report.openenv_brief = brief(record)  # type: ignore[attr-defined]

    # -- session end -----------------------------------------------------------
    def figures(self) -> dict[str, Any]:
        return self.tally.figures()

    def summary(self, exitstatus: int) -> dict[str, Any]:
        return {
            "figures": self.figures(),
            "passk": self.passk.result().to_json(),
            "gate": self.verdict.to_json() if self.verdict else None,
            "exit_status": int(exitstatus),
            "output": str(self.writer.folder),
            "episodes_expected": self.expected,
            "interrupted": int(exitstatus) == pytest.ExitCode.INTERRUPTED,
        }

    def apply_gate(self, session: pytest.Session) -> None:
        """With a gate set the gate decides the exit code; other failures still fail it."""
        if not (self.active and self.gate.active):
            return
        figures = RunFigures(
            passed=self.tally.passed,
            ran=self.tally.ran,
            reward=self.tally.reward,
            passk=self.passk.result(),
        )
        stopped = session.shouldfail or session.shouldstop
        self.verdict = evaluate(
            self.gate,
            figures,
            other_failures=self.other_failures,
            stopped_early=str(stopped) if stopped else None,
        )
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = (
                pytest.ExitCode.OK if self.verdict.passed else pytest.ExitCode.TESTS_FAILED
            )

    def align_junit(self) -> None:
        """A passing gate: the episodes it accepted are not failures in JUnit XML either."""
        from ..report.junit import excuse_gated_episodes, junit_path, testcase_address

        if self.verdict is None or not self.verdict.passed or not self.failed_episodes:
            return
        path = junit_path(self.config)
        if path is None or not path.exists():
            return
        prefix = self.config.getoption("junitprefix", None)
        addresses = {testcase_address(nodeid, prefix) for nodeid in self.failed_episodes}
        try:
            excuse_gated_episodes(path, addresses, "accepted by the openenv gate (exit code 0)")
        except (OSError, SyntaxError) as exc:  # ET.ParseError is a SyntaxError
            self.notes.append(f"WARNING: {path} was left as pytest wrote it: {exc}")

    def metadata(self, *, finished: bool = True) -> dict[str, Any]:
        from .. import __version__

        return {
            **MARKER,
            "tool": "pytest-openenv",
            "version": __version__,
            "started_at": self.started_at,
            "finished_at": (
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if finished else None
            ),
            "identity": self.identity(),
            "settings": self.settings.public(),
            "python": platform.python_version(),
            "pytest": pytest.__version__,
            "platform": sys.platform,
            "license": self.settings.publish.license,
            "evaluation": {"repeats": self.passk.k, **self.gate.to_json()},
            "chat_template": self.template.to_json() if self.template else None,
        }

    def finish(self, exitstatus: int) -> None:
        self.exit_status = exitstatus
        if not self.active:
            return
        try:
            if not self.writer.opened and not self.settings.output.folder.exists():
                self.writer.open()
            self.writer.finalize()
            if self.writer.restored:
                self.write_error = self.write_error or (
                    f"output folder {self.settings.output.folder} was deleted or replaced "
                    "during the run; the rows written so far were restored to "
                    + ", ".join(str(path) for path in self.writer.restored)
                )
            if self.template is not None:
                self.template.check_rows(self.writer.folder / RESULTS)
                self.notes.extend(self.template.terminal_lines())
            summary = self.summary(exitstatus)
            metadata = self.metadata()
            self.writer.write_json(METADATA, metadata)
            self.writer.write_json(SUMMARY, summary)
            self.write_report()
            if self.card_is_ours():
                card = render_card(
                    self.writer.folder,
                    summary,
                    metadata,
                    repo_id=self.settings.publish.repo,
                )
                self.writer.write_text(CARD, card)
            else:
                self.notes.append(
                    f"{self.writer.folder / CARD} has no generated-card marker (edited by "
                    "hand): kept as it is"
                )
        except OSError as exc:
            self.write_error = self.write_error or f"cannot write to {self.writer.folder}: {exc}"
        self.publish(exitstatus)
        markdown = summary_markdown(
            self.figures(), self.passk.result(), self.verdict, str(self.settings.output.folder)
        )
        self.step_summary_error = append_step_summary(self.secrets.scrub(markdown))

    def show_progress(self) -> None:
        live = self.live
        if live is not None and self.tally.total and live.due():
            gate = live.gate(lambda: gate_so_far(self.gate, self.tally, self.passk))
            live.show(status_text(self.tally, self.expected, gate))

    def write_report(self) -> None:
        """report.html and the card's chart; a failure is a warning, never a failed run."""
        from ..report.page import write_report

        try:
            write_report(self.writer.folder, secrets=self.secrets)
        except Exception as exc:  # the data files are written; the report is a view of them
            self.notes.append(f"WARNING: {self.writer.folder / REPORT} was not written: {exc}")
        else:
            self.report_written = True

    def report_link(self, episode_id: str, nodeid: str) -> str | None:
        """``file://.../report.html#ep-000123``: the episode's transcript, if there is a report."""
        if not self.report_written:
            return None
        from urllib.parse import quote

        from ..report.page.rows import anchor

        function = nodeid.rpartition("[")[0] or nodeid
        fragment = anchor(episode_id, function, len(self.seen_tests) > 1)
        return (self.writer.folder / REPORT).as_uri() + "#" + quote(fragment, safe="@:/-._~")

    def excused_by_gate(self) -> set[str] | None:
        """Episodes a passing gate accepted (pytest counts them as ``gated``), else None."""
        if self.verdict is None or not self.verdict.passed:
            return None
        return self.failed_episodes

    def card_is_ours(self) -> bool:
        card = self.writer.folder / CARD
        return not card.exists() or card_is_generated(self.writer.folder)

    def publish(self, exitstatus: int) -> None:
        """Push the final output folder to the Hub, once (see dataset/hub.py)."""
        if self.publisher is None:
            return
        if self.write_error:
            self.publisher.skip(self.writer.folder, "the output folder was not written completely")
        elif exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            self.publisher.skip(self.writer.folder, f"the run ended early (exit code {exitstatus})")
        else:
            self.publisher.publish(self.writer.folder)

    def run_policy(self) -> str | None:
        """The run's policy: named, else the teacher of the run's env family."""
        env = self.settings.run.env
        if self.settings.run.policy or not env:
            return self.settings.run.policy
        config = json.dumps(self.settings.run.config, sort_keys=True)
        return self.service.family(env, config).default_policy()

    def identity(self) -> dict[str, Any]:
        return run_identity(self.settings, self.run_policy())

    def stronger_teacher(self) -> str | None:
        """``expert``, if it plays the run's env and this run did not use it; else None."""
        env = self.settings.run.env
        if not env or "expert" in self.tally.policies or not self.tally.failed:
            return None
        try:
            family = self.service.family(env, json.dumps(self.settings.run.config, sort_keys=True))
        except Exception:  # a hint is not worth a failed summary
            return None
        return "expert" if family.offers_expert and family.expert_problem() is None else None

    def terminal_lines(self) -> list[str]:
        lines = summary_lines(
            self.figures(),
            str(self.settings.output.folder),
            gated=self.gate.active,
            teacher=self.stronger_teacher(),
        )
        passk = self.passk.result()
        if passk.k > 1:
            lines.append(
                f"repeats: {passk.k} per seed over {passk.problems} seed(s): "
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
        if self.verdict is not None:
            lines.extend(self.verdict.lines())
        if self.step_summary_error:
            lines.append(f"WARNING: {self.step_summary_error}")
        for moved in self.writer.moved:
            stem, _, suffix = moved.name.partition(".")
            lines.append(f"earlier run's {stem}.{suffix.rpartition('.')[2]} kept as {moved}")
        lines.extend(self.notes)
        if self.exit_status == pytest.ExitCode.INTERRUPTED:
            of = f" of {self.expected}" if self.expected is not None else ""
            lines.append(
                f"interrupted after {self.tally.total}{of} episodes; everything finished is "
                f"in {self.writer.folder}. Run the same command with --openenv-resume to finish"
            )
        if self.publisher is not None:
            lines.extend(self.publisher.terminal_lines())
        if self.write_error:
            lines.append(f"ERROR: {self.write_error}")
            if self.unsaved:
                lines.append(
                    f"ERROR: {self.unsaved} finished episode(s) could not be saved; fix the "
                    "output folder and run again with --openenv-resume to redo them"
                )
        return [self.secrets.scrub(line) for line in lines]


PASSK_NAMES = ("pass@1", "pass@k", "pass^k")


def folder_in_use(folder: Path, holder: str) -> str:
    return (
        f"--openenv-output={str(folder)!r} is in use by another run ({holder}): two runs "
        "writing one folder would mix their rows. Wait for it to end or pass another "
        f"--openenv-output; if that run is gone, delete {folder / LOCK}"
    )


def episode_id_from_nodeid(nodeid: str) -> str | None:
    match = EPISODE_ID_IN_NODEID.search(nodeid)
    return match.group(1) if match else None
