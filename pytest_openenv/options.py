"""Command-line options and ini keys, parsed once into ``Settings``.

Every ``--openenv-x-y`` has an ini key ``openenv_x_y``; the command line wins.
Each option is one row of ``OPTIONS``; parsing a bad value raises
``pytest.UsageError`` naming the option and what would be valid.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .adaptive import AUTO, AUTO_CEILING, AUTO_START
from .dataset.layout import TOOL_ARGUMENT_FORMS

#: seconds one LLM request may take when nothing else is set: the SDKs' own default
#: (600 s, retried twice) leaves a hung endpoint holding an episode for ~30 minutes
DEFAULT_REQUEST_TIMEOUT = 120.0

BUILTIN_POLICIES = ("scripted", "random")
#: an episode id prefix: it sits in node ids (``test[P-ep-000000]``) and dataset rows
ID_PREFIX = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,63}")


def _bad(flag: str, value: Any, expected: str) -> pytest.UsageError:
    return pytest.UsageError(f"--openenv-{flag}={value!r} is invalid: expected {expected}")


def _positive_int(flag: str, raw: Any) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise _bad(flag, raw, "a positive integer, e.g. 10") from None
    if value <= 0:
        raise _bad(flag, raw, "a positive integer (> 0), e.g. 10")
    return value


#: most items per episode test (n x repeats): a pytest item costs ~4 KB in the controller
#: and again in every xdist worker (~0.44 GB and ~10 s of collection per 100k, measured)
MAX_ITEMS = 100_000
SPLIT_HINT = (
    "split a bigger collection into runs of at most {limit:,} episodes, each with its own "
    "--openenv-seed (0, {limit}, ...) and --openenv-id-prefix (or --openenv-output)"
)


def _item_count(flag: str, raw: Any) -> int:
    """A positive integer no bigger than MAX_ITEMS: checked before any item is built."""
    value = _positive_int(flag, raw)
    if value > MAX_ITEMS:
        raise _bad(
            flag,
            raw,
            f"a positive integer up to {MAX_ITEMS:,} (items per episode test); "
            + SPLIT_HINT.format(limit=MAX_ITEMS),
        )
    return value


def check_item_count(n: int, repeats: int, where: str) -> str | None:
    """Why ``n`` episodes x ``repeats`` is too many items for one episode test, or None."""
    if n * repeats <= MAX_ITEMS:
        return None
    return (
        f"{where} with --openenv-repeats={repeats} makes {n * repeats:,} items, more than "
        f"the {MAX_ITEMS:,} one episode test may hold; "
        + SPLIT_HINT.format(limit=MAX_ITEMS // repeats)
    )


#: most episodes in flight per pytest process: each is a thread (and a connection)
MAX_CONCURRENCY = 256


def _concurrency(flag: str, raw: Any) -> int | str:
    """``auto`` or 1..MAX_CONCURRENCY: a bigger number would start that many threads."""
    text = str(raw).strip().lower()
    if text == AUTO:
        return AUTO
    expected = f"a positive integer 1..{MAX_CONCURRENCY} or auto, e.g. 16"
    try:
        value = int(text)
    except ValueError:
        raise _bad(flag, raw, expected) from None
    if not 1 <= value <= MAX_CONCURRENCY:
        raise _bad(flag, raw, expected)
    return value


def _int(flag: str, raw: Any) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise _bad(flag, raw, "an integer, e.g. 0") from None


def _float(flag: str, raw: Any) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise _bad(flag, raw, "a number, e.g. 0.5") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise _bad(flag, raw, "a finite number")
    return value


def _fraction(flag: str, raw: Any) -> float:
    value = _float(flag, raw)
    if not 0.0 <= value <= 1.0:
        raise _bad(flag, raw, "a fraction between 0 and 1 inclusive, e.g. 0.8")
    return value


def _confidence(flag: str, raw: Any) -> float:
    value = _float(flag, raw)
    if not 0.0 < value < 1.0:
        raise _bad(flag, raw, "a confidence level strictly between 0 and 1, e.g. 0.95")
    return value


def _one_of(*choices: str) -> Callable[[str, Any], str]:
    """A converter that accepts exactly one of ``choices``."""

    def convert(flag: str, raw: Any) -> str:
        value = str(raw).strip()
        if value not in choices:
            raise _bad(flag, raw, f"one of {', '.join(choices)}")
        return value

    return convert


GATE_METRICS = ("pass@1", "pass@k", "pass^k")
_gate_metric = _one_of(*GATE_METRICS)


def _server_urls(flag: str, raw: Any) -> tuple[str, ...]:
    """Repeatable server URLs (CLI list or ini list); credentials stay only in memory."""
    from .envs.endpoints import ServerURL, ServerURLError

    values = [raw] if isinstance(raw, str) else list(raw)
    urls = []
    for value in values:
        for text in str(value).split():
            try:
                ServerURL.parse(text)
            except ServerURLError as exc:
                raise pytest.UsageError(f"--openenv-{flag}: {exc}") from None
            urls.append(text)
    return tuple(urls)


def _json_object(flag: str, raw: Any) -> dict[str, Any]:
    from .jsonlimits import loads_bounded

    if isinstance(raw, dict):
        return raw
    try:
        value = loads_bounded(str(raw))
    except ValueError as exc:
        raise _bad(
            flag, raw, f'a JSON object such as \'{{"opponent": "random"}}\' ({exc})'
        ) from None
    if not isinstance(value, dict):
        raise _bad(flag, raw, 'a JSON object such as \'{"opponent": "random"}\'')
    return value


def _text(flag: str, raw: Any) -> str:
    return str(raw)


def _flag(flag: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise _bad(flag, raw, "true or false")


def _non_negative_int(flag: str, raw: Any) -> int:
    value = _int(flag, raw)
    if value < 0:
        raise _bad(flag, raw, "an integer >= 0, e.g. 2")
    return value


def _positive_float(flag: str, raw: Any) -> float:
    value = _float(flag, raw)
    if value <= 0:
        raise _bad(flag, raw, "a number of seconds > 0, e.g. 60")
    return value


def _non_negative_float(flag: str, raw: Any) -> float:
    value = _float(flag, raw)
    if value < 0:
        raise _bad(flag, raw, "a number >= 0, e.g. 0.2")
    return value


def _http_url(flag: str, raw: Any) -> str:
    from .envs.endpoints import ServerURL, ServerURLError, redact

    text = str(raw).strip()
    try:  # the host and port must parse too: "http://[::1" would fail in the SDK later
        usable = text.startswith(("http://", "https://")) and bool(ServerURL.parse(text))
    except ServerURLError:
        usable = False
    if not usable:
        raise _bad(
            flag,
            redact(text),  # a password in the URL stays out of the message
            "an http(s) base URL such as http://localhost:8000/v1 (vLLM) or "
            "http://localhost:11434/v1 (Ollama)",
        )
    return text


def _checked(flag: str, raw: Any, problem: Callable[[str], str | None]) -> str:
    value = str(raw).strip()
    why = problem(value)
    if why:
        raise pytest.UsageError(f"--openenv-{flag}={raw!r} is invalid: {why}")
    return value


def _id_prefix_problem(value: str) -> str | None:
    if not ID_PREFIX.fullmatch(value):
        return (
            "expected letters, digits, '.', '_' or '-' (no ':', '/' or spaces: the id is part "
            "of a pytest node id and of file names), e.g. run-2024-06"
        )
    return None


def _id_prefix(flag: str, raw: Any) -> str:
    return _checked(flag, raw, _id_prefix_problem)


def _hub_repo(flag: str, raw: Any) -> str:
    from .dataset.hub import repo_id_problem

    return _checked(flag, raw, repo_id_problem)


def _hub_license(flag: str, raw: Any) -> str:
    from .dataset.hub import license_problem

    return _checked(flag, raw, license_problem)


@dataclass(frozen=True)
class Option:
    flag: str
    help: str
    convert: Callable[[str, Any], Any] = _text
    default: Any = None
    metavar: str | None = None
    is_flag: bool = False
    #: may be given several times; the CLI values (or the ini's whitespace-separated list)
    #: reach ``convert`` as one list
    repeat: bool = False

    @property
    def dest(self) -> str:
        return "openenv_" + self.flag.replace("-", "_")


OPTIONS: list[Option] = [
    Option(
        "env",
        "env as family:variant, e.g. openspiel:tic_tac_toe (plugin is inert without it)",
        metavar="SPEC",
    ),
    Option(
        "n",
        f"episodes per episode test (default 10; at most {MAX_ITEMS:,} x repeats)",
        _item_count,
        10,
        "N",
    ),
    Option("seed", "base seed; episode i gets seed S+i (default 0)", _int, 0, "S"),
    Option(
        "id-prefix",
        "prefix of every episode id: P-ep-000000 (tell runs apart when datasets are merged)",
        _id_prefix,
        None,
        "P",
    ),
    Option(
        "env-config",
        "env options as a JSON object (opponent, game params, dataset config)",
        _json_object,
        None,
        "JSON",
    ),
    Option(
        "server",
        "deployed OpenEnv server URL (HF Space, container, uvicorn); repeat it for several: "
        "each episode goes to the one with the fewest in flight, and one that fails leaves "
        "rotation for a cool-down (default: embedded engine)",
        _server_urls,
        None,
        "URL",
        repeat=True,
    ),
    Option(
        "policy",
        "scripted, random, openai, anthropic, or pkg.module:callable (default scripted; "
        "openai when --openenv-llm-endpoint is given)",
        _text,
        None,
        "P",
    ),
    Option(
        "system-prompt",
        "system prompt for the agent (default: the family's; '' sends no system message)",
        _text,
        None,
        "TEXT",
    ),
    Option(
        "max-turns",
        "policy turns per episode before it counts as failed (default 10, or more when the "
        "env's family knows a whole episode needs more: e.g. 21 for openspiel:connect_four)",
        _positive_int,
        None,
        "N",
    ),
    Option("output", "output folder (default openenv-results under rootdir)", _text, None, "DIR"),
    Option(
        "resume",
        "skip episodes already in results.jsonl (reported as skipped)",
        _flag,
        False,
        is_flag=True,
    ),
    Option(
        "min-reward",
        "an episode passes iff reward >= R (default: the family's verdict)",
        _float,
        None,
        "R",
    ),
    # -- evaluation: gates, repeats, baseline (report/gates.py, report/passk.py) --
    Option(
        "min-pass-rate",
        "gate: the session fails iff the pass rate is below F (episode failures alone then "
        "do not fail it)",
        _fraction,
        None,
        "F",
    ),
    Option("min-mean-reward", "gate: the session fails iff mean reward < R", _float, None, "R"),
    Option(
        "gate-confidence",
        "gate on the lower bound of the C confidence interval instead of the point estimate; "
        "also the level of the --openenv-baseline test (default 0.95 there)",
        _confidence,
        None,
        "C",
    ),
    Option(
        "repeats",
        "run each seed K times (ids ep-000000-r0 ...); report pass@1, pass@k, pass^k",
        _item_count,
        1,
        "K",
    ),
    Option(
        "gate-metric",
        "what the pass-rate gate reads: pass@1, pass@k or pass^k (default pass@1)",
        _gate_metric,
        "pass@1",
        "M",
    ),
    Option(
        "baseline",
        "earlier summary.json or output folder; fail only on a significant pass-rate drop",
        _text,
        None,
        "PATH",
    ),
    # -- LLM policies (policies/llm.py, cache.py; concurrency in prefetch.py) --
    Option("model", "model id for LLM policies (openai, anthropic)", _text, None, "M"),
    Option(
        "llm-endpoint",
        "any OpenAI-compatible base URL (vLLM, TGI, Ollama, ...); implies --openenv-policy=openai",
        _http_url,
        None,
        "URL",
    ),
    Option("temperature", "sampling temperature (default 0.2)", _non_negative_float, 0.2, "T"),
    Option("max-tokens", "max tokens per model reply (default 256)", _positive_int, 256, "N"),
    Option(
        "timeout",
        "wall-clock limit per episode in seconds; over it the item errors (default none: "
        "each model request is still bounded by --openenv-request-timeout, each turn by it "
        "x (1 + retries), each episode by that x --openenv-max-turns)",
        _positive_float,
        None,
        "SEC",
    ),
    Option(
        "request-timeout",
        f"seconds one model request may take, its answer's bytes included, before the SDK "
        f"retries it (default {DEFAULT_REQUEST_TIMEOUT:g}); with the retries and "
        "--openenv-max-turns it bounds an episode that has no --openenv-timeout",
        _positive_float,
        DEFAULT_REQUEST_TIMEOUT,
        "SEC",
    ),
    Option(
        "max-retries",
        "transport retries per model call on 429, 5xx, connection errors (default: the SDK's)",
        _non_negative_int,
        None,
        "K",
    ),
    Option(
        "concurrency",
        f"episodes in flight per pytest process (1..{MAX_CONCURRENCY}); items are still "
        "reported in order; with -n W up to W x C in flight; auto: start at "
        f"{AUTO_START}, grow while latency holds, halve on 429/CAPACITY_REACHED/timeouts, "
        f"ceiling {AUTO_CEILING} (default 1)",
        _concurrency,
        1,
        "C",
    ),
    Option(
        "cache",
        "response cache folder for LLM policies: hit = reuse, miss = call and store",
        _text,
        None,
        "DIR",
    ),
    Option(
        "replay",
        "with --openenv-cache: a cache miss is an episode error, never a network call",
        _flag,
        False,
        is_flag=True,
    ),
    # -- publishing (dataset/hub.py, dataset/card.py) --
    Option(
        "push-to-hub",
        "after the run, upload the output folder as the Hub dataset repo REPO (owner/name); "
        "token from HF_TOKEN or `hf auth login`",
        _hub_repo,
        None,
        "REPO",
    ),
    Option(
        "private",
        "with --openenv-push-to-hub: create the dataset repo private",
        _flag,
        False,
        is_flag=True,
    ),
    Option(
        "commit-message",
        "with --openenv-push-to-hub: the commit message (default: episodes, env, pass rate)",
        _text,
        None,
        "MSG",
    ),
    Option(
        "tool-arguments",
        "how the written messages carry assistant tool_calls[].function.arguments: string "
        "(default; a JSON string, OpenAI's wire format, what DeepSeek-style chat templates "
        "concatenate as text) or object (the parsed JSON object, null for a refused call: "
        "for Qwen2.5 / Llama-3.1 style templates that apply `tojson` to the arguments and "
        "would otherwise encode the string twice)",
        _one_of(*TOOL_ARGUMENT_FORMS),
        TOOL_ARGUMENT_FORMS[0],
        "FORM",
    ),
    Option(
        "license",
        "license id for the dataset card, e.g. mit or cc-by-4.0 (default: none stated)",
        _hub_license,
        None,
        "ID",
    ),
]


def register(parser: pytest.Parser) -> None:
    group = parser.getgroup("openenv", "agent episodes in OpenEnv environments")
    for opt in OPTIONS:
        flag = f"--openenv-{opt.flag}"
        if opt.is_flag:
            group.addoption(flag, action="store_true", default=None, dest=opt.dest, help=opt.help)
            parser.addini(opt.dest, opt.help, type="bool", default=False)
        elif opt.repeat:
            group.addoption(
                flag,
                action="append",
                default=None,
                dest=opt.dest,
                metavar=opt.metavar,
                help=opt.help,
            )
            parser.addini(opt.dest, opt.help, type="args", default=[])
        else:
            group.addoption(
                flag,
                action="store",
                default=None,
                dest=opt.dest,
                metavar=opt.metavar,
                help=opt.help,
            )
            parser.addini(opt.dest, opt.help, default=None)


def _ini_value(config: pytest.Config, opt: Option) -> Any:
    try:
        return config.getini(opt.dest)
    except TypeError:
        # pytest 9's native [tool.pytest] table keeps TOML types (openenv_n = 5), which
        # getini refuses for keys registered as strings: read them as their text
        return _toml_as_text(config, opt)
    except ValueError as exc:
        # pytest 9.0 lets a bad ini bool escape as an INTERNALERROR; say which key is wrong.
        raise pytest.UsageError(
            f"ini option {opt.dest}: {exc}; expected true or false (also yes/no, on/off, 1/0)"
        ) from None


def _toml_as_text(config: pytest.Config, opt: Option) -> Any:
    entry = getattr(config, "_inicfg", {}).get(opt.dest)
    if entry is None:  # a pytest that keeps its config elsewhere: say what does work
        raise pytest.UsageError(
            f"ini option {opt.dest}: this pytest accepts it only as a TOML string, "
            f'e.g. {opt.dest} = "..."'
        )
    value = getattr(entry, "value", entry)
    if isinstance(value, list):
        return [_scalar_text(item) for item in value] if opt.repeat else _scalar_text(value)
    if opt.is_flag:
        return value if isinstance(value, bool) else _scalar_text(value)
    return _scalar_text(value)


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):  # openenv_env_config = { size = 5 }: its JSON
        import json

        return json.dumps(value)
    return str(value)


def raw_values(config: pytest.Config) -> dict[str, Any]:
    """Option values after CLI-over-ini precedence, converted and checked."""
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        raw = config.getoption(opt.dest, None)
        if raw is None:
            raw = _ini_value(config, opt)
            if raw in (None, "", []) or (opt.is_flag and raw is False):
                raw = None
        if raw is not None:
            _refuse_undecodable(opt, raw)
        values[opt.flag] = opt.default if raw is None else opt.convert(opt.flag, raw)
    return values


def _refuse_undecodable(opt: Option, raw: Any) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates; files must hold UTF-8."""
    for value in raw if isinstance(raw, list) else [raw]:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                raise pytest.UsageError(
                    f"--openenv-{opt.flag}={shown!r} is invalid: it is not valid UTF-8 "
                    "(check the shell's or the ini file's encoding)"
                ) from None


@dataclass(frozen=True)
class Settings:
    """The run configuration shared by controller and workers."""

    env: str | None
    n: int
    seed: int
    env_config: dict[str, Any]
    policy: str
    system_prompt: str | None
    #: None: the family's default (``EnvFamily.default_max_turns``)
    max_turns: int | None
    output: Path
    resume: bool
    min_reward: float | None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        values = raw_values(config)
        too_many = check_item_count(values["n"], values["repeats"], f"--openenv-n={values['n']}")
        if too_many:
            raise pytest.UsageError(too_many)
        output = values["output"]
        folder = Path(output) if output else Path(config.rootpath) / "openenv-results"
        if not folder.is_absolute():
            folder = Path(config.invocation_params.dir) / folder
        return cls(
            env=values["env"],
            n=values["n"],
            seed=values["seed"],
            env_config=values["env-config"] or {},
            policy=_default_policy(values),
            system_prompt=values["system-prompt"],
            max_turns=values["max-turns"],
            output=folder,
            resume=bool(values["resume"]),
            min_reward=values["min-reward"],
            extra=values,
        )

    def public(self) -> dict[str, Any]:
        """For metadata.json: plain values, never secrets (none are ever options)."""
        return {
            "env": self.env,
            "n": self.n,
            "seed": self.seed,
            "env_config": self.env_config,
            "policy": self.policy,
            "system_prompt": self.system_prompt,
            "max_turns": self.max_turns,
            "output": str(self.output),
            "resume": self.resume,
            "min_reward": self.min_reward,
            "tool_arguments": self.extra.get("tool-arguments") or TOOL_ARGUMENT_FORMS[0],
            "servers": self.public_servers(),
            "llm": self.public_llm(),
        }

    def public_llm(self) -> dict[str, Any]:
        """Model, endpoint (without credentials), sampling, cache: what an LLM run used."""
        from .policies.llm import public_llm_settings

        return public_llm_settings(self.extra)

    def public_servers(self) -> list[str]:
        """``--openenv-server`` URLs without their credentials."""
        from .envs.endpoints import redact

        return [redact(url) for url in self.extra.get("server") or ()]


def _default_policy(values: dict[str, Any]) -> str:
    """No policy named: ``--openenv-llm-endpoint`` means the OpenAI-compatible client."""
    if values["policy"] is None:
        values["policy"] = "openai" if values.get("llm-endpoint") else "scripted"
    return str(values["policy"])


def check_output_writable(folder: Path) -> None:
    """Fail before any episode if the output folder cannot be created or written.

    Creates nothing: the plugin writes nothing until an episode reports.
    """
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise pytest.UsageError(
            f"--openenv-output={str(folder)!r} is not usable: {probe} exists and is not a "
            "directory; pass a folder path that is writable"
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise pytest.UsageError(
            f"--openenv-output={str(folder)!r} is not writable ({probe} denies write access); "
            "pass a folder path that is writable"
        )
