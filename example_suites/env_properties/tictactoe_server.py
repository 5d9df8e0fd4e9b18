"""A deployed-style OpenEnv server for tic-tac-toe, built with the ``openenv`` package.

It speaks OpenEnv's openspiel schema (action ``{action_id, game_name, game_params}``,
observation ``{info_state, legal_actions, game_phase, current_player_id,
opponent_last_action}``) over OpenEnv's HTTP + WebSocket routes. The agent is
player 0 against a random opponent seeded by the reset seed, the same way the
plugin's embedded engine seeds it, so both backends play identical games.

Run it on its own (``python tictactoe_server.py --port 8000``) or let the suite's
conftest start it on a free loopback port.
"""

from __future__ import annotations

import argparse
import random
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class OpenSpielAction(Action):
    action_id: int = Field(..., description="The id of a legal action")
    game_name: str = Field(default="tic_tac_toe")
    game_params: dict[str, Any] = Field(default_factory=dict)


class OpenSpielObservation(Observation):
    info_state: list[float] = Field(default_factory=list)
    legal_actions: list[int] = Field(default_factory=list)
    game_phase: str = "initial"
    current_player_id: int = 0
    opponent_last_action: int | None = None


class TicTacToe(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        import pyspiel

        self._game = pyspiel.load_game("tic_tac_toe")
        self._game_state: Any = None
        self._rng = random.Random(0)
        self._last: int | None = None
        self._moves = 0
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> OpenSpielObservation:
        self._rng = random.Random(f"opponent:{seed}")
        self._game_state = self._game.new_initial_state()
        self._last, self._moves = None, 0
        self._state = State(episode_id=episode_id, step_count=0)
        return self._observe()

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Any:
        assert isinstance(action, OpenSpielAction)
        game = self._game_state
        if game is None or game.is_terminal():
            raise ValueError("no game in progress: reset first")
        legal = game.legal_actions(0)
        if action.action_id not in legal:
            raise ValueError(f"action_id {action.action_id} is not legal; legal: {legal}")
        game.apply_action(action.action_id)
        self._moves += 1
        self._state.step_count += 1
        while not game.is_terminal() and game.current_player() != 0:
            self._last = self._rng.choice(game.legal_actions(game.current_player()))
            game.apply_action(self._last)
        return self._observe()

    def _observe(self) -> OpenSpielObservation:
        game = self._game_state
        done = bool(game.is_terminal())
        return OpenSpielObservation(
            info_state=[float(x) for x in game.observation_tensor(0)],
            legal_actions=[] if done else list(game.legal_actions(0)),
            game_phase="terminal" if done else ("initial" if self._moves == 0 else "playing"),
            current_player_id=int(game.current_player()),
            opponent_last_action=self._last,
            done=done,
            reward=float(game.returns()[0]) if done else 0.0,
        )

    @property
    def state(self) -> State:
        return self._state


def build_app(max_sessions: int = 8) -> Any:
    return create_app(
        TicTacToe,
        OpenSpielAction,
        OpenSpielObservation,
        env_name="tic_tac_toe",
        max_concurrent_envs=max_sessions,
    )


if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(build_app(), host=args.host, port=args.port)
