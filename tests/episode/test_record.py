"""``episode/record.py`` is the one home of the row: a played episode's row, a placeholder's
and the card's field list agree, so ``datasets`` loads results and failures as one table.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_openenv.dataset.card import schema_section
from pytest_openenv.envs.registry import build_family
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.outcome import EpisodeOutcome
from pytest_openenv.episode.record import (
    FIELDS,
    PreparedRow,
    dumps_record,
    episode_row,
    placeholder_row,
    with_failure,
)
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import RandomPolicy

SPEC = EpisodeSpec(env="openspiel:tic_tac_toe", index=2, seed=7, policy="random")
SECTIONS = ("metrics", "verify_metrics", "artifacts", "task", "extra")


@pytest.fixture(scope="module")
def played() -> dict[str, Any]:
    family = build_family(SPEC.env, {}, ())
    episode = run_episode(SPEC, EnvFactory(family, ()), RandomPolicy())
    return episode_row(episode, test="t.py::test_ep[ep-000002]")


def shape(row: dict[str, Any]) -> dict[str, Any]:
    """Field names, and the keys of each struct field, with their JSON types."""
    return {
        key: (
            {k: type(v).__name__ for k, v in value.items() if v is not None}
            if key in SECTIONS
            else type(value).__name__
        )
        for key, value in row.items()
    }


def test_the_card_describes_every_field_a_row_has(played: dict[str, Any]) -> None:
    described = [name for name, _, _ in FIELDS]
    assert len(described) == len(set(described))
    # ``judge`` only on the rows of a run a judge model decided (--openenv-judge)
    assert set(described) == {*played, "failure", "judge"}
    table = [line.split("|")[1].strip().strip("`") for line in schema_section()[6:-1]]
    assert table == described


def test_a_placeholder_has_the_fields_and_types_of_a_played_row(played: dict[str, Any]) -> None:
    row = placeholder_row(SPEC, "server down", test="t.py::test_ep[ep-000002]")
    assert list(row) == [*played, "failure"]
    expected = shape(played)
    got = shape(row)
    # empty lists and zero counts are of the same type; only ``reason`` is null when played
    expected["extra"]["reason"] = "str"
    # how it would have been played is unknown for an episode that never ran: null
    for unknown in ("max_turns", "prompt_style"):
        expected["extra"].pop(unknown, None)
    assert {k: v for k, v in got.items() if k != "failure"} == expected
    assert row["failure"] == {
        "outcome": "error",
        "test_outcome": "error",
        "verdict": False,
        "message": "server down",
    }
    assert (row["episode_id"], row["seed"], row["policy"]) == ("ep-000002", 7, "random")
    assert row["task"]["family"] == "openspiel" and row["task"]["variant"] == "tic_tac_toe"
    assert row["passed"] is False and row["verify_metrics"]["outcome"] == "error"


def test_brief_and_line_are_read_from_the_row(played: dict[str, Any]) -> None:
    row = with_failure(dict(played), "failed", "lost")
    verdict = played["verify_metrics"]["verdict"]
    assert row["failure"] == {
        "outcome": "failed",
        "test_outcome": "failed",
        "verdict": verdict,
        "message": "lost",
    }
    figures = EpisodeOutcome.of_row(row["episode_id"], row, "")
    assert (
        figures.reward,
        figures.turns,
        figures.outcome,
        figures.prompt_tokens,
        figures.completion_tokens,
        figures.env,
        figures.policy,
        figures.model,
    ) == (
        played["reward"],
        played["metrics"]["turns"],
        played["verify_metrics"]["outcome"],
        0,
        0,
        "openspiel:tic_tac_toe",
        "random",
        None,
    )
    line = dumps_record({**row, "note": "a\u2028b"})
    assert "\n" not in line and "\u2028" not in line
    assert json.loads(line)["note"] == "a\u2028b"


@pytest.mark.parametrize("form", ["string", "object"])
@pytest.mark.parametrize("passed", [None, True, False])
def test_a_row_made_ahead_is_the_row_made_at_the_report(form: str, passed: bool | None) -> None:
    family = build_family(SPEC.env, {}, ())
    episode = run_episode(SPEC, EnvFactory(family, ()), RandomPolicy())
    test = "t.py::test_ep[ep-000002]"
    at_report = episode.record(test=test, passed=passed, tool_arguments=form)
    prepared = PreparedRow.of(episode, test, form)
    outcome = episode.passed if passed is None else passed
    ahead = prepared.row_for(test, outcome)
    assert dumps_record(ahead) == dumps_record(at_report)
    with_failure(ahead, "failed", "why")  # what a report does to its row
    ahead["metrics"]["cost_usd"] = 1.0
    assert prepared.row_for(test, outcome) == at_report
    assert prepared.line == dumps_record(episode.record(test=test, tool_arguments=form))


@pytest.mark.parametrize("passed", [True, False])
@pytest.mark.parametrize("change", [None, "failure", "price", "other test"])
def test_a_line_made_ahead_is_used_only_for_the_row_as_it_was_made(
    passed: bool, change: str | None
) -> None:
    family = build_family(SPEC.env, {}, ())
    episode = run_episode(SPEC, EnvFactory(family, ()), RandomPolicy())
    test = "t.py::test_ep[ep-000002]"
    prepared = PreparedRow.of(episode, test)
    made = prepared.line
    row = prepared.row_for("t.py::other" if change == "other test" else test, passed)
    if change == "failure":
        with_failure(row, "failed", "why")
    if change == "price":
        row["metrics"]["cost_usd"] = 0.5
    expected = dumps_record(row)
    line = prepared.line_of(row)
    assert line == expected
    # made ahead for the verdict's own row: used where nothing changed it, else made anew
    assert (line is made) == (change is None and passed == episode.passed)


class AnswersThenFails:
    """Plays the first legal move ``good`` times, each answer billed, then its endpoint fails."""

    name = "two-answers"
    model = "m"
    wants_legal = True
    wants_expert = False

    def __init__(self, good: int, clock: list[float] | None = None) -> None:
        self.good = good
        self.clock = clock

    def act(self, turn: Any) -> Any:
        from pytest_openenv.errors import PolicyUnavailable
        from pytest_openenv.policies.base import Reply, ToolCall, Usage

        if turn.turn > self.good:
            raise PolicyUnavailable("HTTP 500 from the endpoint")
        if self.clock is not None:
            self.clock[0] += 10.0  # each answer takes ten seconds
        move = turn.legal[0]
        call = ToolCall(id=f"c{turn.turn}", name=move.name, arguments=json.dumps(move.arguments))
        return Reply(tool_calls=(call,), usage=Usage(prompt_tokens=100, completion_tokens=5))

    def close(self) -> None:
        pass


def test_an_episode_that_errors_after_two_answers_keeps_them_in_a_row_of_the_same_shape(
    played: dict[str, Any],
) -> None:
    from pytest_openenv.errors import EpisodeError

    family = build_family(SPEC.env, {}, ())
    with pytest.raises(EpisodeError, match="policy unavailable") as raised:
        run_episode(SPEC, EnvFactory(family, ()), AnswersThenFails(2))
    partial = raised.value.partial
    assert partial is not None
    row = with_failure(
        partial.record(test="t.py::test_ep[ep-000002]", passed=False), "error", str(raised.value)
    )
    assert row["metrics"]["turns"] == 2
    assert (row["metrics"]["prompt_tokens"], row["metrics"]["completion_tokens"]) == (200, 10)
    assert [m["role"] for m in row["messages"]].count("assistant") == 2
    assert len(row["tool_trace"]) == 2
    assert row["verify_metrics"]["outcome"] == "error" and row["passed"] is False
    assert "HTTP 500" in row["extra"]["reason"]
    expected = shape(played)
    expected["extra"]["reason"] = "str"
    expected["model"] = "str"  # this policy names its model; random names none
    assert {k: v for k, v in shape(row).items() if k != "failure"} == expected


def test_an_episode_over_its_time_keeps_the_turns_it_played() -> None:
    from pytest_openenv.episode.loop import EpisodeTimeout, Limits

    family = build_family(SPEC.env, {}, ())
    clock = [0.0]
    with pytest.raises(EpisodeTimeout) as raised:
        run_episode(
            SPEC,
            EnvFactory(family, ()),
            AnswersThenFails(9, clock),
            limits=Limits(timeout=15.0),
            clock=lambda: clock[0],
        )
    partial = raised.value.partial
    assert partial is not None and partial.turns == 2
    assert partial.usage.prompt_tokens == 200


def test_an_episode_that_errors_before_any_answer_has_nothing_to_keep() -> None:
    from pytest_openenv.errors import EpisodeError

    family = build_family(SPEC.env, {}, ())
    with pytest.raises(EpisodeError) as raised:
        run_episode(SPEC, EnvFactory(family, ()), AnswersThenFails(0))
    assert raised.value.partial is None
