"""Server URLs: ws/wss mapping, credentials used but never shown, option parsing."""

from __future__ import annotations

import base64

import pytest

from pytest_openenv.config.convert import server_urls as _server_urls
from pytest_openenv.util.endpoints import ServerURL, ServerURLError, check_health, redact


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


def test_hf_token_goes_only_to_hf_spaces_over_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_dummy")
    assert ServerURL.parse("https://me-env.hf.space").headers() == {
        "Authorization": "Bearer hf_dummy"
    }
    assert ServerURL.parse("http://me-env.hf.space").headers() == {}
    assert ServerURL.parse("https://example.org").headers() == {}


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
