"""Which episode an item runs: the same on every xdist worker, and in every record."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


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

    @cached_property  # asked on every turn and report; frozen fields, so it never changes
    def episode_id(self) -> str:
        base = f"ep-{self.index:06d}"
        if self.prefix:
            base = f"{self.prefix}-{base}"
        return f"{base}-r{self.repeat}" if self.repeats > 1 else base
