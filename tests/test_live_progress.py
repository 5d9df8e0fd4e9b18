"""The live status line: in place on a terminal (read back through a terminal emulator,
pyte, from a real pty), a plain line every N seconds in logs, silenced by -qq or off."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pyte
import pytest

from pytest_openenv.controller.progress import PinnedLine, status_text
from pytest_openenv.report.tally import Tally

N = 40
#: the first-legal teacher, slowed so the line is redrawn several times during the run
SLOW_SUITE = """
import os
import time

import pytest

from pytest_openenv.policies.scripted import ScriptedPolicy


class Slow(ScriptedPolicy):
    def act(self, turn):
        time.sleep(float(os.environ.get("SLOW_MOVE_S", "0.02")))
        return super().act(turn)


@pytest.fixture
def openenv_policy():
    return Slow()


def test_ep(episode):
    assert episode.passed, episode.explain()
"""
RUN = (
    "test_slow.py",
    "--openenv-env=openspiel:tic_tac_toe",
    f"--openenv-n={N}",
    "-p",
    "no:cacheprovider",
)
STATUS = re.compile(
    r"openenv (\d+)/40 \| (\d+) passed, (\d+) failed, (\d+) errored \| pass [\d.]+% "
    r"\[[\d.]+-[\d.]+\] (?:\| gate \w+ )?\| reward [-\d.e]+ \| [\d.]+ (?:ep/s|s/ep)"
)
PROGRESS_ROW = re.compile(r"^(test_slow\.py )?([.F]+)\s+\[\s*\d+%\]$")


def run_in_terminal(folder: Path, *args: str, columns: int = 100, rows: int = 60) -> bytes:
    """Run pytest on a real pseudo-terminal; everything it wrote, as bytes."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(TERM="xterm", COLUMNS=str(columns), LINES=str(rows))
    import fcntl
    import struct
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", *RUN, *args],
        cwd=folder,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the pty closes when the process ends
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout=30)
    os.close(master)
    return bytes(output)


def final_screen(output: bytes, columns: int = 100, rows: int = 400) -> list[str]:
    screen = pyte.Screen(columns, rows)
    pyte.ByteStream(screen).feed(output)
    return [line.rstrip() for line in screen.display]


def progress_rows(lines: list[str]) -> list[str]:
    return [m.group(2) for line in lines if (m := PROGRESS_ROW.match(line))]


@pytest.fixture
def slow_suite(pytester: pytest.Pytester) -> Path:
    pytester.makepyfile(test_slow=SLOW_SUITE)
    return pytester.path


@pytest.mark.parametrize("dist", [(), ("-n", "2")], ids=["no-xdist", "xdist"])
@pytest.mark.slow
def test_in_place_on_a_terminal_without_garbling_pytest(slow_suite: Path, dist: tuple) -> None:
    shown = run_in_terminal(slow_suite, *dist)
    text = shown.decode("utf-8", "replace")
    statuses = [m for m in STATUS.finditer(text)]
    assert len(statuses) >= 3, text[-3000:]  # redrawn during the run
    done = [int(m.group(1)) for m in statuses]
    assert done == sorted(done) and 0 < done[0] < N
    screen = final_screen(shown)
    assert not any("ep/s" in line for line in screen), "\n".join(screen)  # erased at the end
    rows = progress_rows(screen)
    # pytest's own progress is intact: one character per item, the percentages in place
    assert sum(len(row) for row in rows) == N, "\n".join(screen)
    quiet = run_in_terminal(slow_suite, *dist, "--openenv-progress=off")
    assert not STATUS.search(quiet.decode("utf-8", "replace"))
    if not dist:  # without xdist the order is fixed: the same screen as without the line
        assert rows == progress_rows(final_screen(quiet))
    assert any("openenv" in line and "=" in line for line in screen)  # the summary follows


@pytest.mark.slow
def test_plain_line_at_an_interval_in_logs(
    slow_suite: Path, run_pytest, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_pytest(*RUN, "--openenv-progress=0.1", "--openenv-min-pass-rate=0.5")
    lines = [line for line in result.outlines if STATUS.search(line)]
    assert len(lines) >= 2, result.stdout.str()[-3000:]
    assert all("] | gate passing | reward" in line for line in lines), lines
    assert "\x1b[" not in "".join(lines)  # no cursor movement in a log
    quiet = run_pytest(*RUN, "-q", "--openenv-progress=0.1")
    assert any(STATUS.search(line) for line in quiet.outlines)  # -q keeps it
    silent = run_pytest(*RUN, "-qq", "--openenv-progress=0.1")
    assert not any(STATUS.search(line) for line in silent.outlines)
    monkeypatch.setenv("SLOW_MOVE_S", "0")  # a run with no line to draw need not be slow
    default = run_pytest(*RUN)  # every 30 s by default: a short run prints none
    assert not any(STATUS.search(line) for line in default.outlines)


@pytest.mark.slow
def test_ini_key_and_bad_values(
    slow_suite: Path, pytester: pytest.Pytester, run_pytest, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nopenenv_progress = 0.05\n")
    result = run_pytest(*RUN)
    assert any(STATUS.search(line) for line in result.outlines)
    monkeypatch.setenv("SLOW_MOVE_S", "0")  # the line is off: nothing to wait for
    off = run_pytest(*RUN, "--openenv-progress=off")  # the command line wins
    assert not any(STATUS.search(line) for line in off.outlines)
    bad = run_pytest(*RUN, "--openenv-progress=soon")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-progress='soon' is invalid: expected a number of seconds > 0" in (
        bad.stderr.str()
    )


def test_status_text_figures() -> None:
    tally = Tally(started=100.0, first_report_at=101.0, first_report_count=1)
    tally.passed, tally.failed, tally.errored = 8, 1, 1
    for reward in (1.0,) * 8 + (-1.0, 0.0):
        tally.reward.add(reward)
    tally.prompt_tokens, tally.completion_tokens = 12_345, 678
    text = status_text(tally, 20, "failing", now=110.0)
    assert text == (
        "openenv 10/20 | 8 passed, 1 failed, 1 errored | pass 80.0% [49.0-94.3] | "
        "gate failing | reward 0.7 | 1.0 ep/s | ETA 10s | tokens 12k in / 678 out"
    )


def test_pace_and_eta_leave_out_the_start_up_the_first_episode_carried() -> None:
    # 30 s of worker start-up before the first two episodes came in, then 2 episodes/s
    tally = Tally(started=100.0, first_report_at=130.0, first_report_count=2)
    tally.passed = 10
    text = status_text(tally, 20, now=134.0)
    assert "| 2.0 ep/s | ETA 5s" in text, text
    # a single report so far: no pace to tell, so no ETA either
    first = Tally(started=100.0, first_report_at=130.0, first_report_count=1)
    first.passed = 1
    assert "ep/s" not in status_text(first, 20, now=131.0)
    assert "ETA" not in status_text(first, 20, now=131.0)


def test_a_slow_model_shows_seconds_per_episode() -> None:
    tally = Tally(started=0.0, first_report_at=100.0, first_report_count=1)
    tally.passed = 3
    text = status_text(tally, 20, now=190.0)  # 2 more episodes in 90 s
    assert "| 45 s/ep | ETA 12m45s" in text, text
    assert "ep/s" not in text
    tally.passed = 2
    assert "| 4m00s/ep |" in status_text(tally, 20, now=340.0)


def test_the_pinned_line_moves_its_eta_while_no_report_comes() -> None:
    from pytest_openenv.controller.progress import LiveStatus

    now = [100.0]
    terminal = Terminal()
    pinned = PinnedLine(terminal, width=lambda: 200)  # type: ignore[arg-type]
    live = LiveStatus(None, pinned=pinned, interval=30, clock=lambda: now[0], tick=0.02)
    tally = Tally(started=90.0, first_report_at=100.0, first_report_count=1)
    tally.passed = 1
    live.update(tally, 10, lambda: None)
    tally.passed = 3
    now[0] = 104.0
    live.update(tally, 10, lambda: None)  # 2 episodes in 4 s: 7 left, 14 s
    assert "ETA 14s" in terminal.data
    now[0] = 124.0  # a slow model: 20 s and no report
    deadline = time.monotonic() + 10
    while "ETA 1m24s" not in terminal.data and time.monotonic() < deadline:
        time.sleep(0.02)
    live.close()
    assert "| 12 s/ep | ETA 1m24s" in terminal.data, terminal.data[-300:]
    closed = terminal.data
    time.sleep(0.1)
    assert terminal.data == closed  # nothing drawn after the line was erased


GATED_SUITE = """
import time


def test_ep(episode):
    # the first episode fails, every later one passes: the pass rate climbs past 50%
    time.sleep(0.1)
    assert episode.episode_id != "ep-000000"
"""
GATE_LINE = re.compile(r"\| (\d+) passed, (\d+) failed, 0 errored \|.* \| gate (\w+) \|")


@pytest.mark.slow
def test_the_gate_on_the_line_judges_the_counts_beside_it(
    pytester: pytest.Pytester, run_pytest
) -> None:
    """The gate was re-judged every 2 s while the counts moved on every report: a line
    said "gate failing" beside a pass rate above the gate's threshold."""
    pytester.makepyfile(test_gated=GATED_SUITE)
    result = run_pytest(
        "test_gated.py",
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=12",
        "--openenv-progress=0.01",
        "--openenv-min-pass-rate=0.5",
    )
    lines = [m for line in result.outlines if (m := GATE_LINE.search(line))]
    assert len(lines) >= 4, result.stdout.str()[-3000:]
    for match in lines:
        passed, failed = int(match.group(1)), int(match.group(2))
        expected = "passing" if passed / (passed + failed) >= 0.5 else "failing"
        assert match.group(3) == expected, match.group(0)
    assert {m.group(3) for m in lines} == {"passing", "failing"}


class Terminal:
    """A file that records what was written, as a terminal would receive it."""

    def __init__(self) -> None:
        self.data = ""

    def write(self, text: str) -> int:
        self.data += text
        return len(text)

    def flush(self) -> None:
        pass


def test_pinned_line_leaves_the_screen_as_without_it() -> None:
    plain, pinned_file = Terminal(), Terminal()
    pinned = PinnedLine(pinned_file, width=lambda: 40)  # type: ignore[arg-type]
    for step in range(30):
        for out in (plain, pinned):
            out.write("." if step % 7 else "\x1b[31mF\x1b[0m")
        if step % 10 == 9:
            for out in (plain, pinned):
                out.write("   [ 33%]\n")
        if step % 3 == 0:
            pinned.show(f"openenv {step}/30 | status")
    pinned.clear()
    screens = []
    for out in (plain, pinned_file):
        screen = pyte.Screen(40, 10)
        pyte.Stream(screen).feed(out.data.replace("\n", "\r\n"))
        screens.append(screen.display)
    assert screens[0] == screens[1]


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
@pytest.mark.slow
def test_a_plain_status_line_starts_on_its_own_line(
    slow_suite: Path, run_pytest, workers: tuple[str, ...]
) -> None:
    result = run_pytest(*RUN, "--openenv-progress=0.05", *workers)
    lines = [line for line in result.outlines if STATUS.search(line)]
    assert len(lines) >= 2, result.stdout.str()[-3000:]
    # never glued onto pytest's dots: each status line is a line of its own
    assert all(line.startswith("openenv ") for line in lines), lines
