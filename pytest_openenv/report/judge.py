"""The gate's verdict as a function of the run's counts: which figures it reads (each
group's, or pooled) and what ``gates.evaluate`` makes of them. Nothing here writes a file
or prints a line; ``controller/finish.py`` calls it and shows the verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .arms import ArmAccounts, ArmTally
from .gates import GateConfig, RunFigures, Verdict, evaluate
from .passk import PassKTally
from .tally import Tally


@dataclass(frozen=True)
class RunCounts:
    """What the gate reads of a run: its outcomes, the same per group and model, per seed."""

    tally: Tally
    arms: ArmAccounts
    passk: PassKTally
    #: --openenv-repeats: k for a group that has no pass@k tally of its own
    repeats: int


def judge(
    gate: GateConfig,
    counts: RunCounts,
    *,
    other_failures: int = 0,
    stopped_early: str | None = None,
    subset: Callable[[int], str] | None = None,
) -> Verdict:
    """The gate's verdict over ``counts``. ``subset``: the run played only part of the
    dataset; given how many episodes the gate judged, why that cannot pass."""
    figures = gate_figures(gate, counts)
    return evaluate(
        gate,
        figures,
        other_failures=other_failures,
        stopped_early=stopped_early,
        subset=subset(judged_count(figures)) if subset is not None else None,
    )


def best_of_unjudged(attempts: int, gate_best_of: bool) -> str | None:
    """Why the gate is not judged when failures were played again, else None."""
    if attempts <= 1 or gate_best_of:
        return None
    # a failure played again until it passed is no pass@1: nothing to gate on
    return (
        f"WARNING: the gate was not judged: the figures are best of up to {attempts} "
        "attempts per episode (--openenv-resume-failed played failed episodes again); "
        "pass --openenv-gate-best-of to judge them anyway"
    )


def judged_count(figures: RunFigures | list[RunFigures]) -> int:
    """How many episodes the gate's figures cover (each group's, or the pooled ones)."""
    return sum(one.ran for one in figures) if isinstance(figures, list) else figures.ran


def gate_figures(gate: GateConfig, counts: RunCounts) -> RunFigures | list[RunFigures]:
    """What the gate reads: each group's figures (the groups of ``--openenv-gate-model``
    only, or with ``--openenv-gate-vs`` every other model's), or with one group or
    ``--openenv-gate-pooled`` the pooled figures; each with its episodes for the paired
    tests (``--openenv-gate-vs``, a paired ``--openenv-baseline``)."""
    groups = counts.arms.groups()
    baseline_groups = len(gate.baseline.groups) if gate.baseline is not None else 0
    if gate.pooled or not groups or (len(groups) == 1 and baseline_groups <= 1):
        return pooled_gate_figures(gate, counts)
    judged = [
        group
        for group in groups
        if (gate.model is None or group.name == gate.model)
        and (gate.model is not None or group.name != gate.vs)
    ]
    return [group_figures(gate, counts, group) for group in judged]


def group_figures(gate: GateConfig, counts: RunCounts, group: ArmTally) -> RunFigures:
    """One group's figures, with ``--openenv-gate-vs``'s episodes beside it."""
    vs = vs_group(counts.arms, group, gate.vs) if gate.vs else None
    return RunFigures(
        passed=group.passed,
        ran=group.ran,
        reward=group.reward,
        passk=(group.passk or PassKTally(counts.repeats)).result(),
        judged=group.passed + group.failed,
        model=group.name,
        outcomes=group.outcomes,
        vs_outcomes=vs.outcomes if vs is not None else None,
        envs=frozenset({group.env} - {""}),
        policies=frozenset({group.policy} - {None}),  # type: ignore[arg-type]
        models=frozenset({group.model} - {None}),  # type: ignore[arg-type]
        group=group.label,
        group_key=(group.test, group.env, group.name),
        attempts=counts.tally.attempts,
    )


def vs_group(arms: ArmAccounts, group: ArmTally, vs: str) -> ArmTally | None:
    """``--openenv-gate-vs``'s group beside ``group``: the same test and env."""
    for other in arms.by_group.values():
        if (other.test, other.env, other.name) == (group.test, group.env, vs):
            return other
    return None


def pooled_gate_figures(gate: GateConfig, counts: RunCounts) -> RunFigures | list[RunFigures]:
    """The pooled figures: the whole run's, or with several models the gated one's
    (``--openenv-gate-model``), or each model's but ``--openenv-gate-vs``'s."""
    tally, arms = counts.tally, counts.arms
    merged = arms.arms
    vs = merged.get(gate.vs) if gate.vs else None
    vs_outcomes = vs.outcomes if vs is not None else None
    ordered = arms.ordered()
    if not arms.several or (gate.model is None and gate.vs is None):
        only = ordered[0] if len(ordered) == 1 else None
        outcomes: dict[Any, Any] = {}
        for arm in ordered:
            outcomes.update(arm.outcomes)
        return RunFigures(
            passed=tally.passed,
            ran=tally.ran,
            reward=tally.reward,
            passk=counts.passk.result(),
            judged=tally.passed + tally.failed,
            model=only.name if only is not None else None,
            outcomes=outcomes if only is not None else None,
            vs_outcomes=vs_outcomes,
            envs=frozenset(tally.envs),
            policies=frozenset(tally.policies),
            models=frozenset(tally.models),
            group="pooled (all groups)" if arms.several_groups else None,
            attempts=tally.attempts,
        )
    names = [arm.name for arm in ordered]
    if gate.model is None:
        # every model is judged against the reference, each over all its groups
        others = [name for name in names if name != gate.vs] or names[:1]
        return [pooled_model_figures(counts, name, vs_outcomes) for name in others]
    return pooled_model_figures(counts, gate.model, vs_outcomes)


def pooled_model_figures(
    counts: RunCounts, name: str, vs_outcomes: dict[Any, Any] | None
) -> RunFigures:
    """One model's figures pooled over its groups."""
    tally, arms = counts.tally, counts.arms
    gated = arms.arms.get(name) or ArmTally(name)
    return RunFigures(
        passed=gated.passed,
        ran=gated.ran,
        reward=gated.reward,
        passk=(gated.passk or PassKTally(counts.repeats)).result(),
        judged=gated.passed + gated.failed,
        model=name,
        outcomes=gated.outcomes,
        vs_outcomes=vs_outcomes,
        # the gated model is compared with the baseline's: only the env must agree
        envs=frozenset(tally.envs),
        group=f"pooled ({name}, all its groups)" if arms.several_groups else None,
        attempts=tally.attempts,
    )
