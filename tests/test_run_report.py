"""report.html in every output folder, the card's chart, pytest-html extras, and the
``view`` server's answers and refusals (the page itself is looked at in tests/browser/)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import SCRIPTED, read_jsonl

from pytest_openenv.report.page import write_report
from pytest_openenv.report.view import Site

RUN = ("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=20", SCRIPTED)


def figures_on_page(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-figure="(\w+)">([^<]*)<', html))


def page_data(html: str) -> dict:
    block = re.search(r'<script type="application/json" id="openenv-data">(.*?)</script>', html)
    assert block
    return json.loads(block.group(1))


@pytest.mark.slow
def test_every_folder_gets_a_report_and_the_card_shows_the_chart(pytester, run_pytest) -> None:
    result = run_pytest(*RUN, "-n", "2")
    assert result.ret == 1
    folder = pytester.path / "openenv-results"
    summary = json.loads((folder / "summary.json").read_text())["figures"]
    html = (folder / "report.html").read_text(encoding="utf-8")
    shown = figures_on_page(html)
    for name in ("passed", "failed", "errored", "skipped"):
        assert int(shown[name]) == summary[name]
    data = page_data(html)
    assert len(data["rows"]) == summary["passed"] + summary["failed"] + summary["errored"]
    failing = {r["episode_id"] for r in read_jsonl(folder / "failures.jsonl")}
    embedded = {data["rows"][n][0] for n in data["embedded"]}
    assert failing <= embedded  # every failure's transcript is in the file
    assert "Content-Security-Policy" in html and "http://" not in html.split("<main>")[0]
    assert not re.search(r"<(?:script|link|img)[^>]+(?:src|href)=\"https?:", html)  # offline
    chart = ET.parse(folder / "pass-rate.svg").getroot()
    assert chart.tag == "{http://www.w3.org/2000/svg}svg"
    card = (folder / "README.md").read_text()
    assert "](pass-rate.svg)" in card and "`report.html`" in card


def test_a_report_that_cannot_be_written_is_a_warning(pytester, run_pytest) -> None:
    pytester.makeconftest(
        """
import pytest_openenv.report.page as page


def broken(folder, **kwargs):
    raise OSError(28, "No space left on device")


page.write_report = broken
"""
    )
    result = run_pytest(*RUN, "--openenv-min-pass-rate=0.1")
    assert result.ret == 0  # the gate decides; the report is only a view of the files
    assert "WARNING: " in result.stdout.str() and "report.html was not written" in (
        result.stdout.str()
    )
    folder = pytester.path / "openenv-results"
    assert not (folder / "report.html").exists()
    assert (folder / "results.jsonl").exists() and (folder / "summary.json").exists()
    assert "file://" not in result.stdout.str()  # no link to a report that is not there


def test_size_cap_keeps_every_row_and_failures_first(pytester, run_pytest) -> None:
    run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=40", SCRIPTED)
    folder = pytester.path / "openenv-results"
    failures = read_jsonl(folder / "failures.jsonl")
    failure_bytes = sum(
        len(line) + 1 for line in (folder / "failures.jsonl").read_bytes().splitlines()
    )
    pass_lines = (folder / "results.jsonl").read_bytes().splitlines()
    cap = failure_bytes + 3 * max(len(line) + 1 for line in pass_lines)
    write_report(folder, cap=cap)
    html = (folder / "report.html").read_text(encoding="utf-8")
    data = page_data(html)
    assert len(data["rows"]) == 40
    outcome = data["columns"].index("outcome")
    kinds = [data["rows"][n][outcome] for n in data["embedded"]]
    assert kinds.count("failed") == len(failures)
    assert 1 <= kinds.count("passed") <= 3
    assert 'id="embed-note"' in html and "serves every transcript" in html
    assert len(re.findall(r'<script type="application/json" id="t-\d+">', html)) == len(kinds)


def test_torn_last_line_is_shown_not_fatal(pytester, run_pytest) -> None:
    run_pytest(*RUN)
    folder = pytester.path / "openenv-results"
    with (folder / "results.jsonl").open("ab") as handle:
        handle.write(b'{"episode_id": "ep-999999", "messa')  # a killed writer's last line
    found = write_report(folder)
    assert [p.torn for p in found.problems] == [True]
    html = (folder / "report.html").read_text(encoding="utf-8")
    assert 'data-problem="torn-line"' in html and "results.jsonl:" in html
    assert "ep-999999" not in json.dumps(page_data(html)["rows"])
    site = Site.of(folder)
    assert b'data-problem="torn-line"' in site.page


@pytest.mark.slow
@pytest.mark.every_plugin  # pytest-html
def test_pytest_html_carries_each_transcript(pytester, run_pytest) -> None:
    pytester.makepyfile(
        hostile="""
def play(messages, tools, turn):
    if turn.turn == 1:
        return {"content": "<script>alert(1)</script>", "tool_calls": [
            {"name": "play_move", "arguments": {"action_id": 99}}]}
    text = [m["content"] for m in messages if "Legal actions" in (m.get("content") or "")][-1]
    move = int(text.rsplit("Legal actions:", 1)[1].split(",")[0])
    return {"name": "play_move", "arguments": {"action_id": move}}
"""
    )
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=4",
        "--openenv-policy=hostile:play",
        "--html=ph/report.html",
        "-n",
        "2",
    )
    assert result.ret in (0, 1)
    page = (pytester.path / "ph" / "report.html").read_text(encoding="utf-8")
    # pytest-html keeps its rows as JSON in an attribute: our markup arrives escaped there
    assert page.count("openenv-transcript") >= 4
    assert "<script>alert(1)</script>" not in page
    assert "&amp;lt;script&amp;gt;alert(1)" in page or "&lt;script&gt;alert(1)" in page
    assert "tool error" in page


# -- the view server ----------------------------------------------------------------------
def view(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "view", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.slow
def test_view_refuses_what_it_cannot_serve(pytester, run_pytest, tmp_path: Path) -> None:
    run_pytest(*RUN)
    folder = pytester.path / "openenv-results"
    not_ours = view(str(tmp_path))
    assert not_ours.returncode == 2
    assert "is not a pytest-openenv output folder" in not_ours.stderr
    assert "metadata.json" in not_ours.stderr
    remote = view(str(folder), "--host", "0.0.0.0")
    assert remote.returncode == 2 and "not a loopback address" in remote.stderr
    assert "--allow-remote" in remote.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = view(str(folder), "--port", str(port))
    assert taken.returncode == 2
    assert f"port {port} on 127.0.0.1 is in use" in taken.stderr
    assert "Traceback" not in not_ours.stderr + remote.stderr + taken.stderr


def start_view(folder: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_openenv", "view", str(folder), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
    assert match, line
    return process, match.group(1)


def get(url: str, host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_view_serves_each_transcript_from_the_file(pytester, run_pytest) -> None:
    run_pytest(*RUN)
    folder = pytester.path / "openenv-results"
    with (folder / "failures.jsonl").open("ab") as handle:
        handle.write(b'{"episode_id": "ep-0')  # torn
    process, url = start_view(folder)
    try:
        status, page = get(url)
        assert status == 200 and b'"mode":"served"' in page
        assert b'data-problem="torn-line"' in page
        rows = page_data(page.decode())["rows"]
        lines = {
            json.loads(line)["episode_id"]: line
            for name in ("results.jsonl", "failures.jsonl")
            for line in (folder / name).read_bytes().splitlines()
            if line.endswith(b"}")
        }
        for number in (0, len(rows) - 1):
            status, body = get(f"{url}api/episode/{number}")
            assert status == 200
            assert body == lines[rows[number][0]]  # the line as written, read by offset
        assert get(f"{url}api/episode/{len(rows)}")[0] == 404
        assert get(f"{url}../../etc/passwd")[0] == 404
        port = url.rsplit(":", 1)[1].rstrip("/")
        assert get(url, host=f"attacker.example:{port}")[0] == 403  # DNS rebinding
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert "torn last line" in process.stderr.read()  # type: ignore[union-attr]


def test_view_answers_while_reading_a_large_folder_lazily(tmp_path: Path) -> None:
    """Scale check on a made folder: rows are indexed, never all held as records."""
    from pytest_openenv.dataset.folder import MARKER

    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps(MARKER))
    row = {
        "episode_id": "",
        "messages": [{"role": "user", "content": "x" * 2000}],
        "reward": 1.0,
        "metrics": {"turns": 3},
        "task": {"prompt": "p"},
        "test": "t.py::test[ep]",
        "seed": 0,
    }
    with (folder / "results.jsonl").open("w") as out:
        for index in range(5000):
            row["episode_id"], row["seed"] = f"ep-{index:06d}", index
            out.write(json.dumps(row) + "\n")
    started = time.monotonic()
    site = Site.of(folder)
    assert time.monotonic() - started < 30
    assert len(site.found.rows) == 5000
    status, body = site.episode(4321)
    assert status == 200 and json.loads(body)["episode_id"] == "ep-004321"
    assert len(site.page) < 5000 * 400  # the page holds rows, not transcripts


SLOW_POLICY = """
import time


def play(messages, tools, turn):
    time.sleep(0.05)
    return turn.legal[0]
"""


def html_rows(page: str) -> dict[str, list[str]]:
    """pytest-html's result rows (its JSON blob), by test id: their cells."""
    import html
    import re as regex

    blob = regex.search(r'data-jsonblob="([^"]*)"', page)
    assert blob is not None, "pytest-html keeps its rows in data-jsonblob"
    tests = json.loads(html.unescape(blob.group(1)))["tests"]
    return {nodeid: entry[0]["resultsTableRow"] for nodeid, entry in tests.items()}


@pytest.mark.every_plugin  # pytest-html
def test_pytest_html_rows_show_the_episode_duration_and_link_to_it(pytester, run_pytest) -> None:
    pytester.makepyfile(slow=SLOW_POLICY)
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=6",
        "--openenv-policy=slow:play",
        "--openenv-concurrency=3",  # episodes run ahead: an item's setup only waits for one
        "--html=ph/report.html",
    )
    assert result.ret in (0, 1)
    from helpers import read_jsonl

    from pytest_openenv.worker.html_extras import duration_text

    folder = pytester.path / "openenv-results"
    rows = read_jsonl(folder / "results.jsonl") + (
        read_jsonl(folder / "failures.jsonl") if (folder / "failures.jsonl").exists() else []
    )
    cells = html_rows((pytester.path / "ph" / "report.html").read_text(encoding="utf-8"))
    assert len(rows) == 6
    for row in rows:
        duration, links = cells[row["test"]][2], cells[row["test"]][3]
        assert f">{duration_text(row['metrics']['wall_time_s'])}<" in duration, duration
        href = f"{(folder / 'report.html').as_uri()}#{row['episode_id']}@openenv::test_episode"
        assert f'href="{href}"' in links, links
    assert (folder / "report.html").is_file()


def test_view_answers_404_for_an_episode_index_that_is_not_a_plain_number(
    tmp_path: Path,
) -> None:
    """Superscript digits and a number past int()'s digit limit: 404, never a traceback."""
    from pytest_openenv.dataset.folder import MARKER

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps(MARKER))
    row = {"episode_id": "ep-0", "messages": [], "reward": 1.0, "test": "t.py::t[ep-0]"}
    (folder / "results.jsonl").write_text(json.dumps(row) + "\n")
    process, url = start_view(folder)
    try:
        for index in ("%C2%B2", "²".encode().hex(), "9" * 5000, "0" * 5000 + "1"):
            assert get(f"{url}api/episode/{index}")[0] == 404, index[:20]
        assert get(f"{url}api/episode/0")[0] == 200  # the server is still up
    finally:
        process.terminate()
        process.wait(timeout=10)
    stderr = process.stderr.read()  # type: ignore[union-attr]
    assert "Traceback" not in stderr, stderr[-2000:]


def test_a_verdict_failed_row_shows_as_its_test_passed_with_why_it_is_not_for_training() -> None:
    """failures.jsonl's test-passed episodes the env's verdict failed: the report counts them
    as the summary does (their test passed) and says why they are not in results.jsonl."""
    from pytest_openenv.report.page.rows import row_from_record

    record = {
        "episode_id": "ep-000003",
        "test": "test_ttt.py::test_every_game_ends[ep-000003]",
        "extra": {"reason": "loss: reward -1 is below the pass threshold 0"},
        "failure": {"outcome": "verdict-failed", "test_outcome": "passed", "verdict": False},
    }
    row = row_from_record(record, 1, 0, 10)
    assert row.outcome == "passed"
    assert row.reason == "not in results.jsonl: loss: reward -1 is below the pass threshold 0"
    failed = {**record, "failure": {"outcome": "failed", "message": "assert False"}}
    assert row_from_record(failed, 1, 0, 10).outcome == "failed"
    assert row_from_record({**record, "failure": {}}, 0, 0, 10).reason == ""
