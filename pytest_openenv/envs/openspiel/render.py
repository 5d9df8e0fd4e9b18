"""Board drawings from OpenSpiel observation tensors (identical for embedded and remote).

tic-tac-toe's tensor is absolute: plane 0 empty, plane 1 O (nought, player 1),
plane 2 X (cross, player 0). Reading plane 1 as X is the classic mistake that
swaps the marks; the test suite pins the cell positions.

connect_four's tensor is absolute too, whoever observes (open_spiel 2.0.2):
plane 0 player 0's pieces (x), plane 1 player 1's (o), plane 2 empty; row 0 is
the bottom row. Reading plane 0 as "the observer's" swaps x and o for player 1.

kuhn_poker's information-state tensor is the acting player's view only: who
they are, their own card, the betting so far. catch's observation tensor is the
grid (ball and paddle). A server that sends only the tensor (OpenEnv's openspiel
server does) still gives the agent what the player sees; for other games the
tensor is split into pyspiel's named pieces (``tensor_view``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...util.memo import BoundedMemo

#: games whose board we draw from the tensor; others show pyspiel's text and action names
DRAWN_GAMES = frozenset({"tic_tac_toe", "connect_four"})


#: drawings kept per family (tic-tac-toe has 5,478 positions); past it, odd tensors a
#: server sends are drawn and not kept
DRAWINGS_KEPT = 8192
#: an observation tensor -> its drawing (``OpenSpielFamily`` keeps one per family)
Drawings = BoundedMemo[tuple[float, ...], str]


def render_board(
    game: str, info_state: Sequence[float], agent_player: int, drawn: Drawings | None = None
) -> str | None:
    """The board ``info_state`` shows, or None for a game drawn some other way.

    ``drawn``: tic-tac-toe boards drawn before (each position is drawn once).
    """
    if game == "tic_tac_toe" and len(info_state) == 27:
        if drawn is None:
            return _tic_tac_toe(info_state)
        key = tuple(info_state)
        board = drawn.get(key)
        return board if board is not None else drawn.keep(key, _tic_tac_toe(info_state))
    if game == "connect_four" and len(info_state) == 3 * 6 * 7:
        return _connect_four(info_state)
    if game == "kuhn_poker" and len(info_state) % 6 == 5:
        return _kuhn_poker(info_state)
    if game == "catch" and len(info_state) == 10 * 5:
        return _catch(info_state)
    return None


KUHN_CARDS = "JQKABCDEFGHI"  # pyspiel deals cards 0..N (J, Q, K for two players)


def _one_hot(values: Sequence[float]) -> int | None:
    hot = [i for i, v in enumerate(values) if v > 0.5]
    return hot[0] if len(hot) == 1 else None


def _kuhn_poker(t: Sequence[float]) -> str | None:
    players = (len(t) + 1) // 6
    player = _one_hot(t[:players])
    card = _one_hot(t[players : 2 * players + 1])
    if player is None or card is None:
        return None
    history = t[2 * players + 1 :]
    moves = []
    for i in range(0, len(history), 2):
        if history[i] > 0.5:
            moves.append("pass")
        elif history[i + 1] > 0.5:
            moves.append("bet")
    betting = ", ".join(moves) if moves else "none yet"
    return f"You are player {player}. Your card: {KUHN_CARDS[card]}.\nBetting so far: {betting}."


def _catch(t: Sequence[float]) -> str:
    rows, cols = 10, 5
    lines = []
    for row in range(rows):
        hot = [c for c in range(cols) if t[row * cols + c] > 0.5]
        mark = "o"
        if row == rows - 1:
            # one cell: the paddle (with the ball, if caught); two: the ball missed it, and
            # the tensor (one plane for both) does not say which is which
            mark = "x" if len(hot) < 2 else "?"
        lines.append("".join(mark if c in hot else "." for c in range(cols)))
    if len(hot) > 1:
        lines.append("(? ball and paddle on the bottom row: the ball was missed)")
    return "\n".join(lines)


def tensor_view(game: Any, info_state: Sequence[float]) -> str | None:
    """The tensor split into pyspiel's named pieces (what each number means), or None.

    For games we do not draw and a server that sends no text: better than a bare
    list of legal actions, and it never shows more than the tensor holds.
    """
    if not info_state:
        return None
    try:
        import pyspiel
        from open_spiel.python.observation import make_observation

        game_type = game.get_type()
        kind = (
            pyspiel.IIGObservationType(perfect_recall=True)
            if game_type.provides_information_state_tensor
            else None
        )
        pieces = make_observation(game, kind).dict
    except Exception:  # a game without tensors, or pyspiel's layout API missing
        pieces = {}
    lines = []
    offset = 0
    for name, piece in pieces.items():
        size = int(piece.size)
        values = info_state[offset : offset + size]
        offset += size
        lines.append(f"{name}: {_numbers(values)}")
    if offset != len(info_state):  # not the layout we know: show the numbers as they are
        lines = [f"info_state: {_numbers(info_state)}"]
    return "\n".join(lines)


def _numbers(values: Sequence[float]) -> str:
    return " ".join(f"{float(v):g}" for v in values)


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


def _connect_four(t: Sequence[float]) -> str:
    rows, cols = 6, 7
    lines = []
    for row in reversed(range(rows)):
        line = []
        for col in range(cols):
            idx = row * cols + col
            if t[idx] > 0.5:
                line.append("x")
            elif t[rows * cols + idx] > 0.5:
                line.append("o")
            else:
                line.append(".")
        lines.append(" ".join(line))
    lines.append(" ".join(str(c) for c in range(cols)))
    return "\n".join(lines)


#: playouts and moves each that ``fixed_action_names`` samples
NAME_PLAYOUTS = 16
NAME_PLAYOUT_MOVES = 300


def fixed_action_names(game: Any, player: int) -> dict[str, str]:
    """Names of ``player``'s actions that read the same wherever the player meets them.

    A server sends only action ids (OpenEnv's openspiel server); where an id's name does
    not depend on the position (kuhn poker's 0 Pass / 1 Bet, catch's LEFT / STAY / RIGHT)
    the prompt can name it as the embedded engine does. Found from seeded random playouts;
    an id seen with two names, or never seen, stays a bare number.
    """
    import random

    rng = random.Random(0)
    seen: dict[int, set[str]] = {}
    for _ in range(NAME_PLAYOUTS):
        state = game.new_initial_state()
        for _ in range(NAME_PLAYOUT_MOVES):
            if state.is_terminal():
                break
            if state.is_chance_node():
                action = rng.choice([a for a, _ in state.chance_outcomes()])
            else:
                legal = state.legal_actions()
                if state.current_player() == player:
                    for a in legal:
                        seen.setdefault(a, set()).add(state.action_to_string(player, a))
                action = rng.choice(legal)
            state.apply_action(action)
    return {str(a): next(iter(names)) for a, names in seen.items() if len(names) == 1}
