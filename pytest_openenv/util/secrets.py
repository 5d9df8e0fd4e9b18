"""Known secret values, and every form they take on the wire, scrubbed from text we emit.

A secret reaches our output by being echoed: a proxy quotes the ``Authorization``
header in an error, an env server puts it in an error frame, a model repeats its
key. So the values themselves are what we look for, not their shape (matching
shapes would also mangle honest dataset content): API keys and tokens from the
environment, passwords in ``--openenv-server`` / ``--openenv-llm-endpoint`` URLs
and the ``user:password`` pair, each as written, percent-encoded, JSON-escaped and
base64-encoded (standard and URL-safe alphabets, at each of the three byte
alignments it can have inside a longer base64 text such as a Basic credential).

``KnownSecrets`` is the one scrubber of the package. It is used at two choke
points, the controller's writer (every file of the output folder) and the report
of every test (what the terminal, JUnit XML and xdist see), and where a message is
made from what the other side said: a model endpoint's error (``policies/llm``),
a server's (``ServerURL.scrub``), the Hub's (``dataset/hub.py``), and each response
cache entry. With no secret in the environment nothing is scanned, so offline runs
pay nothing.

The env config may carry a credential too (OpenEnv's repl env takes an ``hf_token``
reset field): a string under a key that names one (``CONFIG_SECRET_KEY``: ``*token*``,
``*key*``, ``*secret*``, ``*password*``, at any depth) is sent to the env as given,
but is a known secret in every output, and wherever the config itself is written
(rows' ``task.config``, metadata.json, the card) its value is replaced by ``***``
(``withhold_config``), however short. A number or a boolean under such a key
(``max_tokens``) is no credential.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class _Servers(Protocol):
    @property
    def urls(self) -> tuple[str, ...]: ...


class _Endpoint(Protocol):
    @property
    def endpoint(self) -> str | None: ...


class _EnvConfig(Protocol):
    @property
    def config(self) -> dict[str, Any]: ...


class SecretSources(Protocol):
    """The settings that name a run's secrets (``config.settings.Settings``: util sits
    below config, so it is described here, not imported)."""

    @property
    def servers(self) -> _Servers: ...

    @property
    def llm(self) -> _Endpoint: ...

    @property
    def run(self) -> _EnvConfig: ...


#: named explicitly: the variables the plugin itself reads
SECRET_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
#: any other variable named like a credential, by rule (one family of names per line):
SECRET_NAME = re.compile(
    "|".join(
        (
            # keys: MY_API_KEY, GOOGLE_API_KEY, AZURE_OPENAI_KEY, *_PRIVATE_KEY, AWS_ACCESS_KEY_ID
            r"(?:^|_)(?:API_?KEY|KEY|ACCESS_KEY_ID)$",
            # tokens: GITHUB_TOKEN, CI_JOB_TOKEN, AWS_SESSION_TOKEN, REPLICATE_API_TOKEN, *_PAT
            r"(?:^|_)(?:TOKEN|PAT|AUTH|AUTH_TOKEN)$",
            # secrets anywhere in the name: AWS_SECRET_ACCESS_KEY, AZURE_CLIENT_SECRET
            r"SECRET",
            # passwords: DB_PASSWORD, PGPASSWORD, *_PASSWD, MYSQL_PWD, *_PASS (not PWD, the cwd)
            r"PASSW(?:OR)?D$|_PWD$|(?:^|_)PASS$",
            # credentials that are whole strings: AZURE_STORAGE_CONNECTION_STRING, *_CREDENTIALS
            r"(?:^|_)(?:CONNECTION_STRING|CREDENTIALS?|WEBHOOK(?:_URL)?)$",
        )
    ),
    re.IGNORECASE,
)
#: shorter values are too likely to be ordinary words or numbers to hide everywhere
MIN_SECRET = 8
#: the variables the request paths take their proxy from (httpx and the http path alike)
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")
#: a base64 fragment shorter than this matches ordinary text by chance
MIN_ENCODED = 10
HIDDEN = "***"
#: env-config keys that name a credential: hf_token, api_key, apiKey, client_secret,
#: db_password; not the plural ``tokens`` (max_tokens, stop_tokens: counts and token
#: strings), a tokenizer, a keyword or a keyboard
CONFIG_SECRET_KEY = re.compile(
    r"token(?!s|iz)|(?<!mon)key(?!word|board)|secret|passw(?:or)?d|passphrase|credential",
    re.IGNORECASE,
)


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of variables named like credentials, and the credentials in any URL value
    (``DATABASE_URL=postgres://user:password@host/db``, a ``PIP_INDEX_URL`` with a token)."""
    environ = os.environ if environ is None else environ
    found = [
        value
        for name, value in environ.items()
        if (name in SECRET_VARS or SECRET_NAME.search(name)) and len(value) >= MIN_SECRET
    ]
    for name, value in environ.items():
        if name.lower() in PROXY_VARS:
            # the proxy the model requests go through: its password, however short, is the
            # run's own (a proxy's error page may quote it), as an endpoint URL's is
            found.extend(url_credentials(value))
        elif "://" in value and "@" in value:
            # not given to this run: only values too long to be ordinary words are hidden
            found.extend(part for part in url_credentials(value) if len(part) >= MIN_SECRET)
    return found


def names_a_secret(key: object) -> bool:
    """Whether an env-config key names a credential (``CONFIG_SECRET_KEY``)."""
    return isinstance(key, str) and CONFIG_SECRET_KEY.search(key) is not None


def config_secrets(config: Any) -> list[tuple[str, str]]:
    """(where, value) of every string under a key naming a credential, at any depth:
    ``where`` is the key path (``auth.hf_token``, ``keys[1]``), never the value."""
    found: list[tuple[str, str]] = []
    _find_config_secrets(config, "", False, found, 0)
    return found


def _find_config_secrets(
    value: Any, where: str, secret: bool, found: list[tuple[str, str]], depth: int
) -> None:
    if depth > MAX_TREE_DEPTH:
        return
    if isinstance(value, str):
        if secret:
            found.append((where, value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            _find_config_secrets(item, path, secret or names_a_secret(key), found, depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _find_config_secrets(item, f"{where}[{index}]", secret, found, depth + 1)


def withhold_config(config: Any) -> Any:
    """``config`` (a copy) with every credential's value replaced by ``***``
    (``config_secrets``), and hidden where another of its values quotes it: what a record,
    metadata.json or the card may show of it (what the run's scrubber leaves of it too, so
    a resume compares like with like)."""
    quoted = sorted(set(config_secret_values(config)), key=len, reverse=True)
    return _withheld(config, False, 0, quoted)


def _withheld(value: Any, secret: bool, depth: int, quoted: list[str]) -> Any:
    if depth > MAX_TREE_DEPTH:
        return value
    if isinstance(value, str):
        if secret:
            return HIDDEN
        for known in quoted:
            value = value.replace(known, HIDDEN)
        return value
    if isinstance(value, Mapping):
        return {
            key: _withheld(item, secret or names_a_secret(key), depth + 1, quoted)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_withheld(item, secret, depth + 1, quoted) for item in value]
    return value


def withhold_config_json(text: str) -> str:
    """``withhold_config`` of a config written as JSON text (a row's ``task.config``);
    the text as it is when it holds no credential."""
    try:
        config = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return text
    if not config_secrets(config):
        return text
    return json.dumps(withhold_config(config), sort_keys=True, ensure_ascii=False)


def config_secret_values(config: Any) -> list[str]:
    """The credentials of an env config long enough to hide in any text (``MIN_SECRET``);
    shorter ones are withheld only where the config itself is shown: as words they would
    garble honest text."""
    return [value for _, value in config_secrets(config) if len(value) >= MIN_SECRET]


def url_credentials(url: str | None) -> list[str]:
    """A URL's password (as written and decoded) and its ``user:password`` pair."""
    if not url:
        return []
    try:
        parts = urllib.parse.urlsplit(str(url).strip())
        password = parts.password
    except ValueError:
        return []
    if not password:
        return []
    user = urllib.parse.unquote(parts.username or "")
    return [password, *credential_values(user, urllib.parse.unquote(password))]


def credential_values(user: str | None, password: str | None) -> list[str]:
    """A decoded password and the ``user:password`` pair a Basic credential encodes."""
    if not password:
        return []
    return [password, f"{user or ''}:{password}"]


def base64_cores(value: str) -> set[str]:
    """The base64 text of ``value`` that is the same wherever it sits in a longer input."""
    raw = value.encode("utf-8")
    cores: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        start = -(-shift * 8 // 6)  # characters that carry bits of the bytes before
        end = (shift + len(raw)) * 8 // 6  # characters that carry bits of the bytes after
        core = encoded[start:end]
        if len(core) >= MIN_ENCODED:
            cores.add(core)
            cores.add(core.replace("+", "-").replace("/", "_"))
    return cores


def basic_forms(value: str) -> set[str]:
    """``value`` base64-encoded whole, as a Basic credential sends ``user:password``.

    A pair shorter than ``MIN_SECRET`` (``u:pass1``) has no base64 core long enough to
    hide inside any text, but its whole encoding after ``Basic`` (``dTpwYXNzMQ==``) is
    what an endpoint echoes: these forms, padding and all, are long enough to hide.
    """
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    forms = {encoded, encoded.rstrip("="), encoded.replace("+", "-").replace("/", "_")}
    return {form for form in forms if len(form) >= MIN_SECRET}


def forms_of(value: str) -> set[str]:
    forms = {
        value,
        urllib.parse.quote(value, safe=""),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }
    forms |= base64_cores(value)
    return {form for form in forms if len(form) >= MIN_SECRET}


@dataclass(frozen=True)
class KnownSecrets:
    """The forms to hide, longest first (a longer form may contain a shorter one)."""

    forms: tuple[str, ...] = ()
    #: ``with_config``'s answers by config text (one per episode test)
    _by_config: dict[str, KnownSecrets] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def collect(
        cls,
        urls: Iterable[str | None] = (),
        extra: Iterable[str | None] = (),
        environ: Mapping[str, str] | None = None,
    ) -> KnownSecrets:
        """The environment's secrets, the credentials in ``urls`` and the ``extra`` values
        (a key or token that came from elsewhere, such as the huggingface_hub login)."""
        values = [*env_secrets(environ), *(value for value in extra if value)]
        for url in urls:
            values.extend(url_credentials(url))
        forms: set[str] = set()
        for value in values:
            if len(value) >= MIN_SECRET:
                forms |= forms_of(value)
            elif len(value) >= 4:
                forms.add(value)  # short URL passwords: only as written
            if len(value) >= 4:
                forms |= basic_forms(value)
        return cls(tuple(sorted(forms, key=lambda form: (-len(form), form))))

    @classmethod
    def from_settings(cls, settings: SecretSources) -> KnownSecrets:
        """The run's secrets: the environment's, the server and endpoint URLs' credentials,
        and those of ``--openenv-env-config`` (the ini's included)."""
        return cls.collect(
            [*settings.servers.urls, settings.llm.endpoint],
            extra=config_secret_values(settings.run.config),
        )

    def with_config(self, config: str) -> KnownSecrets:
        """These secrets and the credentials of ``config`` (JSON text: an episode test's
        env config, whose marker may add its own). Remembered by text: one test's items
        share it."""
        known = self._by_config.get(config)
        if known is None:
            try:
                values = config_secret_values(json.loads(config))
            except (TypeError, ValueError, RecursionError):
                values = []
            known = self
            if values:
                more = KnownSecrets.collect(extra=values, environ={}).forms
                known = KnownSecrets(
                    tuple(sorted({*self.forms, *more}, key=lambda form: (-len(form), form)))
                )
            self._by_config[config] = known
        return known

    @property
    def active(self) -> bool:
        return bool(self.forms)

    def scrub(self, text: str) -> str:
        for form in self.forms:
            if form in text:
                text = text.replace(form, HIDDEN)
        return text

    def scrub_tree(self, value: Any) -> Any:
        """``value`` with every string in it scrubbed; lists, dicts and dataclasses in place.

        Made for pytest's failure representations (``longrepr``): trees of dataclasses,
        lists and tuples of strings, which keep their structure (and so the crash
        message that JUnit and ``-r`` summaries show) when scrubbed this way.
        """
        return _scrub_tree(value, self.scrub, 0)

    def scrub_report(self, report: Any) -> None:
        """Hide known secrets in a report before anyone prints, stores or sends it."""
        if not self.active:
            return
        for name in REPORT_TEXT:
            current = getattr(report, name, None)
            if current is None:
                continue
            cleaned = self.scrub_tree(current)
            if name == "longrepr" and not (
                isinstance(cleaned, (str, tuple)) or dataclasses.is_dataclass(cleaned)
            ):
                # an object the walk does not know: its rendering, if that still holds a secret
                text = str(cleaned)
                if self.scrub(text) != text:
                    cleaned = self.scrub(text)
            if cleaned is not current:
                setattr(report, name, cleaned)


#: what a test report carries to the terminal, JUnit XML and the controller (an episode's
#: outcome is a frozen dataclass, its row line among its strings: scrubbed in place)
REPORT_TEXT = ("longrepr", "sections", "user_properties", "openenv_outcome")
#: deepest level of a report tree walked; below it values are left as they are
MAX_TREE_DEPTH = 20


def walk_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with ``change`` applied to every string in it (``scrub_tree``'s walk)."""
    return _scrub_tree(value, change, 0)


def _scrub_tree(value: Any, scrub: Callable[[str], str], depth: int) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if depth > MAX_TREE_DEPTH:
        return value
    if isinstance(value, list):
        value[:] = [_scrub_tree(item, scrub, depth + 1) for item in value]
        return value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_scrub_tree(item, scrub, depth + 1) for item in value)
    if isinstance(value, dict):
        for key in list(value):
            value[key] = _scrub_tree(value[key], scrub, depth + 1)
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for spec in dataclasses.fields(value):
            current = getattr(value, spec.name, None)
            cleaned = _scrub_tree(current, scrub, depth + 1)
            if cleaned is not current:
                object.__setattr__(value, spec.name, cleaned)  # frozen ones too
        return value
    return value
