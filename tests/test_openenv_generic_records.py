"""What the generic family records of OpenEnv's own servers is what they did.

The servers (``tests/servers/openenv_servers.py``, built with the ``openenv`` package)
behave as OpenEnv's on the points at stake: a TextArena server that drops the reset seed
keeps the number to guess only in its state; OpenEnv's echo env answers a failed MCP call
with an error inside its observation, says ``metadata.status: "ready"`` at reset and never
ends an episode; BrowserGym reports a failed action as ``last_action_error``; a REPL-like
env drops a reset field its ``reset()`` does not name; a server may fail every reset.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from helpers import played_rows as rows
from servers.openenv_servers import serve_in_thread

from pytest_openenv.envs.base import EnvConfigError
from pytest_openenv.envs.registry import build_family
from pytest_openenv.envs.remote.servers import RemoteServers
from pytest_openenv.episode.loop import EnvFactory, Limits, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.callable import CallablePolicy

POLICIES = """
def guess_seven(messages, tools):
    return {"name": "step", "arguments": {"message": "[7]"}}


def stand_still(messages, tools):
    return {"name": "step", "arguments": {"action": "UP"}}
"""


@pytest.fixture
def policies(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(policies=POLICIES)


def play(url: str, label: str, calls: list[dict[str, Any]], **limits: Any) -> Any:
    """One episode of the generic family on ``url``, the policy sending ``calls`` in turn."""
    family = build_family(f"openenv:{label}", {}, (url,))
    sent = iter(calls)
    policy = CallablePolicy(lambda messages, tools: {"name": "step", "arguments": next(sent)}, "p")
    env = EnvFactory(family, (url,), remote=RemoteServers())
    return run_episode(EpisodeSpec(f"openenv:{label}", 0, 0), env, policy, limits=Limits(**limits))


# -- a seed the server drops, seen in its state --------------------------------------------------
def test_a_seed_the_server_drops_is_recorded_as_ignored_when_only_its_state_shows_it(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    with serve_in_thread("guess_number") as server:
        result = run_pytest(
            "--openenv-env=openenv:textarena_env",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:guess_seven",
            "--openenv-max-turns=1",
            "--openenv-n=2",
            "-n",
            "0",
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stderr.str()
    out = result.stdout.str()
    assert "ignores the reset seed" in out and "state field(s) raw_state differ" in out
    assert "could not be told" not in out
    folder = pytester.path / "openenv-results"
    found = rows(folder)
    assert len(found) == 2 and [row["extra"]["seeded"] for row in found] == [False, False]
    assert json.loads((folder / "summary.json").read_text())["seeding"]["unseeded"] == 2
    assert "The server ignored the reset seed for 2 of 2 episode(s)" in (
        (folder / "README.md").read_text()
    )


# -- an unfinished episode: no rule judged it ----------------------------------------------------
def test_an_unfinished_episode_says_no_rule_judged_it_in_rows_summary_card_and_report(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    with serve_in_thread("grid_world") as server:
        result = run_pytest(
            "--openenv-env=openenv:grid_world_env",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:stand_still",
            "--openenv-max-turns=2",
            "--openenv-n=2",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    folder = pytester.path / "openenv-results"
    found = rows(folder)
    assert len(found) == 2
    for row in found:
        assert row["verify_metrics"]["outcome"] == "unfinished"
        assert row["extra"]["judged_by"] == "unfinished"
        assert row["extra"]["verdict_rule"].startswith("none: the env did not end the episode")
    rules = json.loads((folder / "summary.json").read_text())["verdict_rules"]
    assert list(rules) == ["unfinished"]
    assert rules["unfinished"]["rule"] and rules["unfinished"]["guessed"] is False
    card = (folder / "README.md").read_text()
    assert "episode(s) judged by" not in card
    assert "2 episode(s) not judged (`unfinished`): the env did not end the episode" in card
    report = (folder / "report.html").read_text()
    assert "2 by " not in report and 'data-fact="verdict"' not in report


# -- errors an env reports inside its observation ------------------------------------------------
def test_mcp_tool_errors_echo_reports_in_its_observation_are_counted() -> None:
    calls = [
        {"type": "call_tool", "tool_name": "shout", "arguments": {"message": "hi"}},
        {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": ""}},
        {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "hi"}},
        {"type": "call_tool", "tool_name": "whisper", "arguments": {}},
    ]
    with serve_in_thread("echo_mcp") as server:
        episode = play(server.url, "echo_env", calls, max_turns=4)
    assert episode.metrics["tool_errors"] == 3
    errors = [step["result"]["error"] for step in episode.tool_trace]
    assert errors[0] == "tool_not_found: Unknown tool: shout"
    assert errors[1] == "message is empty"
    assert errors[2] is None
    assert errors[3] == "tool_not_found: Unknown tool: whisper"


def test_a_failed_browser_action_the_env_flags_is_counted_and_a_clean_one_is_not() -> None:
    calls = [{"action_str": "click('99')"}] * 3 + [{"action_str": "click('7')"}]
    with serve_in_thread("browser") as server:
        episode = play(server.url, "browsergym_env", calls, max_turns=4)
    assert episode.passed and episode.metrics["tool_errors"] == 3
    errors = [step["result"]["error"] for step in episode.tool_trace]
    assert errors[:3] == ["ValueError: Could not find element for action \"click('99')\""] * 3
    assert errors[3] is None


# -- a config field confirmed only by what it changed ----------------------------------------------
def test_a_misspelt_field_is_not_confirmed_because_another_field_changed_the_answer() -> None:
    config = {
        "task_prompt": "What is six times seven?",
        "expected_answr": "42",  # misspelt: the env's reset() never reads it
    }
    with serve_in_thread("reset_task") as server:
        family = build_family("openenv:repl_env", config, (server.url,))
    assert family.unconfirmed == ("expected_answr",)
    (warning,) = family.start_warnings()
    assert "reset field(s) expected_answr" in warning


def test_each_field_that_changed_the_answer_is_confirmed() -> None:
    # neither field shows in the state or the answer: a reset without each tells (without
    # size the server refuses: it reads the field)
    config = {"dataset_name": "chain_sum", "size": 1}
    with serve_in_thread("reasoning_gym") as server:
        family = build_family("openenv:reasoning_gym", config, (server.url,))
    assert family.unconfirmed == ()


# -- an outcome field that holds no outcome ------------------------------------------------------
def test_a_status_of_ready_is_no_outcome_so_the_guessed_verdict_warns() -> None:
    with serve_in_thread("echo_mcp") as server:
        family = build_family("openenv:echo_env", {}, (server.url,))
        warning = family.verdict_warning(None)
    assert warning is not None and "states no outcome" in warning


def test_a_status_that_says_a_game_is_on_is_an_outcome_field() -> None:
    with serve_in_thread("status_maze") as server:
        family = build_family("openenv:maze_env", {}, (server.url,))
        assert family.verdict_warning(None) is None


# -- messages that name the real cause -------------------------------------------------------------
def test_a_plain_reset_the_server_fails_is_blamed_on_the_server_not_the_config() -> None:
    with serve_in_thread("broken_reset") as server, pytest.raises(EnvConfigError) as raised:
        build_family("openenv:broken_reset", {}, (server.url,))
    message = str(raised.value)
    assert "failed a plain reset (seed 0, no reset fields)" in message
    assert "the word list is missing on this server" in message
    assert "env config" not in message


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    ("env", "embedded"), [("openenv:echo_env", False), ("openspiel:tic_tac_toe", True)]
)
def test_a_down_server_is_told_of_the_embedded_engine_only_where_the_family_has_one(
    run_pytest, env: str, embedded: bool
) -> None:
    result = run_pytest(
        f"--openenv-env={env}", f"--openenv-server=http://127.0.0.1:{closed_port()}", "-n", "0"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert "cannot take episodes" in errors
    assert ("embedded engine" in errors) is embedded
