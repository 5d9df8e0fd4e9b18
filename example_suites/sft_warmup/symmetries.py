"""The eight symmetries of the tic-tac-toe board, applied to collected conversations.

A game turned or mirrored is another game the same teacher would win the same way: every
square in it moves to its image, and so does every action id the conversation names (the
board's empty squares show their ids, the legal actions, the moves played, the tool calls).
A student trained on the eight images of each game sees each rare position in all its
orientations, each a different text, rather than in the one the collection happened to
play. ``train.py --symmetries`` trains on them.

Only what the plugin's tic-tac-toe env writes (its default prompt style) is understood; a
row holding anything else (another game, a number in a phrase this module does not know)
is refused rather than half turned, so an image never says something its game did not.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

Row = dict[str, Any]
#: square ``i`` of a game goes to square ``PERMUTATIONS[k][i]`` of its ``k``-th image;
#: squares are numbered row by row, 0-2 on top
PERMUTATIONS: tuple[tuple[int, ...], ...] = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8),  # as played
    (2, 5, 8, 1, 4, 7, 0, 3, 6),  # a quarter turn clockwise
    (8, 7, 6, 5, 4, 3, 2, 1, 0),  # a half turn
    (6, 3, 0, 7, 4, 1, 8, 5, 2),  # three quarters
    (2, 1, 0, 5, 4, 3, 8, 7, 6),  # mirrored left to right
    (6, 7, 8, 3, 4, 5, 0, 1, 2),  # mirrored top to bottom
    (0, 3, 6, 1, 4, 7, 2, 5, 8),  # across the main diagonal
    (8, 5, 2, 7, 4, 1, 6, 3, 0),  # across the other diagonal
)
GAME_LINE = "Game: tic_tac_toe."
BOARD_ROW = re.compile(r"^ (\S) \| (\S) \| (\S)$")
SEPARATOR = "---+---+---"
#: phrases that name one square, and how the env lists several
ONE_SQUARE = re.compile(
    r"(?P<lead>You played |Opponent played |Last opponent move: "
    r"|Your opponent opened with action |action_id )(?P<square>\d+)"
)
SQUARE_LIST = re.compile(r"(?P<lead>Legal actions: |legal actions: \[)(?P<squares>\d+(?:, \d+)*)")
#: numbers in the env's text that are not squares
NOT_SQUARES = re.compile(r"\(player [01]\)|Final reward: -?\d+(?:\.\d+)?\.|tic_tac_toe")


class NotTicTacToe(ValueError):
    """A row this module cannot turn: it names the row and what was not understood."""


def images(row: Row, where: str | None = None) -> list[Row]:
    """The row's eight images, the row itself first; raises ``NotTicTacToe``, naming the
    row by ``where`` (default: its episode id)."""
    where = where or str(row.get("episode_id", "a row"))
    first_user = next((m for m in row["messages"] if m["role"] == "user"), None)
    if first_user is None or not str(first_user.get("content", "")).startswith(GAME_LINE):
        raise NotTicTacToe(
            f"{where}: not a tic-tac-toe game of the plugin's "
            f"default prompt style (its first user message does not start {GAME_LINE!r})"
        )
    return [image(row, permutation, where) for permutation in PERMUTATIONS]


def image(row: Row, permutation: tuple[int, ...], where: str) -> Row:
    """The row with every square moved by ``permutation``; only ``messages`` and ``tools``
    are kept (what training reads), so no record field describes a game not played."""
    turned = {"messages": copy.deepcopy(row["messages"]), "tools": row.get("tools")}
    for message in turned["messages"]:
        content = message.get("content")
        if isinstance(content, str) and message["role"] in ("user", "tool"):
            message["content"] = turn_text(content, permutation, where)
        for call in message.get("tool_calls") or []:
            function = call["function"]
            function["arguments"] = turn_arguments(function["arguments"], permutation, where)
    return turned


def turn_arguments(arguments: Any, permutation: tuple[int, ...], where: str) -> Any:
    """A play_move call's arguments, as text or as an object, with its square moved."""
    parsed = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    square = parsed.get("action_id")
    if not isinstance(square, int) or not 0 <= square < 9:
        raise NotTicTacToe(f"{where}: a tool call without a square as action_id: {arguments!r}")
    parsed["action_id"] = permutation[square]
    return json.dumps(parsed) if isinstance(arguments, str) else parsed


def turn_text(text: str, permutation: tuple[int, ...], where: str) -> str:
    """An env message with its board, its moves and its legal actions moved."""
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        board = board_at(lines, index)
        if board is not None:
            out += render(turn_board(board, permutation, where))
            index += 5
            continue
        out.append(turn_line(lines[index], permutation, where))
        index += 1
    return "\n".join(out)


def board_at(lines: list[str], index: int) -> list[str] | None:
    """The nine cells of the board drawn from ``lines[index]`` on, or None."""
    block = lines[index : index + 5]
    if len(block) < 5 or block[1] != SEPARATOR or block[3] != SEPARATOR:
        return None
    rows = [BOARD_ROW.match(block[k]) for k in (0, 2, 4)]
    if not all(rows):
        return None
    return [cell for match in rows if match for cell in match.groups()]


def turn_board(cells: list[str], permutation: tuple[int, ...], where: str) -> list[str]:
    turned = [""] * 9
    for square, cell in enumerate(cells):
        if cell not in ("X", "O", str(square)):
            raise NotTicTacToe(f"{where}: square {square} of a board shows {cell!r}")
        target = permutation[square]
        turned[target] = cell if cell in ("X", "O") else str(target)
    return turned


def render(cells: list[str]) -> list[str]:
    rows = [f" {cells[k]} | {cells[k + 1]} | {cells[k + 2]}" for k in (0, 3, 6)]
    return [rows[0], SEPARATOR, rows[1], SEPARATOR, rows[2]]


def turn_line(line: str, permutation: tuple[int, ...], where: str) -> str:
    def one(match: re.Match[str]) -> str:
        return match["lead"] + str(moved(int(match["square"])))

    def several(match: re.Match[str]) -> str:
        squares = sorted(moved(int(s)) for s in match["squares"].split(", "))
        return match["lead"] + ", ".join(map(str, squares))

    def moved(square: int) -> int:
        if not 0 <= square < 9:
            raise NotTicTacToe(f"{where}: {line!r} names square {square}")
        return permutation[square]

    turned = SQUARE_LIST.sub(several, ONE_SQUARE.sub(one, line))
    unknown = re.search(r"\d", NOT_SQUARES.sub("", strip_matches(line)))
    if unknown:
        raise NotTicTacToe(f"{where}: a number in {line!r} that is not a known square")
    return turned


def strip_matches(line: str) -> str:
    """The line without the phrases whose squares are moved (to look for unknown numbers)."""
    return SQUARE_LIST.sub("", ONE_SQUARE.sub("", line))
