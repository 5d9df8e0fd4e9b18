"""Gate rules and the session verdict (controller only).

With any gate option set (``--openenv-min-pass-rate``, ``--openenv-min-mean-reward``,
``--openenv-baseline``, ``--openenv-gate-vs``), a failing episode no longer fails the
session by itself: the gate decides. The gates judge every group (test function, env,
model or policy: ``report/arms.py``) on its own, and the verdict names each group that
failed; ``--openenv-gate-pooled`` judges the pooled figures instead, and
``--openenv-gate-model`` the groups of one model. Errored episodes count as not passed.
Each check names the rule it applied, the figure it read and the threshold, so a red
CI job says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..util.format import markdown_text, number, percent, table
from .arms import short_test
from .baseline import (
    DEFAULT_CONFIDENCE,
    Baseline,
    Comparison,
    Rate,
    compare,
    env_problem,
    load_baseline,
)
from .paired import MCNEMAR, mcnemar_one_sided_worse
from .passk import PassAtK
from .stats import RunningMean, wilson_interval, z_for

if TYPE_CHECKING:
    from ..config.settings import Settings


@dataclass(frozen=True)
class GateConfig:
    min_pass_rate: float | None = None
    min_mean_reward: float | None = None
    #: None: compare point estimates
    confidence: float | None = None
    metric: str = "pass@1"
    baseline: Baseline | None = None
    #: ``--openenv-baseline-any-env``: compare a baseline of another env, not refuse it
    baseline_any_env: bool = False
    #: ``--openenv-baseline`` as given (messages)
    baseline_given: str = ""
    #: ``--openenv-gate-pooled``: judge the pooled figures, not each group
    pooled: bool = False
    #: ``--openenv-gate-model``: with several models, the one judged (None: every group)
    model: str | None = None
    #: ``--openenv-gate-vs``: the model the judged one must not be significantly worse than
    vs: str | None = None

    @property
    def active(self) -> bool:
        return (
            self.min_pass_rate is not None
            or self.min_mean_reward is not None
            or self.baseline is not None
            or self.vs is not None
        )

    @classmethod
    def from_settings(cls, settings: Settings, *, invocation_dir: Path) -> GateConfig:
        """Read the gate options; loading the baseline here makes a bad path a usage error."""
        gate = settings.gate
        check_best_of_needs_a_resume(settings)
        raw_baseline = gate.baseline
        baseline = load_baseline(raw_baseline, relative_to=invocation_dir) if raw_baseline else None
        metric = gate.metric
        if baseline is not None and settings.run.env and not gate.baseline_any_env:
            # the command line's env; a marker's is known at the end (``check_baseline``)
            problem = env_problem(baseline, raw_baseline or "", [settings.run.env])
            if problem:
                raise pytest.UsageError(problem)
        if baseline is not None and not gate_best_of_possible(settings):
            counted, why_not = baseline.counted_like(1)
            if counted is None:
                raise pytest.UsageError(
                    f"--openenv-baseline={raw_baseline!r}: {why_not} (compared with best-of "
                    "figures, one attempt per episode would show a drop that is not there). "
                    "Pass the output folder that holds its rows (results.jsonl, "
                    "failures.jsonl), or a baseline run without --openenv-resume-failed"
                )
        if baseline is not None and baseline.rate(metric) is None:
            raise pytest.UsageError(
                f"--openenv-baseline={raw_baseline!r}: {baseline.path} has no {metric} figure "
                f"to compare with --openenv-gate-metric={metric}; it has "
                f"{', '.join(sorted(baseline.rates))}"
            )
        check_gate_names(settings)
        if gate.vs is not None and gate.vs == gate.model:
            raise pytest.UsageError(
                f"--openenv-gate-vs={gate.vs!r} names the gated model itself "
                "(--openenv-gate-model): name the model it must not be worse than"
            )
        return cls(
            min_pass_rate=gate.min_pass_rate,
            min_mean_reward=gate.min_mean_reward,
            confidence=gate.confidence,
            metric=metric,
            baseline=baseline,
            baseline_any_env=gate.baseline_any_env,
            baseline_given=raw_baseline or "",
            pooled=gate.pooled,
            model=gate.model,
            vs=gate.vs,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "min_pass_rate": self.min_pass_rate,
            "min_mean_reward": self.min_mean_reward,
            "confidence": self.confidence,
            "metric": self.metric,
            "baseline": str(self.baseline.path) if self.baseline else None,
            "judges": "pooled" if self.pooled else "each group",
            "model": self.model,
            "vs": self.vs,
        }


def check_best_of_needs_a_resume(settings: Settings) -> None:
    """``--openenv-gate-best-of`` judges best-of-N figures, which only a resume makes:
    given alone it would say the gate accepts what no fresh run produces."""
    output = settings.output
    if output.gate_best_of and not output.resume:
        raise pytest.UsageError(
            "--openenv-gate-best-of judges figures that are best of N attempts per episode, "
            "which only a resume makes: --openenv-resume-failed (with --openenv-resume) "
            "plays failed episodes again, and --openenv-resume alone keeps a folder's rows "
            "played again before. This run starts afresh, one attempt per episode: add "
            "--openenv-resume --openenv-resume-failed, or leave --openenv-gate-best-of out"
        )


def gate_best_of_possible(settings: Settings) -> bool:
    """Whether the gate may judge best-of-N figures in this run (the only kind a
    best-of baseline without its rows can be compared with)."""
    return settings.output.resume and settings.output.gate_best_of


def check_gate_names(settings: Settings) -> None:
    """``--openenv-gate-model`` / ``--openenv-gate-vs`` name one of the models (or policies)
    the run names; a marker's ``models=[...]`` are known only at the end, where a name that
    played nothing fails its check instead."""
    from ..errors import EnvConfigError
    from ..policies.arms import arms_of

    gate = settings.gate
    named = [name for name in (gate.model, gate.vs) if name is not None]
    if not named or not (settings.run.named_policies or settings.llm.named_models):
        return
    policies = settings.run.named_policies or ("openai",)
    try:
        arms = [arm.name for arm in arms_of(policies, settings.llm.named_models)]
    except EnvConfigError:
        return  # refused with its own message (worker/run_policy.py)
    if len(arms) < 2:
        return  # one named: a test's marker may name the others
    for flag, name in (("gate-model", gate.model), ("gate-vs", gate.vs)):
        if name is not None and name not in arms:
            raise pytest.UsageError(
                f"--openenv-{flag}={name!r} is not one of the run's models or policies: "
                f"{', '.join(map(repr, arms))} (give the exact name, as listed)"
            )


@dataclass(frozen=True)
class Check:
    name: str
    #: the rule in words, e.g. "lower 95% Wilson bound of pass@1 >= 0.8"
    rule: str
    #: the point estimate
    value: float | None
    #: the figure compared with the threshold (the estimate, or its lower bound)
    compared: float | None
    threshold: float | None
    passed: bool
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)
    #: the group judged (``report/arms.ArmTally.label``); None: the run's only or pooled figures
    group: str | None = None
    #: nothing to compare it with (a group the baseline does not hold): reported, not judged
    not_compared: bool = False

    @property
    def title(self) -> str:
        return f"{self.name} [{self.group}]" if self.group else self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.name,
            **({"group": self.group} if self.group else {}),
            **({"not_compared": True} if self.not_compared else {}),
            "rule": self.rule,
            "value": self.value,
            "compared": self.compared,
            "threshold": self.threshold,
            "passed": self.passed,
            "detail": self.detail,
            **self.extra,
        }


@dataclass(frozen=True)
class Verdict:
    config: GateConfig
    checks: list[Check]
    #: failed or errored tests that are not episodes: they fail the run whatever the gate says
    other_failures: int = 0
    #: why the session stopped before every episode ran (-x, --maxfail), if it did: a gate
    #: over the episodes that happened to run first must not pass the run
    stopped_early: str | None = None
    #: why the episodes judged are a chosen subset of the test set (``--lf`` without
    #: ``--openenv-resume``), if they are: a gate over them cannot pass the run either
    subset: str | None = None

    @property
    def checks_passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def failed_groups(self) -> list[str]:
        """Each group a check failed for, in the order judged."""
        return list(dict.fromkeys(c.group for c in self.checks if c.group and not c.passed))

    @property
    def gate_passed(self) -> bool:
        """The gate's one verdict: its checks pass over a run that was not cut short
        (``-x`` stops at a failure, so the episodes that ran are a biased sample)."""
        return self.checks_passed and not self.stopped_early and not self.subset

    @property
    def passed(self) -> bool:
        return self.gate_passed and self.other_failures == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": "pass" if self.gate_passed else "fail",
            "passed": self.gate_passed,
            "checks_passed": self.checks_passed,
            "config": self.config.to_json(),
            "checks": [check.to_json() for check in self.checks],
            "failed_groups": self.failed_groups,
            "other_failures": self.other_failures,
            "stopped_early": self.stopped_early,
            "subset": self.subset,
            "policy": POLICY_TEXT,
        }

    def lines(self) -> list[str]:
        word = "PASSED" if self.gate_passed else "FAILED"
        lines = [f"gate: {word}"]
        for check in self.checks:
            mark = "n/a " if check.not_compared else "ok  " if check.passed else "FAIL"
            lines.append(f"  [{mark}] {check.title}: {check.rule} -- {check.detail}")
        failed = self.failed_groups
        if failed:
            lines.append(f"  failed group(s): {'; '.join(failed)}")
        lines.append(f"  rule: {POLICY_TEXT}")
        if self.other_failures:
            lines.append(
                f"  {self.other_failures} non-episode test(s) failed: the run fails regardless"
            )
        if self.stopped_early:
            lines.append(
                f"  the session stopped early ({self.stopped_early}): a gate over the "
                "episodes that ran first cannot pass the run"
                + (", although its checks pass on them" if self.checks_passed else "")
            )
        if self.subset:
            lines.append(f"  judged a subset: {self.subset}")
        return lines

    def markdown(self) -> str:
        rows = table(
            ("check", "rule", "figure", "threshold", "result"),
            [
                (
                    markdown_text(check.title),
                    markdown_text(check.rule),
                    markdown_text(check.detail),
                    number(check.threshold),
                    "n/a" if check.not_compared else "pass" if check.passed else "**FAIL**",
                )
                for check in self.checks
            ],
        )
        head = f"**Gate: {'PASSED' if self.gate_passed else 'FAILED'}**"
        tail = f"_{POLICY_TEXT}_"
        if self.failed_groups:
            tail += f" Failed group(s): {markdown_text('; '.join(self.failed_groups))}."
        if self.other_failures:
            tail += f" {self.other_failures} non-episode test(s) failed."
        if self.stopped_early:
            tail += f" The session stopped early ({self.stopped_early})."
        if self.subset:
            tail += f" Judged a subset: {self.subset}."
        return "\n".join([head, "", *rows, "", tail])


POLICY_TEXT = (
    "with a gate set, failing episodes alone do not fail the session; the gate decides "
    "(errored episodes count as not passed)"
)


def _level(confidence: float) -> str:
    return f"{100 * confidence:g}%"


@dataclass(frozen=True)
class RunFigures:
    """What the gate reads: episode counts, rewards of finished episodes, pass@k."""

    passed: int
    ran: int
    reward: RunningMean
    passk: PassAtK
    #: episodes the env judged (passed or failed); the rest of ``ran`` errored
    judged: int
    #: with several models: the one these figures are of (``--openenv-gate-model``)
    model: str | None = None
    #: its episodes by pair key, (passed, reward): for the paired tests
    outcomes: dict[Any, Any] | None = None
    #: ``--openenv-gate-vs``: that model's episodes by pair key (None: it played none)
    vs_outcomes: dict[Any, Any] | None = None

    #: what the run played (the baseline check names what differs from its baseline)
    envs: frozenset[str] = frozenset()
    policies: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()
    #: the group these figures are of (None: the run's only group, or pooled figures)
    group: str | None = None
    #: its (test function, env, model or policy): what a baseline's group is paired by
    group_key: tuple[str, str, str] | None = None
    #: the most attempts an episode took: above 1, the figures are best of that many
    #: (--openenv-resume-failed, judged with --openenv-gate-best-of)
    attempts: int = 1


def check_judged(figures: RunFigures) -> Check | None:
    """No episode judged (every one errored: endpoint down, no data) is never a pass.

    A threshold of 0, a mean reward over no finished episode or a baseline compared with
    a run of errors would otherwise pass a run that measured nothing.
    """
    if figures.judged:
        return None
    errored = figures.ran - figures.judged
    return Check(
        "episodes judged",
        "at least one episode judged (passed or failed); a run of errors measured nothing",
        None,
        float(figures.judged),
        1.0,
        False,
        f"no episode was judged: {errored} errored" if errored else "no episode ran",
        {"errored": errored},
    )


def pass_rate_sample(figures: RunFigures, metric: str) -> Rate | None:
    """The measured rate for a metric as (successes, trials); None when nothing ran."""
    if metric == "pass@1":
        return Rate(float(figures.passed), figures.ran) if figures.ran else None
    value = figures.passk.metric(metric)
    scored = figures.passk.problems_scored
    if value is None or scored == 0:
        return None
    return Rate(value * scored, scored)


def check_pass_rate(config: GateConfig, figures: RunFigures) -> Check:
    threshold = config.min_pass_rate
    assert threshold is not None
    metric = config.metric
    k = figures.passk.k
    name_of = metric.replace("k", str(k)) if metric != "pass@1" else metric
    sample = pass_rate_sample(figures, metric)
    if config.confidence is None:
        rule = f"{name_of} >= {threshold:g} (point estimate)"
    else:
        rule = f"lower {_level(config.confidence)} Wilson bound of {name_of} >= {threshold:g}"
    if sample is None:
        return Check(
            "pass rate",
            rule,
            None,
            None,
            threshold,
            False,
            f"no {name_of} figure: no episode ran"
            + ("" if metric == "pass@1" else f" {k} times for one seed"),
        )
    unit = "episodes" if metric == "pass@1" else "seeds"
    counts = (
        f"{int(sample.successes)}/{sample.trials}"
        if metric == "pass@1"
        else f"over {sample.trials} {unit}"
    )
    if config.confidence is None:
        compared = sample.value
        detail = f"{name_of} = {percent(sample.value)} ({counts})"
    else:
        compared = wilson_interval(sample.successes, sample.trials, config.confidence)[0]  # type: ignore[arg-type]
        detail = f"{name_of} = {percent(sample.value)} ({counts}), lower bound {percent(compared)}"
    return Check(
        "pass rate",
        rule,
        sample.value,
        compared,
        threshold,
        compared >= threshold,
        detail,
        {"metric": metric, "k": k, "trials": sample.trials},
    )


def check_mean_reward(config: GateConfig, figures: RunFigures) -> Check:
    threshold = config.min_mean_reward
    assert threshold is not None
    reward = figures.reward
    if config.confidence is None:
        rule = f"mean reward >= {threshold:g} (point estimate)"
    else:
        rule = f"lower {_level(config.confidence)} normal bound of mean reward >= {threshold:g}"
    mean = reward.mean
    if mean is None:
        return Check("mean reward", rule, None, None, threshold, False, "no episode finished")
    detail = f"mean reward = {mean:.4g} over {reward.count} finished episode(s)"
    compared = mean
    if config.confidence is not None:
        stderr = reward.stderr
        if stderr is None:
            return Check(
                "mean reward",
                rule,
                mean,
                None,
                threshold,
                False,
                detail + "; a confidence bound needs at least 2 finished episodes",
            )
        compared = mean - z_for(config.confidence) * stderr
        detail += f" (s.e. {stderr:.3g}), lower bound {compared:.4g}"
    return Check(
        "mean reward",
        rule,
        mean,
        compared,
        threshold,
        compared >= threshold,
        detail,
        {"finished": reward.count},
    )


def check_baseline(config: GateConfig, figures: RunFigures) -> Check:
    recorded = config.baseline
    assert recorded is not None
    metric = config.metric
    confidence = config.confidence or DEFAULT_CONFIDENCE
    if figures.group_key is not None:
        return check_baseline_group(config, figures)
    baseline, counted = recorded.counted_like(figures.attempts)
    if baseline is None:
        rule = f"no significant drop in {metric} vs {recorded.path}, counted alike"
        extra = attempts_json(figures, recorded)
        return Check("baseline", rule, None, None, None, False, counted, extra)
    paired, why_not = paired_baseline(baseline, figures, metric)
    test = "paired exact McNemar test" if paired is not None else "two-proportion z-test"
    rule = f"no significant drop in {metric} vs {baseline.path} (one-sided {test}, "
    rule += f"{_level(confidence)})"
    check = check_baseline_counted(config, figures, baseline, rule, paired, why_not)
    return with_counting(check, counted, recorded, figures) if counted else check


def attempts_json(figures: RunFigures, baseline: Baseline | None = None) -> dict[str, Any]:
    """What attempts the two sides' figures count (summary.json's check)."""
    return {
        "attempts": {
            "current": figures.attempts,
            **({"baseline": baseline.attempts} if baseline is not None else {}),
        }
    }


def with_counting(check: Check, counted: str, recorded: Baseline, figures: RunFigures) -> Check:
    """A baseline check that says which attempts it counted (a best-of baseline)."""
    counting = {
        **attempts_json(figures, recorded),
        "baseline_counted": "first attempts" if figures.attempts <= 1 else "best of N",
    }
    return replace(check, detail=f"{counted}: {check.detail}", extra={**check.extra, **counting})


def check_baseline_counted(
    config: GateConfig,
    figures: RunFigures,
    baseline: Baseline,
    rule: str,
    paired: dict[Any, tuple[Any, Any]] | None,
    why_not: str,
) -> Check:
    """The pooled baseline check, ``baseline`` counted as this run counts."""
    metric = config.metric
    confidence = config.confidence or DEFAULT_CONFIDENCE
    test = "paired exact McNemar test" if paired is not None else "two-proportion z-test"
    before = baseline.rate(metric)
    after = pass_rate_sample(figures, metric)
    if before is None:
        return Check(
            "baseline", rule, None, None, None, False, f"the baseline has no {metric} figure"
        )
    if after is None:
        return Check("baseline", rule, None, None, before.value, False, "no episode ran")
    differs = baseline.differences(figures.envs, figures.policies, figures.models)
    compared_across = "; ".join(f"{name} {was} -> {now}" for name, (was, now) in differs.items())
    if "env" in differs and not config.baseline_any_env:
        was, now = differs["env"]
        return Check(
            "baseline",
            rule,
            None,
            None,
            before.value,
            False,
            f"the baseline is a run of env {was}, this run played {now}: not comparable "
            "(--openenv-baseline-any-env compares them anyway)",
        )
    if paired is not None:
        return paired_baseline_check(rule, paired, figures, confidence)
    result: Comparison = compare(before, after, metric=metric, confidence=confidence)
    sign = "+" if result.change >= 0 else ""
    detail = (f"compared across {compared_across}: " if compared_across else "") + (
        f"{metric} {percent(result.before)} (n={result.before_trials}) -> {percent(result.after)} "
        f"(n={result.after_trials}), change {sign}{100 * result.change:.1f} points, "
        f"p = {result.p_value:.3g}"
        + (" (significant drop)" if result.significant_drop else "")
        + f"; unpaired test: {why_not}"
    )
    return Check(
        "baseline",
        rule,
        result.after,
        result.p_value,
        1.0 - confidence,
        not result.significant_drop,
        detail,
        {"comparison": result.to_json(), "test": test, "paired": False, "why": why_not},
    )


def check_baseline_group(config: GateConfig, figures: RunFigures) -> Check:
    """One group against the baseline's group of the same test, env and model or policy:
    paired on the same seeds when the baseline's rows are there; a group the baseline
    does not hold is reported as not compared, never pooled with others."""
    recorded = config.baseline
    assert recorded is not None and figures.group_key is not None
    baseline, counted = recorded.counted_like(figures.attempts)
    if baseline is None:
        rule = f"no significant drop in {config.metric} vs {recorded.path}, counted alike"
        return Check(
            "baseline",
            rule,
            None,
            None,
            None,
            False,
            counted,
            attempts_json(figures, recorded),
            group=figures.group,
        )
    check = check_baseline_group_counted(config, figures, baseline)
    return with_counting(check, counted, recorded, figures) if counted else check


def check_baseline_group_counted(
    config: GateConfig, figures: RunFigures, baseline: Baseline
) -> Check:
    """The group's baseline check, ``baseline`` counted as this run counts."""
    assert figures.group_key is not None
    metric = config.metric
    confidence = config.confidence or DEFAULT_CONFIDENCE
    test, env, arm = figures.group_key
    earlier = baseline.group(figures.group_key)
    outcomes = earlier.outcomes if earlier is not None else {}
    paired = None
    why_not = f"{metric} is a per-seed figure; only pass@1 is compared episode by episode"
    now = figures.outcomes or {}
    if metric == "pass@1" and now and outcomes:
        missing = [key for key in now if key not in outcomes]
        if missing:
            why_not = (
                f"{len(missing)} of this group's {len(now)} episodes have no earlier episode "
                "with the same test, seed and repeat"
            )
        else:
            paired = {key: (outcomes[key], now[key]) for key in now}
    elif metric == "pass@1":
        why_not = "the baseline folder holds no rows of this group to pair with"
    test_name = "paired exact McNemar test" if paired is not None else "two-proportion z-test"
    rule = f"no significant drop in {metric} vs the baseline's group of the same test, env "
    rule += f"and model/policy in {baseline.path} (one-sided {test_name}, {_level(confidence)})"
    keys = {"test": test, "env": env, "arm": arm}
    if earlier is None:
        return Check(
            "baseline",
            rule,
            None,
            None,
            None,
            True,
            f"not compared: {baseline.path} has no group of test {test}, env {env} and "
            f"{arm} (a new group; its other checks still judge it)",
            {"paired_with": None, **keys},
            group=figures.group,
            not_compared=True,
        )
    pairing = {"paired_with": earlier.label, **keys}
    if paired is not None:
        check = paired_baseline_check(rule, paired, figures, confidence)
        return Check(
            check.name,
            check.rule,
            check.value,
            check.compared,
            check.threshold,
            check.passed,
            f"against {earlier.label}: {check.detail}",
            {**check.extra, **pairing},
            group=figures.group,
        )
    before, after = earlier.rate(metric), pass_rate_sample(figures, metric)
    if before is None or after is None:
        missing_side = "the baseline's group" if before is None else "this group"
        return Check(
            "baseline",
            rule,
            None,
            None,
            None,
            False,
            f"against {earlier.label}: {missing_side} has no {metric} figure",
            pairing,
            group=figures.group,
        )
    result = compare(before, after, metric=metric, confidence=confidence)
    sign = "+" if result.change >= 0 else ""
    detail = (
        f"against {earlier.label}: {metric} {percent(result.before)} (n={result.before_trials})"
        f" -> {percent(result.after)} (n={result.after_trials}), change {sign}"
        f"{100 * result.change:.1f} points, p = {result.p_value:.3g}"
        + (" (significant drop)" if result.significant_drop else "")
        + f"; unpaired test: {why_not}"
    )
    return Check(
        "baseline",
        rule,
        result.after,
        result.p_value,
        1.0 - confidence,
        not result.significant_drop,
        detail,
        {"comparison": result.to_json(), "test": test_name, "paired": False, **pairing},
        group=figures.group,
    )


def paired_baseline(
    baseline: Baseline, figures: RunFigures, metric: str
) -> tuple[dict[Any, tuple[Any, Any]] | None, str]:
    """The (earlier, now) outcome of each episode of this run, when every one of them has
    an earlier episode with the same test, seed and repeat; else None and why not."""
    if metric != "pass@1":
        return None, f"{metric} is a per-seed figure; only pass@1 is compared episode by episode"
    now = figures.outcomes
    if not now:
        return None, "no episode of this run to pair"
    before = baseline.outcomes_for(figures.model)
    if not before:
        return None, (
            f"{baseline.path.parent} holds no rows of "
            f"{figures.model or 'the same policy'} (results.jsonl / failures.jsonl) to pair with"
        )
    missing = [key for key in now if key not in before]
    if missing:
        return None, (
            f"{len(missing)} of this run's {len(now)} episodes have no earlier episode with the "
            "same test, seed and repeat"
        )
    return {key: (before[key], now[key]) for key in now}, ""


def paired_baseline_check(
    rule: str, pairs: dict[Any, tuple[Any, Any]], figures: RunFigures, confidence: float
) -> Check:
    lost = sum(1 for (was, now) in pairs.values() if was[0] and not now[0])
    gained = sum(1 for (was, now) in pairs.values() if now[0] and not was[0])
    p_value = mcnemar_one_sided_worse(lost, gained)
    drop = p_value < 1.0 - confidence
    before = sum(1 for (was, _) in pairs.values() if was[0]) / len(pairs)
    after = sum(1 for (_, now) in pairs.values() if now[0]) / len(pairs)
    detail = (
        f"pass@1 {percent(before)} -> {percent(after)} on the same {len(pairs)} episodes: "
        f"{lost} newly failing, {gained} newly passing, p = {p_value:.3g}"
        + (" (significant drop)" if drop else "")
    )
    return Check(
        "baseline",
        rule,
        after,
        p_value,
        1.0 - confidence,
        not drop,
        detail,
        {
            "test": f"paired {MCNEMAR}, one-sided",
            "paired": True,
            "comparison": {
                "metric": "pass@1",
                "baseline": before,
                "current": after,
                "change": after - before,
                "paired_episodes": len(pairs),
                "newly_failing": lost,
                "newly_passing": gained,
                "p_value": p_value,
                "confidence": confidence,
                "significant_drop": drop,
            },
        },
    )


def check_vs(config: GateConfig, figures: RunFigures) -> Check:
    """The gated model is not significantly worse than ``--openenv-gate-vs`` on the
    episodes both played: one-sided exact McNemar test on pass/fail."""
    vs = config.vs
    assert vs is not None
    confidence = config.confidence or DEFAULT_CONFIDENCE
    gated = figures.model or "the gated model"
    rule = (
        f"{gated} not significantly worse than {vs} on the same episodes (one-sided "
        f"{MCNEMAR}, {_level(confidence)})"
    )
    mine, theirs = figures.outcomes or {}, figures.vs_outcomes
    if theirs is None:
        return Check("vs", rule, None, None, None, False, vs_absent(vs, figures))
    if figures.model == vs:
        return Check(
            "vs", rule, None, None, None, False, f"{vs} is the gated model itself: nothing compared"
        )
    unjudged = reference_unjudged(vs, theirs)
    if unjudged is not None:
        return Check("vs", rule, None, None, None, False, unjudged)
    common = [key for key in mine if key in theirs]
    if not common:
        return Check("vs", rule, None, None, None, False, f"no episode played by both {vs}")
    lost = sum(1 for key in common if theirs[key][0] and not mine[key][0])
    gained = sum(1 for key in common if mine[key][0] and not theirs[key][0])
    p_value = mcnemar_one_sided_worse(lost, gained)
    worse = p_value < 1.0 - confidence
    rate = sum(1 for key in common if mine[key][0]) / len(common)
    other = sum(1 for key in common if theirs[key][0]) / len(common)
    detail = (
        f"{gated} {percent(rate)} vs {vs} {percent(other)} on {len(common)} paired episodes: "
        f"{vs} alone passed {lost}, {gated} alone passed {gained}, p = {p_value:.3g}"
        + (" (significantly worse)" if worse else "")
    )
    return Check(
        "vs",
        rule,
        rate,
        p_value,
        1.0 - confidence,
        not worse,
        detail,
        {
            "model": figures.model,
            "vs": vs,
            "test": f"{MCNEMAR}, one-sided",
            "paired_episodes": len(common),
            "only_vs_passed": lost,
            "only_model_passed": gained,
        },
    )


def vs_absent(vs: str, figures: RunFigures) -> str:
    """Why there is nothing to pair with: the reference played none of the episodes
    these figures cover (one group's test and env, or the whole run when pooled)."""
    if figures.group_key is None:
        return f"{vs} played no episode in this run"
    test, env, _ = figures.group_key
    where = " on ".join(part for part in (short_test(test), env) if part)
    return (
        f"{vs} played no episode of {where}, the test and env of this group: nothing to "
        "pair with (each group is compared with the reference's episodes of the same test)"
    )


def reference_unjudged(vs: str, outcomes: dict[Any, Any]) -> str | None:
    """A reference whose every episode errored measured nothing: no model can be shown
    "not worse" than it (an error counts as not passed, so any model would look as good)."""
    if any(reward is not None for _, reward in outcomes.values()):
        return None
    return (
        f"{vs} judged no episode ({len(outcomes)} errored): a comparison with a reference "
        "that measured nothing cannot pass"
    )


def default_gated_note(settings: Settings) -> str | None:
    """Said at start when ``--openenv-gate-vs`` names the first model: the gates judge
    every other model against it."""
    gate = settings.gate
    if gate.vs is None or gate.model is not None:
        return None
    arms = command_line_arms(settings)
    if len(arms) < 2 or arms[0] != gate.vs:
        return None
    judged = ", ".join(repr(name) for name in arms if name != gate.vs)
    return (
        f"--openenv-gate-vs={gate.vs!r} is the first model listed: it is the reference, never "
        f"gated itself; they judge {judged} against it instead (--openenv-gate-model names one)"
    )


def command_line_arms(settings: Settings) -> list[str]:
    """The models (or policies) the command line names, in order; [] when none or refused."""
    from ..errors import EnvConfigError
    from ..policies.arms import arms_of

    if not (settings.run.named_policies or settings.llm.named_models):
        return []
    policies = settings.run.named_policies or ("openai",)
    try:
        return [arm.name for arm in arms_of(policies, settings.llm.named_models)]
    except EnvConfigError:
        return []  # refused with its own message (worker/run_policy.py)


def evaluate(
    config: GateConfig,
    figures: RunFigures | list[RunFigures],
    *,
    other_failures: int = 0,
    stopped_early: str | None = None,
    subset: str | None = None,
) -> Verdict:
    """Every check over ``figures``; a list is each group's figures, each judged alone."""
    judged = figures if isinstance(figures, list) else [figures]
    checks: list[Check] = []
    for one in judged:
        checks.extend(
            check if check.group or one.group is None else replace(check, group=one.group)
            for check in group_checks(config, one)
        )
    nothing_compared = check_baseline_compared_something(config, checks)
    if nothing_compared is not None:
        checks.append(nothing_compared)
    return Verdict(
        config=config,
        checks=checks,
        other_failures=other_failures,
        stopped_early=stopped_early,
        subset=subset,
    )


def check_baseline_compared_something(config: GateConfig, checks: list[Check]) -> Check | None:
    """A baseline none of whose groups is this run's compares nothing: the gate cannot pass.

    Each group the baseline lacks is reported and left to its other checks; but when that
    is every group, ``--openenv-baseline`` would pass a run it never compared with anything
    (a renamed test, another model's name, a baseline of a different suite).
    """
    baseline = config.baseline
    compared = [check for check in checks if check.name == "baseline"]
    if baseline is None or not compared or not all(check.not_compared for check in compared):
        return None
    ours = ", ".join(str(check.group) for check in compared)
    theirs = ", ".join(group.label for group in baseline.groups.values()) or "none"
    return Check(
        "baseline",
        "the baseline holds at least one of this run's groups (test, env and model/policy)",
        None,
        None,
        None,
        False,
        f"nothing compared: {baseline.path} has none of this run's groups ({ours}); its "
        f"groups: {theirs}. Point --openenv-baseline at a run of the same tests, envs and "
        "models or policies (a group is compared with the group of the same three names)",
        {"not_compared_groups": [check.group for check in compared]},
    )


def group_checks(config: GateConfig, figures: RunFigures) -> list[Check]:
    checks: list[Check] = []
    nothing_judged = check_judged(figures)
    if nothing_judged is not None:
        checks.append(nothing_judged)
    if config.min_pass_rate is not None:
        checks.append(check_pass_rate(config, figures))
    if config.min_mean_reward is not None:
        checks.append(check_mean_reward(config, figures))
    if config.baseline is not None:
        checks.append(check_baseline(config, figures))
    if config.vs is not None:
        checks.append(check_vs(config, figures))
    return checks
