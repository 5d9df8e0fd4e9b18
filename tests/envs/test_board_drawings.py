"""Every game the openspiel family draws, for every player, reads as pyspiel's own state string.

Embedded (the family's engine) and through the suite's OpenEnv openspiel-like server
(``rl_environment`` as OpenEnv's server runs it, observations carrying only the tensor):
the prompt's board must be the position pyspiel prints, whichever player the agent is.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from servers.openenv_servers import serve_in_thread

from pytest_openenv.envs.openspiel.family import OpenSpielFamily
from pytest_openenv.envs.openspiel.render import render_board
from pytest_openenv.episode.loop import EnvFactory, Limits, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.callable import CallablePolicy

pyspiel = pytest.importorskip("pyspiel")

#: the games ``render_board`` draws, with their player counts
DRAWN = {"tic_tac_toe": 2, "connect_four": 2, "catch": 1, "kuhn_poker": 2}
CASES = [(game, player) for game, players in DRAWN.items() for player in range(players)]
KUHN_CARDS = "JQK"


def pyspiel_view(game: str, state: Any, player: int) -> str:
    """pyspiel's own text of what ``player`` sees, in the drawing's terms."""
    if game == "kuhn_poker":
        info = state.information_state_string(player)  # "1pb": own card, then the betting
        moves = ", ".join("pass" if c == "p" else "bet" for c in info[1:]) or "none yet"
        return f"You are player {player}. Your card: {KUHN_CARDS[int(info[0])]}.\n" + (
            f"Betting so far: {moves}."
        )
    return str(state).strip()


def drawn_as_pyspiel(game: str, board: str) -> str:
    """A drawing written as pyspiel writes the board."""
    if game == "tic_tac_toe":
        rows = [line for line in board.splitlines() if "|" in line]
        cells = [[c.strip() for c in row.split("|")] for row in rows]
        return "\n".join(
            "".join(c.lower() if c in ("X", "O") else "." for c in row) for row in cells
        )
    if game == "connect_four":
        return "\n".join(line.replace(" ", "") for line in board.splitlines()[:-1])
    return board.strip()


def same_catch(board: str, position: str) -> bool:
    """A catch drawing is pyspiel's board, except that a missed ball's bottom row marks ball
    and paddle alike (``?``: one tensor plane holds both)."""
    drawn, theirs = board.splitlines(), position.splitlines()
    if drawn[-1].startswith("(?"):
        drawn = drawn[:-1]
        bottom = drawn[-1]
        expected = "".join("?" if c in "xo" else "." for c in theirs[-1])
        return drawn[:-1] == theirs[:-1] and bottom == expected and "o" in theirs[-1]
    return drawn == theirs


def tensor(game: str, state: Any, player: int) -> list[float]:
    if game == "kuhn_poker":
        return state.information_state_tensor(player)
    return state.observation_tensor(player)


@pytest.mark.parametrize(("game", "player"), CASES)
def test_every_drawn_position_reads_as_pyspiel_s_state_string(game: str, player: int) -> None:
    loaded = pyspiel.load_game(game)
    rng = random.Random(f"{game}:{player}")
    compared = 0
    for _ in range(40):
        state = loaded.new_initial_state()
        while not state.is_terminal():
            if not state.is_chance_node():
                board = render_board(game, tensor(game, state, player), player)
                assert board is not None
                drawn, theirs = drawn_as_pyspiel(game, board), pyspiel_view(game, state, player)
                assert same_catch(drawn, theirs) if game == "catch" else drawn == theirs, (
                    f"{game} as player {player}:\n{board}\npyspiel says:\n{state}"
                )
                compared += 1
            outcomes = (
                [a for a, _ in state.chance_outcomes()]
                if state.is_chance_node()
                else state.legal_actions()
            )
            state.apply_action(rng.choice(outcomes))
    assert compared > 40


def boards_in(messages: list[dict[str, Any]]) -> list[str]:
    """Each drawing the agent was shown, in order."""
    found = []
    for message in messages:
        text = message.get("content") or ""
        if message["role"] in ("user", "tool"):
            match = re.search(
                r"(?:Board|Your view):\n(.*?)(?:\nThe game is over\.|\nLegal)", text, re.S
            )
            if match:
                found.append(match.group(1))
    return found


def play(family: OpenSpielFamily, server: str | None = None) -> list[str]:
    policy = CallablePolicy(lambda messages, tools: first_legal_from(messages), label="first")
    episode = run_episode(
        EpisodeSpec(env=family.spec, index=0, seed=3),
        EnvFactory(family, servers=(server,) if server else ()),
        policy,
        limits=Limits(max_turns=30),
    )
    return boards_in(episode.messages)


def first_legal_from(messages: list[dict[str, Any]]) -> dict[str, Any]:
    text = messages[-1]["content"]
    legal = re.findall(r"Legal actions: (.*)", text)[-1]
    return {"name": "play_move", "arguments": {"action_id": int(legal.split(",")[0].split()[0])}}


@pytest.mark.parametrize(("game", "player"), CASES)
def test_a_server_s_boards_read_as_the_pyspiel_state_it_played(game: str, player: int) -> None:
    log: list[dict[str, str]] = []
    with serve_in_thread(
        "openspiel", game=game, agent_player=player, opponent_policy="first", board_log=log
    ) as server:
        family = OpenSpielFamily(game, {"agent_player": player, "opponent": "first"})
        family.bind_servers((server.url,))
        shown = play(family, server.url)
    assert shown, "the prompts showed no board"
    # the server logs every position it sent; the prompts show them in that order
    expected = [
        entry["information_state"] if game == "kuhn_poker" else entry["string"].strip()
        for entry in log
    ][-len(shown) :]
    for board, position in zip(shown, expected, strict=True):
        if game == "kuhn_poker":
            card = KUHN_CARDS[int(position[0])]
            assert f"Your card: {card}." in board and f"You are player {player}." in board
        else:
            drawn = drawn_as_pyspiel(game, board)
            same = same_catch(drawn, position) if game == "catch" else drawn == position
            assert same, f"{board}\n!=\n{position}"


@pytest.mark.parametrize("player", [0, 1])
def test_connect_four_prompts_say_which_mark_is_the_agent_s(player: int) -> None:
    family = OpenSpielFamily("connect_four", {"agent_player": player, "opponent": "first"})
    family.bind_servers(())
    episode = run_episode(
        EpisodeSpec(env=family.spec, index=0, seed=0),
        EnvFactory(family),
        CallablePolicy(lambda messages, tools: first_legal_from(messages), label="first"),
        limits=Limits(max_turns=1),
    )
    assert f"You play {'xo'[player]} (player {player})" in episode.messages[-2]["content"] or (
        f"You play {'xo'[player]} (player {player})" in episode.messages[1]["content"]
    )
