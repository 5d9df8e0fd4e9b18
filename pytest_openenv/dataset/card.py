"""The dataset card (README.md) written next to the JSONL files."""

from __future__ import annotations

import json
from typing import Any

FRONT_MATTER = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: results.jsonl
- config_name: failures
  data_files:
  - split: train
    path: failures.jsonl
tags:
- openenv
- pytest-openenv
---
"""


def build_card(summary: dict[str, Any], metadata: dict[str, Any]) -> str:
    figures = summary.get("figures", {})
    rate = figures.get("pass_rate")
    low, high = figures.get("pass_rate_ci95", [0.0, 1.0])
    rate_text = (
        "n/a" if rate is None else f"{100 * rate:.1f}% (95% CI {100 * low:.1f}-{100 * high:.1f}%)"
    )
    lines = [
        FRONT_MATTER,
        "# Agent episodes collected with pytest-openenv",
        "",
        f"- envs: {json.dumps(figures.get('envs', []), ensure_ascii=False)}",
        f"- policies: {json.dumps(figures.get('policies', []), ensure_ascii=False)}",
        f"- episodes: {figures.get('episodes', 0)} "
        f"({figures.get('passed', 0)} passed, {figures.get('failed', 0)} failed, "
        f"{figures.get('errored', 0)} errored, {figures.get('skipped', 0)} skipped)",
        f"- pass rate: {rate_text}",
        f"- mean reward: {figures.get('mean_reward')}",
        "",
        "`results.jsonl` holds passing episodes (OpenEnv `EpisodeRecord` keys, OpenAI chat "
        "`messages`); `failures.jsonl` the rest, with a `failure` field.",
        "",
        "```python",
        "from datasets import load_dataset",
        'ds = load_dataset("json", data_files="results.jsonl", split="train")',
        "```",
        "",
    ]
    return "\n".join(lines)
