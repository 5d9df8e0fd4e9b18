"""What only the whole collection tells, checked before any episode: the run's arms.

A marker's ``models=[...]`` / ``policies=[...]`` are known once the test files are
collected, not at start-up. Two options must still hold for them before anything plays
(and is paid for): ``--openenv-max-cost`` needs a price for every model that plays,
``--openenv-gate-model`` / ``--openenv-gate-vs`` must name a model or policy that plays,
and a ``--openenv-model`` must play somewhere (else ``metadata.json`` would name a model
that never played).

A problem is sent as a failed collection report carrying ``USAGE_REFUSED``: the
controller turns it into a usage error (exit 4), under xdist too (a worker forwards its
failed collection reports before it says its collection is finished, and xdist
schedules nothing before every worker has).
"""

from __future__ import annotations

import pytest

from ..config.settings import Settings
from ..dataset.identity import USAGE_REFUSED
from ..episode.spec import EpisodeSpec


def played_arms(items: list[tuple[str, EpisodeSpec]]) -> dict[str, str]:
    """Each arm's name (its model, or its policy without one) -> the first test playing it."""
    arms: dict[str, str] = {}
    for nodeid, spec in items:
        arms.setdefault(spec.model or spec.policy, nodeid.rpartition("[")[0] or nodeid)
    return arms


def unpriced_problem(settings: Settings, items: list[tuple[str, EpisodeSpec]]) -> str | None:
    """A cost budget with a model that plays but has no price: its spend would count 0."""
    budget = settings.budget
    if budget.max_cost is None or budget.prices is None:
        return None  # no budget; or no table at all, refused at start (controller/budget.py)
    missing: dict[str, str] = {}
    for nodeid, spec in items:
        if spec.model and spec.model not in budget.prices:
            missing.setdefault(spec.model, nodeid.rpartition("[")[0] or nodeid)
    if not missing:
        return None
    named = ", ".join(f"{model!r} (played by {test})" for model, test in missing.items())
    return (
        f"--openenv-max-cost={budget.max_cost:g}: --openenv-prices has no price for {named} "
        f"(it prices {', '.join(map(repr, sorted(budget.prices)))}); the budget could not count "
        "their spend. Add each model the run plays to the price table"
    )


def gate_name_problem(settings: Settings, arms: dict[str, str]) -> str | None:
    """``--openenv-gate-model`` / ``--openenv-gate-vs`` naming nothing that plays (a typo
    would otherwise fail the gate only after the whole run)."""
    gate = settings.gate
    for flag, name in (("gate-model", gate.model), ("gate-vs", gate.vs)):
        if name is not None and name not in arms:
            listed = ", ".join(map(repr, arms)) or "none"
            return (
                f"--openenv-{flag}={name!r} is not a model or policy this run plays: it plays "
                f"{listed} (give the exact name, as listed)"
            )
    return None


def unplayed_model_problem(settings: Settings, arms: dict[str, str]) -> str | None:
    """A ``--openenv-model`` no collected test plays (each marker names its own models):
    the run's records would name a model that never played."""
    unplayed = [model for model in settings.llm.named_models if model not in arms]
    if not unplayed:
        return None
    return (
        f"--openenv-model={unplayed[0]!r} (command line or ini openenv_model) is played by "
        f"no collected test: the run plays {', '.join(map(repr, arms))} (a marker's "
        "models=[...], or a policy that takes no model, stands in for it); leave it out"
    )


def collection_problem(settings: Settings, items: list[pytest.Item]) -> str | None:
    from .items import spec_of

    episodes = [(item.nodeid, spec) for item in items if (spec := spec_of(item)) is not None]
    if not episodes:
        return None
    arms = played_arms(episodes)
    return (
        unpriced_problem(settings, episodes)
        or gate_name_problem(settings, arms)
        or unplayed_model_problem(settings, arms)
    )


def refuse_collection(config: pytest.Config, problem: str) -> None:
    """Report ``problem`` as a failed collection the controller refuses the run on."""
    report = pytest.CollectReport(
        "", "failed", f"openenv: {problem}", [], **{USAGE_REFUSED: problem}
    )
    config.hook.pytest_collectreport(report=report)
