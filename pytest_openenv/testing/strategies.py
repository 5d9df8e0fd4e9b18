"""Hypothesis strategies and a state machine for property tests of environments.

Import this module yourself; the plugin never does, so a run that does not use it
pays nothing for hypothesis here::

    from pytest_openenv.strategies import EnvStateMachine

    class TicTacToe(EnvStateMachine):
        env = "openspiel:tic_tac_toe"

    TestTicTacToe = TicTacToe.TestCase

``EnvStateMachine`` drives one env session with legal and illegal actions and
checks what every well-behaved episodic env owes its agents:

- reward arrives only at the end (``reward_only_at_end``; switch off for shaped rewards),
- there is a legal action until the episode is done,
- an illegal action is rejected with ``ActionRejected`` (the agent sees a tool
  error), by the family adapter or by the backend, and changes nothing,
- ``reset`` with the same seed replays the same opening, and the same actions
  then give the same observations (on the same backend and on a fresh one).

Set ``server`` to run the same checks against a deployed OpenEnv server.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ..envs.base import ActionRejected, Backend, EnvFamily, ProposedCall, StepResult
from ..envs.registry import build_family
from ..episode.spec import EpisodeSpec

MAX_SEED = 2**31 - 1

__all__ = [
    "EnvStateMachine",
    "LegalSequence",
    "episode_specs",
    "illegal_calls",
    "legal_action_sequences",
    "seeds",
]


def seeds(min_value: int = 0, max_value: int = MAX_SEED) -> st.SearchStrategy[int]:
    """Episode seeds (non-negative 31-bit by default, what most engines accept)."""
    return st.integers(min_value=min_value, max_value=max_value)


def episode_specs(
    env: str,
    *,
    max_index: int = 999,
    policies: tuple[str, ...] = ("scripted", "random"),
    repeats: int = 1,
    config: dict[str, Any] | None = None,
) -> st.SearchStrategy[EpisodeSpec]:
    """Specs as the plugin builds them: index, seed, repeat < ``repeats``, a policy."""
    import json

    config_text = json.dumps(config or {}, sort_keys=True)
    return st.builds(
        EpisodeSpec,
        env=st.just(env),
        index=st.integers(0, max_index),
        seed=seeds(),
        repeat=st.integers(0, repeats - 1),
        repeats=st.just(repeats),
        policy=st.sampled_from(policies),
        config=st.just(config_text),
    )


def reset_backend(family: EnvFamily, backend: Backend, seed: int) -> StepResult:
    """Reset exactly as the runner does (family reset options included)."""
    episode_id = f"prop-{seed}"
    return backend.reset(
        seed=seed,
        episode_id=episode_id,
        **family.reset_options(seed=seed, episode_id=episode_id),
    )


def _family(env: EnvFamily | str, config: dict[str, Any] | None) -> EnvFamily:
    return env if isinstance(env, EnvFamily) else build_family(env, config or {})


def _choices(family: EnvFamily, current: StepResult) -> list[ProposedCall]:
    legal = family.legal_calls(current)
    if legal is None:
        scripted = family.scripted_call(current)
        return [scripted] if scripted is not None else []
    return legal


@dataclass(frozen=True)
class LegalSequence:
    """Legal calls from ``reset(seed)``: replay by resetting with ``seed`` and stepping each."""

    seed: int
    calls: tuple[ProposedCall, ...]
    #: True when the last call ended the episode
    finished: bool


def legal_action_sequences(
    env: EnvFamily | str,
    *,
    seed: int | None = None,
    max_length: int | None = None,
    config: dict[str, Any] | None = None,
    open_backend: Callable[[EnvFamily], Backend] | None = None,
) -> st.SearchStrategy[LegalSequence]:
    """Sequences of legal calls, each chosen among the legal calls of the state it meets.

    Plays an embedded backend (or ``open_backend(family)``) while drawing, so every
    call is legal when made. Stops at the end of the episode, or after a drawn
    length of at most ``max_length`` calls. Shrinks towards short sequences of
    the first legal calls.
    """
    family = _family(env, config)
    opener = open_backend or (lambda fam: fam.embedded_backend())

    @st.composite
    def build(draw: st.DrawFn) -> LegalSequence:
        chosen_seed = draw(seeds()) if seed is None else seed
        limit = None if max_length is None else draw(st.integers(0, max_length))
        backend = opener(family)
        calls: list[ProposedCall] = []
        try:
            current = reset_backend(family, backend, chosen_seed)
            while not current.done and (limit is None or len(calls) < limit):
                options = _choices(family, current)
                if not options:
                    raise AssertionError(
                        f"{family.spec} offers no legal call while the episode is not over"
                    )
                call = draw(st.sampled_from(options))
                current = backend.step(family.to_action(call, current))
                calls.append(call)
        finally:
            backend.close()
        return LegalSequence(chosen_seed, tuple(calls), current.done)

    return build()


def _int_arguments(calls: list[ProposedCall]) -> dict[str, set[int]]:
    """Argument name -> the integer values legal calls use for it."""
    values: dict[str, set[int]] = {}
    for call in calls:
        for key, value in call.arguments.items():
            if isinstance(value, int) and not isinstance(value, bool):
                values.setdefault(key, set()).add(value)
    return values


def illegal_calls(
    family: EnvFamily, current: StepResult, last_call: ProposedCall | None = None
) -> st.SearchStrategy[ProposedCall]:
    """Calls the env must refuse now: an integer argument outside the legal values,
    a value of the wrong type, a missing argument; when the episode is over, any call."""
    legal = family.legal_calls(current) or []
    options: list[st.SearchStrategy[ProposedCall]] = []
    if legal:
        template = legal[0]
        for key, taken in _int_arguments(legal).items():
            options.append(
                st.integers(-(2**40), 2**40)
                .filter(lambda v, taken=taken: v not in taken)
                .map(lambda v, key=key: ProposedCall(template.name, {**template.arguments, key: v}))
            )
        for key in template.arguments:
            options.append(
                st.sampled_from(["", "first", None, [], 1.5]).map(
                    lambda v, key=key: ProposedCall(template.name, {**template.arguments, key: v})
                )
            )
            missing = {k: v for k, v in template.arguments.items() if k != key}
            options.append(st.just(ProposedCall(template.name, missing)))
    elif current.done and last_call is not None:
        # the move that was legal a moment ago must now be refused: the episode is over
        options.append(st.just(last_call))
    if not options:
        return st.nothing()
    return st.one_of(options)


def same_result(a: StepResult, b: StepResult) -> bool:
    return (a.observation, a.reward or 0.0, a.done) == (b.observation, b.reward or 0.0, b.done)


def _show(result: StepResult) -> str:
    return f"observation={result.observation!r} reward={result.reward!r} done={result.done}"


class EnvStateMachine(RuleBasedStateMachine):
    """Drives one env session with legal and illegal actions; checks the invariants.

    Subclass and set ``env`` (``family:variant``) and optionally ``env_config`` and
    ``server``, or override ``make_family`` / ``open_backend``.
    """

    env: ClassVar[str | None] = None
    env_config: ClassVar[dict[str, Any]] = {}
    #: URL of a deployed OpenEnv server: the checks then run over its WebSocket
    server: ClassVar[str | None] = None
    #: False for envs with shaped (per-step) rewards
    reward_only_at_end: ClassVar[bool] = True
    #: after each reset, this many fresh sessions play the first-legal line (up to
    #: ``probe_steps`` moves) and must agree: the seed alone decides what happens
    probe_sessions: ClassVar[int] = 3
    probe_steps: ClassVar[int] = 50
    #: replay the history on a second session opened while the first is live; set False
    #: for a server that allows a single session at a time
    fresh_session_replay: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.family = self.make_family()
        #: opened at the first reset, after the seeding probe (one session at a time)
        self.backend: Backend | None = None
        self.seed: int | None = None
        self.opening: StepResult | None = None
        self.current: StepResult | None = None
        #: the calls accepted since the last reset, and what each returned
        self.history: list[tuple[ProposedCall, StepResult]] = []

    # -- hooks for subclasses --------------------------------------------------
    def make_family(self) -> EnvFamily:
        if not self.env:
            raise TypeError(
                f"{type(self).__name__} needs env = 'family:variant' or a make_family() override"
            )
        return build_family(self.env, dict(self.env_config))

    def open_backend(self) -> Backend:
        if self.server:
            return self.family.remote_backend(self.server)
        return self.family.embedded_backend()

    # -- rules -------------------------------------------------------------------
    @initialize(seed=seeds())
    def reset_env(self, seed: int) -> None:
        self.seed = seed
        probed = self._check_seeded_sessions_agree(seed) if self.probe_sessions else None
        if self.backend is None:
            self.backend = self.open_backend()
        self.current = self.opening = reset_backend(self.family, self.backend, seed)
        self.history = []
        if probed is not None:
            assert same_result(probed, self.opening), (
                f"reset(seed={seed}) opened differently in two sessions:\n"
                f"  one:   {_show(probed)}\n  other: {_show(self.opening)}"
            )
        self._check_reward(self.opening, "the reset observation")

    @precondition(lambda self: self.current is not None and not self.current.done)
    @rule(data=st.data())
    def play_legal(self, data: st.DataObject) -> None:
        assert self.current is not None
        options = _choices(self.family, self.current)
        assert options, (
            f"{self.family.spec} offers no legal call while the episode is not over: "
            + _show(self.current)
        )
        call = data.draw(st.sampled_from(options), label="legal call")
        try:
            action = self.family.to_action(call, self.current)
            result = self._session().step(action)
        except ActionRejected as exc:
            raise AssertionError(
                f"the legal call {call} was rejected: {exc} (state {_show(self.current)})"
            ) from exc
        self.history.append((call, result))
        self.current = result
        self._check_reward(result, f"step {len(self.history)} ({call})")

    @precondition(lambda self: self.current is not None)
    @rule(data=st.data())
    def play_illegal(self, data: st.DataObject) -> None:
        assert self.current is not None
        last = self.history[-1][0] if self.history else None
        strategy = illegal_calls(self.family, self.current, last)
        if strategy.is_empty:
            return
        call = data.draw(strategy, label="illegal call")
        try:
            action = self.family.to_action(call, self.current)
            result = self._session().step(action)
        except ActionRejected:
            return  # refused as a tool error: what the agent should see
        raise AssertionError(
            f"the illegal call {call} was accepted instead of rejected with a tool error; "
            f"the env answered {_show(result)}"
        )

    @precondition(lambda self: self.current is not None and not self.current.done)
    @rule(data=st.data())
    def send_illegal_action(self, data: st.DataObject) -> None:
        """Bypass the adapter: the backend itself must refuse a move that is not legal."""
        assert self.current is not None
        legal = _choices(self.family, self.current)
        ints = _int_arguments(legal)
        if not legal or not ints:
            return
        key, taken = next(iter(ints.items()))
        template = self.family.to_action(legal[0], self.current)
        # the action field carrying that argument: same name, else the one holding its value
        slot = (
            [key]
            if key in template
            else [k for k, v in template.items() if v == legal[0].arguments.get(key)]
        )
        if not slot:
            return
        bad = data.draw(
            st.integers(-(2**31), 2**31).filter(lambda v: v not in taken), label="illegal id"
        )
        try:
            result = self._session().step({**template, slot[0]: bad})
        except ActionRejected:
            return
        raise AssertionError(
            f"the backend accepted the illegal action {slot[0]}={bad} (legal: {sorted(taken)}); "
            f"it answered {_show(result)}"
        )

    @precondition(lambda self: self.seed is not None)
    @rule()
    def reset_same_seed(self) -> None:
        """Reset this backend with the same seed: the same opening, then the same replies."""
        assert self.seed is not None and self.opening is not None
        history = self.history
        first = reset_backend(self.family, self._session(), self.seed)
        assert same_result(first, self.opening), (
            f"reset(seed={self.seed}) gave a different opening the second time:\n"
            f"  first:  {_show(self.opening)}\n  second: {_show(first)}"
        )
        self.current, self.history = first, []
        for call, expected in history:
            got = self._session().step(self.family.to_action(call, self.current))
            assert same_result(got, expected), (
                f"replaying seed {self.seed} diverged at step {len(self.history) + 1} ({call}):\n"
                f"  first:  {_show(expected)}\n  replay: {_show(got)}"
            )
            self.history.append((call, got))
            self.current = got

    @precondition(lambda self: self.seed is not None and self.fresh_session_replay)
    @rule()
    def replay_on_fresh_backend(self) -> None:
        """A new session with the same seed and moves sees the same observations."""
        assert self.seed is not None and self.opening is not None
        fresh = self.open_backend()
        try:
            current = reset_backend(self.family, fresh, self.seed)
            assert same_result(current, self.opening), (
                f"a fresh backend reset with seed {self.seed} opened differently:\n"
                f"  first: {_show(self.opening)}\n  fresh: {_show(current)}"
            )
            for step, (call, expected) in enumerate(self.history, start=1):
                current = fresh.step(self.family.to_action(call, current))
                assert same_result(current, expected), (
                    f"a fresh backend diverged at step {step} ({call}) of seed {self.seed}:\n"
                    f"  first: {_show(expected)}\n  fresh: {_show(current)}"
                )
        finally:
            fresh.close()

    def _check_seeded_sessions_agree(self, seed: int) -> StepResult:
        """Fresh sessions reset with ``seed`` and fed the same moves must agree.

        Runs before anything is drawn from the env's state, so an env that ignores
        its seed fails here on every try (a clean, shrinkable failure) instead of
        making later draws differ between runs (which hypothesis reports as flaky).
        Several sessions make a chance agreement of an unseeded env unlikely; they
        run one after another, so a server allowing one session at a time works.
        Returns the opening they agreed on.
        """
        seen: list[StepResult] = []
        calls: list[ProposedCall] = []
        for session in range(self.probe_sessions):
            backend = self.open_backend()
            try:
                result = reset_backend(self.family, backend, seed)
                if session == 0:
                    seen.append(result)
                else:
                    assert same_result(result, seen[0]), (
                        f"reset(seed={seed}) opened differently in two sessions:\n"
                        f"  one:   {_show(seen[0])}\n  other: {_show(result)}"
                    )
                for step in range(1, self.probe_steps + 1):
                    if session == 0:
                        options = _choices(self.family, result)
                        if result.done or not options:
                            break
                        calls.append(options[0])
                    elif step > len(calls):
                        break
                    call = calls[step - 1]
                    result = backend.step(self.family.to_action(call, result))
                    if session == 0:
                        seen.append(result)
                    else:
                        assert same_result(result, seen[step]), (
                            f"sessions reset with seed {seed} diverged at step {step} ({call}):\n"
                            f"  one:   {_show(seen[step])}\n  other: {_show(result)}"
                        )
            finally:
                backend.close()
        return seen[0]

    # -- invariants ----------------------------------------------------------------
    @invariant()
    def legal_until_done(self) -> None:
        if self.current is None or self.current.done:
            return
        assert _choices(self.family, self.current), (
            f"{self.family.spec}: the episode is not over but no legal call is offered "
            f"after {len(self.history)} step(s): {_show(self.current)}"
        )

    def _check_reward(self, result: StepResult, where: str) -> None:
        if self.reward_only_at_end and not result.done and (result.reward or 0.0) != 0.0:
            raise AssertionError(
                f"reward {result.reward!r} arrived at {where} before the end of the episode "
                f"(seed {self.seed}); rewards are expected only when done "
                "(set reward_only_at_end = False for shaped rewards)"
            )

    def _session(self) -> Backend:
        assert self.backend is not None, "the machine's session opens at its first reset"
        return self.backend

    def teardown(self) -> None:
        if self.backend is not None:
            self.backend.close()
