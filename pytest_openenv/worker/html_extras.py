"""With pytest-html active (``--html``), each episode item carries its transcript.

The transcript goes into the item's report as a pytest-html ``extras.html`` entry, made
from the same row the controller writes (so secrets are already scrubbed from it) with
every value HTML-escaped: a model reply holding markup is shown as text. On the process
that writes the HTML report (``HtmlRows``), an episode's row shows the episode's own
duration (its item's setup only waits for it when episodes run ahead, and pytest-html
adds setup, call and teardown) and links to the episode in the run's ``report.html``.
Nothing here runs unless pytest-html is installed and asked for a report.
"""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path
from typing import Any

import pytest

from ..episode.outcome import outcome_of

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def wanted(config: pytest.Config) -> bool:
    return bool(config.getoption("htmlpath", None)) and config.pluginmanager.hasplugin("html")


def _text(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    # control characters (ANSI escapes) made visible, never obeyed by a terminal-like view
    text = _CONTROL.sub(
        lambda m: chr(0x2421 if m.group() == "\x7f" else 0x2400 + ord(m.group())), text
    )
    return escape(text)


def transcript_html(record: dict[str, Any]) -> str:
    verify = record.get("verify_metrics") or {}
    extra = record.get("extra") or {}
    failure = record.get("failure") or {}
    reason = failure.get("message") if failure.get("outcome") == "error" else extra.get("reason")
    parts = [
        '<div class="openenv-transcript">',
        f"<p><b>{_text(record.get('episode_id'))}</b> seed {_text(record.get('seed'))}: "
        f"{_text(verify.get('outcome'))}, reward {_text(record.get('reward'))}</p>",
    ]
    if reason:
        parts.append(f"<p>reason: {_text(reason)}</p>")
    trace = list(record.get("tool_trace") or [])
    calls = 0
    for message in record.get("messages") or []:
        parts.append(f"<p><b>{_text(message.get('role'))}</b></p>")
        if message.get("content"):
            parts.append(f"<pre>{_text(message.get('content'))}</pre>")
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            step = trace[calls] if calls < len(trace) else {}
            calls += 1
            result = step.get("result") or {}
            flag = f" <b>tool error: {_text(result['error'])}</b>" if result.get("error") else ""
            parts.append(
                f"<pre>tool call {_text(function.get('name'))}({_text(function.get('arguments'))})"
                f" step reward {_text(result.get('reward'))}{flag}</pre>"
            )
    parts.append("</div>")
    return "".join(parts)


def attach_transcript(report: pytest.TestReport) -> None:
    """Add the episode's transcript to ``report.extras`` (call report, or setup on error)."""
    outcome = outcome_of(report)
    if outcome is None or outcome.line is None:
        return
    from pytest_html import extras

    record = json.loads(outcome.line)
    report.extras = [*getattr(report, "extras", []), extras.html(transcript_html(record))]  # type: ignore[attr-defined]


def duration_text(seconds: float) -> str:
    """As pytest-html writes a duration (``340 ms``, ``00:01:05``)."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    hours, rest = divmod(seconds, 3600)
    minutes, rest = divmod(rest, 60)
    return f"{int(hours):02d}:{int(minutes):02d}:{round(rest):02d}"


class HtmlRows:
    """pytest-html's row of an episode item: the episode's duration and its report.html link.

    Registered where pytest-html writes its report (the xdist controller, or the one
    process), which also writes ``report.html`` at the end of the run.
    """

    name = "openenv-html-rows"

    def __init__(self, config: pytest.Config, folder: Path) -> None:
        self.config = config
        self.report_page = (folder / "report.html").as_uri()

    def address(self, episode_id: str, nodeid: str) -> str:
        """The episode in report.html: its id and test function (unique in every run)."""
        from urllib.parse import quote

        function = nodeid.rpartition("[")[0] or nodeid
        return self.report_page + "#" + quote(f"{episode_id}@{function}", safe="@:/-._~")

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        outcome = outcome_of(report)
        verdict = report.when == "call" or (report.when == "setup" and report.failed)
        if outcome is None or not verdict or len(cells) < 4:
            return
        seconds = outcome.wall_time_s
        if seconds is not None:
            formatted = self.config.hook.pytest_html_duration_format(duration=seconds)
            text = formatted[0] if formatted else duration_text(float(seconds))
            cells[2] = f'<td class="col-duration">{escape(str(text))}</td>'
        link = (
            f'<a target="_blank" href="{escape(self.address(outcome.episode_id, report.nodeid))}" '
            'class="col-links__extra url">episode in report.html</a>'
        )
        cells[3] = cells[3].replace("</td>", link + "</td>", 1)
