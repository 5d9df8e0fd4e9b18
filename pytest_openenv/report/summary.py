"""The terminal summary section, readable at a glance (controller only)."""

from __future__ import annotations

from typing import Any


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def summary_lines(figures: dict[str, Any], output: str) -> list[str]:
    f = figures
    lines = [
        f"env: {', '.join(f['envs']) or 'n/a'}    policy: {', '.join(f['policies']) or 'n/a'}"
        + (f"    model: {', '.join(f['models'])}" if f["models"] else ""),
        f"episodes: {f['passed']} passed, {f['failed']} failed, {f['errored']} errored, "
        f"{f['skipped']} skipped",
    ]
    low, high = f["pass_rate_ci95"]
    lines.append(
        f"pass rate: {_pct(f['pass_rate'])}  (95% Wilson CI {_pct(low)} - {_pct(high)}, "
        f"n={f['ran']})"
    )
    if f["mean_reward"] is not None:
        se = f["mean_reward_stderr"]
        lines.append(
            f"mean reward: {f['mean_reward']:.3f}"
            + (f" ± {se:.3f} (s.e.)" if se is not None else "")
        )
    if f["mean_turns"] is not None:
        lines.append(f"mean turns: {f['mean_turns']:.2f}")
    lines.append(f"tokens: {f['prompt_tokens']} in / {f['completion_tokens']} out")
    rate = f["episodes_per_s"]
    lines.append(
        f"wall time: {f['wall_time_s']:.1f}s" + (f"    episodes/s: {rate:.1f}" if rate else "")
    )
    lines.append(f"output: {output}")
    return lines
