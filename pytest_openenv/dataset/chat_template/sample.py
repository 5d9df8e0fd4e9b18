"""The row checked before any episode runs: the env's own tools and prompt, sample calls.

Rendering needs a row, and the run has none yet: this one has the family's system
prompt and tools (the schemas the template prints), two rounds of an assistant turn
calling a tool with arguments made from its JSON schema and the tool's result, in the
shape the runner records them, so ``stable_row`` writes it in either argument form.
"""

from __future__ import annotations

import json
from typing import Any

from ...envs.base import EnvFamily

#: assistant turns in the sample: two, so a template that treats the last turn apart
#: (or drops earlier calls) is seen
ROUNDS = 2
#: tools called at most (each once more than the rounds would): schemas can be many
MOST_TOOLS = 3


def example_value(schema: Any, depth: int = 0) -> Any:
    """A value that fits ``schema`` (enough of JSON schema for tool arguments)."""
    if not isinstance(schema, dict) or depth > 6:
        return "sample"
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return example_value(options[0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and "properties" in schema:
        kind = "object"
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        value = 7
        if isinstance(low, int) and value < low:
            value = low
        if isinstance(high, int) and value > high:
            value = high
        return value
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        return [example_value(schema.get("items"), depth + 1)]
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        return {str(name): example_value(sub, depth + 1) for name, sub in properties.items()}
    return "sample answer"


def sample_arguments(tool: dict[str, Any]) -> dict[str, Any]:
    value = example_value((tool.get("function") or {}).get("parameters") or {})
    return value if isinstance(value, dict) else {}


def sample_row(family: EnvFamily, system_prompt: str | None) -> dict[str, Any]:
    """A raw row (what ``stable_row`` takes) for ``family``'s tools and prompt."""
    prompt = family.default_system_prompt() if system_prompt is None else system_prompt
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}] if prompt else []
    messages.append({"role": "user", "content": "A sample task, to check the chat template."})
    tools = family.openai_tools()
    rounds = max(ROUNDS, min(len(tools), MOST_TOOLS)) if tools else 0
    called = [tools[i % len(tools)] for i in range(rounds)]
    trace = []
    for number, tool in enumerate(called, start=1):
        name = str((tool.get("function") or {}).get("name"))
        arguments = sample_arguments(tool)
        text = json.dumps(arguments)
        call_id = f"call_{number:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": text},
                    }
                ],
            }
        )
        result = f"Sample result {number} of {name}."
        messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": result})
        trace.append(
            {
                "tool_name": name,
                "arguments": arguments,
                "arguments_text": text,
                "result": {"data": result, "done": False, "reward": 0.0, "error": None},
            }
        )
    return {"messages": messages, "tools": tools, "tool_trace": trace}
