"""The WebSocket backend against real OpenEnv servers (``openenv`` package) on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
from servers.openenv_servers import ThreadServer, serve_in_thread

from pytest_openenv.envs.base import ActionRejected, EnvUnavailable
from pytest_openenv.envs.openspiel.engine import OpenSpielEngine, load_game
from pytest_openenv.envs.remote.backend import RemoteBackend
from pytest_openenv.envs.remote.servers import RemoteServers


@pytest.fixture(scope="module")
def tictactoe() -> Iterator[ThreadServer]:
    with serve_in_thread("tictactoe") as server:
        yield server


@pytest.fixture(scope="module")
def one_session() -> Iterator[ThreadServer]:
    with serve_in_thread("tictactoe", max_sessions=1) as server:
        yield server


@pytest.fixture(scope="module")
def slow() -> Iterator[ThreadServer]:
    with serve_in_thread("tictactoe", step_delay=1.5) as server:
        yield server


def play(backend, seed: int) -> list[tuple[dict, float | None, bool]]:
    """First-legal play to the end; the observations seen."""
    seen = []
    result = backend.reset(seed=seed, episode_id=f"ep-{seed}")
    seen.append((result.observation, result.reward, result.done))
    while not result.done:
        move = result.observation["legal_actions"][0]
        result = backend.step({"action_id": move, "game_name": "tic_tac_toe", "game_params": {}})
        seen.append((result.observation, result.reward, result.done))
    return seen


def play_remote(
    url: str, seed: int, remote: RemoteServers | None = None
) -> list[tuple[dict, float | None, bool]]:
    """One whole episode in a session of its own (closed, or kept when ``remote`` keeps them)."""
    backend = RemoteBackend(url, remote=remote)
    try:
        return play(backend, seed)
    finally:
        backend.close()


def play_embedded(seed: int) -> list[tuple[dict, float | None, bool]]:
    game = load_game("tic_tac_toe", {})
    return play(OpenSpielEngine(game, agent_player=0, opponent="random"), seed)


def test_remote_session_matches_the_embedded_engine_seed_for_seed(tictactoe: ThreadServer) -> None:
    for seed in (0, 1, 7):
        remote_seen = play_remote(tictactoe.url, seed)
        embedded_seen = play_embedded(seed)
        assert [o for o, _, _ in remote_seen] == [o for o, _, _ in embedded_seen]
        assert [(r or 0.0, d) for _, r, d in remote_seen] == [
            (r or 0.0, d) for _, r, d in embedded_seen
        ]
    assert RemoteBackend(tictactoe.url).location == tictactoe.url


def test_error_frames_become_tool_errors_and_the_session_goes_on(tictactoe: ThreadServer) -> None:
    backend = RemoteBackend(tictactoe.url)
    try:
        first = backend.reset(seed=3, episode_id="ep-x")
        with pytest.raises(ActionRejected, match=r"EXECUTION_ERROR.*not legal"):
            backend.step({"action_id": 42, "game_name": "tic_tac_toe", "game_params": {}})
        with pytest.raises(ActionRejected, match=r"VALIDATION_ERROR.*action_id"):
            backend.step({"action_id": "four"})
        after = backend.step(
            {"action_id": first.observation["legal_actions"][0], "game_name": "tic_tac_toe"}
        )
        assert backend.state()["step_count"] == 1
        assert after.observation["game_phase"] in ("playing", "terminal")
    finally:
        backend.close()


def test_credentials_in_the_url_connect_but_stay_out_of_location(tictactoe: ThreadServer) -> None:
    with_credentials = tictactoe.url.replace("http://", "http://bob:hunter2@")
    backend = RemoteBackend(with_credentials)
    try:
        assert backend.reset(seed=0, episode_id="ep-c").observation["legal_actions"]
        assert backend.location == tictactoe.url
    finally:
        backend.close()


def test_a_full_server_is_retried_until_a_session_frees(one_session: ThreadServer) -> None:
    holder = RemoteBackend(one_session.url)
    holder.reset(seed=0, episode_id="holder")
    waiting = RemoteBackend(one_session.url)
    waiting.limit_time(20)
    release = threading.Timer(0.4, holder.close)
    release.start()
    try:
        result = waiting.reset(seed=1, episode_id="waiting")
        assert result.observation["legal_actions"]
        assert waiting.capacity_retries >= 1
    finally:
        release.join()
        waiting.close()
    assert one_session.stats()["peak_sessions"] == 1


def test_capacity_that_never_frees_is_an_episode_error_within_the_time_limit(
    one_session: ThreadServer,
) -> None:
    holder = RemoteBackend(one_session.url)
    holder.reset(seed=0, episode_id="holder")
    waiting = RemoteBackend(one_session.url)
    waiting.limit_time(0.6)
    started = time.monotonic()
    try:
        with pytest.raises(EnvUnavailable, match="capacity"):
            waiting.reset(seed=1, episode_id="waiting")
    finally:
        holder.close()
        waiting.close()
    assert time.monotonic() - started < 5


@pytest.fixture
def full_then_stalled() -> Iterator[str]:
    """A /ws endpoint that refuses its first session as full (OpenEnv's CAPACITY_REACHED
    frame) and never finishes the handshake of any later one."""
    from websockets.sync.server import serve

    handshakes: list[int] = []

    def stall_after_the_first(connection, request):
        handshakes.append(1)
        if len(handshakes) > 1:
            time.sleep(1.5)

    def refuse(connection) -> None:
        connection.recv()
        full = {"code": "CAPACITY_REACHED", "message": "all 1 sessions are in use"}
        connection.send(json.dumps({"type": "error", "data": full}))

    with serve(refuse, "127.0.0.1", 0, process_request=stall_after_the_first) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        server.shutdown()


def test_a_retry_that_runs_out_of_time_in_the_handshake_still_names_the_capacity(
    full_then_stalled: str,
) -> None:
    waiting = RemoteBackend(full_then_stalled)
    waiting.limit_time(0.6)
    try:
        with pytest.raises(EnvUnavailable) as raised:
            waiting.reset(seed=1, episode_id="waiting")
    finally:
        waiting.close()
    message = str(raised.value)
    assert "stayed at capacity" in message and "all 1 sessions are in use" in message
    assert "the last retry: cannot open a session" in message
    assert waiting.capacity_retries == 1


def test_a_silent_server_times_out_instead_of_hanging(slow: ThreadServer) -> None:
    backend = RemoteBackend(slow.url, message_timeout=0.2)
    try:
        backend.reset(seed=0, episode_id="ep-slow")
        with pytest.raises(EnvUnavailable, match="no answer"):
            backend.step({"action_id": 0})
    finally:
        backend.close()


def test_nothing_listening_is_an_infrastructure_fault() -> None:
    backend = RemoteBackend("http://127.0.0.1:9")
    with pytest.raises(EnvUnavailable, match=r"cannot open a session at http://127.0.0.1:9/ws"):
        backend.reset(seed=0, episode_id="ep-0")


# -- sessions kept between episodes (envs/sessions.py) ---------------------------------------
@pytest.fixture
def keeping() -> Iterator[RemoteServers]:
    """A process's view of its servers that keeps sessions, as a run without xdist does."""
    remote = RemoteServers()
    remote.keep_sessions(True)
    try:
        yield remote
    finally:
        remote.close()


def test_a_kept_session_is_reset_for_the_next_episode_and_replays_its_seed(
    keeping: RemoteServers,
) -> None:
    with serve_in_thread("tictactoe") as server:
        for seed in (3, 5, 3):
            seen = play_remote(server.url, seed, keeping)
            assert [o for o, _, _ in seen] == [o for o, _, _ in play_embedded(seed)]
        assert server.stats()["sessions_opened"] == 1
        assert keeping.sessions.count() == 1


def test_a_kept_session_that_went_stale_is_replaced(keeping: RemoteServers) -> None:
    with serve_in_thread("tictactoe") as server:
        first = RemoteBackend(server.url, remote=keeping)
        play(first, 0)
        first.close()
        stale = keeping.sessions.take(first.server)
        stale.close()  # as if the server had dropped it while it was idle
        keeping.sessions.give(first.server, stale)
        second = RemoteBackend(server.url, remote=keeping)
        try:
            assert play(second, 1)[-1][2], "the episode did not finish on a fresh session"
        finally:
            second.close()
        assert server.stats()["sessions_opened"] == 2


def test_after_a_capacity_refusal_sessions_go_back_to_the_server(keeping: RemoteServers) -> None:
    with serve_in_thread("tictactoe", max_sessions=1) as server:
        holder = RemoteBackend(server.url, remote=keeping)
        holder.reset(seed=0, episode_id="holder")
        waiting = RemoteBackend(server.url, remote=keeping)
        waiting.limit_time(20)
        # kept instead of closed, the holder's session would never free for the waiting one
        release = threading.Timer(0.4, holder.close)
        release.start()
        try:
            assert waiting.reset(seed=1, episode_id="waiting").observation["legal_actions"]
            assert waiting.capacity_retries >= 1
        finally:
            release.join()
            waiting.close()
        assert keeping.sessions.count() == 0
        assert keeping.overload.fired >= 1  # the refusals told --openenv-concurrency auto


def test_a_session_with_an_unread_answer_is_never_kept(
    keeping: RemoteServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Interrupted(BaseException):
        pass

    with serve_in_thread("tictactoe") as server:
        backend = RemoteBackend(server.url, remote=keeping)
        backend.reset(seed=0, episode_id="ep")
        ws = backend._ws

        def interrupted_recv(*args: object, **kwargs: object) -> str:
            raise Interrupted  # e.g. Ctrl-C after the step was sent, before its answer

        monkeypatch.setattr(ws, "recv", interrupted_recv)
        with pytest.raises(Interrupted):
            backend.step({"action_id": 0, "game_name": "tic_tac_toe", "game_params": {}})
        backend.close()
        assert keeping.sessions.count() == 0
