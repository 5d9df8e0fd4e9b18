"""Figures as people read them: percentages, numbers, intervals and Markdown tables.

The one renderer behind the terminal summary, ``$GITHUB_STEP_SUMMARY``, the gate
verdict and the dataset card, so a pass rate reads the same wherever it appears.
Here in ``util`` because both ``report/`` and ``dataset/`` (the card) use it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

#: what a figure that could not be computed (no episode ran) shows
NOT_AVAILABLE = "n/a"


def percent(x: object) -> str:
    """``0.571`` -> ``57.1%``; None, or anything but a number (read from JSON) -> ``n/a``."""
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else NOT_AVAILABLE


def number(x: float | None) -> str:
    """Four significant digits (a threshold, a figure); None -> ``n/a``."""
    return NOT_AVAILABLE if x is None else f"{x:.4g}"


def interval(low: float | None, high: float | None) -> str:
    """A confidence interval of two rates: ``25.0% - 84.0%``."""
    return f"{percent(low)} - {percent(high)}"


def cell(text: str) -> str:
    """``text`` safe inside a GFM table cell: a pipe would end the cell, even in code."""
    return text.replace("|", "\\|")


def longest_run(text: str, char: str) -> int:
    runs = re.findall(f"{re.escape(char)}+", text)
    return max((len(run) for run in runs), default=0)


def inline_code(value: Any, *, in_table: bool = False) -> str:
    """A one-line code span showing ``value`` exactly (newlines shown as ``\\n``).

    How Markdown output (the dataset card, ``$GITHUB_STEP_SUMMARY``) shows every value a user
    supplied: a model name holding ``<a href=...>`` or a backtick fence stays text, neither a
    live link nor the start of a block that garbles what follows.
    """
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = json.dumps(text, ensure_ascii=False)[1:-1]  # escapes newlines and control chars
    text = text.replace('\\"', '"')
    fence = "`" * (longest_run(text, "`") + 1)
    if text.startswith("`") or text.endswith("`") or not text.strip():
        text = f" {text} "
    span = f"{fence}{text}{fence}"
    return cell(span) if in_table else span


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]<&|~])")


def markdown_text(text: str) -> str:
    """Prose that may hold a user's value (a gate's rule naming a model), inert in Markdown:
    the characters that start a link, tag, entity, emphasis or code are backslash-escaped."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text).replace("\n", " ")


def plain(value: object) -> str:
    """How the terminal and HTML (escaped there) show a name: as it is."""
    return str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A GFM table's lines: the header, its rule, one line per row.

    Cells are written as given: pass user text through ``cell`` first. An empty cell
    is one space (``| | |`` is a header without titles).
    """

    def line(cells: Sequence[str]) -> str:
        return "|" + "|".join(f" {text} " if text else " " for text in cells) + "|"

    return [line(header), "|" + "|".join("---" for _ in header) + "|", *map(line, rows)]


def usd(x: object) -> str:
    """A cost: ``$0.0123``; None -> ``n/a``."""
    if not isinstance(x, (int, float)):
        return NOT_AVAILABLE
    return f"${x:.4f}" if x < 100 else f"${x:,.2f}"


#: the columns of the per-model table (summary, step summary, card, report)
MODEL_COLUMNS = (
    "model",
    "passed",
    "pass rate (95% CI)",
    "mean reward",
    "tokens in / out",
    "cost",
    "time",
)


def model_row(figures: dict, name: Callable[[object], str] = plain) -> tuple[str, ...]:
    """One model's row of ``MODEL_COLUMNS`` from summary.json's ``models`` entry.

    ``name``: how the model's name is shown (``inline_code`` in Markdown)."""
    f = figures
    low, high = f.get("pass_rate_ci95") or (None, None)
    reward = f.get("mean_reward")
    stderr = f.get("mean_reward_stderr")
    shown = NOT_AVAILABLE if reward is None else f"{reward:.3f}"
    if reward is not None and stderr is not None:
        shown += f" ± {stderr:.3f}"
    return (
        name(str(f.get("name"))),
        f"{f.get('passed', 0)}/{f.get('ran', 0)}",
        f"{percent(f.get('pass_rate'))} ({interval(low, high)})",
        shown,
        f"{f.get('prompt_tokens', 0)} / {f.get('completion_tokens', 0)}",
        usd(f.get("cost_usd")),
        f"{float(f.get('episode_seconds') or 0.0):.1f}s",
    )


def comparison_line(c: dict, name: Callable[[object], str] = plain) -> str:
    """One pair's paired tests and verdict, on one line; ``name`` as in ``model_row``."""
    passing, reward = c.get("pass") or {}, c.get("reward") or {}
    verdict = c.get("verdict")
    if name is not plain:
        # the verdict again, with each name shown by ``name`` (the recorded text is plain)
        try:
            better = (passing.get("better"), reward.get("better"))
            verdict = verdict_text(
                name(c["a"]),
                name(c["b"]),
                int(c["paired_episodes"]),
                None if better[0] is None else name(better[0]),
                None if better[1] is None else name(better[1]),
                float(c["confidence"]),
            )
        except (KeyError, TypeError, ValueError):
            verdict = name(verdict)
    text = (
        f"{verdict}. pass/fail: {name(c.get('a'))} alone passed "
        f"{passing.get('only_a_passed', 0)}, {name(c.get('b'))} alone "
        f"{passing.get('only_b_passed', 0)}"
        f" ({passing.get('test')}, p = {float(passing.get('p_value', 1.0)):.3g})"
    )
    if reward.get("pairs"):
        diff = reward.get("mean_difference")
        text += (
            f"; reward: mean difference {diff:+.3f} ({reward.get('test')}, "
            f"p = {float(reward.get('p_value', 1.0)):.3g})"
        )
    return text


#: the columns of the per-group table (summary, step summary, card, report)
GROUP_COLUMNS = (
    "test",
    "env",
    "policy / model",
    "passed",
    "pass rate (95% CI)",
    "mean reward",
    "tokens in / out",
    "cost",
)


def played_by(figures: dict) -> str:
    """``expert``, or ``openai / gpt-4o-mini``: the policy and the model a group played with."""
    policy, model = figures.get("policy"), figures.get("model")
    if policy and model:
        return f"{policy} / {model}"
    return str(policy or model or figures.get("name") or NOT_AVAILABLE)


def group_columns(groups: Sequence[dict]) -> tuple[str, ...]:
    """``GROUP_COLUMNS``, with pass@k after the pass rate when a group sampled seeds k times."""
    k = max((int((g.get("passk") or {}).get("k") or 1) for g in groups), default=1)
    if k <= 1:
        return GROUP_COLUMNS
    cut = GROUP_COLUMNS.index("mean reward")
    return (*GROUP_COLUMNS[:cut], f"pass@{k}", *GROUP_COLUMNS[cut:])


def group_row(figures: dict, columns: Sequence[str] = GROUP_COLUMNS) -> tuple[str, ...]:
    """One group's row of ``columns`` from summary.json's ``groups`` entry."""
    f = figures
    low, high = f.get("pass_rate_ci95") or (None, None)
    reward = f.get("mean_reward")
    stderr = f.get("mean_reward_stderr")
    shown = NOT_AVAILABLE if reward is None else f"{reward:.3f}"
    if reward is not None and stderr is not None:
        shown += f" ± {stderr:.3f}"
    passk = f.get("passk") or {}
    cells = {
        "test": str(f.get("test") or "").rpartition("/")[2] or NOT_AVAILABLE,
        "env": str(f.get("env") or NOT_AVAILABLE),
        "policy / model": played_by(f),
        "passed": f"{f.get('passed', 0)}/{f.get('ran', 0)}",
        "pass rate (95% CI)": f"{percent(f.get('pass_rate'))} ({interval(low, high)})",
        "mean reward": shown,
        "tokens in / out": f"{f.get('prompt_tokens', 0)} / {f.get('completion_tokens', 0)}",
        "cost": usd(f.get("cost_usd")),
    }
    return tuple(
        percent(passk.get("pass@k")) if name.startswith("pass@") else cells[name]
        for name in columns
    )


#: the group table's columns that hold what a user named (test, env, policy, model)
NAMED_COLUMNS = frozenset({"test", "env", "policy / model"})


def markdown_group_row(figures: dict, columns: Sequence[str] = GROUP_COLUMNS) -> tuple[str, ...]:
    """``group_row`` for a Markdown table: the names a user supplied in code spans."""
    return tuple(
        inline_code(value, in_table=True) if name in NAMED_COLUMNS else cell(value)
        for name, value in zip(columns, group_row(figures, columns), strict=True)
    )


def confidence_level(confidence: float) -> str:
    return f"{100 * confidence:g}%"


def verdict_text(
    a: str,
    b: str,
    paired: int,
    pass_better: str | None,
    reward_better: str | None,
    confidence: float,
) -> str:
    """Which of two models did better on the episodes both played, in words."""
    if paired == 0:
        return f"{a} vs {b}: no episode played by both, nothing to compare"
    level = confidence_level(confidence)
    if pass_better is None and reward_better is None:
        return f"{a} vs {b}: no significant difference at {level} on {paired} paired episode(s)"
    winners = {name for name in (pass_better, reward_better) if name is not None}
    if len(winners) > 1:
        return (
            f"{a} vs {b}: mixed at {level}: {pass_better} passes more often, "
            f"{reward_better} earns more reward"
        )
    winner = winners.pop()
    loser = b if winner == a else a
    on = " and ".join(
        what
        for what, better in (("pass rate", pass_better), ("reward", reward_better))
        if better is not None
    )
    return f"{winner} is better than {loser} on {on} at {level} ({paired} paired episodes)"
