"""Upload an output folder to the Hugging Face Hub as a dataset repo (controller side).

One upload = create the dataset repo if needed, then ONE commit holding the
files of the folder, through ``huggingface_hub`` (which picks regular, LFS or Xet
transfer per file). The token comes from ``HF_TOKEN`` or the huggingface_hub
login, is handed to the client only, and is scrubbed from every error we show.
``huggingface_hub`` is imported only when a push happens (or its token is checked).

Used by the plugin after the final sorted rewrite (``HubPublisher``) and by
``python -m pytest_openenv push DIR REPO`` (retry, or an earlier run).

huggingface_hub's client has no timeout of its own: a Hub that accepts and never
answers would hold the run forever. Every request of a push is bounded by
``PYTEST_OPENENV_HUB_TIMEOUT`` seconds without progress (default 60: connecting,
and each read or write of the request); huggingface_hub retries some calls (at
most 5 times), so a push that cannot finish gives up within minutes, and Ctrl-C
stops it at once. Either way the retry command is printed.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..config.convert import license_problem, repo_id_problem
from ..errors import NotAnOutputFolder, PushError
from ..util.atomic import write_atomically
from ..util.envseconds import seconds_from_env
from ..util.format import percent
from ..util.secrets import KnownSecrets
from .card import GENERATED_MARKER, render_card
from .writer import CARD, CHART, FAILURES, METADATA, PREFERENCES, REPORT, RESULTS, SUMMARY

#: What a push uploads, in this order; all but failures.jsonl, the chart the card shows and
#: the run report must exist.
FILES = (RESULTS, FAILURES, PREFERENCES, METADATA, SUMMARY, CARD, CHART, REPORT)
REQUIRED = (RESULTS, METADATA, SUMMARY, CARD)

NO_TOKEN = (
    "needs a Hugging Face token with write access: set HF_TOKEN in the environment or "
    "log in with `hf auth login` (tokens are never accepted as options)"
)


#: environment variable: seconds a Hub request may go without progress
HUB_TIMEOUT_ENV = "PYTEST_OPENENV_HUB_TIMEOUT"
DEFAULT_HUB_TIMEOUT = 60.0


def hub_timeout() -> float:
    """``PYTEST_OPENENV_HUB_TIMEOUT`` (seconds > 0) or the default; PushError if malformed."""
    try:
        return seconds_from_env(HUB_TIMEOUT_ENV, DEFAULT_HUB_TIMEOUT)
    except ValueError as exc:
        raise PushError(str(exc)) from None


@contextlib.contextmanager
def bounded_hub_requests(seconds: float) -> Iterator[None]:
    """Every request of huggingface_hub's shared client bounded by ``seconds`` meanwhile."""
    import huggingface_hub

    session = huggingface_hub.get_session()
    if not hasattr(session, "timeout"):  # huggingface_hub < 1.0: requests, one per thread
        with _bounded_requests_sessions(huggingface_hub, seconds):
            yield
        return
    before = session.timeout  # huggingface_hub >= 1.0: one httpx client
    session.timeout = seconds
    try:
        yield
    finally:
        session.timeout = before


@contextlib.contextmanager
def _bounded_requests_sessions(huggingface_hub: Any, seconds: float) -> Iterator[None]:
    """huggingface_hub 0.x: each thread's ``requests`` session, made by its backend factory,
    gets ``seconds`` as the timeout of every request that sets none."""
    import requests
    from huggingface_hub.utils import _http

    previous = getattr(_http, "_GLOBAL_BACKEND_FACTORY", None)
    make = previous or requests.Session

    def bounded_session() -> Any:
        session = make()
        request = session.request

        def request_with_timeout(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            # requests' Session.request(method, url, params, data, headers, cookies, files,
            # auth, timeout, ...): huggingface_hub passes all but method and url by name
            if len(args) < 7 and kwargs.get("timeout") is None:
                kwargs["timeout"] = seconds
            return request(method, url, *args, **kwargs)

        session.request = request_with_timeout
        return session

    huggingface_hub.configure_http_backend(backend_factory=bounded_session)
    try:
        yield
    finally:
        if previous is None:
            huggingface_hub.configure_http_backend()
        else:
            huggingface_hub.configure_http_backend(backend_factory=previous)


def find_token() -> str | None:
    from huggingface_hub import get_token

    try:
        return get_token()
    except Exception:  # a broken OIDC/keyring setup reads as "no token"
        return None


def dataset_url(endpoint: str, repo_id: str) -> str:
    return f"{endpoint.rstrip('/')}/datasets/{repo_id}"


def retry_command(
    folder: Path, repo_id: str, *, private: bool = False, commit_message: str | None = None
) -> str:
    words = ["python", "-m", "pytest_openenv", "push", str(folder), repo_id]
    if private:
        words.append("--private")
    if commit_message:
        words += ["--commit-message", commit_message]
    return shlex.join(words)


def upload_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise NotAnOutputFolder(f"{folder} is not a folder")
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise NotAnOutputFolder(
            f"{folder} is not a pytest-openenv output folder: {', '.join(missing)} missing "
            f"(it needs {', '.join(REQUIRED)}; {FAILURES} is optional)"
        )
    return [folder / name for name in FILES if (folder / name).is_file()]


def default_commit_message(folder: Path) -> str:
    try:
        summary = json.loads((folder / SUMMARY).read_text(encoding="utf-8"))
        figures = summary.get("figures") or {}
    except (OSError, ValueError, AttributeError):
        figures = {}
    envs = ", ".join(figures.get("envs") or []) or "agent"
    policies = ", ".join(figures.get("policies") or [])
    text = f"pytest-openenv: {figures.get('episodes', 0)} {envs} episodes"
    if policies:
        text += f" ({policies})"
    rate = figures.get("pass_rate")
    if rate is not None:
        text += f", pass rate {percent(rate)}"
    return text


def card_license(text: str) -> str | None:
    """The license in a card's front-matter (kept when the card is rebuilt)."""
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    if match is None:
        return None
    try:
        import yaml

        data = yaml.safe_load(match.group(1))
    except Exception:
        return None
    value = data.get("license") if isinstance(data, dict) else None
    return value if isinstance(value, str) and license_problem(value) is None else None


def refresh_card(folder: Path, repo_id: str, license: str | None = None) -> bool:
    """Rebuild a generated README.md for ``repo_id`` (loading snippets, license).

    A card without the generator marker was edited by hand and is left as it is.
    """
    card = folder / CARD
    try:
        text = card.read_text(encoding="utf-8")
        if GENERATED_MARKER not in text:
            return False
        summary = json.loads((folder / SUMMARY).read_text(encoding="utf-8"))
        metadata = json.loads((folder / METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    license = license or card_license(text)
    fresh = render_card(folder, summary, metadata, repo_id=repo_id, license=license)
    if fresh != text:
        try:
            write_atomically(card, fresh.encode("utf-8"))
        except OSError:
            return False  # a read-only copy of a run: upload the card it has
    return True


def _is_timeout(exc: BaseException) -> bool:
    """A timeout of the Hub client (httpx or httpx2), possibly wrapped by huggingface_hub."""
    seen: BaseException | None = exc
    for _ in range(20):  # a cause chain can loop back on itself
        if seen is None:
            return False
        if "Timeout" in type(seen).__name__:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@dataclass(frozen=True)
class PushResult:
    repo_id: str
    url: str
    commit_url: str | None
    files: tuple[str, ...]


def push_folder(
    folder: Path,
    repo_id: str,
    *,
    private: bool = False,
    commit_message: str | None = None,
    token: str | None = None,
) -> PushResult:
    """Create the dataset repo if needed and upload the folder's files in one commit."""
    problem = repo_id_problem(repo_id)
    if problem:
        raise PushError(f"repo id {repo_id!r} is invalid: {problem}")
    files = upload_files(folder)
    token = token or find_token()
    if not token:
        raise PushError(f"pushing to the Hub {NO_TOKEN}")
    message = commit_message or default_commit_message(folder)
    seconds = hub_timeout()
    try:
        from huggingface_hub import CommitOperationAdd, HfApi

        from .._version import __version__

        api = HfApi(token=token, library_name="pytest-openenv", library_version=__version__)
        with bounded_hub_requests(seconds):
            # private=None keeps the Hub's (or the organisation's) default, public for users
            api.create_repo(
                repo_id, repo_type="dataset", private=True if private else None, exist_ok=True
            )
            info = api.create_commit(
                repo_id,
                repo_type="dataset",
                operations=[
                    CommitOperationAdd(path_in_repo=path.name, path_or_fileobj=str(path))
                    for path in files
                ],
                commit_message=message,
            )
    except Exception as exc:
        said = f"{type(exc).__name__}: {exc}".strip()
        if _is_timeout(exc):
            said = (
                f"the Hub did not answer within {seconds:g}s ({said}); set {HUB_TIMEOUT_ENV} "
                "to wait longer"
            )
        # the token may come from the huggingface_hub login rather than the environment
        raise PushError(KnownSecrets.collect(extra=[token]).scrub(said)) from None
    return PushResult(
        repo_id=repo_id,
        url=dataset_url(api.endpoint, repo_id),
        commit_url=getattr(info, "commit_url", None),
        files=tuple(path.name for path in files),
    )


@dataclass
class HubPublisher:
    """The plugin's push: configured at startup, run once the output folder is final."""

    repo_id: str
    private: bool = False
    commit_message: str | None = None
    license: str | None = None
    result: PushResult | None = None
    error: str | None = None
    skipped: str | None = None
    folder: Path | None = None
    #: Ctrl-C stopped the upload: the run ends as interrupted, the retry is printed
    interrupted: bool = False

    @classmethod
    def from_settings(cls, settings: Any) -> HubPublisher | None:
        """None without ``--openenv-push-to-hub``; a missing token is a usage error now,
        before any episode runs."""
        repo_id = settings.publish.repo
        if not repo_id:
            return None
        if not find_token():
            raise pytest.UsageError(f"--openenv-push-to-hub={repo_id} {NO_TOKEN}")
        try:
            hub_timeout()
        except PushError as exc:
            raise pytest.UsageError(f"--openenv-push-to-hub={repo_id}: {exc}") from None
        return cls(
            repo_id=repo_id,
            private=bool(settings.publish.private),
            commit_message=settings.publish.commit_message,
            license=settings.publish.license,
        )

    @property
    def failed(self) -> bool:
        return self.error is not None

    def retry(self) -> str:
        return retry_command(
            self.folder or Path("."),
            self.repo_id,
            private=self.private,
            commit_message=self.commit_message,
        )

    def skip(self, folder: Path, why: str) -> None:
        self.folder = folder
        self.skipped = why

    def publish(self, folder: Path) -> None:
        self.folder = folder
        try:
            self.result = push_folder(
                folder, self.repo_id, private=self.private, commit_message=self.commit_message
            )
        except PushError as exc:
            self.error = str(exc)
        except KeyboardInterrupt:
            self.interrupted = True
            self.error = "interrupted (Ctrl-C) before the Hub confirmed the commit"

    def terminal_lines(self) -> list[str]:
        if self.result is not None:
            return [f"pushed to the Hub: {self.result.url}"]
        if self.error is not None:
            first, *rest = [line for line in self.error.splitlines() if line.strip()] or [""]
            return [
                f"ERROR: push to the Hub ({self.repo_id}) failed: {first}",
                *(f"    {line}" for line in rest),
                f"every local file is intact in {self.folder}; retry with:",
                f"    {self.retry()}",
            ]
        if self.skipped is not None:
            return [
                f"not pushed to the Hub: {self.skipped}; push the folder with:",
                f"    {self.retry()}",
            ]
        return []
