"""``--openenv-cache`` with an agent stores each model call its proxy forwards;
``--openenv-replay`` plays the episodes again with the model server stopped, row for row,
and a call the recording never made errors its episode."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from agent_helpers import KEY, KEY_MARKER, agent_options
from helpers import played_rows, read_jsonl
from servers.agent_model import serve_agent_model

AGENT = "codex"

#: what a replayed row must hold as the recording did
SAME = ("episode_id", "seed", "tool_trace", "reward", "passed", "policy", "metrics")
#: what an agent's requests hold that differs in every run: its episode's own folder and
#: (Codex) each tool call's measured time
VARIES = re.compile(r"/tmp/openenv-agent-[^/\s`]+|Wall time: [0-9.]+ seconds")


def _as_seen(value: object) -> object:
    return json.loads(VARIES.sub("<varies>", json.dumps(value)))


def _rows(folder) -> dict[str, dict]:
    return {row["episode_id"]: row for row in played_rows(folder)}


@pytest.mark.slow
def test_an_agent_episode_replays_from_the_cache_with_the_model_server_down(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert shutil.which(AGENT), f"{AGENT} is not on PATH"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    cache = pytester.path / "agent-cache"
    common = ("--openenv-timeout=240", f"--openenv-cache={cache}", "-n", "0")
    with serve_agent_model() as server:
        recorded = run_pytest(
            *agent_options(server, f"agent:{AGENT}"), *common, "--openenv-output=recorded"
        )
        url = server.base_url
        calls = len(server.bodies)
    assert recorded.ret in (0, 1), recorded.stdout.str()[-3000:]
    first = _rows(pytester.path / "recorded")
    assert len(first) == 2 and calls > 0
    entries = list(cache.glob("*/*.json"))
    # one entry per distinct model call the proxy forwarded, each of this agent's episodes
    assert len(entries) >= sum(r["metrics"]["turns"] for r in first.values())
    stored = [json.loads(path.read_text()) for path in entries]
    assert {entry["provider"] for entry in stored} == {f"agent:{AGENT}"}
    assert {entry["episode_id"] for entry in stored} == set(first)

    # the server is stopped: every answer comes from the cache
    replayed = run_pytest(
        *agent_options_at(url),
        *common,
        "--openenv-replay",
        "--openenv-output=replayed",
    )
    assert replayed.ret == recorded.ret, replayed.stdout.str()[-3000:]
    second = _rows(pytester.path / "replayed")
    assert set(second) == set(first)
    for episode_id, row in first.items():
        again = second[episode_id]
        for field in SAME:
            if field == "metrics":
                for name in ("turns", "prompt_tokens", "completion_tokens"):
                    assert again["metrics"][name] == row["metrics"][name], (episode_id, name)
            else:
                assert again[field] == row[field], (episode_id, field)
        # the model's answers are the recorded ones, word for word
        answers = [m for m in row["messages"] if m["role"] == "assistant"]
        assert [m for m in again["messages"] if m["role"] == "assistant"] == answers
        # the conversation too, apart from what differs in every run
        assert _as_seen(again["messages"]) == _as_seen(row["messages"])
        assert _as_seen(again["tools"]) == _as_seen(row["tools"])
    metadata = json.loads((pytester.path / "replayed" / "metadata.json").read_text())
    assert metadata["agents"][0]["replay"] is True

    # a call the recording never made (other seeds) is refused: its episode errors
    missed = run_pytest(
        *agent_options_at(url),
        *common,
        "--openenv-replay",
        "--openenv-seed=500",
        "--openenv-n=1",
        "--openenv-output=missed",
    )
    missed.assert_outcomes(errors=1)
    [failure] = read_jsonl(pytester.path / "missed" / "failures.jsonl")
    assert failure["failure"]["outcome"] == "error"
    assert "--openenv-replay: no cached response" in failure["failure"]["message"]

    # no secret in the cache, the outputs or the run's lines
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert KEY_MARKER.encode() not in path.read_bytes(), path
    for result in (recorded, replayed, missed):
        assert KEY_MARKER not in result.stdout.str() + result.stderr.str()


def agent_options_at(url: str) -> list[str]:
    """The run's options with the model endpoint at ``url`` (a server no longer there)."""

    class _Gone:
        base_url = url

    return agent_options(_Gone(), f"agent:{AGENT}")  # type: ignore[arg-type]
