"""``agent:command``: a tiny agent program of ours plays tic-tac-toe through the env's MCP
tools and the capture proxy; misbehaving programs are bounded and their items error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agent_helpers import (
    KEY,
    KEY_MARKER,
    MODEL,
    agent_model_fixture,  # noqa: F401 - fixture
    agent_options,
    assert_played_by,
    program,
)
from helpers import played_rows, read_jsonl

#: each test starts a child pytest run whose agents start Python programs: seconds each
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_command_agent_plays_episodes_recorded_as_the_model_saw_them(
    run_pytest,
    pytester: pytest.Pytester,
    agent_model,
    monkeypatch: pytest.MonkeyPatch,
    concurrency: int,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    seen = pytester.path / "seen.json"
    template = program("mini_agent", "{prompt_file}", "{mcp_url}", "{model}", str(seen))
    result = run_pytest(
        *agent_options(agent_model, "agent:command", f"--openenv-agent-command={template}"),
        f"--openenv-concurrency={concurrency}",  # 2: two agents in flight, one proxy
        f"--openenv-agent-writable={pytester.path}",  # where it writes what it was given
        "-n",
        "0",
    )
    rows = played_rows(pytester.path / "openenv-results")
    assert len(rows) == 2, result.stdout.str()
    for row in rows:
        assert row["policy"] == "agent:command"
        assert row["model"] == MODEL
        assert row["extra"]["agent"] == "command"
        assert_played_by(row)
        assert row["messages"][0] == {"role": "system", "content": "You are a mini agent."}
        assert row["messages"][1]["role"] == "user"
        assert row["messages"][1]["content"] == row["task"]["prompt"]
        assert row["metrics"]["prompt_tokens"] > 0
        # one model call per move and one that answers the end in text
        assert row["metrics"]["turns"] == len(row["tool_trace"]) + 1
        # the agent's own seconds, inside the episode's
        assert 0 < row["extra"]["agent_startup_s"] < row["metrics"]["wall_time_s"]
        assert 0 <= row["extra"]["agent_stop_s"] < row["metrics"]["wall_time_s"]
    folder = pytester.path / "openenv-results"
    [described] = json.loads((folder / "metadata.json").read_text())["agents"]
    assert described["policy"] == "agent:command" and described["agent"] == "command"
    assert described["agent_version"] == rows[0]["extra"]["agent_version"]
    assert described["agent_writes"] == f"its episode's folder, {pytester.path}"
    assert "| `agent:command` | `command` |" in (folder / "README.md").read_text()
    # an agent samples with its own settings: the record does not claim ours
    assert "temperature" not in json.loads((folder / "metadata.json").read_text())["identity"]
    # the real key went to the model server, never to the agent
    assert all(auth == f"Bearer {KEY}" for auth in agent_model.authorizations)
    given = json.loads(seen.read_text())
    assert KEY_MARKER not in json.dumps(given)
    assert given["env"]["OPENAI_API_KEY"].startswith("capture-")
    assert given["env"]["HOME"] != os.environ.get("HOME")
    assert not any(KEY_MARKER in p.read_text(errors="replace") for p in _files(pytester.path))
    assert KEY_MARKER not in result.stdout.str() + result.stderr.str()


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and p.name != "seen.json"]


def test_a_hanging_agent_and_its_child_are_ended_at_the_timeout(
    run_pytest, pytester: pytest.Pytester, agent_model
) -> None:
    pids = pytester.path / "pids.txt"
    template = program("hostile_agent", "hang", str(pids)) + " {prompt_file}"
    result = run_pytest(
        *agent_options(
            agent_model,
            "agent:command",
            f"--openenv-agent-command={template}",
            "--openenv-timeout=6",
            f"--openenv-agent-writable={pytester.path}",
            n=1,
        ),
        "-n",
        "0",
    )
    result.assert_outcomes(errors=1)
    [row] = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    assert row["failure"]["outcome"] == "error"
    assert "--openenv-timeout=6s" in row["failure"]["message"]
    assert row["policy"] == "agent:command"
    for pid in map(int, pids.read_text().split()):
        assert not running(pid), pid


def running(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie (dead, waiting for init to reap it) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat.rpartition(b")")[2].split()[0] != b"Z"


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("flood", "flooded its output"),
        ("crash", "exited with status 3"),
    ],
)
def test_an_agent_that_floods_or_crashes_errors_with_the_reason(
    run_pytest, pytester: pytest.Pytester, agent_model, kind: str, says: str
) -> None:
    template = program("hostile_agent", kind, str(pytester.path / "pids")) + " {prompt}"
    result = run_pytest(
        *agent_options(agent_model, "agent:command", f"--openenv-agent-command={template}", n=1),
        "-n",
        "0",
    )
    result.assert_outcomes(errors=1)
    [row] = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    assert row["failure"]["outcome"] == "error"
    assert says in row["failure"]["message"]
    if kind == "crash":  # the agent's own words, from its stderr's tail
        assert "agent crashed: cannot reach its model" in row["failure"]["message"]


def test_an_agent_writes_only_inside_its_folder_and_the_folders_it_is_given(
    run_pytest, pytester: pytest.Pytester, agent_model
) -> None:
    outside = pytester.path / "outside.txt"
    template = program("hostile_agent", "escape", str(outside)) + " {prompt}"
    command = f"--openenv-agent-command={template}"
    result = run_pytest(*agent_options(agent_model, "agent:command", command, n=1), "-n", "0")
    result.assert_outcomes(errors=1)
    assert not outside.exists()
    [row] = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    message = row["failure"]["message"]
    assert "wrote inside.txt" in message  # its own folder stays writable
    assert f"could not write {outside}: Permission denied" in message
    # a folder given with --openenv-agent-writable is written as the agent asked
    given = pytester.path / "given"
    given.mkdir()
    template = program("hostile_agent", "escape", str(given / "out.txt")) + " {prompt}"
    command = f"--openenv-agent-command={template}"
    options = agent_options(agent_model, "agent:command", command, n=1)
    result = run_pytest(*options, f"--openenv-agent-writable={given}", "--openenv-output=again")
    result.assert_outcomes(errors=1)
    assert (given / "out.txt").read_text() == "written by the agent"


def test_an_agent_writable_folder_that_does_not_exist_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester, agent_model
) -> None:
    missing = pytester.path / "no-such-folder"
    template = program("mini_agent", "{prompt_file}", "{mcp_url}", "{model}")
    options = agent_options(agent_model, "agent:command", f"--openenv-agent-command={template}")
    result = run_pytest(*options, f"--openenv-agent-writable={missing}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--openenv-agent-writable='{missing}' is invalid: expected an existing folder" in (
        result.stderr.str()
    )


def test_an_agent_that_quits_without_playing_fails_its_episode(
    run_pytest, pytester: pytest.Pytester, agent_model
) -> None:
    template = program("hostile_agent", "quit", str(pytester.path / "pids")) + " {prompt}"
    result = run_pytest(
        *agent_options(agent_model, "agent:command", f"--openenv-agent-command={template}", n=1),
        "-n",
        "0",
    )
    result.assert_outcomes(failed=1)
    [row] = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    assert row["failure"]["outcome"] == "failed"
    assert row["done"] is False and row["tool_trace"] == []


@pytest.mark.parametrize(
    ("limit", "says"),
    [
        ("--openenv-max-turns=2", "turn"),
        ("--openenv-episode-max-tokens=100", "token_limit"),
    ],
)
def test_an_agent_stopped_by_a_limit_fails_its_episode_unfinished(
    run_pytest, pytester: pytest.Pytester, agent_model, limit: str, says: str
) -> None:
    template = program("mini_agent", "{prompt_file}", "{mcp_url}", "{model}")
    options = agent_options(agent_model, "agent:command", f"--openenv-agent-command={template}")
    options = [o for o in options if not o.startswith("--openenv-max-turns")]
    result = run_pytest(*options, limit, "--openenv-n=1", "-n", "0")
    result.assert_outcomes(failed=1)
    [row] = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    assert row["failure"]["outcome"] == "failed"
    assert row["done"] is False
    assert says in row["extra"]["reason"]
    if says == "turn":  # two model calls answered, the third refused
        assert row["metrics"]["turns"] == 2 and len(row["tool_trace"]) == 2


def test_an_agent_and_a_teacher_play_the_same_seeds_on_xdist_workers(
    run_pytest, pytester: pytest.Pytester, agent_model
) -> None:
    template = program("mini_agent", "{prompt_file}", "{mcp_url}", "{model}")
    options = agent_options(agent_model, "agent:command", f"--openenv-agent-command={template}")
    result = run_pytest(*options, "--openenv-policy=scripted", "-n", "2")
    rows = played_rows(pytester.path / "openenv-results")
    assert len(rows) == 4, result.stdout.str()[-3000:]
    by_policy: dict[str, list[dict]] = {}
    for row in rows:
        by_policy.setdefault(row["policy"], []).append(row)
    assert sorted(by_policy) == ["agent:command", "scripted"]
    for played in by_policy.values():
        assert sorted(row["seed"] for row in played) == [0, 1]
    # the agent's model and the scripted teacher both play the first legal move against the
    # same seeded opponent: the same games
    for agent_row in by_policy["agent:command"]:
        [loop_row] = [r for r in by_policy["scripted"] if r["seed"] == agent_row["seed"]]
        assert [e["arguments"] for e in agent_row["tool_trace"]] == [
            e["arguments"] for e in loop_row["tool_trace"]
        ]
        assert agent_row["reward"] == loop_row["reward"]
        assert "agent" not in loop_row["extra"]
    summary = json.loads((pytester.path / "openenv-results" / "summary.json").read_text())
    assert len(summary["groups"]) == 2
