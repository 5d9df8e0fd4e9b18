"""What an env proposes to a policy: a tool call (a scripted move, one of the legal moves).

The one value both sides of the tool-calling loop speak: env families make them
(``EnvFamily.scripted_call``, ``legal_calls``, ``expert_call``) and policies play them,
so it lives below both and neither imports the other. ``envs.base`` re-exports it,
where implementers of a family look for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProposedCall:
    """A tool call the env can suggest: scripted moves and legal-move lists."""

    name: str
    arguments: dict[str, Any]

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, sort_keys=True)
