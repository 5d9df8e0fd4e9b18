"""Server URLs: ws/wss mapping, credentials used but never shown, option parsing."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from servers.hub_standin import HubStandIn

from pytest_openenv.config.convert import server_urls as _server_urls
from pytest_openenv.util.endpoints import (
    ServerURL,
    ServerURLError,
    check_health,
    redact,
    token_accounts,
)


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
