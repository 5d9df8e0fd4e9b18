"""A bound on how long a chat template may render.

A chat template is code from a checkpoint or a file: Jinja's sandbox keeps it from touching
the system, not from looping (``{% for i in range(100000) %}{% for j in range(100000) %}``
renders for hours, and a recursive macro as long as the stack allows). Jinja compiles a
template to Python whose code is named ``<template>``; while one renders (ours, or
transformers' ``apply_chat_template``), a trace function on those frames alone checks the
clock at each line and raises ``RenderTimeout`` once the bound has passed. Frames of any other
code are not traced, so the cost falls on the template's own lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from ..errors import RenderTimeout

#: seconds a chat template may take to render one conversation (a real one takes milliseconds)
RENDER_SECONDS = 5.0
#: the name Jinja gives the code it compiles from a template string
TEMPLATE_CODE = "<template>"


@contextmanager
def bounded_render(what: str, seconds: float = RENDER_SECONDS) -> Iterator[None]:
    """Run a template render; past ``seconds`` it raises ``RenderTimeout`` naming ``what``."""
    deadline = time.monotonic() + seconds

    def on_line(frame: FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise RenderTimeout(
                f"{what} did not finish rendering within {seconds:g}s: the template loops "
                "(or recurses) without end on this conversation"
            )
        return on_line

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename == TEMPLATE_CODE:
            return on_line(frame, event, arg)
        return None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)
