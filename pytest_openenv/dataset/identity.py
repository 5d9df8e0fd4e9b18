"""The run identity a resumed run must share with the run that wrote the folder.

``--openenv-resume`` skips every episode whose test id is already in
``results.jsonl``. An id like ``test_eps.py::test_ep[ep-000004]`` only means the
same episode when the same settings made it: the env and its config (game
parameters, opponent, reasoning_gym dataset config) pick the task, the base seed
fixes episode i's seed, the id prefix and repeats shape the id, and the policy,
model, system prompt, sampling, turn limit and pass threshold decide what was
played and which file the row went to, ``--openenv-tool-arguments`` fixes the
type of ``messages``' tool-call arguments (a JSON string or an object: a file with
both has two types in one field), ``--openenv-prompt-style`` the prompts' wording,
``--openenv-train-on`` which episodes fill results.jsonl (a resumed folder filled by the
other rule would hold both), ``--openenv-shard`` which part of the run the folder holds, and
the row ``schema_version`` the layout of every row. These fields are recorded in ``metadata.json``
(``identity``) and a resume with any of them different is refused, naming the
field: otherwise rows of two different runs end up in one dataset. ``--openenv-n``
is not part of it (a resume may extend a run), nor are output, concurrency,
timeouts, servers or the cache, which change how episodes run, not which ones.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import Any, NamedTuple

from ..config.convert import PROMPT_STYLES, TOOL_ARGUMENT_FORMS
from ..config.settings import Settings
from ..episode.result import SCHEMA_VERSION
from ..util.secrets import withhold_config

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
    "train_on": "--openenv-train-on",
    # the judge's model, prompt, rubric and sampling: what its verdicts mean
    "judge": "--openenv-judge / --openenv-judge-rubric",
    "shard": "--openenv-shard",
    # not an option: the row layout this version writes (``episode/result.py``)
    "schema_version": "",
}
#: what a folder written before a field existed holds: the behaviour of that time
FIELD_BEFORE_IT_EXISTED = {
    "tool_arguments": TOOL_ARGUMENT_FORMS[0],
    "prompt_style": PROMPT_STYLES[0],
    "schema_version": 1,
    "judge_at": None,
    "judge": None,
    # before the option, every test-passed episode went to results.jsonl
    "train_on": "test",
    # before shards, a folder held the whole run
    "shard": None,
}


def _plain(value: Any) -> Any:
    """As it reads back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def run_identity(
    settings: Settings, policy: str | None, judge: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``policy``: the run's, resolved (the env family's teacher when none is named);
    ``judge``: what decides the judge's verdicts (``Judge.identity``), None without one."""
    return _plain(
        {
            "env": settings.run.env,
            # as metadata.json records it: a credential's value is no part of the task
            "env_config": withhold_config(settings.run.config),
            "seed": settings.run.seed,
            "id_prefix": settings.run.id_prefix or "",
            "repeats": settings.run.repeats,
            # several: the list, so a resume with other models is refused
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
            "train_on": settings.output.train_on,
            "judge": judge_identity(judge),
            # a shard's folder holds its part of the run, never another shard's rows
            "shard": settings.run.shard.name if settings.run.shard is not None else None,
            "schema_version": SCHEMA_VERSION,
        }
    )


def judge_identity(judge: dict[str, Any] | None) -> dict[str, Any] | None:
    """The judge's part of the identity: model, client, prompt and rubric digests, sampling
    (not its endpoint, which changes where it runs, not what it decides)."""
    if judge is None:
        return None
    keys = ("model", "provider", "prompt_sha256", "rubric_sha256", "temperature", "max_tokens")
    return {key: judge.get(key) for key in keys}


def recorded_identity(metadata: dict[str, Any]) -> dict[str, Any]:
    """The identity a ``metadata.json`` records (read from ``settings`` in older folders)."""
    identity = metadata.get("identity")
    if isinstance(identity, dict):
        return {**FIELD_BEFORE_IT_EXISTED, **identity}
    if not isinstance(metadata.get("settings"), dict):
        # it records nothing of the run: its rows are checked instead (``RowIdentity``)
        return {}
    settings = metadata["settings"]
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
        if field not in recorded or field not in current:
            continue
        before, now = recorded[field], current[field]
        if field == "env_config":  # a folder written before credentials were withheld
            before, now = withhold_config(before), withhold_config(now)
        if _plain(before) != now:
            return field, before, now
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


# -- per row: what each episode test's marker resolves to ----------------
#
# The run identity above is the command line's. Each episode test's marker may name its own
# env, config, seed and policy, and ``metadata.json`` may be missing or say nothing useful,
# so every row already in results.jsonl is also checked against what its test would play
# now: its own fields (env, task config, seed, policy, model, threshold, schema version)
# are the record of how it was played.


class RowIdentity(NamedTuple):
    """What one results.jsonl row says about how its episode was played."""

    episode_id: str
    env: Any
    #: the row's ``task.config``: canonical JSON text of the env config
    config: Any
    seed: Any
    policy: Any
    model: Any
    #: the pass threshold the row was judged by (``verify_metrics.min_reward``)
    min_reward: Any
    #: whether the env ended the episode (one the verdict passed that it did not end was
    #: judged at the turn limit)
    done: Any
    #: the env's verdict (``verify_metrics.verdict``; the test itself may pass otherwise)
    verdict: Any
    schema_version: Any
    #: what the row's messages show of the run (``--openenv-tool-arguments``,
    #: ``--openenv-system-prompt``): how tool-call arguments are written ("string",
    #: "object", None: no call), and a digest of the system message ("" digested: none)
    arguments_form: Any = None
    system_prompt: Any = None
    #: ``extra``: which repeat of its seed, the turn limit, the prompt style and the model's
    #: sampling (None in rows written before they were recorded: not checked)
    repeat: Any = 0
    max_turns: Any = None
    prompt_style: Any = None
    sampling: Any = None

    @classmethod
    def of(cls, record: dict[str, Any]) -> RowIdentity:
        task = record.get("task") if isinstance(record.get("task"), dict) else {}
        verify = record.get("verify_metrics")
        verify = verify if isinstance(verify, dict) else {}
        extra = record.get("extra") if isinstance(record.get("extra"), dict) else {}
        messages = record.get("messages") if isinstance(record.get("messages"), list) else []
        sampling = extra.get("sampling")
        return cls(
            episode_id=str(record.get("episode_id", "")),
            env=_shared(record.get("env")),
            config=_shared(task.get("config")),
            seed=record.get("seed"),
            policy=_shared(record.get("policy")),
            model=_shared(record.get("model")),
            min_reward=verify.get("min_reward"),
            done=record.get("done"),
            verdict=verify.get("verdict"),
            schema_version=record.get("schema_version"),
            arguments_form=_arguments_form(messages),
            system_prompt=prompt_digest(_system_text(messages)),
            repeat=extra.get("repeat", 0),
            max_turns=extra.get("max_turns"),
            prompt_style=_shared(extra.get("prompt_style")),
            sampling=_sampling_text(sampling),
        )


def _sampling_text(value: Any) -> str | None:
    """``extra.sampling`` as canonical JSON text (the row holds it as JSON text already)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return _shared(value)
    return _shared(json.dumps(value, sort_keys=True)) if value else None


def _arguments_form(messages: list[Any]) -> str | None:
    """How the row's assistant messages write tool-call arguments: "string" (JSON text),
    "object", "mixed", or None when no call holds any."""
    forms = set()
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(arguments, str):
                forms.add("string")
            elif isinstance(arguments, dict):
                forms.add("object")
    if len(forms) > 1:
        return "mixed"
    return forms.pop() if forms else None


def _system_text(messages: list[Any]) -> str:
    first = messages[0] if messages else None
    if isinstance(first, dict) and first.get("role") == "system":
        return str(first.get("content") or "")
    return ""


def prompt_digest(text: str) -> str:
    """A short digest of a system prompt: rows are many, their prompts long and alike."""
    import hashlib

    return _shared(hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])


def _shared(value: Any) -> Any:
    """One copy of each env, policy and config text over many rows (a resume set is large)."""
    return sys.intern(value) if isinstance(value, str) else value


#: what a test's rows are not checked for (the fixture it uses is the suite's own)
UNCHECKED = object()


@dataclass(frozen=True)
class PlayedNow:
    """How one episode test's episodes would be played by this run: what its rows must say.

    ``env``/``config`` are UNCHECKED when the test overrides ``openenv_env``, ``policy`` and
    ``model`` when it overrides ``openenv_policy`` (the row records what the override did).
    """

    env: Any
    config: Any
    policy: Any
    model: Any
    min_reward: float
    #: an episode the turn limit ends is judged (else only one the env ended can pass)
    judged_at_turn_limit: bool
    #: what the rows' messages and ``extra`` show (``RowIdentity``); UNCHECKED with the
    #: fixture that decides them overridden
    arguments_form: Any = UNCHECKED
    system_prompt: Any = UNCHECKED
    max_turns: Any = UNCHECKED
    prompt_style: Any = UNCHECKED
    sampling: Any = UNCHECKED
    #: which settings name each field, for messages (``--openenv-seed or the marker``)
    sources: dict[str, str] = dataclass_field(default_factory=dict)


def _config(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def row_mismatch(row: RowIdentity, now: PlayedNow, seed: int) -> tuple[str, Any, Any] | None:
    """The first field on which ``row`` (played as recorded) differs from this run's test."""
    checks: list[tuple[str, Any, Any]] = [("schema_version", row.schema_version, SCHEMA_VERSION)]
    if now.env is not UNCHECKED:
        checks.append(("env", row.env, now.env))
        # rows show a credential as ***: what the two configs are apart from credentials
        checks.append(
            (
                "env_config",
                withhold_config(_config(row.config)),
                withhold_config(_config(now.config)),
            )
        )
    checks.append(("seed", row.seed, seed))
    if now.policy is not UNCHECKED:
        checks.append(("policy", row.policy, now.policy))
        checks.append(("model", row.model, now.model))
    if isinstance(row.min_reward, (int, float)) and not isinstance(row.min_reward, bool):
        checks.append(("min_reward", float(row.min_reward), now.min_reward))
    if now.arguments_form is not UNCHECKED and row.arguments_form is not None:
        checks.append(("tool_arguments", row.arguments_form, now.arguments_form))
    for name in ("prompt_style", "system_prompt", "max_turns", "sampling"):
        recorded, current = getattr(row, name), getattr(now, name)
        if current is not UNCHECKED and recorded is not None:
            checks.append((name, recorded, current))
    if row.verdict is True and row.done is False and not now.judged_at_turn_limit:
        # the verdict passed it unfinished, at the turn limit; this run judges only finished
        # episodes
        checks.append(("judge_at", "turn-limit", "done"))
    for name, recorded, current in checks:
        if recorded != current:
            return name, recorded, current
    return None


def row_problem(
    test: str, row: RowIdentity, now: PlayedNow, seed: int, *, more: int = 0
) -> str | None:
    """Why resuming would keep ``row`` as an episode this run plays otherwise, or None.

    ``more``: how many other rows of the same test differ too (for the message)."""
    mismatch = row_mismatch(row, now, seed)
    if mismatch is None:
        return None
    name, recorded, current = mismatch
    source = now.sources.get(name) or IDENTITY_OPTIONS.get(name) or "this version"
    others = f" (and {more} more of its rows)" if more else ""
    return (
        f"--openenv-resume: results.jsonl holds {test}{others} played with {name}="
        f"{json.dumps(recorded, default=str)}; this run plays it with {name}="
        f"{json.dumps(current, default=str)} ({source}). Skipping it would keep another "
        "episode under its id and mix two runs' rows in one dataset. Set it back as "
        "recorded, use another --openenv-output, or drop --openenv-resume (the earlier "
        "files are then moved aside, not deleted)"
    )


#: the attribute of a failed collection report that carries the refusals (worker -> controller)
RESUME_REFUSED = "openenv_resume_refused"
#: the attribute of a collection report carrying a usage error only the collection shows: a
#: test whose model (or sampling option) none of its policies uses (``worker/what_plays.py``),
#: or what the whole collection shows (``worker/collection_check.py``): the controller's exit 4
USAGE_REFUSED = "openenv_usage_refused"
