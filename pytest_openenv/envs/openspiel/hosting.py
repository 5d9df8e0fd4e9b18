"""Which OpenSpiel game a deployed server hosts, and whether it is the one a run names.

OpenEnv's openspiel server reports its game in its state (``OpenSpielState``:
``game_name``, ``game_params``, ``agent_player``, ``opponent_policy``) in the
session's ``state`` frame (its ``GET /state`` answers from a fresh env and, made
without a state class, says none of it); a server may also put ``game_name`` in an
observation's metadata. Parameters are compared as pyspiel resolves them, so a
server that spells out a default (``{"rows": 10}`` for catch) still matches a
run that leaves it out.
"""

from __future__ import annotations

import json
from typing import Any

from ..remote.hosting import ServerReport
from .engine import load_game

#: the opponent policies OpenEnv's openspiel server plays (``OPENSPIEL_OPPONENT_POLICY``;
#: its ``opponent_policies.get_opponent_policy``); ``middle`` the family accepts on a server
#: only (``family.SERVER_OPPONENTS``)
OPENENV_OPPONENTS = ("random", "first", "last", "middle")


def hosted_game(report: ServerReport) -> dict[str, Any] | None:
    """``{"game_name", "game_params"?, "agent_player"?, "opponent_policy"?}`` as the server
    reports them, or None."""
    state = report.state or {}
    first = report.first
    name = state.get("game_name")
    if not name and first is not None:
        name = first.metadata.get("game_name") or first.observation.get("game_name")
    if not isinstance(name, str) or not name:
        return None
    hosted: dict[str, Any] = {"game_name": name}
    if isinstance(state.get("game_params"), dict):
        hosted["game_params"] = state["game_params"]
    agent = state.get("agent_player")
    if isinstance(agent, int) and not isinstance(agent, bool):
        hosted["agent_player"] = agent
    opponent = state.get("opponent_policy")
    if isinstance(opponent, str) and opponent:
        hosted["opponent_policy"] = opponent
    return hosted


def _resolved(name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """Every parameter of the game, defaults included; None if pyspiel cannot load it."""
    try:
        return dict(load_game(name, params).get_parameters())
    except Exception:  # pyspiel raises plain RuntimeError for unknown games and params
        return None


def _shown(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def game_mismatch(
    hosted: dict[str, Any],
    *,
    variant: str,
    game: Any,
    game_params: dict[str, Any],
    agent: int,
    opponent: str,
) -> str | None:
    """Why the hosted game differs from ``variant`` with ``game_params``; both are named."""
    name = hosted["game_name"]
    if name != variant:
        return f"it hosts OpenSpiel game {name!r}, not {variant!r}"
    if "game_params" in hosted:
        theirs = hosted["game_params"]
        ours = dict(game.get_parameters())
        resolved = _resolved(name, theirs)
        if (resolved if resolved is not None else theirs) != ours:
            return (
                f"it hosts {name} with game_params {_shown(theirs)}, but the env config asks "
                f"for game_params {_shown(game_params)} (set game_params in "
                "--openenv-env-config to what the server hosts)"
            )
    if "agent_player" in hosted and hosted["agent_player"] != agent:
        return (
            f"its agent is player {hosted['agent_player']} of {name}, but the env config says "
            f"agent_player {agent}"
        )
    theirs = hosted.get("opponent_policy")
    if theirs is not None and game.num_players() > 1 and theirs != opponent:
        if opponent in OPENENV_OPPONENTS:
            fix = f"or start the server with OPENSPIEL_OPPONENT_POLICY={opponent}"
        else:
            fix = (
                f"OpenEnv's server has no {opponent!r} opponent: play it on the embedded "
                "engine (leave out --openenv-server)"
            )
        if theirs in OPENENV_OPPONENTS:
            advice = f"set opponent in --openenv-env-config to {theirs!r}, {fix}"
        else:  # advice that would then be refused is no advice
            advice = f"the openspiel family does not know the opponent {theirs!r}; {fix}"
        return (
            f"its opponent plays {theirs!r}, but the env config says opponent {opponent!r} "
            f"({advice})"
        )
    return None
