"""The generic ``openenv`` family: any OpenEnv server, no adapter code.

``--openenv-env=openenv:<label> --openenv-server URL`` reads the server's
``GET /schema`` once per run (the controller's read, handed to every worker) and
exposes one tool, ``step``, whose parameters are the server's action JSON schema
and whose description is the schema's own (the action's docstring, where OpenEnv
envs say what the fields mean). Action fields the env fixes itself (an optional
field that its state also holds, such as the game of OpenEnv's openspiel server)
are filled in from that state, not asked of the model.

``--openenv-env-config`` is sent as reset fields (OpenEnv's ``reset_kwargs``):
``{"dataset_name": "chain_sum", "size": 1}`` for OpenEnv's reasoning_gym server,
``{"context": ..., "task_prompt": ..., "expected_answer": ...}`` for its REPL env.
Where the server says which reset fields it takes (a ``reset`` schema in
``/schema``), or its state holds a field of the config after the reset, a field it
did not take is a usage error.

Observations are shown to the model as JSON; reward and done come from the
server, and the server validates actions (its ``VALIDATION_ERROR`` reaches the
model as a tool error). An episode passes when the env ends it with the full
reward (a total of at least 1: a solved reasoning_gym question, a won TextArena
game) or, where its last observation carries one of ``SUCCESS_FIELDS`` as true
or false, as that field says. ``<label>`` names the env in records; it must be a
name the server goes by (its ``/metadata`` name or the ``env_name`` its app was
made with, e.g. ``coding_env``).

There is no scripted move: drive it with an LLM policy or your own
``openenv_policy`` fixture.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from ..util.endpoints import ServerURL
from ..util.secrets import HIDDEN, names_a_secret
from .base import (
    ActionRejected,
    Backend,
    EnvConfigError,
    EnvFamily,
    EnvUnavailable,
    ProposedCall,
    StepResult,
    ToolSpec,
)
from .remote.hosting import KnownServers, ServerFacts, Survey
from .verdict import PassRule, is_outcome_value

TOOL_NAME = "step"
SCHEMA_TIMEOUT = 10.0
#: fields every OpenEnv Action has that are plumbing, not the agent's choice
PLUMBING_FIELDS = ("metadata",)
#: reset fields set per episode, never by the env config
PER_EPISODE_FIELDS = ("seed", "episode_id")
#: where a server's ``GET /schema`` may describe its reset request (OpenEnv's own servers
#: publish none; their ``reset`` takes what the env's ``reset()`` names)
RESET_SCHEMA_KEYS = ("reset", "reset_request")
#: boolean observation fields in which an env gives its own verdict on the episode. Not
#: ``success``: OpenEnv's git, jupyter, terminal and REPL envs use it for "the last command
#: ran", which says nothing of the task
SUCCESS_FIELDS = ("solved", "won", "is_solved", "is_correct")
#: observation, metadata or state fields in which an env states the outcome in words
#: (OpenEnv's maze: ``metadata.status: "win"``; its chess env: ``result: "1-0"``)
OUTCOME_FIELDS = ("status", "result", "outcome", "winner", "game_result", "game_status")


#: boolean observation fields in which an env says the last action failed (BrowserGym's)
ERROR_FLAGS = ("last_action_error",)
#: observation or metadata fields that carry the error of an action that failed (BrowserGym's
#: ``error`` text, an MCP env's ``error: {error_type, message}``)
ERROR_FIELDS = ("error",)
#: flags of an MCP tool result (``CallToolResult``) that say the tool failed
RESULT_ERROR_FLAGS = ("is_error", "isError")


def error_text(value: Any) -> str | None:
    """An error field's value as text; None where it holds no error (``""``, null, false)."""
    if value is None or value is False or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, dict):
        message = value.get("message")
        kind = value.get("error_type") or value.get("type")
        if isinstance(message, str) and message.strip():
            return f"{kind}: {message.strip()}" if kind else message.strip()
        return show(value) if value else None
    return value.strip() if isinstance(value, str) else show(value)


def result_error(result: Any) -> str | None:
    """The error an MCP tool result (``{"content": [...], "is_error": true}``) reports."""
    if not isinstance(result, dict) or not any(result.get(f) is True for f in RESULT_ERROR_FLAGS):
        return None
    texts = [
        str(part.get("text"))
        for part in result.get("content") or ()
        if isinstance(part, dict) and part.get("text")
    ]
    return " ".join(texts) or "the tool reported an error"


def reported_error(observation: dict[str, Any], metadata: dict[str, Any]) -> str | None:
    """The error an env reports inside a step's observation (see ``ERROR_FLAGS``,
    ``ERROR_FIELDS``, ``RESULT_ERROR_FLAGS``); None when it reports none."""
    flagged = any(observation.get(flag) is True for flag in ERROR_FLAGS)
    for source in (observation, metadata):
        for name in ERROR_FIELDS:
            text = error_text(source.get(name))
            if text is not None:
                return text
    found = result_error(observation.get("result"))
    if found is not None:
        return found
    return "the env reports the last action failed (last_action_error)" if flagged else None


def action_parameters(schema: dict[str, Any], fixed: tuple[str, ...] = ()) -> dict[str, Any]:
    """The server's action JSON schema as function-tool parameters, without plumbing and
    without the fields the env fixes (``fixed``)."""
    params = {k: v for k, v in schema.items() if k not in ("title", "description")}
    properties = dict(params.get("properties") or {})
    for name in (*PLUMBING_FIELDS, *fixed):
        properties.pop(name, None)
    params["type"] = "object"
    params["properties"] = properties
    required = [r for r in params.get("required") or [] if r in properties]
    if required:
        params["required"] = required
    else:
        params.pop("required", None)
    return params


def show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


#: what env names end in without saying anything (``echo_env``, ``EchoEnvironment``)
NAME_SUFFIXES = ("environment", "env")


def plain_name(name: str) -> str:
    """An env name reduced to what identifies it: ``Echo_Env`` and ``echo-environment`` -> echo."""
    plain = re.sub(r"[^a-z0-9]", "", name.lower())
    for suffix in NAME_SUFFIXES:
        if plain.endswith(suffix) and plain != suffix:
            return plain[: -len(suffix)]
    return plain


#: state or first-observation fields that name the game a server hosts
GAME_FIELDS = ("game_name", "game")


def hosted_game_name(report: Any) -> str | None:
    """The game a server's state (or first observation's metadata) names, if any."""
    sources = [report.state or {}]
    if report.first is not None:
        sources += [report.first.metadata, report.first.observation]
    for source in sources:
        for name in GAME_FIELDS:
            value = source.get(name)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def env_description(metadata: dict[str, Any] | None) -> str:
    """``/metadata``'s description, unless it is OpenEnv's filler (``"EchoEnvironment
    environment"``, made from the class name when an env gives none)."""
    metadata = metadata or {}
    text = str(metadata.get("description") or "").strip()
    name = str(metadata.get("name") or "").strip()
    if not text or (name and text == f"{name} environment"):
        return ""
    return text


def tools_prompt(tools: list[Any] | None) -> str:
    """An MCP-style env's tools (its ``list_tools`` action), as prompt lines; "" if none.

    Its one action carries ``tool_name`` and ``arguments``; without the names a model
    can only guess them.
    """
    lines = [
        f"- {tool.get('name')}: {tool.get('description') or ''} "
        f"(arguments: {show(tool.get('input_schema') or tool.get('inputSchema') or {})})"
        for tool in tools or ()
        if isinstance(tool, dict) and tool.get("name")
    ]
    if not lines:
        return ""
    return (
        f'Tools on this server (call {TOOL_NAME} with type "call_tool", tool_name and '
        "arguments):\n" + "\n".join(lines)
    )


CONFIRMED, NOT_CONFIRMED, REFUSED = "confirmed", "not confirmed", "refused"


def spelled_alike(sent: Any, held: Any) -> bool:
    """``held`` is ``sent`` as the server writes it: equal, or a string the server spelled
    out (``5 w`` -> ``5 w 0 1``: a FEN's move counters added; case and spacing)."""
    if show(sent) == show(held):
        return True
    if isinstance(sent, str) and isinstance(held, str):
        ours, theirs = sent.split(), held.split()
        return bool(ours) and [t.lower() for t in theirs[: len(ours)]] == [o.lower() for o in ours]
    return False


def answer_of(result: StepResult) -> str:
    """What a reset answered (observation and metadata), as comparable text."""
    return show([result.observation, result.metadata])


def shown_in_answer(first: StepResult, key: str, sent: Any) -> bool:
    """The reset's answer holds ``key`` as sent (a field the env echoes back)."""
    shown = [first.observation.get(key), first.metadata.get(key)]
    return any(v is not None and spelled_alike(sent, v) for v in shown)


def fields_to_try_alone(
    config: dict[str, Any], first: StepResult, state: dict[str, Any] | None
) -> list[str]:
    """Config fields that only a changed reset answer could show taken (neither the state
    nor the answer holds them), where the config has others that may have changed it: each
    needs a reset without it to tell whether it changed anything."""
    state = state or {}
    if len(config) < 2:
        return []
    return [
        key
        for key, sent in config.items()
        if state.get(key) is None and not shown_in_answer(first, key, sent)
    ]


def config_status(
    config: dict[str, Any],
    first: StepResult,
    state: dict[str, Any] | None,
    baselines: list[tuple[StepResult, dict[str, Any] | None]],
    answers_without: dict[str, str] | None = None,
) -> dict[str, str]:
    """Each env-config field: confirmed, not confirmed, or refused (see ``_check_config_taken``).

    ``baselines``: two resets without the config, each on its own session. Where they
    agree, a reset with the config that answered otherwise shows the config was taken;
    which field of it, only a reset without that field shows: ``answers_without`` holds
    those answers (``answer_of``) for the fields ``fields_to_try_alone`` names. A field
    no answer tells apart is not confirmed.
    """
    state = state or {}
    answers_without = answers_without or {}
    base_states = [b[1] or {} for b in baselines]
    base_answers = [answer_of(b[0]) for b in baselines]
    steady = len(baselines) == 2 and len(set(base_answers)) == 1
    answered_otherwise = steady and answer_of(first) != base_answers[0]
    status: dict[str, str] = {}
    for key, sent in config.items():
        held = state.get(key)
        if held is not None:
            if spelled_alike(sent, held):
                status[key] = CONFIRMED
                continue
            defaults = [s.get(key) for s in base_states]
            if len(defaults) == 2 and all(show(d) == show(held) for d in defaults):
                status[key] = REFUSED  # the state reads as if the field was never sent
            elif defaults and all(d is not None for d in defaults):
                status[key] = CONFIRMED  # the reset moved it off its default: taken
            else:
                status[key] = NOT_CONFIRMED
            continue
        if shown_in_answer(first, key, sent):
            status[key] = CONFIRMED
            continue
        # the answer changed; this field changed it only if the answer without it differs
        alone = len(config) == 1 and base_answers  # without it is without the config
        without = answers_without.get(key, base_answers[0] if alone else None)
        taken = answered_otherwise and without is not None and without != answer_of(first)
        status[key] = CONFIRMED if taken else NOT_CONFIRMED
    return status


#: JSON schema types an outcome field may have (a word, a flag, a winner's number)
OUTCOME_TYPES = frozenset({"string", "boolean", "integer", "number"})


def schema_types(prop: Any) -> set[str]:
    """The JSON types a schema property allows, null left out (``anyOf`` read too)."""
    if not isinstance(prop, dict):
        return set()
    found: set[str] = set()
    declared = prop.get("type")
    found |= set(declared) if isinstance(declared, list) else {declared} if declared else set()
    for option in prop.get("anyOf") or prop.get("oneOf") or ():
        found |= schema_types(option)
    return {t for t in found if isinstance(t, str)} - {"null"}


def outcome_fields_stated(schema: dict[str, Any], seen: tuple[Any, ...]) -> list[str]:
    """The success and outcome fields a server states an outcome in: ones its reset answer
    or state holds an outcome value in (``is_outcome_value``; a success field, a flag), and
    ones its ``/schema`` types as a word, flag or number that the reset left empty. A field
    that holds something else (``status: "ready"``) or an untyped one (an MCP ``result``)
    states none."""
    names = (*SUCCESS_FIELDS, *OUTCOME_FIELDS)
    values: dict[str, list[Any]] = {}
    for source in seen:
        for name in names:
            if isinstance(source, dict) and source.get(name) is not None:
                values.setdefault(name, []).append(source[name])
    stated = [
        name
        for name, held in values.items()
        if all(isinstance(v, bool) if name in SUCCESS_FIELDS else is_outcome_value(v) for v in held)
    ]
    for part in ("observation", "state"):
        properties = (schema.get(part) or {}).get("properties") or {}
        for name in names:
            types = schema_types(properties.get(name))
            if name not in values and types and types <= OUTCOME_TYPES:
                stated.append(name)
    return stated


def reset_fields_accepted(schema: dict[str, Any]) -> tuple[set[str], bool] | None:
    """The reset fields ``/schema`` says the server takes, and whether it takes others too;
    None: it does not say."""
    for key in RESET_SCHEMA_KEYS:
        reset = schema.get(key)
        if isinstance(reset, dict) and isinstance(reset.get("properties"), dict):
            return set(reset["properties"]), reset.get("additionalProperties") is not False
    return None


class GenericFamily(EnvFamily):
    name: ClassVar[str] = "openenv"
    has_embedded_engine: ClassVar[bool] = False
    #: the full reward of OpenEnv's graded envs (see ``pass_rule``)
    default_min_reward: ClassVar[float] = 1.0
    system_prompt: ClassVar[str] = (
        "You are an agent acting in an environment. Each observation is JSON. On each turn "
        f"call the {TOOL_NAME} tool once with an action that follows its schema."
    )

    def __init__(self, variant: str, config: dict[str, Any]) -> None:
        super().__init__(variant, config)
        reserved = sorted(set(config) & set(PER_EPISODE_FIELDS))
        if reserved:
            raise EnvConfigError(
                f"--openenv-env-config may not set {reserved} for {self.spec}: every episode "
                "resets with its own seed and id (--openenv-seed); the env config holds the "
                'env\'s other reset fields, e.g. {"dataset_name": "chain_sum", "size": 1}'
            )
        self._tool: ToolSpec | None = None
        self._description = ""
        #: an MCP-style server's own tools (``list_tools``), shown in the first prompt
        self._server_tools = ""
        #: action fields the env fixes (its state holds them), with the values sent
        self._fixed: dict[str, Any] = {}
        #: env-config fields nothing the server answered shows it took
        self.unconfirmed: tuple[str, ...] = ()

    #: the verdict may read an outcome the env states only in its state (``result``)
    reads_final_state: ClassVar[bool] = True

    def pass_rule(self) -> PassRule:
        """The env's own verdict where it states one: a ``SUCCESS_FIELDS`` flag, or an
        ``OUTCOME_FIELDS`` word (``status: "win"``, ``result: "1-0"``) in the last
        observation, its metadata or the state. Else a threshold the plugin guesses: the
        full reward of OpenEnv's graded envs (a solved reasoning_gym question, a won
        TextArena game score 1; a lost game's partial reward does not pass), on the last
        step where earlier steps scored too (a grid's step penalties before its +1 goal)."""
        return PassRule(
            self.default_min_reward,
            success_fields=SUCCESS_FIELDS,
            outcome_fields=OUTCOME_FIELDS,
            last_step_when_shaped=True,
            guessed=True,
        )

    def bind_servers(self, servers: tuple[str, ...]) -> None:
        super().bind_servers(servers)
        if not servers:
            raise EnvConfigError(
                f"the generic family ({self.spec}) runs on a deployed OpenEnv server: pass "
                "--openenv-server URL (e.g. http://127.0.0.1:8000 or https://user-space.hf.space)"
            )
        if self.known is None:
            self.known = KnownServers()
        server = ServerURL.parse(servers[0])
        facts = self.known.facts(server)
        action = (facts.schema or {}).get("action")
        if facts.schema is None:
            from .remote.backend import RemoteBackend

            # a server with neither is no OpenEnv server at all: say both, not just /schema
            ws = RemoteBackend(servers[0]).session_problem()
            sessions = (
                f"; it takes no WebSocket session either ({ws})"
                if ws
                else "; its /ws does take WebSocket sessions"
            )
            raise EnvConfigError(
                f"cannot read the action schema of {server.public}: "
                f"{facts.schema_problem or 'GET /schema failed'}{sessions} (the generic family "
                "needs an OpenEnv server that serves GET /schema and episodes over /ws, as "
                "openenv's create_app makes)"
            )
        if not isinstance(action, dict):
            raise EnvConfigError(
                f"GET {server.public}/schema has no 'action' JSON schema; is it an OpenEnv server?"
            )
        self._check_reset_fields(server, facts)
        self._description = env_description(facts.metadata)
        survey = self.known.survey(server, self.config_json, lambda: self._survey(servers[0]))
        self._check_config_taken(server, survey)
        self._fixed = self._fixed_fields(action, survey)
        self._server_tools = tools_prompt(survey.tools)
        self._tool = self._tool_for(action)

    def _check_reset_fields(self, server: ServerURL, facts: ServerFacts) -> None:
        accepted = reset_fields_accepted(facts.schema or {})
        if accepted is None or not self.config:
            return
        names, open_ended = accepted
        unknown = sorted(set(self.config) - names)
        if unknown and not open_ended:
            raise EnvConfigError(
                f"--openenv-env-config sets reset field(s) {unknown} that {server.public} does "
                f"not take (its GET /schema reset fields: {sorted(names)})"
            )

    def _survey(self, server: str) -> Survey:
        """Sessions before the run: with an env config, two resets without it first (each
        on a fresh session: what the server serves by default, and whether that holds
        still), then one with it, reading the state (and an MCP-style env's tools) after
        each; where the answer changed and some fields show nowhere, one reset without each
        of those (which of them changed it). A refused reset is a usage error; a server that
        cannot be reached now leaves it unknown (the episodes will say why)."""
        baselines: list[tuple[StepResult, dict[str, Any] | None]] = []
        try:
            if self.config:
                for _ in range(2):
                    baselines.append(self._checked_reset(server, {}))
            first, state, tools = self._checked_reset(server, dict(self.config), tools=True)
            answers_without = self._answers_without(server, first, state, baselines)
        except EnvUnavailable as exc:
            return Survey(problem=str(exc))
        return Survey(
            state=state,
            tools=tools,
            observation=first.observation,
            metadata=first.metadata,
            config_status=config_status(self.config, first, state, baselines, answers_without),
        )

    def _answers_without(
        self,
        server: str,
        first: StepResult,
        state: dict[str, Any] | None,
        baselines: list[tuple[StepResult, dict[str, Any] | None]],
    ) -> dict[str, str]:
        """The reset answer without each field ``fields_to_try_alone`` names, where the
        config changed a steady answer (else no field can be told taken by the answer)."""
        answers = {answer_of(b[0]) for b in baselines}
        if len(answers) != 1 or answer_of(first) in answers:
            return {}
        found: dict[str, str] = {}
        for key in fields_to_try_alone(self.config, first, state):
            others = {k: v for k, v in self.config.items() if k != key}
            try:
                found[key] = answer_of(self._reset_once(server, others)[0])
            except ActionRejected as exc:  # refused without it: the server reads the field
                found[key] = f"refused: {exc}"
        return found

    def _checked_reset(self, server: str, fields: dict[str, Any], *, tools: bool = False) -> Any:
        """``_reset_once``, a refusal made a usage error that names whose fault it is."""
        try:
            return self._reset_once(server, fields, tools=tools)
        except ActionRejected as exc:
            public = ServerURL.parse(server).public
            if not fields:  # nothing of the run's was sent: the server's own failure
                raise EnvConfigError(
                    f"{public} failed a plain reset (seed 0, no reset fields): {exc}; it "
                    "cannot start an episode whatever the run sends: the server needs fixing"
                ) from None
            raise EnvConfigError(
                f"{public} refused a reset with the env config as reset fields "
                f"({show(fields)}): {exc}"
            ) from None

    def _reset_once(self, server: str, fields: dict[str, Any], *, tools: bool = False) -> Any:
        """One session: reset with ``fields``, the state after it (and, with ``tools``, an
        MCP-style env's tool list); ``(first, state)`` or, with ``tools``, ``(first, state,
        tools)``."""
        from .remote.backend import RemoteBackend

        backend = RemoteBackend(server)
        backend.limit_time(SCHEMA_TIMEOUT)
        try:
            first = backend.reset(seed=0, episode_id="survey", **fields)
            state = backend.state_or_none()
            if not tools:
                return first, state
            found = None
            if "tool_name" in self._action_properties():
                try:
                    listed = backend.step({"type": "list_tools"}).observation.get("tools")
                except ActionRejected:
                    listed = None
                found = listed if isinstance(listed, list) else None
            return first, state, found
        finally:
            backend.close()

    def _action_properties(self) -> dict[str, Any]:
        server = ServerURL.parse(self.servers[0])
        action = ((self.known.facts(server).schema if self.known else None) or {}).get("action")
        return dict((action or {}).get("properties") or {}) if isinstance(action, dict) else {}

    def _check_config_taken(self, server: ServerURL, survey: Survey) -> None:
        """A config field the server's state holds, unchanged from what a reset without the
        config gives and not a spelling of what was sent, was dropped: OpenEnv's server
        drops reset fields its env's ``reset()`` does not name. A field the state shows
        otherwise (the reset normalised it, or the opponent has moved since) was taken."""
        state = survey.state or {}
        status = survey.config_status or {}
        self.unconfirmed = tuple(k for k in self.config if status.get(k) == NOT_CONFIRMED)
        for key, sent in self.config.items():
            if status.get(key) == REFUSED:
                # a credential's value (an hf_token field) is named, never shown
                hide = names_a_secret(key)
                raise EnvConfigError(
                    f"{server.public} did not take the reset field "
                    f"{key}={HIDDEN if hide else show(sent)} from --openenv-env-config: after "
                    f"the reset its state says {key}="
                    f"{HIDDEN if hide else show(state.get(key))}, as it does after a reset "
                    "without the field"
                )

    def start_warnings(self) -> list[str]:
        """What the run should hear once at start: env-config fields the server did not
        confirm taking."""
        if not self.unconfirmed or not self.servers:
            return []
        fields = ", ".join(self.unconfirmed)
        return [
            f"--openenv-env-config: {self.servers_shown()} shows nothing that says it took "
            f"the reset field(s) {fields} (neither its state nor its reset's answer differs "
            "from a reset without them); the rows record them as sent, not confirmed "
            "(task.config_not_confirmed)"
        ]

    def servers_shown(self) -> str:
        return ", ".join(ServerURL.parse(url).public for url in self.servers)

    def verdict_warning(self, min_reward: float | None) -> str | None:
        if min_reward is not None or not self.servers or self.known is None:
            return None
        server = ServerURL.parse(self.servers[0])
        schema = self.known.facts(server).schema or {}
        survey = self.known.survey(server, self.config_json, lambda: Survey())
        if outcome_fields_stated(schema, (survey.observation, survey.metadata, survey.state)):
            return None
        return (
            f"--openenv-env={self.spec}: {self.servers_shown()} states no outcome (no "
            f"{' / '.join((*SUCCESS_FIELDS, *OUTCOME_FIELDS))} field in its schema, state "
            "or reset answer that holds one: a win, loss or draw, a game still on, a flag; "
            "a service status such as 'ready' is none), so each verdict is a threshold the "
            "plugin guessed, not the "
            "env's verifier: the last step's reward >= 1 where earlier steps scored too, "
            "else the total reward >= 1; set --openenv-min-reward to the env's own pass mark"
        )

    def default_turns_words(self) -> str:
        return "the generic family's default"

    def task_info(self, first: StepResult, prompt: str) -> dict[str, Any]:
        info = super().task_info(first, prompt)
        # sent as reset fields, but nothing the server answered shows it took them
        info["config_not_confirmed"] = ", ".join(self.unconfirmed)
        return info

    @staticmethod
    def _fixed_fields(action: dict[str, Any], survey: Survey) -> dict[str, Any]:
        """Optional action fields the env's state holds (OpenEnv's openspiel server keeps
        ``game_name`` and ``game_params`` there): the env fixes them, so the tool sends the
        state's values and the model is not asked."""
        properties = action.get("properties") or {}
        required = set(action.get("required") or ())
        state = survey.state or {}
        return {
            name: state[name]
            for name in properties
            if name not in required and name not in PLUMBING_FIELDS and state.get(name) is not None
        }

    def _tool_for(self, action: dict[str, Any]) -> ToolSpec:
        title = action.get("title") or "the action"
        description = (
            f"Send one action to the environment ({self.variant}); the arguments are the "
            f"fields of {title}."
        )
        documented = str(action.get("description") or "").strip()
        if documented:  # the only place many envs say what the fields mean
            description += f"\n\n{documented}"
        return ToolSpec(
            name=TOOL_NAME,
            description=description,
            parameters=action_parameters(action, tuple(self._fixed)),
        )

    def tools(self) -> list[ToolSpec]:
        if self._tool is None:
            raise EnvConfigError(f"{self.spec} has no server bound; pass --openenv-server URL")
        return [self._tool]

    def embedded_backend(self) -> Backend:
        raise EnvConfigError(
            f"the generic family ({self.spec}) has no embedded engine: pass --openenv-server URL"
        )

    def remote_backend(self, server_url: str) -> Backend:
        from .remote.backend import RemoteBackend

        return RemoteBackend(server_url)

    def reset_options(self, *, seed: int, episode_id: str) -> dict[str, Any]:
        """The env config, sent as reset fields (OpenEnv's ``reset_kwargs``)."""
        return dict(self.config)

    def hosted_by(self, report: Any) -> dict[str, Any] | None:
        game = hosted_game_name(report)
        if not report.name and not report.env_names and not game:
            return None
        hosted: dict[str, Any] = {"name": report.name}
        if report.env_names:
            hosted["env_names"] = list(report.env_names)
        if game:
            hosted["game_name"] = game
        return hosted

    def hosting_mismatch(self, hosted: dict[str, Any]) -> str | None:
        """The label must be a name the server goes by, exactly once normalised
        (``plain_name``: ``echo`` = ``echo_env`` = ``EchoEnvironment``): its ``/metadata``
        name, the ``env_name`` its app was made with, a game its state names
        (``breakout``), or env and game together (``atari_breakout``)."""
        names = [n for n in (hosted.get("name"), *(hosted.get("env_names") or ())) if n]
        game = hosted.get("game_name")
        accepted = {plain_name(n) for n in names}
        if game:
            accepted |= {plain_name(game), *(plain_name(n) + plain_name(game) for n in names)}
        label = plain_name(self.variant)
        if label in accepted - {""}:
            return None
        known = " or ".join(repr(n) for n in names) or "no name"
        if game:
            known += f", hosting the game {game!r}"
        suggestion = names[-1] if names else game
        if game and names:
            suggestion = f"{names[-1]} (or openenv:{plain_name(names[-1])}_{game})"
        where = "GET /metadata, /list_environments" + (", its state" if game else "")
        return (
            f"it goes by {known} ({where}), which the label {self.variant!r} does not name "
            f"exactly; use --openenv-env=openenv:{suggestion}"
        )

    def describe_task(self, first: StepResult) -> str:
        lines = [f"Environment: {self.variant}."]
        if self._description:
            lines.append(self._description)
        if self._server_tools:
            lines.append(self._server_tools)
        lines.append(f"Observation: {show(first.observation)}")
        if first.metadata:  # e.g. a maze's layout: part of what the server shows the agent
            lines.append(f"Metadata: {show(first.metadata)}")
        if first.done:
            lines.append("The episode is already over.")
        else:
            lines.append(f"Call {TOOL_NAME} with your action.")
        return "\n".join(lines)

    def describe_result(self, call: ProposedCall, result: StepResult) -> str:
        reward = 0.0 if result.reward is None else result.reward
        metadata = f"Metadata: {show(result.metadata)}\n" if result.metadata else ""
        return (
            f"Observation: {show(result.observation)}\n{metadata}"
            f"Reward: {reward:g}. Done: {'yes' if result.done else 'no'}."
        )

    def to_action(self, call: ProposedCall, current: StepResult) -> dict[str, Any]:
        if call.name != TOOL_NAME:
            raise ActionRejected(f"unknown tool {call.name!r}; the only tool is {TOOL_NAME}")
        # The server validates against its own schema; its error comes back as a tool error.
        # Fields the env fixes are the env's, whatever the model sent.
        return {**call.arguments, **self._fixed}

    def reported_error(self, result: StepResult) -> str | None:
        return reported_error(result.observation, result.metadata)

    def scripted_call(self, current: StepResult) -> ProposedCall | None:
        return None

    def builtin_policy_problem(self, policy: str) -> str | None:
        if policy in ("scripted", "random"):
            return (
                "the generic family has no scripted move and cannot list legal actions of an "
                "unknown env; drive it with openai, anthropic, pkg.module:callable or an "
                "openenv_policy fixture"
            )
        return None
