"""A real model behind a real OpenAI-compatible server: llama.cpp serving SmolLM2-135M.

Every fake in ``tests/servers`` answers the way we wrote it to; this one answers
the way a real small model does: prose, empty turns, illegal moves, arguments
the grammar allowed but the env rejects. Whatever it sends, every episode must end
as passed or failed by the env's verdict (its mistakes are tool errors it pays a
turn for), never as an errored item or an INTERNALERROR.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llm_helpers import (
    all_rows,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    dist,
    results,
)
from servers.llama_server import MODEL_ALIAS, LlamaServer

#: short episodes: a 135M model rarely finishes a game, and CPU time is shared
SAMPLING = ("--openenv-temperature=0", "--openenv-max-tokens=48", "--openenv-max-turns=2")


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    server = LlamaServer().start()
    yield server
    server.stop()


def real_args(server: LlamaServer, env: str, n: int, *extra: str) -> list[str]:
    return [
        f"--openenv-env={env}",
        f"--openenv-n={n}",
        f"--openenv-llm-endpoint={server.base_url}",
        f"--openenv-model={MODEL_ALIAS}",
        *SAMPLING,
        *extra,
    ]


def assert_judged_by_the_env(rows: dict[str, dict[str, Any]], n: int) -> None:
    """Every episode was written once, and none is an infrastructure error."""
    assert len(rows) == n, sorted(rows)
    for episode_id, row in rows.items():
        failure = row.get("failure")
        assert failure is None or failure["outcome"] == "failed", (episode_id, failure)
        assert row["model"] == MODEL_ALIAS and row["policy"] == "openai"
        assert row["metrics"]["prompt_tokens"] > 0, episode_id
        assistant = [m for m in row["messages"] if m["role"] == "assistant"]
        assert len(assistant) == row["metrics"]["turns"] >= 1
        silent = [m for m in assistant if not m.get("tool_calls")]
        assert row["metrics"]["no_tool_call_turns"] == len(silent)
        for message in assistant:
            assert isinstance(message["content"], str)
            for call in message.get("tool_calls", []):
                assert isinstance(call["function"]["arguments"], str)


@pytest.mark.parametrize(
    ("env", "workers", "concurrency"),
    [
        ("openspiel:tic_tac_toe", 0, 1),
        ("openspiel:tic_tac_toe", 2, 1),
        ("openspiel:connect_four", 0, 2),
        ("reasoning_gym:chain_sum", 0, 2),
    ],
)
@pytest.mark.slow
def test_real_model_episodes_end_by_the_envs_verdict(
    run_pytest,
    pytester: pytest.Pytester,
    llama: LlamaServer,
    env: str,
    workers: int,
    concurrency: int,
) -> None:
    result = run_pytest(
        *real_args(llama, env, 2, f"--openenv-concurrency={concurrency}"), *dist(workers)
    )
    rows = all_rows(pytester)
    assert_judged_by_the_env(rows, 2)
    # the model saw the tools: llama.cpp hides them unless tool_choice is sent
    assert all(r["metrics"]["tool_calls"] >= 1 for r in rows.values()), rows
    assert result.ret == (0 if all(r["passed"] for r in rows.values()) else 1)
    outcomes = result.parseoutcomes()
    assert "error" not in outcomes and "errors" not in outcomes, outcomes


@pytest.mark.slow
def test_record_then_replay_with_the_server_stopped(run_pytest, pytester: pytest.Pytester) -> None:
    server = LlamaServer().start()
    try:
        run_pytest(*real_args(server, "openspiel:tic_tac_toe", 2, "--openenv-cache=cache"))
    finally:
        server.stop()
    recorded = all_rows(pytester)
    assert_judged_by_the_env(recorded, 2)
    (pytester.path / "openenv-results").rename(pytester.path / "recorded")
    run_pytest(
        *real_args(server, "openspiel:tic_tac_toe", 2, "--openenv-cache=cache"),
        "--openenv-replay",
    )
    replayed = all_rows(pytester)
    assert {k: (r["reward"], r["messages"]) for k, r in replayed.items()} == {
        k: (r["reward"], r["messages"]) for k, r in recorded.items()
    }


SNAPSHOT_SUITE = """
import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, seed=11)
def test_real_model_games(episode, openenv_snapshot):
    assert episode.trajectory == openenv_snapshot
"""


@pytest.mark.slow
def test_snapshots_of_the_real_model_are_stable_across_runs(
    run_pytest, pytester: pytest.Pytester, llama: LlamaServer
) -> None:
    pytester.makepyfile(test_real_snapshots=SNAPSHOT_SUITE)
    args = [
        f"--openenv-llm-endpoint={llama.base_url}",
        f"--openenv-model={MODEL_ALIAS}",
        *SAMPLING,
        "test_real_snapshots.py",
    ]
    first = run_pytest(*args, "--snapshot-update")
    first.stdout.fnmatch_lines(["*2 snapshots generated*"])
    second = run_pytest(*args)
    second.stdout.fnmatch_lines(["*2 snapshots passed*"])
    assert second.ret == 0
    # a snapshot test passes lost games too: the training split keeps only the ones the env
    # passed, failures.jsonl the others as verdict-failed
    rows = all_rows(pytester)
    assert len(rows) == 2
    for row in rows.values():
        in_train = row["verify_metrics"]["verdict"]
        assert ("failure" not in row) == in_train
        assert in_train or row["failure"]["outcome"] == "verdict-failed"
    assert len(results(pytester)) == sum(r["verify_metrics"]["verdict"] for r in rows.values())


@pytest.mark.slow
def test_a_full_context_window_ends_the_episode_as_a_failure(
    run_pytest, pytester: pytest.Pytester
) -> None:
    # llama.cpp's server answers HTTP 400 "This model's maximum context length is 256
    # tokens..." once the transcript outgrows n_ctx: the model's limit, so a failure
    server = LlamaServer(n_ctx=256).start()
    try:
        result = run_pytest(*real_args(server, "openspiel:tic_tac_toe", 1))
    finally:
        server.stop()
    rows = all_rows(pytester)
    failure = rows["ep-000000"]["failure"]
    assert failure["outcome"] == "failed"
    assert "context window is full" in failure["message"]
    assert "maximum context length is 256 tokens" in failure["message"]
    assert result.ret == 1
