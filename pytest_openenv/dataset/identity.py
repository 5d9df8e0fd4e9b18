"""The run identity a resumed run must share with the run that wrote the folder.

``--openenv-resume`` skips every episode whose test id is already in
``results.jsonl``. An id like ``test_eps.py::test_ep[ep-000004]`` only means the
same episode when the same settings made it: the env and its config (game
parameters, opponent, reasoning_gym dataset config) pick the task, the base seed
fixes episode i's seed, the id prefix and repeats shape the id, and the policy,
model, system prompt, sampling, turn limit and pass threshold decide what was
played and which file the row went to, ``--openenv-tool-arguments`` fixes the
type of ``messages``' tool-call arguments (a JSON string or an object: a file with
both has two types in one field), ``--openenv-prompt-style`` the prompts' wording, and
the row ``schema_version`` the layout of every row. These fields are recorded in ``metadata.json``
(``identity``) and a resume with any of them different is refused, naming the
field: otherwise rows of two different runs end up in one dataset. ``--openenv-n``
is not part of it (a resume may extend a run), nor are output, concurrency,
timeouts, servers or the cache, which change how episodes run, not which ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config.convert import PROMPT_STYLES, TOOL_ARGUMENT_FORMS
from ..config.settings import Settings
from ..episode.result import SCHEMA_VERSION

#: identity field -> the option that sets it
IDENTITY_OPTIONS = {
    "env": "--openenv-env",
    "env_config": "--openenv-env-config",
    "seed": "--openenv-seed",
    "id_prefix": "--openenv-id-prefix",
    "repeats": "--openenv-repeats",
    "policy": "--openenv-policy",
    "model": "--openenv-model",
    "system_prompt": "--openenv-system-prompt",
    "temperature": "--openenv-temperature",
    "max_tokens": "--openenv-max-tokens",
    "max_turns": "--openenv-max-turns",
    "min_reward": "--openenv-min-reward",
    "judge_at": "--openenv-judge-at",
    "tool_arguments": "--openenv-tool-arguments",
    "prompt_style": "--openenv-prompt-style",
    # not an option: the row layout this version writes (``episode/result.py``)
    "schema_version": "",
}
#: what a folder written before a field existed holds: the behaviour of that time
FIELD_BEFORE_IT_EXISTED = {
    "tool_arguments": TOOL_ARGUMENT_FORMS[0],
    "prompt_style": PROMPT_STYLES[0],
    "schema_version": 1,
    "judge_at": None,
}


def _plain(value: Any) -> Any:
    """As it reads back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def run_identity(settings: Settings, policy: str | None) -> dict[str, Any]:
    """``policy``: the run's, resolved (the env family's teacher when none is named)."""
    return _plain(
        {
            "env": settings.run.env,
            "env_config": settings.run.config,
            "seed": settings.run.seed,
            "id_prefix": settings.run.id_prefix or "",
            "repeats": settings.run.repeats,
            # several (issue 24): the list, so a resume with other models is refused
            "policy": list(settings.run.policies) if len(settings.run.policies) > 1 else policy,
            "model": list(settings.llm.models)
            if len(settings.llm.models) > 1
            else settings.llm.model,
            "system_prompt": settings.run.system_prompt,
            "temperature": settings.llm.temperature,
            "max_tokens": settings.llm.max_tokens,
            "max_turns": settings.run.max_turns,
            "min_reward": settings.run.min_reward,
            "judge_at": settings.run.judge_at,
            "tool_arguments": settings.output.tool_arguments,
            "prompt_style": settings.run.prompt_style,
            "schema_version": SCHEMA_VERSION,
        }
    )


def recorded_identity(metadata: dict[str, Any]) -> dict[str, Any]:
    """The identity a ``metadata.json`` records (read from ``settings`` in older folders)."""
    identity = metadata.get("identity")
    if isinstance(identity, dict):
        return {**FIELD_BEFORE_IT_EXISTED, **identity}
    settings = metadata.get("settings") if isinstance(metadata.get("settings"), dict) else {}
    llm = settings.get("llm") if isinstance(settings.get("llm"), dict) else {}
    evaluation = metadata.get("evaluation") if isinstance(metadata.get("evaluation"), dict) else {}
    legacy = {
        **{key: settings[key] for key in IDENTITY_OPTIONS if key in settings},
        **{key: llm[key] for key in ("model", "temperature", "max_tokens") if key in llm},
    }
    if "repeats" in evaluation:
        legacy["repeats"] = evaluation["repeats"]
    return {**FIELD_BEFORE_IT_EXISTED, **legacy}


def identity_mismatch(
    recorded: dict[str, Any], current: dict[str, Any]
) -> tuple[str, Any, Any] | None:
    """The first field (in ``IDENTITY_OPTIONS`` order) the two runs disagree on."""
    for field in IDENTITY_OPTIONS:
        if field in recorded and field in current and _plain(recorded[field]) != current[field]:
            return field, recorded[field], current[field]
    return None


def resume_problem(
    folder: Path, metadata: dict[str, Any] | None, identity: dict[str, Any]
) -> str | None:
    """Why resuming into ``folder`` would mix two runs' rows, or None (``run_identity``)."""
    if metadata is None:
        return None
    mismatch = identity_mismatch(recorded_identity(metadata), identity)
    if mismatch is None:
        return None
    field, before, now = mismatch
    option = IDENTITY_OPTIONS[field]
    if not option:
        return (
            f"--openenv-resume: {folder / 'metadata.json'} was written with row {field}="
            f"{json.dumps(before)}, this version of pytest-openenv writes {field}="
            f"{json.dumps(now)}: one file with both layouts would not load as one dataset. "
            "Use another --openenv-output, or drop --openenv-resume (the earlier files are "
            "then moved aside, not deleted)"
        )
    return (
        f"--openenv-resume: {folder / 'metadata.json'} was written by a run with "
        f"{field}={json.dumps(before)}, this run has {field}={json.dumps(now)} ({option}). "
        "Its episode ids mean other episodes, so resuming would mix two runs' rows in one "
        f"dataset. Run with {option} as recorded, use another --openenv-output, or drop "
        "--openenv-resume (the earlier files are then moved aside, not deleted)"
    )
