"""The contestants of a run: each policy, and each model of an LLM policy, playing the
same episodes (``--openenv-policy`` / ``--openenv-model`` repeated, or the marker's
``policies=[...]`` / ``models=[...]``).

An arm is named by its model (``Qwen/Qwen2.5-7B``), or by its policy when it has no
model (``scripted``). An agent program is an arm of its own on a model
(``agent:codex / Qwen/Qwen2.5-7B``): three agents and our own loop on one model play the
same seeds and are compared as models are. With more than one arm each episode id starts
with the arm's *id part*: the name with every run of characters other than letters, digits, ``.``,
``_`` and ``-`` turned into one ``_`` (``Qwen_Qwen2.5-7B-ep-000000``), because node
ids and file names must hold no ``:``, ``/`` or ``[]``. Rows keep the exact name in
``model`` / ``policy``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import EnvConfigError
from .registry import AGENT_PREFIX, plays_a_model

_NOT_IN_IDS = re.compile(r"[^A-Za-z0-9._-]+")


def id_part(name: str) -> str:
    """``name`` as it may stand in a node id and a file name."""
    return _NOT_IN_IDS.sub("_", name).strip("_") or "arm"


def arm_name(policy: str, model: str | None) -> str:
    """The name the run knows an arm by: the model, the policy without one, and an agent's
    policy with its model (the agent, not only the model, is what plays)."""
    if model and policy.startswith(AGENT_PREFIX):
        return f"{policy} / {model}"
    return model or policy


@dataclass(frozen=True)
class Arm:
    policy: str
    #: the model an LLM policy plays with; None: the run's (or none)
    model: str | None = None

    @property
    def name(self) -> str:
        """The exact name (``arm_name``)."""
        return arm_name(self.policy, self.model)


def arms_of(policies: tuple[str, ...], models: tuple[str, ...]) -> list[Arm]:
    """Each policy; an LLM policy once per model. Raises ``EnvConfigError`` when two arms
    would share an id (names that differ only in characters ids cannot hold)."""
    arms: list[Arm] = []
    for policy in policies:
        plays = plays_a_model(policy)
        if plays and len(models) > 1:
            arms.extend(Arm(policy, model) for model in models)
        else:
            arms.append(Arm(policy, models[0] if plays and models else None))
    if len(arms) > 1:
        seen: dict[str, Arm] = {}
        for arm in arms:
            other = seen.setdefault(id_part(arm.name), arm)
            if other is not arm:
                raise EnvConfigError(
                    f"{other.name!r} and {arm.name!r} would share the episode ids "
                    f"{id_part(arm.name)}-ep-...: compare them in separate runs, or name one "
                    "differently (ids keep letters, digits, '.', '_' and '-')"
                )
    return arms
