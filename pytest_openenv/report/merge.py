"""``python -m pytest_openenv merge OUT DIR...``: the shards of one run made one output folder.

The shards are checked first (``dataset/shards.py``): one run, none twice, none missing
unless the merge is partial. Then one pass over their rows in episode-id order writes
results.jsonl and failures.jsonl and feeds the counts (``report/recount.py``); the summary,
the gate's verdict and its exit code come from those counts by the same functions a run on
one machine uses, and the card, report.html, preferences.jsonl and inspect logs from the
finished folder by the run's own writers. Everything is written into a fresh folder beside
OUT and moved into place at the end: a refused merge leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..dataset.card import render_card
from ..dataset.jsonl import parse_line
from ..dataset.shards import ShardSet, check_shards, merged_lines, read_shard
from ..dataset.writer import CARD, FAILURES, METADATA, RESULTS, SUMMARY, DatasetWriter
from ..errors import ShardsRefused
from ..util.secrets import KnownSecrets
from .baseline import DEFAULT_CONFIDENCE, load_baseline
from .gates import GateConfig, Verdict
from .judge import RunCounts, best_of_unjudged, judge
from .recount import RowCounts
from .row_facts import fact_of, row_facts

#: figures no row holds, added up over the shards (skips, reruns, a resume's own counts)
FROM_SHARD_SUMMARIES = ("skipped", "rerun", "passed_on_rerun", "resumed", "earlier_failures")


@dataclass
class MergeResult:
    folder: Path
    summary: dict[str, Any]
    verdict: Verdict | None
    exit_status: int
    notes: list[str]


def gate_of(metadata: dict[str, Any]) -> GateConfig:
    """The run's gate as its metadata.json records it (the baseline read again)."""
    evaluation = metadata.get("evaluation") if isinstance(metadata.get("evaluation"), dict) else {}
    baseline_path = evaluation.get("baseline")
    baseline = load_baseline(str(baseline_path), relative_to=Path.cwd()) if baseline_path else None
    return GateConfig(
        min_pass_rate=evaluation.get("min_pass_rate"),
        min_mean_reward=evaluation.get("min_mean_reward"),
        confidence=evaluation.get("confidence"),
        metric=str(evaluation.get("metric") or "pass@1"),
        baseline=baseline,
        baseline_any_env=bool(evaluation.get("baseline_any_env")),
        baseline_given=str(baseline_path or ""),
        pooled=evaluation.get("judges") == "pooled",
        model=evaluation.get("model"),
        vs=evaluation.get("vs"),
    )


def declared_arms(settings: dict[str, Any]) -> list[str]:
    """The models (or policies) the run named, in order: the order of its figures (as
    ``controller/accounts.run_arm_names`` reads them from the options)."""
    from ..errors import EnvConfigError
    from ..policies.arms import arms_of

    llm = settings.get("llm") if isinstance(settings.get("llm"), dict) else {}
    policies = settings.get("policies") or ([settings["policy"]] if settings.get("policy") else [])
    models = llm.get("models") or ([llm["model"]] if llm.get("model") else [])
    try:
        return [arm.name for arm in arms_of(tuple(policies) or ("scripted",), tuple(models))]
    except EnvConfigError:
        return []


def pairs_needed(shards: ShardSet, gate: GateConfig) -> bool:
    """Whether any figure pairs episodes: several models in one test, gate-vs, a baseline."""
    settings = shards.shards[0].metadata.get("settings") or {}
    if gate.vs or gate.baseline is not None or len(declared_arms(settings)) > 1:
        return True
    names: dict[tuple[str, str], set[str]] = {}
    for shard in shards.shards:
        for group in shard.summary.get("groups") or ():
            key = (str(group.get("test")), str(group.get("env")))
            names.setdefault(key, set()).add(str(group.get("name")))
    return any(len(found) > 1 for found in names.values())


def check_out(out: Path, shards: ShardSet) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ShardsRefused(
            f"OUT {out} already exists and is not an empty folder: name a new folder (the "
            "merge never writes over files)"
        )
    for shard in shards.shards:
        if out.resolve() == shard.path.resolve():
            raise ShardsRefused(f"OUT {out} is one of the shard folders: name a new folder")


def merge_shards(
    out: Path,
    folders: list[Path],
    *,
    allow_partial: bool = False,
    say: Callable[[str], None] = print,
) -> MergeResult:
    """Check the shards, write the merged folder at ``out``; ``ShardsRefused`` writes nothing."""
    shards = check_shards([read_shard(path) for path in folders], allow_partial=allow_partial)
    check_out(out, shards)
    first = shards.shards[0].metadata
    gate = gate_of(first)
    secrets = KnownSecrets.collect()
    work = out.parent / f".{out.name}.merge-{os.getpid()}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    try:
        result = _write(work, out, shards, gate, secrets)
        if out.exists():
            out.rmdir()  # checked empty above
        os.replace(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    result.folder = out
    for note in result.notes:
        say(note)
    return result


def _write(
    work: Path, out: Path, shards: ShardSet, gate: GateConfig, secrets: KnownSecrets
) -> MergeResult:
    metadata_first = shards.shards[0].metadata
    identity = shards.identity
    settings = (
        metadata_first.get("settings") if isinstance(metadata_first.get("settings"), dict) else {}
    )
    budget = settings.get("budget") if isinstance(settings.get("budget"), dict) else {}
    llm = settings.get("llm") if isinstance(settings.get("llm"), dict) else {}
    counts = RowCounts.start(
        int(identity.get("repeats") or 1),
        declared_arms(settings),
        pairs=pairs_needed(shards, gate),
        priced=budget.get("prices") is not None,
        id_prefix=identity.get("id_prefix") or None,
        replayed=bool(llm.get("replay")),
    )
    with (work / RESULTS).open("wb") as results, (work / FAILURES).open("wb") as failures:
        facts = row_facts(work, _rows(shards, counts, results, failures, secrets))
    notes: list[str] = []
    counts.arms.in_collection_order(shards.tests)
    run_counts = counts.counts()
    tally = run_counts.tally
    for name in FROM_SHARD_SUMMARIES:
        setattr(tally, name, getattr(tally, name) + _shard_sum(shards, name))
    verdict = None
    if gate.active:
        unjudged = best_of_unjudged(tally.attempts, bool(settings.get("gate_best_of")))
        if unjudged is not None:
            notes.append(unjudged)
        else:
            verdict = judge(
                gate,
                run_counts,
                other_failures=sum(
                    _gate_field(shard.summary, "other_failures") for shard in shards.shards
                ),
                subset=(lambda judged: partial_text(shards, judged)) if shards.partial else None,
            )
    exit_status = exit_status_of(verdict, tally.failed + tally.errored, tally.ran)
    # in the run's order: the pairs before the card, whose front-matter lists them
    several = len(settings.get("policies") or ()) > 1 or len(llm.get("models") or ()) > 1
    if int(identity.get("repeats") or 1) > 1 or several:
        from ..dataset.preferences import write_preferences

        write_preferences(work, secrets)
    summary = summary_of(out, shards, run_counts, gate, verdict, exit_status, facts)
    metadata = merged_metadata(out, shards)
    # the run's own writer of the folder's JSON and card: atomic, scrubbed
    writer = DatasetWriter(work, resume=True, secrets=secrets)
    writer.write_json(METADATA, metadata)
    writer.write_json(SUMMARY, summary)
    # the views are written where the folder will be, then moved with it
    from .page import write_report

    try:
        write_report(work, secrets=secrets)
    except Exception as exc:  # the data files are written; the report is a view of them
        notes.append(f"WARNING: report.html was not written: {exc}")
    writer.write_text(CARD, render_card(work, summary, metadata))
    if settings.get("inspect_log"):
        from .inspect_log.write import write_inspect_logs

        try:
            write_inspect_logs(work, work / "inspect-logs", secrets)
        except Exception as exc:
            notes.append(f"WARNING: no inspect eval log was written: {exc}")
    return MergeResult(out, summary, verdict, exit_status, notes)


def _rows(
    shards: ShardSet,
    counts: RowCounts,
    results: BinaryIO,
    failures: BinaryIO,
    secrets: KnownSecrets,
) -> Iterator[Any]:
    """Each row once, in id order: written to its file, counted, and its facts yielded."""
    for _, train, raw, path, row in merged_lines(shards.shards):
        if secrets.active:  # as the run's writer does with every line
            line = secrets.scrub(raw.decode("utf-8").rstrip("\n"))
            raw = (line + "\n").encode("utf-8")
            row = parse_line(path, 0, raw)
        (results if train else failures).write(raw)
        # the line itself is only carried (EpisodeOutcome.line), never read again
        counts.add(row, "", train=train)
        yield fact_of(row)


def _shard_sum(shards: ShardSet, name: str) -> int:
    total = 0
    for shard in shards.shards:
        figures = (
            shard.summary.get("figures") if isinstance(shard.summary.get("figures"), dict) else {}
        )
        value = figures.get(name)
        total += value if isinstance(value, int) else 0
    return total


def _gate_field(summary: dict[str, Any], name: str) -> int:
    gate = summary.get("gate") if isinstance(summary.get("gate"), dict) else {}
    value = gate.get(name)
    return value if isinstance(value, int) else 0


def partial_text(shards: ShardSet, judged: int) -> str:
    missing = ", ".join(f"{index}/{shards.count}" for index in shards.missing)
    return (
        f"a partial merge (--allow-partial) without shard(s) {missing}: the gate judged these "
        f"{judged} episodes, not the whole run, so it cannot pass it"
    )


def exit_status_of(verdict: Verdict | None, not_passed: int, ran: int) -> int:
    """pytest's exit code for the run: the gate's verdict, else failed tests fail it."""
    if verdict is not None:
        return 0 if verdict.passed else 1
    if not ran:
        return 5
    return 1 if not_passed else 0


def summary_of(
    out: Path,
    shards: ShardSet,
    counts: RunCounts,
    gate: GateConfig,
    verdict: Verdict | None,
    exit_status: int,
    facts: dict[str, Any],
) -> dict[str, Any]:
    """summary.json as the run on one machine writes it (``controller/finish.py``)."""
    tally, arms = counts.tally, counts.arms
    confidence = gate.confidence or DEFAULT_CONFIDENCE
    figures = tally.figures()
    # each shard's own run time, added up: what the run took on one machine, roughly
    wall = sum(
        float((shard.summary.get("figures") or {}).get("wall_time_s") or 0.0)
        for shard in shards.shards
    )
    figures["wall_time_s"] = round(wall, 3)
    figures["episodes_per_s"] = round(tally.played / wall, 3) if wall > 0 and tally.played else None
    figures["cost_usd"] = arms.cost_usd if arms.priced else None
    figures["unpriced_episodes"] = sum(arm.unpriced for arm in arms.by_group.values())
    figures["pooled"] = arms.several_groups
    figures["group_count"] = len(arms.by_group)
    compared = arms.to_json(confidence)
    expected = sum(int(shard.summary.get("episodes_expected") or 0) for shard in shards.shards)
    summary: dict[str, Any] = {
        "figures": figures,
        **facts,
        "passk": counts.passk.result().to_json(),
        "gate": verdict.to_json() if verdict else None,
        "exit_status": exit_status,
        "output": str(out),
        "episodes_expected": expected,
        "interrupted": False,
        "groups": arms.groups_json(confidence),
        **(compared or {}),
    }
    summary["shards"] = {
        "count": shards.count,
        "merged": [shard.index for shard in shards.shards],
        "missing": shards.missing,
        "partial": shards.partial,
    }
    if shards.partial:
        figures["partial"] = True
    return summary


def merged_metadata(out: Path, shards: ShardSet) -> dict[str, Any]:
    """The first shard's metadata.json as the whole run's: no shard in its identity, the
    shards it was merged from listed, and when the earliest started and the last finished."""
    metadata = dict(shards.shards[0].metadata)
    metadata["identity"] = {**metadata.get("identity", {}), "shard": None}
    settings = dict(metadata.get("settings") or {})
    settings["output"] = str(out)
    if settings.get("inspect_log"):  # the merge writes the logs inside the folder
        settings["inspect_log"] = str(out / "inspect-logs")
    metadata["settings"] = settings
    started = [str(shard.metadata.get("started_at")) for shard in shards.shards]
    finished = [str(shard.metadata.get("finished_at")) for shard in shards.shards]
    metadata["started_at"] = min(started)
    metadata["finished_at"] = max(finished)
    metadata.pop("shard", None)
    metadata["merged_from"] = {
        "count": shards.count,
        "shards": [
            {
                "index": shard.index,
                "folder": str(shard.path),
                "source": shard.source,
                "started_at": shard.metadata.get("started_at"),
                "finished_at": shard.metadata.get("finished_at"),
            }
            for shard in shards.shards
        ],
        "missing": shards.missing,
        "partial": shards.partial,
        "tests": shards.tests,
    }
    return metadata
