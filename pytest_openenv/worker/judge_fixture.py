"""The ``judge`` fixture: ``assert judge(episode, rubric).passed, ...`` inside a test.

It asks the run's judge model (``--openenv-judge MODEL``) about the item's finished episode
by the rubric given (None: the run's). Its verdict goes in the row's ``judge``. A judge that
gives no verdict raises ``JudgeFailed``: the item is reported as an *error* (not a failure:
the agent did nothing wrong), its row goes to failures.jsonl as an error, and the run counts
it among the judge errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from ..episode.judged import episode_judge_section
from ..errors import JudgeFailed
from .items import spec_of

if TYPE_CHECKING:
    from ..episode.result import Episode
    from ..episode.service import EpisodeService
    from ..policies.judging import JudgeVerdict

#: the row's ``judge`` as the fixture's last call left it
JUDGE_SECTION_KEY: pytest.StashKey[dict[str, Any]] = pytest.StashKey()
#: why the fixture's judge gave no verdict (the item errors)
JUDGE_FAILED_KEY: pytest.StashKey[str] = pytest.StashKey()


class JudgeFixture:
    name = "openenv-judge-fixture"

    def __init__(self, service: EpisodeService) -> None:
        self.service = service

    @pytest.fixture
    def judge(self, request: pytest.FixtureRequest) -> Callable[..., JudgeVerdict]:
        """``judge(episode, rubric=None)``: the judge model's verdict on ``episode``."""
        item = request.node
        service = self.service

        def ask(episode: Episode, rubric: str | None = None) -> JudgeVerdict:
            judge = service.judge()
            if judge is None:
                raise pytest.UsageError(
                    "the judge fixture needs a judge model: pass --openenv-judge MODEL (its "
                    "endpoint with --openenv-judge-endpoint URL; default the policy's)"
                )
            used = judge.rubric if rubric is None else rubric
            try:
                verdict = judge.judge(episode, used)
            except JudgeFailed as exc:
                item.stash[JUDGE_FAILED_KEY] = str(exc)
                usage = exc.usage
                item.stash[JUDGE_SECTION_KEY] = episode_judge_section(
                    episode, judge, used, error=str(exc), usage=usage
                )
                raise
            item.stash[JUDGE_SECTION_KEY] = episode_judge_section(
                episode, judge, used, verdict=verdict
            )
            return verdict

        return ask


def judge_failure(item: pytest.Item) -> str | None:
    """Why the item's judge gave no verdict in its test body; None: it did, or none asked."""
    if spec_of(item) is None:
        return None
    return item.stash.get(JUDGE_FAILED_KEY, None)


def judge_section_of(item: pytest.Item) -> dict[str, Any] | None:
    """The row's ``judge`` the fixture made; None: the fixture was not asked."""
    return item.stash.get(JUDGE_SECTION_KEY, None)
