"""Does each tool call and tool result of a row survive its rendering through a chat template?

Each message's share of the rendering is the text it adds: the rendering of the
messages up to it minus the rendering of those before it (templates render a
conversation left to right; where a prefix does not render, or is not a prefix, the
whole rendering is searched instead). Then, for an assistant turn's call whose
arguments the env accepted (``tool_trace``), the arguments are intact when the turn's
text holds them as a JSON object equal to the call's (``{"action_id": 4}``, however
spaced or nested in the template's own wrapper), or holds every key and value as text
(templates that write ``<parameter=action_id>4</parameter>``). They are *double-encoded*
when the text holds them only as a JSON string of that object
(``"{\\"action_id\\": 4}"``: ``tojson`` applied to the string form), *not JSON* when as a
Python dict (``{'action_id': 4}``: an object printed as it is), and *missing* otherwise
(a template that renders the turn empty). A tool result is intact when its text is
there as it is or as a JSON string (Llama-3.1 applies ``tojson`` to results).
Refused calls (arguments null in object form, text that may not be JSON) are not
checked: there is nothing a model should learn to emit from them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ...errors import RenderTimeout
from .render import Renderer, TemplateFailure

#: characters of a turn's rendering shown in a problem
SHOWN = 160
_DECODER = json.JSONDecoder()


def clipped(text: str) -> str:
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def shown(text: str) -> str:
    """A rendering in a message: quoted, its newlines escaped, cut short."""
    return json.dumps(clipped(text), ensure_ascii=False)


def json_values(text: str, starts: str) -> Iterable[Any]:
    """Every JSON value that begins at a character of ``starts`` in ``text``."""
    for index, char in enumerate(text):
        if char in starts:
            try:
                yield _DECODER.raw_decode(text, index)[0]
            except ValueError:
                continue


def leaves(value: Any) -> Iterable[str]:
    """The keys and scalar values of a JSON object, as a template would print them."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    elif isinstance(value, bool):
        yield json.dumps(value)
    elif value is not None:
        yield value if isinstance(value, str) else json.dumps(value)


def call_problem(text: str, name: str, arguments: dict[str, Any]) -> str | None:
    """What is wrong with one call's rendering in its turn's ``text``, or None."""
    if any(value == arguments for value in json_values(text, "{")):
        intact = True
    elif any(
        isinstance(value, str) and value.lstrip().startswith("{") and _parses_to(value, arguments)
        for value in json_values(text, '"')
    ):
        return (
            f"the arguments of {name} are double-encoded: the turn renders them as a JSON "
            f"string of the object, {clipped(json.dumps(json.dumps(arguments)))} (the "
            "template applies tojson to text)"
        )
    elif repr(arguments) in text:
        return (
            f"the arguments of {name} render as a Python dict, {clipped(repr(arguments))}, not "
            "as JSON (the template prints the object as it is)"
        )
    else:
        intact = all(leaf in text for leaf in leaves(arguments))
    if not intact:
        return (
            f"the call to {name} is missing: its arguments are not in the assistant turn, "
            f"which renders as {shown(text)}"
        )
    if name not in text:
        return f"the tool name {name} is missing from the assistant turn {shown(text)}"
    return None


def _parses_to(text: str, arguments: dict[str, Any]) -> bool:
    try:
        return bool(json.loads(text) == arguments)
    except ValueError:
        return False


def result_problem(text: str, name: str, content: str) -> str | None:
    encoded = json.dumps(content, ensure_ascii=False)
    if content in text or encoded in text or json.dumps(content) in text:
        return None
    return f"the result of {name} is missing: the tool message renders as {shown(text)}"


def accepted_arguments(row: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Each call's accepted arguments in message order (``tool_trace``), None if refused."""
    calls = [c for m in row.get("messages") or () for c in m.get("tool_calls") or ()]
    trace = row.get("tool_trace") or []
    if len(trace) == len(calls):
        return [
            entry.get("arguments") if isinstance(entry.get("arguments"), dict) else None
            for entry in trace
        ]
    found: list[dict[str, Any] | None] = []
    for call in calls:  # not the runner's pairing: read each call's own arguments
        arguments = (call.get("function") or {}).get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
        found.append(arguments if isinstance(arguments, dict) and arguments else None)
    return found


class Turns:
    """A conversation's renderings by prefix, and each message's share of the last."""

    def __init__(self, renderer: Renderer, messages: list[dict[str, Any]], tools: Any) -> None:
        self.renderings: list[str | None] = []
        for end in range(len(messages) + 1):
            try:
                self.renderings.append(renderer.render(messages[:end], tools) if end else "")
            except RenderTimeout:
                raise  # one bound per row, not one per prefix
            except TemplateFailure:
                self.renderings.append(None)

    def text_of(self, index: int) -> str:
        before, after = self.renderings[index], self.renderings[index + 1]
        full = self.renderings[-1] or ""
        if before is None or after is None or not after.startswith(before):
            return full
        return after[len(before) :]


def row_problems(renderer: Renderer, row: dict[str, Any]) -> list[str]:
    """What does not survive ``row``'s rendering (empty: every call and result intact)."""
    messages = row.get("messages") or []
    tools = row.get("tools") or None
    try:
        renderer.render(messages, tools)
    except RenderTimeout:
        raise  # the template, not the row: the caller says so once
    except TemplateFailure as exc:
        return [f"the template fails on the row: {exc}"]
    turns = Turns(renderer, messages, tools)
    accepted = iter(accepted_arguments(row))
    problems: list[str] = []
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            text = turns.text_of(index)
            for call in message["tool_calls"]:
                arguments = next(accepted, None)
                name = str((call.get("function") or {}).get("name"))
                if arguments is not None:
                    problems.append(call_problem(text, name, arguments) or "")
        elif message.get("role") == "tool" and message.get("content"):
            name = str(message.get("name") or "a tool")
            problems.append(result_problem(turns.text_of(index), name, message["content"]) or "")
    return list(dict.fromkeys(problem for problem in problems if problem))


def rows_problems(renderer: Renderer, rows: Iterable[dict[str, Any]]) -> tuple[int, list[str]]:
    """Rows checked, and the distinct problems found in them (first ones first)."""
    checked, problems = 0, dict[str, None]()
    for row in rows:
        checked += 1
        problems.update(dict.fromkeys(row_problems(renderer, row)))
    return checked, list(problems)
