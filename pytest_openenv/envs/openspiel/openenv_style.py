"""OpenEnv's harness wording for openspiel games (``--openenv-prompt-style openenv``).

What ``openenv collect`` writes for an OpenSpiel env (its session factory,
``envs/openspiel_env/harness.py`` in the OpenEnv repository): no system message, one
tool ``play_move(action_id)`` with OpenEnv's description, a first user message
``You are playing {game}.`` with the legal actions as a Python list (and, for
tic-tac-toe, the board), and each tool result as the sorted JSON of ``{action_id,
legal_actions, reward, done, current_player_id, board}``. A model warmed up on these
rows sees the same text when OpenEnv's harness drives it later (GRPO).

One difference on purpose: the tic-tac-toe board's marks. OpenSpiel's observation
tensor holds empty cells in plane 0, O (nought, player 1) in plane 1 and X (cross,
player 0) in plane 2; OpenEnv's ``render_tic_tac_toe_board`` reads plane 1 as X and
plane 2 as O, so every mark it shows is the other player's. This board keeps
OpenEnv's layout (``0 | 1 | 2`` rows split by ``---------``, empty cells by action
id) with the marks the game has.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..base import ProposedCall, StepResult, ToolSpec

PLAY_MOVE = ToolSpec(
    name="play_move",
    description=(
        "Play a move by its integer action_id. The action_id must come "
        "from the `legal_actions` list shown in the latest observation."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action_id": {
                "type": "integer",
                "description": "Action id drawn from legal_actions.",
            },
        },
        "required": ["action_id"],
    },
)


def board(info_state: Sequence[float]) -> str:
    """A tic-tac-toe board in OpenEnv's layout, X where player 0 played (plane 2)."""
    if len(info_state) != 27:
        return ""
    rows = []
    for row in range(3):
        cells = []
        for col in range(3):
            cell = row * 3 + col
            if info_state[18 + cell] > 0.5:
                cells.append("X")
            elif info_state[9 + cell] > 0.5:
                cells.append("O")
            else:
                cells.append(str(cell))
        rows.append(" | ".join(cells))
    return "\n---------\n".join(rows)


def task_prompt(game: str, first: StepResult) -> str:
    observation = first.observation
    lines = [
        f"You are playing {game}.",
        "Call the play_move tool with an action_id drawn from legal_actions.",
        f"Legal actions: {list(observation.get('legal_actions') or [])}",
    ]
    if game == "tic_tac_toe":
        drawn = board(observation.get("info_state") or [])
        if drawn:
            lines += ["", "Board:", drawn]
    return "\n".join(lines)


def tool_result(game: str, call: ProposedCall, result: StepResult) -> str:
    observation = result.observation
    data: dict[str, Any] = {
        "action_id": call.arguments.get("action_id"),
        "legal_actions": list(observation.get("legal_actions") or []),
        "reward": result.reward,
        "done": result.done,
        "current_player_id": observation.get("current_player_id"),
    }
    if game == "tic_tac_toe":
        drawn = board(observation.get("info_state") or [])
        if drawn:
            data["board"] = drawn
    # the harness's own serialisation of a tool result's data (sorted keys, ASCII)
    return json.dumps(data, sort_keys=True, default=str)
