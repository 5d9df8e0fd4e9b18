"""The embedded OpenSpiel backend: a pyspiel game in-process, in OpenEnv's openspiel shape.

The observation fields match OpenEnv's openspiel server (``info_state``,
``legal_actions``, ``game_phase``, ``current_player_id``,
``opponent_last_action``) so the openspiel adapter cannot tell this backend from
a deployed server. pyspiel's per-player text (the agent's ``observation_string``,
never ``str(state)``, which shows every hand) rides in ``metadata["text"]`` for
games the adapter cannot draw from the tensor.
"""

from __future__ import annotations

import random
from typing import Any

from ..base import ActionRejected, Backend, EnvUnavailable, StepResult
from .expert import ExpertSearch, move_seed

OPPONENTS = ("random", "first", "last", "expert")


def load_game(name: str, params: dict[str, Any]) -> Any:
    import pyspiel

    return pyspiel.load_game(name, params) if params else pyspiel.load_game(name)


class OpenSpielEngine(Backend):
    kind = "embedded"

    def __init__(
        self,
        game: Any,
        *,
        agent_player: int,
        opponent: str,
        name_actions: bool = True,
        expert: ExpertSearch | None = None,
    ) -> None:
        """``expert``: the game's search for the ``expert`` opponent (the family's, whose
        memo every episode shares); without it the engine searches on its own."""
        self._game = game
        if opponent == "expert" and expert is None:
            expert = ExpertSearch(game)
        self._expert = expert
        game_type = game.get_type()  # a new object per call: read the two flags once
        self._info_tensor = bool(game_type.provides_information_state_tensor)
        self._obs_tensor = bool(game_type.provides_observation_tensor)
        # str(state) is the whole state: in poker it holds the opponent's card
        self._obs_string = bool(game_type.provides_observation_string)
        self._info_string = bool(game_type.provides_information_state_string)
        self._agent = agent_player
        self._opponent = opponent
        self._name_actions = name_actions
        self._state: Any = None
        self._seed = 0
        # Made on first use from the episode seed: most games never need both, and
        # seeding from a string costs a hash (a seedless Random() would read os.urandom).
        self._chance_rng: random.Random | None = None
        self._opponent_rng: random.Random | None = None
        self._last_opponent_action: int | None = None
        self._returns_seen = 0.0
        self._moves = 0

    def reset(self, *, seed: int, episode_id: str, **options: Any) -> StepResult:
        # Separate streams: the opponent's choices must not shift when chance draws differ.
        self._seed = seed
        self._chance_rng = None
        self._opponent_rng = None
        self._state = self._game.new_initial_state()
        self._last_opponent_action = None
        self._returns_seen = 0.0
        self._moves = 0
        self._advance()
        return self._observe()

    def step(self, action: dict[str, Any]) -> StepResult:
        if self._state is None:
            raise EnvUnavailable("step before reset")
        if self._state.is_terminal():
            raise ActionRejected("the game is over; no further moves are accepted")
        action_id = action.get("action_id")
        legal = self._state.legal_actions(self._agent)
        if action_id not in legal:
            raise ActionRejected(f"action_id {action_id} is not legal now; legal actions: {legal}")
        self._state.apply_action(action_id)
        self._moves += 1
        self._advance()
        return self._observe()

    def _advance(self) -> None:
        """Play chance and opponents until it is the agent's turn or the game ends."""
        state = self._state
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes, weights = zip(*state.chance_outcomes(), strict=False)
                if self._chance_rng is None:
                    self._chance_rng = random.Random(f"chance:{self._seed}")
                state.apply_action(self._chance_rng.choices(outcomes, weights)[0])
                continue
            player = state.current_player()
            if player == self._agent:
                return
            legal = state.legal_actions(player)
            if self._opponent == "first":
                move = legal[0]
            elif self._opponent == "last":
                move = legal[-1]
            elif self._opponent == "expert":
                # its own stream, apart from the agent's expert moves and the chance draws
                seed = move_seed("opponent-expert", self._seed, len(state.history()))
                move = self._expert.choose(state, seed=seed)  # type: ignore[union-attr]
            else:
                if self._opponent_rng is None:
                    self._opponent_rng = random.Random(f"opponent:{self._seed}")
                move = self._opponent_rng.choice(legal)
            self._last_opponent_action = move
            state.apply_action(move)

    def _view(self, state: Any) -> str:
        """What the agent's player may see: pyspiel's per-player string, never another's cards."""
        if self._obs_string:
            return str(state.observation_string(self._agent))
        if self._info_string:
            return str(state.information_state_string(self._agent))
        return ""  # no per-player text: the adapter shows the tensor instead

    def _observe(self) -> StepResult:
        state = self._state
        if self._info_tensor:
            info_state = list(state.information_state_tensor(self._agent))
        elif self._obs_tensor:
            info_state = list(state.observation_tensor(self._agent))
        else:
            info_state = []
        done = bool(state.is_terminal())
        total = float(state.returns()[self._agent])
        reward = total - self._returns_seen
        self._returns_seen = total
        if done:
            phase = "terminal"
        elif self._moves == 0:
            phase = "initial"
        else:
            phase = "playing"
        observation = {
            "info_state": info_state,
            "legal_actions": [] if done else list(state.legal_actions(self._agent)),
            "game_phase": phase,
            "current_player_id": int(state.current_player()),
            "opponent_last_action": self._last_opponent_action,
        }
        # the expert rebuilds the state from it; it holds every chance outcome (the other
        # player's cards too), so it is for the search only, never shown or recorded
        metadata: dict[str, Any] = {"action_history": state.history()}
        if self._name_actions:
            legal = observation["legal_actions"]
            metadata["text"] = self._view(state)
            metadata["action_names"] = {
                str(a): state.action_to_string(self._agent, a) for a in legal
            }
        return StepResult(observation=observation, reward=reward, done=done, metadata=metadata)
