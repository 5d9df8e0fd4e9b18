"""``--openenv-prices``: what each model's tokens cost, as the user keeps it.

No price is built in: prices change, so a table shipped here would be wrong by the
time it is read. The user keeps a JSON object (a file, inline JSON, or an ini/TOML
table) mapping each model id, exactly as ``--openenv-model`` names it, to USD per
million tokens::

    {"gpt-4o-mini": {"input": 0.15, "output": 0.60},
     "my-local-model": {"input": 0, "output": 0}}

An episode's cost is ``prompt_tokens x input / 1e6 + completion_tokens x output / 1e6``.
An episode that used no tokens costs 0 whatever its model; one whose model has no
price has no cost (``None``), and the summary says which models were not priced.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

#: tokens per price unit: prices are USD per million tokens
PER = 1_000_000
PRICE_KEYS = ("input", "output")
EXAMPLE = '{"gpt-4o-mini": {"input": 0.15, "output": 0.6}}'

#: USD per million tokens past which a price is a typo: a dollar a token, and with at most
#: ``MAX_ANSWER_TOKENS`` per answer every cost stays a finite float
MAX_PRICE = 1e6
#: how a parsed value that is no price table is named in the refusal
JSON_KINDS = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}
JSON_KINDS[type(None)] = "null"
JSON_KINDS[dict] = "empty object"

#: model id -> {"input": USD per 1M prompt tokens, "output": USD per 1M completion tokens}
PriceTable = dict[str, dict[str, float]]


def _refuse(flag: str, raw: Any, why: str) -> pytest.UsageError:
    shown = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    return pytest.UsageError(
        f"--openenv-{flag}={shown!r} is invalid: {why}; expected a JSON file or a JSON object "
        f"mapping each model to USD per million tokens, e.g. {EXAMPLE}"
    )


def price_table(flag: str, raw: Any) -> PriceTable:
    """The table from a dict (TOML), inline JSON text, or the path of a JSON file."""
    data: Any = raw
    if not isinstance(raw, dict):
        text = str(raw).strip()
        if text.startswith(("{", "[")):
            try:
                data = json.loads(text)
            except ValueError as exc:
                raise _refuse(flag, raw, f"not valid JSON ({exc})") from None
        else:
            path = Path(text).expanduser()
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise _refuse(flag, raw, not_a_file(text, path)) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise _refuse(flag, raw, f"cannot read {path} ({exc})") from None
            except ValueError as exc:
                raise _refuse(flag, raw, f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not data:
        kind = JSON_KINDS.get(type(data), type(data).__name__)
        raise _refuse(flag, raw, f"a JSON {kind}, not a non-empty JSON object")
    table: PriceTable = {}
    for model, price in data.items():
        if not isinstance(price, dict) or set(price) - set(PRICE_KEYS) or not price:
            raise _refuse(
                flag, raw, f"the price of {model!r} must be an object with 'input' and 'output'"
            )
        entry = {}
        for key in PRICE_KEYS:
            value = price.get(key)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (0 <= value <= MAX_PRICE)
            ):
                raise _refuse(
                    flag,
                    raw,
                    f"{model!r}: {key!r} must be a number >= 0 and at most {MAX_PRICE:g} (USD "
                    "per 1M tokens)",
                )
            entry[key] = float(value)
        table[str(model)] = entry
    return table


def not_a_file(text: str, path: Path) -> str:
    """No such file: a value that reads as JSON is a table of the wrong shape, not a path."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return f"{path} does not exist"
    kind = JSON_KINDS.get(type(parsed), type(parsed).__name__)
    return f"a JSON {kind}, not a non-empty JSON object (and no file of that name exists)"


def cost_usd(
    prices: PriceTable | None, model: str | None, prompt_tokens: int, completion_tokens: int
) -> float | None:
    """What these tokens cost under ``prices``; None when the model has no price."""
    if not prompt_tokens and not completion_tokens:
        return 0.0
    price = prices.get(model) if prices is not None and model is not None else None
    if price is None:
        return None
    return (prompt_tokens * price["input"] + completion_tokens * price["output"]) / PER
