"""One row as one inspect ``EvalSample``: its messages, score, usage and error.

- ``id``: the episode id without its ``-rN`` repeat suffix and ``epoch`` the repeat + 1,
  because inspect names a dataset sample by its id and each run of it by its epoch
  (its readers look samples up by id x epoch); without repeats the id is the episode
  id as it is, and the full episode id is always in the sample's metadata.
- ``input``: the first user message; ``target``: the env's reference answer, if any.
- ``messages``: inspect's chat messages, the assistant's tool calls as ``ToolCall``
  (arguments parsed; text that is not a JSON object kept as the call's parse error)
  and each tool result as ``ChatMessageTool`` (a refused call's error as its error).
- ``scores["verdict"]``: ``C`` when the episode passed, ``I`` otherwise (an errored
  episode too: the pass rate counts it as not passed); metadata: reward, turns, outcome,
  the env's own verdict, the test's outcome.
- ``model_usage``: the episode's tokens (and cost, where priced) under the model name.
- an errored episode's ``error`` holds its failure message.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...dataset.played import is_error

#: the repeat suffix of an episode id (``ep-000003-r1``)
_REPEAT = re.compile(r"-r\d+$")
CORRECT, INCORRECT = "C", "I"


def sample_id(row: dict[str, Any]) -> str:
    return _REPEAT.sub("", str(row["episode_id"]))


def epoch_of(row: dict[str, Any]) -> int:
    repeat = (row.get("extra") or {}).get("repeat")
    return (repeat if isinstance(repeat, int) else 0) + 1


def first_prompt(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "user":
            return _text(message.get("content"))
    return ""


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def tool_call(call: dict[str, Any], index: int) -> Any:
    from inspect_ai.tool import ToolCall

    function = call.get("function") or {}
    raw = function.get("arguments")
    arguments: Any = raw
    parse_error = None
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            arguments, parse_error = {}, f"not JSON ({exc}): {raw}"
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        arguments, parse_error = {}, f"not a JSON object: {_text(raw)}"
    return ToolCall(
        id=str(call.get("id") or f"call_{index:03d}"),
        function=str(function.get("name") or ""),
        arguments=arguments,
        parse_error=parse_error,
    )


def chat_messages(row: dict[str, Any], model: str | None) -> list[Any]:
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
    )
    from inspect_ai.tool import ToolCallError

    errors = [((entry.get("result") or {}).get("error")) for entry in row.get("tool_trace") or []]
    converted: list[Any] = []
    calls = tools = 0
    for message in row.get("messages") or []:
        role, content = message.get("role"), _text(message.get("content"))
        if role == "system":
            converted.append(ChatMessageSystem(content=content))
        elif role == "user":
            converted.append(ChatMessageUser(content=content))
        elif role == "assistant":
            made = []
            for call in message.get("tool_calls") or []:
                calls += 1
                made.append(tool_call(call, calls))
            converted.append(
                ChatMessageAssistant(content=content, tool_calls=made or None, model=model)
            )
        elif role == "tool":
            error = errors[tools] if tools < len(errors) and len(errors) == calls else None
            tools += 1
            converted.append(
                ChatMessageTool(
                    content=content,
                    tool_call_id=message.get("tool_call_id"),
                    function=message.get("name"),
                    error=ToolCallError("parsing", str(error)) if error else None,
                )
            )
    return converted


def verdict_score(row: dict[str, Any]) -> Any:
    from inspect_ai.scorer import Score

    verify, metrics = row.get("verify_metrics") or {}, row.get("metrics") or {}
    failure = row.get("failure") or {}
    passed = bool(row.get("passed")) and not is_error(row)
    return Score(
        value=CORRECT if passed else INCORRECT,
        answer=verify.get("outcome"),
        explanation=failure.get("message") or (row.get("extra") or {}).get("reason"),
        metadata={
            "reward": float(row.get("reward") or 0.0),
            "turns": int(metrics.get("turns") or 0),
            "outcome": verify.get("outcome"),
            "env_verdict": bool(verify.get("verdict")),
            "min_reward": verify.get("min_reward"),
            "test_outcome": failure.get("outcome") or "passed",
        },
    )


def judge_scores(row: dict[str, Any]) -> dict[str, Any]:
    """``judge``: the judge model's verdict, score and reasoning (--openenv-judge, or the
    ``judge`` fixture); none for a row no judge decided."""
    judged = row.get("judge")
    if not isinstance(judged, dict):
        return {}
    from inspect_ai.scorer import Score

    error = judged.get("error")
    return {
        "judge": Score(
            value=CORRECT if judged.get("passed") and not error else INCORRECT,
            answer="error" if error else ("pass" if judged.get("passed") else "fail"),
            explanation=error or judged.get("reasoning"),
            metadata={
                "judge_model": judged.get("model"),
                "score": judged.get("score"),
                "rubric_sha256": judged.get("rubric_sha256"),
                "env_passed": judged.get("env_passed"),
                "judge_error": error is not None,
            },
        )
    }


def usage(row: dict[str, Any], model: str) -> dict[str, Any]:
    from inspect_ai.model import ModelUsage

    metrics = row.get("metrics") or {}
    prompt, completion = (
        int(metrics.get("prompt_tokens") or 0),
        int(metrics.get("completion_tokens") or 0),
    )
    if not (prompt or completion or row.get("model")):
        return {}
    cost = metrics.get("cost_usd")
    return {
        model: ModelUsage(
            input_tokens=prompt,
            output_tokens=completion,
            total_tokens=prompt + completion,
            total_cost=float(cost) if isinstance(cost, (int, float)) else None,
        )
    }


def eval_sample(row: dict[str, Any], model: str) -> Any:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput

    messages = chat_messages(row, row.get("model"))
    last = next((m for m in reversed(messages) if isinstance(m, ChatMessageAssistant)), None)
    output = (
        ModelOutput(model=model, choices=[ChatCompletionChoice(message=last, stop_reason="stop")])
        if last is not None
        else ModelOutput(model=model)
    )
    task = row.get("task") or {}
    answer = task.get("answer")
    metrics = row.get("metrics") or {}
    failure = row.get("failure") or {}
    error = None
    if is_error(row):
        message = str(failure.get("message") or (row.get("extra") or {}).get("reason") or "")
        error = EvalError(message=message, traceback=message, traceback_ansi=message)
    wall = metrics.get("wall_time_s")
    return EvalSample(
        id=sample_id(row),
        epoch=epoch_of(row),
        input=first_prompt(row.get("messages") or []),
        target=str(answer) if answer is not None else "",
        messages=messages,
        output=output,
        scores={"verdict": verdict_score(row), **judge_scores(row)},
        metadata={
            "episode_id": row["episode_id"],
            "seed": row.get("seed"),
            "env": row.get("env"),
            "policy": row.get("policy"),
            "model": row.get("model"),
            "test": row.get("test"),
            "reward": float(row.get("reward") or 0.0),
            "passed": bool(row.get("passed")),
        },
        model_usage=usage(row, model),
        total_time=float(wall) if isinstance(wall, (int, float)) else None,
        error=error,
    )
