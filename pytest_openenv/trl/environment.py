"""``environment_factory``: an env family as the class TRL's ``GRPOTrainer`` plays.

TRL drives an environment from outside: ``reset(**row)``, then one method call per tool
call the model makes, then the reward functions read the instance. The plugin's episode
loop (``episode/loop.run_episode``) drives a policy from inside: it asks for a reply each
turn. Each instance joins the two by running ``run_episode`` in a thread of its own whose
policy is the trainer: a turn waits for the next tool call TRL makes, and the call's tool
message goes back to TRL as the method's return value. So the prompt, the tool results,
the tool errors, the turn limit and the verdict are the plugin's own, not a copy of them.

When TRL stops calling tools (the model's completion ended without a call), the episode
goes on as a run would go on with a policy that answers nothing more: each turn left is a
turn without a tool call, until the turn limit or the env ends it, and the run's verdict
follows (an unfinished game fails).

One difference from a run remains: a run applies every call of one reply in one turn; TRL
calls the methods one by one, so each call here is a turn of its own (the turn limit counts
calls when a model makes several at once).
"""

from __future__ import annotations

import inspect
import json
import keyword
import queue
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Literal

from ..envs.base import EnvFamily, ToolSpec
from ..envs.registry import build_family
from ..episode.loop import EnvFactory, Limits, run_episode
from ..episode.result import Episode
from ..episode.spec import EpisodeSpec
from ..errors import ActionRejected, TrainingSetupError
from ..policies.base import Policy, Reply, ToolCall, Turn

#: what an instance itself needs under these names: no tool may take them
RESERVED = frozenset(("reset", "reward", "passed", "episode", "error", "rule", "get_reward"))
#: the episode is over when TRL calls a tool again (the loop's own words)
OVER = "the episode is already over; no further calls are accepted"
_JSON_TYPES: dict[str, Any] = {
    "integer": int,
    "number": float,
    "string": str,
    "boolean": bool,
    "object": dict,
}
#: a parameter whose schema names no type takes any JSON value
_ANY_JSON = str | int | float | bool | dict | list


class _Setup:
    """What every instance of one environment class shares."""

    def __init__(
        self,
        family: EnvFamily,
        servers: tuple[str, ...],
        limits: Limits,
        system_prompt: str | None,
    ) -> None:
        self.family = family
        self.env = EnvFactory(family, servers)
        self.limits = limits
        self.system_prompt = system_prompt
        rule = family.pass_rule().overridden(min_reward=limits.min_reward, judge_at=limits.judge_at)
        #: the verdict's rule in words (``PassRule.describe``)
        self.rule = rule.describe()

    def first_messages(self) -> list[dict[str, str]]:
        """A dataset row's ``prompt``: the run's system message, and the user message
        ``reset`` fills with the task (TRL appends what ``reset`` returns to it)."""
        prompt = self.family.default_system_prompt()
        if self.system_prompt is not None:
            prompt = self.system_prompt
        system = [{"role": "system", "content": prompt}] if prompt else []
        return [*system, {"role": "user", "content": ""}]


class _Trainer(Policy):
    """The policy of an episode played from TRL: each turn waits for TRL's next call."""

    name: ClassVar[str] = "trl"

    def __init__(self, events: queue.Queue[Any], replies: queue.Queue[Reply]) -> None:
        self.events = events
        self.replies = replies

    def act(self, turn: Turn) -> Reply:
        self.events.put(turn)
        return self.replies.get()


class _Game:
    """One episode, played in its own thread a tool call at a time."""

    def __init__(self, setup: _Setup, seed: int) -> None:
        self.events: queue.Queue[Any] = queue.Queue()
        self.replies: queue.Queue[Reply] = queue.Queue()
        self.result: Episode | None = None
        self.error: BaseException | None = None
        self.calls = 0
        spec = EpisodeSpec(
            env=setup.family.spec,
            index=seed,
            seed=seed,
            policy=_Trainer.name,
            config=setup.family.config_json,
            min_reward=setup.limits.min_reward,
        )
        policy = _Trainer(self.events, self.replies)

        def play() -> None:
            try:
                episode = run_episode(
                    spec, setup.env, policy, limits=setup.limits, system_prompt=setup.system_prompt
                )
            except BaseException as exc:  # handed to the trainer's thread, raised there
                self.events.put(exc)
            else:
                self.events.put(episode)

        threading.Thread(target=play, name=f"pytest-openenv {spec.episode_id}", daemon=True).start()
        self.latest = self._next()

    def _next(self) -> Turn | Episode:
        event = self.events.get()
        if isinstance(event, BaseException):
            self.error = event
            raise event
        if isinstance(event, Episode):
            self.result = event
        return event

    @property
    def over(self) -> bool:
        return self.result is not None or self.error is not None

    def first_prompt(self) -> str:
        """The task, as the row's first user message holds it."""
        messages = self.latest.messages
        return str(next(m["content"] for m in messages if m["role"] == "user"))

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Play one tool call; the tool message the episode answered it with."""
        if self.over:
            raise ActionRejected(OVER)
        self.calls += 1
        call = ToolCall(id=f"call_{self.calls:03d}", name=name, arguments=json.dumps(arguments))
        self.replies.put(Reply(tool_calls=(call,)))
        latest = self.latest = self._next()
        for message in reversed(latest.messages):
            if message.get("role") == "tool" and message.get("tool_call_id") == call.id:
                return str(message["content"])
        raise ActionRejected(OVER)  # the turn limit had ended the episode before this call

    def finish(self) -> Episode | None:
        """The finished episode, playing turns without a tool call until it ends (None: it
        errored, as a run's row would say)."""
        while not self.over:
            self.replies.put(Reply())
            try:
                self.latest = self._next()
            except Exception:
                return None
        return self.result


class OpenEnvEnvironment:
    """The base of the classes ``environment_factory`` builds; see that function."""

    _setup: ClassVar[_Setup]

    def __init__(self) -> None:
        self._game: _Game | None = None

    def reset(self, **columns: Any) -> str:
        """Start the episode of the row's ``seed``; its first user message (the task)."""
        seed = columns.get("seed")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TrainingSetupError(
                f"a row gave reset seed={seed!r}: the train_dataset needs an integer `seed` "
                "column (pytest_openenv.trl.seed_dataset builds one)"
            )
        if self._game is not None:
            self._game.finish()  # the thread of an episode TRL left ends
        self._game = _Game(self._setup, seed)
        return self._game.first_prompt()

    def _play(self, name: str, arguments: dict[str, Any]) -> str:
        if self._game is None:
            raise ActionRejected("no episode: reset was not called")
        return self._game.call(name, arguments)

    def _finished(self) -> Episode | None:
        return self._game.finish() if self._game is not None else None

    @property
    def episode(self) -> Episode | None:
        """The finished episode, as a run would record it (None: it errored or never began)."""
        return self._finished()

    @property
    def error(self) -> str | None:
        """Why the episode errored (a fault outside the model, as a run's error row)."""
        self._finished()
        game = self._game
        return f"{type(game.error).__name__}: {game.error}" if game and game.error else None

    @property
    def reward(self) -> float | None:
        """The env's total reward for the episode (None: it errored)."""
        episode = self._finished()
        return episode.reward if episode is not None else None

    @property
    def passed(self) -> bool | None:
        """The verdict a run gives the episode (None: it errored)."""
        episode = self._finished()
        return episode.passed if episode is not None else None

    @property
    def rule(self) -> str:
        """What a passing episode needs, in words."""
        return self._setup.rule


def environment_factory(
    env: str,
    *,
    config: Mapping[str, Any] | None = None,
    server: str | Iterable[str] | None = None,
    min_reward: float | None = None,
    max_turns: int | None = None,
    judge_at: Literal["done", "turn-limit"] | None = None,
    system_prompt: str | None = None,
    prompt_style: str = "native",
    timeout: float | None = None,
) -> type[OpenEnvEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` playing ``env`` as a run would.

    ``env`` is a spec (``openspiel:tic_tac_toe``, ``reasoning_gym:chain_sum``); the
    keyword options are the run's (``--openenv-env-config``, ``--openenv-server``,
    ``--openenv-min-reward``, ``--openenv-max-turns``, ``--openenv-judge-at``,
    ``--openenv-system-prompt``, ``--openenv-prompt-style``, ``--openenv-timeout``).
    Its public methods are the env's tools (docstrings and type hints as TRL reads them);
    ``reset(**row)`` starts the row's ``seed`` and returns the first user message a run's
    row holds; after the game, ``reward`` is the env's reward and ``passed`` the verdict.
    """
    servers = (server,) if isinstance(server, str) else tuple(server or ())
    family = build_family(env, dict(config or {}), servers, prompt_style)
    limits = Limits(max_turns=max_turns, timeout=timeout, min_reward=min_reward, judge_at=judge_at)
    setup = _Setup(family, servers, limits, system_prompt)
    methods: dict[str, Any] = {"_setup": setup, "__doc__": _class_doc(setup)}
    for spec in family.tools():
        methods[spec.name] = tool_method(spec)
    name = "OpenEnv_" + re.sub(r"\W", "_", family.spec)
    return type(name, (OpenEnvEnvironment,), methods)


def _class_doc(setup: _Setup) -> str:
    return (
        f"{setup.family.spec} as a run plays it; an episode passes when {setup.rule}. "
        "Built by pytest_openenv.trl.environment_factory."
    )


def python_type(schema: Mapping[str, Any]) -> Any:
    """The type hint transformers turns back into ``schema`` (as near as hints go)."""
    if schema.get("enum"):
        return Literal.__getitem__(tuple(schema["enum"]))
    kind = schema.get("type")
    if isinstance(kind, list):
        hints = [python_type({**schema, "type": k}) for k in kind if k != "null"]
        hint = hints[0] if len(hints) == 1 else _union(hints)
        return hint | None if "null" in kind else hint
    if kind == "array":
        items = schema.get("items")
        return list[python_type(items)] if isinstance(items, Mapping) else list
    return _JSON_TYPES.get(str(kind), _ANY_JSON)


def _union(hints: list[Any]) -> Any:
    union = hints[0]
    for hint in hints[1:]:
        union = union | hint
    return union


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def tool_docstring(spec: ToolSpec) -> str:
    """A Google-style docstring (what ``transformers.utils.get_json_schema`` parses)."""
    properties = spec.parameters.get("properties") or {}
    lines = [_one_line(spec.description) or spec.name]
    if properties:
        lines += ["", "Args:"]
        for name, schema in properties.items():
            described = _one_line(schema.get("description")) if isinstance(schema, dict) else ""
            lines.append(f"    {name}: {described or name}")
    # no Returns section and no return hint: transformers would add a "return" key the
    # run's tool schema does not have
    return "\n".join(lines)


def tool_method(spec: ToolSpec) -> Callable[..., str]:
    """The method TRL exposes as ``spec``: its name, parameters, type hints and docstring."""
    _check_name(spec.name, f"tool {spec.name!r}")
    if spec.name in RESERVED or spec.name.startswith("_"):
        raise TrainingSetupError(
            f"tool {spec.name!r} cannot be a method of the TRL environment: the class needs "
            f"that name itself (reserved: {', '.join(sorted(RESERVED))}, and names with a "
            "leading underscore, which TRL does not expose)"
        )
    properties = spec.parameters.get("properties") or {}
    required = set(spec.parameters.get("required") or ())
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    for name, schema in properties.items():
        _check_name(name, f"argument {name!r} of tool {spec.name!r}")
        hints[name] = python_type(schema if isinstance(schema, Mapping) else {})
        default = inspect.Parameter.empty if name in required else None
        parameters.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[name]
            )
        )
    tool_name = spec.name

    def method(self: OpenEnvEnvironment, **arguments: Any) -> str:
        return self._play(tool_name, arguments)

    method.__name__ = method.__qualname__ = tool_name
    method.__doc__ = tool_docstring(spec)
    method.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    method.__annotations__ = dict(hints)
    return method


def _check_name(name: str, what: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise TrainingSetupError(
            f"{what} is no Python identifier, so TRL cannot call it as a method; "
            "rename it in the env (letters, digits and underscores, not a keyword)"
        )
