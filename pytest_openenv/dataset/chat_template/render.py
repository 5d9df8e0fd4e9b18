"""Rendering a chat template the way transformers' ``apply_chat_template`` does.

transformers compiles templates in jinja2's ``ImmutableSandboxedEnvironment`` with
``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols`` extension and a
``{% generation %}`` tag (assistant-only loss masks), its own ``tojson`` filter
(``json.dumps`` without HTML escaping, ``ensure_ascii=False``), and the globals
``raise_exception`` and ``strftime_now``; it renders with ``messages``, ``tools``,
``documents``, ``add_generation_prompt`` and the tokenizer's special tokens. Doing the
same here needs only jinja2 (imported when the option is set), not transformers.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ...errors import RenderTimeout, TemplateFailure
from ...util.render_bound import bounded_render
from .source import ChatTemplate


def tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _environment() -> Any:
    try:
        import jinja2
        from jinja2.ext import Extension
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as exc:
        raise TemplateFailure(
            "rendering chat templates needs jinja2: pip install 'pytest-openenv[chat-template]'"
        ) from exc

    class GenerationTag(Extension):
        """``{% generation %}...{% endgeneration %}``: its body, as rendered text."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_body")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return str(caller())

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols],
    )
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return environment


class Renderer:
    """One compiled template: ``render(messages, tools)`` is what a trainer tokenizes."""

    def __init__(self, template: ChatTemplate) -> None:
        self.template = template
        try:
            self._compiled = _environment().from_string(template.text)
        except TemplateFailure:
            raise
        except Exception as exc:  # jinja2's TemplateSyntaxError and kin
            raise TemplateFailure(
                f"{template.source} does not compile: {type(exc).__name__}: {exc}"
            ) from None

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        try:
            with bounded_render(f"the chat template of {self.template.source}"):
                return str(
                    self._compiled.render(
                        messages=messages,
                        tools=tools or None,
                        documents=None,
                        add_generation_prompt=False,
                        **self.template.tokens,
                    )
                )
        except RenderTimeout:
            raise
        except Exception as exc:  # a template's own raise_exception, a TypeError ...
            raise TemplateFailure(f"{type(exc).__name__}: {exc}") from None
