"""A finished episode, what a test asserts on and what a dataset row is made of."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..policies.base import Usage

#: Bump when the row layout changes in a way readers must know about. 2: ``tool_trace``
#: results carry OpenEnv's ``metadata`` (``{reward}``); a file mixing 1 and 2 would give
#: that struct two shapes, so a resume keeps to the version a folder was written with.
SCHEMA_VERSION = 2


@dataclass(repr=False)
class Episode:
    episode_id: str
    seed: int
    env: str
    reward: float
    passed: bool
    done: bool
    turns: int
    outcome: str
    min_reward: float
    messages: list[dict[str, Any]]
    tool_trace: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    usage: Usage
    metrics: dict[str, Any]
    task: dict[str, Any]
    policy: str
    model: str | None
    repeat: int = 0
    index: int = 0
    backend: str = "embedded"
    server: str | None = None
    #: What the server said it hosts (``EnvFamily.hosted_by``); None: embedded, or it cannot say.
    server_reports: dict[str, Any] | None = None
    #: Why the agent did not pass (out of turns, lost, wrong answer); None when it passed.
    reason: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    final_observation: str = ""
    #: False when the server ignores the reset seed: the seed does not repeat the episode
    seeded: bool = True

    def __repr__(self) -> str:
        return (
            f"Episode({self.episode_id} {self.env} seed={self.seed} reward={self.reward:g} "
            f"outcome={self.outcome} passed={self.passed})"
        )

    @property
    def trajectory(self) -> dict[str, Any]:
        """What the agent did, without volatile fields: the thing to snapshot."""
        return {
            "env": self.env,
            "seed": self.seed,
            "steps": self.steps,
            "reward": self.reward,
            "outcome": self.outcome,
            "done": self.done,
        }

    def explain(self) -> str:
        """A short story of the episode, for assertion messages."""
        lines = [
            f"{self.episode_id} {self.env} seed={self.seed} policy={self.policy}"
            + (f" model={self.model}" if self.model else ""),
            f"outcome={self.outcome} reward={self.reward:g} (pass needs >= {self.min_reward:g})"
            f" turns={self.turns} done={self.done}",
        ]
        if self.reason:
            lines.append(f"reason: {self.reason}")
        for step in [s for s in self.steps if s["turn"] > 0][-6:]:
            what = step.get("action") or "(no tool call)"
            if "error" in step:
                lines.append(f"  turn {step['turn']}: {what} -> tool error: {step['error']}")
            else:
                lines.append(f"  turn {step['turn']}: {what}")
        return "\n".join(lines)

    def record(
        self, *, test: str = "", passed: bool | None = None, tool_arguments: str = "string"
    ) -> dict[str, Any]:
        """The dataset row: OpenEnv ``EpisodeRecord`` keys plus ours (DESIGN §4).

        ``stable_row`` keeps every field in one JSON type across rows and families,
        so ``datasets``/pyarrow and the Hub viewer load the files as they are.
        ``tool_arguments`` (``--openenv-tool-arguments``): ``"string"`` or ``"object"``,
        how ``messages`` carry tool-call arguments.
        """
        from .record import stable_row

        row = {
            "schema_version": SCHEMA_VERSION,
            "episode_id": self.episode_id,
            "messages": self.messages,
            "reward": float(self.reward),
            "done": self.done,
            "tool_trace": self.tool_trace,
            "metrics": self.metrics,
            "verify_metrics": {
                "outcome": self.outcome,
                "min_reward": float(self.min_reward),
                "verdict": self.passed,
            },
            "artifacts": {"final_observation": self.final_observation},
            "task": self.task,
            "extra": {
                "index": self.index,
                "repeat": self.repeat,
                "backend": self.backend,
                "server": self.server,
                "server_reports": self.server_reports,
                "reason": self.reason,
                "seeded": self.seeded,
            },
            "env": self.env,
            "seed": self.seed,
            "policy": self.policy,
            "model": self.model,
            "tools": self.tools,
            "test": test,
            "passed": self.passed if passed is None else passed,
        }
        return stable_row(row, tool_arguments)


#: Characters JSON leaves raw in strings but line readers (``str.splitlines``, older
#: JavaScript) treat as line breaks: escaped so one row is always one line.
LINE_BREAKS_JSON_KEEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


#: built once: json.dumps with options builds a new encoder per call
_ROW_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps_record(record: dict[str, Any]) -> str:
    """One JSONL line body: compact, UTF-8 kept readable, no NaN (JSON has none)."""
    text = _ROW_JSON.encode(record)
    for char, escaped in LINE_BREAKS_JSON_KEEPS.items():
        text = text.replace(char, escaped)  # only ever inside strings: lossless
    return text
