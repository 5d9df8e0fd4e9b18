"""A finished episode, what a test asserts on and what a dataset row is made of."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..envs.verdict import Decision, shown_reward
from ..policies.base import Usage
from ..util.terminal import terminal_safe

# the row and its line live with the row schema; importable here as they always were
from .record import LINE_BREAKS_JSON_KEEPS as LINE_BREAKS_JSON_KEEPS
from .record import SCHEMA_VERSION as SCHEMA_VERSION
from .record import dumps_record as dumps_record
from .record import episode_row


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
    #: False when the server ignores the reset seed (the seed does not repeat the episode),
    #: None when the controller's probe could not tell
    seeded: bool | None = True
    #: the verdict every outcome text is made from (None: a stand-in for an errored episode)
    decision: Decision | None = None
    #: what the row records of how it was played, so a resume can check it without
    #: metadata.json: the turn limit, the prompts' wording, the model's sampling (None: none)
    max_turns: int | None = None
    prompt_style: str | None = None
    sampling: dict[str, Any] | None = None
    #: the judge's verdict and figures (``episode/judged.py``: the row's ``judge``); None: no
    #: judge decided this episode
    judge: dict[str, Any] | None = None
    #: the agent program that played (``agent:NAME``): ``{"name", "version"}`` and its own
    #: seconds (``startup_s``, ``stop_s``); None: a policy of ours
    agent: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return (
            f"Episode({self.episode_id} {self.env} seed={self.seed} "
            f"reward={self.reward_text()} outcome={self.outcome} passed={self.passed})"
        )

    def reward_text(self) -> str:
        """The reward as a reader should see it next to the threshold (``shown_reward``)."""
        return shown_reward(self.reward, self.min_reward)

    def status_line(self) -> str:
        """The item status line's detail, ``reward=1 turns=3 win``, from the verdict."""
        if self.decision is not None:
            return self.decision.status_line(self.turns)
        return f"reward={self.reward_text()} turns={self.turns} {self.outcome}"

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
        decision = self.decision
        if decision is not None:
            verdict = f"outcome={self.outcome}"
            if decision.status != self.outcome:  # a family word (win, partial...) beside it
                verdict += f" verdict={decision.status}"
            needs = decision.needs()
        else:
            verdict = f"outcome={self.outcome}"
            needs = f"pass needs reward >= {self.min_reward:g}"
        lines = [
            f"{self.episode_id} {self.env} seed={self.seed} policy={self.policy}"
            + (f" model={self.model}" if self.model else ""),
            f"{verdict} reward={self.reward_text()} ({needs}) turns={self.turns} done={self.done}",
        ]
        if self.reason:
            lines.append(f"reason: {self.reason}")
        for step in [s for s in self.steps if s["turn"] > 0][-6:]:
            what = step.get("action") or "(no tool call)"
            if "error" in step:
                lines.append(f"  turn {step['turn']}: {what} -> tool error: {step['error']}")
            else:
                lines.append(f"  turn {step['turn']}: {what}")
        # the model's and env's text, printed in assertion messages: no escape sequence
        return terminal_safe("\n".join(lines))

    def record(
        self, *, test: str = "", passed: bool | None = None, tool_arguments: str = "string"
    ) -> dict[str, Any]:
        """The dataset row (``record.py``, docs/files-and-schema.md): OpenEnv
        ``EpisodeRecord`` keys plus ours, every field in one JSON type across rows and
        families, so ``datasets``/pyarrow and the Hub viewer load the files as they are.
        ``tool_arguments`` (``--openenv-tool-arguments``): ``"string"`` or ``"object"``, how
        ``messages`` carry tool-call arguments.
        """
        return episode_row(self, test=test, passed=passed, tool_arguments=tool_arguments)
