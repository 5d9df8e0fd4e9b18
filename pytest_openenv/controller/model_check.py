"""Controller side: each model endpoint checked once, before any episode, as env servers are.

A dead endpoint, a refused key or a model the endpoint does not serve would otherwise be
N errored episodes (each after its retries); here it is one usage error naming the
endpoint (without credentials), the model and what answered. One cheap request per
endpoint and model, none that costs tokens:

* OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp, TGI): ``GET /models``
  (the model list). A model the list does not name is asked for by ``GET /models/{id}``
  (Ollama names ``llama3.1`` as ``llama3.1:latest``); unknown to both, it is refused. An
  endpoint without a model list (404) or one that is busy (429, 5xx) is not refused: the
  episodes' own retries and errors say more.
* Anthropic: ``GET /v1/models/{id}`` (the Models API): 404 is an unknown model.

Credentials in the endpoint's URL go as Basic auth instead of the key, as the run sends
them. Each request is ``util.fetch``'s: bounded as a whole (``CHECK_TIMEOUT``), the key
only to the endpoint's origin through redirects.

``--openenv-replay`` needs no endpoint and is not checked; nor is ``--collect-only``.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import ServerUnreachable, ServerURLError
from ..util.endpoints import ServerURL, redact
from ..util.fetch import each_at_once, fetch
from ..util.secrets import KnownSecrets

if TYPE_CHECKING:
    from ..config.settings import Settings

#: seconds one request of the check may take, its whole answer included (a model server
#: loading its weights is slow)
CHECK_TIMEOUT = 15.0
#: most bytes read of an answer (a model list of a big provider is some 100 KB)
MAX_ANSWER = 4 << 20
OFFICIAL = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
BASE_URL_ENV = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: the key an OpenAI-compatible server gets when none is set (vLLM's convention)
PLACEHOLDER_KEY = "EMPTY"


@dataclass(frozen=True)
class Answer:
    """What one request got: an HTTP status and body, or why there was none."""

    status: int | None
    body: Any = None
    problem: str = ""

    def said(self) -> str:
        """The server's own message, short, for the usage error."""
        body = self.body
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict) and error.get("message"):
                return str(error["message"])[:200]
            if isinstance(error, str):
                return error[:200]
            if body.get("message"):
                return str(body["message"])[:200]
        return "" if body is None else str(body)[:200]


def endpoint_of(provider: str, settings: Settings) -> str:
    """The base URL the provider's SDK will call (the option, its env variable, or the API)."""
    return settings.llm.endpoint or os.environ.get(BASE_URL_ENV[provider]) or OFFICIAL[provider]


def get(base: ServerURL, path: str, headers: dict[str, str], timeout: float) -> Answer:
    """``GET`` one path of the endpoint, answer included within ``timeout`` (``fetch``)."""
    try:
        fetched = fetch(
            base.http_base + path,
            {"Accept": "application/json", **base.headers(), **headers},
            timeout=timeout,
            max_bytes=MAX_ANSWER,
        )
    except ServerUnreachable as exc:
        return Answer(None, problem=f"unreachable ({base.scrub(str(exc))})")
    raw = fetched.body[:MAX_ANSWER]
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = raw[:200].decode("utf-8", "replace")
    return Answer(fetched.status, body)


def listed_models(body: Any) -> list[str]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return []
    return [str(entry["id"]) for entry in data if isinstance(entry, dict) and "id" in entry]


def _refused_key(provider: str, answer: Answer, endpoint: str, base: ServerURL) -> str:
    official = endpoint == OFFICIAL[provider]
    key = KEY_ENV[provider]
    fix = f"check {key}" if official or os.environ.get(key) else f"set {key}"
    if base.username is not None:
        fix = "check the user and password in --openenv-llm-endpoint" + (
            f" and {key}" if provider == "anthropic" else ""
        )
    said = answer.said()
    return f"refused the key (HTTP {answer.status}{': ' + said if said else ''}); {fix}"


def openai_problem(base: ServerURL, model: str, key: str | None, endpoint: str) -> str | None:
    # credentials in the URL go as Basic auth instead of the key, as the run sends them
    headers = (
        {} if base.username is not None else {"Authorization": f"Bearer {key or PLACEHOLDER_KEY}"}
    )
    listing = get(base, "/models", headers, CHECK_TIMEOUT)
    if listing.status is None:
        return listing.problem
    if listing.status in (401, 403):
        return _refused_key("openai", listing, endpoint, base)
    if listing.status != 200:
        return None  # no model list here, or busy: the episodes will say more
    names = listed_models(listing.body)
    if not names or model in names or f"{model}:latest" in names:
        return None
    one = get(base, "/models/" + urllib.parse.quote(model, safe=""), headers, CHECK_TIMEOUT)
    if one.status == 200:
        return None
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return f"does not serve the model (GET /models lists {shown})"


def anthropic_problem(base: ServerURL, model: str, key: str | None, endpoint: str) -> str | None:
    headers = {"x-api-key": key or "", "anthropic-version": "2023-06-01"}
    answer = get(base, "/v1/models/" + urllib.parse.quote(model, safe=""), headers, CHECK_TIMEOUT)
    if answer.status is None:
        return answer.problem
    if answer.status in (401, 403):
        return _refused_key("anthropic", answer, endpoint, base)
    if answer.status == 404:
        said = answer.said()
        return f"does not serve the model (HTTP 404{': ' + said if said else ''})"
    return None


def endpoint_problem(provider: str, model: str, settings: Settings) -> str | None:
    endpoint = endpoint_of(provider, settings)
    try:
        base = ServerURL.parse(endpoint)
    except ServerURLError as exc:
        return f"is not a usable URL ({exc})"
    key = os.environ.get(KEY_ENV[provider]) or None
    check = openai_problem if provider == "openai" else anthropic_problem
    return check(base, model, key, endpoint)


def check_model_endpoints(config: pytest.Config, settings: Settings, arms: list[Any]) -> None:
    """One request per (provider, endpoint, model) of the run's LLM ``arms``, before any
    episode; a problem is one ``pytest.UsageError`` naming each endpoint and model."""
    if settings.llm.replay or config.getoption("collectonly", False):
        return
    wanted: dict[tuple[str, str], None] = {}
    for arm in arms:
        model = arm.model or settings.llm.model
        if arm.policy in OFFICIAL and model:
            wanted[(arm.policy, model)] = None
    if not wanted:
        return

    def problem(pair: tuple[str, str]) -> str | None:
        found = endpoint_problem(*pair, settings)
        if found is None:
            return None
        provider, model = pair
        return f"{redact(endpoint_of(provider, settings))} (--openenv-policy={provider}, " + (
            f"--openenv-model={model}): {found}"
        )

    problems = [p for p in each_at_once(problem, list(wanted), most=8) if p]
    if not problems:
        return
    secrets = KnownSecrets.from_settings(settings)
    listed = "\n  ".join(secrets.scrub(p) for p in problems)
    raise pytest.UsageError(
        f"--openenv-llm-endpoint / --openenv-model: {len(problems)} of {len(wanted)} model "
        f"endpoint(s) cannot play (checked before any episode ran):\n  {listed}\n"
        "Start the server or fix its URL (--openenv-llm-endpoint), the key, or the model "
        "name (--openenv-model); --openenv-cache DIR --openenv-replay plays recorded answers "
        "without an endpoint."
    )
