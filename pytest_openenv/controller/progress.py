"""The live status line of a run (controller only).

One line says how far the run is and how it goes: episodes done/total, passed/failed/
errored, pass rate with its Wilson interval, mean reward, episodes/s (seconds per episode
below one a second), ETA, tokens in/out and, with a gate set, the gate's verdict on the
very counts shown. Pace and ETA are measured from the first episode report (which carries
the workers' start-up) to now, so they move while a slow model keeps the next one waiting.

- On a terminal the line stays pinned under pytest's own output and updates in place:
  ``PinnedLine`` wraps the file pytest's terminal writer writes to, erases the status
  line before each of pytest's writes and draws it again below them, then puts the cursor
  back where pytest left it. So pytest's dots, percentages and xdist's lines read as
  without it, and the last screen shows no trace of the status line once the run ends.
- Elsewhere (CI logs) it prints a plain line every ``--openenv-progress`` seconds,
  through pytest's terminal reporter, at the first episode report after each interval.

``-q`` keeps it, ``-qq`` and ``--openenv-progress=off`` silence it. Updates happen in the
hook that receives each report (the main thread, outside output capture), at most every
``REDRAW_SECONDS`` on a terminal, so a run pays a few microseconds per episode for it; on
a terminal a ticker thread also redraws the last snapshot every ``TICK_SECONDS``, its pace
and ETA recomputed, so they move while no report comes.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import pytest

from ..report.stats import wilson_interval

if TYPE_CHECKING:
    from ..report.gates import GateConfig
    from ..report.passk import PassKTally
    from ..report.tally import Tally

#: the fastest the line is recomputed on a terminal (pytest's own writes redraw it as is)
REDRAW_SECONDS = 0.2
#: a pass@k gate is evaluated at most this often (it walks every seed); a pass@1 gate
#: reads only the counts, and is judged on every new snapshot of them
GATE_SECONDS = 2.0
#: how often a pinned line's pace and ETA are recomputed while no report comes
TICK_SECONDS = 1.0
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


def _pace(speed: float) -> str:
    """Episodes per second, or seconds per episode when that says more (a slow model)."""
    if speed >= 1:
        return f"{speed:.1f} ep/s"
    seconds = 1 / speed
    if seconds < 10:
        return f"{seconds:.1f} s/ep"
    if seconds < 60:
        return f"{seconds:.0f} s/ep"
    return f"{_duration(seconds)}/ep"


@dataclass(frozen=True)
class Snapshot:
    """The line's figures at one moment: counts, rate, gate and tokens read together (the
    gate judges these very counts); only the pace and the ETA move with the clock."""

    head: tuple[str, ...]
    tail: tuple[str, ...]
    done: int
    expected: int | None
    #: the first episode report (its time, and the episodes it made): the pace is measured
    #: from there, so the workers' start-up it carried does not stretch every ETA
    first_at: float | None
    first_done: int

    @classmethod
    def of(cls, tally: Tally, expected: int | None, gate: str | None = None) -> Snapshot:
        done = tally.total
        head = [f"openenv {done}/{expected}" if expected else f"openenv {done}"]
        counts = f"{tally.passed} passed, {tally.failed} failed, {tally.errored} errored"
        if tally.skipped:
            counts += f", {tally.skipped} skipped"
        head.append(counts)
        if tally.ran:
            low, high = wilson_interval(tally.passed, tally.ran)
            rate = tally.passed / tally.ran
            head.append(f"pass {100 * rate:.1f}% [{100 * low:.1f}-{100 * high:.1f}]")
        if gate:
            head.append(f"gate {gate}")
        mean = tally.reward.mean
        if mean is not None:
            head.append(f"reward {mean:.3g}")
        tail = []
        if tally.prompt_tokens or tally.completion_tokens:
            tokens = f"tokens {_count(tally.prompt_tokens)} in / {_count(tally.completion_tokens)}"
            tail.append(tokens + (" out replayed" if tally.replayed else " out"))
        return cls(
            tuple(head),
            tuple(tail),
            done,
            expected,
            tally.first_report_at,
            tally.first_report_count,
        )

    def speed(self, now: float) -> float | None:
        """Episodes per second since the first report, to ``now`` (a long wait for the next
        report slows it, as it should); None until a second report."""
        if self.first_at is None:
            return None
        since, done = now - self.first_at, self.done - self.first_done
        return done / since if done > 0 and since > 0 else None

    def render(self, now: float) -> str:
        parts = list(self.head)
        speed = self.speed(now)
        if speed:
            parts.append(_pace(speed))
            if self.expected and self.expected > self.done:
                parts.append(f"ETA {_duration((self.expected - self.done) / speed)}")
        return " | ".join([*parts, *self.tail])


def status_text(
    tally: Tally, expected: int | None, gate: str | None = None, now: float | None = None
) -> str:
    """The status line for the figures so far (``gate``: the verdict so far, if gated)."""
    return Snapshot.of(tally, expected, gate).render(time.monotonic() if now is None else now)


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
    """The status line of one run: when to recompute it, and where it goes.

    On a terminal a ticker thread redraws the last snapshot every ``tick`` seconds, so the
    pace and the ETA move while no report comes (a slow model); it reads only the snapshot,
    never the counts the main thread is changing.
    """

    def __init__(
        self,
        reporter: Any,
        *,
        pinned: PinnedLine | None,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        tick: float = TICK_SECONDS,
    ) -> None:
        self.reporter = reporter
        self.pinned = pinned
        self.interval = REDRAW_SECONDS if pinned is not None else interval
        self.clock = clock
        self.tick = tick
        self._last = clock() if pinned is None else float("-inf")
        #: the snapshot shown, the counts it was taken at and when its gate was judged
        self._snapshot: Snapshot | None = None
        self._counts: tuple[int, ...] | None = None
        self._judged_at = float("-inf")
        self._closing = threading.Event()
        self._ticker: threading.Thread | None = None

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

    def update(
        self,
        tally: Tally,
        expected: int | None,
        verdict: Callable[[], str | None],
        *,
        costly: bool = False,
    ) -> None:
        """Show the run as it stands: a new snapshot when the counts changed, its gate
        judged on those counts (``costly``, a pass@k gate walking every seed: at most
        every ``GATE_SECONDS``, the line keeping the counts it judged until then)."""
        now = self.clock()
        counts = (
            tally.total,
            tally.passed,
            tally.failed,
            tally.errored,
            tally.prompt_tokens,
            tally.completion_tokens,
        )
        throttled = costly and now - self._judged_at < GATE_SECONDS
        if self._snapshot is None or (counts != self._counts and not throttled):
            self._counts, self._judged_at = counts, now
            self._snapshot = Snapshot.of(tally, expected, verdict())
        self.show(self._snapshot.render(now))

    def show(self, text: str) -> None:
        self._last = self.clock()
        if self.pinned is not None:
            self.pinned.show(text)
            self._start_ticker()
            return
        # on its own line: pytest's dots (under xdist written without a line of their
        # own, so ``write_line`` alone would append the status to them) end first
        self.reporter.ensure_newline()
        writer = getattr(self.reporter, "_tw", None)
        if writer is not None and getattr(writer, "width_of_current_line", 0):
            writer.line()
        self.reporter.write_line(text)

    def _start_ticker(self) -> None:
        if self._ticker is not None or self._closing.is_set():
            return
        self._ticker = threading.Thread(target=self._tick, name="openenv-live-line", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._closing.wait(self.tick):
            snapshot, pinned = self._snapshot, self.pinned
            if snapshot is not None and pinned is not None:
                pinned.show(snapshot.render(self.clock()))

    def close(self) -> None:
        """Erase the line and give pytest its file back (before the terminal summary)."""
        self._closing.set()
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.join()  # no redraw may land after the erase
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
