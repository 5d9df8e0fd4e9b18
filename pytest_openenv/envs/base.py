"""The interfaces an environment is made of: a family adapter and a backend.

A *backend* is the transport: it holds one live env (an in-process engine, or a
WebSocket session with a deployed OpenEnv server) and speaks OpenEnv's
observation shape (``observation`` dict, ``reward``, ``done``).

A *family adapter* knows what the env means. ``EnvFamily`` is six small
interfaces, one per concern; a family implements the first three and may leave
the rest to their defaults:

- ``Prompts``: the system prompt, the task, each action's result (``describe_*``);
- ``ToolCalls``: the tools and the action a call becomes (``tools``, ``to_action``);
- ``Backends``: a fresh backend per episode (``embedded_backend``, ``remote_backend``);
- ``Verdict``: turns allowed and what a passing episode needs (``verdict.PassRule``);
- ``Teachers``: the scripted, random and expert policies' moves (none);
- ``Hosting``: whether a deployed server hosts this env (any server that fits).

The same adapter drives either backend, so an embedded episode and a remote one
produce records that look alike.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

# defined with every other exception; importable here, where implementers look for them
from ..errors import ActionRejected as ActionRejected
from ..errors import EnvConfigError as EnvConfigError
from ..errors import EnvUnavailable as EnvUnavailable
from ..proposals import ProposedCall as ProposedCall
from ..util.memo import BoundedMemo
from .verdict import PassRule

#: ``--openenv-max-turns`` when neither the user nor the family says otherwise
DEFAULT_MAX_TURNS = 10


@dataclass(frozen=True)
class StepResult:
    """One observation in OpenEnv's shape."""

    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolSpec:
    """A function tool in OpenAI's format."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def single_argument(call: ProposedCall, tool: str, argument: str, what: str) -> Any:
    """The one argument of a one-argument tool; ``ActionRejected`` names what was wrong."""
    if call.name != tool:
        raise ActionRejected(f"unknown tool {call.name!r}; the only tool is {tool}")
    extra = sorted(set(call.arguments) - {argument})
    if extra:
        raise ActionRejected(f"unexpected argument(s) {extra}; {tool} takes only {argument}")
    if argument not in call.arguments:
        raise ActionRejected(f"missing argument {argument} ({what})")
    return call.arguments[argument]


class Backend(ABC):
    """One live env session. Not shared between episodes."""

    #: ``embedded`` or ``remote``; stored in every record.
    kind: ClassVar[str] = "embedded"
    #: where the env lives (server URL without credentials), if anywhere
    location: str | None = None

    @abstractmethod
    def reset(self, *, seed: int, episode_id: str, **options: Any) -> StepResult: ...

    @abstractmethod
    def step(self, action: dict[str, Any]) -> StepResult: ...

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        pass

    def limit_time(self, seconds: float | None) -> None:  # noqa: B027 - optional hook
        """The episode must end within ``seconds`` from now (None: no limit).

        Called once right after the backend is opened; backends that wait on a
        network bound their waits by it, so an episode never outlives its timeout.
        """


# -- the family adapter, one small interface per concern ------------------------------------
# A family implements the five abstract methods of the first three; the last three have
# defaults that fit an env with no built-in teacher, a reward threshold as its verdict and
# no way to tell what a server hosts. ``EnvFamily`` at the bottom is all of them at once.


class Prompts(ABC):
    """What the model reads: the system prompt, the task, the result of each action."""

    #: Shown as the system prompt when the user gives none.
    system_prompt: ClassVar[str] = (
        "You are an agent acting in an environment through tools. Call exactly one tool per turn."
    )

    @abstractmethod
    def describe_task(self, first: StepResult) -> str:
        """The first user message: the task and the opening observation."""

    @abstractmethod
    def describe_result(self, call: ProposedCall, result: StepResult) -> str:
        """The tool message after an accepted action."""

    def task_info(self, first: StepResult, prompt: str) -> dict[str, Any]:
        """The record's ``task`` (fixed keys across families): the prompt and a reference answer."""
        return {"prompt": prompt, "answer": None}

    #: ``--openenv-prompt-style`` values the family can write; ``native`` is its own wording,
    #: ``openenv`` what OpenEnv's harness (``openenv collect``) writes for the same env.
    prompt_styles: ClassVar[tuple[str, ...]] = ("native",)
    #: whose wording prompts, tools and tool results follow (``use_prompt_style``)
    prompt_style: str = "native"

    def use_prompt_style(self, style: str) -> None:
        """Write prompts in ``style`` (one of ``prompt_styles``); called once after construction.

        Raise ``EnvConfigError`` for a style the family cannot write.
        """
        if style not in self.prompt_styles:
            raise EnvConfigError(
                f"env family {getattr(self, 'name', type(self).__name__)!r} has no {style!r} "
                f"prompt style (it writes: {', '.join(self.prompt_styles)}); OpenEnv's harness "
                "wording exists for openspiel and reasoning_gym"
            )
        self.prompt_style = style
        self.__dict__.pop("_openai_tools", None)  # the tools may read differently

    def default_system_prompt(self) -> str:
        """The system message when ``--openenv-system-prompt`` is not given ('' sends none)."""
        return self.system_prompt


#: argument texts a family keeps parsed (``ToolCalls.argument_texts``)
ARGUMENT_TEXTS_KEPT = 4096


class ToolCalls(ABC):
    """What the model may call, and the backend action each call becomes."""

    @abstractmethod
    def tools(self) -> list[ToolSpec]: ...

    @abstractmethod
    def to_action(self, call: ProposedCall, current: StepResult) -> dict[str, Any]:
        """Turn a tool call into a backend action; raise ``ActionRejected`` if invalid."""

    def reported_error(self, result: StepResult) -> str | None:
        """The error the env reports inside an accepted step's observation (an action that
        failed without the server refusing it), counted as a tool error; None: none."""
        return None

    def openai_tools(self) -> list[dict[str, Any]]:
        """``tools()`` in OpenAI format, built once: every record of the family shares it."""
        cached = self.__dict__.get("_openai_tools")
        if cached is None:
            cached = self.__dict__["_openai_tools"] = [t.to_openai() for t in self.tools()]
        return cached

    @property
    def argument_texts(self) -> BoundedMemo[str, tuple[dict[str, Any], str]]:
        """The family's cache of argument texts its tools were called with and what each
        parses to, kept by the episode loop across episodes (``loop.parse_arguments``)."""
        memo = self.__dict__.get("_argument_texts")
        if memo is None:
            memo = self.__dict__.setdefault("_argument_texts", BoundedMemo(ARGUMENT_TEXTS_KEPT))
        return memo


class Backends(ABC):
    """Where an episode's env lives: a fresh backend per episode, embedded or remote."""

    name: ClassVar[str]
    #: episodes can run in this process, without ``--openenv-server``
    has_embedded_engine: ClassVar[bool] = True

    @abstractmethod
    def embedded_backend(self) -> Backend:
        """A fresh in-process backend for one episode."""

    def remote_backend(self, server_url: str) -> Backend:
        """A fresh backend for one episode on the deployed server ``server_url``, usually
        ``envs.remote.backend.RemoteBackend(server_url)``."""
        raise EnvConfigError(f"env family {self.name!r} cannot run on a remote server")

    def reset_options(self, *, seed: int, episode_id: str) -> dict[str, Any]:
        """Extra fields for the reset request (beyond seed and episode id)."""
        return {}


class Verdict:
    """How many turns an episode gets and what a passing one needs.

    The default: ``DEFAULT_MAX_TURNS``, and a pass at reward >= ``default_min_reward`` once
    the env says done. ``pass_rule`` is the family's rule; ``envs/verdict.decide`` applies
    it (with the run's and the marker's overrides), and ``outcome`` names the result.
    """

    #: An episode passes iff reward >= this, unless ``--openenv-min-reward`` says otherwise.
    default_min_reward: ClassVar[float] = 0.0
    #: False: the env never ends an episode itself (it has no terminal state), so an episode
    #: is judged when the turn limit ends it instead of counting as unfinished
    has_terminal_state: ClassVar[bool] = True
    #: the verdict reads the env's state after the episode (an outcome stated only there)
    reads_final_state: ClassVar[bool] = False

    def default_max_turns(self) -> int:
        """Policy turns an episode gets when ``--openenv-max-turns`` is not set."""
        return DEFAULT_MAX_TURNS

    def default_turns_words(self) -> str:
        """Whose turn limit an episode had when no option set it, in words."""
        return f"the {getattr(self, 'name', 'env')} family's default"

    def verdict_warning(self, min_reward: float | None) -> str | None:
        """Why this run's verdict is a guess, said once at start; None: it is not."""
        return None

    def pass_rule(self) -> PassRule:
        """What a passing episode needs, when neither the run nor the marker says otherwise."""
        return PassRule(self.default_min_reward, at_turn_limit=not self.has_terminal_state)

    def passes(self, reward: float) -> bool:
        """``pass_rule``'s test of a total reward (success fields aside)."""
        return self.pass_rule().holds(reward)

    def outcome(self, reward: float, done: bool, status: str | None = None) -> str:
        """The family's word for how an episode went, for records, summaries and snapshots.

        ``status`` is the verdict (``pass``, ``fail``, ``unfinished``) when it is known; the
        default words are the verdict itself.
        """
        if status is not None:
            return status
        if not done:
            return "unfinished"
        return "pass" if self.passes(reward) else "fail"


class Teachers:
    """The moves the built-in policies play: ``scripted``, ``random`` and ``expert``.

    The default: scripted plays the first legal call, when ``legal_calls`` lists them;
    there is no expert.
    """

    name: ClassVar[str]
    #: Whether ``expert_call`` can answer (``--openenv-policy=expert``) for some variants.
    offers_expert: ClassVar[bool] = False

    def scripted_call(self, current: StepResult) -> ProposedCall | None:
        """The scripted policy's move (first legal action, or an oracle answer)."""
        legal = self.legal_calls(current)
        return legal[0] if legal else None

    def legal_calls(self, current: StepResult) -> list[ProposedCall] | None:
        """Every legal call now, when the env can enumerate them (random policy)."""
        return None

    def builtin_policy_problem(self, policy: str) -> str | None:
        """Why the built-in policy ``policy`` (``scripted``, ``random``...) cannot play this
        env as its name says, or None if it can.

        A family that cannot honour one says so here: the run is then a usage error at
        start, never a silent stand-in (a "random" row that played the oracle answer).
        """
        return None

    def expert_problem(self) -> str | None:
        """Why ``expert_call`` cannot answer for this variant and backend, or None if it can.

        Asked once at start-up when the policy is ``expert``, so that a misfit is one
        usage error rather than an error in every episode.
        """
        if self.offers_expert:
            return None
        return f"env family {self.name!r} has no expert teacher"

    def expert_call(
        self, current: StepResult, *, seed: int, repeat: int = 0
    ) -> ProposedCall | None:
        """The expert's move now (a search, so only asked for when a policy wants it).

        ``seed`` is the episode's and ``repeat`` its repeat index: the same pair plays
        the same moves. Raise ``EnvUnavailable`` when the move cannot be worked out.
        """
        return None

    def default_policy(self) -> str:
        """The teacher an episode gets when no policy is named: the best built-in one.

        ``expert`` where ``expert_call`` can play this variant, else ``scripted`` (the
        first legal move, or a family's oracle answer).
        """
        return "expert" if self.expert_problem() is None else "scripted"


class Hosting:
    """Whether a deployed server hosts this env (asked before the run and in every episode;
    ``envs/remote/hosting``). The default: any server that takes ``action_fields`` will do.
    """

    #: Action fields ``to_action`` always sends: a server whose schema lacks one hosts
    #: another kind of env (checked in ``hosting.kind_mismatch``).
    action_fields: ClassVar[tuple[str, ...]] = ()
    #: the ``--openenv-server`` URLs episodes run on (``bind_servers``); empty: embedded
    servers: tuple[str, ...] = ()
    #: what the process knows of its servers (``remote.hosting.KnownServers``: schemas and
    #: metadata read once per run), set before ``bind_servers``; None: read them yourself
    known: Any = None

    def bind_servers(self, servers: tuple[str, ...]) -> None:
        """The ``--openenv-server`` URLs episodes will run on (empty: embedded).

        Called once after construction. Raise ``EnvConfigError`` if the family
        cannot run that way (e.g. a generic family with no server to read from).
        """
        self.servers = tuple(servers)

    def hosted_by(self, report: Any) -> dict[str, Any] | None:
        """What a server hosts, in this family's terms, from its ``hosting.ServerReport``.

        None when the server cannot say. The answer is stored in every record
        (``extra.server_reports``) and compared by ``hosting_mismatch``.
        """
        return None

    def hosting_mismatch(self, hosted: dict[str, Any]) -> str | None:
        """Why a server hosting ``hosted`` is not this env, naming both; None: it is."""
        return None

    def start_warnings(self) -> list[str]:
        """What a run on deployed servers should hear once at start (none by default)."""
        return []


class EnvFamily(Prompts, ToolCalls, Backends, Verdict, Teachers, Hosting):
    """A family adapter, built once per (variant, config) and shared by episodes.

    Constructing it validates the variant and config (raise ``EnvConfigError``
    with a message naming what is wrong and what would be right); it must not
    import heavy engines at construction unless validation needs them.
    """

    #: The family name used before the colon in ``family:variant``.
    name: ClassVar[str]

    def __init__(self, variant: str, config: dict[str, Any]) -> None:
        self.variant = variant
        self.config = dict(config)
        #: canonical JSON of the config, stored in every record's ``task``
        self.config_json = json.dumps(self.config, sort_keys=True, ensure_ascii=False)

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.variant}"
