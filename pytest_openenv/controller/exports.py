"""Controller side: the files made from the finished rows, for neighbouring tools.

``preferences.jsonl`` (DPO pairs, ``dataset/preferences.py``) when the run plays a seed
more than once (repeats, or several models or policies), written after the rows are
final and before the card (whose front-matter lists it); inspect eval logs
(``--openenv-inspect-log``, ``report/inspect_log``) last, once every file is final.
Neither can fail the run: the dataset is written, these are views of it, so a problem
is a warning in the summary. A missing inspect-ai is a usage error before any episode.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ..config.settings import Settings
from ..dataset.writer import PREFERENCES
from ..util.secrets import KnownSecrets
from .template import TemplateCheck

INSPECT_EXTRA = "pip install 'pytest-openenv[inspect]'"


class FolderExports:
    def __init__(self, settings: Settings, secrets: KnownSecrets, notes: list[str]) -> None:
        self.settings = settings
        self.secrets = secrets
        self.notes = notes
        self.pairs: int | None = None
        self.logs: list[Path] = []
        logs = settings.output.inspect_log
        if logs is not None and importlib.util.find_spec("inspect_ai") is None:
            raise pytest.UsageError(
                f"--openenv-inspect-log={str(logs)!r} writes inspect-ai eval logs, and "
                f"inspect-ai is not installed: {INSPECT_EXTRA} (or leave the option out)"
            )

    @property
    def wants_pairs(self) -> bool:
        run, llm = self.settings.run, self.settings.llm
        return run.repeats > 1 or len(llm.models) > 1 or len(run.policies) > 1

    def write_preferences(self, folder: Path, template: TemplateCheck | None) -> None:
        if not self.wants_pairs:
            return
        from ..dataset.preferences import write_preferences

        try:
            self.pairs = write_preferences(folder, self.secrets)
        except OSError as exc:
            self.notes.append(f"WARNING: {folder / PREFERENCES} was not written: {exc}")
            return
        if template is not None:
            template.check_pairs(folder / PREFERENCES)

    def write_inspect_logs(self, folder: Path) -> None:
        logs = self.settings.output.inspect_log
        if logs is None:
            return
        from ..report.inspect_log.write import write_inspect_logs

        try:
            written = write_inspect_logs(folder, logs, self.secrets)
        except Exception as exc:  # the dataset is written; the logs are a view of it
            self.notes.append(f"WARNING: no inspect eval log was written to {logs}: {exc}")
            return
        self.logs = [log.path for log in written]

    def terminal_lines(self) -> list[str]:
        lines = []
        if self.pairs is not None:
            lines.append(
                f"preference pairs: {self.pairs} (a passing and a failing episode of one "
                f"seed each) in {PREFERENCES}"
            )
        if self.settings.output.inspect_log is not None and self.logs:
            lines.append(
                f"inspect logs: {len(self.logs)} (one per test, env and model) in "
                f"{self.settings.output.inspect_log}; open them with `inspect view "
                f"--log-dir {self.settings.output.inspect_log}`"
            )
        return lines
