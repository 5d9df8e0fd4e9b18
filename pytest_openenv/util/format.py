"""Figures as people read them: percentages, numbers, intervals and Markdown tables.

The one renderer behind the terminal summary, ``$GITHUB_STEP_SUMMARY``, the gate
verdict and the dataset card, so a pass rate reads the same wherever it appears.
Here in ``util`` because both ``report/`` and ``dataset/`` (the card) use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


def model_row(figures: dict) -> tuple[str, ...]:
    """One model's row of ``MODEL_COLUMNS`` from summary.json's ``models`` entry."""
    f = figures
    low, high = f.get("pass_rate_ci95") or (None, None)
    reward = f.get("mean_reward")
    stderr = f.get("mean_reward_stderr")
    shown = NOT_AVAILABLE if reward is None else f"{reward:.3f}"
    if reward is not None and stderr is not None:
        shown += f" ± {stderr:.3f}"
    return (
        str(f.get("name")),
        f"{f.get('passed', 0)}/{f.get('ran', 0)}",
        f"{percent(f.get('pass_rate'))} ({interval(low, high)})",
        shown,
        f"{f.get('prompt_tokens', 0)} / {f.get('completion_tokens', 0)}",
        usd(f.get("cost_usd")),
        f"{float(f.get('episode_seconds') or 0.0):.1f}s",
    )


def comparison_line(c: dict) -> str:
    """One pair's paired tests and verdict, on one line."""
    passing, reward = c.get("pass") or {}, c.get("reward") or {}
    text = (
        f"{c.get('verdict')}. pass/fail: {c.get('a')} alone passed "
        f"{passing.get('only_a_passed', 0)}, {c.get('b')} alone {passing.get('only_b_passed', 0)}"
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
