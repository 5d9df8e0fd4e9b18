"""Rows OpenEnv's own tooling takes: ``EpisodeRecord`` round trips, and OpenEnv's prompts.

- ``pytest_openenv.to_episode_record(row)`` is OpenEnv's ``EpisodeRecord``; our own
  fields ride in ``extra["pytest_openenv"]`` and ``from_episode_record`` gives the row
  back unchanged. ``tool_trace[].result.metadata.reward`` is where OpenEnv's harness
  keeps a step's reward.
- ``--openenv-prompt-style openenv`` writes what OpenEnv's harness (``openenv
  collect``) writes for the same observation. The comparison runs OpenEnv's harness
  itself (its session factory, ``MCPHarnessAdapter``, its scripted teacher) against a
  real OpenEnv server and our episode against the same server and seed: the same
  moves, the same observations, the prompts and tool results compared as text. The
  one difference on purpose, the tic-tac-toe marks OpenEnv's renderer swaps, is
  checked against pyspiel.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import read_jsonl
from openenv_harness import harness_module
from servers.openenv_servers import ThreadServer, serve_in_thread

from pytest_openenv import (
    episode_record_fields,
    from_episode_record,
    to_episode_record,
)
from pytest_openenv.envs.openspiel import openenv_style
from pytest_openenv.envs.registry import build_family
from pytest_openenv.episode.loop import EnvFactory, Limits, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import ScriptedPolicy

SEEDS = range(4)


# -- EpisodeRecord ------------------------------------------------------------------------
@pytest.mark.slow
def test_rows_of_a_run_round_trip_through_openenvs_episode_record(run_pytest, pytester) -> None:
    from openenv.core.harness.collect import EpisodeRecord, RolloutSerializer

    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=4",
        "--openenv-policy=random",  # loses some: rows in both files
        "-n",
        "2",
    )
    assert result.ret in (0, 1), result.stdout.str()[-3000:]
    folder = pytester.path / "openenv-results"
    rows = read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl")
    assert len(rows) == 4
    with pytest.raises(TypeError):
        EpisodeRecord(**rows[0])  # the reason for the converter: our extra keys
    serializer = RolloutSerializer(pytester.path / "openenv-collect")
    for row in rows:
        record = to_episode_record(row)
        assert isinstance(record, EpisodeRecord)
        assert record == EpisodeRecord(**episode_record_fields(row))
        ours = record.extra["pytest_openenv"]
        assert ours["env"] == "openspiel:tic_tac_toe" and ours["seed"] == row["seed"]
        assert ("failure" in ours) == (not row["passed"])
        assert from_episode_record(record) == row
        assert list(from_episode_record(record)) == list(row)  # the row's own key order
        assert from_episode_record(record.to_dict()) == row
        serializer.write_episode(record)
    # OpenEnv's own writer and resume reader take the records
    assert serializer.collected_episode_ids() == {row["episode_id"] for row in rows}
    for line in read_jsonl(serializer.results_path):
        assert from_episode_record(line) in rows


def test_tool_results_carry_openenvs_metadata_reward() -> None:
    family = build_family("openspiel:tic_tac_toe", {})
    episode = run_episode(
        EpisodeSpec(env=family.spec, index=0, seed=3), EnvFactory(family), ScriptedPolicy()
    )
    row = episode.record()
    assert row["schema_version"] == 2
    rewards = [entry["result"]["reward"] for entry in row["tool_trace"]]
    assert [entry["result"]["metadata"] for entry in row["tool_trace"]] == [
        {"reward": reward} for reward in rewards
    ]
    assert sum(rewards) == row["reward"]


def test_a_row_that_is_not_ours_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="has no messages"):
        episode_record_fields({"episode_id": "x", "extra": {}})
    with pytest.raises(ValueError, match="was not made by to_episode_record"):
        from_episode_record({"episode_id": "x", "extra": {}})


# -- OpenEnv's harness ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("openenv-envs")


def their_harness(package: str, scratch: Path) -> ModuleType:
    module, origin = harness_module(package, scratch)
    if module is None:
        pytest.skip(f"OpenEnv's {package} harness is not available: {origin}")
    return module


@pytest.fixture(scope="module")
def tictactoe() -> Iterator[ThreadServer]:
    with serve_in_thread("tictactoe") as server:
        yield server


@pytest.fixture(scope="module")
def reasoning() -> Iterator[ThreadServer]:
    with serve_in_thread("reasoning_gym") as server:
        yield server


def run_their_harness(factory: Any, model_step: Any, seed: int) -> list[dict[str, Any]]:
    """One rollout of OpenEnv's harness, as ``openenv collect`` drives it; its messages."""
    from openenv.core.harness import HarnessRunLimits, MCPHarnessAdapter

    session = factory.create(seed=seed, episode_id=f"ep-{seed:06d}")
    try:
        rollout = MCPHarnessAdapter().run_white_box(
            model_step=model_step, session=session, limits=HarnessRunLimits(max_turns=9)
        )
    finally:
        session.close()
    return rollout.messages


def run_ours(env: str, url: str, seed: int) -> dict[str, Any]:
    family = build_family(env, {}, (url,), "openenv")
    spec = EpisodeSpec(env=env, index=0, seed=seed)
    return run_episode(spec, EnvFactory(family, (url,)), ScriptedPolicy(), limits=Limits()).record()


def prompts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What the env said: system, user and tool messages (the teacher's own words aside)."""
    return [(m["role"], m["content"]) for m in messages if m["role"] != "assistant"]


def as_openai(tool: Any) -> dict[str, Any]:
    """An OpenEnv ``Tool`` as the OpenAI function tool its LLM clients send."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


def swap_marks(board: str) -> str:
    return board.translate(str.maketrans("XO", "OX"))


def test_openenv_style_writes_what_openenvs_harness_writes_for_tic_tac_toe(
    scratch: Path, tictactoe: ThreadServer
) -> None:
    harness = their_harness("openspiel_env", scratch)
    from openenv.cli.commands.collect import _build_scripted_model_step
    from openspiel_env.client import OpenSpielEnv

    factory = harness.OpenSpielSessionFactory(
        lambda: OpenSpielEnv(base_url=tictactoe.url), game_name="tic_tac_toe"
    )
    marked_boards = 0
    for seed in SEEDS:
        theirs = run_their_harness(factory, _build_scripted_model_step(), seed)
        row = run_ours("openspiel:tic_tac_toe", tictactoe.url, seed)
        assert row["tools"] == [as_openai(tool) for tool in harness._OPENSPIEL_TOOLS]
        mine, their = prompts(row["messages"]), prompts(theirs)
        assert [role for role, _ in mine] == [role for role, _ in their]  # no system message
        # the first board is empty (the agent moves first): the same text, character for
        # character
        assert mine[0] == their[0]
        for (_, ours_text), (_, their_text) in zip(mine[1:], their[1:], strict=True):
            ours_data, their_data = json.loads(ours_text), json.loads(their_text)
            # OpenEnv's board shows each player's marks as the other's: ours does not
            assert ours_data == {**their_data, "board": swap_marks(their_data["board"])}
            assert ours_text == json.dumps(ours_data, sort_keys=True)  # serialised alike
            marked_boards += "X" in ours_data["board"]
    assert marked_boards  # the swap was exercised, not only empty boards


def test_openenvs_harness_swaps_the_tic_tac_toe_marks_and_ours_does_not(
    scratch: Path,
) -> None:
    """The claim the docs make about OpenEnv's board, checked against pyspiel itself."""
    import pyspiel

    harness = their_harness("openspiel_env", scratch)
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    state.apply_action(4)  # player 0 (x in pyspiel's own drawing) takes the centre
    state.apply_action(0)  # player 1 (o) a corner
    assert str(state).splitlines()[:2] == ["o..", ".x."]
    tensor = state.observation_tensor(0)
    assert harness.render_tic_tac_toe_board(tensor).splitlines()[:3] == [
        "X | 1 | 2",  # player 1's corner, drawn as X
        "---------",
        "3 | O | 5",
    ]
    assert openenv_style.board(tensor).splitlines()[:3] == ["O | 1 | 2", "---------", "3 | X | 5"]


def test_openenv_style_writes_what_openenvs_harness_writes_for_reasoning_gym(
    scratch: Path, reasoning: ThreadServer
) -> None:
    import reasoning_gym
    from openenv.core.harness import ModelStepResult
    from openenv.core.llm_client import LLMResponse, ToolCall

    harness = their_harness("reasoning_gym_env", scratch)
    from reasoning_gym_env.client import ReasoningGymEnv

    factory = harness.ReasoningGymSessionFactory(
        lambda: ReasoningGymEnv(base_url=reasoning.url), dataset_name="chain_sum"
    )
    for seed in SEEDS:
        oracle = str(reasoning_gym.create_dataset("chain_sum", size=1, seed=seed)[0]["answer"])

        def answer(messages: Any, tools: Any, sampling: Any, oracle: str = oracle) -> Any:
            call = ToolCall(id="call_1", name="answer", args={"answer": oracle})
            return ModelStepResult(response=LLMResponse(content="", tool_calls=[call]))

        theirs = run_their_harness(factory, answer, seed)
        row = run_ours("reasoning_gym:chain_sum", reasoning.url, seed)
        assert row["passed"], row["extra"]["reason"]
        assert row["tools"] == [as_openai(tool) for tool in harness._REASONING_GYM_TOOLS]
        assert prompts(row["messages"]) == prompts(theirs)


def test_openenv_style_is_refused_for_a_family_openenv_has_no_harness_for(run_pytest) -> None:
    with serve_in_thread("echo") as echo:
        result = run_pytest(
            "--openenv-env=openenv:echo",
            f"--openenv-server={echo.url}",
            "--openenv-prompt-style=openenv",
        )
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*env family 'openenv' has no 'openenv' prompt style*"])


# -- resume ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_resume_in_the_other_prompt_style_is_refused(run_pytest, pytester) -> None:
    first = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=2")
    assert first.ret == 0, first.stdout.str()[-3000:]
    resumed = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=3",
        "--openenv-prompt-style=openenv",
        "--openenv-resume",
    )
    assert resumed.ret == 4
    resumed.stderr.fnmatch_lines(
        [
            '*written by a run with prompt_style="native", this run has '
            'prompt_style="openenv" (--openenv-prompt-style)*'
        ]
    )


@pytest.mark.slow
def test_a_resume_into_a_folder_of_the_first_row_schema_is_refused(run_pytest, pytester) -> None:
    first = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=2")
    assert first.ret == 0, first.stdout.str()[-3000:]
    path = pytester.path / "openenv-results" / "metadata.json"
    metadata = json.loads(path.read_text())
    del metadata["identity"]["schema_version"]  # as the version before schema 2 wrote it
    path.write_text(json.dumps(metadata))
    resumed = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=3", "--openenv-resume")
    assert resumed.ret == 4
    resumed.stderr.fnmatch_lines(
        [
            "*was written with row schema_version=1, this version of pytest-openenv writes "
            "schema_version=2*"
        ]
    )


# -- OpenEnv's wording, pinned ------------------------------------------------------------
# The comparisons above run OpenEnv's harness itself, which needs its repository (its env
# packages are not on PyPI). These pin the same text as it was when those comparisons
# passed against OpenEnv at commit 385de5eb, so a change to our openenv style fails on a
# machine without the repository too (CI): re-run the comparisons before updating them.
OPENENV_TTT_TOOL = {
    "type": "function",
    "function": {
        "name": "play_move",
        "description": (
            "Play a move by its integer action_id. The action_id must come from the "
            "`legal_actions` list shown in the latest observation."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "action_id": {
                    "type": "integer",
                    "description": "Action id drawn from legal_actions.",
                }
            },
            "required": ["action_id"],
        },
    },
}
OPENENV_TTT_FIRST_PROMPT = (
    "You are playing tic_tac_toe.\n"
    "Call the play_move tool with an action_id drawn from legal_actions.\n"
    "Legal actions: [0, 1, 2, 3, 4, 5, 6, 7, 8]\n\n"
    "Board:\n0 | 1 | 2\n---------\n3 | 4 | 5\n---------\n6 | 7 | 8"
)
OPENENV_ANSWER_TOOL = {
    "type": "function",
    "function": {
        "name": "answer",
        "description": "Submit the final answer for the current question.",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "The answer to submit."}},
            "required": ["answer"],
        },
    },
}


def test_openenv_style_tic_tac_toe_text_is_pinned(tictactoe: ThreadServer) -> None:
    row = run_ours("openspiel:tic_tac_toe", tictactoe.url, 1)
    assert row["tools"] == [OPENENV_TTT_TOOL]
    assert [m["role"] for m in row["messages"][:3]] == ["user", "assistant", "tool"]
    assert row["messages"][0]["content"] == OPENENV_TTT_FIRST_PROMPT
    result = row["messages"][2]["content"]
    data = json.loads(result)
    assert result == json.dumps(data, sort_keys=True)  # sorted keys, default separators
    assert sorted(data) == [
        "action_id",
        "board",
        "current_player_id",
        "done",
        "legal_actions",
        "reward",
    ]
    assert data["action_id"] == 0 and data["board"].startswith("X | 1 | ")


def test_openenv_style_reasoning_gym_text_is_pinned(reasoning: ThreadServer) -> None:
    row = run_ours("reasoning_gym:chain_sum", reasoning.url, 1)
    assert row["tools"] == [OPENENV_ANSWER_TOOL]
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool"]
    prompt = row["messages"][0]["content"]
    assert prompt.startswith("State the final answer to the following arithmetic problem: ")
    result = json.loads(row["messages"][2]["content"])
    assert sorted(result) == ["answer", "correct_answer", "done", "reward", "score"]
    assert result["answer"] == result["correct_answer"] and result["reward"] == 1.0
