"""The terminal summary section, readable at a glance (controller only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..util.format import (
    MODEL_COLUMNS,
    comparison_line,
    group_columns,
    group_row,
    interval,
    model_row,
    percent,
    usd,
)
from .passk import PassAtK


def failure_hint(figures: dict[str, Any], teacher: str | None = None) -> str | None:
    """Why an ungated run with failed episodes exits 1, and what to run next (one line).

    ``teacher``: a stronger policy that would play this run's env, to suggest (None: none).
    """
    failed = figures["failed"]
    if not failed:
        return None
    rate = figures["pass_rate"]
    this_run = "" if rate is None else f" (this run passed {rate:.2f})"
    hint = f"{failed} episode(s) failed, so pytest exits 1; gate the run with "
    hint += f"--openenv-min-pass-rate F{this_run}"
    if teacher:
        hint += f", or collect with a stronger teacher (--openenv-policy={teacher})"
    return hint


@dataclass(frozen=True)
class SummarySection:
    """One part of the terminal summary: what it holds (``title``), its lines, and the
    indent they take (the run's own figures sit under the pooled heading, indented)."""

    title: str
    lines: tuple[str, ...]
    indent: str = ""

    def rendered(self) -> list[str]:
        return [self.indent + line for line in self.lines]


def render_sections(sections: Sequence[SummarySection]) -> list[str]:
    """The terminal summary's lines, section after section."""
    return [line for section in sections for line in section.rendered()]


def summary_sections(
    figures: dict[str, Any],
    output: str,
    *,
    gated: bool = False,
    teacher: str | None = None,
    exit_status: int | None = None,
    groups: list[dict[str, Any]] | None = None,
    verdicts: Sequence[str] = (),
) -> list[SummarySection]:
    """The run's sections, in order: with more than one group (``groups``: summary.json's
    ``groups``) a line each and a pooled heading first, then the run's figures (labelled as
    pooled then, and indented), its wall time and output folder, and the hint for failures.

    ``verdicts``: where the tests' outcomes and the env's verdicts differ (``verdict_lines``),
    shown right after the pass rate they qualify;
    ``gated``: a gate decides the exit code, so failed episodes need no explaining;
    ``teacher``: a stronger policy to suggest when episodes failed (``failure_hint``);
    ``exit_status``: pytest's exit code, when known. The hint says failed episodes make
    pytest exit 1, so it shows only when it does (not under xfail, exit 0, nor Ctrl-C, 2)."""
    several = groups is not None and len(groups) > 1
    sections: list[SummarySection] = []
    if several:
        assert groups is not None
        sections.append(SummarySection("groups", tuple(group_lines(groups))))
        sections.append(
            SummarySection(
                "pooled", ("pooled (all groups): the figures below count every group together",)
            )
        )
    indent = "  " if several else ""
    sections.append(SummarySection("episodes", tuple(episode_lines(figures)), indent))
    sections.append(SummarySection("pass rate", (pass_rate_line(figures),), indent))
    if verdicts:
        sections.append(SummarySection("env verdicts", tuple(verdicts), indent))
    sections.append(SummarySection("means", tuple(mean_lines(figures)), indent))
    sections.append(SummarySection("run", tuple(run_lines(figures, output))))
    exits_1 = exit_status is None or exit_status == 1
    hint = None if gated or not exits_1 else failure_hint(figures, teacher)
    if hint:
        sections.append(SummarySection("hint", (hint,)))
    return sections


def summary_lines(
    figures: dict[str, Any],
    output: str,
    *,
    gated: bool = False,
    teacher: str | None = None,
    exit_status: int | None = None,
    groups: list[dict[str, Any]] | None = None,
) -> list[str]:
    """The lines of ``summary_sections`` (the same arguments)."""
    return render_sections(
        summary_sections(
            figures, output, gated=gated, teacher=teacher, exit_status=exit_status, groups=groups
        )
    )


def episode_lines(figures: dict[str, Any]) -> list[str]:
    """What ran and how the episodes ended, and what the counts include beyond one attempt
    each in this run (reruns, ``--openenv-resume-failed``, an earlier run's rows)."""
    f = figures
    lines = [
        f"env: {', '.join(f['envs']) or 'n/a'}    policy: {', '.join(f['policies']) or 'n/a'}"
        + (f"    model: {', '.join(f['models'])}" if f["models"] else ""),
        f"episodes: {f['passed']} passed, {f['failed']} failed, {f['errored']} errored, "
        f"{f['skipped']} skipped"
        + (
            f" ({f['resumed']} of the passed from the earlier run: --openenv-resume)"
            if f.get("resumed")
            else ""
        ),
    ]
    if f.get("rerun"):
        lines.append(
            f"reruns (pytest-rerunfailures): {f['rerun']} episode(s) re-run, "
            f"{f.get('passed_on_rerun', 0)} passed on a later attempt; each episode counts "
            "by its first attempt (pass@1 is one attempt, not best of N), as its row does"
        )
    if f.get("attempts", 1) > 1:
        lines.append(
            f"best of up to {f['attempts']} attempts: --openenv-resume-failed played failed "
            "episodes again, so the pass rate is not pass@1 (one attempt per episode)"
        )
    earlier = f.get("resumed", 0) + f.get("earlier_failures", 0)
    if earlier:
        lines.append(
            f"this run played {f.get('played', f['ran'] - earlier)} of them; the other "
            f"{earlier} are the earlier run's rows in the output folder (--openenv-resume), "
            "so the figures and the gate describe the whole dataset there"
        )
    return lines


def pass_rate_line(figures: dict[str, Any]) -> str:
    low, high = figures["pass_rate_ci95"]
    return (
        f"pass rate: {percent(figures['pass_rate'])}  "
        f"(95% Wilson CI {interval(low, high)}, n={figures['ran']})"
    )


def mean_lines(figures: dict[str, Any]) -> list[str]:
    """Mean reward and turns (when recorded), then tokens and cost."""
    f = figures
    lines = []
    if f["mean_reward"] is not None:
        se = f["mean_reward_stderr"]
        lines.append(
            f"mean reward: {f['mean_reward']:.3f}"
            + (f" ± {se:.3f} (s.e.)" if se is not None else "")
        )
    if f["mean_turns"] is not None:
        lines.append(f"mean turns: {f['mean_turns']:.2f}")
    lines.append(
        token_text(f)
        + (f"    cost: {usd(f['cost_usd'])}" if f.get("cost_usd") is not None else "")
        + (" when recorded, nothing now" if replayed(f) and f.get("cost_usd") is not None else "")
        + (
            f" ({f['unpriced_episodes']} episode(s) of models --openenv-prices does not price)"
            if f.get("cost_usd") is not None and f.get("unpriced_episodes")
            else ""
        )
    )
    return lines


def run_lines(figures: dict[str, Any], output: str) -> list[str]:
    rate = figures["episodes_per_s"]
    return [
        f"wall time: {figures['wall_time_s']:.1f}s"
        + (f"    episodes/s: {rate:.1f}" if rate else ""),
        f"output: {output}",
    ]


def replayed(figures: dict[str, Any]) -> bool:
    """The run replayed its answers from the response cache (``--openenv-replay``)."""
    return figures.get("replayed_prompt_tokens") is not None


def token_text(figures: dict[str, Any]) -> str:
    """``tokens: ...``: what was spent, or in a replay what the cache's answers carried."""
    f = figures
    if replayed(f):
        return (
            f"tokens: 0 spent ({f['replayed_prompt_tokens']} in / "
            f"{f['replayed_completion_tokens']} out replayed from the response cache)"
        )
    return f"tokens: {f['prompt_tokens']} in / {f['completion_tokens']} out"


def group_lines(groups: list[dict[str, Any]]) -> list[str]:
    """One line per group (test function, env, policy / model), columns aligned."""
    columns = group_columns(groups)
    rows = [columns, *(group_row(g, columns) for g in groups)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = [f"groups: {len(groups)} (test, env, policy / model), each with its own figures"]
    lines += [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return lines


def arm_lines(arms: Any, confidence: float) -> list[str]:
    """With several models (or policies): one row each, then each pair's paired tests."""
    rows = [MODEL_COLUMNS, *(model_row(f) for f in arms.figures(confidence))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(MODEL_COLUMNS))]
    lines = ["models (same seeds):"]
    lines += [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
    ]
    lines += ["  " + comparison_line(c) for c in arms.comparisons(confidence)]
    return lines


def verdict_lines(figures: dict[str, Any], train_on: str) -> list[str]:
    """Where the tests' outcomes and the env's verdicts differ, what each counts and which
    rule filled results.jsonl (the summary's ``passed`` and pass rate count test outcomes)."""
    kept_out = figures.get("test_passed_verdict_failed", 0)
    stricter = figures.get("test_failed_verdict_passed", 0)
    if not kept_out and not stricter:
        return []
    rate = figures.get("verdict_pass_rate")
    shown = f" ({100 * rate:.1f}%)" if rate is not None else ""
    lines = [
        f"env verdict: {figures.get('verdict_passed', 0)} of {figures['ran']} passed{shown}; "
        f"tests passed: {figures['passed']} (the episodes line and pass rate count tests)"
    ]
    if kept_out and train_on == "verdict":
        lines.append(
            f"training split: {figures.get('train_rows', 0)} rows in results.jsonl; "
            f"{kept_out} test-passed episode(s) the env's verdict failed went to "
            "failures.jsonl as verdict-failed (--openenv-train-on=test keeps them)"
        )
    elif kept_out:
        lines.append(
            f"training split: {figures.get('train_rows', 0)} rows in results.jsonl, "
            f"{kept_out} of them failed by the env's verdict (--openenv-train-on=test)"
        )
    return lines


PASSK_NAMES = ("pass@1", "pass@k", "pass^k")


def passk_lines(passk: PassAtK, pooled: bool) -> list[str]:
    """With repeats: pass@1, pass@k and pass^k over the seeds (``pooled``: over several
    groups, said so)."""
    if passk.k <= 1:
        return []
    k = passk.k
    return [
        ("pooled " if pooled else "")
        + f"repeats: {k} per seed over {passk.problems} seed(s): "
        + "    ".join(
            f"{name.replace('k', str(k))} {percent(passk.metric(name))}" for name in PASSK_NAMES
        )
        + (
            f" (pass@{k}/pass^{k} over {passk.problems_scored} seeds with all {k} runs)"
            if passk.problems_scored != passk.problems
            else ""
        )
    ]
