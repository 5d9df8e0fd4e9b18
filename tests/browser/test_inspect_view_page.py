"""One of our inspect logs in ``inspect view``, looked at in a real headless Chromium: the
sample page shows the episode's transcript with its tool calls and their results."""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path

import pytest
from inspect_viewer import inspect_view
from pages import chromium, rows, run_pytest


@pytest.mark.slow
def test_the_sample_page_of_inspect_view_shows_the_transcripts_tool_calls(tmp_path: Path) -> None:
    done = run_pytest(
        tmp_path,
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-policy=random",
        "--openenv-n=2",
        "--openenv-repeats=2",
        "--openenv-inspect-log",
        "-n",
        "0",
    )
    assert "INTERNALERROR" not in done.stdout, done.stdout[-3000:]
    folder = tmp_path / "openenv-results"
    (log,) = (folder / "inspect-logs").glob("*.eval")
    episodes = {r["episode_id"]: r for r in rows(folder / "results.jsonl")}
    episodes.update({r["episode_id"]: r for r in rows(folder / "failures.jsonl")})
    row = episodes["ep-000001-r1"]
    moves = [t["arguments"]["action_id"] for t in row["tool_trace"]]
    with inspect_view(log.parent, seconds=90) as base, chromium() as browser:
        page = f"/logs/{urllib.parse.quote(log.name)}/samples/sample/ep-000001/2/messages"
        browser.get(f"{base}/#{page}")
        deadline = time.monotonic() + 30
        text = ""
        while time.monotonic() < deadline:
            text = browser.execute_script("return document.body.innerText") or ""
            if text.count("play_move") >= len(moves):
                break
            time.sleep(0.2)
        browser.save_screenshot(str(tmp_path / "inspect-view-sample.png"))  # to look at
    assert "Sample ep-000001 (Epoch 2)" in text
    assert "policy/random" in text
    # every tool call, with its arguments, and every tool result, in order
    calls = [f"action_id: {move}" for move in moves]
    positions = [text.index(call) for call in calls]
    assert positions == sorted(positions)
    for entry in row["tool_trace"]:
        first_line = entry["result"]["data"].splitlines()[0]
        assert first_line in text
    assert text.count("play_move") >= len(moves)
    assert ("C" if row["passed"] else "I") in text.split("SCORE", 1)[1][:20]
