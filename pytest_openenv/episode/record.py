"""The dataset row: its fields, how an episode becomes one, one JSON type per field.

The one home of the row layout (docs/files-and-schema.md). ``FIELDS`` lists the fields in order
with their type and meaning (the dataset card's schema table shows it);
``episode_row`` makes the row of a finished episode (``Episode.record``),
``placeholder_row`` that of an episode that errored before it finished (the
worker, and the controller for an episode whose process died), with the same
fields, so both load as one table; ``dumps_record`` the JSONL line (what a report
carries of it is ``outcome.py``'s ``EpisodeOutcome``).

Rows are built where episodes finish (the worker) and read by
``datasets``/pyarrow, which infer one column type per field from the rows they
see first and cast the rest to it. So a field that is a number in one row and a
string in the next, a struct whose nested keys change type, or an empty struct
(Parquet cannot store a struct with no fields) breaks loading or the Hub viewer.

The rules, applied to every row:

- ``messages`` stay OpenAI chat format: ``content`` always a string, assistant
  ``tool_calls[].function.arguments`` a JSON *string*, ``tool`` messages with a
  string ``tool_call_id``; keys that do not apply to a role are left out, as in
  OpenAI's own format. With ``--openenv-tool-arguments=object`` the arguments are
  the call's ``tool_trace`` object instead (the accepted call's parsed object, null
  for a refused one): chat templates that apply ``tojson`` to them (Qwen2.5,
  Llama-3.1) would encode a string twice, and a refused call's values may not have
  the schema's types, which would give the field two types across rows.
- ``tools`` stay OpenAI function tools (what TRL passes to the chat template);
  empty objects inside a parameter schema are dropped (``"properties": {}``
  means the same as no ``properties``).
- ``tool_trace`` entries are ``{tool_name, arguments: object | null,
  arguments_text: str, result: {data: str, done: bool, reward: float, error: str |
  null, metadata: {reward: float}}}``: ``arguments`` is the parsed object of an
  accepted call (as ``openenv collect`` writes it; empty objects inside dropped),
  null for a refused one (its text may not be JSON, its values not the schema's
  types), and ``arguments_text`` is what the policy sent. ``result.metadata`` is
  where OpenEnv's harness puts a step's reward (``ToolResult.metadata["reward"]``,
  which its reward resolution reads), so OpenEnv's tooling finds it there too.
- ``task`` values are strings or null (a family's extra task fields included).
- ``metrics``, ``verify_metrics``, ``artifacts``, ``extra`` are flat: scalars as
  they are, nested lists/objects as JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..config.convert import TOOL_ARGUMENT_FORMS
from ..util.memo import BoundedMemo
from ..util.secrets import withhold_config_json

if TYPE_CHECKING:
    from ..envs.verdict import Decision
    from .spec import EpisodeSpec

#: Bump when the row layout changes in a way readers must know about. 2: ``tool_trace``
#: results carry OpenEnv's ``metadata`` (``{reward}``); a file mixing 1 and 2 would give
#: that struct two shapes, so a resume keeps to the version a folder was written with.
SCHEMA_VERSION = 2

#: Every field of a row: name, type, meaning (the card's schema table, in its order).
FIELDS: tuple[tuple[str, str, str], ...] = (
    (
        "episode_id",
        "string",
        "`ep-000000`, `ep-000000-r0` with repeats, `P-ep-000000` with --openenv-id-prefix P, "
        "`M-ep-000000` with several models (M: the model's id part)",
    ),
    (
        "messages",
        "list of chat messages",
        "OpenAI chat format: `system`, `user`, `assistant` (with `tool_calls[].function"
        ".arguments` as a JSON string) and `tool` (with `tool_call_id`) messages",
    ),
    ("tools", "list of tools", "OpenAI function tools offered to the agent (JSON schemas)"),
    ("reward", "float", "total reward of the episode"),
    ("done", "bool", "whether the environment ended the episode"),
    (
        "tool_trace",
        "list",
        "each tool call: `tool_name`, `arguments` (the accepted call's object, as "
        "`openenv collect` writes it; null if refused), `arguments_text` (what the policy "
        "sent), `result` (`data`, `done`, `reward`, `error`)",
    ),
    (
        "metrics",
        "struct",
        "turns, tool calls, tool errors, prompt/completion tokens, wall time; `cost_usd` "
        "with --openenv-prices (null for a model the table does not price)",
    ),
    ("verify_metrics", "struct", "verifier outcome, pass threshold, verdict"),
    ("artifacts", "struct", "final observation shown to the agent"),
    ("task", "struct of strings", "family, variant, env config (JSON), prompt, reference answer"),
    (
        "extra",
        "struct",
        "episode index, repeat, the turn limit (`max_turns`), `prompt_style`, the model's "
        "`sampling` (temperature, max_tokens; null for a policy without), backend, server, "
        "reason it did not pass, `seeded` (false: the server ignores the reset seed, so the "
        "seed does not repeat the episode), `judged_by` (what decided the verdict: "
        "`success-field` or `outcome-field`, the env's own word; `last-step-reward`, "
        "`total-reward` or `min-reward`, a threshold; `unfinished`: none, the env did not end "
        "the episode), `verdict_rule` (that rule in words; a "
        "guessed threshold says so), `attempt` (only on a failed episode played again by "
        "--openenv-resume-failed: 2, 3, ...), `agent` and `agent_version` (only on a row an "
        "agent program played: --openenv-policy=agent:NAME) with `agent_startup_s` (its "
        "start to its first model call) and `agent_stop_s` (its process group ending)",
    ),
    ("env", "string", "`family:variant`"),
    ("seed", "int", "the episode's seed (base seed + index)"),
    ("policy", "string", "policy that played the agent"),
    ("model", "string or null", "model id for LLM policies"),
    ("test", "string", "pytest node id of the episode"),
    ("passed", "bool", "whether the pytest item passed"),
    ("schema_version", "int", "row layout version"),
    (
        "judge",
        "struct",
        "with --openenv-judge only: the judge's `model`, `passed`, `score` (0 to 1), "
        "`reasoning`, `rubric_sha256`, the env's own verdict beside it (`env_passed`, null "
        "where the env states none; `env_outcome`), `error` (why the judge gave no verdict), "
        "its `prompt_tokens`, `completion_tokens` and `cost_usd`",
    ),
    (
        "failure",
        "struct",
        "`failures.jsonl` only: `outcome` (failed / error / verdict-failed: the test passed, "
        "the env's verdict did not), `test_outcome` (passed / failed / error), `verdict` (the "
        "env's, at the run's threshold) and `message`",
    ),
)

#: the ``messages`` entry of ``FIELDS`` for rows written with --openenv-tool-arguments=object
MESSAGES_WITH_OBJECT_ARGUMENTS = (
    "messages",
    "list of chat messages",
    "OpenAI chat format: `system`, `user`, `assistant` (with `tool_calls[].function"
    ".arguments` as an object: the accepted call's arguments, null for a refused call; "
    "written with `--openenv-tool-arguments=object`) and `tool` (with `tool_call_id`) messages",
)


#: the failure outcome of an episode whose test passed while the env's verdict failed
VERDICT_FAILED = "verdict-failed"


def metrics_section(
    *,
    turns: int = 0,
    tool_calls: int = 0,
    tool_errors: int = 0,
    no_tool_call_turns: int = 0,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    wall_time_s: float = 0.0,
) -> dict[str, Any]:
    """A row's ``metrics``: the same keys for a played episode and a placeholder."""
    return {
        "turns": turns,
        "tool_calls": tool_calls,
        "tool_errors": tool_errors,
        "no_tool_call_turns": no_tool_call_turns,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "wall_time_s": wall_time_s,
    }


def task_section(
    family: str, variant: str, config: str, info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A row's ``task``: the env, its config (credentials withheld: ``util/secrets.py``),
    then what the family says of the task (``task_info``: prompt, reference answer and its
    own keys; none played, both empty)."""
    return {
        "family": family,
        "variant": variant,
        "config": withhold_config_json(config),
        **(info if info is not None else {"prompt": "", "answer": None}),
    }


class PlayedEpisode(Protocol):
    """What a row is made of: a finished episode (``result.py``'s ``Episode``, which makes
    its row with this module, so the row knows it by these fields only)."""

    episode_id: str
    env: str
    seed: int
    index: int
    repeat: int
    policy: str
    model: str | None
    reward: float
    passed: bool
    done: bool
    outcome: str
    min_reward: float
    decision: Decision | None
    reason: str | None
    messages: list[dict[str, Any]]
    tool_trace: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    metrics: dict[str, Any]
    task: dict[str, Any]
    final_observation: str
    max_turns: int | None
    prompt_style: str | None
    sampling: dict[str, Any] | None
    backend: str
    server: str | None
    server_reports: dict[str, Any] | None
    seeded: bool | None
    judge: dict[str, Any] | None


def episode_row(
    episode: PlayedEpisode,
    *,
    test: str = "",
    passed: bool | None = None,
    tool_arguments: str = "string",
) -> dict[str, Any]:
    """The row of a finished episode: OpenEnv ``EpisodeRecord`` keys plus ours.

    ``passed``: the item's verdict, when the test decided other than the env's
    verdict; ``tool_arguments`` (``--openenv-tool-arguments``): how ``messages``
    carry tool-call arguments, ``"string"`` or ``"object"``.
    """
    e = episode
    row = {
        "schema_version": SCHEMA_VERSION,
        "episode_id": e.episode_id,
        "messages": e.messages,
        "reward": float(e.reward),
        "done": e.done,
        "tool_trace": e.tool_trace,
        "metrics": e.metrics,
        "verify_metrics": {
            "outcome": e.outcome,
            "min_reward": float(e.min_reward),
            "verdict": e.passed,
        },
        "artifacts": {"final_observation": e.final_observation},
        "task": e.task,
        "extra": {
            "index": e.index,
            "repeat": e.repeat,
            "max_turns": e.max_turns,
            "prompt_style": e.prompt_style,
            "sampling": e.sampling,
            "backend": e.backend,
            "server": e.server,
            "server_reports": e.server_reports,
            "reason": e.reason,
            "seeded": e.seeded,
            # what decided the verdict: the env's own word, or a threshold (ours or guessed)
            "judged_by": e.decision.basis if e.decision is not None else "",
            "verdict_rule": e.decision.rule_text() if e.decision is not None else "",
            # only on rows an agent program played (as ``attempt`` only on a replayed one)
            **agent_fields(getattr(e, "agent", None)),
        },
        "env": e.env,
        "seed": e.seed,
        "policy": e.policy,
        "model": e.model,
        "tools": e.tools,
        "test": test,
        "passed": e.passed if passed is None else passed,
    }
    if e.judge is not None:
        row["judge"] = dict(e.judge)
    return stable_row(row, tool_arguments)


def agent_fields(agent: dict[str, Any] | None) -> dict[str, Any]:
    """``extra``'s ``agent``, ``agent_version`` and the agent's own seconds of a row an agent
    program played."""
    if not agent:
        return {}
    fields = {"agent": agent["name"], "agent_version": agent["version"]}
    for key in ("startup_s", "stop_s"):
        if agent.get(key) is not None:
            fields[f"agent_{key}"] = agent[key]
    return fields


def placeholder_row(
    spec: EpisodeSpec, reason: str, *, test: str, tool_arguments: str = "string"
) -> dict[str, Any]:
    """The row of an episode that errored before it finished: what its spec says,
    nothing played, and the error as its ``failure``."""
    family, _, variant = spec.env.partition(":")
    row = {
        "schema_version": SCHEMA_VERSION,
        "episode_id": spec.episode_id,
        "messages": [],
        "reward": 0.0,
        "done": False,
        "tool_trace": [],
        "metrics": metrics_section(),
        "verify_metrics": {"outcome": "error", "min_reward": 0.0, "verdict": False},
        "artifacts": {"final_observation": ""},
        "task": task_section(family, variant, spec.config),
        "extra": {
            "index": spec.index,
            "repeat": spec.repeat,
            "max_turns": None,
            "prompt_style": None,
            "sampling": None,
            "backend": "embedded",
            "server": None,
            "server_reports": None,
            "reason": reason,
            "seeded": True,
            "judged_by": "",
            "verdict_rule": "",
        },
        "env": spec.env,
        "seed": spec.seed,
        "policy": spec.policy,
        "model": spec.model,
        "tools": [],
        "test": test,
        "passed": False,
    }
    return with_failure(stable_row(row, tool_arguments), "error", reason)


#: a failure's ``outcome`` -> the test's outcome it stands for
TEST_OUTCOME = {"failed": "failed", "error": "error", VERDICT_FAILED: "passed"}


def with_failure(row: dict[str, Any], outcome: str, message: str) -> dict[str, Any]:
    """``row`` as ``failures.jsonl`` holds it: ``outcome`` is ``failed`` (the test failed),
    ``error`` (the episode errored) or ``verdict-failed`` (the test passed, the env's verdict
    did not: not fit to train on under ``--openenv-train-on=verdict``). Both outcomes are
    kept: ``test_outcome`` (passed / failed / error) and ``verdict`` (the env's, at the
    threshold the run used)."""
    row["failure"] = {
        "outcome": outcome,
        "test_outcome": TEST_OUTCOME[outcome],
        "verdict": bool(row["verify_metrics"]["verdict"]),
        "message": message,
    }
    return row


@dataclass(frozen=True, slots=True)
class PreparedRow:
    """A finished episode's row and line, made before its item's report.

    Run-ahead makes it on the episode's own thread (``worker/runahead.py``), so the thread
    that runs every item's pytest protocol (the one all items wait on) only finishes the
    row at the report (``worker/reporting.py``). ``row`` is ``test``'s row as the verdict
    left it (``passed`` is the env's verdict, no failure, no price), ``line`` its JSON;
    neither is changed after: a report changes its own copy (``row_for``).
    """

    #: the ``--openenv-tool-arguments`` form the row was made in
    tool_arguments: str
    row: dict[str, Any]
    line: str

    @classmethod
    def of(cls, episode: PlayedEpisode, test: str, tool_arguments: str = "string") -> PreparedRow:
        row = episode_row(episode, test=test, tool_arguments=tool_arguments)
        return cls(tool_arguments, row, dumps_record(row))

    def row_for(self, test: str, passed: bool) -> dict[str, Any]:
        """A copy for one report to finish: ``test``'s row, the test's outcome ``passed``;
        the report may add a failure and price its own ``metrics``."""
        row = dict(self.row)
        row["metrics"] = dict(row["metrics"])
        if "judge" in row:  # the report prices its own copy
            row["judge"] = dict(row["judge"])
        row["test"] = as_text(test)
        row["passed"] = passed
        return row

    def line_of(self, row: dict[str, Any]) -> str:
        """The JSON line of ``row``, a ``row_for`` copy: the line made ahead when the report
        left it as it was made (the same test and outcome, no failure, no price)."""
        if (
            row["test"] == self.row["test"]
            and row["passed"] is self.row["passed"]
            and "failure" not in row
            and "cost_usd" not in row["metrics"]
        ):
            return self.line
        return dumps_record(row)


#: Characters JSON leaves raw in strings but line readers (``str.splitlines``, older
#: JavaScript) treat as line breaks: escaped so one row is always one line.
LINE_BREAKS_JSON_KEEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}

#: built once: json.dumps with options builds a new encoder per call
_ROW_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps_record(record: dict[str, Any]) -> str:
    """One JSONL line body: compact, UTF-8 kept readable, no NaN (JSON has none)."""
    text = _ROW_JSON.encode(record)
    for char, escaped in LINE_BREAKS_JSON_KEEPS.items():
        text = text.replace(char, escaped)  # only ever inside strings: lossless
    return text


SCALARS = (str, int, float, bool, type(None))
#: how ``messages`` carry tool-call arguments (``--openenv-tool-arguments``); first = default
CHAT_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def as_text(value: Any) -> str:
    """A string field: strings as they are, anything else as JSON text."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json_text(value)


def optional_text(value: Any) -> str | None:
    return None if value is None else as_text(value)


def flat(section: dict[str, Any] | None) -> dict[str, Any]:
    """Scalars kept; nested values become JSON text so each key has one type."""
    return {
        str(key): value if isinstance(value, SCALARS) else json_text(value)
        for key, value in (section or {}).items()
    }


def text_values(section: dict[str, Any] | None) -> dict[str, str | None]:
    return {str(key): optional_text(value) for key, value in (section or {}).items()}


def message_content(content: Any) -> str:
    """OpenAI content parts (``[{"type": "text", "text": ...}]``) joined to one string."""
    if isinstance(content, list) and all(
        isinstance(part, dict) and isinstance(part.get("text"), str) for part in content
    ):
        return "".join(part["text"] for part in content)
    return as_text(content)


#: what each tool call's ``arguments`` become in object form, in message order
ObjectArguments = Iterator[dict[str, Any] | None]


def tool_call(call: dict[str, Any], objects: ObjectArguments | None = None) -> dict[str, Any]:
    """One tool call; its arguments as JSON text, or the next of ``objects`` (object form)."""
    function = call.get("function") or {}
    text = function.get("arguments", "")
    return {
        "id": as_text(call.get("id")),
        "type": "function",
        "function": {
            "name": as_text(function.get("name")),
            "arguments": as_text(text) if objects is None else next(objects),
        },
    }


def chat_message(message: dict[str, Any], objects: ObjectArguments | None = None) -> dict[str, Any]:
    role, content = message.get("role"), message.get("content")
    if type(role) is str and type(content) is str:
        # the runner's own messages, already in shape: copied without the general walk
        if len(message) == 2:
            return {"role": role, "content": content}
        call_id, name = message.get("tool_call_id"), message.get("name")
        if len(message) == 4 and type(call_id) is str and type(name) is str:
            return {"role": role, "content": content, "tool_call_id": call_id, "name": name}
    out: dict[str, Any] = {
        "role": as_text(message.get("role")),
        "content": message_content(message.get("content")),
    }
    calls = message.get("tool_calls")
    if calls:
        out["tool_calls"] = [tool_call(call, objects) for call in calls]
    if message.get("tool_call_id") is not None:
        out["tool_call_id"] = as_text(message["tool_call_id"])
    if message.get("name") is not None:
        out["name"] = as_text(message["name"])
    for key, value in message.items():
        # other text a model returned (e.g. ``reasoning_content``) is kept, as text
        if key not in out and key not in CHAT_KEYS and isinstance(value, str):
            out[key] = value
    return out


def schema(value: Any) -> Any:
    """A JSON schema without empty objects (each is equivalent to the key being absent)."""
    if isinstance(value, dict):
        pruned = {key: schema(item) for key, item in value.items()}
        return {key: item for key, item in pruned.items() if item != {}}
    if isinstance(value, list):
        return [schema(item) for item in value]
    return value


def tool(spec: dict[str, Any]) -> dict[str, Any]:
    function = spec.get("function") or {}
    parameters = schema(function.get("parameters") or {"type": "object"})
    return {
        "type": "function",
        "function": {
            "name": as_text(function.get("name")),
            "description": as_text(function.get("description")),
            "parameters": parameters or {"type": "object"},
        },
    }


def trace_arguments(arguments: Any) -> dict[str, Any] | None:
    """A call's arguments as an object without empty objects (Parquet cannot store
    them), or None; text is parsed (a producer that kept only the text)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    pruned = schema(arguments) if isinstance(arguments, dict) else None
    return pruned or None


def trace_entry(entry: dict[str, Any]) -> dict[str, Any]:
    result = entry.get("result") or {}
    arguments = entry.get("arguments")
    text = entry.get("arguments_text")
    if text is None:
        text = arguments if isinstance(arguments, str) else optional_text(arguments)
    return {
        "tool_name": as_text(entry.get("tool_name")),
        "arguments": trace_arguments(arguments),
        "arguments_text": as_text(text),
        "result": trace_result(result),
    }


def trace_result(result: dict[str, Any]) -> dict[str, Any]:
    """A step's result: ours (``reward``) and OpenEnv's (``metadata.reward``) side by side."""
    reward = float(result.get("reward") or 0.0)
    return {
        "data": as_text(result.get("data")),
        "done": bool(result.get("done", False)),
        "reward": reward,
        "error": optional_text(result.get("error")),
        "metadata": {"reward": reward},
    }


#: the process's cache of row forms of tool lists, by list identity (the list is kept, so
#: its id is not reused): every episode of a family shares one list (``openai_tools``), so
#: each is normalised once; families per process are few
STABLE_TOOL_LISTS: BoundedMemo[int, tuple[list[Any], list[dict[str, Any]]]] = BoundedMemo(64)


def stable_tools(tools: list[Any]) -> list[dict[str, Any]]:
    hit = STABLE_TOOL_LISTS.get(id(tools))
    if hit is not None and hit[0] is tools:
        return hit[1]
    stable = [tool(t) for t in tools]
    STABLE_TOOL_LISTS.keep(id(tools), (tools, stable))
    return stable


def object_arguments(
    messages: list[dict[str, Any]], trace: list[dict[str, Any]]
) -> list[dict[str, Any] | None]:
    """Each tool call's arguments in object form, in message order.

    The runner writes one ``tool_trace`` entry per call, in the same order, so the
    calls take their entry's ``arguments``: the accepted call's object (the env
    checked its types), null for a refused one. A row whose trace does not line up
    with its calls (not the runner's) has each call's text parsed instead.
    """
    calls = [call for message in messages for call in message.get("tool_calls") or ()]
    if len(calls) == len(trace):
        return [entry["arguments"] for entry in trace]
    return [trace_arguments((call.get("function") or {}).get("arguments")) for call in calls]


def stable_row(row: dict[str, Any], tool_arguments: str = "string") -> dict[str, Any]:
    """The row with every field in its one type (see the module docstring).

    ``tool_arguments``: one of ``TOOL_ARGUMENT_FORMS``, how ``messages`` carry them.
    """
    if tool_arguments not in TOOL_ARGUMENT_FORMS:
        raise ValueError(
            f"tool_arguments={tool_arguments!r}: expected one of {TOOL_ARGUMENT_FORMS}"
        )
    out = dict(row)
    messages = row.get("messages") or []
    out["tool_trace"] = [trace_entry(e) for e in row.get("tool_trace") or []]
    objects = None
    if tool_arguments == "object":
        objects = iter(object_arguments(messages, out["tool_trace"]))
    out["messages"] = [chat_message(m, objects) for m in messages]
    out["tools"] = stable_tools(row.get("tools") or [])
    out["reward"] = float(row.get("reward") or 0.0)
    out["done"] = bool(row.get("done"))
    out["task"] = text_values(row.get("task"))
    for section in ("metrics", "verify_metrics", "artifacts", "extra"):
        out[section] = flat(row.get(section))
    out["model"] = optional_text(row.get("model"))
    for key in ("episode_id", "env", "policy", "test"):
        out[key] = as_text(row.get(key))
    return out
