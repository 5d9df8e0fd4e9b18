"""Which episode an item runs: the same on every xdist worker, and in every record."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

#: what a refusal of one episode played several times points at (the worker refuses a test
#: parametrized beyond its episode, the controller ``--dist each``): repeats of one seed
#: have ids of their own
REPEATS_FIX = (
    "to run each seed several times use --openenv-repeats K (ids ep-000000-r0 ..., "
    "reported as pass@1, pass@k and pass^k)"
)


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode an item runs; identical on every xdist worker."""

    env: str
    index: int
    seed: int
    repeat: int = 0
    repeats: int = 1
    policy: str = "scripted"
    #: env config as canonical JSON text (hashable, identical across workers)
    config: str = "{}"
    #: ``--openenv-id-prefix``: ids become ``{prefix}-ep-000000``
    prefix: str = ""
    #: the marker's ``min_reward`` (over ``--openenv-min-reward``); None: not set there
    min_reward: float | None = None
    #: the marker's ``judge_at`` (over ``--openenv-judge-at``); None: not set there
    judge_at: str | None = None
    #: the model the policy plays with (an LLM policy); None: the run's, or none
    model: str | None = None
    #: with several models or policies, this one's id part (``policies/arms.py``): ids
    #: become ``{arm}-ep-000000``; "" with one
    arm: str = ""

    @cached_property  # asked on every turn and report; frozen fields, so it never changes
    def episode_id(self) -> str:
        base = f"ep-{self.index:06d}"
        if self.arm:
            base = f"{self.arm}-{base}"
        if self.prefix:
            base = f"{self.prefix}-{base}"
        return f"{base}-r{self.repeat}" if self.repeats > 1 else base
