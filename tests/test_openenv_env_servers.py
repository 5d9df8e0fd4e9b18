"""OpenEnv's own env servers: every record says only what the server really did.

The servers are built with the ``openenv`` package and behave as OpenEnv's own
(``envs/<name>_env/server`` in its repository) on the points at stake: the openspiel
server keeps its game, agent player and opponent in the session's ``state`` frame
only (its ``GET /state`` is the base ``State``) and does not seed its opponent; the
reasoning_gym server serves ``leg_counting`` unless reset fields name a dataset; a
REPL-like env takes its task only from reset fields; a TextArena-like game scores a
loss with partial reward; a coding-like env never says done, and its ``/metadata``
names a class while its app carries the folder name (``tests/servers``).
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import played_rows as rows
from helpers import read_jsonl
from servers.openenv_servers import ThreadServer, serve_in_thread

from pytest_openenv.envs.base import ProposedCall, StepResult
from pytest_openenv.envs.registry import build_family
from pytest_openenv.envs.remote.servers import RemoteServers
from pytest_openenv.episode.loop import EnvFactory, Limits, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.callable import CallablePolicy

POLICIES = """
import json, re


def observation(messages):
    for message in reversed(messages):
        text = message.get("content") or ""
        if message["role"] in ("user", "tool") and "Observation: " in text:
            return json.loads(text.split("Observation: ", 1)[1].split("\\n", 1)[0])
    return {}


def say_42(messages, tools):
    return {"name": "step", "arguments": {"answer": "42"}}


def answer_zero(messages, tools):
    return {"name": "step", "arguments": {"answer": "0"}}


def first_legal(messages, tools):
    return {"name": "step", "arguments": {"action_id": observation(messages)["legal_actions"][0]}}


def guess_wrong(messages, tools):  # the arena's numbers run 1..5: 9 never wins
    return {"name": "step", "arguments": {"message": "[9]"}}


def run_code(messages, tools):
    return {"name": "step", "arguments": {"code": "print(1)"}}


def solve(messages, tools):
    return {"name": "step", "arguments": {"move": "solve"}}


def give_up(messages, tools):
    return {"name": "step", "arguments": {"move": "give_up"}}


def wrong_answer(messages, tools):
    return {"name": "answer", "arguments": {"answer": "not a number"}}


def straight_on(messages, tools):  # the snake's fruit, then the wall
    return {"name": "step", "arguments": {"action": 0}}


def circle_once_fed(messages, tools):  # straight to the fruit, then left round a 2x2 square
    fed = observation(messages).get("episode_fruits", 0)
    return {"name": "step", "arguments": {"action": 1 if fed else 0}}
"""


@pytest.fixture
def policies(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(policies=POLICIES)


@pytest.fixture(scope="module")
def tictactoe_server() -> Iterator[ThreadServer]:
    """OpenEnv's openspiel server as ``OPENSPIEL_GAME=tic_tac_toe`` starts it."""
    with serve_in_thread("openspiel", game="tic_tac_toe") as server:
        yield server


def by_id(folder: Path) -> dict[str, dict[str, Any]]:
    return {row["episode_id"]: row for row in rows(folder)}


def tool_texts(row: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in row["messages"] if m["role"] == "tool")


# -- 1. the env config reaches the server as reset fields, and only what it takes is recorded --
def test_the_generic_env_config_is_sent_as_reset_fields(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    config = {"dataset_name": "chain_sum", "size": 1}
    with serve_in_thread("reasoning_gym") as server:
        result = run_pytest(
            "--openenv-env=openenv:reasoning_gym",
            f"--openenv-env-config={json.dumps(config)}",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:answer_zero",
            "--openenv-n=3",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # 0 is no chain_sum's answer
    found = rows(pytester.path / "openenv-results")
    assert len(found) == 3
    for row in found:
        assert json.loads(row["task"]["config"]) == config
        # what the server served is what the record says: chain_sum, not its leg_counting
        assert '"source_dataset": "chain_sum"' in tool_texts(row)
        assert "legs" not in row["messages"][1]["content"]


@pytest.mark.slow
def test_a_task_given_only_in_reset_fields_reaches_the_env(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    config = {"task_prompt": "What is six times seven?", "expected_answer": "42"}
    with serve_in_thread("reset_task") as server:
        result = run_pytest(
            "--openenv-env=openenv:repl_env",
            f"--openenv-env-config={json.dumps(config)}",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:say_42",
            "--openenv-n=2",
            "-n",
            "2",
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    found = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert len(found) == 2 and {row["reward"] for row in found} == {1.0}
    assert all("What is six times seven?" in row["messages"][1]["content"] for row in found)


def test_a_reset_field_the_server_says_it_does_not_take_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester
) -> None:
    fields = {name: {"type": "string"} for name in ("context", "task_prompt", "expected_answer")}
    schema = {"type": "object", "properties": fields, "additionalProperties": False}
    with serve_in_thread("reset_task", reset_schema=schema) as server:
        result = run_pytest(
            "--openenv-env=openenv:repl_env",
            '--openenv-env-config={"prompt": "What is six times seven?"}',
            f"--openenv-server={server.url}",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert "reset field(s) ['prompt']" in errors
    assert "['context', 'expected_answer', 'task_prompt']" in errors
    assert not (pytester.path / "openenv-results").exists()


def test_a_reset_field_the_server_dropped_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester, tictactoe_server: ThreadServer
) -> None:
    # OpenEnv's openspiel reset() takes no fields: its server drops them without a word,
    # and the session's state still names the game it hosts
    result = run_pytest(
        "--openenv-env=openenv:openspiel_env",
        '--openenv-env-config={"game_name": "connect_four"}',
        f"--openenv-server={tictactoe_server.url}",
        "-n",
        "0",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        'did not take the reset field game_name="connect_four" from --openenv-env-config: '
        'after the reset its state says game_name="tic_tac_toe"'
    ) in result.stderr.str()
    assert not (pytester.path / "openenv-results").exists()


@pytest.mark.parametrize("field", ["seed", "episode_id"])
def test_the_env_config_may_not_set_what_each_episode_sets(
    run_pytest, tictactoe_server: ThreadServer, field: str
) -> None:
    result = run_pytest(
        "--openenv-env=openenv:openspiel_env",
        f'--openenv-env-config={{"{field}": 3}}',
        f"--openenv-server={tictactoe_server.url}",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"may not set ['{field}']" in result.stderr.str()


# -- 2. the server's opponent is checked like its game -----------------------------------------
@pytest.mark.parametrize(
    ("server_opponent", "config", "names"),
    [
        ("first", "{}", ["its opponent plays 'first'", "opponent 'random'"]),
        (
            "random",
            '{"opponent": "expert"}',
            ["its opponent plays 'random'", "OpenEnv's server has no 'expert' opponent"],
        ),
    ],
)
def test_a_server_playing_another_opponent_is_one_usage_error(
    run_pytest, pytester: pytest.Pytester, server_opponent: str, config: str, names: list[str]
) -> None:
    with serve_in_thread("openspiel", game="tic_tac_toe", opponent_policy=server_opponent) as s:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-env-config={config}",
            f"--openenv-server={s.url}",
            "--openenv-n=3",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    for name in names:
        assert name in result.stderr.str()
    assert not (pytester.path / "openenv-results").exists()


@pytest.mark.slow
def test_the_server_s_opponent_is_what_prompts_and_records_say(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_in_thread("openspiel", game="tic_tac_toe", opponent_policy="first") as server:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            '--openenv-env-config={"opponent": "first"}',
            f"--openenv-server={server.url}",
            "--openenv-n=2",
            "-n",
            "0",
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    found = rows(pytester.path / "openenv-results")
    assert len(found) == 2
    for row in found:
        assert (
            "against an opponent that always plays its first legal action"
            in (row["messages"][1]["content"])
        )
        assert json.loads(row["extra"]["server_reports"])["opponent_policy"] == "first"


# -- 3. a mismatch on OpenEnv's server is one usage error, whatever its HTTP /state says -------
@pytest.mark.parametrize(
    ("env", "config", "says"),
    [
        ("openspiel:connect_four", "{}", "it hosts OpenSpiel game 'tic_tac_toe'"),
        ("openspiel:tic_tac_toe", '{"agent_player": 1}', "its agent is player 0 of tic_tac_toe"),
    ],
)
@pytest.mark.parametrize("workers", ["0", "2"])
def test_hosting_another_game_on_openenv_s_server_is_one_usage_error(
    run_pytest,
    pytester: pytest.Pytester,
    tictactoe_server: ThreadServer,
    env: str,
    config: str,
    says: str,
    workers: str,
) -> None:
    result = run_pytest(
        f"--openenv-env={env}",
        f"--openenv-env-config={config}",
        f"--openenv-server={tictactoe_server.url}",
        "--openenv-n=5",
        "-n",
        workers,
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert f"{tictactoe_server.url} does not host {env}: {says}" in errors
    assert "before any episode ran" in errors
    assert not (pytester.path / "openenv-results").exists()


def test_a_matching_openenv_server_gives_no_warning_and_records_its_game(
    run_pytest, pytester: pytest.Pytester, tictactoe_server: ThreadServer
) -> None:
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        f"--openenv-server={tictactoe_server.url}",
        "--openenv-n=2",
        "-n",
        "0",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert "does not say what it hosts" not in result.stdout.str()
    found = rows(pytester.path / "openenv-results")
    assert [json.loads(r["extra"]["server_reports"])["game_name"] for r in found] == [
        "tic_tac_toe"
    ] * 2


# -- 4. a seed probe that cannot step says it could not tell -----------------------------------
@pytest.mark.slow
def test_the_generic_seed_probe_says_it_could_not_tell(
    run_pytest, pytester: pytest.Pytester, tictactoe_server: ThreadServer, policies: None
) -> None:
    # as player 0 every reset shows the empty board; only the unseeded opponent's replies
    # differ, and the generic family has no move of its own to draw them out with
    result = run_pytest(
        "--openenv-env=openenv:openspiel_env",
        f"--openenv-server={tictactoe_server.url}",
        "--openenv-policy=policies:first_legal",
        "--openenv-n=3",
        "-n",
        "2",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    text = result.stdout.str()
    assert "whether it honours the reset seed could not be told" in text
    assert "has no scripted move to play on" in text
    found = rows(pytester.path / "openenv-results")
    assert len(found) == 3 and [row["extra"]["seeded"] for row in found] == [None] * 3


# -- 5. the verdict, and every text about it ---------------------------------------------------
@pytest.mark.slow
def test_a_lost_game_with_partial_reward_does_not_pass(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    with serve_in_thread("arena") as server:
        result = run_pytest(
            "--openenv-env=openenv:arena",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:guess_wrong",
            "--openenv-n=2",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert not read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    for row in rows(pytester.path / "openenv-results"):
        assert row["reward"] == 0.5 and row["done"] and not row["passed"]
        assert row["verify_metrics"] == {"outcome": "fail", "min_reward": 1.0, "verdict": False}
        assert row["extra"]["reason"] == (
            "fail: reward 0.5 is below the pass threshold 1 (a threshold the plugin guessed, "
            "not the env's verifier; --openenv-min-reward sets it)"
        )
    result.stdout.fnmatch_lines(["*FAILED (reward=0.5 turns=3 fail)*"])


@pytest.mark.slow
def test_every_verdict_text_says_what_min_reward_decided(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    with serve_in_thread("arena") as server:
        passing = run_pytest(
            "--openenv-env=openenv:arena",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:guess_wrong",
            "--openenv-min-reward=0.5",
            "--openenv-n=1",
            "-n",
            "0",
            "-v",
        )
        failing = run_pytest(
            "--openenv-env=openenv:arena",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:guess_wrong",
            "--openenv-min-reward=0.75",
            "--openenv-n=1",
            "-n",
            "0",
            "--openenv-output=strict",
        )
    assert passing.ret == pytest.ExitCode.OK
    passing.stdout.fnmatch_lines(["*PASSED (reward=0.5 turns=3 pass)*"])
    (kept,) = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert kept["verify_metrics"] == {"outcome": "pass", "min_reward": 0.5, "verdict": True}
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    (failed,) = read_jsonl(pytester.path / "strict" / "failures.jsonl")
    assert failed["verify_metrics"] == {"outcome": "fail", "min_reward": 0.75, "verdict": False}
    assert failed["extra"]["reason"] == "fail: reward 0.5 is below the pass threshold 0.75"
    assert "outcome=fail reward=0.5 (pass needs reward >= 0.75)" in failed["failure"]["message"]
    failing.stdout.fnmatch_lines(["*FAILED (reward=0.5 turns=3 fail)*"])


def test_a_reward_just_under_the_threshold_is_shown_in_full(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    # ten steps of 0.1 add up to 0.9999999999999999: shown as 1 it would read as a pass
    with serve_in_thread("endless") as server:
        result = run_pytest(
            "--openenv-env=openenv:coding_env",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:run_code",
            "--openenv-judge-at=turn-limit",
            "--openenv-max-turns=10",
            "--openenv-n=1",
            "-n",
            "0",
            "-v",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*FAILED (reward=0.9999999999999999 turns=10 fail)*"])
    (row,) = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    assert row["extra"]["reason"] == (
        "fail: reward 0.9999999999999999 is below the pass threshold 1 when the turn limit "
        "(10) ended it (a threshold the plugin guessed, not the env's verifier; "
        "--openenv-min-reward sets it)"
    )


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_rewards_that_sum_past_float_max_are_an_episode_error(
    run_pytest, pytester: pytest.Pytester, policies: None, workers: str
) -> None:
    """1e308 twice is inf: it was INTERNALERROR (not JSON compliant), exit 3."""
    with serve_in_thread("endless", step_reward=1e308) as server:
        result = run_pytest(
            "--openenv-env=openenv:coding_env",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:run_code",
            "--openenv-judge-at=turn-limit",
            "--openenv-max-turns=3",
            "--openenv-n=2",
            "-n",
            workers,
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    result.assert_outcomes(errors=2)
    (row, _) = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    message = row["failure"]["message"]
    assert "rewards are not finite numbers" in message, message
    assert "step 2 gave reward 1e+308 after a sum of 1e+308, making inf" in message, message


@pytest.mark.slow
def test_an_env_with_no_terminal_state_passes_when_judged_at_the_turn_limit(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    common = ("--openenv-env=openenv:coding_env", "--openenv-policy=policies:run_code")
    common += ("--openenv-max-turns=4", "--openenv-n=2", "-n", "0")
    pytester.makepyfile(
        test_marked="""
import pytest

@pytest.mark.openenv(judge_at="turn-limit", min_reward=0.3)
def test_code(episode):
    assert episode.passed, episode.explain()
"""
    )
    with serve_in_thread("endless") as server:
        unjudged = run_pytest(*common, f"--openenv-server={server.url}", "--openenv-output=a")
        judged = run_pytest(
            *common,
            f"--openenv-server={server.url}",
            "--openenv-judge-at=turn-limit",
            "--openenv-min-reward=0.3",
            "--openenv-output=b",
        )
        marked = run_pytest(
            *common, f"--openenv-server={server.url}", "--openenv-output=c", "test_marked.py"
        )
    assert unjudged.ret == pytest.ExitCode.TESTS_FAILED
    assert {r["verify_metrics"]["outcome"] for r in rows(pytester.path / "a")} == {"unfinished"}
    for folder, result in (("b", judged), ("c", marked)):
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        kept = read_jsonl(pytester.path / folder / "results.jsonl")
        assert len(kept) == 2 and all(not r["done"] and r["passed"] for r in kept)
        assert {r["verify_metrics"]["outcome"] for r in kept} == {"pass"}


def documented_snake_run() -> tuple[list[str], list[str]]:
    """docs/env-families.md's snake_env row: its command's options (the server left out) and
    the options it says make an episode pass."""
    page = Path(__file__).resolve().parent.parent / "docs" / "env-families.md"
    (line,) = [row for row in page.read_text().splitlines() if row.startswith("| `snake_env`")]
    command, rule = re.findall(r"`(pytest [^`]+|--openenv-judge-at[^`]+)`", line)
    options = [word for word in shlex.split(command)[1:] if "--openenv-server" not in word]
    return options, shlex.split(rule)


@pytest.mark.slow
def test_a_snake_passes_only_fed_and_alive_at_the_turn_limit_under_the_documented_rule(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    """OpenEnv's snake ends an episode only when the snake dies, on a step scoring -1: by
    default no episode passes (the page once said one passed "once the snake has eaten").
    The page's rule passes a snake that ate and is alive at the turn limit, not one that
    ate and then died."""
    command, rule = documented_snake_run()
    assert rule == ["--openenv-judge-at=turn-limit", "--openenv-min-reward=1"]
    found = {}
    with serve_in_thread("snake") as server:
        for policy in ("circle_once_fed", "straight_on"):
            for judged in (False, True):
                folder = f"{policy}-{'judged' if judged else 'default'}"
                result = run_pytest(
                    *command,
                    *(rule if judged else []),
                    f"--openenv-server={server.url}",
                    f"--openenv-policy=policies:{policy}",
                    f"--openenv-output={folder}",
                    "--openenv-n=2",
                    "-n",
                    "0",
                )
                assert "INTERNALERROR" not in result.stdout.str()
                found[policy, judged] = (result.ret, rows(pytester.path / folder))
    for (policy, judged), (ret, played) in found.items():
        passed = policy == "circle_once_fed" and judged
        assert ret == (pytest.ExitCode.OK if passed else pytest.ExitCode.TESTS_FAILED)
        assert len(played) == 2 and all(row["passed"] is passed for row in played)
    circling = found["circle_once_fed", False][1]
    assert all(not row["done"] for row in circling)
    assert {row["verify_metrics"]["outcome"] for row in circling} == {"unfinished"}
    for row in found["circle_once_fed", True][1]:  # a fruit and 30 steps alive
        assert not row["done"] and row["reward"] == pytest.approx(1.03)
    for judged in (False, True):  # ate, then met the wall on its sixth step
        for row in found["straight_on", judged][1]:
            assert row["done"] and row["reward"] == pytest.approx(0.005)
            assert row["metrics"]["turns"] == 6


@pytest.mark.parametrize(
    ("policy", "passed", "reason"),
    [
        ("policies:solve", True, None),
        ("policies:give_up", False, "fail: the server's solved is false (reward 1)"),
    ],
)
def test_the_env_s_own_success_field_decides_over_the_reward(
    run_pytest, pytester: pytest.Pytester, policies: None, policy: str, passed: bool, reason: Any
) -> None:
    with serve_in_thread("puzzle") as server:
        result = run_pytest(
            "--openenv-env=openenv:puzzle",
            f"--openenv-server={server.url}",
            f"--openenv-policy={policy}",
            "--openenv-n=1",
            "-n",
            "0",
        )
    assert result.ret == (pytest.ExitCode.OK if passed else pytest.ExitCode.TESTS_FAILED)
    (row,) = rows(pytester.path / "openenv-results")
    assert row["passed"] is passed and row["extra"]["reason"] == reason


# -- 7. what the agent needs to act ------------------------------------------------------------
def test_the_generic_tool_carries_the_server_s_descriptions_and_not_the_env_s_fixed_fields(
    tictactoe_server: ThreadServer,
) -> None:
    family = build_family("openenv:openspiel_env", {}, (tictactoe_server.url,))
    (tool,) = family.openai_tools()
    function = tool["function"]
    # OpenSpielAction's docstring: the only place OpenEnv says what the fields mean
    assert (
        "action_id: The integer action ID to take (from legal_actions)."
        in (function["description"])
    )
    assert set(function["parameters"]["properties"]) == {"action_id"}
    action = family.to_action(ProposedCall("step", {"action_id": 4}), StepResult({}))
    assert action == {"action_id": 4, "game_name": "tic_tac_toe", "game_params": {}}
    env = EnvFactory(family, (tictactoe_server.url,), remote=RemoteServers())
    episode = run_episode(
        EpisodeSpec("openenv:openspiel_env", 0, 0),
        env,
        CallablePolicy(
            lambda messages, tools: {"name": "step", "arguments": {"action_id": 0}}, "first"
        ),
        limits=Limits(max_turns=1),
    )
    prompt = episode.messages[1]["content"]
    assert prompt.startswith("Environment: openspiel_env.\nObservation: ")
    assert "OpenSpielEnvironment environment" not in prompt
    assert "legal" in prompt


def test_remote_kuhn_poker_names_its_actions_as_the_embedded_engine_does() -> None:
    embedded = build_family("openspiel:kuhn_poker", {})
    first = embedded.embedded_backend().reset(seed=0, episode_id="ep-000000")
    assert "Legal actions: 0 (Pass), 1 (Bet)" in embedded.describe_task(first)
    with serve_in_thread("openspiel", game="kuhn_poker") as server:
        family = build_family("openspiel:kuhn_poker", {}, (server.url,))
        env = EnvFactory(family, (server.url,), remote=RemoteServers())
        backend = env.open(EpisodeSpec("openspiel:kuhn_poker", 0, 0))
        try:
            remote_first = backend.reset(seed=0, episode_id="ep-000000")
        finally:
            backend.close()
    assert "action_names" not in remote_first.metadata  # the server sends ids only
    assert "Legal actions: 0 (Pass), 1 (Bet)" in family.describe_task(remote_first)


# -- 8. the names users know -------------------------------------------------------------------
@pytest.mark.parametrize("label", ["coding_env", "PythonCodeActEnv", "coding"])
def test_a_generic_label_may_be_the_env_s_folder_or_metadata_name(
    run_pytest, pytester: pytest.Pytester, policies: None, label: str
) -> None:
    with serve_in_thread("endless") as server:
        result = run_pytest(
            f"--openenv-env=openenv:{label}",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:run_code",
            "--openenv-max-turns=1",
            "--openenv-n=1",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # unfinished: it never says done
    (row,) = rows(pytester.path / "openenv-results")
    assert json.loads(row["extra"]["server_reports"]) == {
        "name": "PythonCodeActEnv",
        "env_names": ["coding_env"],
    }


def test_a_generic_label_no_name_of_the_server_matches_says_its_names(run_pytest) -> None:
    with serve_in_thread("endless") as server:
        result = run_pytest("--openenv-env=openenv:snake_env", f"--openenv-server={server.url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "it goes by 'PythonCodeActEnv' or 'coding_env' (GET /metadata, /list_environments), "
        "which the label 'snake_env' does not name exactly; use --openenv-env=openenv:coding_env"
    ) in result.stderr.str()


# -- 9. hints name only what would run ---------------------------------------------------------
@pytest.mark.slow
def test_a_failed_run_hints_no_teacher_the_family_does_not_have(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    embedded = run_pytest(
        "--openenv-env=reasoning_gym:chain_sum",
        "--openenv-policy=policies:wrong_answer",
        "--openenv-n=2",
        "-n",
        "0",
    )
    with serve_in_thread("arena") as server:
        generic = run_pytest(
            "--openenv-env=openenv:arena",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:guess_wrong",
            "--openenv-n=2",
            "-n",
            "0",
            "--openenv-output=generic",
        )
    for result in (embedded, generic):
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        (hint,) = [line for line in result.outlines if "so pytest exits 1" in line]
        assert "--openenv-min-pass-rate" in hint and "--openenv-policy" not in hint


def test_the_prompt_names_an_expert_opponent_in_good_english() -> None:
    family = build_family("openspiel:tic_tac_toe", {"opponent": "expert", "agent_player": 1})
    first = family.embedded_backend().reset(seed=0, episode_id="ep-000000")
    assert "You play O (player 1) against an expert opponent (a search bot)." in (
        family.describe_task(first)
    )


# -- One schema per run ----------------------------------------------------------
@pytest.mark.slow
def test_workers_use_the_schema_the_controller_read(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    with serve_in_thread("endless", schema_drift=True) as server:
        result = run_pytest(
            "--openenv-env=openenv:coding_env",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:run_code",
            "--openenv-judge-at=turn-limit",
            "--openenv-min-reward=0",
            "--openenv-max-turns=1",
            "--openenv-n=4",
            "-n",
            "2",
        )
        reads = server.stats()["schema_reads"]
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    found = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert len(found) == 4
    descriptions = {row["tools"][0]["function"]["description"] for row in found}
    assert len(descriptions) == 1 and "redeployed" not in descriptions.pop()
    assert reads == 1


# -- The before-the-run session keeps to --openenv-timeout -----------------------
@pytest.mark.slow
def test_the_preflight_session_keeps_to_the_episode_timeout(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_in_thread("openspiel", game="tic_tac_toe", reset_delay=6.0) as server:
        started = time.monotonic()
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-server={server.url}",
            "--openenv-timeout=1",
            "--openenv-n=1",
            "-n",
            "0",
        )
        took = time.monotonic() - started
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the episode errors: its reset hangs
    assert "no session could be used before the run" in result.stdout.str()
    # the session's resets would take 30 s (its own bound) without --openenv-timeout's 1 s
    assert took < 20, took
