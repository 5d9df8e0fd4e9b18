"""Malformed server frames end an episode as an episode error (or it plays on), never worse.

Hypothesis writes the server's side of the conversation: good observations mixed
with truncated JSON, wrong types anywhere in the frame, NaN and infinite rewards,
deep nesting, invalid UTF-8, binary frames, oversized frames and dropped
connections. The real remote backend and openspiel adapter play against it
in-process (fast), and once end to end through pytest with xdist.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest
from bad_frames import FINAL, GOOD, Reply, frame_server, observation
from faults import ENV, Launcher, read_rows
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_openenv.envs.registry import build_family
from pytest_openenv.envs.remote import backend as remote
from pytest_openenv.episode.loop import EnvFactory, EpisodeError, Limits, run_episode
from pytest_openenv.episode.result import dumps_record
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import ScriptedPolicy

TIMEOUT = 3.0

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)

#: where in a good frame a wrong value goes
PLACES = (
    ("type",),
    ("data",),
    ("data", "observation"),
    ("data", "reward"),
    ("data", "done"),
    ("data", "metadata"),
    ("data", "observation", "legal_actions"),
    ("data", "observation", "info_state"),
    ("data", "observation", "metadata"),
    ("data", "observation", "opponent_last_action"),
)


def replaced(frame: dict[str, Any], place: tuple[str, ...], value: Any) -> dict[str, Any]:
    frame = copy.deepcopy(frame)
    target = frame
    for key in place[:-1]:
        target = target[key]
    target[place[-1]] = value
    return frame


def text_frame(frame: dict[str, Any]) -> str:
    return json.dumps(frame, allow_nan=True)  # NaN / Infinity literals, as Python servers emit


wrong_type = st.builds(
    lambda frame, place, value: Reply(text_frame(replaced(frame, place, value))),
    st.sampled_from([observation(), observation(legal=[], reward=1.0, done=True)]),
    st.sampled_from(PLACES),
    json_values,
)
error_frame = st.builds(
    lambda data: Reply(json.dumps({"type": "error", "data": data})),
    json_values
    | st.fixed_dictionaries(
        {
            "code": st.sampled_from(["VALIDATION_ERROR", "CAPACITY_REACHED", "SESSION_ERROR"])
            | json_values,
            "message": json_values,
            "errors": json_values | st.lists(st.fixed_dictionaries({"loc": json_values})),
        }
    ),
)
truncated = st.builds(
    lambda text, cut: Reply(text[: int(cut * len(text))]),
    st.sampled_from([GOOD, FINAL]),
    st.floats(0, 0.999),
)
reply = st.one_of(
    st.just(Reply(GOOD)),
    truncated,
    wrong_type,
    error_frame,
    st.sampled_from(
        [
            Reply('{"type": "observation", "data": {"observation": {}, "reward": NaN}}'),
            Reply(FINAL.replace('"reward": 1.0', '"reward": Infinity')),
            Reply(FINAL.replace('"reward": 1.0', '"reward": 1e999')),
            Reply("[" * 100_000 + "]" * 100_000),  # deeper than json can recurse
            Reply('{"a":' * 50_000 + "1" + "}" * 50_000),
            Reply(b"\xff\xfe\x00 not utf-8"),
            Reply(GOOD.encode()),  # a binary frame holding good JSON
            Reply(json.dumps(observation(game_phase="x" * 3_000_000))),  # 3 MB
            Reply('{"type": "observation"}'),
            Reply(json.dumps(observation(done="false"))),  # a string: truthy, but not done
            Reply(GOOD, then=FINAL),  # two answers to one step: the second is stale
            Reply("null"),
            Reply(""),
            Reply(close=True),
        ]
    ),
)


class ThinkingPolicy(ScriptedPolicy):
    """The scripted move after a pause, as a model takes: a frame sent late has landed."""

    def act(self, turn: Any) -> Any:
        time.sleep(0.3)
        return super().act(turn)


def play(url: str, policy: ScriptedPolicy | None = None) -> tuple[Any, float]:
    """One scripted episode against ``url``: the Episode or the EpisodeError, and seconds."""
    family = build_family("openspiel:tic_tac_toe", {})
    spec = EpisodeSpec(env="openspiel:tic_tac_toe", index=0, seed=0)
    started = time.monotonic()
    try:
        outcome: Any = run_episode(
            spec,
            EnvFactory(family, (url,)),
            policy or ScriptedPolicy(),
            limits=Limits(max_turns=5, timeout=TIMEOUT),
        )
    except EpisodeError as exc:
        outcome = exc
    return outcome, time.monotonic() - started


@settings(max_examples=50, deadline=None, database=None)
@given(script=st.lists(reply, min_size=1, max_size=4))
@example(script=[Reply(GOOD), Reply(silence=TIMEOUT + 2, payload=GOOD)])  # a silent server
@pytest.mark.slow
def test_bad_frames_make_an_episode_error_or_a_game(script: list[Reply]) -> None:
    with frame_server(script) as server:
        outcome, took = play(server.url)
    assert took < TIMEOUT + 5, f"took {took:.1f}s"
    if isinstance(outcome, EpisodeError):
        assert str(outcome).strip()
        assert "Traceback" not in str(outcome)
    else:
        # a finished episode must serialize like any other row (no NaN, no odd types)
        line = dumps_record(outcome.record(test="t", passed=outcome.passed))
        assert json.loads(line)["episode_id"] == "ep-000000"
        assert outcome.explain()


@pytest.mark.parametrize(
    ("frame", "named"),
    [
        (observation(done="false"), 'done="false"'),
        (observation(done="true"), 'done="true"'),
        (observation(done=1), "done=1"),
        (observation(done=None), "done=null"),
        (observation(reward="1.0"), 'reward="1.0"'),
        (observation(reward=True), "reward=true"),
    ],
)
def test_a_field_of_the_wrong_type_errors_the_episode_naming_it(
    frame: dict[str, Any], named: str
) -> None:
    """``done`` must be a JSON bool and ``reward`` a number or null: never coerced."""
    # answers to reset, to the one state request, then to the first step
    with frame_server([Reply(GOOD), Reply(GOOD), Reply(json.dumps(frame))]) as server:
        outcome, _ = play(server.url)
    assert isinstance(outcome, EpisodeError), outcome.explain()
    assert named in str(outcome), str(outcome)


def test_a_stale_extra_frame_is_not_taken_as_the_next_answer() -> None:
    """Two answers to one step: the second must not answer the next step (it would win)."""
    with frame_server([Reply(GOOD), Reply(GOOD), Reply(GOOD, then=FINAL)]) as server:
        # the extra frame follows its answer at once; the policy's pause lets it land
        # before the next step is sent, however loaded the machine
        outcome, _ = play(server.url, ThinkingPolicy())
        asked = list(server.frames_in)
    assert isinstance(outcome, EpisodeError), outcome.explain()
    assert "extra frame" in str(outcome), str(outcome)
    assert sum('"step"' in frame for frame in asked) == 1  # the next step was never sent


def test_frame_over_the_size_limit_is_an_episode_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "MAX_MESSAGE_BYTES", 1 << 20)  # the limit, made small to test
    big = json.dumps(observation(game_phase="x" * (2 << 20)))
    with frame_server([Reply(big)]) as server:
        outcome, took = play(server.url)
    assert isinstance(outcome, EpisodeError), outcome
    assert "dropped" in str(outcome) or "too big" in str(outcome)
    assert took < TIMEOUT + 5


@pytest.mark.slow
def test_bad_frames_through_pytest_end_as_errored_items(launcher: Launcher) -> None:
    """The same faults end to end: items error with a reason, rows are written, no crash."""
    script = [
        Reply(GOOD),
        Reply('{"type": "observation", "data": {"observation": {"legal_actions": "abc"'),
    ]
    nan_reward = [Reply(FINAL.replace('"reward": 1.0', '"reward": NaN'))]
    deep = [Reply("[" * 100_000 + "]" * 100_000)]
    wrong = [Reply(text_frame(replaced(observation(), ("data", "observation"), [1, 2])))]
    with (
        frame_server(script) as a,
        frame_server(nan_reward) as b,
        frame_server(deep) as c,
        frame_server(wrong) as d,
    ):
        servers = [f"--openenv-server={s.url}" for s in (a, b, c, d)]
        finished = launcher.run(
            "-n", "2", f"--openenv-env={ENV}", "--openenv-n=4", "--openenv-timeout=10", *servers
        )
    assert finished.returncode == 1, finished.stdout[-3000:]
    assert "4 errored" in finished.stdout, finished.stdout[-3000:]
    rows = read_rows(launcher.output / "failures.jsonl")
    assert sorted(row["episode_id"] for row in rows) == [f"ep-{i:06d}" for i in range(4)]
    for row in rows:
        assert row["failure"]["outcome"] == "error"
        assert "env unavailable" in row["failure"]["message"], row["failure"]["message"]
