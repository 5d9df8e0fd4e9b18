"""The upstream reached with ``httpx``: one pooled client shared by the proxy's threads."""

from __future__ import annotations

import httpx

from .transport import UpstreamError


class HttpxTransport:
    def __init__(self, headers: dict[str, str], timeout: float, max_bytes: int) -> None:
        self._client = httpx.Client(headers=headers, timeout=timeout)
        self._timeout = timeout
        self._max_bytes = max_bytes

    def post(self, url: str, body: bytes) -> tuple[int, bytes]:
        try:
            response = self._client.post(url, content=body)
        except httpx.TimeoutException as exc:
            raise UpstreamError(504, f"the model endpoint gave no answer in time: {exc}") from exc
        except httpx.HTTPError as exc:
            raise UpstreamError(502, f"the model endpoint is unreachable: {exc}") from exc
        if len(response.content) > self._max_bytes:
            raise UpstreamError(502, f"the model endpoint answered over {self._max_bytes} bytes")
        return response.status_code, response.content

    def close(self) -> None:
        self._client.close()
