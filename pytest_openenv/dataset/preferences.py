"""``preferences.jsonl``: preference pairs for TRL's ``DPOTrainer`` (controller side).

A run with repeats (``--openenv-repeats K``) or several models on the same seeds plays
each seed more than once; where one of those episodes passed and another failed, the
two are a preference pair in TRL's conversational format: ``prompt`` (the messages both
share, up to the first assistant turn where they differ), ``chosen`` (the rest of the
passing episode) and ``rejected`` (the rest of the failing one), each a list of OpenAI
chat messages with their tool calls and tool results, in the folder's argument form.

Which episodes take part: *chosen* is an episode in ``results.jsonl`` (its test passed
and the env's verdict passed: the training split's rule); *rejected* an episode whose
verdict failed (``failures.jsonl``, outcome ``failed``). Errored episodes (a server
down, a timeout) say nothing about the agent and are left out, and so are those whose
test and verdict disagree. Episodes pair within one (test function, env, seed).

How many pairs per seed: with ``p`` passing and ``f`` failing episodes, ``max(p, f)``
pairs, the j-th pairing passing episode ``j mod p`` with failing episode ``j mod f``
(each in episode-id order), so every episode of the seed is in at least one pair and no
pair repeats; ``p x f`` would weight a seed by the square of its repeats. A pair whose
episodes share no assistant-turn boundary (different prompts) or where one has nothing
after the shared part is skipped: there is no choice between them to learn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..util.atomic import replacing
from ..util.secrets import KnownSecrets
from .played import PlayedEpisodes, function_of, is_error
from .writer import PREFERENCES

PREFERENCE_SCHEMA_VERSION = 1


def _seed_key(row: dict[str, Any]) -> tuple[str, str, int] | None:
    """Where a row pairs: (test function, env, seed); None for rows that never pair."""
    if is_error(row) or not isinstance(row.get("seed"), int):
        return None
    return (function_of(str(row.get("test", ""))), str(row.get("env", "")), row["seed"])


def is_chosen(row: dict[str, Any]) -> bool:
    return bool(row.get("passed")) and bool((row.get("verify_metrics") or {}).get("verdict"))


def is_rejected(row: dict[str, Any]) -> bool:
    verify = row.get("verify_metrics") or {}
    return not verify.get("verdict") and (row.get("failure") or {}).get("outcome") == "failed"


def split_point(chosen: list[dict[str, Any]], rejected: list[dict[str, Any]]) -> int | None:
    """The index of the first assistant turn where the two conversations part.

    The messages before it are the prompt. The first differing message may be a tool
    result (an env that answered the same move differently): the prompt then ends before
    the assistant turn that made that move. None: no assistant turn to split at, or one
    conversation has nothing past the shared part, or both are the same.
    """
    if chosen == rejected:
        return None  # the same conversation judged two ways: no choice in it to learn
    shared = 0
    for a, b in zip(chosen, rejected, strict=False):
        if a != b:
            break
        shared += 1
    for split in range(shared, 0, -1):  # 0: nothing shared, so not one prompt
        if (
            split < len(chosen)
            and split < len(rejected)
            and chosen[split].get("role") == "assistant"
            and rejected[split].get("role") == "assistant"
        ):
            return split
    return None


def player(row: dict[str, Any]) -> str:
    return str(row.get("model") or row.get("policy") or "")


def pair_row(chosen: dict[str, Any], rejected: dict[str, Any]) -> dict[str, Any] | None:
    """The pair of a passing and a failing episode of one seed, or None (see split_point)."""
    good, bad = chosen.get("messages") or [], rejected.get("messages") or []
    split = split_point(good, bad)
    if split is None:
        return None
    return {
        "prompt": good[:split],
        "chosen": good[split:],
        "rejected": bad[split:],
        "tools": chosen.get("tools") or [],
        "test": function_of(str(chosen.get("test", ""))),
        "env": chosen.get("env"),
        "seed": chosen.get("seed"),
        "chosen_episode_id": chosen["episode_id"],
        "rejected_episode_id": rejected["episode_id"],
        "chosen_reward": float(chosen.get("reward") or 0.0),
        "rejected_reward": float(rejected.get("reward") or 0.0),
        "chosen_player": player(chosen),
        "rejected_player": player(rejected),
        "schema_version": PREFERENCE_SCHEMA_VERSION,
    }


def seed_pairs(rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The pairs of one seed's episodes (rows in episode-id order): ``max(p, f)`` of them."""
    passing = [row for row in rows if is_chosen(row)]
    failing = [row for row in rows if is_rejected(row)]
    if not passing or not failing:
        return
    for j in range(max(len(passing), len(failing))):
        pair = pair_row(passing[j % len(passing)], failing[j % len(failing)])
        if pair is not None:
            yield pair


def preference_pairs(folder: Path) -> Iterator[dict[str, Any]]:
    """Every pair the folder's rows give, by test, env, seed, then episode ids."""
    played = PlayedEpisodes(folder, key=_seed_key)
    for _, rows in played.each_group():
        yield from seed_pairs(rows)


def write_preferences(folder: Path, secrets: KnownSecrets | None = None) -> int:
    """Write ``folder/preferences.jsonl`` whole and at once; the number of pairs."""
    secrets = secrets or KnownSecrets()
    count = 0
    with replacing(folder / PREFERENCES) as target:
        for pair in preference_pairs(folder):
            line = json.dumps(pair, ensure_ascii=False, separators=(",", ":"))
            target.write((secrets.scrub(line) + "\n").encode("utf-8"))
            count += 1
    return count


def first_pairs(path: Path, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` pairs of a written file (for the chat-template check)."""
    pairs: list[dict[str, Any]] = []
    if not path.is_file():
        return pairs
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                pairs.append(json.loads(raw))
            if len(pairs) >= limit:
                break
    return pairs


def pair_conversations(pair: dict[str, Any]) -> list[dict[str, Any]]:
    """The two whole conversations of a pair, as rows a chat template renders."""
    prompt, tools = pair.get("prompt") or [], pair.get("tools") or []
    return [
        {"messages": prompt + (pair.get(side) or []), "tools": tools}
        for side in ("chosen", "rejected")
    ]
