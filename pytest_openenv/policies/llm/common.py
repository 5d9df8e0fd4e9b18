"""What the OpenAI and Anthropic policies share: settings, keys, time budget, transport faults.

Worker side: one policy object per pytest process, shared by every episode
thread (``--openenv-concurrency``), so everything here is thread-safe.

Transport faults are retried by whatever carries the request: the SDK itself, or
``http_client`` with the SDK's rules (``max_retries``: ``Retry-After`` honoured, backoff
on 429, 5xx and connection errors). What is left after that becomes
``PolicyUnavailable`` (the episode is an *error*) with the status and the server's
message, scrubbed of secrets, in the same words on either path. An endpoint that cannot be
reached or refuses the key (401/403) is remembered: later episodes of this
process fail at once with the same message instead of each waiting it out.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import threading
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import pytest

from ...config.options import DEFAULT_REQUEST_TIMEOUT
from ...config.settings import Settings
from ...errors import AnswerTooLarge, ContextExhausted, PolicyUnavailable
from ...util.overload import OverloadSignal
from ...util.secrets import KnownSecrets
from ..base import Policy, Reply, Turn
from .deadline import seconds_left

#: Placeholder key for self-hosted OpenAI-compatible servers that ignore it (vLLM's convention).
PLACEHOLDER_KEY = "EMPTY"

#: Longest server message kept in an episode error.
MAX_MESSAGE = 500
#: Longest part of an unreadable answer (an HTML page, foreign JSON) quoted in an episode error.
MAX_QUOTED_BODY = 200


@dataclass(frozen=True)
class LLMConfig:
    """The model call settings from ``--openenv-*`` options (no secrets)."""

    model: str
    temperature: float = 0.2
    max_tokens: int = 256
    #: ``--openenv-timeout``: the episode budget, also the client's default request timeout
    timeout: float | None = None
    #: ``--openenv-request-timeout``: the most one request may take, its answer included
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    #: ``--openenv-max-retries``; None keeps the SDK's default
    max_retries: int | None = None
    #: ``--openenv-llm-endpoint``; None is the provider's official API
    base_url: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings, model: str) -> LLMConfig:
        llm = settings.llm
        return cls(
            model=model,
            temperature=llm.temperature,
            max_tokens=llm.max_tokens,
            timeout=settings.run.timeout,
            request_timeout=llm.request_timeout,
            max_retries=llm.max_retries,
            base_url=llm.endpoint,
        )

    def sampling(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens}

    def per_request(self, remaining: float | None) -> float:
        """One request's timeout: the request bound, or less when the episode has less left."""
        if remaining is None:
            return self.request_timeout
        return min(remaining, self.request_timeout)

    def client_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.base_url:
            options["base_url"] = self.base_url
        options["timeout"] = self.per_request(self.timeout)
        if self.max_retries is not None:
            options["max_retries"] = self.max_retries
        return options


def quoted_body(body: Any) -> str:
    """The start of an answer body on one line, for an error message (scrub it after)."""
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text[:MAX_QUOTED_BODY] + ("..." if len(text) > MAX_QUOTED_BODY else "")


def body_kind(body: Any) -> str:
    if isinstance(body, str):
        return "an HTML page" if body.lstrip()[:1] == "<" else "text"
    return "JSON"


class Failure(NamedTuple):
    message: str
    #: the same call would fail for every later episode too (unreachable, key refused)
    sticky: bool


#: How servers say a request outgrew the model's context window, in an HTTP 400: OpenAI
#: and vLLM ("maximum context length", code context_length_exceeded), llama.cpp
#: ("exceed context window"), TGI ("must be <= N"), Anthropic ("prompt is too long").
CONTEXT_FULL = re.compile(
    r"context[_ ](length|window)|maximum context|prompt is too long|tokens .{0,60}must be <=",
    re.IGNORECASE,
)


def context_full(status: int, message: str) -> bool:
    return status in (400, 413) and bool(CONTEXT_FULL.search(message))


#: Statuses the SDKs retry; an error after them says how many retries were spent.
def _retried(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", "") or exc)


def answer_too_large(exc: BaseException) -> AnswerTooLarge | None:
    """The ``AnswerTooLarge`` the reading raised, under the SDK's own exceptions."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, AnswerTooLarge):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


class RemoteModelPolicy(Policy):
    """A policy that asks a hosted model over HTTP through its provider's SDK."""

    #: recorded in cache keys and error messages
    provider: ClassVar[str]
    #: the environment variable holding the key
    key_env: ClassVar[str]
    #: ``pip install 'pytest-openenv[<extra>]'``
    extra: ClassVar[str]
    #: importable name of the SDK; empty: the policy needs none
    sdk: ClassVar[str]

    def __init__(
        self, config: LLMConfig, api_key: str | None, *, overload: OverloadSignal | None = None
    ) -> None:
        self.config = config
        #: told of 429/503 answers and timeouts (``--openenv-concurrency auto`` listens)
        self.overload = overload if overload is not None else OverloadSignal()
        self.model = config.model
        self._api_key = api_key
        #: what this policy's error messages must not show, in every encoded form: the key
        #: (not the placeholder: hiding the word EMPTY would only garble messages) and the
        #: endpoint URL's credentials
        key = api_key if api_key != PLACEHOLDER_KEY else None
        self._secrets = KnownSecrets.collect(urls=[config.base_url], extra=[key])
        self._client: Any = None
        self._lock = threading.Lock()
        self._blocked: str | None = None
        #: requests sent for the current turn, per thread (retries included): what an
        #: error says was tried, instead of the configured retries it may not have spent
        self._attempts = threading.local()

    # -- the SDK -------------------------------------------------------------
    @abstractmethod
    def _make_client(self, module: Any, api_key: str) -> Any: ...

    @abstractmethod
    def _complete(self, client: Any, turn: Turn, timeout: float | None) -> Reply:
        """One model call; SDK exceptions propagate to ``act``."""

    def _module(self) -> Any:
        import importlib

        try:
            return importlib.import_module(self.sdk)
        except ImportError:
            raise PolicyUnavailable(
                f"--openenv-policy={self.provider} needs the {self.sdk} SDK: "
                f"pip install 'pytest-openenv[{self.extra}]'"
            ) from None

    def load(self, *, strict: bool) -> None:
        """Import the SDK now, in a process that plays episodes, so what it builds is frozen
        with the run's setup. ``strict``: an install that fails to import is a usage error;
        an xdist worker cannot raise one cleanly, so there each episode errors saying so.
        A replay (``CachedPolicy``) never calls this: it needs no SDK."""
        try:
            self._module()
        except PolicyUnavailable as exc:
            if strict:
                raise pytest.UsageError(str(exc)) from None

    def count_attempt(self, request: Any) -> None:
        """httpx request hook (runs in the asking thread)."""
        self._attempts.count = getattr(self._attempts, "count", 0) + 1

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                if not self._api_key:
                    raise PolicyUnavailable(
                        f"--openenv-policy={self.provider} needs {self.key_env} in the environment"
                    )
                self._client = self._new_client(self._api_key)
            return self._client

    def _new_client(self, api_key: str) -> Any:
        return self._make_client(self._module(), api_key)

    @property
    def where(self) -> str:
        from ...util.endpoints import redact

        return redact(self.config.base_url) if self.config.base_url else f"the {self.provider} API"

    # -- one turn ------------------------------------------------------------
    def act(self, turn: Turn) -> Reply:
        blocked = self._blocked
        if blocked is not None:
            raise PolicyUnavailable(blocked)
        timeout = self._request_timeout(turn)
        client = self.client()
        self._attempts.count = 0
        try:
            return self._complete(client, turn, timeout)
        except PolicyUnavailable:
            raise
        except json.JSONDecodeError as exc:
            # a JSON content type over a body that is not JSON (a proxy's error page)
            raise self.unreadable(exc.doc, "a JSON body") from None
        except Exception as exc:
            too_large = answer_too_large(exc)
            if too_large is not None:  # the SDK wrapped it as a connection error
                raise AnswerTooLarge(self._secrets.scrub(str(too_large))) from None
            self._raise_if_context_full(exc)
            if self._is_timeout(exc):
                self.overload.fire()  # --openenv-concurrency auto: fewer in flight
            failure = self._classify(exc, timeout)
            if failure is None:
                raise
        message = self._secrets.scrub(failure.message)
        if failure.sticky:
            with self._lock:
                if self._blocked is None:
                    self._blocked = (
                        f"{message} [first seen in {turn.episode_id}; later episodes of this "
                        "process fail at once]"
                    )
        raise PolicyUnavailable(message)

    def unreadable(self, body: Any, expected: str) -> PolicyUnavailable:
        """An HTTP 200 whose body is not a model turn: the endpoint's fault, not the agent's.

        A wrong ``--openenv-llm-endpoint`` (a web UI, a login page) or a proxy answers
        200 with HTML or its own JSON; scoring that as the agent's empty turn would
        lower the pass rate for an infrastructure fault, so the episode is an error.
        """
        shown = quoted_body(body)
        message = (
            f"{self.provider} endpoint {self.where} answered HTTP 200 with {body_kind(body)} "
            f"that is not {expected}: {shown!r}"
        )
        return PolicyUnavailable(self._secrets.scrub(message))

    def _raise_if_context_full(self, exc: Exception) -> None:
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and context_full(status, _server_message(exc)):
            said = self._secrets.scrub(_server_message(exc))[:MAX_MESSAGE]
            raise ContextExhausted(f"HTTP {status} from {self.where}: {said}") from None

    def _request_timeout(self, turn: Turn) -> float:
        return seconds_left(turn, self.config.request_timeout, self.config.timeout)

    def _is_timeout(self, exc: Exception) -> bool:
        return isinstance(exc, self._module().APITimeoutError)

    def _classify(self, exc: Exception, timeout: float | None) -> Failure | None:
        sdk = self._module()
        retries = (
            self.config.max_retries
            if self.config.max_retries is not None
            else getattr(sdk, "DEFAULT_MAX_RETRIES", 2)
        )
        if isinstance(exc, sdk.APITimeoutError):
            return self._timed_out(timeout, retries)
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            why = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
            return self._unreachable(why, retries)
        if isinstance(exc, sdk.APIStatusError):
            response = getattr(exc, "response", None)
            headers = response.headers if response is not None else None
            return self._status_failure(exc, headers, retries)
        if isinstance(exc, getattr(sdk, "APIError", ())):
            return Failure(f"{self.provider} API error from {self.where}: {exc}", False)
        return None

    # -- the words of each failure, whatever carried the request ---------------
    def _timed_out(self, timeout: float | None, retries: int) -> Failure:
        if timeout is not None and timeout < self.config.request_timeout:
            budget = f" (the episode's --openenv-timeout={self.config.timeout:g}s budget ran out)"
        else:
            budget = (
                f" (no whole answer within --openenv-request-timeout="
                f"{self.config.request_timeout:g}s, {retries} retries)"
            )
        return Failure(f"{self.provider} request to {self.where} timed out{budget}", False)

    def _unreachable(self, why: str, retries: int) -> Failure:
        return Failure(
            f"{self.provider} endpoint {self.where} is unreachable after {retries} "
            f"retries ({why[:MAX_MESSAGE]})",
            True,
        )

    def _status_failure(self, exc: Any, headers: Any, retries: int) -> Failure:
        """``exc`` has ``status_code`` and the server's ``body`` or ``message``."""
        status = int(exc.status_code)
        said = _server_message(exc)[:MAX_MESSAGE]
        spent = self._retries_spent(headers, retries) if _retried(status) else ""
        hint = ""
        if status in (401, 403):
            hint = f" (check {self.key_env})" if not self.config.base_url else ""
        return Failure(
            f"{self.provider} API error from {self.where}: HTTP {status}{spent}: {said}{hint}",
            status in (401, 403),
        )

    def _retries_spent(self, headers: Any, configured: int) -> str:
        """What the client did before giving up: retries counted, and a wait it refused."""
        from .deadline import LONGEST_RETRY_AFTER, retry_after, retry_after_said

        attempts = getattr(self._attempts, "count", 0)
        spent = max(attempts - 1, 0) if attempts else configured
        text = f" after {spent} retries" if spent else ""
        wait = retry_after(headers) if headers is not None else None
        if wait is not None and wait > LONGEST_RETRY_AFTER:
            text += (
                f" ({retry_after_said(headers)}: the server asked to wait {wait:g} s, longer than "
                f"the {LONGEST_RETRY_AFTER:g} s a retry may wait; not retried)"
            )
        elif not spent:
            text = " (not retried: --openenv-max-retries=0)" if configured == 0 else text
        return text

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # best effort: the process is ending
                client.close()

    def describe(self) -> dict[str, Any]:
        return {"policy": self.name, "model": self.model, **self.config.sampling()}

    def cache_identity(self) -> tuple[str, dict[str, Any]]:
        return self.provider, self.config.sampling()


#: what the refusal of an LLM policy with no model says (a test's collection error that
#: says it makes the whole run a usage error: ``worker/plugin.py``)
NEEDS_MODEL = "needs --openenv-model"


def checked_remote_policy(
    cls: type[RemoteModelPolicy],
    settings: Settings,
    overload: OverloadSignal | None,
    *,
    example_model: str,
) -> RemoteModelPolicy:
    """A ``cls`` for ``--openenv-policy=<cls.provider>``, with model, SDK and key checked
    before any episode (``example_model`` in the message when the model is missing).

    ``overload`` hears the endpoint's pushback (429/503, timeouts).
    """
    provider = cls.provider
    model, replay, endpoint = settings.llm.model, settings.llm.replay, settings.llm.endpoint
    if not model:
        raise pytest.UsageError(
            f"--openenv-policy={provider} {NEEDS_MODEL} (e.g. --openenv-model={example_model})"
        )
    if not replay and cls.sdk and importlib.util.find_spec(cls.sdk) is None:
        # presence only: importing an SDK costs up to a second of CPU (``import openai``
        # builds its pydantic models), which an xdist controller never needs
        raise pytest.UsageError(
            f"--openenv-policy={provider} needs the {cls.sdk} SDK, which is not installed: "
            f"pip install 'pytest-openenv[{cls.extra}]'"
        )
    key = os.environ.get(cls.key_env) or None
    if key is None and endpoint:
        key = PLACEHOLDER_KEY
    if key is None and not replay:
        raise pytest.UsageError(
            f"--openenv-policy={provider} needs an API key: set {cls.key_env} in the "
            "environment (keys are never read from options or files), or replay a cache "
            "with --openenv-cache DIR --openenv-replay"
        )
    return cls(LLMConfig.from_settings(settings, str(model)), key, overload=overload)
