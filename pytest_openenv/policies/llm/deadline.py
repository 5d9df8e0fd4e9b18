"""A wall-clock bound on each model request, its answer's bytes included, and a size bound.

The SDKs pass their ``timeout`` to httpx, where it bounds each socket read, not
the request: an endpoint that trickles its answer one byte at a time (slowloris)
holds an episode forever. These httpx event hooks stamp each request when it is
sent and make reading the body fail with ``ReadTimeout`` once the request's
own read timeout has passed since then; the SDK treats that like any timeout
(retried up to ``max_retries``, then ``APITimeoutError``).

The SDKs also read a whole body into memory before parsing it, so reading stops
with ``AnswerTooLarge`` past ``MAX_ANSWER_BYTES`` (the SDK wraps it in its connection
error; the policy finds it there and says what happened).
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...errors import AnswerTooLarge, PolicyUnavailable
from ...util.jsonlimits import MAX_ANSWER_BYTES

if TYPE_CHECKING:
    from ...util.overload import OverloadSignal
    from ..base import Turn

#: where a request carries the moment it was sent (httpcore ignores keys it does not know)
SENT = "pytest_openenv_sent"


def seconds_left(turn: Turn, request_timeout: float, episode_timeout: float | None) -> float:
    """Seconds the next model call may take: ``request_timeout``, or less when the episode
    (``--openenv-timeout``) has less left; none left is ``PolicyUnavailable``."""
    if turn.deadline is None:
        return request_timeout
    remaining = turn.deadline - time.monotonic()
    if remaining <= 0.01:
        raise PolicyUnavailable(
            f"--openenv-timeout={episode_timeout or 0:g}s ran out before the model was asked"
        )
    return min(remaining, request_timeout)


def stamp_request(request: Any) -> None:
    request.extensions[SENT] = time.monotonic()


def bound_response(response: Any, max_bytes: int = MAX_ANSWER_BYTES) -> None:
    """Bound the body of ``response`` by the read timeout, counted from the request's send,
    and by ``max_bytes``."""
    request = response.request
    limit = (request.extensions.get("timeout") or {}).get("read")
    sent = request.extensions.get(SENT)
    deadline = None if limit is None or sent is None else sent + limit
    url = request.url
    where = f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")
    size = response.headers.get("content-length", "")
    if size.isdigit() and int(size) > max_bytes:
        raise too_large(where, f"Content-Length: {size}", max_bytes)
    # the SDKs ship their own httpx (``httpx`` or ``httpx2``): use the one that answered
    stream_class = _deadline_stream_class(type(response).__module__.partition(".")[0])
    response.stream = stream_class(response.stream, request, deadline, limit, max_bytes, where)


def too_large(where: str, seen: str, max_bytes: int) -> AnswerTooLarge:
    return AnswerTooLarge(
        f"the model endpoint {where} sent an answer over {max_bytes} bytes ({seen}); no "
        "--openenv-max-tokens comes near that: the endpoint ignores the limit or is not a "
        "model. Reading stopped there"
    )


@functools.cache
def _deadline_stream_class(httpx_name: str) -> type:
    httpx = importlib.import_module(httpx_name)

    class DeadlineStream(httpx.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(
            self,
            inner: Any,
            request: Any,
            deadline: float | None,
            limit: float | None,
            max_bytes: int,
            where: str,
        ) -> None:
            self._inner = inner
            self._request = request
            self._deadline = deadline
            self._limit = limit
            self._max_bytes = max_bytes
            self._where = where

        def __iter__(self) -> Iterator[bytes]:
            read = 0
            for chunk in self._inner:
                if self._deadline is not None and time.monotonic() > self._deadline:
                    raise httpx.ReadTimeout(
                        f"the answer was not complete {self._limit:g}s after the request was sent",
                        request=self._request,
                    )
                read += len(chunk)
                if read > self._max_bytes:
                    raise too_large(self._where, f"{read} bytes read", self._max_bytes)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    return DeadlineStream


#: the longest ``Retry-After`` a retry waits for (the openai SDK's own cap): past it the
#: SDK is told not to retry (the anthropic SDK would otherwise sleep as long as asked)
LONGEST_RETRY_AFTER = 120.0


def retry_after(headers: Any) -> float | None:
    """Seconds a response asks to wait (``retry-after-ms``, ``Retry-After`` secs or date)."""
    import email.utils

    try:
        return float(headers.get("retry-after-ms")) / 1000
    except (TypeError, ValueError):
        pass
    raw = headers.get("retry-after")
    try:
        return float(raw)
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


def retry_after_said(headers: Any) -> str:
    """The header ``retry_after`` took the wait from, as ``name: value``."""
    millis = headers.get("retry-after-ms")
    try:
        float(millis)
    except (TypeError, ValueError):
        return f"Retry-After: {headers.get('retry-after')}"
    return f"retry-after-ms: {millis}"


def refuse_long_waits(response: Any) -> None:
    wait = retry_after(response.headers)
    if wait is not None and wait > LONGEST_RETRY_AFTER:
        response.headers["x-should-retry"] = "false"  # both SDKs obey it before any wait


def model_event_hooks(
    on_request: Callable[[Any], None] | None = None,
    overload: OverloadSignal | None = None,
) -> dict[str, list[Callable[[Any], None]]]:
    """Hooks for an SDK's httpx client: the request bound, overload counting, long waits.

    ``on_request`` sees every request sent, retries included (to count attempts);
    ``overload`` hears every 429/503 answer, retried ones included.
    """
    request_hooks = [stamp_request] + ([on_request] if on_request is not None else [])
    response_hooks = [refuse_long_waits, bound_response]
    if overload is not None:
        response_hooks.insert(0, overload.observe_response)
    return {"request": request_hooks, "response": response_hooks}
