"""Datasets that say only what is true, and agents that see what their player sees.

Against servers built with the ``openenv`` package that behave like OpenEnv's own:
an openspiel server that drops the reset seed and sends only ``info_state``, a maze
whose layout rides in the observation's ``metadata``, an MCP-style echo env.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from helpers import played_rows as rows
from helpers import read_jsonl
from servers.openenv_servers import serve_in_thread

from pytest_openenv.envs.generic import GenericFamily
from pytest_openenv.envs.openspiel.family import OpenSpielFamily
from pytest_openenv.envs.remote.backend import RemoteBackend
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import ScriptedPolicy


# -- seeds --------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_a_server_that_ignores_the_seed_is_warned_about_once_and_recorded(
    workers: str, run_pytest, pytester: pytest.Pytester
) -> None:
    # tic-tac-toe as player 0: the first board is always empty, only the opponent's
    # (unseeded) replies tell the episodes apart
    with serve_in_thread("openspiel", game="tic_tac_toe") as server:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=3",
            f"--openenv-server={server.url}",
            "-n",
            workers,
        )
    assert result.ret in (0, 1), result.stdout.str()
    text = result.stdout.str()
    assert text.count("ignores the reset seed") == 1, text
    found = rows(pytester.path / "openenv-results")
    assert len(found) == 3
    assert all(row["extra"]["seeded"] is False for row in found)


@pytest.mark.slow
def test_a_server_that_honours_the_seed_is_recorded_as_seeded(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_in_thread("tictactoe") as server:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=2",
            f"--openenv-server={server.url}",
            "-n",
            "0",
        )
    assert "ignores the reset seed" not in result.stdout.str()
    found = rows(pytester.path / "openenv-results")
    assert len(found) == 2 and all(row["extra"]["seeded"] is True for row in found)


# -- hidden information -------------------------------------------------------------------
@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker", "liars_dice"])
def test_first_prompt_depends_only_on_what_the_agent_may_know(game: str) -> None:
    """Deals the agent cannot tell apart (same information state) get the same prompt:
    so no prompt shows the opponent's card or dice."""
    family = OpenSpielFamily(game, {})
    prompts: dict[str, set[str]] = defaultdict(set)
    hands: dict[str, set[str]] = defaultdict(set)
    for seed in range(40):
        backend = family.embedded_backend()
        first = backend.reset(seed=seed, episode_id=f"ep-{seed:06d}")
        state = backend._state  # the engine's pyspiel state: the whole truth, both hands
        known = state.information_state_string(0)
        prompts[known].add(family.describe_task(first))
        hands[known].add(state.information_state_string(1))
    assert any(len(h) > 1 for h in hands.values()), "no deal where only the opponent differs"
    leaking = {known: p for known, p in prompts.items() if len(p) > 1}
    assert not leaking, f"prompts differ with the opponent's private info: {leaking}"


def test_kuhn_prompt_names_the_agents_card_and_not_the_opponents() -> None:
    family = OpenSpielFamily("kuhn_poker", {})
    for seed in range(12):
        backend = family.embedded_backend()
        prompt = family.describe_task(backend.reset(seed=seed, episode_id="x"))
        mine, theirs = (int(card) for card in str(backend._state).split())
        assert f"Your card: {'JQK'[mine]}." in prompt
        assert str(backend._state) not in prompt
        assert f"card: {'JQK'[theirs]}" not in prompt or theirs == mine


# -- what the agent sees on a server that sends only info_state -----------------------------
def first_prompt_remote(game: str, url: str) -> str:
    family = OpenSpielFamily(game, {})
    backend = RemoteBackend(url)
    try:
        return family.describe_task(backend.reset(seed=0, episode_id="ep-000000"))
    finally:
        backend.close()


def test_remote_catch_prompt_draws_ball_and_paddle() -> None:
    with serve_in_thread("openspiel", game="catch") as server:
        prompt = first_prompt_remote("catch", server.url)
    board = prompt.split("Board:\n")[1].splitlines()[:10]
    assert [row.count("o") for row in board[:9]] == [1] + [0] * 8, prompt
    assert board[9] == "..x..", prompt


def test_remote_kuhn_prompt_shows_the_agents_card_like_the_embedded_one() -> None:
    with serve_in_thread("openspiel", game="kuhn_poker") as server:
        prompt = first_prompt_remote("kuhn_poker", server.url)
    assert "You are player 0. Your card: " in prompt, prompt
    assert "Betting so far: none yet." in prompt


def test_remote_game_without_a_drawing_shows_the_tensor_by_its_named_parts() -> None:
    with serve_in_thread("openspiel", game="leduc_poker") as server:
        prompt = first_prompt_remote("leduc_poker", server.url)
    view = prompt.split("Your view:\n")[1]
    assert view.startswith("player: 1 0\nprivate_card: "), prompt
    assert "community_card: " in view and "betting: " in view


# -- policies a family cannot honour --------------------------------------------------------
@pytest.mark.slow
def test_random_on_reasoning_gym_is_a_usage_error_not_the_oracle(run_pytest) -> None:
    result = run_pytest(
        "--openenv-env=reasoning_gym:chain_sum", "--openenv-policy=random", "-n", "0"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--openenv-policy=random" in err and "reasoning_gym" in err
    assert "scripted" in err  # the built-in that does fit is offered


@pytest.mark.slow
def test_generic_family_with_the_default_policy_is_one_usage_error(run_pytest) -> None:
    with serve_in_thread("echo") as echo:
        result = run_pytest(
            "--openenv-env=openenv:echo", "--openenv-n=5", f"--openenv-server={echo.url}"
        )
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert err.count("the default teacher (scripted) cannot play openenv:echo") == 1, err
    assert "no --openenv-policy is given" in err and "openai, anthropic" in err, err
    assert "episode error" not in result.stdout.str()


@pytest.mark.slow
def test_generic_default_policy_in_a_test_file_is_one_collection_error(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_echo="def test_echo(episode):\n    assert episode.passed\n")
    with serve_in_thread("echo") as echo:
        result = run_pytest(
            "test_echo.py", "--openenv-env=openenv:echo", f"--openenv-server={echo.url}"
        )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert result.stdout.str().count("cannot play openenv:echo") == 1, result.stdout.str()


# -- the generic family shows what the server sends -----------------------------------------
def generic_first_prompt(kind: str) -> str:
    with serve_in_thread(kind) as server:
        family = GenericFamily(kind, {})
        family.bind_servers((server.url,))
        backend = RemoteBackend(server.url)
        try:
            return family.describe_task(backend.reset(seed=0, episode_id="ep-000000"))
        finally:
            backend.close()


def test_generic_prompt_shows_the_observation_metadata() -> None:
    prompt = generic_first_prompt("maze")
    assert '"layout": ["#####", "#S..#", "#.#.#", "#..G#", "#####"]' in prompt, prompt


def test_generic_prompt_names_an_mcp_servers_tools() -> None:
    prompt = generic_first_prompt("mcp_echo")
    assert "- echo_message: Echo a message back" in prompt, prompt
    assert "- echo_with_length: " in prompt


# -- records --------------------------------------------------------------------------------
def test_tool_trace_keeps_the_text_and_the_parsed_object() -> None:
    family = OpenSpielFamily("tic_tac_toe", {})
    episode = run_episode(
        EpisodeSpec("openspiel:tic_tac_toe", 0, 0), EnvFactory(family), ScriptedPolicy()
    )
    row = episode.record()
    first = row["tool_trace"][0]
    assert first["arguments"] == {"action_id": 0}
    assert json.loads(first["arguments_text"]) == {"action_id": 0}
    assert isinstance(first["arguments_text"], str)


@pytest.mark.slow
def test_empty_system_prompt_sends_no_system_message(run_pytest, pytester: pytest.Pytester) -> None:
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=2",
        "--openenv-system-prompt=",
        "-n",
        "0",
    )
    assert result.ret in (0, 1)
    for row in rows(pytester.path / "openenv-results"):
        assert row["messages"][0]["role"] == "user"
        assert all(message["role"] != "system" for message in row["messages"])


def test_system_prompt_not_given_is_the_familys() -> None:
    family = OpenSpielFamily("tic_tac_toe", {})
    spec = EpisodeSpec("openspiel:tic_tac_toe", 0, 0)
    episode = run_episode(spec, EnvFactory(family), ScriptedPolicy())
    assert episode.messages[0] == {"role": "system", "content": family.system_prompt}


@pytest.mark.slow
def test_id_prefix_names_every_episode_and_resume_reads_it(
    run_pytest, pytester: pytest.Pytester
) -> None:
    args = ("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=3", "--openenv-id-prefix=run.a_1")
    first = run_pytest(*args, "-n", "0")
    assert first.ret in (0, 1)
    found = rows(pytester.path / "openenv-results")
    ids = sorted(row["episode_id"] for row in found)
    assert ids == ["run.a_1-ep-000000", "run.a_1-ep-000001", "run.a_1-ep-000002"]
    results = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert [row["episode_id"] for row in results] == sorted(r["episode_id"] for r in results)
    again = run_pytest(*args, "--openenv-resume", "-n", "0")
    again.assert_outcomes(skipped=len(results), passed=0, failed=3 - len(results))


@pytest.mark.parametrize("bad", ["a b", "run:1", "x/y", ""])
@pytest.mark.slow
def test_bad_id_prefix_is_a_usage_error_naming_the_option(bad: str, run_pytest) -> None:
    result = run_pytest("--openenv-env=openspiel:tic_tac_toe", f"--openenv-id-prefix={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--openenv-id-prefix={bad!r} is invalid" in result.stderr.str()
