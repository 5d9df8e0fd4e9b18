"""example_suites/sft_warmup/symmetries.py: each turned or mirrored image of a collected game
is a game OpenSpiel itself would play, with the outcome of the original.

The games are collected by a real run (the expert against a random opponent); each image is
replayed move by move in pyspiel, and every board, legal-action list and reward its text
shows must be the engine's.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pyspiel
import pytest
from helpers import collect_games

EXAMPLE = Path(__file__).resolve().parent.parent / "example_suites" / "sft_warmup"
GAMES = 12


def symmetries_module() -> Any:
    sys.path.insert(0, str(EXAMPLE))
    try:
        return importlib.import_module("symmetries")
    finally:
        sys.path.remove(str(EXAMPLE))


symmetries = symmetries_module()


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    rows = [
        row
        for form in ("string", "object")
        for row in collect_games(tmp_path_factory.mktemp(f"games-{form}"), GAMES // 2, form)
    ]
    assert len(rows) == GAMES
    return rows


def shown_board(text: str) -> list[str]:
    """The nine cells of the board an env message draws: 'X', 'O' or '' for an empty one."""
    lines = text.split("\n")
    start = lines.index("Board:") + 1
    cells = [cell for k in (0, 2, 4) for cell in re.findall(r" (\S) ", lines[start + k] + " ")]
    assert len(cells) == 9, text
    for square, cell in enumerate(cells):
        assert cell in ("X", "O", str(square)), f"square {square} shows {cell!r}: {text}"
    return [cell if cell in ("X", "O") else "" for cell in cells]


def engine_board(state: Any) -> list[str]:
    marks = {"x": "X", "o": "O", ".": ""}
    return [marks[c] for c in str(state).replace("\n", "")]


def shown_legal(text: str) -> list[int] | None:
    found = re.search(r"^Legal actions: (.*)$", text, re.M)
    return None if found is None else [int(a) for a in found[1].split(", ")]


def square_of(call: dict[str, Any]) -> int:
    arguments = call["function"]["arguments"]
    return (json.loads(arguments) if isinstance(arguments, str) else arguments)["action_id"]


def replay(messages: list[dict[str, Any]]) -> float:
    """Play the conversation's moves in pyspiel, checking what each message shows against
    the engine; the agent's return."""
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    first = next(m for m in messages if m["role"] == "user")["content"]
    assert shown_board(first) == engine_board(state)
    assert shown_legal(first) == state.legal_actions()
    played = None
    for message in messages:
        if message["role"] == "assistant":
            (call,) = message["tool_calls"]
            played = square_of(call)
            assert played in state.legal_actions()
            state.apply_action(played)
        elif message["role"] == "tool":
            text = message["content"]
            assert text.startswith(f"You played {played}.")
            opponent = re.search(r"(?:Opponent played|Last opponent move:) (\d)\.", text)
            if opponent and not state.is_terminal():
                state.apply_action(int(opponent[1]))
            assert shown_board(text) == engine_board(state), text
            if state.is_terminal():
                reward = float(re.search(r"Final reward: (-?[\d.]+)\.", text)[1])
                assert reward == state.returns()[0]
            else:
                assert shown_legal(text) == state.legal_actions(), text
    assert state.is_terminal()
    return state.returns()[0]


def test_every_image_of_a_game_replays_in_openspiel_with_the_games_outcome(
    collected: list[dict[str, Any]],
) -> None:
    for row in collected:
        outcome = replay(row["messages"])
        assert outcome == row["reward"]
        turned = symmetries.images(row)
        assert len(turned) == 8
        for image in turned:
            assert replay(image["messages"]) == outcome


def test_a_games_eight_images_are_eight_texts_the_first_the_game_itself(
    collected: list[dict[str, Any]],
) -> None:
    for row in collected:
        turned = symmetries.images(row)
        assert turned[0]["messages"] == row["messages"]
        assert turned[0]["tools"] == row["tools"]
        texts = {json.dumps(image["messages"]) for image in turned}
        # every game's first move is X on a square; only 4 (the centre) is fixed by all eight
        first_move = square_of(row["messages"][2]["tool_calls"][0])
        if first_move != 4:
            assert len(texts) >= 4
        assert set(turned[0]) == {"messages", "tools"}  # no record field of the game played


def test_a_row_of_another_game_is_refused_naming_it(collected: list[dict[str, Any]]) -> None:
    row = json.loads(json.dumps(collected[0]))
    row["messages"][1]["content"] = row["messages"][1]["content"].replace(
        "Game: tic_tac_toe.", "Game: connect_four."
    )
    with pytest.raises(symmetries.NotTicTacToe, match=r"ep-\d+: not a tic-tac-toe game"):
        symmetries.images(row)


def test_a_number_the_module_does_not_know_is_refused_not_left_unturned(
    collected: list[dict[str, Any]],
) -> None:
    row = json.loads(json.dumps(collected[0]))
    tool = next(m for m in row["messages"] if m["role"] == "tool")
    tool["content"] += "\nThe opponent thought about 7 for a while."
    with pytest.raises(symmetries.NotTicTacToe, match="not a known square"):
        symmetries.images(row)


def test_the_eight_permutations_are_the_boards_symmetries_each_once() -> None:
    lines = {
        frozenset(line)
        for line in (
            (0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6),
            (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6),
        )
    }  # fmt: skip
    corners = {0, 2, 6, 8}
    for permutation in symmetries.PERMUTATIONS:
        assert sorted(permutation) == list(range(9))
        assert {frozenset(permutation[s] for s in line) for line in lines} == lines
        assert {permutation[s] for s in corners} == corners
    assert len(set(symmetries.PERMUTATIONS)) == 8
    assert symmetries.PERMUTATIONS[0] == tuple(range(9))
