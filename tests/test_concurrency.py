"""``--openenv-concurrency C``: episodes run ahead of their items, reported in order, once.

And the ``--openenv-timeout`` backstop: an episode that never returns is
abandoned at its budget, the item errors, the run goes on and exits promptly.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl
from llm_helpers import (
    ENV,
    all_rows,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    errors,
    junit_times,
    llm_args,
    output,
    turns_taken,
)
from servers.openai_compat import serve_openai

from pytest_openenv.worker.runahead import EpisodePool, Job


def reported_order(text: str) -> list[str]:
    return re.findall(r"test_episode\[(ep-\d+)\] (?:PASSED|FAILED|ERROR)", text)


@pytest.mark.parametrize(
    "xdist", [[], ["-n", "2"], ["-n", "2", "--dist", "worksteal"]], ids=["n0", "n2", "worksteal"]
)
@pytest.mark.slow
def test_episodes_overlap_yet_each_runs_once_and_reports_to_its_item(
    run_pytest, pytester: pytest.Pytester, xdist: list[str]
) -> None:
    with serve_openai(delay=0.1) as server:
        result = run_pytest(*llm_args(server, "--openenv-concurrency=4", "-v", n=12), *xdist)
    assert result.ret in (0, 1), result.stdout.str()
    rows = all_rows(pytester)
    assert sorted(rows) == [f"ep-{i:06d}" for i in range(12)]
    # every model call belongs to exactly one written episode
    assert server.requests == turns_taken(rows)
    for episode_id, row in rows.items():
        # each item got its own episode: the seed is the one of its id
        assert row["seed"] == int(episode_id.split("-")[1])
        assert row["test"].endswith(f"[{episode_id}]")
    if not xdist:
        assert reported_order(result.stdout.str()) == sorted(rows)
        assert 3 <= server.max_in_flight <= 4, server.max_in_flight
    else:
        # each worker runs ahead over the items it was handed (worksteal: the next one only)
        assert 3 <= server.max_in_flight <= 2 * 4, server.max_in_flight


#: records, for each episode item's call, whether its row was made ahead (on the pool); a
#: plugin, not a conftest: the bundled test's items live outside the run's folder
MADE_AHEAD_PROBE = """
import json

import pytest

from pytest_openenv.worker.items import PREPARED_KEY, SPEC_KEY


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if SPEC_KEY in item.stash:
        with open("made-ahead.jsonl", "a") as out:
            out.write(json.dumps([item.nodeid, PREPARED_KEY in item.stash]) + "\\n")
    return (yield)
"""


def rows_without_times(folder: Path) -> list[dict[str, Any]]:
    rows = read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl")
    for row in rows:
        del row["metrics"]["wall_time_s"]
    return sorted(rows, key=lambda row: row["episode_id"])


@pytest.mark.parametrize("form", ["string", "object"])
@pytest.mark.slow
def test_rows_made_ahead_on_the_pool_are_the_rows_made_at_the_report(
    run_pytest, pytester: pytest.Pytester, form: str
) -> None:
    pytester.makepyfile(made_ahead_probe=MADE_AHEAD_PROBE)
    bundled = [
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-policy=random",  # wins and losses: rows of both files
        "--openenv-n=8",
        f"--openenv-tool-arguments={form}",
        "-p",
        "made_ahead_probe",
    ]
    in_turn = run_pytest(*bundled, "--openenv-output=in-turn")
    probe = pytester.path / "made-ahead.jsonl"
    assert [made for _, made in read_jsonl(probe)] == [False] * 8
    probe.unlink()
    ahead = run_pytest(*bundled, "--openenv-output=ahead", "--openenv-concurrency=3")
    assert in_turn.ret == ahead.ret == 1, ahead.stdout.str()
    # every item's report finished the row its episode's thread made
    assert [made for _, made in read_jsonl(probe)] == [True] * 8
    written = rows_without_times(pytester.path / "ahead")
    assert written == rows_without_times(pytester.path / "in-turn")
    assert {row["passed"] for row in written} == {True, False}


@pytest.mark.slow
def test_episodes_of_items_that_never_run_are_not_written(
    run_pytest, pytester: pytest.Pytester
) -> None:
    cache = pytester.path / "llm-cache"
    with serve_openai(delay=0.3, every_turn="no_tool_call") as server:
        result = run_pytest(
            *llm_args(
                server,
                "--openenv-concurrency=4",
                "--openenv-max-turns=1",
                f"--openenv-cache={cache}",
                "-x",
                n=8,
            )
        )
    assert result.ret == 1
    # episodes 1.. ran ahead (the server saw them) but -x stopped before their items
    assert server.requests >= 2
    assert list(all_rows(pytester)) == ["ep-000000"]
    # nor did their answers reach the cache: only episode 0's one call is there
    assert len([p for p in cache.rglob("*.json") if not p.name.startswith(".tmp")]) == 1


@pytest.mark.slow
def test_skipped_items_are_not_run_ahead(run_pytest, pytester: pytest.Pytester) -> None:
    with serve_openai() as server:
        first = run_pytest(*llm_args(server, "--openenv-min-reward=-1", n=3))
        assert first.ret == 0
        before = server.requests
        result = run_pytest(
            *llm_args(
                server,
                "--openenv-min-reward=-1",
                "--openenv-resume",
                "--openenv-concurrency=4",
                n=6,
            )
        )
        spent = server.requests - before
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*3 passed, 3 skipped*"])
    rows = read_jsonl(output(pytester) / "results.jsonl")
    assert sorted(r["episode_id"] for r in rows) == [f"ep-{i:06d}" for i in range(6)]
    later = {r["episode_id"]: r for r in rows if r["episode_id"] >= "ep-000003"}
    assert spent == turns_taken(later)


@pytest.mark.slow
def test_items_with_an_overridden_policy_run_in_turn(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_default="""
        import pytest

        @pytest.mark.openenv(n=4)
        def test_default(episode):
            assert episode.policy == "openai"
        """,
        test_custom="""
        import pytest

        @pytest.fixture
        def openenv_policy():
            def last(messages, tools, turn):
                return {"name": "play_move", "arguments": turn.legal[-1].arguments}
            return last

        @pytest.mark.openenv(n=4)
        def test_custom(episode):
            assert episode.policy.endswith("last")
            assert episode.tool_trace[0]["arguments_text"] == '{"action_id": 8}'
            assert episode.tool_trace[0]["arguments"] == {"action_id": 8}
        """,
    )
    with serve_openai(delay=0.05) as server:
        result = run_pytest(
            *llm_args(server, "--openenv-concurrency=3", n=4),
            "--openenv-train-on=test",
            "test_default.py",
            "test_custom.py",
        )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*8 passed*"])
    rows = read_jsonl(output(pytester) / "results.jsonl")
    default = {r["episode_id"]: r for r in rows if "test_default" in r["test"]}
    custom = [r for r in rows if "test_custom" in r["test"]]
    assert len(default) == 4 and len(custom) == 4
    assert server.requests == turns_taken(default)


SLOW_AGENT = """
import time

def slow_on_seed_0(messages, tools, turn):
    if turn.seed == 0:
        time.sleep(60)
    return {"name": "play_move", "arguments": turn.legal[0].arguments}
"""


@pytest.mark.slow
def test_an_episode_that_never_returns_is_abandoned_at_the_timeout(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(agents=SLOW_AGENT)
    started = time.monotonic()
    result = run_pytest(
        ENV,
        "--openenv-n=3",
        "--openenv-policy=agents:slow_on_seed_0",
        "--openenv-timeout=1",
        "--openenv-min-reward=-1",
        "--junitxml=junit.xml",
        timeout=50,
    )
    elapsed = time.monotonic() - started
    assert result.ret == 1
    found = errors(pytester)
    assert list(found) == ["ep-000000"]
    assert "exceeded --openenv-timeout=1s" in found["ep-000000"]
    result.stdout.fnmatch_lines(["*2 passed, 1 error*"])
    times = junit_times(pytester.path / "junit.xml")
    assert times["test_episode[ep-000000]"] < 1 + 1.5, times
    # the abandoned thread does not hold the process: far less than its 60 s sleep
    assert elapsed < 40


def _job(spec_id: str, work: Any) -> Job:
    from pytest_openenv.episode.spec import EpisodeSpec

    return Job(EpisodeSpec(env="x:y", index=int(spec_id), seed=0), work)


def test_the_pool_serves_urgent_jobs_first_and_replaces_abandoned_threads() -> None:
    pool = EpisodePool(1)
    gate = threading.Event()
    order: list[str] = []
    try:
        blocker = _job("0", lambda: gate.wait(30))
        pool.submit(blocker)
        while blocker.started_at is None:
            time.sleep(0.01)
        pool.submit(_job("1", lambda: order.append("later")))
        urgent = _job("2", lambda: order.append("urgent"))
        pool.submit(urgent, urgent=True)
        assert pool.abandon(blocker)
        assert urgent.done.wait(5)
        # a replacement thread took the abandoned one's place and serves the queue
        deadline = time.monotonic() + 5
        while len(order) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert order == ["urgent", "later"]
        assert not blocker.done.is_set()
    finally:
        gate.set()
        pool.close()
    assert blocker.done.wait(5)
