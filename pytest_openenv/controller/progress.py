"""The live status line of a run (controller only).

One line says how far the run is and how it goes: episodes done/total, passed/failed/
errored, pass rate with its Wilson interval, mean reward, episodes/s, ETA, tokens in/out
and, with a gate set, the gate's verdict so far.

- On a terminal the line stays pinned under pytest's own output and updates in place:
  ``PinnedLine`` wraps the file pytest's terminal writer writes to, erases the status
  line before each of pytest's writes and draws it again below them, then puts the cursor
  back where pytest left it. So pytest's dots, percentages and xdist's lines read as
  without it, and the last screen shows no trace of the status line once the run ends.
- Elsewhere (CI logs) it prints a plain line every ``--openenv-progress`` seconds,
  through pytest's terminal reporter, at the first episode report after each interval.

``-q`` keeps it, ``-qq`` and ``--openenv-progress=off`` silence it. Updates happen in the
hook that receives each report (the main thread, outside output capture), at most every
``REDRAW_SECONDS`` on a terminal, so a run pays a few microseconds per episode for it.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

import pytest

from ..report.stats import wilson_interval

if TYPE_CHECKING:
    from ..report.gates import GateConfig
    from ..report.passk import PassKTally
    from ..report.tally import Tally

#: the fastest the line is recomputed on a terminal (pytest's own writes redraw it as is)
REDRAW_SECONDS = 0.2
#: the gate is evaluated at most this often (pass@k walks every seed)
GATE_SECONDS = 2.0
ERASE_BELOW = "\x1b[J"
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def _count(value: float) -> str:
    if value >= 10_000_000:
        return f"{value / 1_000_000:.0f}M"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1_000:.0f}k"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    return f"{value:.0f}"


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def status_text(
    tally: Tally, expected: int | None, gate: str | None = None, now: float | None = None
) -> str:
    """The status line for the figures so far (``gate``: the verdict so far, if gated)."""
    now = time.monotonic() if now is None else now
    done = tally.total
    parts = [f"openenv {done}/{expected}" if expected else f"openenv {done}"]
    counts = f"{tally.passed} passed, {tally.failed} failed, {tally.errored} errored"
    if tally.skipped:
        counts += f", {tally.skipped} skipped"
    parts.append(counts)
    if tally.ran:
        low, high = wilson_interval(tally.passed, tally.ran)
        rate = tally.passed / tally.ran
        parts.append(f"pass {100 * rate:.1f}% [{100 * low:.1f}-{100 * high:.1f}]")
    if gate:
        parts.append(f"gate {gate}")
    mean = tally.reward.mean
    if mean is not None:
        parts.append(f"reward {mean:.3g}")
    elapsed = now - tally.started
    if elapsed > 0 and done:
        speed = done / elapsed
        parts.append(f"{speed:.1f} ep/s")
        if expected and expected > done:
            parts.append(f"ETA {_duration((expected - done) / speed)}")
    if tally.prompt_tokens or tally.completion_tokens:
        parts.append(
            f"tokens {_count(tally.prompt_tokens)} in / {_count(tally.completion_tokens)} out"
        )
    return " | ".join(parts)


def gate_so_far(gate: GateConfig, tally: Tally, passk: PassKTally) -> str | None:
    """``passing``/``failing`` by the gate's rules on the episodes so far; None: no gate."""
    if not gate.active or not tally.ran:
        return None
    from ..report.gates import RunFigures, evaluate
    from ..report.passk import PassAtK

    # the pass@1 checks read only the counts: skip walking every seed for pass@k
    unused = PassAtK(passk.k, 0, 0, None, None, None)
    scores = unused if gate.metric == "pass@1" else passk.result()
    figures = RunFigures(
        passed=tally.passed,
        ran=tally.ran,
        reward=tally.reward,
        passk=scores,
        judged=tally.passed + tally.failed,
    )
    verdict = evaluate(gate, figures)
    return "passing" if verdict.gate_passed else "failing"


def visible_width(text: str) -> int:
    return len(_ESCAPES.sub("", text))


class PinnedLine:
    """A text file that keeps one status line drawn under everything written through it.

    Before each write the status line is erased (``ESC [J`` from the cursor, which sits at
    the end of the last written text); after it the line is drawn on the row below and
    the cursor goes back up to the column where the text ended, so the next write
    continues exactly where it would have without the status line.
    """

    def __init__(self, file: IO[str], width: Callable[[], int] | None = None) -> None:
        self.file = file
        self._width = width or (lambda: shutil.get_terminal_size().columns)
        self._status = ""
        self._column = 0
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.file, name)

    def write(self, data: str) -> int:
        with self._lock:
            if self._status:
                self.file.write(ERASE_BELOW)
            written = self.file.write(data)
            self._track(data)
            if self._status:
                self._draw()
            return written

    def flush(self) -> None:
        self.file.flush()

    def show(self, status: str) -> None:
        with self._lock:
            width = max(self._width(), 20)
            self._status = status[: width - 1]
            self.file.write(ERASE_BELOW)
            self._draw()
            self.file.flush()

    def clear(self) -> None:
        with self._lock:
            if self._status:
                self.file.write(ERASE_BELOW)
                self.file.flush()
            self._status = ""

    def _track(self, data: str) -> None:
        cut = max(data.rfind("\n"), data.rfind("\r"))
        tail = data if cut < 0 else data[cut + 1 :]
        self._column = (0 if cut >= 0 else self._column) + visible_width(tail)

    def _draw(self) -> None:
        column = self._column % max(self._width(), 1)
        self.file.write(f"\n{self._status}\x1b[1A\x1b[{column + 1}G")


class LiveStatus:
    """The status line of one run: when to recompute it, and where it goes."""

    def __init__(
        self,
        reporter: Any,
        *,
        pinned: PinnedLine | None,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reporter = reporter
        self.pinned = pinned
        self.interval = REDRAW_SECONDS if pinned is not None else interval
        self.clock = clock
        self._last = clock() if pinned is None else float("-inf")
        self._gate_at = float("-inf")
        self._gate: str | None = None

    @classmethod
    def for_run(cls, config: pytest.Config, seconds: float | None) -> LiveStatus | None:
        """None when silenced (``off``, ``-qq``) or when pytest shows nothing (no reporter)."""
        if seconds is None or config.get_verbosity() <= -2:
            return None
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        writer = getattr(reporter, "_tw", None)
        file = getattr(writer, "_file", None)
        if file is None:
            return None
        pinned = None
        # with -s a test's own prints reach the terminal past pytest's writer: they would
        # land on the pinned row, so the line goes out plain, between pytest's lines
        if _is_terminal(file) and config.getoption("capture", "fd") != "no":
            pinned = PinnedLine(file)
            writer._file = pinned  # type: ignore[union-attr]
        return cls(reporter, pinned=pinned, interval=seconds)

    def due(self) -> bool:
        return self.clock() - self._last >= self.interval

    def gate(self, verdict: Callable[[], str | None]) -> str | None:
        """The gate's verdict so far, re-evaluated at most every ``GATE_SECONDS``."""
        now = self.clock()
        if self._gate is None or now - self._gate_at >= GATE_SECONDS:
            self._gate_at = now
            self._gate = verdict()
        return self._gate

    def show(self, text: str) -> None:
        self._last = self.clock()
        if self.pinned is not None:
            self.pinned.show(text)
            return
        # on its own line: pytest's dots (under xdist written without a line of their
        # own, so ``write_line`` alone would append the status to them) end first
        self.reporter.ensure_newline()
        writer = getattr(self.reporter, "_tw", None)
        if writer is not None and getattr(writer, "width_of_current_line", 0):
            writer.line()
        self.reporter.write_line(text)

    def close(self) -> None:
        """Erase the line and give pytest its file back (before the terminal summary)."""
        pinned, self.pinned = self.pinned, None
        if pinned is None:
            return
        pinned.clear()
        writer = getattr(self.reporter, "_tw", None)
        if writer is not None and getattr(writer, "_file", None) is pinned:
            writer._file = pinned.file


def _is_terminal(file: Any) -> bool:
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError, OSError):
        return False
