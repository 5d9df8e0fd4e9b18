"""Controller side: the only writer of the output folder, and the run's figures.

Runs in the pytest process that receives every report: the xdist controller,
or the single process with ``-n 0``. It activates at the first episode report,
so a run that collects no episode test writes nothing and prints nothing.
"""

from __future__ import annotations

import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .dataset.card import build_card
from .dataset.jsonl import CorruptLine, scan
from .dataset.writer import CARD, METADATA, SUMMARY, DatasetWriter
from .options import Settings
from .report.summary import summary_lines
from .report.tally import Tally

EPISODE_ID_IN_NODEID = re.compile(r"\[(?:.*-)?(ep-\d{6}(?:-r\d+)?)(?:-.*)?\]$")


def read_resume_set(settings: Settings) -> tuple[set[str], bool]:
    """Node ids already in results.jsonl; repairs a torn last line (older crash)."""
    path = settings.output / "results.jsonl"
    try:
        rows, torn = scan(path, repair_torn_tail=True)
    except CorruptLine as exc:
        raise pytest.UsageError(
            f"--openenv-resume cannot read {exc.path}:{exc.line}: {exc}. Fix or move that "
            "file, or run without --openenv-resume (the file is then moved aside, not deleted)"
        ) from None
    return {row.key[1] for row in rows}, torn


class Controller:
    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.writer = DatasetWriter(settings.output, resume=settings.resume)
        self.tally = Tally()
        self.active = False
        self.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.write_error: str | None = None

    # -- hooks (registered as a plugin on the controller only) -----------------
    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.on_report(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.finish(int(exitstatus))
        if self.write_error and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.active:
            return
        terminalreporter.section("openenv")
        for line in self.terminal_lines():
            terminalreporter.write_line(line)

    # -- reports ---------------------------------------------------------------
    def on_report(self, report: pytest.TestReport) -> None:
        episode_id = getattr(report, "openenv_episode_id", None)
        if episode_id is None:
            return
        self.active = True
        record = getattr(report, "openenv_record", None)
        brief = getattr(report, "openenv_brief", None)
        if report.when == "setup" and report.skipped:
            self.tally.add_outcome("skipped")
        elif report.when == "setup" and report.failed:
            self.tally.add_outcome("errored")
        elif report.when == "call":
            self.tally.add_outcome("passed" if report.passed else "failed")
            if brief is not None:
                self.tally.reward.add(float(brief["reward"]))
                self.tally.turns.add(int(brief["turns"]))
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
            self._write(record, passed=report.when == "call" and report.passed)
            # Reports stay alive in the terminal reporter's stats for the whole session.
            del report.openenv_record  # type: ignore[attr-defined]

    def _write(self, line: str, *, passed: bool) -> None:
        if self.write_error is not None:
            return
        try:
            self.writer.append(line, passed=passed)
        except OSError as exc:
            self.write_error = f"cannot write to {self.settings.output}: {exc}"

    # -- session end -----------------------------------------------------------
    def figures(self) -> dict[str, Any]:
        return self.tally.figures()

    def summary(self, exitstatus: int) -> dict[str, Any]:
        return {
            "figures": self.figures(),
            "exit_status": int(exitstatus),
            "output": str(self.settings.output),
        }

    def metadata(self) -> dict[str, Any]:
        from . import __version__

        return {
            "tool": "pytest-openenv",
            "version": __version__,
            "started_at": self.started_at,
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "settings": self.settings.public(),
            "python": platform.python_version(),
            "pytest": pytest.__version__,
            "platform": sys.platform,
        }

    def finish(self, exitstatus: int) -> None:
        if not self.active:
            return
        try:
            if not self.writer.opened and not self.settings.output.exists():
                self.writer.open()
            self.writer.finalize()
            summary = self.summary(exitstatus)
            metadata = self.metadata()
            self.writer.write_json(METADATA, metadata)
            self.writer.write_json(SUMMARY, summary)
            self.writer.write_text(CARD, build_card(summary, metadata))
        except OSError as exc:
            self.write_error = self.write_error or f"cannot write to {self.settings.output}: {exc}"

    def terminal_lines(self) -> list[str]:
        lines = summary_lines(self.figures(), str(self.settings.output))
        for moved in self.writer.moved:
            lines.append(f"earlier run's {moved.name.split('.')[0]}.jsonl kept as {moved}")
        if self.write_error:
            lines.append(f"ERROR: {self.write_error}")
        return lines


def episode_id_from_nodeid(nodeid: str) -> str | None:
    match = EPISODE_ID_IN_NODEID.search(nodeid)
    return match.group(1) if match else None


def relative_output(path: Path, rootdir: Path) -> str:
    try:
        return str(path.relative_to(rootdir))
    except ValueError:
        return str(path)
