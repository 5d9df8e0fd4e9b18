"""The remote backend for the openspiel family: it also keeps the pyspiel action history.

OpenEnv's openspiel server sends no history, only ``opponent_last_action``. In a
deterministic game where two players strictly alternate, the agent's accepted
actions and the opponent's replies are the whole history, so it is rebuilt here
and handed on as ``metadata["action_history"]``, as the embedded engine does.
The expert (``OpenSpielFamily.expert_call``) checks the rebuilt state against the
server's legal actions before it trusts it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..base import StepResult
from ..remote.backend import RemoteBackend

#: two-player games in which every turn is exactly one move of the other player, so
#: the history can be rebuilt from the observations (no extra turns, no hidden chance)
ALTERNATING_GAMES = ("tic_tac_toe", "connect_four", "hex", "breakthrough")


class HistoryTrackingRemote(RemoteBackend):
    def __init__(self, server_url: Any, **options: Any) -> None:
        super().__init__(server_url, **options)
        #: None once a reply left the history unknown (an opponent move went unreported)
        self._history: list[int] | None = []

    def reset(self, *, seed: int, episode_id: str, **options: Any) -> StepResult:
        result = super().reset(seed=seed, episode_id=episode_id, **options)
        opening = result.observation.get("opponent_last_action")
        self._history = [] if opening is None else [opening]
        return self._with_history(result)

    def step(self, action: dict[str, Any]) -> StepResult:
        result = super().step(action)  # a refused action raises: the history stays as it was
        if self._history is not None:
            self._history.append(action["action_id"])
            reply = result.observation.get("opponent_last_action")
            if not result.done:
                self._history = None if reply is None else [*self._history, reply]
        return self._with_history(result)

    def _with_history(self, result: StepResult) -> StepResult:
        history = self._history
        if history is None or not all(type(a) is int for a in history):
            return result
        return replace(result, metadata={**result.metadata, "action_history": list(history)})
