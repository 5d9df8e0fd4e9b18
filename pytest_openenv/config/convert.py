"""Converters for option values: each takes the flag and a raw value (CLI text, ini text,
or a TOML scalar) and returns the checked value or raises ``pytest.UsageError`` naming the
option and what would be valid.

``KIND`` says which ini type each converter reads, so the key is declared with its real
type where pytest supports one (``config/ini.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import pytest

from .ini import IniKind
from .prices import price_table

#: ``--openenv-concurrency auto``
AUTO = "auto"
#: episodes in flight when an auto run starts
AUTO_START = 4
#: most episodes in flight an auto run reaches (per pytest process)
AUTO_CEILING = 64
#: episodes queued or running per unit of concurrency (at most C of them running): a
#: worker's run-ahead window, and the queue length the controller's scheduler keeps
WINDOW_FACTOR = 4


def concurrency_ceiling(value: Any) -> int:
    """Most episodes a process may keep in flight for a ``--openenv-concurrency`` value."""
    if value == AUTO:
        return AUTO_CEILING
    return int(value or 1)


#: how the written messages carry tool-call arguments (``--openenv-tool-arguments``)
TOOL_ARGUMENT_FORMS = ("string", "object")
#: whose wording the prompts follow (``--openenv-prompt-style``); first = default
PROMPT_STYLES = ("native", "openenv")
#: ``--openenv-train-on``: which episodes fill results.jsonl; first = default
TRAIN_ON = ("verdict", "test")
#: ``--openenv-llm-client``: what carries an OpenAI-compatible request (``policies/llm/``)
LLM_CLIENTS = ("auto", "http", "sdk")
#: ``--openenv-model-dtype``: the weights' type under ``--openenv-policy=transformers``
MODEL_DTYPES = ("auto", "float32", "bfloat16", "float16")
#: ``--openenv-judge-at``: when an episode is judged (``envs/verdict.py``)
JUDGE_AT = ("done", "turn-limit")
#: an episode id prefix: it sits in node ids (``test[P-ep-000000]``) and dataset rows
ID_PREFIX = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,63}")
_LICENSE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")


def bad_value(flag: str, value: Any, expected: str) -> pytest.UsageError:
    return pytest.UsageError(f"--openenv-{flag}={value!r} is invalid: expected {expected}")


def positive_int(flag: str, raw: Any) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise bad_value(flag, raw, "a positive integer, e.g. 10") from None
    if value <= 0:
        raise bad_value(flag, raw, "a positive integer (> 0), e.g. 10")
    return value


#: most items per episode test (n x repeats): a pytest item costs ~4 KB in the controller
#: and again in every xdist worker (~0.44 GB and ~10 s of collection per 100k, measured)
MAX_ITEMS = 100_000
SPLIT_HINT = (
    "split a bigger collection into runs of at most {limit:,} episodes, each with its own "
    "--openenv-seed (0, {limit}, ...) and --openenv-id-prefix (or --openenv-output)"
)


def item_count(flag: str, raw: Any) -> int:
    """A positive integer no bigger than MAX_ITEMS: checked before any item is built."""
    value = positive_int(flag, raw)
    if value > MAX_ITEMS:
        raise bad_value(
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


def concurrency(flag: str, raw: Any) -> int | str:
    """``auto`` or 1..MAX_CONCURRENCY: a bigger number would start that many threads."""
    text = str(raw).strip().lower()
    if text == AUTO:
        return AUTO
    expected = f"a positive integer 1..{MAX_CONCURRENCY} or auto, e.g. 16"
    try:
        value = int(text)
    except ValueError:
        raise bad_value(flag, raw, expected) from None
    if not 1 <= value <= MAX_CONCURRENCY:
        raise bad_value(flag, raw, expected)
    return value


def integer(flag: str, raw: Any) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise bad_value(flag, raw, "an integer, e.g. 0") from None


#: the seeds a row can carry: ``datasets``/pyarrow read a JSON integer past int64 as a
#: float64, where neighbouring seeds become one value
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


def seed(flag: str, raw: Any) -> int:
    """An integer seed within int64 (``check_seed_range`` checks the last episode's too)."""
    value = integer(flag, raw)
    if not SEED_MIN <= value <= SEED_MAX:
        raise bad_value(flag, raw, f"an integer seed from {SEED_MIN} to {SEED_MAX} (int64)")
    return value


def check_seed_range(base: int, n: int, where: str) -> str | None:
    """Why seeds ``base`` .. ``base + n - 1`` do not all fit int64, or None."""
    last = base + n - 1
    if base >= SEED_MIN and last <= SEED_MAX:
        return None
    return (
        f"{where}: episode i gets seed {base} + i, and the seeds must fit int64 "
        f"({SEED_MIN} .. {SEED_MAX}), which datasets reads as integers; "
        f"the last episode's seed would be {last}. Use a base seed up to {SEED_MAX - n + 1}"
    )


#: longest name one path component may have (NAME_MAX on Linux and macOS filesystems)
NAME_MAX = 255


def path_text(flag: str, raw: Any) -> str:
    """A file or folder path, ``~`` expanded; a name the filesystem cannot hold is refused
    here, not met as an OSError in the middle of the run."""
    value = str(raw)
    if "\x00" in value:
        raise bad_value(flag, raw, "a path (it holds a NUL character)")
    expanded = os.path.expanduser(value)
    for part in expanded.split(os.sep):
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            shown = part[:40] + "..."
            raise pytest.UsageError(
                f"--openenv-{flag}: the path component {shown!r} is {size} bytes long; "
                f"a file or folder name may have at most {NAME_MAX} bytes. Pass a shorter path"
            )
    return expanded


#: --openenv-inspect-log given alone: this folder inside the output folder
INSPECT_LOGS_DEFAULT = "inspect-logs"
#: what an ini file may say for the same (a folder path otherwise)
_ALONE_WORDS = ("true", "yes", "on", "1")


def inspect_log_dir(flag: str, raw: Any) -> str:
    """``""``: the default folder inside the output folder; else the folder given."""
    value = str(raw).strip()
    if value == INSPECT_LOGS_DEFAULT_FLAG or value.lower() in _ALONE_WORDS:
        return ""
    if value.lower() in ("false", "no", "off", "0"):
        raise bad_value(flag, raw, "a folder for the logs (leave the option out to write none)")
    return path_text(flag, value)


#: the value argparse gives --openenv-inspect-log written alone (no folder)
INSPECT_LOGS_DEFAULT_FLAG = ""


def number(flag: str, raw: Any) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise bad_value(flag, raw, "a number, e.g. 0.5") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise bad_value(flag, raw, "a finite number")
    return value


def fraction(flag: str, raw: Any) -> float:
    value = number(flag, raw)
    if not 0.0 <= value <= 1.0:
        raise bad_value(flag, raw, "a fraction between 0 and 1 inclusive, e.g. 0.8")
    return value


def confidence(flag: str, raw: Any) -> float:
    value = number(flag, raw)
    if not 0.0 < value < 1.0:
        raise bad_value(flag, raw, "a confidence level strictly between 0 and 1, e.g. 0.95")
    return value


def one_of(*choices: str) -> Callable[[str, Any], str]:
    """A converter that accepts exactly one of ``choices``."""

    def convert(flag: str, raw: Any) -> str:
        value = str(raw).strip()
        if value not in choices:
            raise bad_value(flag, raw, f"one of {', '.join(choices)}")
        return value

    return convert


GATE_METRICS = ("pass@1", "pass@k", "pass^k")
gate_metric = one_of(*GATE_METRICS)


def server_urls(flag: str, raw: Any) -> tuple[str, ...]:
    """Repeatable server URLs (CLI list or ini list); credentials stay only in memory."""
    from ..errors import ServerURLError
    from ..util.endpoints import ServerURL

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


def json_object(flag: str, raw: Any) -> dict[str, Any]:
    from ..util.jsonlimits import loads_bounded

    if isinstance(raw, dict):
        return raw
    try:
        value = loads_bounded(str(raw))
    except ValueError as exc:
        raise bad_value(
            flag, raw, f'a JSON object such as \'{{"opponent": "random"}}\' ({exc})'
        ) from None
    if not isinstance(value, dict):
        raise bad_value(flag, raw, 'a JSON object such as \'{"opponent": "random"}\'')
    return value


def folders(flag: str, raw: Any) -> tuple[str, ...]:
    """Repeatable existing folders, as absolute paths (``~`` expanded); one that is not a
    folder is refused now, not met when the first episode starts."""
    values = [raw] if isinstance(raw, str) else [str(value) for value in raw]
    found: list[str] = []
    for value in values:
        path = os.path.abspath(path_text(flag, value.strip()))
        if not value.strip() or not os.path.isdir(path):
            raise bad_value(flag, value, "an existing folder")
        if path not in found:
            found.append(path)
    return tuple(found)


def text(flag: str, raw: Any) -> str:
    return str(raw)


def model_or_path(flag: str, raw: Any) -> str | None:
    """A model id or a local path, as given (blank: not set); checked where it is read."""
    value = str(raw).strip()
    return value or None


def boolean(flag: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise bad_value(flag, raw, "true or false")


def non_negative_int(flag: str, raw: Any) -> int:
    value = integer(flag, raw)
    if value < 0:
        raise bad_value(flag, raw, "an integer >= 0, e.g. 2")
    return value


def positive_seconds(flag: str, raw: Any) -> float:
    value = number(flag, raw)
    if value <= 0:
        raise bad_value(flag, raw, "a number of seconds > 0, e.g. 60")
    return value


def non_negative_number(flag: str, raw: Any) -> float:
    value = number(flag, raw)
    if value < 0:
        raise bad_value(flag, raw, "a number >= 0, e.g. 0.2")
    return value


def http_url(flag: str, raw: Any) -> str:
    from ..errors import ServerURLError
    from ..util.endpoints import ServerURL, redact

    text = str(raw).strip()
    try:  # the host and port must parse too: "http://[::1" would fail in the SDK later
        usable = text.startswith(("http://", "https://")) and bool(ServerURL.parse(text))
    except ServerURLError:
        usable = False
    if not usable:
        raise bad_value(
            flag,
            redact(text),  # a password in the URL stays out of the message
            "an http(s) base URL such as http://localhost:8000/v1 (vLLM) or "
            "http://localhost:11434/v1 (Ollama)",
        )
    return text


def checked(flag: str, raw: Any, problem: Callable[[str], str | None]) -> str:
    value = str(raw).strip()
    why = problem(value)
    if why:
        raise pytest.UsageError(f"--openenv-{flag}={raw!r} is invalid: {why}")
    return value


def id_prefix_problem(value: str) -> str | None:
    if not ID_PREFIX.fullmatch(value):
        return (
            "expected letters, digits, '.', '_' or '-' (no ':', '/' or spaces: the id is part "
            "of a pytest node id and of file names), e.g. run-2024-06"
        )
    return None


def id_prefix(flag: str, raw: Any) -> str:
    return checked(flag, raw, id_prefix_problem)


def repo_id_problem(value: str) -> str | None:
    """Why ``value`` is not a Hub dataset repo id ``owner/name`` (huggingface_hub decides)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if value.count("/") != 1:
        return "expected owner/name (letters, digits, '-', '_', '.'), e.g. alice/ttt-episodes"
    try:
        validate_repo_id(value)
    except HFValidationError as exc:
        return f"expected owner/name, e.g. alice/ttt-episodes: {exc}"
    return None


def license_problem(value: str) -> str | None:
    if _LICENSE.match(value):
        return None
    return "expected a Hub license id in lower case, e.g. mit, apache-2.0, cc-by-4.0 or other"


def hub_repo(flag: str, raw: Any) -> str:
    return checked(flag, raw, repo_id_problem)


def hub_license(flag: str, raw: Any) -> str:
    return checked(flag, raw, license_problem)


#: ``--openenv-progress``: seconds between plain status lines when stdout is not a terminal
DEFAULT_PROGRESS_SECONDS = 30.0
OFF = "off"


def progress_seconds(flag: str, raw: Any) -> float | None:
    """Seconds > 0 between plain status lines, or None for ``off`` (no status line at all)."""
    text = str(raw).strip().lower()
    if text in (OFF, "false", "no", "0"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise bad_value(flag, raw, "a number of seconds > 0, e.g. 30, or off") from None
    if not 0 < value < float("inf"):
        raise bad_value(flag, raw, "a number of seconds > 0, e.g. 30, or off")
    return value


#: ``--openenv-failure-reports``: episode failures shown in full at the end of a run
DEFAULT_FAILURE_REPORTS = 3
ALL = "all"


def failure_reports(flag: str, raw: Any) -> int | None:
    """How many episode failures get their full report; None (``all``): every one."""
    text = str(raw).strip().lower()
    if text == ALL:
        return None
    try:
        value = int(text)
    except ValueError:
        raise bad_value(flag, raw, "an integer >= 0, e.g. 3, or all") from None
    if value < 0:
        raise bad_value(flag, raw, "an integer >= 0, e.g. 3, or all")
    return value


def names(flag: str, raw: Any) -> tuple[str, ...]:
    """A repeatable name (``--openenv-model``, ``--openenv-policy``): each once, in order.

    The command line gives one value per flag; an ini key may hold several, one per
    line or separated by spaces (``args``: quote a value with spaces in it).
    """
    values = [raw] if isinstance(raw, str) else [str(value) for value in raw]
    found: list[str] = []
    for given in values:
        value = given.strip()
        if not value:
            # shown as given: an echoed '' would hide that spaces were passed
            raise pytest.UsageError(
                f"--openenv-{flag}={given!r} is invalid: the value is blank; expected a "
                "non-empty name"
            )
        if value in found:
            raise pytest.UsageError(
                f"--openenv-{flag}={value!r} is listed twice: list each one once (every "
                "one plays the same episodes, and a second copy would only repeat them)"
            )
        found.append(value)
    return tuple(found)


def positive_number(flag: str, raw: Any) -> float:
    value = number(flag, raw)
    if value <= 0:
        raise bad_value(flag, raw, "a number > 0, e.g. 2.5")
    return value


#: the ini type each converter reads (``config/ini.py``); text and JSON stay strings
KIND: dict[Callable[[str, Any], Any], IniKind] = {
    positive_int: "int",
    item_count: "int",
    integer: "int",
    seed: "int",
    non_negative_int: "int",
    number: "float",
    fraction: "float",
    confidence: "float",
    positive_seconds: "float",
    non_negative_number: "float",
    boolean: "bool",
    server_urls: "list",
    names: "list",
    folders: "list",
    positive_number: "float",
    concurrency: "int-or-auto",
    json_object: "table",
    price_table: "table",
}
