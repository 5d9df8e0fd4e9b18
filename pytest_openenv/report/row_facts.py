"""Facts of an output folder's rows that the per-episode figures do not hold.

What decided each verdict (``extra.judged_by`` / ``verdict_rule``: the env's own word, or a
threshold, and whether the plugin guessed it), and how far the seed reaches: rows a server
ran without honouring the seed (``extra.seeded: false``) and how many distinct starting
states the episodes had (identical first prompts are one problem, not several).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..envs.verdict import BASIS_OUTCOME_FIELD, ENV_BASES, GUESS_NOTE

ROW_FILES = ("results.jsonl", "failures.jsonl")


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """Every row of an output folder (results.jsonl, then failures.jsonl), torn lines left out."""
    rows: list[dict[str, Any]] = []
    for name in ROW_FILES:
        path = folder / name
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    row = json.loads(line)
                except ValueError:  # a torn last line of a killed run: not a row
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    return rows


def general_rule(basis: str, text: str) -> str:
    """A row's rule without its episode's values: ``the server's metadata.status='win' (win)``
    is the rule ``the server's metadata.status``."""
    text = text.removesuffix(f" ({GUESS_NOTE})")
    return text.split("=", 1)[0] if basis == BASIS_OUTCOME_FIELD else text


def first_prompt(row: dict[str, Any]) -> str | None:
    for message in row.get("messages") or ():
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    return None


#: what one row tells of the folder's facts: (judged by, verdict rule, seeded flag, first
#: prompt's digest); None for a row that errored before a verdict
RowFact = tuple[str, str, Any, bytes | None] | None


def fact_of(row: dict[str, Any]) -> RowFact:
    """What ``row_facts`` reads of one row (kept per row while a run writes its rows)."""
    extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
    basis = str(extra.get("judged_by") or "")
    if not basis:  # errored before a verdict
        return None
    flag = extra.get("seeded")
    prompt = first_prompt(row)
    # a digest stands for the prompt: only whether two are the same is counted
    digest = None if prompt is None else hashlib.blake2b(prompt.encode(), digest_size=16).digest()
    return basis, str(extra.get("verdict_rule") or ""), flag, digest


def row_facts(folder: Path, facts: Iterable[RowFact] | None = None) -> dict[str, Any]:
    """``verdict_rules`` and ``seeding`` of the folder's played rows (errored ones left out);
    ``facts``: each row's ``fact_of``, in the files' order, instead of reading the files."""
    rules: dict[str, dict[str, Any]] = {}
    seeded = {"seeded": 0, "unseeded": 0, "unknown": 0}
    starts: dict[str, set[bytes]] = {"all": set(), "unseeded": set()}
    played = 0
    for fact in facts if facts is not None else (fact_of(row) for row in read_rows(folder)):
        if fact is None:
            continue
        basis, text, flag, prompt = fact
        played += 1
        entry = rules.setdefault(
            basis,
            {
                "episodes": 0,
                "rule": general_rule(basis, text),
                "guessed": basis not in ENV_BASES and text.endswith(f" ({GUESS_NOTE})"),
            },
        )
        entry["episodes"] += 1
        key = "seeded" if flag is True else "unseeded" if flag is False else "unknown"
        seeded[key] += 1
        if prompt is not None:
            starts["all"].add(prompt)
            if flag is False:
                starts["unseeded"].add(prompt)
    return {
        "verdict_rules": rules,
        "seeding": {
            "episodes": played,
            "seeded": seeded["seeded"],
            "unseeded": seeded["unseeded"],
            "unknown": seeded["unknown"],
            # episodes that began from the same first prompt are one starting state
            "distinct_starting_states": len(starts["all"]),
            "unseeded_distinct_starting_states": len(starts["unseeded"]),
        },
    }
