"""The judge: one model call per episode, through the package's own LLM policies.

The judge is an ``openai`` or ``anthropic`` policy (``policies/llm/``) built for the judge's
model and endpoint, wrapped by the response cache like any model policy: with
``--openenv-cache`` its calls are stored, and ``--openenv-replay`` replays them with the
endpoint down. It is asked with no tools, at temperature 0, and its answer must be the
verdict's JSON (``verdict.py``); anything else raises ``JudgeFailed``, an item error.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import CacheUnwritable, ContextExhausted, JudgeFailed, PolicyUnavailable
from ..base import Policy, Turn, Usage, check_answer_size
from .prompt import DEFAULT_RUBRIC, PROMPT_SHA256, judge_messages, rubric_sha256
from .verdict import JudgeVerdict, read_verdict

if TYPE_CHECKING:
    from ...config.settings import Settings
    from ...util.overload import OverloadSignal

#: the judge's sampling: the same transcript gets the same verdict (as far as the model allows)
JUDGE_TEMPERATURE = 0.0
#: room for the verdict's JSON and a paragraph of reasoning
JUDGE_MAX_TOKENS = 512


class Judged(Protocol):
    """What the judge reads of an episode: a played ``Episode`` or a saved row's fields."""

    episode_id: str
    seed: int
    env: str
    messages: list[dict[str, Any]]
    reward: float
    done: bool


def judge_provider(settings: Settings) -> str:
    """The judge's client: an endpoint is OpenAI-compatible; without one, the official API of
    the run's provider (``anthropic`` when the run plays Anthropic's models, else ``openai``)."""
    if settings.judge.endpoint or settings.llm.endpoint:
        return "openai"
    return "anthropic" if settings.run.policy == "anthropic" else "openai"


class Judge:
    """Decides episodes by a rubric; safe to call from several threads at once."""

    def __init__(
        self,
        policy: Policy,
        *,
        model: str,
        provider: str,
        rubric: str | None,
        endpoint: str | None = None,
    ) -> None:
        self.policy = policy
        self.model = model
        self.provider = provider
        #: the run's rubric (``--openenv-judge-rubric``), else the built-in one
        self.rubric = rubric if rubric is not None else DEFAULT_RUBRIC
        self.endpoint = endpoint

    def identity(self) -> dict[str, Any]:
        """What decides its verdicts, for the run identity and metadata.json (no secrets:
        the endpoint without credentials)."""
        from ...util.endpoints import redact

        return {
            "model": self.model,
            "provider": self.provider,
            "endpoint": redact(self.endpoint) if self.endpoint else None,
            "prompt_sha256": PROMPT_SHA256,
            "rubric_sha256": rubric_sha256(self.rubric),
            "rubric": self.rubric,
            "temperature": JUDGE_TEMPERATURE,
            "max_tokens": JUDGE_MAX_TOKENS,
        }

    def judge(self, episode: Judged, rubric: str | None = None) -> JudgeVerdict:
        """The verdict on ``episode`` by ``rubric`` (None: the run's). Raises ``JudgeFailed``
        (carrying ``usage``, the tokens the judge spent) when there is none."""
        rubric = self.rubric if rubric is None else rubric
        if not rubric.strip():
            raise ValueError("judge(episode, rubric): the rubric is empty")
        turn = Turn(
            messages=judge_messages(episode, rubric),
            tools=[],
            episode_id=episode.episode_id,
            seed=episode.seed,
            turn=1,
        )
        where = f"the judge {self.model} on {episode.episode_id}"
        try:
            reply = self.policy.act(turn)
            check_answer_size(reply, f"judge {self.model}")
        except CacheUnwritable:
            raise  # the run stops, as for a policy's cache
        except (PolicyUnavailable, ContextExhausted) as exc:
            raise failed(f"{where} gave no answer: {exc}", Usage()) from exc
        usage = reply.usage
        if reply.tool_calls and not reply.content.strip():
            raise failed(f"{where} answered with a tool call, not the verdict's JSON", usage)
        try:
            passed, score, reasoning = read_verdict(reply.content)
        except ValueError as exc:
            raise failed(f"{where}: {exc}", usage) from None
        return JudgeVerdict(
            model=self.model,
            passed=passed,
            score=score,
            reasoning=reasoning,
            rubric_sha256=rubric_sha256(rubric),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )

    def close(self) -> None:
        self.policy.close()


def failed(message: str, usage: Usage) -> JudgeFailed:
    error = JudgeFailed(message)
    error.usage = usage
    return error


def build_judge(
    settings: Settings, overload: OverloadSignal | None = None, *, rubric: str | None = None
) -> Judge | None:
    """The run's judge (None without ``--openenv-judge``); a judge that cannot be built (no
    key, no SDK) is a ``pytest.UsageError`` before any episode. ``rubric``: instead of the
    run's (``rescore``)."""
    from ..registry import build_policy

    model = settings.judge.model
    if model is None:
        return None
    provider = judge_provider(settings)
    endpoint = settings.judge.endpoint or settings.llm.endpoint
    llm = dataclasses.replace(
        settings.llm,
        model=model,
        models=(model,),
        endpoint=endpoint,
        temperature=JUDGE_TEMPERATURE,
        max_tokens=JUDGE_MAX_TOKENS,
    )
    run = dataclasses.replace(settings.run, policy=provider, policies=(provider,))
    judge_settings = dataclasses.replace(settings, llm=llm, run=run)
    try:
        policy = build_policy(provider, judge_settings, overload)
    except Exception as exc:
        import pytest

        if isinstance(exc, pytest.UsageError):
            said = str(exc).replace(
                f"--openenv-policy={provider}", f"the judge's {provider} client"
            )
            said = said.replace("--openenv-model", "--openenv-judge")
            raise pytest.UsageError(f"--openenv-judge={model}: {said}") from None
        raise
    return Judge(
        policy,
        model=model,
        provider=provider,
        rubric=rubric if rubric is not None else settings.judge.rubric,
        endpoint=endpoint,
    )
