"""Compare this run with an earlier one: fail only on a statistically significant drop.

``--openenv-baseline PATH`` names an earlier ``summary.json`` or the output folder
holding one. It is read once at configure time (controller), so pointing it at the
folder this run will overwrite works: the baseline is the previous run's summary.

The test is one-sided: H0 "the pass rate did not drop", rejected when a drop this
large would happen by chance less than 1 - C of the time (``--openenv-gate-confidence``,
default 0.95). When the earlier folder holds its rows (``results.jsonl``,
``failures.jsonl``) and every episode of this run has an earlier one with the same
test, seed and repeat, the test is paired: the exact McNemar test on the episodes
that changed (``report/paired.py``). Otherwise (other seeds, only a summary.json) it
is the two-proportion z-test of two unrelated samples. The check says which it used.

An earlier run finished with ``--openenv-resume-failed`` played its failed episodes
again: its figures are best of up to N attempts (``figures.attempts``), and each row
played again says which attempt it is (``extra.attempt``). Such a baseline is read both
ways: as recorded, and by each episode's first attempt (a row of attempt 2 or later was
played again because its first attempt failed). A run of one attempt per episode is
compared with the first attempts, episode by episode; a best-of run
(``--openenv-gate-best-of``) with the best-of figures (``Baseline.counted_like``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest

from ..dataset.jsonl import read_bounded
from ..dataset.writer import SUMMARY
from ..errors import NotARegularFile
from ..util.jsonlimits import MAX_JSON_BYTES

DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Rate:
    """A pass rate as (successes, trials); successes may be fractional for pass@k."""

    successes: float
    trials: int

    @property
    def value(self) -> float:
        return self.successes / self.trials


@dataclass(frozen=True)
class GroupBaseline:
    """One group of the baseline run: (test function, env, model or policy)."""

    key: tuple[str, str, str]
    rates: dict[str, Rate]
    #: its episodes by (test, seed, repeat): (passed, reward); empty without its rows
    outcomes: dict[Any, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        from .arms import short_test

        test, env, arm = self.key
        return " · ".join(part for part in (short_test(test), env, arm) if part)

    def rate(self, metric: str) -> Rate | None:
        return self.rates.get(metric)


@dataclass(frozen=True)
class Baseline:
    path: Path
    rates: dict[str, Rate]
    #: what the baseline run played (empty: its summary does not say)
    envs: tuple[str, ...] = ()
    policies: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    #: each episode of the earlier run by model (or policy), then by (test, seed, repeat):
    #: (passed, reward), read from its results.jsonl and failures.jsonl; empty without them
    outcomes: dict[str, dict[Any, Any]] = field(default_factory=dict)
    #: each group of the earlier run by (test function, env, model or policy)
    groups: dict[tuple[str, str, str], GroupBaseline] = field(default_factory=dict)
    #: the most attempts any of its episodes took: above 1 when --openenv-resume-failed
    #: played failed episodes again, and its figures are best of that many
    attempts: int = 1
    #: a best-of run counted by each episode's first attempt (from its rows); None when
    #: it is one attempt per episode already, or its rows are not there to say
    first_attempts: Baseline | None = None

    def rate(self, metric: str) -> Rate | None:
        return self.rates.get(metric)

    def counted_like(self, attempts_now: int) -> tuple[Baseline | None, str]:
        """This baseline counted as the run compared with it counts its episodes, and how
        it was counted; or None and why the two cannot be compared.

        A best-of-N rate is no pass@1: a run of single attempts is compared with the
        baseline's first attempts, a best-of run only with a best-of baseline.
        """
        if attempts_now <= 1:
            if self.attempts <= 1:
                return self, ""
            if self.first_attempts is not None:
                return self.first_attempts, (
                    f"counting the baseline's first attempts (its figures are best of up to "
                    f"{self.attempts}), as this run played one attempt per episode"
                )
            return None, (
                f"{self.path}'s figures are best of up to {self.attempts} attempts per "
                "episode and no rows beside it say which attempt passed; this run played one "
                "attempt per episode: not comparable"
            )
        if self.attempts <= 1:
            return None, (
                f"this run's figures are best of up to {attempts_now} attempts "
                f"(--openenv-gate-best-of), {self.path}'s one attempt per episode: a best-of "
                "rate is no pass@1, not comparable"
            )
        return self, (
            f"best of up to {self.attempts} attempts in the baseline, best of up to "
            f"{attempts_now} in this run"
        )

    def group(self, key: tuple[str, str, str]) -> GroupBaseline | None:
        return self.groups.get(key)

    def differences(
        self, envs: Iterable[str], policies: Iterable[str], models: Iterable[str]
    ) -> dict[str, tuple[str, str]]:
        """What this run played otherwise than the baseline: name -> (baseline, this run).

        Only where both sides say (a summary of an older version may not name them); the
        model where both name their policies (a scripted policy has no model).
        """
        policies = tuple(sorted(policies))
        named = {
            "env": (self.envs, tuple(sorted(envs))),
            "policy": (self.policies, policies),
            "model": (self.models, tuple(sorted(models))),
        }
        found = {}
        for name, (before, now) in named.items():
            known = (self.policies and policies) if name == "model" else (before and now)
            if known and before != now:
                found[name] = (_names(before), _names(now))
        return found

    def outcomes_for(self, arm: str | None) -> dict[Any, Any] | None:
        """The earlier episodes to pair with ``arm``'s: its own, or the only arm's."""
        if arm is not None and arm in self.outcomes:
            return self.outcomes[arm]
        if len(self.outcomes) == 1:
            return next(iter(self.outcomes.values()))
        return None


def _names(values: Iterable[str]) -> str:
    return ", ".join(sorted(values)) or "none"


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(sorted(str(item) for item in value if isinstance(item, str) and item))


@dataclass(frozen=True)
class EarlierRow:
    """One episode of an earlier output folder, as the comparisons read it."""

    arm: str
    #: (test function, env, arm)
    group: tuple[str, str, str]
    #: what pairs it with this run's episode (``report/arms.pair_key``)
    key: Any
    #: its node id: the seed it samples, for pass@k (``report/passk.problem_key``)
    test: str
    #: (passed, reward); reward None when it errored
    outcome: tuple[bool, float | None]
    #: which attempt at the episode the row is (``extra.attempt``; 1 when not said)
    attempt: int = 1

    @property
    def first_outcome(self) -> tuple[bool, float | None]:
        """Its first attempt's outcome: a row played again was so because that one failed
        (its reward is not kept)."""
        return self.outcome if self.attempt <= 1 else (False, None)


def read_rows(folder: Path) -> list[EarlierRow]:
    """Each episode of an earlier output folder, the last row of an episode winning;
    [] when its rows cannot be read (the unpaired test still works)."""
    from ..dataset.jsonl import iter_records
    from ..policies.arms import arm_name
    from .arms import pair_key

    found: dict[Any, EarlierRow] = {}
    for name in ("failures.jsonl", "results.jsonl"):  # a pass wins over a stale failure
        try:
            for row in iter_records(folder / name):
                extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
                test = str(row.get("test", ""))
                key = pair_key(test, row.get("seed"), extra.get("repeat"))
                arm = arm_name(str(row.get("policy") or ""), row.get("model"))
                if key is None or not arm:
                    continue
                failure = row.get("failure") if isinstance(row.get("failure"), dict) else {}
                errored = failure.get("outcome") == "error"
                reward = row.get("reward")
                reward = float(reward) if isinstance(reward, (int, float)) else None
                attempt = extra.get("attempt", 1)
                attempt = attempt if _count(attempt) and attempt >= 1 else 1
                found[(str(arm), str(row.get("env") or ""), key)] = EarlierRow(
                    arm=str(arm),
                    group=(key[0], str(row.get("env") or ""), str(arm)),
                    key=key,
                    test=test,
                    outcome=(bool(row.get("passed")), None if errored else reward),
                    attempt=attempt,
                )
        except NotARegularFile:
            raise  # a device or FIFO in place of the rows: refused (``load_baseline``)
        except (OSError, ValueError):
            return []
    return list(found.values())


def read_outcomes(
    rows: list[EarlierRow],
    by_group: dict[tuple[str, str, str], dict[Any, Any]] | None = None,
    *,
    first: bool = False,
) -> dict[str, dict[Any, Any]]:
    """The rows' outcomes by arm and pair key (``first``: each one's first attempt);
    ``by_group`` is filled with the same by group (test function, env, arm)."""
    outcomes: dict[str, dict[Any, Any]] = {}
    for row in rows:
        outcome = row.first_outcome if first else row.outcome
        outcomes.setdefault(row.arm, {})[row.key] = outcome
        if by_group is not None:
            by_group.setdefault(row.group, {})[row.key] = outcome
    return outcomes


def first_attempt_rates(rows: list[EarlierRow], k: int | None) -> dict[str, Rate]:
    """pass@1 (and pass@k, pass^k with the run's k) of the rows' first attempts."""
    from .passk import PassKTally

    if not rows:
        return {}
    passes = sum(1 for row in rows if row.first_outcome[0])
    rates = {"pass@1": Rate(float(passes), len(rows))}
    if k is None:
        return rates
    tally = PassKTally(k)
    for row in rows:
        tally.add(row.test, row.first_outcome[0])
    result = tally.result()
    for metric in ("pass@k", "pass^k"):
        value = result.metric(metric)
        if result.problems_scored and value is not None:
            rates[metric] = Rate(value * result.problems_scored, result.problems_scored)
    return rates


def first_attempts_of(baseline: Baseline, rows: list[EarlierRow], k: int | None) -> Baseline:
    """The same run counted by each episode's first attempt, from its rows."""
    by_group: dict[tuple[str, str, str], dict[Any, Any]] = {}
    outcomes = read_outcomes(rows, by_group, first=True)
    groups = {
        key: GroupBaseline(
            key,
            first_attempt_rates([row for row in rows if row.group == key], k),
            by_group.get(key, {}),
        )
        for key in {*baseline.groups, *by_group}
    }
    return replace(
        baseline,
        rates=first_attempt_rates(rows, k),
        outcomes=outcomes,
        groups=groups,
        attempts=1,
        first_attempts=None,
    )


def read_groups(
    payload: dict[str, Any], rows: dict[tuple[str, str, str], dict[Any, Any]]
) -> dict[tuple[str, str, str], GroupBaseline]:
    """The baseline's groups: from its summary's ``groups`` (rates as it counted them),
    else from its rows (an older summary without groups)."""
    found: dict[tuple[str, str, str], GroupBaseline] = {}
    listed = payload.get("groups")
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, dict):
            continue
        arm = entry.get("name") or entry.get("model") or entry.get("policy")
        passed, ran = entry.get("passed"), entry.get("ran")
        if not (isinstance(entry.get("test"), str) and arm and _count(passed) and _count(ran)):
            continue
        key = (str(entry["test"]), str(entry.get("env") or ""), str(arm))
        rates = {"pass@1": Rate(float(passed), int(ran))} if ran else {}
        passk = entry.get("passk")
        if isinstance(passk, dict) and _count(passk.get("problems_scored")):
            scored = int(passk["problems_scored"])
            for metric in ("pass@k", "pass^k"):
                value = passk.get(metric)
                if scored > 0 and isinstance(value, (int, float)):
                    rates[metric] = Rate(float(value) * scored, scored)
        found[key] = GroupBaseline(key, rates, rows.get(key, {}))
    if not isinstance(listed, list):
        for key, outcomes in rows.items():
            passes = sum(1 for passed, _ in outcomes.values() if passed)
            found[key] = GroupBaseline(
                key, {"pass@1": Rate(float(passes), len(outcomes))}, outcomes
            )
    return found


def _usage(path: str, why: str) -> pytest.UsageError:
    return pytest.UsageError(
        f"--openenv-baseline={path!r} is not usable: {why}; pass an earlier run's summary.json "
        "or the output folder that holds it"
    )


def load_baseline(raw: str, *, relative_to: Path) -> Baseline:
    """Read an earlier summary; any problem is a usage error naming the option."""
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = relative_to / path
    try:
        if path.is_dir():  # inside: a name too long for the file system raises here
            path = path / SUMMARY
        # a summary.json that is /dev/zero would be read forever
        payload = json.loads(read_bounded(path, MAX_JSON_BYTES).decode("utf-8"))
        rows = read_rows(path.parent)
    except FileNotFoundError:
        raise _usage(raw, f"{path} does not exist") from None
    except NotARegularFile as exc:
        raise _usage(raw, f"{exc.strerror}: only a regular file is read") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _usage(raw, f"cannot read {path} ({exc})") from None
    except ValueError as exc:
        raise _usage(raw, f"{path} is not valid JSON ({exc})") from None
    figures = payload.get("figures") if isinstance(payload, dict) else None
    if not isinstance(figures, dict):
        raise _usage(raw, f"{path} has no 'figures' object (is it a pytest-openenv summary?)")
    passed, ran = figures.get("passed"), figures.get("ran")
    if not (_count(passed) and _count(ran)) or passed > ran:
        raise _usage(raw, f"{path} has no valid figures.passed / figures.ran counts")
    if ran == 0:
        raise _usage(raw, f"{path} records no episode that ran, so there is nothing to compare")
    rates = {"pass@1": Rate(float(passed), int(ran))}
    passk = payload.get("passk")
    if isinstance(passk, dict) and _count(passk.get("problems_scored")):
        scored = int(passk["problems_scored"])
        for metric in ("pass@k", "pass^k"):
            value = passk.get(metric)
            if scored > 0 and isinstance(value, (int, float)):
                rates[metric] = Rate(float(value) * scored, scored)
    by_group: dict[tuple[str, str, str], dict[Any, Any]] = {}
    outcomes = read_outcomes(rows, by_group)
    recorded = figures.get("attempts")
    attempts = max([recorded if _count(recorded) else 1, *(row.attempt for row in rows)])
    baseline = Baseline(
        path=path,
        rates=rates,
        envs=_strings(figures.get("envs")),
        policies=_strings(figures.get("policies")),
        models=_strings(figures.get("models")),
        outcomes=outcomes,
        groups=read_groups(payload, by_group),
        attempts=attempts,
    )
    if attempts <= 1 or not rows:
        return baseline
    k = passk.get("k") if isinstance(passk, dict) else None
    return replace(
        baseline,
        first_attempts=first_attempts_of(baseline, rows, k if _count(k) and k >= 1 else None),
    )


def env_problem(baseline: Baseline, raw: str, envs: Iterable[str]) -> str | None:
    """Why a baseline of another env is no measure of this run (``--openenv-baseline-any-env``
    compares it anyway), or None."""
    differs = baseline.differences(envs, baseline.policies, baseline.models).get("env")
    if differs is None:
        return None
    before, now = differs
    return (
        f"--openenv-baseline={raw!r}: {baseline.path} is a run of env {before}, this run "
        f"plays {now}: a pass rate of other tasks says nothing of a drop in these. Pass a "
        f"baseline of {now}, or --openenv-baseline-any-env to compare them anyway"
    )


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class Comparison:
    metric: str
    before: float
    after: float
    before_trials: int
    after_trials: int
    z: float | None
    p_value: float
    confidence: float

    @property
    def change(self) -> float:
        return self.after - self.before

    @property
    def significant_drop(self) -> bool:
        return self.p_value < 1.0 - self.confidence

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "baseline": self.before,
            "current": self.after,
            "change": self.change,
            "baseline_n": self.before_trials,
            "current_n": self.after_trials,
            "z": self.z,
            "p_value": self.p_value,
            "confidence": self.confidence,
            "significant_drop": self.significant_drop,
        }


def compare(before: Rate, after: Rate, *, metric: str, confidence: float) -> Comparison:
    """One-sided two-proportion z-test (pooled variance) for a drop from ``before``."""
    if before.trials <= 0 or after.trials <= 0:
        raise ValueError("both rates need at least one trial")
    pooled = (before.successes + after.successes) / (before.trials + after.trials)
    variance = pooled * (1.0 - pooled) * (1.0 / before.trials + 1.0 / after.trials)
    if variance <= 0.0:
        # Both runs all-pass or both all-fail: identical, nothing dropped.
        z, p_value = None, 1.0
    else:
        z = (after.value - before.value) / math.sqrt(variance)
        p_value = NormalDist().cdf(z)
    return Comparison(
        metric=metric,
        before=before.value,
        after=after.value,
        before_trials=before.trials,
        after_trials=after.trials,
        z=z,
        p_value=p_value,
        confidence=confidence,
    )
