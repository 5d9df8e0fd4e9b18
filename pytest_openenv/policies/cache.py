"""``--openenv-cache DIR`` and ``--openenv-replay``: a response cache in front of an LLM policy.

One plain JSON file per model call, named by the SHA-256 of what determines the
answer: provider, model, sampling, tools, the messages so far and the episode id
(so identical openings of different episodes keep their own samples). A team can
commit the folder; CI then replays it with ``--openenv-replay``: a miss is an
episode error and no request is ever sent, so no key and no network are needed.

Safe with ``-n 8``: each entry is written to a temporary file and linked into
place (first writer wins, ``util/atomic.py``), so no reader ever sees a torn
entry and no key is stored twice. Entries hold no secret: no headers, no keys, no endpoint URL.

Worker side. Episodes that run ahead of their item (``--openenv-concurrency``)
stage their writes (``staged_writes``); ``prefetch`` performs them only once
their item claims the result, so an episode never run for its item leaves no trace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pytest

from ..config.settings import LLMSettings
from ..errors import CacheUnwritable, ContextExhausted, PolicyUnavailable
from ..util.atomic import write_atomically
from ..util.secrets import KnownSecrets
from .base import Policy, Reply, ToolCall, Turn, Usage

FORMAT = "pytest-openenv/response-cache/1"

_STAGED: ContextVar[list[Callable[[], None]] | None] = ContextVar("openenv_staged", default=None)


@contextlib.contextmanager
def staged_writes() -> Iterator[list[Callable[[], None]]]:
    """Within this block (one thread's episode) cache writes are collected, not done."""
    writes: list[Callable[[], None]] = []
    token = _STAGED.set(writes)
    try:
        yield writes
    finally:
        _STAGED.reset(token)


def cache_key(
    provider: str,
    model: str | None,
    sampling: dict[str, Any],
    turn: Turn,
    scrub: Callable[[str], str] | None = None,
) -> str:
    """``scrub``: the cache's scrubber. An entry's reply is stored scrubbed, so a replay
    sends ``***`` back where the recording's conversation held an echoed secret: the key
    is made over the scrubbed text, so both find the same entry (without a secret in the
    conversation scrubbing changes nothing, and keys are what they always were)."""
    payload = {
        "provider": provider,
        "model": model,
        "sampling": sampling,
        "tools": turn.tools,
        "messages": turn.messages,
        "episode_id": turn.episode_id,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if scrub is not None:
        text = scrub(text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digest(value: Any, scrub: Callable[[str], str] | None) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if scrub is not None:
        text = scrub(text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def request_parts(turn: Turn, scrub: Callable[[str], str] | None = None) -> dict[str, Any]:
    """Digests of what a request was made of, stored beside the reply: a replay miss
    compares them to say what changed (the key alone only says that something did)."""
    system = [m for m in turn.messages if m.get("role") == "system"]
    return {
        "tools": _digest(turn.tools, scrub),
        "system": _digest(system, scrub),
        "messages": [
            [str(m.get("role")), _digest(m, scrub)]
            for m in turn.messages
            if m.get("role") != "system"
        ],
    }


def what_differs(
    stored: dict[str, Any],
    provider: str,
    model: str | None,
    sampling: dict[str, Any],
    parts: dict[str, Any],
) -> list[str]:
    """How a stored entry's request differs from this one, in words (empty: no telling)."""
    found = []
    if stored.get("provider") != provider:
        found.append(f"provider (recorded {stored.get('provider')!r}, this run {provider!r})")
    if stored.get("model") != model:
        found.append(f"model (recorded {stored.get('model')!r}, this run {model!r})")
    recorded_sampling = stored.get("sampling")
    if isinstance(recorded_sampling, dict):
        for name in sorted(set(recorded_sampling) | set(sampling)):
            before, now = recorded_sampling.get(name), sampling.get(name)
            if before != now:
                found.append(f"{name} (recorded {before!r}, this run {now!r})")
    request = stored.get("request")
    if not isinstance(request, dict):
        return found
    if request.get("system") != parts["system"]:
        found.append("the system prompt")
    if request.get("tools") != parts["tools"]:
        found.append("the tools (their schema or descriptions)")
    recorded, now = request.get("messages"), parts["messages"]
    if isinstance(recorded, list) and recorded != now:
        index = next(
            (i for i, (a, b) in enumerate(zip(recorded, now, strict=False)) if a != b),
            min(len(recorded), len(now)),
        )
        if index < min(len(recorded), len(now)):
            role = now[index][0]
            found.append(
                f"the messages from message {index + 1} after the system prompt on (a {role} "
                f"message; the {index} before it are the same)"
            )
        else:
            found.append(f"the number of messages (recorded {len(recorded)}, this run {len(now)})")
    return found


def reply_to_json(reply: Reply) -> dict[str, Any]:
    return {
        "content": reply.content,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls
        ],
        "usage": {
            "prompt_tokens": reply.usage.prompt_tokens,
            "completion_tokens": reply.usage.completion_tokens,
        },
    }


def reply_from_json(data: Any) -> Reply:
    """Raises ``ValueError`` on anything that is not a stored reply."""
    if not isinstance(data, dict):
        raise ValueError("reply is not an object")
    if isinstance(data.get("context_full"), str):
        raise ContextExhausted(data["context_full"])
    calls = data.get("tool_calls") or []
    usage = data.get("usage") or {}
    if not isinstance(calls, list) or not isinstance(usage, dict):
        raise ValueError("tool_calls must be a list and usage an object")
    parsed = []
    for call in calls:
        if not isinstance(call, dict) or not all(
            isinstance(call.get(k), str) for k in ("id", "name", "arguments")
        ):
            raise ValueError(f"malformed tool call {call!r}")
        parsed.append(ToolCall(call["id"], call["name"], call["arguments"]))
    content = data.get("content") or ""
    if not isinstance(content, str):
        raise ValueError("content must be a string")
    return Reply(
        content=content,
        tool_calls=tuple(parsed),
        usage=Usage.reported(usage.get("prompt_tokens"), usage.get("completion_tokens")),
    )


class ResponseCache:
    """The folder of entries: ``DIR/ab/abcdef....json``."""

    def __init__(self, root: Path, secrets: KnownSecrets | None = None) -> None:
        self.root = root
        self.secrets = secrets if secrets is not None else KnownSecrets.collect()
        #: episode id -> what its stored entries were asked with (read at the first miss)
        self._by_episode: dict[str, list[dict[str, Any]]] | None = None
        self._index_lock = threading.Lock()
        #: why the first write failed: later episodes stop before their model call
        self.broken: str | None = None

    def entries_of(self, episode_id: str) -> list[dict[str, Any]]:
        """The stored entries of one episode (their request, not their reply)."""
        with self._index_lock:
            if self._by_episode is None:
                self._by_episode = self._read_index()
            return self._by_episode.get(episode_id, [])

    def _read_index(self) -> dict[str, list[dict[str, Any]]]:
        index: dict[str, list[dict[str, Any]]] = {}
        for path in self.root.glob("*/*.json"):
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(entry, dict) and isinstance(entry.get("episode_id"), str):
                entry.pop("reply", None)
                index.setdefault(entry["episode_id"], []).append(entry)
        return index

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def load(self, key: str) -> Reply | None:
        """The stored reply, or None on a miss. Raises ``ValueError`` for a corrupt entry."""
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            entry = json.loads(text)
            return reply_from_json(entry["reply"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path} is not a cache entry ({exc})") from None

    def store(self, key: str, entry: dict[str, Any], *, overwrite: bool = False) -> None:
        """Write an entry; the first writer of a key wins unless ``overwrite`` (a corrupt one)."""
        path = self.path(key)
        # defence in depth: a model could echo something it was never meant to see
        text = self.secrets.scrub(json.dumps(entry, indent=2, sort_keys=True, ensure_ascii=False))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # not durable: an entry a power cut loses is only asked again
            write_atomically(
                path, (text + "\n").encode("utf-8"), keep_existing=not overwrite, durable=False
            )
        except OSError as exc:
            self.broken = self.broken or (
                f"cannot write to the response cache {self.root} (--openenv-cache): "
                f"{exc.strerror or exc}"
            )
            raise CacheUnwritable(self.broken) from None


class CachedPolicy(Policy):
    """Answers from the cache when it can; otherwise asks ``inner`` and stores the answer."""

    def __init__(
        self,
        inner: Policy,
        cache: ResponseCache,
        *,
        provider: str,
        sampling: dict[str, Any],
        replay: bool,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.provider = provider
        self.sampling = dict(sampling)
        self.replay = replay
        self.name = inner.name  # type: ignore[misc]
        self.model = inner.model
        self.wants_legal = inner.wants_legal  # type: ignore[misc]

    def load(self, *, strict: bool) -> None:
        if not self.replay:
            self.inner.load(strict=strict)

    def act(self, turn: Turn) -> Reply:
        if self.cache.broken is not None:  # no model call whose answer cannot be kept
            raise CacheUnwritable(self.cache.broken)
        scrub = self.cache.secrets.scrub
        key = cache_key(self.provider, self.model, self.sampling, turn, scrub)
        corrupt = False
        try:
            hit = self.cache.load(key)
        except ValueError as exc:
            if self.replay:
                raise PolicyUnavailable(f"--openenv-replay: {exc}") from None
            hit, corrupt = None, True
        if hit is not None:
            return hit
        if self.replay:
            raise PolicyUnavailable(
                f"--openenv-replay: no cached response for {turn.episode_id} turn {turn.turn} "
                f"in {self.cache.root} (key {key[:12]}): {self.explain_miss(turn, scrub)}; "
                "record it by running once without --openenv-replay (the key covers provider, "
                "model, sampling, tools, messages and episode id, so a changed prompt or "
                "option is a miss)"
            )
        context_full = ""
        try:
            reply: Reply | None = self.inner.act(turn)
        except ContextExhausted as exc:
            # recorded too, so that a replay ends this episode where the recording did
            reply, context_full = None, str(exc)
        entry = {
            "format": FORMAT,
            "key": key,
            "provider": self.provider,
            "model": self.model,
            "sampling": self.sampling,
            "episode_id": turn.episode_id,
            "turn": turn.turn,
            "request": request_parts(turn, scrub),
            "reply": {"context_full": context_full} if reply is None else reply_to_json(reply),
        }
        staged = _STAGED.get()

        def write() -> None:
            self.cache.store(key, entry, overwrite=corrupt)

        if staged is None:
            write()
        else:
            staged.append(write)
        if reply is None:
            raise ContextExhausted(context_full)
        return reply

    def explain_miss(self, turn: Turn, scrub: Callable[[str], str]) -> str:
        """What differs from the entries stored for this episode and turn, in words."""
        stored = self.cache.entries_of(turn.episode_id)
        same_turn = [entry for entry in stored if entry.get("turn") == turn.turn]
        if not same_turn:
            if not stored:
                return (
                    f"nothing is stored for {turn.episode_id} (was it recorded with other "
                    "--openenv-seed, --openenv-n or --openenv-id-prefix?)"
                )
            turns = sorted({int(e["turn"]) for e in stored if isinstance(e.get("turn"), int)})
            return (
                f"nothing is stored for turn {turn.turn} of {turn.episode_id} (it has turns "
                f"{', '.join(map(str, turns))}: the recording ended its episode earlier or "
                "took another path)"
            )
        parts = request_parts(turn, scrub)
        described = []
        for entry in same_turn:
            found = what_differs(entry, self.provider, self.model, self.sampling, parts)
            described.append(", ".join(found) if found else "something the entry does not show")
        counted = "1 entry is" if len(same_turn) == 1 else f"{len(same_turn)} entries are"
        return (
            f"{counted} stored for this episode and turn; this request differs in "
            + "; or in ".join(dict.fromkeys(described))
        )

    def close(self) -> None:
        self.inner.close()

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "cache": str(self.cache.root), "replay": self.replay}


def cache_root(llm: LLMSettings) -> Path | None:
    """``--openenv-cache``'s folder (None: no cache); a usage error for one that cannot be
    used, or ``--openenv-replay`` with nothing to replay."""
    folder, replay = llm.cache, llm.replay
    if replay and not folder:
        raise pytest.UsageError(
            "--openenv-replay needs --openenv-cache DIR (the recorded responses to replay)"
        )
    if not folder:
        return None
    root = Path(folder).expanduser()
    if not root.is_absolute():
        root = Path.cwd() / root
    if root.exists() and not root.is_dir():
        raise pytest.UsageError(f"--openenv-cache={folder!r} exists and is not a folder")
    if replay and not root.is_dir():
        raise pytest.UsageError(
            f"--openenv-cache={folder!r} does not exist, so --openenv-replay has nothing to "
            "replay; record it first by running without --openenv-replay"
        )
    return root


def wrap_with_cache(
    policy: Policy, llm: LLMSettings, spec: str, secrets: KnownSecrets | None = None
) -> Policy:
    """Apply ``--openenv-cache`` / ``--openenv-replay`` to a model-backed policy.

    ``secrets``: what no entry may hold (the environment's by default)."""
    root = cache_root(llm)
    if root is None:
        return policy
    replay = llm.replay
    identity = policy.cache_identity()
    provider, sampling = identity if identity is not None else (f"callable:{spec}", {})
    return CachedPolicy(
        policy, ResponseCache(root, secrets), provider=provider, sampling=sampling, replay=replay
    )
