"""One episode: an env session driven by a policy through a tool-calling loop.

Pure of pytest: the plugin calls ``run_episode`` and turns its result into an
item outcome. Mistakes of the agent (no tool call, bad JSON, unknown tool, wrong
types, illegal move) are tool errors the policy sees and pays a turn for; faults
of the infrastructure raise ``EpisodeError`` and make the item an *error*.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..envs.base import Backend, EnvFamily, ProposedCall, StepResult
from ..envs.remote.hosting import check_backend
from ..envs.remote.servers import RemoteServers
from ..envs.verdict import Decision, PassRule, decide
from ..errors import (
    ActionRejected,
    ContextExhausted,
    EnvUnavailable,
    EpisodeError,
    EpisodeTimeout,
    PolicyUnavailable,
    ServerMismatch,
)
from ..policies.base import Policy, Reply, ToolCall, Turn, Usage, check_answer_size
from ..util.endpoints import redact
from ..util.memo import BoundedMemo
from .record import metrics_section, task_section
from .result import Episode
from .spec import EpisodeSpec

NO_TOOL_CALL_REMINDER = "You did not call a tool. Reply with exactly one tool call: {names}."


@dataclass(frozen=True)
class Limits:
    #: None: the family's default (``EnvFamily.default_max_turns``)
    max_turns: int | None = None
    timeout: float | None = None
    min_reward: float | None = None
    #: ``--openenv-judge-at``: ``done`` or ``turn-limit``; None: the family's
    judge_at: str | None = None
    #: ``--openenv-episode-max-tokens``: prompt + completion tokens of all turns; past it
    #: the episode ends unfinished, a failure (inspect's ``token_limit``), never an error
    max_tokens: int | None = None


#: how an episode stopped by ``Limits.max_tokens`` says why (the reason starts with it)
TOKEN_LIMIT = "token_limit"


#: one encoder for every step: json.dumps with options builds a new encoder per call
CANONICAL_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)
#: argument texts longer than this are parsed every time: the repeated calls are short
PARSED_ARGUMENT_TEXT_LIMIT = 256
_SCALARS = (str, int, float, bool, type(None))
#: argument text -> (its object, canonical text); see ``parse_arguments``
ParsedArguments = BoundedMemo[str, tuple[dict[str, Any], str]]


def shorten(value: Any, limit: int = 300) -> str:
    """``repr`` for an error message, cut short: a model's runaway output is not echoed whole."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def parse_arguments(text: Any, seen: ParsedArguments | None = None) -> tuple[Any, str | None]:
    """A tool call's JSON arguments and their canonical text (None unless an object).

    ``seen``: texts parsed before (a policy repeats the same few calls, such as
    ``{"action_id": 4}``, across thousands of episodes). Raises ``ValueError`` for
    text that is not JSON.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected JSON text, got {type(text).__name__}")
    known = seen.get(text) if seen is not None else None
    if known is not None:
        return dict(known[0]), known[1]  # a copy: families may keep what they are given
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        return value, None
    canonical = CANONICAL_JSON.encode(value)
    if (
        seen is not None
        and len(text) <= PARSED_ARGUMENT_TEXT_LIMIT
        and all(isinstance(item, _SCALARS) for item in value.values())
    ):
        seen.keep(text, (dict(value), canonical))
    return value, canonical


@dataclass(frozen=True)
class EnvFactory:
    """Makes one backend per episode: embedded, or on one of the deployed servers.

    The server is the one in rotation with the fewest episodes of ``remote``'s process
    in flight (``envs/remote/rotation``). ``remote`` is what the process knows of its
    servers; the plugin's factories share the worker's, one made without it has its
    own. Users may override the ``openenv_env`` fixture with any object that has a
    ``family`` and an ``open(spec)`` returning a ``Backend``.
    """

    family: EnvFamily
    servers: tuple[str, ...] = ()
    remote: RemoteServers = field(default_factory=RemoteServers, compare=False, repr=False)

    def server_for(self, spec: EpisodeSpec) -> str | None:
        """The server episode ``spec`` prefers when all are equally busy (round-robin)."""
        if not self.servers:
            return None
        return self.servers[spec.index % len(self.servers)]

    def open(self, spec: EpisodeSpec) -> Backend:
        if not self.servers:
            return self.family.embedded_backend()
        lease = self.remote.lease(self.servers, index=spec.index)
        try:
            backend = self.family.remote_backend(lease.server)
        except BaseException:
            lease.close()
            raise
        attach = getattr(backend, "attach", None)
        if attach is not None:
            attach(self.remote, lease)  # the lease is given back when the backend closes
        else:  # a third-party backend: chosen by rotation, not counted in flight
            lease.close()
        return backend


def as_env_factory(factory: Any) -> Any:
    """``factory`` if it is one (routers are resolved before: ``defaults.resolve``)."""
    if not hasattr(factory, "family") or not callable(getattr(factory, "open", None)):
        raise TypeError(
            "openenv_env must return an env factory (an object with `family` and "
            "`open(spec)`, such as pytest_openenv.EnvFactory) or an object with "
            f"`for_episode(spec)` returning one; got {type(factory).__name__}"
        )
    return factory


class _Loop:
    """The mutable state of one episode while it runs."""

    def __init__(
        self,
        spec: EpisodeSpec,
        env: EnvFactory,
        policy: Policy,
        limits: Limits,
        system_prompt: str | None,
        clock: Callable[[], float],
        remote: RemoteServers | None = None,
    ) -> None:
        self.spec = spec
        self.family = env.family
        self.env = env
        #: what the process knows of its servers (whether each honours the seed)
        if remote is None and isinstance(getattr(env, "remote", None), RemoteServers):
            remote = env.remote
        self.remote = remote
        self.argument_texts = self.family.argument_texts
        self.policy = policy
        self.limits = limits
        self.clock = clock
        self.started = clock()
        self.deadline = None if limits.timeout is None else self.started + limits.timeout
        self.max_turns = limits.max_turns or self.family.default_max_turns()
        self.tool_specs = self.family.tools()
        self.tools = self.family.openai_tools()
        self.tool_names = [t.name for t in self.tool_specs]
        # None: the family's prompt; "" (given empty on purpose): no system message at all
        prompt = self.family.default_system_prompt() if system_prompt is None else system_prompt
        self.messages: list[dict[str, Any]] = (
            [{"role": "system", "content": prompt}] if prompt else []
        )
        self.tool_trace: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.usage = Usage()
        self.reward = 0.0
        self.done = False
        self.turns = 0
        #: turns the policy answered (an errored episode's last turn may have had none)
        self.answered = 0
        self.tool_calls = 0
        self.tool_errors = 0
        self.silent_turns = 0
        self.task_info: dict[str, Any] = {}
        #: why the episode ended before the env said done, when not for lack of turns
        self.stopped: str | None = None
        self.server_reports: dict[str, Any] | None = None
        self.backend: Backend | None = None
        #: the latest observation: the verdict may read the env's own success field in it
        self.current: StepResult | None = None
        #: the rewards the env gave, reset first: shaped rewards are judged on the last one
        self.rewards: list[float] = []
        #: the env's state once the episode ended (``reads_final_state`` families)
        self.final_state: dict[str, Any] | None = None

    def check_time(self) -> None:
        if self.deadline is not None and self.clock() > self.deadline:
            raise EpisodeTimeout(
                f"episode {self.spec.episode_id} exceeded --openenv-timeout="
                f"{self.limits.timeout:g}s after {self.turns} turn(s)"
            )

    def tool_error(self, call: ToolCall, message: str, step: dict[str, Any]) -> None:
        self.tool_errors += 1
        content = f"Error: {message}"
        self.messages.append(
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
        )
        self.tool_trace.append(
            {
                "tool_name": call.name,
                "arguments": None,  # refused: its arguments may not even be JSON
                "arguments_text": call.arguments,
                "result": {"data": content, "done": self.done, "reward": 0.0, "error": message},
            }
        )
        step["error"] = message

    def add_reward(self, reward: float, where: str) -> None:
        """Add one reward the env gave; a non-finite reward or sum is an episode error.

        ``1e308`` twice is ``inf``: no row could hold it (JSON has no Infinity), and an
        infinite mean would poison every figure of the run.
        """
        total = self.reward + reward
        if math.isfinite(reward) and math.isfinite(total):
            self.reward = total
            self.rewards.append(reward)
            return
        raise EpisodeError(
            f"the env's rewards are not finite numbers: {where} gave reward {reward!r} "
            f"after a sum of {self.reward!r}, making {total!r}; rewards must be finite "
            "(the server's values, as received)"
        )

    def apply(self, backend: Backend, current: StepResult, call: ToolCall) -> StepResult:
        self.tool_calls += 1
        step: dict[str, Any] = {"turn": self.turns, "action": f"{call.name}({call.arguments})"}
        self.steps.append(step)
        if self.done:
            self.tool_error(
                call, "the episode is already over; no further calls are accepted", step
            )
            return current
        if call.name not in self.tool_names:
            self.tool_error(
                call, f"unknown tool {call.name!r}; available tools: {self.tool_names}", step
            )
            return current
        try:
            arguments, canonical = parse_arguments(call.arguments, self.argument_texts)
        except (ValueError, RecursionError) as exc:
            self.tool_error(
                call, f"arguments are not valid JSON ({exc}): {shorten(call.arguments)}", step
            )
            return current
        if canonical is None:
            self.tool_error(
                call, f"arguments must be a JSON object, got {shorten(call.arguments)}", step
            )
            return current
        # Normalised so that snapshots do not depend on a model's JSON spacing.
        step["action"] = f"{call.name}({canonical})"
        proposed = ProposedCall(call.name, arguments)
        try:
            action = self.family.to_action(proposed, current)
            result = backend.step(action)
        except ActionRejected as exc:
            self.tool_error(call, str(exc), step)
            return current
        reward = float(result.reward or 0.0)
        self.add_reward(reward, f"step {self.tool_calls}")
        self.done = result.done
        content = self.family.describe_result(proposed, result)
        # an action the server took but the env says failed (an MCP tool's error result)
        reported = self.family.reported_error(result)
        if reported is not None:
            self.tool_errors += 1
            step["error"] = reported
        self.messages.append(
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
        )
        self.tool_trace.append(
            {
                "tool_name": call.name,
                "arguments": arguments,  # an object, as `openenv collect` writes it
                "arguments_text": call.arguments,  # exactly what the policy sent
                "result": {
                    "data": content,
                    "done": result.done,
                    "reward": reward,
                    "error": reported,
                },
            }
        )
        step["observation"] = content
        return result

    def begin(self, backend: Backend) -> StepResult:
        """Reset the env for this episode; the task becomes the first user message."""
        spec = self.spec
        self.backend = backend
        try:
            current = backend.reset(
                seed=spec.seed,
                episode_id=spec.episode_id,
                **self.family.reset_options(seed=spec.seed, episode_id=spec.episode_id),
            )
        except ActionRejected as exc:
            raise EpisodeError(f"the env rejected reset: {exc}") from exc
        try:  # a server swapped mid-run must not leave rows under the wrong env's name
            self.server_reports = check_backend(self.family, backend, current)
        except ServerMismatch as exc:
            raise EpisodeError(f"{spec.episode_id} was not recorded: {exc}") from exc
        task = self.family.describe_task(current)
        self.task_info = self.family.task_info(current, task)
        self.messages.append({"role": "user", "content": task})
        self.steps.append({"turn": 0, "observation": task})
        self.done = current.done
        self.add_reward(float(current.reward or 0.0), "reset")
        self.current = current
        return current

    def run(self, backend: Backend) -> Episode:
        current = self.begin(backend)
        final_text = self.steps[0]["observation"]
        while not self.done and self.turns < self.max_turns:
            self.check_time()
            self.turns += 1
            try:
                reply = self.policy.act(self.turn_for(current))
            except ContextExhausted as exc:
                self.stopped = f"the model's context window is full: {exc}"
                break
            check_answer_size(reply, str(getattr(self.policy, "name", "") or "the policy"))
            if reply.usage.prompt_tokens or reply.usage.completion_tokens or reply.usage.unknown:
                self.usage = self.usage + reply.usage
            self.answered += 1
            if self.over_token_limit():
                break
            self.messages.append(reply.to_openai())
            if not reply.tool_calls:
                self.remind(reply)
                continue
            for call in reply.tool_calls:
                current = self.current = self.apply(backend, current, call)
                if "observation" in self.steps[-1]:
                    final_text = self.steps[-1]["observation"]
        self.check_time()
        if self.done and self.family.reads_final_state:
            self.final_state = self.read_state(backend)
        return self.finish(final_text)

    @staticmethod
    def read_state(backend: Backend) -> dict[str, Any] | None:
        """The env's state now, where the backend can ask (None: it cannot, or it failed)."""
        read = getattr(backend, "state_or_none", None)
        if read is None:
            return None
        try:
            state = read()
        except (EnvUnavailable, ActionRejected):
            return None
        return state if isinstance(state, dict) else None

    def over_token_limit(self) -> bool:
        """Past ``--openenv-episode-max-tokens``: the episode ends unfinished. The reply that
        passed it is left out of the transcript (its tool calls would have no results) but
        its tokens are counted."""
        limit = self.limits.max_tokens
        used = self.usage.prompt_tokens + self.usage.completion_tokens
        if limit is None or used <= limit:
            return False
        self.stopped = (
            f"{TOKEN_LIMIT}: the episode used {used} tokens ({self.usage.prompt_tokens} in, "
            f"{self.usage.completion_tokens} out), over --openenv-episode-max-tokens={limit}"
        )
        return True

    def turn_for(self, current: StepResult) -> Turn:
        """What the policy sees on this turn."""
        spec = self.spec
        return Turn(
            messages=list(self.messages),
            tools=self.tools,
            episode_id=spec.episode_id,
            seed=spec.seed,
            turn=self.turns,
            repeat=spec.repeat,
            scripted=self.family.scripted_call(current),
            legal=self.family.legal_calls(current) if self.policy.wants_legal else None,
            expert=self.family.expert_call(current, seed=spec.seed, repeat=spec.repeat)
            if self.policy.wants_expert
            else None,
            deadline=self.deadline,
        )

    def remind(self, reply: Reply) -> None:
        self.silent_turns += 1
        self.messages.append(
            {
                "role": "user",
                "content": NO_TOOL_CALL_REMINDER.format(names=", ".join(self.tool_names)),
            }
        )
        self.steps.append({"turn": self.turns, "action": None, "error": "no tool call"})

    def server(self) -> str | None:
        """The server the session really ran on (rotation may have moved it), redacted."""
        server = getattr(self.backend, "location", None) if self.backend else None
        if server is None:
            server_for = getattr(self.env, "server_for", None)
            server = server_for(self.spec) if server_for is not None else None
        return redact(server) if server else None

    def finish(self, final_text: str) -> Episode:
        decision = self.decide()
        return self.episode(
            final_text,
            passed=decision.passed,
            outcome=decision.label,
            min_reward=decision.rule.min_reward,
            reason=decision.reason,
            decision=decision,
        )

    def failed(self, error: EpisodeError) -> EpisodeError:
        """``error`` carrying what was played before it (``EpisodeError.partial``): the
        transcript to debug it by and the tokens already billed, which the run counts."""
        if error.partial is None and self.answered:
            with contextlib.suppress(Exception):  # the fault's own message matters more
                error.partial = self.episode(
                    self.last_observation(),
                    passed=False,
                    outcome="error",
                    min_reward=self.rule().min_reward,
                    reason=str(error),
                    decision=None,
                    turns=self.answered,
                )
        return error

    def last_observation(self) -> str:
        seen = [step["observation"] for step in self.steps if "observation" in step]
        return seen[-1] if seen else ""

    def episode(
        self,
        final_text: str,
        *,
        passed: bool,
        outcome: str,
        min_reward: float,
        reason: str | None,
        decision: Decision | None,
        turns: int | None = None,
    ) -> Episode:
        spec = self.spec
        family = self.family
        server = self.server()
        turns = self.turns if turns is None else turns
        return Episode(
            episode_id=spec.episode_id,
            seed=spec.seed,
            env=family.spec,
            reward=self.reward,
            passed=passed,
            done=self.done,
            turns=turns,
            outcome=outcome,
            min_reward=min_reward,
            messages=self.messages,
            tool_trace=self.tool_trace,
            tools=self.tools,
            usage=self.usage,
            metrics=metrics_section(
                turns=turns,
                tool_calls=self.tool_calls,
                tool_errors=self.tool_errors,
                no_tool_call_turns=self.silent_turns,
                prompt_tokens=self.usage.prompt_tokens,
                completion_tokens=self.usage.completion_tokens,
                wall_time_s=round(self.clock() - self.started, 6),
            ),
            task=task_section(family.name, family.variant, family.config_json, self.task_info),
            policy=self.policy.name,
            model=self.policy.model,
            repeat=spec.repeat,
            index=spec.index,
            backend="remote" if server else "embedded",
            server=server,
            server_reports=self.server_reports,
            reason=reason,
            max_turns=self.max_turns,
            prompt_style=getattr(family, "prompt_style", None),
            sampling=sampling_of(self.policy),
            steps=self.steps,
            final_observation=final_text,
            seeded=True if self.remote is None else self.remote.seeded(server),
            decision=decision,
        )

    def rule(self) -> PassRule:
        """The family's pass rule under the marker's overrides, then the run's."""
        spec, limits = self.spec, self.limits
        return self.family.pass_rule().overridden(
            min_reward=spec.min_reward if spec.min_reward is not None else limits.min_reward,
            judge_at=spec.judge_at or limits.judge_at,
        )

    def decide(self) -> Decision:
        """The episode's verdict (``envs/verdict.decide``): the family's rule under the
        marker's overrides, then the run's."""
        family, limits = self.family, self.limits
        last = self.current
        return decide(
            self.rule(),
            reward=self.reward,
            done=self.done,
            label=family.outcome,
            observation=last.observation if last is not None else None,
            metadata=last.metadata if last is not None else None,
            stopped=self.stopped,
            turn_limit=self.max_turns,
            mistakes=(
                f"{self.tool_errors} tool error(s), {self.silent_turns} turn(s) without a tool call"
            ),
            state=self.final_state,
            last_reward=self.rewards[-1] if len(self.rewards) > 1 else None,
            # an earlier step (not the reset's 0) scored: step penalties, shaping
            shaped=any(r != 0 for r in self.rewards[:-1]),
            default_turns=None if limits.max_turns else family.default_turns_words(),
        )


def sampling_of(policy: Any) -> dict[str, Any] | None:
    """The model's sampling (temperature, max_tokens) a policy plays with; None: it has none."""
    found: Any = getattr(policy, "sampling", None)  # the response cache's wrapper: a dict
    identity = getattr(policy, "cache_identity", None)
    if not isinstance(found, dict) and callable(identity):
        try:
            known = identity()
            found = known[1] if known is not None else None
        except Exception:  # a user's policy: its sampling is not ours to know
            found = None
    if not isinstance(found, dict) or "temperature" not in found:
        return None
    return {key: found.get(key) for key in ("temperature", "max_tokens")}


def run_episode(
    spec: EpisodeSpec,
    env: EnvFactory,
    policy: Policy,
    *,
    limits: Limits = Limits(),
    system_prompt: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    remote: RemoteServers | None = None,
    drive: Callable[[_Loop, Backend], Episode] | None = None,
) -> Episode:
    """Run one episode to its end. Raises ``EpisodeError`` for infrastructure faults.

    ``remote``: what this process knows of its deployed servers (which ignore the
    seed); None: ``env``'s own, if it has one. ``drive``: who plays the opened episode
    instead of the policy's turn-by-turn loop (an agent program: ``agent_loop.py``).
    """
    loop = _Loop(spec, env, policy, limits, system_prompt, clock, remote)
    try:
        backend = env.open(spec)
    except EnvUnavailable as exc:
        raise EpisodeError(f"env unavailable: {exc}") from exc
    # every fault keeps what was played before it (``_Loop.failed``)
    try:
        limit_time = getattr(backend, "limit_time", None)
        if limit_time is not None:
            limit_time(limits.timeout)
        return loop.run(backend) if drive is None else drive(loop, backend)
    except EnvUnavailable as exc:
        raise loop.failed(EpisodeError(f"env unavailable during {spec.episode_id}: {exc}")) from exc
    except PolicyUnavailable as exc:
        raise loop.failed(
            EpisodeError(f"policy unavailable during {spec.episode_id}: {exc}")
        ) from exc
    except EpisodeError as exc:
        loop.failed(exc)
        raise
    except ActionRejected:
        raise
    except Exception as exc:
        if not adapter_choked_on_server_data(backend, env.family, exc):
            raise
        server = getattr(backend, "location", "the server")
        raise loop.failed(
            EpisodeError(
                f"env unavailable during {spec.episode_id}: {server} sent data the "
                f"{type(env.family).__name__} adapter cannot read ({type(exc).__name__}: "
                f"{str(exc)[:300]})"
            )
        ) from exc
    finally:
        with contextlib.suppress(Exception):
            backend.close()


def adapter_choked_on_server_data(backend: Backend, family: EnvFamily, exc: Exception) -> bool:
    """A family adapter raised while reading what a deployed server sent (wrong types...).

    That is the server's fault, so an episode error; raised anywhere else (a policy, an
    embedded engine) it is a bug worth its traceback, so it propagates.
    """
    if getattr(backend, "kind", None) != "remote":
        return False
    module = type(family).__module__
    # a family package (envs/openspiel/) owns every module in it: render, hosting, ...
    adapter = module.removesuffix(".family") if module.endswith(".family") else module
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith(adapter):
            return True
        tb = tb.tb_next
    return False
