"""The end of a run reads at a glance: a few episode failures in full, one line each for
the rest (linked to report.html), the openenv summary near the end, gated episodes as
their own green category when the gate passes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import SCRIPTED

N = 60
RUN = ("--openenv-env=openspiel:tic_tac_toe", f"--openenv-n={N}", SCRIPTED)
FULL_HEADER = re.compile(r"^_+ test_episode\[ep-\d{6}\] _+$")
DIGEST = re.compile(
    r"^FAILED openenv::test_episode\[(ep-\d{6})\] - reward=-1 turns=\d+ loss: reward -1 "
    r"is below the pass threshold 0  (file://\S+/report\.html#(ep-\d{6}))$"
)


def failed_ids(pytester: pytest.Pytester) -> list[str]:
    from helpers import read_jsonl

    rows = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    return sorted(row["episode_id"] for row in rows)


@pytest.mark.parametrize("ci", [False, True], ids=["terminal", "CI"])
@pytest.mark.slow
def test_a_few_in_full_one_line_each_for_the_rest(pytester, run_pytest, monkeypatch, ci) -> None:
    # under CI pytest prints a crash message whole in the short summary, not its first line
    for name in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)
    if ci:
        monkeypatch.setenv("CI", "true")
    result = run_pytest(*RUN)
    assert result.ret == 1
    lines = result.outlines
    failing = failed_ids(pytester)
    assert len(failing) > 5
    assert sum(bool(FULL_HEADER.match(line)) for line in lines) == 3
    digests = [m for line in lines if (m := DIGEST.match(line))]
    assert [m.group(1) for m in digests] == failing[3:]
    for match in digests:
        assert match.group(1) == match.group(3)
        assert Path(match.group(2).removeprefix("file://").split("#")[0]).is_file()
    short = [line for line in lines if line.startswith("FAILED (reward")]
    assert len(short) == 3  # pytest's short summary lists the ones shown in full
    for line in short:
        if ci:  # on a terminal pytest trims the line to the width
            assert " - reason: loss: reward -1 is below the pass threshold 0" in line, line
        assert lines[lines.index(line) + 1].startswith(("FAILED", "=")), "one line each"
    summary_at = max(
        i for i, line in enumerate(lines) if line.startswith("=") and "openenv" in line
    )
    assert len(lines) - summary_at < 25  # the openenv summary sits near the end
    result.assert_outcomes(passed=N - len(failing), failed=len(failing))


@pytest.mark.slow
def test_all_shows_every_failure_in_full(pytester, run_pytest) -> None:
    result = run_pytest(*RUN, "--openenv-failure-reports=all")
    failing = failed_ids(pytester)
    assert sum(bool(FULL_HEADER.match(line)) for line in result.outlines) == len(failing)
    assert not any(DIGEST.match(line) for line in result.outlines)
    none = run_pytest(*RUN, "--openenv-failure-reports=0", "-n", "2")
    assert sum(bool(FULL_HEADER.match(line)) for line in none.outlines) == 0
    assert len([line for line in none.outlines if DIGEST.match(line)]) == len(failing)
    bad = run_pytest(*RUN, "--openenv-failure-reports=some")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-failure-reports='some' is invalid: expected an integer >= 0" in (
        bad.stderr.str()
    )


@pytest.mark.slow
def test_a_passing_gate_counts_gated_episodes_in_green(pytester, run_pytest) -> None:
    result = run_pytest(*RUN, "--openenv-min-pass-rate=0.5", "--color=yes")
    assert result.ret == 0
    failing = len(failed_ids(pytester))
    last = result.outlines[-1]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", last)
    assert re.search(rf"\b{N - failing} passed, {failing} gated in ", plain), plain
    assert "\x1b[31m" not in last  # no red on a run whose gate passed
    assert "\x1b[32m" in last
    assert result.parseoutcomes() == {"passed": N - failing, "gated": failing}
    # a failing gate leaves them what they are: failed, in red
    failed = run_pytest(*RUN, "--openenv-min-pass-rate=0.99", "--color=yes")
    assert failed.ret == 1
    assert failed.parseoutcomes() == {"passed": N - failing, "failed": failing}
    assert "\x1b[31m" in failed.outlines[-1]


GATED_TEST = re.compile(r"^openenv::test_episode: (\d+) failed \((ep-\d{6}(?:, ep-\d{6})*)(.*)\)$")


@pytest.mark.slow
def test_a_decided_run_counts_the_failures_its_gate_accepted(pytester, run_pytest) -> None:
    result = run_pytest(*RUN, "--openenv-min-pass-rate=0.5")
    assert result.ret == pytest.ExitCode.OK
    failing = failed_ids(pytester)
    assert len(failing) > 5
    lines = result.outlines
    # no report block, no FAILED line per episode: one count per test, a few ids, pointers
    assert not any(FULL_HEADER.match(line) for line in lines)
    assert not any(line.startswith("FAILED") for line in lines)
    (counted,) = [m for line in lines if (m := GATED_TEST.match(line))]
    assert int(counted.group(1)) == len(failing)
    assert counted.group(2).split(", ") == failing[:5]
    assert counted.group(3) == f" and {len(failing) - 5} more"
    assert any("report.html" in line and "failures.jsonl" in line for line in lines)
    assert len(lines) < 60, "\n".join(lines)
    assert result.parseoutcomes() == {"passed": N - len(failing), "gated": len(failing)}


@pytest.mark.slow
def test_verbose_or_the_option_brings_the_gated_reports_back(pytester, run_pytest) -> None:
    verbose = run_pytest(*RUN, "--openenv-min-pass-rate=0.5", "-v")
    failing = failed_ids(pytester)
    assert sum(bool(FULL_HEADER.match(line)) for line in verbose.outlines) == 3
    assert not any(GATED_TEST.match(line) for line in verbose.outlines)
    every = run_pytest(*RUN, "--openenv-min-pass-rate=0.5", "--openenv-failure-reports=all")
    assert sum(bool(FULL_HEADER.match(line)) for line in every.outlines) == len(failing)
    assert every.ret == pytest.ExitCode.OK


ORDER_SUITE = """
import time


def test_ep(episode):
    if episode.episode_id == "ep-000000":
        time.sleep(3)  # under -n 2 it finishes after the others
    assert False, "every episode fails"
"""
ORDER_RUN = ("test_order.py", "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=8", "-n", "2")
ORDERED = [f"ep-{i:06d}" for i in range(8)]


@pytest.mark.slow
def test_failed_episodes_are_listed_by_id_not_by_when_they_finished(pytester, run_pytest) -> None:
    pytester.makepyfile(test_order=ORDER_SUITE)
    held = run_pytest(*ORDER_RUN, "--openenv-failure-reports=0")
    listed = [
        m.group(1)
        for line in held.outlines
        if (m := re.match(r"^FAILED test_order\.py::test_ep\[(ep-\d{6})\] - ", line))
    ]
    assert listed == ORDERED, held.stdout.str()[-3000:]
    gated = run_pytest(*ORDER_RUN, "--openenv-min-pass-rate=0")
    assert gated.ret == pytest.ExitCode.OK, gated.stdout.str()[-3000:]
    counted = [line for line in gated.outlines if line.startswith("test_order.py::test_ep: ")]
    assert counted == [f"test_order.py::test_ep: 8 failed ({', '.join(ORDERED[:5])} and 3 more)"]


SLOW_WRITING = """
import time

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    # after the controller wrote summary.json, before the terminal summary: as a slow
    # report, inspect log or Hub push would
    result = yield
    time.sleep(2)
    return result
"""
WALL = re.compile(r"^wall time: ([\d.]+)s    episodes/s: ([\d.]+)$")


@pytest.mark.slow
def test_terminal_and_summary_report_one_wall_time_without_the_end_of_run_writing(
    pytester, run_pytest
) -> None:
    """The terminal said "2.9 s, 1.4 ep/s" where summary.json and the report said
    "0.149 s, 26.9 ep/s": the end-of-run writing was counted as the run's."""
    import json

    pytester.makeconftest(SLOW_WRITING)
    result = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=6", SCRIPTED)
    (wall, rate) = next(m.groups() for line in result.outlines if (m := WALL.match(line)))
    folder = pytester.path / "openenv-results"
    figures = json.loads((folder / "summary.json").read_text())["figures"]
    assert wall == f"{figures['wall_time_s']:.1f}", (wall, figures["wall_time_s"])
    assert rate == f"{figures['episodes_per_s']:.1f}", (rate, figures["episodes_per_s"])
    assert figures["wall_time_s"] < 2, figures  # the 2 s after the last episode are not in
    assert figures["episodes_per_s"] == pytest.approx(6 / figures["wall_time_s"], rel=0.01)
    page = (folder / "report.html").read_text()
    assert f"{figures['wall_time_s']:.1f} s" in page
