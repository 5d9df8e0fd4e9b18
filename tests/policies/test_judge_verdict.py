"""What the judge's answer must be: one JSON object with a bool, a score in [0, 1] and a text."""

from __future__ import annotations

import json

import pytest

from pytest_openenv.policies.judging.verdict import read_verdict


def answer(**fields: object) -> str:
    return json.dumps(fields)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (answer(passed=True, score=1, reasoning="done"), (True, 1.0, "done")),
        (answer(passed=False, score=0.25, reasoning=" lost "), (False, 0.25, "lost")),
        (
            "```json\n" + answer(passed=True, score=0.5, reasoning="fenced") + "\n```",
            (True, 0.5, "fenced"),
        ),
    ],
)
def test_a_verdict_is_read_from_its_json(text: str, expected: tuple[bool, float, str]) -> None:
    assert read_verdict(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "empty answer"),
        ("I'm sorry, I can't judge this.", "not the verdict's JSON"),
        ("[true, 1]", "not an object"),
        (answer(passed="yes", score=1, reasoning="r"), '"passed" is'),
        (answer(passed=True, score=1.5, reasoning="r"), '"score" is 1.5'),
        (answer(passed=True, score=True, reasoning="r"), '"score" is True'),
        ('{"passed": true, "score": NaN, "reasoning": "r"}', '"score" is nan'),
        (answer(passed=True, score=1), '"reasoning" is None'),
        (answer(passed=True, score=1, reasoning="  "), '"reasoning" is'),
        ("Sure! " + answer(passed=True, score=1, reasoning="r"), "not the verdict's JSON"),
    ],
)
def test_anything_else_is_no_verdict_and_says_what_was_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="judge") as raised:
        read_verdict(text)
    assert says in str(raised.value)
