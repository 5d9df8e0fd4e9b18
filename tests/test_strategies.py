"""Property tests of environments: the EnvStateMachine passes real envs, catches planted bugs."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from pytest_openenv.envs.base import ActionRejected, StepResult
from pytest_openenv.envs.openspiel.engine import OpenSpielEngine
from pytest_openenv.envs.openspiel.family import OpenSpielFamily
from pytest_openenv.envs.registry import build_family
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.testing.strategies import (
    EnvStateMachine,
    LegalSequence,
    episode_specs,
    illegal_calls,
    legal_action_sequences,
    reset_backend,
    seeds,
)

QUICK = settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


class TicTacToe(EnvStateMachine):
    env = "openspiel:tic_tac_toe"


class TicTacToeSecondPlayer(EnvStateMachine):
    env = "openspiel:tic_tac_toe"
    env_config = {"agent_player": 1}  # the opponent opens: the opening depends on the seed


class ConnectFour(EnvStateMachine):
    env = "openspiel:connect_four"


@pytest.mark.parametrize("machine", [TicTacToe, TicTacToeSecondPlayer, ConnectFour])
def test_state_machine_passes_on_the_real_envs(machine):
    run_state_machine_as_test(machine, settings=QUICK)


# -- deliberately broken test envs ---------------------------------------------------------
class BrokenEngine(OpenSpielEngine):
    """Bugs switched on one at a time by the family that builds it."""

    bug = ""

    def reset(self, *, seed: int, episode_id: str, **options: Any) -> StepResult:
        result = super().reset(seed=seed, episode_id=episode_id, **options)
        if self.bug == "unseeded opponent":
            self._opponent_rng = random.Random()  # ignores the seed
        if self.bug == "opponent not reseeded":
            # the generator made at construction carries on across resets
            self._opponent_rng = self._kept_rng = getattr(self, "_kept_rng", random.Random(1))
        return result

    def step(self, action: dict[str, Any]) -> StepResult:
        if self.bug == "accepts illegal moves" and action.get("action_id") not in (
            self._state.legal_actions(self._agent)
        ):
            return self._observe()  # pretends the move happened
        return super().step(action)

    def _observe(self) -> StepResult:
        result = super()._observe()
        if self.bug == "reward mid-game" and not result.done and self._moves == 2:
            return replace(result, reward=0.5)
        if self.bug == "no legal moves" and not result.done and self._moves == 2:
            return replace(result, observation={**result.observation, "legal_actions": []})
        return result


def broken_machine(bug: str) -> type[EnvStateMachine]:
    class Family(OpenSpielFamily):
        def embedded_backend(self):
            engine = BrokenEngine(self._game, agent_player=self.agent_player, opponent="random")
            engine.bug = bug
            return engine

    class Broken(EnvStateMachine):
        def make_family(self):
            return Family("tic_tac_toe", {})

    Broken.__name__ = f"Broken_{bug.replace(' ', '_')}"
    return Broken


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bug", "message"),
    [
        ("reward mid-game", "reward 0.5 arrived at step 2"),
        ("no legal moves", "the episode is not over but no legal call is offered"),
        ("accepts illegal moves", "the backend accepted the illegal action action_id="),
        ("unseeded opponent", "sessions reset with seed 0 diverged at step "),
        ("opponent not reseeded", "replaying seed 0 diverged at step 1"),
    ],
)
def test_state_machine_finds_a_planted_bug(bug, message):
    machine = broken_machine(bug)
    run = settings(QUICK, max_examples=200, stateful_step_count=20)
    if bug == "unseeded opponent":
        # The planted bug is nondeterminism itself, so hypothesis's replay of the failing
        # example may draw differently: it then says so (Flaky) instead of re-raising ours.
        with pytest.raises((AssertionError, Flaky)) as caught:
            run_state_machine_as_test(machine, settings=run)
        if isinstance(caught.value, AssertionError):
            assert re.search(message, str(caught.value)), str(caught.value)
        else:
            assert "Inconsistent" in str(caught.value) or "flaky" in str(caught.value).lower()
        return
    with pytest.raises(AssertionError, match=message):
        run_state_machine_as_test(machine, settings=run)


def test_state_machine_without_an_env_says_what_to_set():
    class Nothing(EnvStateMachine):
        pass

    with pytest.raises(TypeError, match="needs env = 'family:variant'"):
        Nothing()


# -- strategies -------------------------------------------------------------------------
@given(legal_action_sequences("openspiel:tic_tac_toe"))
@settings(QUICK)
def test_legal_action_sequences_replay_legally_to_the_end(sequence: LegalSequence):
    family = build_family("openspiel:tic_tac_toe", {})
    backend = family.embedded_backend()
    current = reset_backend(family, backend, sequence.seed)
    for call in sequence.calls:
        assert call in family.legal_calls(current)
        current = backend.step(family.to_action(call, current))
    assert sequence.finished and current.done
    assert 3 <= len(sequence.calls) <= 5  # X needs 3 moves to win and has at most 5


@given(legal_action_sequences("openspiel:connect_four", seed=7, max_length=4))
@settings(QUICK)
def test_legal_action_sequences_respect_seed_and_length(sequence: LegalSequence):
    assert sequence.seed == 7
    assert len(sequence.calls) <= 4
    # connect four ends within 4 of our moves only by our four in a row
    assert not sequence.finished or len(sequence.calls) == 4


@given(st.data(), seeds())
@settings(QUICK)
def test_illegal_calls_are_rejected_by_the_family(data, seed):
    family = build_family("openspiel:tic_tac_toe", {})
    current = reset_backend(family, family.embedded_backend(), seed)
    call = data.draw(illegal_calls(family, current))
    with pytest.raises(ActionRejected):
        family.to_action(call, current)


@given(episode_specs("openspiel:tic_tac_toe", repeats=3, max_index=50))
@settings(QUICK)
def test_episode_specs_are_valid_plugin_specs(spec: EpisodeSpec):
    assert isinstance(spec, EpisodeSpec)
    assert 0 <= spec.index <= 50 and 0 <= spec.repeat < 3 and spec.seed >= 0
    assert spec.policy in ("scripted", "random")
    assert spec.episode_id == f"ep-{spec.index:06d}-r{spec.repeat}"


def test_the_plugin_does_not_import_the_strategies_module():
    code = (
        "import sys, pytest_openenv.plugin\n"
        "assert 'pytest_openenv.testing.strategies' not in sys.modules\n"
        "assert 'pytest_openenv.testing.snapshots' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- remote: the same machine against a real OpenEnv server over its WebSocket -------------
def test_state_machine_passes_on_a_deployed_openenv_server():
    from servers.openenv_servers import serve_in_thread

    with serve_in_thread("tictactoe") as server:

        class Remote(EnvStateMachine):
            env = "openspiel:tic_tac_toe"

        Remote.server = server.url
        run_state_machine_as_test(
            Remote, settings=settings(QUICK, max_examples=10, stateful_step_count=10)
        )


def test_state_machine_works_with_a_single_session_server():
    """A Space that allows one session at a time: probes run one after another."""
    from servers.openenv_servers import serve_in_thread

    with serve_in_thread("tictactoe", max_sessions=1) as server:

        class OneAtATime(EnvStateMachine):
            env = "openspiel:tic_tac_toe"
            fresh_session_replay = False

        OneAtATime.server = server.url
        run_state_machine_as_test(
            OneAtATime, settings=settings(QUICK, max_examples=5, stateful_step_count=10)
        )
        assert server.stats()["peak_sessions"] == 1
