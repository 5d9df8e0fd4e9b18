"""One attempt at an episode as the controller receives it: ``EpisodeOutcome``.

Built once on the worker side, when pytest makes the item's report
(``worker/reporting.py``), and carried as one report attribute through pytest's
report serialization (docs/architecture.md, "The wire"). Every report of an
episode item carries one: the report that decides the episode (the call, or the
setup when the episode errored) carries the row and its figures, the others only
the episode id. ``outcome_of`` is the one place that reads the attribute.

On the wire it is a plain dict of the fields that differ from their defaults
(``to_wire`` / ``from_wire``, used by the serialization hooks in ``plugin.py``), so
the controller only ever sees an ``EpisodeOutcome``. In a run without xdist the
controller receives the worker's report object itself, and ``row`` still holds the
dict the line was dumped from: the controller digests it without parsing the line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..policies.arms import arm_name

#: the report attribute an episode's outcome travels in
OUTCOME_ATTR = "openenv_outcome"


@dataclass(frozen=True, slots=True)
class EpisodeOutcome:
    episode_id: str
    #: the row as its results.jsonl / failures.jsonl line; None on a report that carries no
    #: row, and once the controller has written it
    line: str | None = None
    #: the report carries the attempt's figures below (the one that decides the episode)
    has_figures: bool = False
    #: the row goes to results.jsonl (no failure in it), not failures.jsonl
    train: bool = False
    #: the env's verdict at the run's threshold, apart from the test's outcome
    verdict: bool = False
    #: the verdict's word (``verify_metrics.outcome``: win, loss, error, ...)
    outcome: str = ""
    reward: float = 0.0
    turns: int = 0
    env: str = ""
    policy: str = ""
    model: str | None = None
    #: the name the run knows the arm by (``policies.arms.arm_name``)
    arm: str = ""
    #: the agent program that played, with its version (``codex 0.171.0``); "" for our loop
    agent: str = ""
    seed: int = 0
    repeat: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    #: the episode's own duration (pytest-html's row shows it)
    wall_time_s: float | None = None
    #: the item status line's detail in the verdict's own words (``Episode.status_line``)
    detail: str | None = None
    #: model answers that reported no readable usage (no token or cost budget counts them)
    usage_unknown: int = 0
    #: why this episode stops the whole run (its response cache cannot be written)
    stop: str | None = None
    #: --openenv-judge: the judge's figures of this episode (``judge_figures``); None: none
    judge: dict[str, Any] | None = None
    #: in one process only, never on the wire: the dict ``line`` is the JSON of
    row: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of_row(
        cls,
        episode_id: str,
        row: dict[str, Any],
        line: str,
        *,
        arm: str | None = None,
        detail: str | None = None,
        usage_unknown: int = 0,
        keep_row: bool = False,
    ) -> EpisodeOutcome:
        """The outcome of the report carrying ``row`` (``line`` is its JSON text).

        ``arm``: the name the run knows it by (default: the row's model, else its policy);
        ``keep_row``: ``row`` rides along (one process, the line unchanged since)."""
        metrics = row["metrics"]
        verify = row["verify_metrics"]
        return cls(
            episode_id,
            line=line,
            has_figures=True,
            train="failure" not in row,
            verdict=bool(verify["verdict"]),
            outcome=verify["outcome"],
            reward=row["reward"],
            turns=metrics["turns"],
            env=row["env"],
            policy=row["policy"],
            model=row["model"],
            arm=arm_name(row["policy"], row["model"]) if arm is None else arm,
            agent=agent_of(row),
            seed=row["seed"],
            repeat=row["extra"].get("repeat", 0),
            prompt_tokens=metrics["prompt_tokens"],
            completion_tokens=metrics["completion_tokens"],
            cost_usd=metrics.get("cost_usd"),
            wall_time_s=float(metrics.get("wall_time_s", 0.0)),
            detail=detail,
            usage_unknown=usage_unknown,
            judge=judge_figures(row.get("judge")),
            row=row if keep_row else None,
        )

    def status_detail(self) -> str:
        """What the item status line says in brackets: ``reward=1 turns=3 win``."""
        return self.detail or f"reward={self.reward:g} turns={self.turns} {self.outcome}"

    def written(self) -> EpisodeOutcome:
        """This outcome once its row is written: the report keeps no transcript."""
        return dataclasses.replace(self, line=None, row=None)

    def slimmed(self) -> EpisodeOutcome:
        """What a passed report keeps for the rest of the session: the id and duration."""
        return EpisodeOutcome(self.episode_id, wall_time_s=self.wall_time_s)

    def to_wire(self) -> dict[str, Any]:
        """JSON-safe, and only what differs from the defaults (most reports carry an id)."""
        return {
            name: value
            for name, default in WIRE_DEFAULTS
            if (value := getattr(self, name)) != default or name == "episode_id"
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> EpisodeOutcome:
        return cls(**data)


def judge_figures(section: Any) -> dict[str, Any] | None:
    """What the controller counts of a row's ``judge``: its verdict (None: it gave none), the
    env's beside it, its tokens and cost."""
    if not isinstance(section, dict):
        return None
    failed = section.get("error") is not None
    return {
        "passed": None if failed else bool(section.get("passed")),
        "env_passed": section.get("env_passed"),
        "prompt_tokens": int(section.get("prompt_tokens") or 0),
        "completion_tokens": int(section.get("completion_tokens") or 0),
        "cost_usd": section.get("cost_usd"),
        "model": section.get("model"),
    }


#: (field, default) of every field that crosses processes (all but ``row``)
WIRE_DEFAULTS = tuple(
    (spec.name, spec.default) for spec in dataclasses.fields(EpisodeOutcome) if spec.name != "row"
)


def outcome_of(report: object) -> EpisodeOutcome | None:
    """The episode outcome ``report`` carries; None: not an episode item's report."""
    found = getattr(report, OUTCOME_ATTR, None)
    return found if isinstance(found, EpisodeOutcome) else None


def put_outcome(report: object, outcome: EpisodeOutcome) -> None:
    setattr(report, OUTCOME_ATTR, outcome)


def outcome_to_wire(data: dict[str, Any]) -> None:
    """A report's serialized dict: its outcome made a plain dict (xdist sends JSON-safe data)."""
    outcome = data.get(OUTCOME_ATTR)
    if isinstance(outcome, EpisodeOutcome):
        data[OUTCOME_ATTR] = outcome.to_wire()


def outcome_from_wire(data: dict[str, Any]) -> None:
    """A serialized report about to be rebuilt: its outcome an ``EpisodeOutcome`` again."""
    wire = data.get(OUTCOME_ATTR)
    if isinstance(wire, dict):
        data[OUTCOME_ATTR] = EpisodeOutcome.from_wire(wire)


def agent_of(row: dict[str, Any]) -> str:
    """``codex 0.171.0``: the agent program and version a row names, "" for our own loop."""
    extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
    name = extra.get("agent")
    if not name:
        return ""
    version = extra.get("agent_version")
    return f"{name} {version}" if version else str(name)
