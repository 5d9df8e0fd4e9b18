"""A run refuses a server that hosts another env than the one it names.

Real OpenEnv servers (``openenv`` package, uvicorn on 127.0.0.1) hosting another
game, other game params, another env kind, or not saying what they host. The
check runs before the first episode (one usage error, nothing written) and again
in every episode (an episode error, no row under the wrong name).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import SCRIPTED, read_jsonl
from servers.openenv_servers import ThreadServer, serve_in_thread

from pytest_openenv.envs.base import StepResult
from pytest_openenv.envs.generic import GenericFamily, plain_name
from pytest_openenv.envs.registry import build_family
from pytest_openenv.envs.remote.hosting import ServerReport, kind_mismatch
from pytest_openenv.episode.loop import EnvFactory, EpisodeError, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import ScriptedPolicy
from pytest_openenv.report.summary import summary_lines

SERVERS = {
    "tictactoe": ("tictactoe", {}),
    "catch": ("openspiel", {"game": "catch"}),
    "catch_rows5": ("openspiel", {"game": "catch", "game_params": {"rows": 5}}),
    "catch_rows10": ("openspiel", {"game": "catch", "game_params": {"rows": 10}}),
    "silent": ("silent_tictactoe", {}),
    "echo": ("echo", {}),
}


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ThreadServer]]:
    started: dict[str, ThreadServer] = {}
    try:
        for name, (kind, options) in SERVERS.items():
            started[name] = serve_in_thread(kind, **options)
        yield started
    finally:
        for server in started.values():
            server.stop()


def all_rows(folder: Path) -> list[dict[str, Any]]:
    return read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl")


def reported(row: dict[str, Any]) -> Any:
    """``extra.server_reports`` decoded (rows keep nested values as JSON text)."""
    value = row["extra"]["server_reports"]
    return None if value is None else json.loads(value)


# -- before the first episode: one usage error naming both, nothing written ---------------------
MISMATCHES = [
    # (env, env config, server, what the message must name besides the server URL)
    ("openspiel:connect_four", "{}", "tictactoe", ["connect_four", "'tic_tac_toe'"]),
    ("openspiel:tic_tac_toe", "{}", "catch", ["openspiel:tic_tac_toe", "'catch'"]),
    ("openspiel:catch", "{}", "catch_rows5", ['{"rows": 5}', "game_params {}"]),
    ("openspiel:tic_tac_toe", '{"agent_player": 1}', "tictactoe", ["player 0", "agent_player 1"]),
    ("openspiel:tic_tac_toe", "{}", "echo", ["['action_id']", "'message'", "'echo_env'"]),
    ("reasoning_gym:chain_sum", "{}", "tictactoe", ["['answer']", "'action_id'"]),
    ("openenv:tictactoe", "{}", "echo", ["'echo_env'", "label 'tictactoe'"]),
]


@pytest.mark.parametrize(("env", "config", "server", "names"), MISMATCHES)
@pytest.mark.slow
def test_a_server_hosting_another_env_is_one_usage_error_before_any_episode(
    run_pytest,
    pytester: pytest.Pytester,
    servers: dict[str, ThreadServer],
    env: str,
    config: str,
    server: str,
    names: list[str],
) -> None:
    url = servers[server].url
    result = run_pytest(
        f"--openenv-env={env}",
        f"--openenv-env-config={config}",
        "--openenv-n=3",
        f"--openenv-server={url}",
        "-n",
        "0",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert f"{url} does not host {env}" in errors
    for name in names:
        assert name in errors, errors
    assert "before any episode ran" in errors
    assert not (pytester.path / "openenv-results").exists()


def test_one_mismatched_server_among_several_is_named_alone(
    run_pytest, pytester: pytest.Pytester, servers: dict[str, ThreadServer]
) -> None:
    good, bad = servers["tictactoe"].url, servers["catch"].url
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=4",
        f"--openenv-server={good}",
        f"--openenv-server={bad}",
        "-n",
        "2",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert "1 of 2 --openenv-server(s) host another env" in errors
    assert f"{bad} does not host openspiel:tic_tac_toe: it hosts OpenSpiel game 'catch'" in errors
    assert f"{good} does not host" not in errors
    assert not (pytester.path / "openenv-results").exists()


# -- a matching server: the run goes on and every record says what the server hosts ------------
@pytest.mark.parametrize(
    ("env", "config", "server", "hosted"),
    [
        (
            "openspiel:tic_tac_toe",
            "{}",
            "tictactoe",
            {
                "game_name": "tic_tac_toe",
                "game_params": {},
                "agent_player": 0,
                "opponent_policy": "random",
            },
        ),
        # a server spelling out a default parameter hosts the same game
        (
            "openspiel:catch",
            "{}",
            "catch_rows10",
            {
                "game_name": "catch",
                "game_params": {"rows": 10},
                "agent_player": 0,
                "opponent_policy": "random",  # as the server says, though catch has no opponent
            },
        ),
        (
            "openspiel:catch",
            '{"game_params": {"rows": 5}}',
            "catch_rows5",
            {
                "game_name": "catch",
                "game_params": {"rows": 5},
                "agent_player": 0,
                "opponent_policy": "random",
            },
        ),
    ],
)
def test_a_matching_server_runs_and_records_what_it_hosts(
    run_pytest,
    pytester: pytest.Pytester,
    servers: dict[str, ThreadServer],
    env: str,
    config: str,
    server: str,
    hosted: dict[str, Any],
) -> None:
    result = run_pytest(
        f"--openenv-env={env}",
        f"--openenv-env-config={config}",
        "--openenv-n=3",
        f"--openenv-server={servers[server].url}",
        "-n",
        "0",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    found = all_rows(pytester.path / "openenv-results")
    assert len(found) == 3
    assert all("failure" not in r or r["failure"]["outcome"] != "error" for r in found)
    assert [reported(r) for r in found] == [hosted] * 3
    assert "does not say what it hosts" not in result.stdout.str()


def test_generic_family_label_naming_the_server_runs(
    run_pytest, pytester: pytest.Pytester, servers: dict[str, ThreadServer]
) -> None:
    pytester.makeconftest(
        """
import pytest
from pytest_openenv.policies.base import Policy, Reply, ToolCall

class Silent(Policy):
    name = "silent"
    def act(self, turn):
        return Reply(tool_calls=(ToolCall("c", "step", '{"message": "nothing"}'),))

@pytest.fixture
def openenv_policy():
    return Silent()
"""
    )
    result = run_pytest(
        "--openenv-env=openenv:echo", "--openenv-n=2", f"--openenv-server={servers['echo'].url}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the policy never says the word
    found = all_rows(pytester.path / "openenv-results")
    # the metadata name, and the env_name the server's app was made with
    assert [reported(r) for r in found] == [{"name": "echo_env", "env_names": ["echo"]}] * 2


@pytest.mark.slow
def test_a_server_that_cannot_say_runs_with_one_warning(
    run_pytest, pytester: pytest.Pytester, servers: dict[str, ThreadServer]
) -> None:
    url = servers["silent"].url
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=4",
        f"--openenv-server={url}",
        "-n",
        "2",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    output = result.stdout.str()
    assert output.count(f"--openenv-server {url} does not say what it hosts") == 1
    found = all_rows(pytester.path / "openenv-results")
    assert len(found) == 4
    assert [r["extra"]["server_reports"] for r in found] == [None] * 4
    assert {r["extra"]["backend"] for r in found} == {"remote"}


# -- during the run: an episode on a server hosting another game errors, no row is written ------
SWAPPING_FACTORY = """
import pytest
from pytest_openenv import EnvFactory
from pytest_openenv.envs.registry import build_family

SERVERS = ({good!r}, {bad!r})  # the second URL stands for a server swapped mid-run


@pytest.fixture(scope="session")
def openenv_env():
    return EnvFactory(build_family("openspiel:tic_tac_toe", {{}}, SERVERS), SERVERS)
"""


def test_an_episode_on_a_server_swapped_mid_run_is_an_error_not_a_row(
    run_pytest, pytester: pytest.Pytester, servers: dict[str, ThreadServer]
) -> None:
    good, bad = servers["tictactoe"].url, servers["catch"].url
    pytester.makeconftest(SWAPPING_FACTORY.format(good=good, bad=bad))
    # the preflight sees only the good server: the bad one is met during the run
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=4", f"--openenv-server={good}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    folder = pytester.path / "openenv-results"
    results = read_jsonl(folder / "results.jsonl")
    assert results, "the episodes on the good server still pass"
    assert {r["extra"]["server"] for r in results} == {good}
    failures = {r["episode_id"]: r for r in read_jsonl(folder / "failures.jsonl")}
    for episode_id in ("ep-000001", "ep-000003"):  # round robin: odd episodes on the bad server
        failure = failures[episode_id]["failure"]
        assert failure["outcome"] == "error"
        assert (
            f"{episode_id} was not recorded: {bad} does not host openspiel:tic_tac_toe"
            in (failure["message"])
        )
        assert "it hosts OpenSpiel game 'catch'" in failure["message"]
        assert failures[episode_id]["messages"] == []  # nothing of the catch game kept
    assert result.stdout.str().count("was not recorded") >= 2


def test_run_episode_refuses_a_server_hosting_another_game(
    servers: dict[str, ThreadServer],
) -> None:
    url = servers["catch"].url
    family = build_family("openspiel:tic_tac_toe", {}, (url,))
    with pytest.raises(EpisodeError, match=r"ep-000000 was not recorded: .* hosts OpenSpiel game"):
        run_episode(
            EpisodeSpec("openspiel:tic_tac_toe", 0, 0), EnvFactory(family, (url,)), ScriptedPolicy()
        )
    ok = build_family("openspiel:catch", {}, (url,))
    episode = run_episode(
        EpisodeSpec("openspiel:catch", 0, 0), EnvFactory(ok, (url,)), ScriptedPolicy()
    )
    assert episode.record()["extra"]["server_reports"] is not None


def test_an_observation_in_another_shape_than_the_schema_is_another_env() -> None:
    family = build_family("openspiel:tic_tac_toe", {})
    report = ServerReport(
        server="http://x",
        action_fields=frozenset({"action_id"}),
        observation_fields=frozenset({"info_state", "legal_actions", "done", "reward"}),
        first=StepResult(observation={"question": "2 + 2?", "score": None}),
    )
    why = kind_mismatch(family, report)
    assert why is not None and "['question', 'score']" in why
    same_shape = ServerReport(
        server="http://x",
        observation_fields=report.observation_fields,
        first=StepResult(observation={"info_state": [], "legal_actions": [0]}),
    )
    assert kind_mismatch(family, same_shape) is None


@pytest.mark.parametrize(
    ("label", "name", "same"),
    [
        ("echo", "echo_env", True),
        ("echo", "EchoEnvironment", True),
        ("echo-env", "Echo_Env", True),
        ("echo_v2", "echo-env", False),  # another env's name, however alike
        ("tictactoe", "echo_env", False),
        ("catch", "openspiel_env", False),
    ],
)
def test_generic_labels_match_the_metadata_name_once_normalised(
    label: str, name: str, same: bool
) -> None:
    why = GenericFamily(label, {}).hosting_mismatch({"name": name})
    assert (why is None) is same
    if not same:
        assert f"{name!r}" in why and f"label {label!r}" in why
    assert plain_name("Echo_Environment") == plain_name("echo-env") == "echo"


# -- the first-run hint: why pytest exits 1 and what to run next ----------------------------------
FIGURES = {
    "envs": ["openspiel:tic_tac_toe"],
    "policies": ["scripted"],
    "models": [],
    "passed": 6,
    "failed": 4,
    "errored": 0,
    "skipped": 0,
    "ran": 10,
    "pass_rate": 0.6,
    "pass_rate_ci95": [0.31, 0.83],
    "mean_reward": 0.2,
    "mean_reward_stderr": 0.1,
    "mean_turns": 3.0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "wall_time_s": 1.0,
    "episodes_per_s": 10.0,
}
HINT = "4 episode(s) failed, so pytest exits 1; gate the run with --openenv-min-pass-rate F"


def test_the_hint_shows_only_when_episodes_failed_and_no_gate_is_set() -> None:
    shown = summary_lines(FIGURES, "out", teacher="expert")
    assert [line for line in shown if line.startswith(HINT)] == [
        f"{HINT} (this run passed 0.60), or collect with a stronger teacher "
        "(--openenv-policy=expert)"
    ]
    # no teacher that would play the env: the hint names only the gate
    assert [line for line in summary_lines(FIGURES, "out") if line.startswith(HINT)] == [
        f"{HINT} (this run passed 0.60)"
    ]
    assert not [line for line in summary_lines(FIGURES, "out", gated=True) if "exits 1" in line]
    all_passed = {**FIGURES, "passed": 10, "failed": 0, "pass_rate": 1.0}
    assert not [line for line in summary_lines(all_passed, "out") if "exits 1" in line]


@pytest.mark.slow
def test_the_hint_in_a_real_run_and_not_with_a_gate(run_pytest) -> None:
    # seeds 0..9: the first-legal teacher loses some games to the random opponent
    args = ("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=10", "-n", "0", SCRIPTED)
    ungated = run_pytest(*args)
    assert ungated.ret == pytest.ExitCode.TESTS_FAILED
    hint = [line for line in ungated.outlines if "so pytest exits 1" in line]
    assert len(hint) == 1 and "--openenv-min-pass-rate" in hint[0]
    assert "--openenv-policy=expert" in hint[0]
    gated = run_pytest(*args, "--openenv-min-pass-rate=0.0")
    assert gated.ret == pytest.ExitCode.OK
    assert "so pytest exits 1" not in gated.stdout.str()
