"""Server URLs: ws/wss mapping, credentials used but never shown, option parsing; every
plain GET bounded as a whole, its credentials kept from other origins through redirects."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from servers.hub_standin import HubStandIn
from servers.scripted_http import (
    ScriptedHTTP,
    answer_json,
    garbled_chunks,
    redirect,
    trickled,
)

from pytest_openenv.config.convert import server_urls as _server_urls
from pytest_openenv.envs.remote.hosting import read_report
from pytest_openenv.errors import ServerUnreachable
from pytest_openenv.util.endpoints import (
    ServerURL,
    ServerURLError,
    check_health,
    health_problem,
    redact,
    token_accounts,
)
from pytest_openenv.util.fetch import each_at_once

T = TypeVar("T")


@pytest.mark.parametrize(
    ("raw", "ws", "http"),
    [
        ("http://127.0.0.1:8000", "ws://127.0.0.1:8000/ws", "http://127.0.0.1:8000"),
        (
            "https://me-tictactoe.hf.space/",
            "wss://me-tictactoe.hf.space/ws",
            "https://me-tictactoe.hf.space",
        ),
        ("ws://host:9/prefix/ws", "ws://host:9/prefix/ws", "http://host:9/prefix"),
        ("wss://host/api", "wss://host/api/ws", "https://host/api"),
        ("HTTP://[::1]:8000", "ws://[::1]:8000/ws", "http://[::1]:8000"),
    ],
)
def test_http_maps_to_ws_and_https_to_wss(raw: str, ws: str, http: str) -> None:
    url = ServerURL.parse(raw)
    assert url.ws_session_url == ws
    assert url.http_base == http


def test_credentials_are_used_for_the_connection_but_never_shown() -> None:
    url = ServerURL.parse("https://alice:s3cr%40t@example.org:8443/env")
    assert url.public == "https://example.org:8443/env"
    assert "s3cr" not in url.ws_session_url and "alice" not in url.ws_session_url
    auth = url.headers()["Authorization"]
    assert auth.startswith("Basic ")
    assert base64.b64decode(auth.split()[1]).decode() == "alice:s3cr@t"
    assert redact("https://alice:s3cr%40t@example.org:8443/env") == "https://example.org:8443/env"
    assert url.scrub("boom: s3cr@t leaked") == "boom: *** leaked"


@pytest.fixture
def hub_of_me(monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    """HF_TOKEN belongs to the account ``me`` and its organization ``team_x.ai``."""
    token_accounts.cache_clear()
    with HubStandIn("hf_dummy_token", account="me", orgs=("team_x.ai",)) as hub:
        monkeypatch.setenv("HF_TOKEN", "hf_dummy_token")
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        yield hub
    token_accounts.cache_clear()


def test_hf_token_goes_only_to_hf_spaces_over_tls(hub_of_me: HubStandIn) -> None:
    assert ServerURL.parse("https://me-env.hf.space").headers() == {
        "Authorization": "Bearer hf_dummy_token"
    }
    assert ServerURL.parse("http://me-env.hf.space").headers() == {}
    assert ServerURL.parse("https://example.org").headers() == {}


def test_hf_token_goes_only_to_spaces_of_its_own_account(hub_of_me: HubStandIn) -> None:
    """HF_TOKEN went to any ``https://*.hf.space``: any Space's owner got it."""
    bearer = {"Authorization": "Bearer hf_dummy_token"}
    assert ServerURL.parse("https://me-tictactoe.hf.space").headers() == bearer
    assert ServerURL.parse("wss://ME-env.hf.space/ws").headers() == bearer
    # an organization of the account: the Hub writes "team_x.ai" as "team-x-ai" in hosts
    assert ServerURL.parse("https://team-x-ai-env.hf.space").headers() == bearer
    # someone else's Space, or one whose owner only starts with the same letters
    assert ServerURL.parse("https://mallory-env.hf.space").headers() == {}
    assert ServerURL.parse("https://meg-env.hf.space").headers() == {}
    assert ServerURL.parse("https://team-x-env.hf.space").headers() == {}
    # the Hub was asked once, with the token, at HF_ENDPOINT only
    asked = [r for r in hub_of_me.requests if r.path.startswith("/api/whoami")]
    assert len(asked) == 1 and asked[0].headers["authorization"] == "Bearer hf_dummy_token"


def test_hf_token_goes_to_no_space_when_the_hub_cannot_say_whose_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token_accounts.cache_clear()
    with HubStandIn("another_token", account="me") as hub:  # refuses hf_dummy_token: 401
        monkeypatch.setenv("HF_TOKEN", "hf_dummy_token")
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert ServerURL.parse("https://me-env.hf.space").headers() == {}
    token_accounts.cache_clear()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # offline: nothing listens
    assert ServerURL.parse("https://me-env.hf.space").headers() == {}
    token_accounts.cache_clear()


@pytest.mark.parametrize("raw", ["ftp://host", "127.0.0.1:8000", "http://", "http://host:notaport"])
def test_bad_urls_are_refused_with_the_expected_form(raw: str) -> None:
    with pytest.raises(ServerURLError, match=r"http://|no host|invalid port"):
        ServerURL.parse(raw)


def test_repeatable_option_values_keep_order_and_split_ini_lists() -> None:
    assert _server_urls("server", ["http://a:1", "http://b:2 http://c:3"]) == (
        "http://a:1",
        "http://b:2",
        "http://c:3",
    )
    with pytest.raises(pytest.UsageError, match="--openenv-server"):
        _server_urls("server", ["http://a:1", "nonsense"])


def test_health_check_names_each_server_that_is_down() -> None:
    problems = check_health(
        [ServerURL.parse("http://u:pw123@127.0.0.1:9"), ServerURL.parse("http://127.0.0.1:9/x")],
        timeout=2.0,
    )
    assert len(problems) == 2
    assert "http://127.0.0.1:9/health" in problems[0]
    assert "http://127.0.0.1:9/x/health" in problems[1]
    assert not any("pw123" in p for p in problems)


# -- every check GET: one bound on the whole request, credentials only to their origin ----------
def finishes_within(seconds: float, work: Callable[[], T]) -> tuple[T, float]:
    """``work()`` and how long it took; fails (without waiting for it) past ``seconds``."""
    done: list[T] = []
    thread = threading.Thread(target=lambda: done.append(work()), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert done, f"still running after {seconds} s"
    return done[0], time.monotonic() - started


#: far longer than any bound when sent at the issue's one byte per 2 s
LONG_JSON = json.dumps({"status": "healthy", "pad": "x" * 200}).encode()


@pytest.mark.parametrize("path", ["/health", "/metadata", "/schema"])
def test_a_server_trickling_its_answer_is_given_up_on_at_the_requests_bound(path: str) -> None:
    """A per-read timeout never fires when every read gets a byte: the GET held for ever."""
    with ScriptedHTTP({path: trickled(LONG_JSON, every=2.0)}) as server:
        url = ServerURL.parse(server.url)

        def get() -> str:
            with pytest.raises(ServerUnreachable) as caught:
                url.get_json(path, timeout=3.0)
            return str(caught.value)

        message, took = finishes_within(15, get)
    assert took < 5, took
    assert message == f"GET {server.url}{path} failed: no whole answer within 3 s"


def test_the_health_checks_and_the_servers_report_keep_their_bounds_when_trickled() -> None:
    routes = {p: trickled(LONG_JSON, every=2.0) for p in ("/health", "/metadata", "/schema")}
    with ScriptedHTTP(routes) as server:
        url = ServerURL.parse(server.url)
        problems, took = finishes_within(15, lambda: check_health([url, url], timeout=2.0))
        assert took < 4, took
        assert problems == [f"GET {server.url}/health failed: no whole answer within 2 s"] * 2
        report, took = finishes_within(30, lambda: read_report(url, timeout=1.0, state=False))
        assert took < 5, took  # /metadata, /schema, /list_environments: 1 s each at most
        assert report.name is None and report.action_fields is None


@pytest.mark.parametrize("status", [200, 500])
def test_a_garbled_chunked_answer_is_a_clean_server_unreachable(status: int) -> None:
    with ScriptedHTTP({"/health": garbled_chunks(status)}) as server:
        problem = health_problem(ServerURL.parse(server.url), timeout=5.0)
    assert problem is not None
    assert problem.startswith(f"GET {server.url}/health failed: a broken HTTP answer (")


def test_url_credentials_go_through_a_redirect_only_to_the_same_origin() -> None:
    healthy = answer_json({"status": "healthy"})
    with ScriptedHTTP({"/health": healthy}) as away:
        routes = {
            "/health": redirect("/same/health"),
            "/same/health": redirect(f"{away.url}/health"),
        }
        with ScriptedHTTP(routes) as home:
            url = ServerURL.parse(f"http://user:pw-secret@127.0.0.1:{home.url.rsplit(':', 1)[1]}")
            assert health_problem(url, timeout=5.0) is None
    basic = "Basic " + base64.b64encode(b"user:pw-secret").decode()
    assert [(s.path, s.headers.get("authorization")) for s in home.requests] == [
        ("/health", basic),
        ("/same/health", basic),  # the same origin keeps them
    ]
    assert away.paths() == ["/health"]
    assert "authorization" not in away.requests[0].headers


def test_the_hf_token_does_not_follow_the_hubs_redirect_to_another_origin() -> None:
    token_accounts.cache_clear()
    whoami = "/api/whoami-v2"
    with ScriptedHTTP({whoami: answer_json({"name": "mallory"})}) as away:
        hub = ScriptedHTTP({whoami: redirect(f"{away.url}{whoami}", status=307)})
        with hub:
            token_accounts("hf_redirected_token", hub.url)
    token_accounts.cache_clear()
    assert hub.requests[0].headers.get("authorization") == "Bearer hf_redirected_token"
    assert away.paths() == [whoami]
    assert "authorization" not in away.requests[0].headers


def test_each_at_once_keeps_the_order_and_raises_the_first_failure() -> None:
    assert each_at_once(lambda n: n * 2, list(range(40)), most=3) == [n * 2 for n in range(40)]
    assert each_at_once(lambda n: n, []) == []

    def odd_fails(n: int) -> int:
        if n % 2:
            raise ValueError(f"item {n}")
        return n

    with pytest.raises(ValueError, match=r"item 1$"):
        each_at_once(odd_fails, list(range(10)))


def test_a_remote_servers_check_goes_through_the_environments_proxy_a_loopback_ones_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    healthy = answer_json({"status": "healthy"})
    with (
        ScriptedHTTP({"http://env.example/health": healthy}) as proxy,
        ScriptedHTTP({"/health": healthy}) as local,
    ):
        proxy_url = f"http://pu:pp-proxy@127.0.0.1:{proxy.url.rsplit(':', 1)[1]}"
        for name in ("http_proxy", "HTTP_PROXY"):
            monkeypatch.setenv(name, proxy_url)
        assert health_problem(ServerURL.parse("http://env.example"), timeout=5.0) is None
        assert health_problem(ServerURL.parse(local.url), timeout=5.0) is None
    assert proxy.paths() == ["http://env.example/health"]  # the absolute URL, as urllib sends it
    sent = proxy.requests[0].headers
    assert sent["proxy-authorization"] == "Basic " + base64.b64encode(b"pu:pp-proxy").decode()
    assert sent["host"] == "env.example"
    assert local.paths() == ["/health"]
