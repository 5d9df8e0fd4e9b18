"""``KnownSecrets``, the one scrubber: known values in every wire form, never key shapes.

The end-to-end leak scans (``reliability/test_secrets.py``, ``reliability/test_secret_echo.py``,
``test_llm_secrets.py``) run whole sessions; these pin the rules they rely on.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_openenv.episode.outcome import EpisodeOutcome
from pytest_openenv.util.endpoints import ServerURL
from pytest_openenv.util.secrets import HIDDEN, KnownSecrets

KEY = "sk-proj-UNITkeyQ7f3a9c2e41"
PASSWORD = "p@ss word/UNIT9"


def test_environment_secrets_are_found_by_name() -> None:
    secrets = KnownSecrets.collect(
        environ={
            "OPENAI_API_KEY": KEY,
            "MY_CI_TOKEN": "ci-token-0123456789",
            "DB_PASSWORD": "hunter2hunter2",
            "HOME": "/home/someone-long-enough",  # not named like a credential
            "HF_TOKEN": "short",  # too short to hide everywhere
        }
    )
    text = f"{KEY} ci-token-0123456789 hunter2hunter2 /home/someone-long-enough short"
    assert secrets.scrub(text) == f"{HIDDEN} {HIDDEN} {HIDDEN} /home/someone-long-enough short"


#: The usual cloud and provider credential names, one family per entry;
#: each is found by rule (the scrubber caught MY_API_KEY but not AWS_SECRET_ACCESS_KEY)
CREDENTIAL_FAMILIES = {
    "keys": ["AZURE_OPENAI_KEY", "GOOGLE_API_KEY", "MISTRAL_APIKEY", "SSH_PRIVATE_KEY"],
    "cloud": ["AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AZURE_CLIENT_SECRET"],
    "tokens": ["AWS_SESSION_TOKEN", "CI_JOB_TOKEN", "REPLICATE_API_TOKEN", "GITLAB_PAT"],
    "passwords": ["PGPASSWORD", "CI_REGISTRY_PASSWORD", "MYSQL_PWD", "SMTP_PASS"],
    "whole strings": [
        "AZURE_STORAGE_CONNECTION_STRING",
        "GOOGLE_CREDENTIALS",
        "SLACK_WEBHOOK_URL",
    ],
}


@pytest.mark.parametrize("family", sorted(CREDENTIAL_FAMILIES))
def test_credential_variables_are_found_by_rule(family: str) -> None:
    names = CREDENTIAL_FAMILIES[family]
    environ = {name: f"value-of-{name.lower()}-0123" for name in names}
    secrets = KnownSecrets.collect(environ=environ)
    text = " ".join(environ.values())
    assert secrets.scrub(text) == " ".join([HIDDEN] * len(names))


def test_ordinary_variables_are_not_credentials() -> None:
    environ = {
        "PWD": "/home/someone/project",  # the working directory, not a password
        "OLDPWD": "/home/someone/elsewhere",
        "PATH": "/usr/local/bin:/usr/bin",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
        "HF_TOKEN_PATH": "/home/someone/.cache/token",
        "BYPASS_CACHE": "yes-please-bypass",
    }
    secrets = KnownSecrets.collect(environ=environ)
    assert not secrets.active, secrets.forms


def test_credentials_in_any_url_variable_are_found() -> None:
    environ = {"DATABASE_URL": "postgres://app:s3cretPassw0rd@db.internal:5432/app"}
    secrets = KnownSecrets.collect(environ=environ)
    assert secrets.scrub("connect to s3cretPassw0rd failed") == f"connect to {HIDDEN} failed"
    basic = base64.b64encode(b"app:s3cretPassw0rd").decode()
    assert HIDDEN in secrets.scrub(f"Authorization: Basic {basic}")
    # a short password of a URL nobody gave this run is not hidden in every word
    short = KnownSecrets.collect(environ={"REDIS_URL": "redis://:pass@cache:6379"})
    assert short.scrub("4 passed") == "4 passed"


def test_no_secret_means_nothing_to_scan() -> None:
    secrets = KnownSecrets.collect(environ={"PATH": "/usr/bin"})
    assert not secrets.active
    assert secrets.scrub(f"Bearer {KEY}") == f"Bearer {KEY}"


def test_values_are_hidden_in_every_form_they_take_on_the_wire() -> None:
    odd = 'sk-UNIT"odd/key\u00e9Q7f3a9'  # a quote, a slash, a non-ASCII letter
    secrets = KnownSecrets.collect(environ={"OPENAI_API_KEY": odd})
    forms = [
        odd,
        urllib.parse.quote(odd, safe=""),
        json.dumps(odd)[1:-1],
        json.dumps(odd, ensure_ascii=False)[1:-1],
        base64.b64encode(odd.encode()).decode(),
    ]
    assert len(set(forms)) == len(forms)
    for form in forms:
        scrubbed = secrets.scrub(f"said: {form}!")
        assert HIDDEN in scrubbed and form not in scrubbed, form
    secrets = KnownSecrets.collect(environ={"OPENAI_API_KEY": KEY})
    # base64 inside a longer encoded text, at each of the three byte alignments
    for prefix in (b"", b"a", b"ab"):
        encoded = base64.b64encode(prefix + KEY.encode() + b"tail").decode()
        assert HIDDEN in secrets.scrub(encoded), prefix
        urlsafe = base64.urlsafe_b64encode(prefix + KEY.encode()).decode()
        assert HIDDEN in secrets.scrub(urlsafe), prefix


def test_url_credentials_and_their_basic_header_are_hidden() -> None:
    quoted = urllib.parse.quote(PASSWORD, safe="")
    url = f"https://alice:{quoted}@env.example.com/"
    secrets = KnownSecrets.collect(urls=[url, None, "http://[::1"], environ={})
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    text = f"password {PASSWORD}, as written {quoted}, header Authorization: Basic {basic}"
    assert secrets.scrub(text) == (
        f"password {HIDDEN}, as written {HIDDEN}, header Authorization: Basic {HIDDEN}"
    )


def test_short_url_password_is_hidden_as_written_only() -> None:
    secrets = KnownSecrets.collect(urls=["http://u:pw12@host"], environ={})
    assert secrets.scrub("pw12 and u:pw12") == f"{HIDDEN} and {HIDDEN}"
    assert KnownSecrets.collect(urls=["http://u:pw1@host"], environ={}).scrub("pw1") == "pw1"


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY"])
def test_a_proxys_password_is_hidden_however_short(name: str) -> None:
    secrets = KnownSecrets.collect(environ={name: "http://u:pw12@proxy.corp:3128"})
    basic = base64.b64encode(b"u:pw12").decode()
    assert secrets.scrub(f"pw12 and Proxy-Authorization: Basic {basic}") == (
        f"{HIDDEN} and Proxy-Authorization: Basic {HIDDEN}"
    )
    # an ordinary URL variable keeps its short password: not given to this run
    other = KnownSecrets.collect(environ={"SOME_URL": "http://u:pw12@host"})
    assert other.scrub("pw12") == "pw12"


def test_extra_values_count_and_empty_ones_are_ignored() -> None:
    token = "hf_fromTheLoginNotTheEnv42"
    secrets = KnownSecrets.collect(extra=[token, None, ""], environ={})
    assert secrets.scrub(f"401: token {token} refused") == f"401: token {HIDDEN} refused"


def test_key_shapes_alone_are_not_secrets() -> None:
    """Matching shapes would mangle honest content (a dataset about API keys, a word
    after "Bearer"); only values we know are hidden."""
    secrets = KnownSecrets.collect(environ={"OPENAI_API_KEY": KEY})
    text = "Bearer sk-other-not-ours-12345, api_key=abcdefgh, hf_SomeoneElsesTokenXYZ"
    assert secrets.scrub(text) == text


def test_a_longer_form_is_hidden_before_a_shorter_one_inside_it() -> None:
    secrets = KnownSecrets.collect(urls=["http://user:longpassword1@h"], environ={})
    assert secrets.scrub("user:longpassword1") == HIDDEN


@dataclass(frozen=True)
class Crash:
    message: str
    lines: list[str] = field(default_factory=list)


def test_trees_are_scrubbed_in_place_keeping_their_shape() -> None:
    secrets = KnownSecrets.collect(environ={"OPENAI_API_KEY": KEY})
    crash = Crash(f"failed: {KEY}", [f"line {KEY}", "clean"])
    tree: dict[str, Any] = {"crash": crash, "pairs": ("a", f"b {KEY}"), "n": 3}
    out = secrets.scrub_tree(tree)
    assert out is tree and tree["crash"] is crash
    assert crash.message == f"failed: {HIDDEN}" and crash.lines == [f"line {HIDDEN}", "clean"]
    assert tree["pairs"] == ("a", f"b {HIDDEN}") and tree["n"] == 3


def test_a_report_is_scrubbed_where_pytest_and_the_controller_read_it() -> None:
    secrets = KnownSecrets.collect(environ={"OPENAI_API_KEY": KEY})

    class Opaque:  # a longrepr the tree walk does not know
        def __str__(self) -> str:
            return f"opaque {KEY}"

    report = SimpleNamespace(
        longrepr=Opaque(),
        sections=[("Captured stdout call", f"printed {KEY}")],
        user_properties=[("openenv.outcome", "lost")],
        openenv_outcome=EpisodeOutcome(
            "ep-000000", line=json.dumps({"messages": [{"content": KEY}]})
        ),
    )
    secrets.scrub_report(report)
    assert report.longrepr == f"opaque {HIDDEN}"
    assert report.sections == [("Captured stdout call", f"printed {HIDDEN}")]
    line = report.openenv_outcome.line
    assert KEY not in line and HIDDEN in line
    assert report.user_properties == [("openenv.outcome", "lost")]


@pytest.mark.parametrize("raw", ["http://bob:s3cr%40t99@h:1", "ws://bob:s3cr@t99@h:1"])
def test_a_server_url_scrubs_its_own_credentials(raw: str) -> None:
    url = ServerURL.parse(raw)
    basic = url.headers()["Authorization"].removeprefix("Basic ")
    assert url.scrub(f"refused s3cr@t99 ({basic})") == f"refused {HIDDEN} ({HIDDEN})"


def test_env_config_credentials_are_strings_under_keys_naming_one_at_any_depth() -> None:
    from pytest_openenv.util.secrets import config_secrets, withhold_config

    config = {
        "hf_token": "hf_UNITconfigToken0123",
        "auth": {"clientSecret": "s3cr3t-UNIT-value", "user": "alice"},
        "API_KEYS": ["key-one-UNIT-0001", 7],
        "db_password": "pw",
        # counts, flags, token strings, a tokenizer and words are no credentials
        "max_tokens": 512,
        "stop_tokens": ["<eos>"],
        "use_key": True,
        "tokenizer": "gpt2",
        "keyword": "chess",
        "monkey": "banana",
        "context": "hello",
    }
    assert config_secrets(config) == [
        ("hf_token", "hf_UNITconfigToken0123"),
        ("auth.clientSecret", "s3cr3t-UNIT-value"),
        ("API_KEYS[0]", "key-one-UNIT-0001"),
        ("db_password", "pw"),
    ]
    shown = withhold_config(config)
    assert shown["hf_token"] == HIDDEN and shown["auth"] == {
        "clientSecret": HIDDEN,
        "user": "alice",
    }
    assert shown["API_KEYS"] == [HIDDEN, 7] and shown["db_password"] == HIDDEN
    assert {k: shown[k] for k in ("max_tokens", "stop_tokens", "tokenizer", "keyword")} == {
        "max_tokens": 512,
        "stop_tokens": ["<eos>"],
        "tokenizer": "gpt2",
        "keyword": "chess",
    }
    assert config["hf_token"] == "hf_UNITconfigToken0123"  # a copy: the env still gets it


def test_the_run_secrets_hold_the_env_configs_credentials() -> None:
    from pytest_openenv.config.settings import RunSettings, Settings

    token = "hf_UNITrunConfigToken99"
    settings = Settings(run=RunSettings(env_config={"hf_token": token, "password": "pw"}))
    secrets = KnownSecrets.from_settings(settings)
    # long enough: hidden in every form; "pw" only where the config itself is shown
    assert secrets.scrub(f"a {token} b {json.dumps(token)} pw") == f'a {HIDDEN} b "{HIDDEN}" pw'
    assert (
        secrets.scrub(base64.b64encode(f"x:{token}".encode()).decode())
        != base64.b64encode(f"x:{token}".encode()).decode()
    )


def test_a_marker_configs_credentials_join_the_run_secrets_for_its_items() -> None:
    token = "hf_UNITmarkerToken12345"
    run = KnownSecrets.collect(extra=[KEY], environ={})
    marked = run.with_config(json.dumps({"hf_token": token, "size": 3}))
    assert marked.scrub(f"{KEY} {token}") == f"{HIDDEN} {HIDDEN}"
    assert run.scrub(token) == token  # the run's own are unchanged
    assert run.with_config(json.dumps({"size": 3})) is run
    assert run.with_config(json.dumps({"hf_token": token, "size": 3})) is marked
