"""A group's figures, from its rows: what its inspect log reports as results.

Counted as the summary counts them: an episode *passed* when its test passed, errored
episodes count as not passed, the pass rate is over every episode that ran (with its
Wilson interval), the mean reward over those that were played to a verdict, and with
repeats pass@1 / pass@k / pass^k over the seeds (``report/passk.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...dataset.played import is_error
from ..passk import PassAtK, PassKTally
from ..stats import RunningMean, wilson_interval

CONFIDENCE = 0.95


@dataclass(frozen=True)
class GroupFigures:
    episodes: int
    passed: int
    errored: int
    pass_rate: float | None
    pass_rate_interval: tuple[float, float]
    mean_reward: float | None
    mean_reward_stderr: float | None
    passk: PassAtK


def group_figures(rows: list[dict[str, Any]], repeats: int) -> GroupFigures:
    passed = errored = 0
    reward = RunningMean()
    passk = PassKTally(max(1, repeats))
    for row in rows:
        error = is_error(row)
        won = bool(row.get("passed")) and not error
        passed += won
        errored += error
        if not error:
            reward.add(float(row.get("reward") or 0.0))
        passk.add(str(row.get("test", "")), won)
    episodes = len(rows)
    return GroupFigures(
        episodes=episodes,
        passed=passed,
        errored=errored,
        pass_rate=passed / episodes if episodes else None,
        pass_rate_interval=wilson_interval(passed, episodes, CONFIDENCE),
        mean_reward=reward.mean,
        mean_reward_stderr=reward.stderr,
        passk=passk.result(),
    )


def repeats_of(rows: list[dict[str, Any]]) -> int:
    """K of ``--openenv-repeats K``, as the rows show it (the highest repeat index + 1)."""
    highest = 0
    for row in rows:
        repeat = (row.get("extra") or {}).get("repeat")
        if isinstance(repeat, int) and repeat > highest:
            highest = repeat
    return highest + 1
