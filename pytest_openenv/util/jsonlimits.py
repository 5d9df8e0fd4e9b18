"""Bounds on JSON we did not write: option values and what servers answer.

``json.loads`` recurses once per nesting level, so a value nested a few thousand
deep escapes as ``RecursionError`` (an INTERNALERROR), and one a few hundred deep
parses but breaks whoever walks it next (copying, hashing, dumping). No env
config or action schema needs more than a few dozen levels.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import JSONTooDeep

#: deepest nesting accepted in an env config or a server's JSON answer
MAX_JSON_DEPTH = 100
#: most bytes read from one JSON answer of a server (``/schema``, ``/metadata``, ``/health``)
MAX_JSON_BYTES = 8 * 1024 * 1024
#: most bytes of one model answer: its HTTP body as read, and a policy's reply (content
#: and tool-call arguments). 256 tokens are a few KB; even 100k tokens with logprobs stay
#: well under it. One 400 MB answer cost 1.7 GB of memory and became a 400 MB row.
MAX_ANSWER_BYTES = 32 * 1024 * 1024


def depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            level += 1
            deepest = max(deepest, level)
            stack.extend((child, level) for child in item)
    return deepest


def loads_bounded(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` with ``JSONTooDeep``.

    Other malformed input raises ``ValueError`` as ``json.loads`` does.
    """
    too_deep = JSONTooDeep(f"nested deeper than {max_depth} levels")
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    if depth(value) > max_depth:
        raise too_deep
    return value
