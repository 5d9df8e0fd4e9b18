"""What a chat template does with tools and tool calls, found by rendering a probe.

A local model sees only what its template renders. Templates differ: Qwen2.5's and
Llama 3.1's apply ``tojson`` to ``tool_calls[].function.arguments`` (JSON text given there
is encoded twice), DeepSeek-V3's concatenates it as a string (an object makes it raise),
SmolLM2's own drops the tools and the calls altogether. The probe renders one tool and one
call with each argument form and keeps the form whose arguments come out intact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ...errors import RenderTimeout
from ...util.render_bound import bounded_render

ArgumentsForm = Literal["string", "object"]
Render = Callable[[list[dict[str, Any]], list[dict[str, Any]]], str]

PROBE_DESCRIPTION = "probe-tool-description-58213"
PROBE_ARGUMENTS = {"probe_value": 918273}
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe_tool",
        "description": PROBE_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {"probe_value": {"type": "integer"}},
            "required": ["probe_value"],
        },
    },
}
_INTACT = re.compile(r'(?<!\\)"probe_value"\s*:\s*918273')


@dataclass(frozen=True)
class TemplateFit:
    #: the tool schemas reach the prompt
    shows_tools: bool
    #: how assistant tool calls must carry their arguments to render intact; None: neither
    arguments_form: ArgumentsForm | None

    def problems(self) -> list[str]:
        found = []
        if not self.shows_tools:
            found.append("does not render the tools, so the model never sees their schemas")
        if self.arguments_form is None:
            found.append(
                "drops or garbles the assistant's earlier tool calls (neither JSON text nor an "
                "object survives in tool_calls[].function.arguments)"
            )
        return found


def probe_messages(form: ArgumentsForm) -> list[dict[str, Any]]:
    arguments: Any = json.dumps(PROBE_ARGUMENTS) if form == "string" else dict(PROBE_ARGUMENTS)
    return [
        {"role": "system", "content": "probe"},
        {"role": "user", "content": "probe"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_probe",
                    "type": "function",
                    "function": {"name": "probe_tool", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_probe", "name": "probe_tool", "content": "ok"},
    ]


def probe(render: Render) -> TemplateFit:
    """Render the probe through ``render(messages, tools)``; a render that raises fails."""
    try:
        shows_tools = PROBE_DESCRIPTION in render(probe_messages("string")[:2], [PROBE_TOOL])
    except RenderTimeout:
        raise  # a template that loops is no fit to report: the caller stops the run
    except Exception:
        shows_tools = False
    form: ArgumentsForm | None = None
    # JSON text first: it is what the transcript holds, so nothing is converted when it works
    for candidate in ("string", "object"):
        try:
            text = render(probe_messages(candidate), [PROBE_TOOL])  # type: ignore[arg-type]
        except RenderTimeout:
            raise
        except Exception:  # a template may raise on the form it does not take (DeepSeek-V3)
            continue
        if _INTACT.search(text) and '\\"probe_value' not in text:
            form = candidate  # type: ignore[assignment]
            break
    return TemplateFit(shows_tools=shows_tools, arguments_form=form)


def in_form(messages: list[dict[str, Any]], form: ArgumentsForm | None) -> list[dict[str, Any]]:
    """The transcript with assistant tool-call arguments as ``form`` wants them."""
    if form != "object":
        return messages
    converted = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and calls:
            message = {**message, "tool_calls": [_as_object(call) for call in calls]}
        converted.append(message)
    return converted


def _as_object(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return call  # the model's malformed JSON stays as it wrote it
        if isinstance(parsed, dict):
            return {**call, "function": {**function, "arguments": parsed}}
    return call


def render_with_transformers(template: str) -> Render:
    """``render`` through transformers' own Jinja renderer (no tokenizer needed)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        with bounded_render("the checkpoint's chat template"):
            rendered, _ = render_jinja_template(
                conversations=[messages], tools=tools, chat_template=template
            )
        return rendered[0]

    return render
