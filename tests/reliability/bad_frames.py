"""A WebSocket server that speaks OpenEnv's ``/ws`` framing badly, on purpose.

It answers each client frame with the next reply of a script: a good observation,
or something a broken or hostile server might send (truncated JSON, wrong types,
NaN rewards, deep nesting, invalid UTF-8, huge frames, silence, a dropped
connection). Once the script is used up it ends the game with a good final frame.
The point is malformed frames, so this is deliberately not a real OpenEnv server.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from websockets.sync.server import serve


def observation(
    *,
    legal: Any = (0, 1, 2, 3, 4, 5, 6, 7, 8),
    info_state: Any = None,
    reward: Any = None,
    done: Any = False,
    **extra: Any,
) -> dict[str, Any]:
    """An OpenEnv openspiel observation frame (fields overridable with any type)."""
    return {
        "type": "observation",
        "data": {
            "observation": {
                "info_state": [0.0] * 27 if info_state is None else info_state,
                "legal_actions": list(legal) if isinstance(legal, tuple) else legal,
                "game_phase": "playing",
                "current_player_id": 0,
                "opponent_last_action": None,
                **extra,
            },
            "reward": reward,
            "done": done,
        },
    }


GOOD = json.dumps(observation())
FINAL = json.dumps(observation(legal=[], reward=1.0, done=True))


@dataclass(frozen=True)
class Reply:
    """What to answer one client frame with."""

    payload: str | bytes | None = None  # None: no frame
    silence: float = 0.0  # seconds to wait first
    close: bool = False  # drop the connection instead of answering
    then: str | None = None  # a second frame right after (a stale extra answer)

    def __repr__(self) -> str:  # frames can be megabytes: show their start and size
        payload = self.payload
        shown = repr(payload[:80]) + (f"...({len(payload)} long)" if len(payload) > 80 else "")
        if payload is None:
            shown = "None"
        extra = "" if self.then is None else f", then={self.then[:40]!r}"
        return f"Reply({shown}, silence={self.silence}, close={self.close}{extra})"


class FrameServer:
    def __init__(self, script: list[Reply]) -> None:
        self.script = list(script)
        self.connections = 0
        self.frames_in: list[str] = []
        self._server = serve(
            self._session,
            "127.0.0.1",
            0,
            max_size=None,
            compression=None,
            ping_interval=None,
            process_request=self._plain_http,
        )
        self.port = self._server.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @staticmethod
    def _plain_http(connection: Any, request: Any) -> Any:
        """``GET /health`` says healthy (the plugin checks it before any episode)."""
        if request.path.split("?")[0] == "/health":
            return connection.respond(HTTPStatus.OK, '{"status": "healthy"}')
        return None  # /ws: go on with the WebSocket handshake

    def _session(self, ws: Any) -> None:
        self.connections += 1
        script = list(self.script)
        with contextlib.suppress(Exception):
            for raw in ws:
                self.frames_in.append(raw if isinstance(raw, str) else raw.decode("latin-1"))
                if '"close"' in self.frames_in[-1]:
                    return
                reply = script.pop(0) if script else Reply(FINAL)
                if reply.silence:
                    time.sleep(reply.silence)
                if reply.close:
                    return
                if reply.payload is not None:
                    ws.send(reply.payload)
                if reply.then is not None:
                    ws.send(reply.then)

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)


@contextlib.contextmanager
def frame_server(script: list[Reply]) -> Iterator[FrameServer]:
    server = FrameServer(script)
    try:
        yield server
    finally:
        server.stop()
