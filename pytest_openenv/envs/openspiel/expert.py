"""The expert: choose a move for a pyspiel state by exact search or OpenSpiel's own bots.

- An exact alpha-beta search for small two-player zero-sum perfect-information
  deterministic games that scores a win by how soon it comes: of the moves with the best
  outcome it takes the quickest win (or, lost, the slowest loss), ties to the lowest action
  id. Plain minimax (OpenSpiel's ``alpha_beta_search``) treats every winning move alike and
  takes the lowest id, so it often passes up a win on the board for one a few moves later:
  a teacher that does so makes data a student cannot read a rule off. "Small" means
  alpha-beta's best-case node count ``A ** ceil(L / 2)`` (A distinct actions, L the
  longest game) is at most ``EXACT_NODE_BUDGET``: tic-tac-toe (9 ** 5 = 59049) is in,
  connect four (7 ** 21) is not. Best moves are kept per position by the game's
  ``ExpertSearch`` (one per family, shared by its episodes), so only the first
  episodes of a run pay for the search.
- Otherwise pyspiel's C++ ``MCTSBot`` with a ``RandomRolloutEvaluator``, or its
  ``ISMCTSBot`` for imperfect-information games (it searches over states resampled
  from the player's information state, so it never reads hidden information).
  ``MCTS_SIMULATIONS`` per move, seeded per move: the same seed plays the same game.

``ExpertSearch`` holds one game's plan and memo; the functions take the game and a
state. Nothing here knows about episodes.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...errors import ExpertError
from ...util.memo import BoundedMemo

#: alpha-beta's best-case node count (``A ** ceil(L / 2)``) at or below which the search is exact
EXACT_NODE_BUDGET = 10**5
#: MCTS simulations per move. Connect four vs a random opponent (200 games, bench/expert.py
#: measures it again): 25 -> 97% wins at 0.2 ms/move, 50 -> 99.5% at 0.4 ms/move,
#: 100 -> 100% at 0.8 ms/move. 50 keeps a move below pytest's own cost per item.
MCTS_SIMULATIONS = 50
#: UCT exploration constant (OpenSpiel's examples use 2 with random rollouts)
UCT_C = 2.0
#: the search tree of one move stays far below this; it only bounds a runaway
MCTS_MEMORY_MB = 64
#: positions whose exact best move is kept; beyond it a search result is used, not stored
EXACT_MEMO_LIMIT = 500_000


@dataclass(frozen=True)
class Plan:
    """How one game is searched: ``alpha-beta``, ``mcts`` or ``ismcts``."""

    kind: str
    #: why the game cannot be searched at all (then ``kind`` is empty)
    problem: str | None = None


def move_seed(stream: str, *parts: int) -> int:
    """A 31-bit seed for one move of one stream (the agent's, the opponent's)."""
    text = ":".join([stream, *map(str, parts)])
    return zlib.crc32(text.encode()) & 0x7FFFFFFF


class ExpertSearch:
    """The expert for one game: its plan, decided on first use, and the exact best moves
    found so far (a pure cache: positions repeat across episodes)."""

    def __init__(self, game: Any) -> None:
        self.game = game
        self._plan: Plan | None = None
        #: move history -> the exact search's best move there
        self.exact_moves: BoundedMemo[tuple[int, ...], int] = BoundedMemo(EXACT_MEMO_LIMIT)

    @property
    def plan(self) -> Plan:
        if self._plan is None:
            self._plan = decide_plan(self.game)  # two threads may both decide: they agree
        return self._plan

    def problem(self) -> str | None:
        """Why the expert cannot play this game, or None when it can."""
        return self.plan.problem

    def choose(self, state: Any, *, seed: int) -> int:
        """The expert's move for the player to move in ``state`` (not a chance node)."""
        plan = self.plan
        if plan.problem:
            raise ExpertError(plan.problem)
        if plan.kind == "alpha-beta":
            return self._exact(state)
        return _mcts(self.game, state, seed=seed, information_sets=plan.kind == "ismcts")

    def _exact(self, state: Any) -> int:
        key = tuple(state.history())
        known = self.exact_moves.get(key)
        if known is not None:
            return known
        # Searched without a lock: two threads on one new position both search it and
        # agree (the search is deterministic), which beats making every thread wait.
        return self.exact_moves.keep(key, quickest_best_move(self.game, state))


def quickest_best_move(game: Any, state: Any) -> int:
    """The move of the player to move in ``state`` with the best outcome, a win as soon
    as it can be had and a loss as late, ties to the lowest action id (exact search)."""
    player = state.current_player()
    longest = game.max_game_length()
    best_value, best_action = -math.inf, None
    for action in state.legal_actions():
        value = _alpha_beta(state.child(action), best_value, math.inf, player, longest)
        if value > best_value:  # strictly: an equal later move keeps the earlier one
            best_value, best_action = value, action
    if best_action is None:
        raise ExpertError("the expert was asked for a move where there is none")
    return int(best_action)


def _alpha_beta(state: Any, alpha: float, beta: float, player: int, longest: int) -> float:
    """``player``'s value of ``state``: the outcome, weighted by the moves left unplayed."""
    if state.is_terminal():
        return state.returns()[player] * (1 + longest - state.move_number())
    maximizing = state.current_player() == player
    for action in state.legal_actions():
        value = _alpha_beta(state.child(action), alpha, beta, player, longest)
        if maximizing:
            alpha = max(alpha, value)
        else:
            beta = min(beta, value)
        if alpha >= beta:
            break
    return alpha if maximizing else beta


def decide_plan(game: Any) -> Plan:
    """The search the expert uses for ``game`` (``ExpertSearch.plan`` keeps it)."""
    import pyspiel

    kinds = pyspiel.GameType
    game_type = game.get_type()
    name = game_type.short_name
    if game_type.dynamics != kinds.Dynamics.SEQUENTIAL:
        return Plan("", f"the expert plays turn-based games only; {name} is not")
    if game_type.reward_model != kinds.RewardModel.TERMINAL:
        return Plan(
            "",
            f"OpenSpiel's MCTS needs a game that pays out at the end; {name} pays rewards "
            "along the way",
        )
    if game_type.information != kinds.Information.PERFECT_INFORMATION:
        problem = _resampling_problem(game)
        return Plan("", problem) if problem else Plan("ismcts")
    exact = (
        game.num_players() == 2
        and game_type.utility == kinds.Utility.ZERO_SUM
        and game_type.chance_mode == kinds.ChanceMode.DETERMINISTIC
        and game.num_distinct_actions() ** math.ceil(game.max_game_length() / 2)
        <= EXACT_NODE_BUDGET
    )
    return Plan("alpha-beta" if exact else "mcts")


#: what pyspiel's C++ prints on stderr before it raises for a method a game lacks
NATIVE_NOT_IMPLEMENTED = re.compile(r"^OpenSpiel exception: .* not implemented\.?$")


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Hold back what native code writes to stderr (fd 2) meanwhile, dropping pyspiel's
    "OpenSpiel exception: ... not implemented." line: the probe expects that refusal, and
    printed at start it reads as a crash. Anything else is written out afterwards."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (an embedding host): nothing to hold
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text = held.read().decode("utf-8", "replace")
            rest = [line for line in text.splitlines() if not NATIVE_NOT_IMPLEMENTED.match(line)]
            if rest:
                sys.stderr.write("\n".join(rest) + "\n")


def _resampling_problem(game: Any) -> str | None:
    """ISMCTS resamples hidden information; some games do not implement that."""
    import random

    state = game.new_initial_state()
    rng = random.Random(0)
    while state.is_chance_node():
        outcomes, weights = zip(*state.chance_outcomes(), strict=False)
        state.apply_action(rng.choices(outcomes, weights)[0])
    if state.is_terminal():
        return None
    try:
        with quiet_native_stderr():
            state.resample_from_infostate(state.current_player(), rng.random)
    except Exception:  # pyspiel raises a bare RuntimeError ("... not implemented")
        name = game.get_type().short_name
        return (
            f"{name} hides information and does not implement "
            "State.resample_from_infostate, which OpenSpiel's ISMCTS needs"
        )
    return None


def _mcts(game: Any, state: Any, *, seed: int, information_sets: bool) -> int:
    import pyspiel

    evaluator = pyspiel.RandomRolloutEvaluator(1, seed)
    if information_sets:
        bot = pyspiel.ISMCTSBot(
            seed,
            evaluator,
            UCT_C,
            MCTS_SIMULATIONS,
            -1,
            pyspiel.ISMCTSFinalPolicyType.MAX_VISIT_COUNT,
            False,
            False,
        )
    else:
        bot = pyspiel.MCTSBot(
            game, evaluator, UCT_C, MCTS_SIMULATIONS, MCTS_MEMORY_MB, True, seed, False
        )
    return int(bot.step(state))


def rebuild_state(game: Any, history: list[int]) -> Any:
    """The state reached by playing ``history`` (chance outcomes included) from the start."""
    state = game.new_initial_state()
    for action in history:
        state.apply_action(int(action))
    return state
