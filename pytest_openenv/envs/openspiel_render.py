"""Board drawings from OpenSpiel observation tensors (identical for embedded and remote).

tic-tac-toe's tensor is absolute: plane 0 empty, plane 1 O (nought, player 1),
plane 2 X (cross, player 0). Reading plane 1 as X is the classic mistake that
swaps the marks; the test suite pins the cell positions.

connect_four's tensor is relative to the observer: plane 0 the observer's
pieces, plane 1 the opponent's, plane 2 empty; row 0 is the bottom row.
"""

from __future__ import annotations

from collections.abc import Sequence

#: games whose board we draw from the tensor; others show pyspiel's text and action names
DRAWN_GAMES = frozenset({"tic_tac_toe", "connect_four"})


#: tic-tac-toe has 5,478 positions: each drawing is made once per process
_TIC_TAC_TOE_BOARDS: dict[tuple[float, ...], str] = {}


def render_board(game: str, info_state: Sequence[float], agent_player: int) -> str | None:
    if game == "tic_tac_toe" and len(info_state) == 27:
        key = tuple(info_state)
        board = _TIC_TAC_TOE_BOARDS.get(key)
        if board is None:
            board = _tic_tac_toe(info_state)
            if len(_TIC_TAC_TOE_BOARDS) < 8192:  # a server sending odd tensors cannot grow it
                _TIC_TAC_TOE_BOARDS[key] = board
        return board
    if game == "connect_four" and len(info_state) == 3 * 6 * 7:
        return _connect_four(info_state, agent_player)
    return None


def _tic_tac_toe(t: Sequence[float]) -> str:
    cells = []
    for cell in range(9):
        if t[18 + cell] > 0.5:
            cells.append("X")
        elif t[9 + cell] > 0.5:
            cells.append("O")
        else:
            cells.append(str(cell))
    rows = [" " + " | ".join(cells[r * 3 : r * 3 + 3]) for r in range(3)]
    return "\n---+---+---\n".join(rows)


def _connect_four(t: Sequence[float], agent_player: int) -> str:
    mine, theirs = ("x", "o") if agent_player == 0 else ("o", "x")
    rows, cols = 6, 7
    lines = []
    for row in reversed(range(rows)):
        line = []
        for col in range(cols):
            idx = row * cols + col
            if t[idx] > 0.5:
                line.append(mine)
            elif t[rows * cols + idx] > 0.5:
                line.append(theirs)
            else:
                line.append(".")
        lines.append(" ".join(line))
    lines.append(" ".join(str(c) for c in range(cols)))
    return "\n".join(lines)
