"""The embedded reasoning_gym backend, in the shape of OpenEnv's reasoning_gym server.

One episode is one question: reset builds ``create_dataset(name, size=1,
seed=episode seed, **config)`` and shows its question; the single step scores
an answer with the dataset's own ``score_answer`` and ends the episode. The
observation fields (``question``, ``score``, ``correct_answer``,
``dataset_metadata``) match OpenEnv's server, so the adapter cannot tell this
backend from a deployed one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base import ActionRejected, Backend, EnvUnavailable, StepResult


def observation(
    *,
    question: str | None,
    score: float | None = None,
    correct_answer: str | None = None,
    dataset_metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "question": question,
        "score": score,
        "correct_answer": correct_answer,
        "dataset_metadata": dataset_metadata,
    }


class ReasoningGymEngine(Backend):
    kind = "embedded"

    def __init__(self, question_for: Callable[[int], tuple[Any, dict[str, Any]]]) -> None:
        #: seed -> a size-1 dataset and its question (the family caches them and bounds
        #: their generation: the oracle reads the same one)
        self._question_for = question_for
        self._dataset: Any = None
        self._entry: dict[str, Any] | None = None
        self._done = False

    def reset(self, *, seed: int, episode_id: str, **options: Any) -> StepResult:
        self._dataset, self._entry = self._question_for(seed)
        self._done = False
        return StepResult(observation=observation(question=self._entry["question"]), reward=0.0)

    def step(self, action: dict[str, Any]) -> StepResult:
        if self._entry is None:
            raise EnvUnavailable("step before reset")
        if self._done:
            raise ActionRejected("the question is already answered; the episode is over")
        answer = action.get("answer")
        if not isinstance(answer, str):
            raise ActionRejected(f"answer must be a string, got {answer!r}")
        score = float(self._dataset.score_answer(answer=answer, entry=self._entry))
        self._done = True
        metadata = self._entry.get("metadata") or None
        return StepResult(
            observation=observation(
                question=None,
                score=score,
                correct_answer=str(self._entry["answer"]),
                dataset_metadata=metadata,
            ),
            reward=score,
            done=True,
        )
