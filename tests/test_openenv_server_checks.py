"""What a run checks of an OpenEnv server before and while it runs, and what its records say.

Labels match a name the server goes by exactly; an env config the server dropped is
recorded as sent, not confirmed (and the run warns); a field the reset legitimately
rewrites is no refusal; a server that ignores the seed is said so in the card, summary
and report, with its identical starting states counted as such; an opponent the server
plays but the embedded engine does not is accepted on that server. The servers are
built with the ``openenv`` package (``tests/servers/openenv_servers.py``).
"""

from __future__ import annotations

import json

import pytest
from helpers import played_rows as rows
from servers.openenv_servers import ThreadServer, serve_in_thread

POLICIES = """
def to_goal(messages, tools):
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return {"name": "step", "arguments": {"action": "DOWN" if turn % 2 == 0 else "RIGHT"}}


def take_two(messages, tools):
    return {"name": "step", "arguments": {"move": "2"}}


def guess_three(messages, tools):
    return {"name": "step", "arguments": {"guess": 3}}


def first_legal(messages, tools):
    import json

    for message in reversed(messages):
        text = message.get("content") or ""
        if "Observation: " in text:
            observation = json.loads(text.split("Observation: ", 1)[1].split("\\n", 1)[0])
            return {"name": "step", "arguments": {"action_id": observation["legal_actions"][0]}}
    return {"name": "step", "arguments": {"action_id": 0}}
"""


@pytest.fixture
def policies(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(policies=POLICIES)


# -- labels: exactly a name the server goes by ---------------------------------------------------
@pytest.mark.parametrize("label", ["a", "spiel", "openspiel_tic_tac_toe", "openspiel_env2"])
def test_a_generic_label_that_only_overlaps_a_server_name_is_refused_with_both_names(
    run_pytest, pytester: pytest.Pytester, policies: None, label: str
) -> None:
    with serve_in_thread("openspiel", game="catch") as server:
        result = run_pytest(
            f"--openenv-env=openenv:{label}",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:first_legal",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert f"which the label {label!r} does not name exactly" in errors
    assert "'openspiel_env', hosting the game 'catch'" in errors
    assert not (pytester.path / "openenv-results").exists()


@pytest.mark.parametrize("label", ["openspiel_env", "catch", "openspiel_catch"])
def test_a_generic_label_may_name_the_game_the_server_s_state_reports(
    run_pytest, pytester: pytest.Pytester, policies: None, label: str
) -> None:
    with serve_in_thread("openspiel", game="catch") as server:
        result = run_pytest(
            f"--openenv-env=openenv:{label}",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:first_legal",
            "--openenv-n=1",
            "-n",
            "0",
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stderr.str()
    (row,) = rows(pytester.path / "openenv-results")
    assert json.loads(row["extra"]["server_reports"])["game_name"] == "catch"


# -- a config the server dropped, and one it rewrote ---------------------------------------------
def test_a_config_the_server_dropped_is_recorded_as_sent_not_confirmed_with_a_warning(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    config = {"grid_size": 10, "goal_pos": [9, 9]}
    with serve_in_thread("grid_world") as server:
        result = run_pytest(
            "--openenv-env=openenv:grid_world_env",
            f"--openenv-env-config={json.dumps(config)}",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:to_goal",
            "--openenv-n=2",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*shows nothing that says it took the reset field(s) goal_pos, grid_size*"]
    )
    for row in rows(pytester.path / "openenv-results"):
        assert json.loads(row["task"]["config"]) == config  # what was sent
        assert row["task"]["config_not_confirmed"] == "goal_pos, grid_size"
        assert "Goal is at [4, 4]" in row["messages"][1]["content"]


def test_a_config_the_server_s_answer_shows_taken_is_confirmed(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    config = {"dataset_name": "chain_sum", "size": 1}
    with serve_in_thread("reasoning_gym") as server:
        result = run_pytest(
            "--openenv-env=openenv:reasoning_gym",
            f"--openenv-env-config={json.dumps(config)}",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:take_two",  # any answer: the check is at start
            "--openenv-n=1",
            "-n",
            "0",
        )
    assert "shows nothing that says it took" not in result.stdout.str()
    (row,) = rows(pytester.path / "openenv-results")
    assert row["task"]["config_not_confirmed"] == ""


@pytest.mark.parametrize(
    "fen",
    [
        "5 b",  # black to move: the server's opponent has moved before the agent sees it
        "5 w",  # no move counters: the server spells them out ("5 w 0 1")
        "4 w 0 1",
    ],
)
def test_a_config_field_the_reset_rewrites_is_not_refused(
    run_pytest, pytester: pytest.Pytester, policies: None, fen: str
) -> None:
    with serve_in_thread("take_away") as server:
        result = run_pytest(
            "--openenv-env=openenv:take_away",
            f"--openenv-env-config={json.dumps({'fen': fen})}",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:take_two",
            "--openenv-n=1",
            "-n",
            "0",
        )
    assert result.ret != pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    assert "did not take the reset field" not in result.stderr.str()
    (row,) = rows(pytester.path / "openenv-results")
    assert row["task"]["config_not_confirmed"] == ""
    assert json.loads(row["task"]["config"]) == {"fen": fen}


# -- a server that ignores the seed --------------------------------------------------------------
@pytest.mark.slow
def test_an_ignored_seed_and_identical_starting_states_are_said_in_card_summary_and_report(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    with serve_in_thread("session_seeded") as server:
        result = run_pytest(
            "--openenv-env=openenv:session_seeded",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:guess_three",
            "--openenv-min-reward=0",
            "--openenv-n=6",
            "-n",
            "2",
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    folder = pytester.path / "openenv-results"
    found = rows(folder)
    assert len(found) == 6 and all(row["extra"]["seeded"] is False for row in found)
    starts = {row["messages"][1]["content"] for row in found}
    assert len(starts) < 6  # sessions seeded alike start alike
    seeding = json.loads((folder / "summary.json").read_text())["seeding"]
    assert seeding["unseeded"] == 6
    assert seeding["unseeded_distinct_starting_states"] == len(starts)
    card = (folder / "README.md").read_text()
    assert "The server ignored the reset seed for 6 of 6 episode(s)" in card
    assert f"{len(starts)} distinct starting state(s)" in card
    report = (folder / "report.html").read_text()
    assert "ignored by the server for 6 of 6 episode(s)" in report


# -- an opponent the server plays that the embedded engine does not ------------------------------
@pytest.mark.slow
def test_an_opponent_only_the_server_plays_is_accepted_and_recorded_as_the_server_s(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_in_thread("openspiel", game="tic_tac_toe", opponent_policy="middle") as server:
        refused = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-server={server.url}",
            "--openenv-n=1",
            "-n",
            "0",
        )
        # the advice the refusal gives is one that then runs
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        assert "set opponent in --openenv-env-config to 'middle'" in refused.stderr.str()
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            '--openenv-env-config={"opponent": "middle"}',
            f"--openenv-server={server.url}",
            "--openenv-policy=scripted",
            "--openenv-n=2",
            "-n",
            "0",
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stderr.str()
    found = rows(pytester.path / "openenv-results")
    assert len(found) == 2
    for row in found:
        assert json.loads(row["task"]["config"]) == {"opponent": "middle"}
        assert "middle legal action (the server's)" in row["messages"][1]["content"]
        assert json.loads(row["extra"]["server_reports"])["opponent_policy"] == "middle"


def test_an_opponent_only_openenv_s_server_plays_is_a_usage_error_embedded(
    run_pytest, pytester: pytest.Pytester
) -> None:
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe", '--openenv-env-config={"opponent": "middle"}'
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "OPENSPIEL_OPPONENT_POLICY=middle" in result.stderr.str()
    assert "--openenv-server" in result.stderr.str()


# -- smaller: what a run says at start -----------------------------------------------------------
def test_a_server_without_schema_or_ws_is_told_both(run_pytest) -> None:
    from fastapi import FastAPI

    app = FastAPI()
    app.get("/health")(lambda: {"status": "healthy"})
    with ThreadServer(app) as server:
        result = run_pytest("--openenv-env=openenv:anything", f"--openenv-server={server.url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert "cannot read the action schema" in errors
    assert "it takes no WebSocket session either" in errors and "/ws" in errors


def test_the_expert_probe_of_a_game_without_resampling_prints_no_native_exception(
    run_pytest,
) -> None:
    result = run_pytest("--openenv-env=openspiel:liars_dice", "--openenv-n=1", "-n", "0")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "OpenSpiel exception" not in result.stdout.str() + result.stderr.str()
