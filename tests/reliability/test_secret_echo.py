"""Secrets echoed back by the other side never reach a file, JUnit XML or the terminal.

Two real echoes at once: an OpenEnv server (OpenEnv's own ``HTTPEnvServer``) whose
error frame quotes the ``Authorization`` header of the WebSocket handshake (Basic
credentials from the server URL, base64-encoded), and an OpenAI-compatible model
whose replies quote the ``Authorization: Bearer <key>`` it received. Every episode
passes through both; the test prints its messages (captured output goes to ``-rA``
and JUnit ``system-out``) and fails with ``episode.explain()`` (the tool error
lands in the failure message, the report and ``failures.jsonl``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from faults import Launcher, read_rows
from openenv.core.env_server.http_server import HTTPEnvServer
from servers.openai_compat import serve_openai
from servers.openenv_servers import (
    OpenSpielAction,
    OpenSpielObservation,
    OpenSpielState,
    ThreadServer,
    TicTacToeEnvironment,
)

API_KEY = "sk-proj-ECHOkeyQ7f3a9c2e41xx"
URL_USER, URL_PASSWORD = "echo-user", "ECHOpassw0rdZ5b8d"
BASIC = base64.b64encode(f"{URL_USER}:{URL_PASSWORD}".encode()).decode()
#: what must appear nowhere: the key, the password, and both as sent on the wire
SECRETS = (API_KEY, URL_PASSWORD, BASIC, base64.b64encode(API_KEY.encode()).decode()[:16])

EPISODE_TEST = """
def test_ep(episode):
    for message in episode.messages:
        print(message.get("role"), message.get("content"))
    assert episode.passed, episode.explain()
"""

#: Authorization headers of the WebSocket handshakes the server accepted
HEADERS_SEEN: list[str] = []


class EchoingTicTacToe(TicTacToeEnvironment):
    """Refuses each game's first move with an error that quotes the caller's credentials."""

    def __init__(self, step_delay: float = 0.0) -> None:
        super().__init__(step_delay)
        self._refused = False

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        self._refused = False  # a kept session serves several episodes
        return super().reset(*args, **kwargs)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        if not self._refused:
            self._refused = True
            seen = HEADERS_SEEN[-1] if HEADERS_SEEN else "none"
            raise ValueError(f"move refused; your request had Authorization: {seen}")
        return super().step(action, timeout_s, **kwargs)


def echoing_server_app() -> Any:
    from fastapi import FastAPI

    app = FastAPI()
    server = HTTPEnvServer(
        EchoingTicTacToe,
        OpenSpielAction,
        OpenSpielObservation,
        max_concurrent_envs=16,
        env_name="tictactoe",
        state_cls=OpenSpielState,
    )
    server.register_routes(app, mode="simulation")

    async def remember_credentials(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            for name, value in scope.get("headers", ()):
                if name.lower() == b"authorization":
                    HEADERS_SEEN.append(value.decode("latin-1"))
        await app(scope, receive, send)

    return remember_credentials


@pytest.fixture
def echoing_env_server() -> Iterator[ThreadServer]:
    HEADERS_SEEN.clear()
    with ThreadServer(echoing_server_app()) as server:
        yield server


def leaks(texts: dict[str, str]) -> list[str]:
    return [
        f"{where}: {secret}"
        for where, text in texts.items()
        for secret in SECRETS
        if secret in text
    ]


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_echoed_credentials_are_scrubbed_everywhere(
    launcher: Launcher, echoing_env_server: ThreadServer, workers: str
) -> None:
    (launcher.folder / "test_eps.py").write_text(EPISODE_TEST)
    scheme, _, rest = echoing_env_server.url.partition("://")
    with serve_openai(echo_auth_in_reply=True) as model:
        finished = launcher.run(
            "-n",
            workers,
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=3",
            "--openenv-policy=openai",
            "--openenv-model=fake-model",
            f"--openenv-server={scheme}://{URL_USER}:{URL_PASSWORD}@{rest}",
            "--openenv-min-reward=2",  # nobody wins 2: every episode fails and explains
            "--junitxml=junit.xml",
            "-o",
            "junit_logging=all",
            "-rA",
            "-v",
            "test_eps.py",
            env={"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": model.base_url},
        )
        assert model.requests > 0
    assert finished.returncode == 1, finished.stdout[-3000:]

    # the echoes happened: the server saw Basic credentials, and the failure shows the refusal
    assert HEADERS_SEEN and all(BASIC in seen for seen in HEADERS_SEEN)
    failures = read_rows(launcher.output / "failures.jsonl")
    assert len(failures) == 3
    assert "move refused; your request had Authorization: Basic ***" in finished.stdout
    assert all("(my request said Bearer ***)" in str(row["messages"]) for row in failures)

    written = {
        path.name: path.read_text(errors="replace")
        for path in launcher.output.iterdir()
        if path.is_file()
    }
    junit = (launcher.folder / "junit.xml").read_text()
    assert "move refused" in junit and "my request said" in junit  # what we scan is there
    assert (
        leaks({**written, "junit.xml": junit, "stdout": finished.stdout, "stderr": finished.stderr})
        == []
    )


@pytest.mark.parametrize(
    ("user", "password"),
    [("u", "pass1"), ("cache-user", "ECHOcachePassw0rd")],
    ids=["short", "long"],
)
@pytest.mark.slow
def test_the_response_cache_holds_no_echoed_url_credentials_and_replay_writes_none(
    launcher: Launcher, user: str, password: str
) -> None:
    """An endpoint echoing the Basic credential of its URL (``u:pass1``: too
    short for a base64 core) left it in cache entries in clear; a later replay run, which
    knows no secret, then wrote it into results.jsonl."""
    basic = base64.b64encode(f"{user}:{password}".encode()).decode()
    common = (
        "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=2", "--openenv-policy=openai",
        "--openenv-model=fake-model", "--openenv-cache=llm-cache", "--openenv-min-reward=-1",
    )  # fmt: skip
    with serve_openai(echo_auth_in_reply=True) as model:
        scheme, _, rest = model.base_url.partition("://")
        recorded = launcher.run(
            *common, f"--openenv-llm-endpoint={scheme}://{user}:{password}@{rest}"
        )
        assert model.requests > 0
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    entries = {
        str(path): path.read_text() for path in (launcher.folder / "llm-cache").rglob("*.json")
    }
    assert entries and all("my request said Basic ***" in text for text in entries.values())
    assert [where for where, text in entries.items() if basic in text or password in text] == []

    replayed = launcher.run(*common, "--openenv-replay", "--openenv-output=replayed")
    assert replayed.returncode == 0, replayed.stdout[-3000:]
    written = {
        path.name: path.read_text(errors="replace")
        for path in (launcher.folder / "replayed").iterdir()
        if path.is_file()
    }
    assert "my request said Basic ***" in written["results.jsonl"]
    texts = {**written, "stdout": replayed.stdout, "stderr": replayed.stderr}
    assert [where for where, text in texts.items() if basic in text or password in text] == []
