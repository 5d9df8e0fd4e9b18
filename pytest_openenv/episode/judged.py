"""An episode decided by a judge model (``--openenv-judge``): its verdict becomes the episode's.

The env's own verdict is kept beside the judge's in the row's ``judge`` struct
(``env_passed``: None where the env states none, an episode it never ended), so the run
can count how often the two agree. A judge that gives no verdict raises ``JudgeFailed``
carrying the played episode: its row keeps the transcript and the judge's error, and the
item errors.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..envs.verdict import FAIL, PASS, UNFINISHED, Decision, PassRule
from ..errors import JudgeFailed
from ..policies.base import Usage
from ..policies.judging import Judge, JudgeVerdict
from ..policies.judging.prompt import rubric_sha256
from .result import Episode

#: ``extra.judged_by`` of a judged episode
BASIS_JUDGE = "judge"


def env_verdict(episode: Episode) -> bool | None:
    """The env's own verdict; None where it states none (it never ended the episode)."""
    decision = episode.decision
    if decision is None or decision.status == UNFINISHED:
        return None
    return decision.passed


def judge_section(
    *,
    model: str,
    rubric: str,
    env_passed: bool | None,
    env_outcome: str,
    verdict: JudgeVerdict | None = None,
    error: str | None = None,
    usage: Usage | None = None,
) -> dict[str, Any]:
    """The row's ``judge``: the same keys and types whether the judge answered or not.
    ``env_passed``/``env_outcome``: the env's own verdict beside it (None: it states none)."""
    spent = usage or Usage()
    return {
        "model": model,
        "passed": verdict.passed if verdict is not None else False,
        "score": verdict.score if verdict is not None else None,
        "reasoning": verdict.reasoning if verdict is not None else "",
        "rubric_sha256": rubric_sha256(rubric),
        "env_passed": env_passed,
        "env_outcome": env_outcome,
        "error": error,
        "prompt_tokens": verdict.prompt_tokens if verdict is not None else spent.prompt_tokens,
        "completion_tokens": (
            verdict.completion_tokens if verdict is not None else spent.completion_tokens
        ),
        "cost_usd": None,
    }


def episode_judge_section(
    episode: Episode, judge: Judge, rubric: str, **answer: Any
) -> dict[str, Any]:
    """The row's ``judge`` of a played episode, the env's verdict read from it."""
    return judge_section(
        model=judge.model,
        rubric=rubric,
        env_passed=env_verdict(episode),
        env_outcome=episode.outcome,
        **answer,
    )


def judge_decision(verdict: JudgeVerdict, rule: PassRule, reward: float) -> Decision:
    """The episode's verdict in the judge's words."""
    basis_text = f"the judge {verdict.model}'s verdict (rubric sha256 {verdict.rubric_sha256[:12]})"
    if verdict.passed:
        return Decision(PASS, "pass", rule, reward, None, basis=BASIS_JUDGE, basis_text=basis_text)
    why = (
        f"fail: the judge {verdict.model} failed it (score {verdict.score:g}): {verdict.reasoning}"
    )
    return Decision(FAIL, "fail", rule, reward, why, basis=BASIS_JUDGE, basis_text=basis_text)


def judged_episode(episode: Episode, judge: Judge) -> Episode:
    """``episode`` with the judge's verdict as its own. Raises ``JudgeFailed`` (its
    ``partial`` the played episode, with the judge's error in its ``judge``)."""
    try:
        verdict = judge.judge(episode)
    except JudgeFailed as exc:
        usage = exc.usage if isinstance(exc.usage, Usage) else None
        section = episode_judge_section(episode, judge, judge.rubric, error=str(exc), usage=usage)
        exc.partial = dataclasses.replace(
            episode, passed=False, outcome="error", reason=str(exc), judge=section
        )
        raise
    rule = episode.decision.rule if episode.decision is not None else PassRule()
    decision = judge_decision(verdict, rule, episode.reward)
    return dataclasses.replace(
        episode,
        passed=decision.passed,
        outcome=decision.label,
        reason=decision.reason,
        decision=decision,
        judge=episode_judge_section(episode, judge, judge.rubric, verdict=verdict),
    )
