"""A dataset row as OpenEnv's ``EpisodeRecord``, and back.

A row has every field of OpenEnv's ``EpisodeRecord`` (``openenv.core.harness.collect``)
plus this plugin's own (``schema_version, env, seed, policy, model, tools, test,
passed``, and ``failure`` in ``failures.jsonl``), so ``EpisodeRecord(**row)`` raises
``TypeError``. ``to_episode_record(row)`` moves ours under ``extra["pytest_openenv"]``;
``from_episode_record`` puts them back, so a row survives the round trip unchanged
(``RolloutSerializer`` can write the records, OpenEnv's tooling reads them).
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: the fields of OpenEnv's ``EpisodeRecord``, in its order
EPISODE_RECORD_FIELDS = (
    "episode_id",
    "messages",
    "reward",
    "done",
    "tool_trace",
    "metrics",
    "verify_metrics",
    "artifacts",
    "task",
    "extra",
)
#: the key of ``extra`` that holds a row's fields ``EpisodeRecord`` has not
OURS = "pytest_openenv"


def episode_record_fields(row: dict[str, Any]) -> dict[str, Any]:
    """``EpisodeRecord``'s keyword arguments for ``row`` (no ``openenv`` import needed)."""
    extra = row.get("extra")
    if not isinstance(extra, dict):
        raise TypeError(f"row['extra'] must be an object, got {type(extra).__name__}")
    if OURS in extra:
        raise ValueError(
            f"row['extra'] already has a {OURS!r} key: is this row an EpisodeRecord already?"
        )
    missing = [name for name in EPISODE_RECORD_FIELDS if name not in row]
    if missing:
        raise ValueError(f"not a pytest-openenv row: it has no {', '.join(missing)}")
    fields = {name: row[name] for name in EPISODE_RECORD_FIELDS}
    ours = {key: value for key, value in row.items() if key not in EPISODE_RECORD_FIELDS}
    fields["extra"] = {**extra, OURS: ours}
    return fields


def to_episode_record(row: dict[str, Any]) -> Any:
    """``row`` (a line of ``results.jsonl`` or ``failures.jsonl``) as OpenEnv's ``EpisodeRecord``.

    Needs the ``openenv`` package. This plugin's own fields are kept in
    ``record.extra["pytest_openenv"]``; ``from_episode_record`` restores the row.
    """
    try:
        from openenv.core.harness.collect import EpisodeRecord
    except ImportError as exc:
        raise ImportError(
            "to_episode_record needs OpenEnv's package: pip install openenv "
            "(episode_record_fields(row) gives the same fields as a dict without it)"
        ) from exc
    return EpisodeRecord(**episode_record_fields(row))


def from_episode_record(record: Any) -> dict[str, Any]:
    """The row ``to_episode_record`` was made from (a record, or its ``to_dict()``)."""
    data = dataclasses.asdict(record) if dataclasses.is_dataclass(record) else dict(record)
    extra = dict(data.get("extra") or {})
    ours = extra.pop(OURS, None)
    if not isinstance(ours, dict):
        raise ValueError(
            f"this EpisodeRecord has no extra[{OURS!r}]: it was not made by to_episode_record"
        )
    # the row's own key order: schema_version, the record's fields, then the rest of ours
    row = {key: ours[key] for key in ("schema_version",) if key in ours}
    row.update({key: data[key] for key in EPISODE_RECORD_FIELDS if key in data})
    row["extra"] = extra
    row.update({key: value for key, value in ours.items() if key not in row})
    return row
