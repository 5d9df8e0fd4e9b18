"""``python -m pytest_openenv rescore DIR --out DIR2``: decide a folder's saved episodes again.

Each played row of ``DIR`` (results.jsonl and failures.jsonl) gets a new verdict, with no
call to the policy: a judge model's by a rubric (``--openenv-judge``, the rubric of
``--openenv-judge-rubric``; by default the judge DIR recorded), and/or the env's verdict at
another threshold (``--openenv-min-reward``). ``DIR2`` gets the re-decided rows, split
again (results.jsonl: the rows that pass; failures.jsonl: the rest, the judge's errors
among them as errors), and every figure recomputed from them (summary.json, the card,
report.html), paired episode by episode with DIR's own outcomes (exact McNemar on the
pass/fail pairs, Wilcoxon on rewards, as ``--openenv-baseline`` pairs them).

The test body of DIR's run is not run again: a rescored row's test outcome is its new
verdict, as the bundled test (``assert episode.passed``) gives. A row that errored before
it finished has nothing to decide and is kept as it was.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..config.options import OPTION_BY_FLAG
from ..config.prices import PriceTable, cost_usd
from ..config.settings import Settings
from ..dataset.card import build_card
from ..dataset.folder import read_metadata
from ..dataset.identity import judge_identity
from ..dataset.jsonl import iter_records
from ..dataset.writer import CARD, FAILURES, METADATA, RESULTS, SUMMARY
from ..envs.verdict import BASIS_MIN_REWARD, PassRule, shown_reward
from ..episode.judged import judge_decision, judge_section
from ..episode.outcome import judge_figures
from ..episode.record import dumps_record, with_failure
from ..errors import JudgeFailed, RescoreError
from ..policies.base import Usage
from ..policies.judging import Judge, build_judge
from ..util.atomic import write_atomically
from ..util.format import interval, percent
from ..util.secrets import KnownSecrets
from .judge_tally import JudgeTally
from .ledger import Ledger, entry_of_row
from .page import write_report
from .paired import compare_pair
from .tally import RunClock, Tally

#: what the new folder's rows are compared with: the folder they came from
BASELINE_NAME, RESCORED_NAME = "before", "rescored"


@dataclass(frozen=True)
class SavedEpisode:
    """What a judge reads of a saved row (``policies/judging/judge.Judged``)."""

    episode_id: str
    seed: int
    env: str
    messages: list[dict[str, Any]]
    reward: float
    done: bool
    outcome: str

    @classmethod
    def of(cls, row: dict[str, Any]) -> SavedEpisode:
        return cls(
            episode_id=str(row.get("episode_id")),
            seed=int(row.get("seed") or 0),
            env=str(row.get("env") or ""),
            messages=list(row.get("messages") or []),
            reward=float(row.get("reward") or 0.0),
            done=bool(row.get("done")),
            outcome=str((row.get("verify_metrics") or {}).get("outcome") or ""),
        )


@dataclass
class Rescored:
    """The new folder's rows and figures, as they are made."""

    results: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    #: every rescored episode, the figures' one source (as a run's are)
    ledger: Ledger = field(default_factory=Ledger)
    #: episode id -> (passed, reward), before and after
    before: dict[str, tuple[bool, float | None]] = field(default_factory=dict)
    after: dict[str, tuple[bool, float | None]] = field(default_factory=dict)

    @property
    def tally(self) -> Tally:
        return Tally.of_ledger(self.ledger, RunClock(), replayed=True)

    @property
    def judging(self) -> JudgeTally:
        return JudgeTally.of_entries(self.ledger.counted())


def played_before(row: dict[str, Any]) -> bool:
    """The row finished its episode (a row that errored while being played did not), or
    its only error was the judge's."""
    failure = row.get("failure") or {}
    if failure.get("outcome") != "error":
        return True
    judged = row.get("judge")
    return isinstance(judged, dict) and judged.get("error") is not None


def env_verdict_of(row: dict[str, Any], min_reward: float | None) -> bool | None:
    """The env's own verdict on a saved row (None: the env stated none, it never ended the
    episode), at ``min_reward`` when given."""
    verify = row.get("verify_metrics") or {}
    judged = row.get("judge")
    if isinstance(judged, dict):
        stated = judged.get("env_passed")
        if stated is None:
            return None
    elif verify.get("outcome") == "unfinished":
        return None
    else:
        stated = bool(verify.get("verdict"))
    if min_reward is None:
        return bool(stated)
    return float(row.get("reward") or 0.0) >= min_reward


def decide_row(
    row: dict[str, Any], judge: Judge | None, min_reward: float | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``row`` decided again (a copy) and its judge's figures (None: no judge)."""
    out = copy.deepcopy(row)
    out.pop("failure", None)
    verify, extra = out.setdefault("verify_metrics", {}), out.setdefault("extra", {})
    env_passed = env_verdict_of(row, min_reward)
    saved = SavedEpisode.of(row)
    reward = float(row.get("reward") or 0.0)
    if min_reward is not None:
        verify["min_reward"] = float(min_reward)
    if judge is not None:
        env_outcome = (row.get("judge") or {}).get("env_outcome") or saved.outcome
        saved = dataclasses.replace(saved, outcome=str(env_outcome))
        try:
            verdict = judge.judge(saved)
        except JudgeFailed as exc:
            usage = exc.usage if isinstance(exc.usage, Usage) else None
            section = rescored_section(saved, judge, env_passed, error=str(exc), usage=usage)
            out["judge"] = section
            out["passed"] = False
            verify.update(outcome="error", verdict=False)
            extra["reason"] = str(exc)
            return with_failure(out, "error", str(exc)), section
        section = rescored_section(saved, judge, env_passed, verdict=verdict)
        out["judge"] = section
        decision = judge_decision(verdict, PassRule(), reward)
        passed, reason = decision.passed, decision.reason
        extra["judged_by"], extra["verdict_rule"] = decision.basis, decision.basis_text
        verify["outcome"] = decision.label
    else:
        section = None
        passed = bool(env_passed)
        if env_passed is None:
            reason = extra.get("reason") or "unfinished: the env did not end the episode"
        elif min_reward is not None:
            shown = shown_reward(reward, min_reward)
            reason = (
                None
                if passed
                else f"fail: reward {shown} is below the pass threshold "
                f"{min_reward:g} (--openenv-min-reward)"
            )
            extra["judged_by"] = BASIS_MIN_REWARD
            extra["verdict_rule"] = f"total reward >= {min_reward:g} (--openenv-min-reward)"
            verify["outcome"] = "pass" if passed else "fail"
        else:
            reason = None if passed else extra.get("reason")
    verify["verdict"] = passed
    extra["reason"] = reason
    out["passed"] = passed
    if not passed:
        with_failure(out, "failed", reason or "the verdict failed")
    return out, section


def rescored_section(
    saved: SavedEpisode,
    judge: Judge,
    env_passed: bool | None,
    *,
    verdict: Any = None,
    error: str | None = None,
    usage: Usage | None = None,
) -> dict[str, Any]:
    return judge_section(
        model=judge.model,
        rubric=judge.rubric,
        env_passed=env_passed,
        env_outcome=saved.outcome,
        verdict=verdict,
        error=error,
        usage=usage,
    )


def saved_rows(folder: Path) -> list[dict[str, Any]]:
    """DIR's rows, results.jsonl's then failures.jsonl's, the last row of an id kept."""
    by_id: dict[str, dict[str, Any]] = {}
    for name in (RESULTS, FAILURES):
        path = folder / name
        if path.exists():
            for record in iter_records(path):
                by_id[str(record.get("episode_id"))] = record
    return [by_id[key] for key in sorted(by_id)]


def count(
    rescored: Rescored,
    before: dict[str, Any],
    after: dict[str, Any],
    judged: dict[str, Any] | None = None,
) -> None:
    """``after`` in the new folder's ledger (``judged``: what its judge said this time; a
    row left as it was carries no new judge figures)."""
    failure = after.get("failure") or {}
    key = str(after.get("episode_id"))
    reward = float(after.get("reward") or 0.0)
    train = bool(after.get("passed")) and not failure
    entry = entry_of_row(after, failure_file=not train, played=True)
    entry.judge = judged
    rescored.ledger.record(entry)
    rescored.before[key] = (bool(before.get("passed")) and "failure" not in before, reward)
    rescored.after[key] = (train, reward)
    (rescored.results if train else rescored.failures).append(after)


def rescore_rows(
    rows: list[dict[str, Any]],
    judge: Judge | None,
    min_reward: float | None,
    *,
    workers: int = 4,
    prices: PriceTable | None = None,
) -> Rescored:
    """Every row decided again (the judge asked from ``workers`` threads at once);
    ``prices`` (``--openenv-prices``): the judge's spend is priced under its model."""
    rescored = Rescored()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        decided = list(
            pool.map(
                lambda row: decide_row(row, judge, min_reward) if played_before(row) else None,
                rows,
            )
        )
    for row, made in zip(rows, decided, strict=True):
        if made is None:  # errored while it was played: nothing to decide, kept as it was
            count(rescored, row, copy.deepcopy(row))
            continue
        after, section = made
        if section is not None and prices is not None:
            section["cost_usd"] = cost_usd(
                prices, section["model"], section["prompt_tokens"], section["completion_tokens"]
            )
        count(rescored, row, after, judge_figures(section))
    return rescored


def summary_of(
    rescored: Rescored,
    source: Path,
    settings: Settings,
    *,
    min_pass_rate: float | None,
) -> dict[str, Any]:
    """summary.json of the new folder: its figures, the judge's, the pairing with DIR."""
    confidence = 0.95
    figures = rescored.tally.figures(confidence)
    figures.update(cost_usd=None, unpriced_episodes=0, pooled=False, group_count=1)
    paired = compare_pair(RESCORED_NAME, BASELINE_NAME, rescored.after, rescored.before, confidence)
    gate = None
    if min_pass_rate is not None:
        rate = figures["pass_rate"]
        passed = rate is not None and rate >= min_pass_rate
        gate = {
            "passed": passed,
            "checks": [
                {
                    "name": "min_pass_rate",
                    "threshold": min_pass_rate,
                    "value": rate,
                    "passed": passed,
                }
            ],
        }
    return {
        "figures": figures,
        "rescored_from": str(source),
        "baseline": {"source": str(source), "paired": paired},
        "gate": gate,
        **(
            {
                "judge": rescored.judging.to_json(
                    confidence, priced=settings.budget.prices is not None
                )
            }
            if rescored.judging.asked
            else {}
        ),
        "exit_status": exit_status(rescored, gate),
        "output": None,
    }


def exit_status(rescored: Rescored, gate: dict[str, Any] | None) -> int:
    """As a run's: the gate decides when set; without one, failed or errored episodes fail."""
    if gate is not None:
        return 0 if gate["passed"] else 1
    tally = rescored.tally
    return 1 if tally.failed or tally.errored else 0


def metadata_of(
    earlier: dict[str, Any], source: Path, judge: Judge | None, min_reward: float | None
) -> dict[str, Any]:
    metadata = copy.deepcopy(earlier)
    identity = metadata.setdefault("identity", {})
    if judge is not None:
        identity["judge"] = judge_identity(judge.identity())
        metadata["judge"] = judge.identity()
    if min_reward is not None:
        identity["min_reward"] = min_reward
        metadata.setdefault("settings", {})["min_reward"] = min_reward
    metadata["rescored_from"] = str(source)
    return metadata


def write_folder(
    folder: Path,
    rescored: Rescored,
    summary: dict[str, Any],
    metadata: dict[str, Any],
    secrets: KnownSecrets,
) -> None:
    """The new folder's files, each written whole (a reader never sees a torn one)."""
    folder.mkdir(parents=True, exist_ok=True)
    summary["output"] = str(folder)

    def put(name: str, text: str) -> None:
        write_atomically(folder / name, secrets.scrub(text).encode("utf-8"))

    for name, rows in ((RESULTS, rescored.results), (FAILURES, rescored.failures)):
        put(name, "".join(dumps_record(row) + "\n" for row in rows))
    put(METADATA, json.dumps(metadata, indent=2, sort_keys=True, default=str) + "\n")
    put(SUMMARY, json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    counts = {RESULTS: len(rescored.results), FAILURES: len(rescored.failures)}
    put(CARD, build_card(summary, metadata, rows=counts))
    write_report(folder, secrets=secrets)


# -- the command --------------------------------------------------------------------------
#: the run options ``rescore`` takes, as ``--openenv-<flag>``
OPTION_FLAGS = (
    "judge",
    "judge-endpoint",
    "judge-rubric",
    "min-reward",
    "min-pass-rate",
    "cache",
    "replay",
    "request-timeout",
    "max-retries",
    "prices",
)


def add_arguments(parser: Any) -> None:
    """``rescore``'s arguments on its ``argparse`` subparser."""
    parser.add_argument("folder", metavar="DIR", type=Path, help="output folder of a run")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR2", help="the new output folder"
    )
    for flag in OPTION_FLAGS:
        option = OPTION_BY_FLAG[flag]
        if option.is_flag:
            parser.add_argument(f"--openenv-{flag}", action="store_true", help=option.help)
        else:
            parser.add_argument(
                f"--openenv-{flag}", metavar=option.metavar, default=None, help=option.help
            )


def settings_of(args: Any, earlier: dict[str, Any]) -> Settings:
    """The options given, over what DIR's run recorded (its judge, its rubric)."""
    values: dict[str, Any] = {}
    for flag in OPTION_FLAGS:
        raw = getattr(args, "openenv_" + flag.replace("-", "_"))
        if raw in (None, False):
            continue
        try:
            values[flag] = OPTION_BY_FLAG[flag].convert(flag, raw)
        except pytest.UsageError as exc:
            raise RescoreError(str(exc)) from None
    recorded = earlier.get("judge") if isinstance(earlier.get("judge"), dict) else {}
    # DIR's judge judges again unless only a threshold was given (then the env's verdict
    # at that threshold decides)
    threshold_only = "min-reward" in values and not {"judge", "judge-rubric"} & set(values)
    if recorded.get("model") and not threshold_only:
        values.setdefault("judge", recorded["model"])
        if recorded.get("endpoint"):
            values.setdefault("judge-endpoint", recorded["endpoint"])
        if recorded.get("rubric"):
            values.setdefault("judge-rubric", recorded["rubric"])
    policy = (earlier.get("settings") or {}).get("policy")
    if policy:
        values["policy"] = (policy,)
    return Settings.from_values(values)


def run(args: Any) -> int:
    """``python -m pytest_openenv rescore``: 0, 1 (the gate, or failed / errored episodes),
    2 (bad arguments or folder, printed)."""
    source, target = args.folder.resolve(), args.out.resolve()
    try:
        if not (source / RESULTS).exists() and not (source / FAILURES).exists():
            raise RescoreError(f"{source} holds no {RESULTS} or {FAILURES}: not an output folder")
        if target == source:
            raise RescoreError("--out must be another folder than DIR (DIR is the baseline)")
        if target.exists() and any(target.iterdir()):
            raise RescoreError(f"--out {target} exists and is not empty; name a new folder")
        earlier = read_metadata(source) or {}
        settings = settings_of(args, earlier)
        if settings.judge.model is None and settings.run.min_reward is None:
            raise RescoreError(
                "nothing to decide by: give --openenv-judge MODEL (with --openenv-judge-rubric"
                " TEXT or @FILE) or --openenv-min-reward R; DIR recorded no judge"
            )
        judge = build_judge(settings)
    except (RescoreError, pytest.UsageError) as exc:
        print(f"rescore: {exc}", file=sys.stderr)
        return 2
    secrets = KnownSecrets.from_settings(settings)
    try:
        rescored = rescore_rows(
            saved_rows(source), judge, settings.run.min_reward, prices=settings.budget.prices
        )
    finally:
        if judge is not None:
            judge.close()
    summary = summary_of(rescored, source, settings, min_pass_rate=settings.gate.min_pass_rate)
    metadata = metadata_of(earlier, source, judge, settings.run.min_reward)
    write_folder(target, rescored, summary, metadata, secrets)
    for line in summary_lines(summary, rescored):
        print(secrets.scrub(line))
    return int(summary["exit_status"])


def summary_lines(summary: dict[str, Any], rescored: Rescored) -> list[str]:
    """What the command prints: the figures, the judge's, the pairing with DIR."""
    figures = summary["figures"]
    low, high = figures["pass_rate_ci95"]
    paired = summary["baseline"]["paired"]
    lines = [
        f"rescored {figures['ran']} episode(s) of {summary['rescored_from']}: "
        f"{figures['passed']} passed, {figures['failed']} failed, {figures['errored']} errored",
        f"pass rate: {percent(figures['pass_rate'])} (95% Wilson CI {interval(low, high)})",
        *rescored.judging.lines(),
        f"against {summary['rescored_from']} on the same episodes: {paired['verdict']} "
        f"(McNemar p={paired['pass']['p_value']:.3g}; only before passed: "
        f"{paired['pass']['only_b_passed']}, only rescored passed: "
        f"{paired['pass']['only_a_passed']})",
        f"no policy call; output: {summary['output']}",
    ]
    if summary.get("gate") is not None:
        lines.append(f"gate: {'passed' if summary['gate']['passed'] else 'FAILED'}")
    return lines
