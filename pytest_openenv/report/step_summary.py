"""The run summary as Markdown for ``$GITHUB_STEP_SUMMARY`` (controller only).

GitHub Actions renders whatever a step appends to the file named by that
variable on the job's summary page; we append (never truncate) so several
pytest invocations in one step each add their own table.
"""

from __future__ import annotations

import os
from typing import Any

from ..util.format import (
    MODEL_COLUMNS,
    cell,
    comparison_line,
    group_columns,
    inline_code,
    interval,
    markdown_group_row,
    model_row,
    percent,
    table,
    usd,
)
from .gates import Verdict
from .passk import PassAtK

ENV_VAR = "GITHUB_STEP_SUMMARY"


def summary_markdown(
    figures: dict[str, Any],
    passk: PassAtK | None,
    verdict: Verdict | None,
    output: str,
    compared: dict[str, Any] | None = None,
    *,
    groups: list[dict[str, Any]] | None = None,
) -> str:
    """``compared``: summary.json's ``models`` and ``comparisons`` (several models);
    ``groups``: its ``groups`` (a table of them first when there is more than one)."""
    f = figures
    low, high = f["pass_rate_ci95"]
    # every name a user supplied sits in a code span (no live link, no fence); ``cell``
    # below escapes the pipes
    rows = [
        ("env", _codes(f["envs"])),
        ("policy", _codes(f["policies"])),
    ]
    if f["models"]:
        rows.append(("model", _codes(f["models"])))
    rows += [
        (
            "episodes",
            f"{f['passed']} passed, {f['failed']} failed, {f['errored']} errored, "
            f"{f['skipped']} skipped",
        ),
        ("pass rate", f"{percent(f['pass_rate'])} (95% Wilson CI {interval(low, high)})"),
    ]
    if f.get("attempts", 1) > 1:
        rows.append(("attempts", f"best of up to {f['attempts']} (--openenv-resume-failed)"))
    if f["mean_reward"] is not None:
        se = f["mean_reward_stderr"]
        rows.append(
            ("mean reward", f"{f['mean_reward']:.3f}" + (f" ± {se:.3f}" if se is not None else ""))
        )
    if passk is not None and passk.k > 1:
        rows.append(
            (
                f"pass@{passk.k} / pass^{passk.k}",
                f"{percent(passk.pass_at_k)} / {percent(passk.pass_hat_k)} "
                f"over {passk.problems_scored} seeds (pass@1 {percent(passk.pass_at_1)})",
            )
        )
    if figures.get("cost_usd") is not None:
        rows.append(("cost", usd(figures["cost_usd"])))
    rows.append(("output", inline_code(output)))
    lines = ["### pytest-openenv", ""]
    if groups is not None and len(groups) > 1:
        columns = group_columns(groups)
        lines += [
            *table(columns, [markdown_group_row(g, columns) for g in groups]),
            "",
            "Pooled (all groups):",
            "",
        ]
    lines += table(("", ""), [(n, cell(v)) for n, v in rows])
    if compared:
        models = compared.get("models") or []
        shown = [tuple(map(cell, model_row(m, inline_code))) for m in models]
        lines += ["", *table(MODEL_COLUMNS, shown)]
        comparisons = compared.get("comparisons") or []
        lines += ["", *(f"- {comparison_line(c, inline_code)}" for c in comparisons)]
    if verdict is not None:
        lines += ["", verdict.markdown()]
    return "\n".join(lines) + "\n\n"


def _codes(names: list[str]) -> str:
    return ", ".join(inline_code(name) for name in names) or "n/a"


def append_step_summary(markdown: str) -> str | None:
    """Append to ``$GITHUB_STEP_SUMMARY`` if set; returns an error text instead of raising."""
    target = os.environ.get(ENV_VAR)
    if not target:
        return None
    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(markdown)
    except OSError as exc:
        return f"cannot append to ${ENV_VAR} ({target}): {exc}"
    return None
