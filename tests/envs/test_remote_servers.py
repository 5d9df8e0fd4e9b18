"""``RemoteServers``: one process's view of its deployed servers, owned and passed, never global."""

from __future__ import annotations

import pytest
from servers.openenv_servers import serve_in_thread

from pytest_openenv.envs.base import EnvUnavailable
from pytest_openenv.envs.registry import build_family
from pytest_openenv.envs.remote.backend import RemoteBackend
from pytest_openenv.envs.remote.servers import RemoteServers
from pytest_openenv.envs.remote.sessions import IdleSessions
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import ScriptedPolicy
from pytest_openenv.util.endpoints import ServerURL

ENV = "openspiel:tic_tac_toe"


def test_what_one_process_learns_of_the_seed_stays_in_its_own_view() -> None:
    controller, other = RemoteServers(), RemoteServers()
    controller.learn_unseeded(["http://b:1", "http://a:1"])
    assert controller.unseeded.listed() == ["http://a:1", "http://b:1"]  # as a worker is told
    assert not controller.seeded("http://a:1")
    assert controller.seeded("http://c:1") and controller.seeded(None)  # None: embedded
    assert other.seeded("http://a:1")
    worker = RemoteServers()
    worker.learn_unseeded(controller.unseeded.listed())
    assert not worker.seeded("http://b:1")


def test_sessions_are_kept_only_while_enabled() -> None:
    sessions = IdleSessions()
    server = ServerURL.parse("http://a:1")
    assert not sessions.give(server, "c1")
    with sessions.enabled_while(True):
        assert sessions.give(server, "c2")
    assert not sessions.enabled and sessions.count() == 1
    assert sessions.take(server) == "c2"


def test_episodes_of_one_factory_share_its_view_and_records_say_what_it_knows() -> None:
    with serve_in_thread("tictactoe") as server:
        remote = RemoteServers()
        remote.keep_sessions(True)
        family = build_family(ENV, {}, (server.url,))
        env = EnvFactory(family, (server.url,), remote=remote)
        try:
            first = run_episode(EpisodeSpec(ENV, 0, 0), env, ScriptedPolicy())
            remote.learn_unseeded([server.url])
            second = run_episode(EpisodeSpec(ENV, 1, 1), env, ScriptedPolicy())
            opened = server.stats()["sessions_opened"]
        finally:
            remote.close()
    assert (first.seeded, second.seeded) == (True, False)
    assert opened == 1  # the second episode reset the session the first one kept
    assert remote.sessions.count() == 0  # closed: handed back to the server


def test_a_run_episode_caller_may_pass_the_process_view_over_the_factory_s() -> None:
    with serve_in_thread("tictactoe") as server:
        process = RemoteServers()
        process.learn_unseeded([server.url])
        family = build_family(ENV, {}, (server.url,))
        episode = run_episode(
            EpisodeSpec(ENV, 0, 0),
            EnvFactory(family, (server.url,)),  # a user's factory: a view of its own
            ScriptedPolicy(),
            remote=process,
        )
    assert episode.seeded is False


def test_a_capacity_refusal_is_told_to_the_view_s_overload_signal() -> None:
    with serve_in_thread("tictactoe", max_sessions=1) as server:
        remote = RemoteServers()
        heard: list[bool] = []
        remote.overload.listen(lambda: heard.append(True))
        holder = RemoteBackend(server.url, remote=remote)
        holder.reset(seed=0, episode_id="holder")
        waiting = RemoteBackend(server.url, remote=remote)
        waiting.limit_time(0.5)
        try:
            with pytest.raises(EnvUnavailable):
                waiting.reset(seed=1, episode_id="waiting")
        finally:
            holder.close()
            waiting.close()
    assert waiting.capacity_retries >= 1 and len(heard) == waiting.capacity_retries
