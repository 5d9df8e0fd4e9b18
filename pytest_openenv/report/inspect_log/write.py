"""Build each group's ``EvalLog`` and write it with ``inspect_ai.log.write_eval_log``.

A group (test function, env, model or policy: ``dataset/played.py``) is one log, named
after the group (``test_episode-openspiel-tic_tac_toe-random-<hash>.eval``) so a later
run or ``python -m pytest_openenv inspect-log`` replaces the log of the same group, each
written to a temp name and renamed into place (a reader never sees half a log).

- ``eval``: task = the test function, task_file = its file, model = the model that
  played (``policy/<name>`` where no model did), dataset = the env and its sample ids,
  epochs = the repeats; metadata holds env, env config, policy, model, seeds, the folder
  and the plugin version, which ``packages`` names too.
- ``results``: one score, ``verdict``, whose metrics are the group's figures
  (``figures.py``): ``accuracy`` (the pass rate, as inspect names it), its Wilson
  interval, ``mean_reward`` and its standard error, and with repeats pass@1 / pass@k /
  pass^k under those names with k written out.
- ``stats``: the run's start and end, and the tokens of every sample per model.

Every string is scrubbed of known secrets before it reaches the log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._version import __version__
from ...dataset.folder import read_metadata
from ...dataset.played import Group, PlayedEpisodes, group_of
from ...dataset.writer import INSPECT_LOGS
from ...util.secrets import KnownSecrets
from .figures import CONFIDENCE, GroupFigures, group_figures, repeats_of
from .samples import eval_sample

SCORER = "pytest-openenv"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class WrittenLog:
    group: Group
    path: Path
    samples: int


def log_name(group: Group) -> str:
    task = group.test.rpartition("::")[2] or group.test
    slug = _UNSAFE.sub("_", f"{task}-{group.env}-{group.player}").strip("_.-")[:80]
    digest = hashlib.sha256(
        json.dumps([group.test, group.env, group.player, group.player_kind]).encode()
    ).hexdigest()[:8]
    return f"{slug or 'episodes'}-{digest}.eval"


def model_name(group: Group) -> str:
    return group.player if group.player_kind == "model" else f"policy/{group.player}"


def _stable_id(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:22]


def eval_results(figures: GroupFigures, samples: int) -> Any:
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    low, high = figures.pass_rate_interval
    values: list[tuple[str, float | None, dict[str, Any]]] = [
        ("accuracy", figures.pass_rate, {}),
        ("accuracy_ci_low", low, {"confidence": CONFIDENCE, "interval": "wilson"}),
        ("accuracy_ci_high", high, {"confidence": CONFIDENCE, "interval": "wilson"}),
        ("mean_reward", figures.mean_reward, {}),
        ("mean_reward_stderr", figures.mean_reward_stderr, {}),
    ]
    passk = figures.passk
    if passk.k > 1:
        k = passk.k
        values += [
            ("pass@1", passk.pass_at_1, {"seeds": passk.problems}),
            (f"pass@{k}", passk.pass_at_k, {"k": k, "seeds": passk.problems_scored}),
            (f"pass^{k}", passk.pass_hat_k, {"k": k, "seeds": passk.problems_scored}),
        ]
    metrics = {
        name: EvalMetric(name=name, value=value, params=params)
        for name, value, params in values
        if value is not None
    }
    return EvalResults(
        total_samples=samples,
        completed_samples=samples - figures.errored,
        scores=[
            EvalScore(
                name="verdict",
                scorer=SCORER,
                scored_samples=samples,
                unscored_samples=0,
                metrics=metrics,
            )
        ],
        metadata={
            "episodes": figures.episodes,
            "passed": figures.passed,
            "errored": figures.errored,
            "pass_rate": figures.pass_rate,
            "pass_rate_ci95": list(figures.pass_rate_interval),
            "passk": passk.to_json() if passk.k > 1 else None,
        },
    )


def eval_log(
    group: Group, rows: list[dict[str, Any]], metadata: dict[str, Any], folder: Path
) -> Any:
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec, EvalStats
    from inspect_ai.model import GenerateConfig

    settings = metadata.get("settings") or {}
    llm = settings.get("llm") or {}
    repeats = int((metadata.get("evaluation") or {}).get("repeats") or repeats_of(rows))
    model = model_name(group)
    samples = [eval_sample(row, model) for row in rows]
    ids = list(dict.fromkeys(sample.id for sample in samples))
    figures = group_figures(rows, repeats)
    first = rows[0] if rows else {}
    started = str(metadata.get("started_at") or "")
    task_file, _, task = group.test.rpartition("::")
    seeds = sorted({row["seed"] for row in rows if isinstance(row.get("seed"), int)})
    spec = EvalSpec(
        eval_id=_stable_id("eval", started, group.label),
        run_id=_stable_id("run", started, str(folder)),
        created=started or metadata.get("finished_at") or "1970-01-01T00:00:00Z",
        task=task or group.test,
        task_id=_stable_id("task", group.label),
        task_file=task_file or None,
        task_display_name=f"{task or group.test} · {group.env}",
        task_attribs={"env": group.env},
        solver=str(first.get("policy") or ""),
        dataset=EvalDataset(name=group.env, samples=len(ids), sample_ids=ids),
        model=model,
        model_generate_config=GenerateConfig(
            temperature=llm.get("temperature") if group.player_kind == "model" else None,
            max_tokens=llm.get("max_tokens") if group.player_kind == "model" else None,
        ),
        model_base_url=llm.get("endpoint") if group.player_kind == "model" else None,
        config=EvalConfig(epochs=repeats),
        packages={"pytest-openenv": str(metadata.get("version") or __version__)},
        metadata={
            "env": group.env,
            "env_config": (first.get("task") or {}).get("config"),
            "policy": first.get("policy"),
            "model": first.get("model"),
            "seeds": seeds,
            "seed": settings.get("seed"),
            "repeats": repeats,
            "test": group.test,
            "output_folder": str(folder),
            "plugin": "pytest-openenv",
            "plugin_version": str(metadata.get("version") or __version__),
        },
    )
    stats = EvalStats(
        started_at=started,
        completed_at=str(metadata.get("finished_at") or ""),
        model_usage=_total_usage(samples),
    )
    return EvalLog(
        status="success",
        eval=spec,
        results=eval_results(figures, len(samples)),
        stats=stats,
        samples=samples,
    )


def _total_usage(samples: list[Any]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for sample in samples:
        for model, used in (sample.model_usage or {}).items():
            total[model] = total[model] + used if model in total else used
    return total


def write_inspect_logs(
    folder: Path,
    log_dir: Path | None = None,
    secrets: KnownSecrets | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[WrittenLog]:
    """One inspect log per group of the folder's episodes, into ``log_dir``.

    ``warn``: told of each file whose torn last line (a killed run's) was left out. A line
    that is no episode record otherwise raises ``CorruptLine``.
    """
    from inspect_ai.log import EvalLog, write_eval_log

    secrets = secrets or KnownSecrets.collect()
    log_dir = log_dir if log_dir is not None else folder / INSPECT_LOGS
    metadata = read_metadata(folder) or {}
    played = PlayedEpisodes(folder, key=group_of)
    for path in played.torn if warn is not None else ():
        warn(
            f"{path} ends in a line cut off mid-write (a run killed while writing it): that "
            "episode is left out; `--openenv-resume` on the folder plays it again"
        )
    written: list[WrittenLog] = []
    log_dir.mkdir(parents=True, exist_ok=True)
    for group, rows in played.each_group():
        if secrets.active:
            rows = [secrets.scrub_tree(row) for row in rows]
        log = eval_log(group, rows, metadata, folder)
        if secrets.active:  # spec and metadata too: a URL or prompt may carry one
            log = EvalLog.model_validate_json(secrets.scrub(log.model_dump_json()))
        path = log_dir / log_name(group)
        temp = log_dir / f".{path.stem}.tmp-{os.getpid()}.eval"
        try:
            write_eval_log(log, str(temp), format="eval")
            os.replace(temp, path)
        finally:
            if temp.exists():
                temp.unlink()
        written.append(WrittenLog(group, path, len(rows)))
    return written
