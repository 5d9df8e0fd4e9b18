"""The remote backend: one env session on a deployed OpenEnv server, over its ``/ws``.

OpenEnv's HTTP ``/reset`` and ``/step`` build a fresh env per request, so a
multi-step episode needs the WebSocket session protocol (one env per
connection; docs/architecture.md, "Envs and policies"). Outcomes of the server's answers:

- ``VALIDATION_ERROR`` / ``EXECUTION_ERROR``: the env refused the action; it goes
  back to the policy as a tool error (``ActionRejected``), the episode goes on.
- ``CAPACITY_REACHED``: the server has no free session; wait with backoff and try
  again, within the episode's time limit.
- a dropped connection, a silent server, any other error code: an infrastructure
  fault (``EnvUnavailable``) that makes the episode an *error*. Every wait has a
  timeout, so nothing hangs.

With a ``lease`` (several servers, ``rotation``), a session that cannot be opened
moves the episode to another server once, and a refused or dropped connection takes
its server out of rotation for a while.

Kept sessions, what each server hosts and the overload signal are the process's
``RemoteServers``, handed over by ``attach`` (``EnvFactory.open`` does it); a
backend used on its own keeps a view of its own.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from typing import TYPE_CHECKING, Any

from ...errors import CannotConnect, CapacityReached
from ...util.endpoints import ServerURL
from ..base import ActionRejected, Backend, EnvUnavailable, StepResult
from .hosting import ServerReport
from .servers import RemoteServers
from .sessions import end

if TYPE_CHECKING:
    from .rotation import Lease

#: error codes that mean "the env refused this request": the agent's problem
REJECTION_CODES = ("VALIDATION_ERROR", "EXECUTION_ERROR")
CAPACITY_CODE = "CAPACITY_REACHED"

#: how long to wait for a free session when the episode has no --openenv-timeout
DEFAULT_CAPACITY_WAIT = 120.0
#: longest silence accepted from a server for one request (bounded by the episode's time)
DEFAULT_MESSAGE_TIMEOUT = 300.0
DEFAULT_CONNECT_TIMEOUT = 10.0
FIRST_BACKOFF = 0.05
MAX_BACKOFF = 2.0
#: how near the time limit a failed connect counts as having run out of time
DEADLINE_SLACK = 0.05
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: how long closing may wait for a silent server's goodbye before dropping the socket
CLOSE_TIMEOUT = 2.0


def describe_error(data: dict[str, Any]) -> str:
    """An error frame as one readable line, with pydantic's field errors when present."""
    message = str(data.get("message") or "error")
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        details = []
        for err in errors[:5]:
            if not isinstance(err, dict):
                continue
            loc = err.get("loc")
            parts = loc if isinstance(loc, (list, tuple)) else () if loc is None else (loc,)
            where = ".".join(str(p) for p in parts) or "action"
            details.append(f"{where}: {err.get('msg', 'invalid')}")
        if details:
            message = f"{message} ({'; '.join(details)})"
    return message


def as_json(value: Any) -> str:
    """A frame's value as the server wrote it (``"false"`` stays visibly a string), cut short."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text[:100] + ("..." if len(text) > 100 else "")


class RemoteBackend(Backend):
    kind = "remote"

    def __init__(
        self,
        server_url: str | ServerURL,
        *,
        remote: RemoteServers | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        message_timeout: float = DEFAULT_MESSAGE_TIMEOUT,
        capacity_wait: float = DEFAULT_CAPACITY_WAIT,
    ) -> None:
        self.server = (
            server_url if isinstance(server_url, ServerURL) else ServerURL.parse(server_url)
        )
        self.location = self.server.public
        self._connect_timeout = connect_timeout
        self._message_timeout = message_timeout
        self._capacity_wait = capacity_wait
        self._deadline: float | None = None
        self._ws: Any = None
        #: a request was sent and its answer not yet read: the session cannot be kept
        self._in_flight = False
        #: sessions the server refused for capacity before one was granted (for tests/metrics)
        self.capacity_retries = 0
        self._remote = remote
        #: this episode's hold on its server among several (``attach``)
        self.lease: Lease | None = None
        #: resetting a kept session: its drop means it went stale, not that the server failed
        self._reusing = False
        #: the connection has answered a request: any frame waiting before the next is stale
        self._answered = True

    def attach(self, remote: RemoteServers, lease: Lease | None = None) -> None:
        """Join the process's view of its servers and hold ``lease`` (given back on ``close``).

        ``EnvFactory.open`` calls it before the reset.
        """
        self._remote = remote
        self.lease = lease

    @property
    def remote(self) -> RemoteServers:
        """The process's view of its servers (``attach``), or one of this backend's own."""
        if self._remote is None:
            self._remote = RemoteServers()
        return self._remote

    # -- Backend ---------------------------------------------------------------
    def limit_time(self, seconds: float | None) -> None:
        self._deadline = None if seconds is None else time.monotonic() + seconds

    def reset(self, *, seed: int, episode_id: str, **options: Any) -> StepResult:
        data = {"seed": seed, "episode_id": episode_id, **options}
        from_pool = self._ws is None  # a fresh backend resets a kept session, if any
        if from_pool:
            self._ws = self.remote.sessions.take(self.server)
            if self._ws is None:
                return self._open_session(data)
        try:
            self._reusing = from_pool
            return self._result(self._request({"type": "reset", "data": data}))
        except EnvUnavailable:
            if not from_pool:
                raise
            # the kept session went stale (the server restarted or dropped it): start over
            self._reusing = False
            self._drop()
            return self._open_session(data)
        finally:
            self._reusing = False

    def step(self, action: dict[str, Any]) -> StepResult:
        if self._ws is None:
            raise EnvUnavailable("step before reset: no session is open")
        return self._result(self._request({"type": "step", "data": action}))

    def state(self) -> dict[str, Any]:
        if self._ws is None:
            raise EnvUnavailable("state before reset: no session is open")
        frame = self._request({"type": "state"})
        data = frame.get("data")
        return data if isinstance(data, dict) else {}

    def server_report(self, first: StepResult) -> ServerReport:
        """What this session's server says it hosts (see ``hosting``), for the episode check.

        The session's state is asked once per session; a server that does not answer
        ``state`` (an error frame) simply cannot say.
        """
        ws = self._ws
        if ws is None:
            raise EnvUnavailable("server_report before reset: no session is open")
        remote = self.remote
        known, state = remote.session_states.known(ws)
        if not known:  # one session is used by one episode at a time: no race on ``ws``
            state = self.state_or_none()
            remote.session_states.remember(ws, state)
        return remote.known.session_report(self.server, state, first)

    def state_or_none(self) -> dict[str, Any] | None:
        """The session's ``state`` frame; None when the server answers it with an error."""
        if self._ws is None:
            raise EnvUnavailable("state before reset: no session is open")
        frame = self._request({"type": "state"}, refusal_ok=True)
        data = frame.get("data") if frame.get("type") == "state" else None
        return data if isinstance(data, dict) else None

    def close(self) -> None:
        ws, self._ws = self._ws, None
        try:
            if ws is None:
                return
            if not self._in_flight and self.remote.sessions.give(self.server, ws):
                return  # the next episode resets it (sessions.py says when that is allowed)
            end(ws)
        finally:
            if self.lease is not None:
                self.lease.close()

    # -- session ---------------------------------------------------------------
    def _open_session(self, reset_data: dict[str, Any]) -> StepResult:
        """Connect and reset; a full server is retried with backoff until time runs out."""
        started = time.monotonic()
        give_up = started + self._capacity_wait
        if self._deadline is not None:
            give_up = self._deadline
        delay = FIRST_BACKOFF
        rng = random.Random()
        last_refusal = ""
        while True:
            try:
                self._connect_somewhere()
                return self._result(self._request({"type": "reset", "data": reset_data}))
            except CapacityReached as exc:
                self._drop()
                self.remote.sessions.crowded(self.server)
                self.remote.overload.fire()  # --openenv-concurrency auto: fewer in flight
                self.capacity_retries += 1
                last_refusal = str(exc)
                pause = rng.uniform(delay / 2, delay)
                if time.monotonic() + pause >= give_up:
                    raise self._stayed_at_capacity(started, last_refusal) from None
                time.sleep(pause)
                delay = min(MAX_BACKOFF, delay * 2)
            except EnvUnavailable as exc:
                # The retry's own connect gets only what is left of the episode's time, so
                # a full server's last retry may run out in the handshake: the cause is
                # still the capacity, which the bare timeout would hide.
                if self.capacity_retries and time.monotonic() >= give_up - DEADLINE_SLACK:
                    raise self._stayed_at_capacity(
                        started, f"{last_refusal}; the last retry: {exc}"
                    ) from None
                raise

    def _stayed_at_capacity(self, started: float, refusal: str) -> EnvUnavailable:
        return EnvUnavailable(
            f"{self.location} stayed at capacity for {time.monotonic() - started:.1f}s "
            f"({self.capacity_retries} refused session(s)); the episode's time "
            f"ran out: {refusal}"
        )

    def session_problem(self) -> str | None:
        """Why no WebSocket session can be opened at ``/ws`` now, or None when one can
        (opened and closed at once: nothing is reset)."""
        self.limit_time(10.0)
        try:
            self._connect()
        except (CannotConnect, EnvUnavailable) as exc:
            return str(exc)
        self._drop()
        return None

    def _connect_somewhere(self) -> None:
        """Connect; a server that refuses hands the episode to another in rotation, once."""
        while True:
            try:
                self._connect()
                return
            except CannotConnect as exc:
                other = self.lease.move(str(exc)) if self.lease is not None else None
                if other is None:
                    raise
                # nothing was sent: the episode has not begun, so it starts over there
                self.server = ServerURL.parse(other)
                self.location = self.server.public

    def _connect(self) -> None:
        from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI
        from websockets.sync.client import connect

        url = self.server.ws_session_url
        try:
            connection = connect(
                url,
                additional_headers=self.server.headers() or None,
                open_timeout=self._bounded(self._connect_timeout),
                proxy=None if self.server.is_loopback else True,
                compression=None,
                max_size=MAX_MESSAGE_BYTES,
                close_timeout=CLOSE_TIMEOUT,
            )
            # Recent websockets warn unless a connection is entered as a context manager;
            # entering does nothing else, and ``close``/``_drop`` end it.
            self._ws = connection.__enter__()
            self._in_flight = False
            self._answered = False  # a refused session's error frame may already be waiting
        # ConnectionClosed: a server that accepts and hangs up mid-handshake, at times
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI, ConnectionClosed) as exc:
            self._ws = None
            raise CannotConnect(
                f"cannot open a session at {self.location}/ws: {self._why(exc)}"
            ) from None

    def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                ws.close()

    def _bounded(self, seconds: float) -> float:
        if self._deadline is None:
            return seconds
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise EnvUnavailable(f"the episode ran out of time talking to {self.location}")
        return min(seconds, remaining)

    def _lost(self, why: str, *, dropped: bool = False) -> EnvUnavailable:
        """Drop the connection (it cannot be trusted any more) and describe the fault.

        ``dropped``: the server closed or reset it, which takes the server out of rotation.
        """
        self._drop()
        if dropped and self.lease is not None and not self._reusing:
            self.lease.fault(why)
        return EnvUnavailable(why)

    def _why(self, exc: BaseException) -> str:
        return self.server.scrub(str(exc)) or type(exc).__name__

    def _request(self, message: dict[str, Any], *, refusal_ok: bool = False) -> dict[str, Any]:
        """Send one frame and read its answer; ``refusal_ok``: an error frame is returned."""
        from websockets.exceptions import ConnectionClosed

        ws = self._ws
        self._in_flight = True
        if self._answered:
            self._refuse_stale_frame(message["type"])
        try:
            ws.send(json.dumps(message))
        except ConnectionClosed:
            # A refused session sends its error frame and closes; if the close won the
            # race against our send, the frame is still queued for recv below.
            pass
        except OSError as exc:
            raise self._lost(
                f"connection to {self.location} failed: {self._why(exc)}", dropped=True
            ) from None
        try:
            raw = ws.recv(timeout=self._bounded(self._message_timeout))
        except TimeoutError:
            raise self._lost(
                f"{self.location} sent no answer to {message['type']!r} in time"
            ) from None
        except ConnectionClosed as exc:
            raise self._lost(
                f"connection to {self.location} dropped during {message['type']!r}: "
                f"{self._why(exc)}",
                dropped=True,
            ) from None
        except OSError as exc:
            raise self._lost(
                f"connection to {self.location} failed: {self._why(exc)}", dropped=True
            ) from None
        self._in_flight = False
        self._answered = True
        try:
            frame = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json reads
            raise self._lost(f"{self.location} sent a frame that is not JSON") from None
        if not isinstance(frame, dict):
            raise self._lost(f"{self.location} sent a frame that is not a JSON object")
        if frame.get("type") == "error" and not refusal_ok:
            data = frame.get("data")
            self._raise_for_error(data if isinstance(data, dict) else {"message": repr(data)})
        return frame

    def _refuse_stale_frame(self, kind: str) -> None:
        """A frame nobody asked for yet (a second answer to the last request) is an error.

        The protocol has no request ids: read as the answer to ``kind``, that frame would
        shift every later answer by one request (a step scored on the wrong observation).
        """
        from websockets.exceptions import ConnectionClosed

        try:
            extra = self._ws.recv(timeout=0)
        except (TimeoutError, ConnectionClosed):  # nothing waiting; a closed one fails below
            return
        shown = extra[:100] if isinstance(extra, str) else repr(bytes(extra[:100]))
        raise self._lost(
            f"{self.location} sent an extra frame nobody asked for before {kind!r} "
            f"({shown!r}); its answers no longer match the requests"
        )

    def _raise_for_error(self, data: dict[str, Any]) -> None:
        code = str(data.get("code") or "UNKNOWN")
        text = describe_error(data)
        if code in REJECTION_CODES:
            raise ActionRejected(f"the env rejected the request ({code}): {text}")
        if code == CAPACITY_CODE:
            raise CapacityReached(text)
        raise self._lost(f"{self.location} answered {code}: {text}")

    def _result(self, frame: dict[str, Any]) -> StepResult:
        if frame.get("type") != "observation":
            raise EnvUnavailable(
                f"{self.location} answered a {frame.get('type')!r} frame where an "
                "observation was expected"
            )
        data = frame.get("data")
        observation = data.get("observation") if isinstance(data, dict) else None
        if not isinstance(observation, dict):
            raise EnvUnavailable(f"{self.location} sent an observation frame without observation")
        observation = dict(observation)
        metadata = observation.pop("metadata", None)
        metadata = dict(metadata) if isinstance(metadata, dict) else {}
        if isinstance(data.get("metadata"), dict):
            metadata.update(data["metadata"])
        raw_reward = data.get("reward")
        # a JSON number or null only: "1.0" or true is a server bug, not a reward to coerce
        if raw_reward is not None and (
            isinstance(raw_reward, bool) or not isinstance(raw_reward, (int, float))
        ):
            raise EnvUnavailable(
                f"{self.location} sent reward={as_json(raw_reward)}: "
                "`reward` must be a JSON number or null"
            )
        try:
            reward = None if raw_reward is None else float(raw_reward)
        except OverflowError:  # an integer too big for a float
            raise EnvUnavailable(f"{self.location} sent a reward too big for a float") from None
        if reward is not None and not math.isfinite(reward):  # NaN, Infinity: no dataset row
            raise EnvUnavailable(f"{self.location} sent a non-finite reward {reward!r}")
        done = data.get("done", False)
        if not isinstance(done, bool):  # bool("false") is True: it would end the episode
            raise EnvUnavailable(
                f"{self.location} sent done={as_json(done)}: `done` must be JSON true or false"
            )
        return StepResult(
            observation=observation,
            reward=reward,
            done=done,
            metadata=metadata,
        )
