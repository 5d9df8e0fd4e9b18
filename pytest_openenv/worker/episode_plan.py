"""``EpisodeTest``: the episodes one episode test function plays, as its marker, the command
line and ini settle them (read by ``marker.py``, checked against a resumed folder by
``resume_check.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config.settings import Settings
from ..episode.spec import EpisodeSpec
from ..policies.arms import Arm, arms_of, id_part


@dataclass(frozen=True)
class EpisodeTest:
    """One episode test function's episodes, before the policy is settled."""

    env: str
    #: env config as canonical JSON (the marker's keys over ``--openenv-env-config``)
    config: str
    n: int
    seed: int
    #: the policy named by the marker or the command line; None: the env family's teacher
    policy: str | None
    #: which setting named ``policy``, for messages
    policy_source: str | None
    #: the marker's verdict overrides (``min_reward``, ``judge_at``); None: not set there
    min_reward: float | None = None
    judge_at: str | None = None
    #: every policy named (the marker's ``policies``, or ``--openenv-policy`` repeated);
    #: empty: ``policy`` alone, or the env family's teacher
    policies: tuple[str, ...] = ()
    #: the models of the LLM policies (the marker's ``models``, or ``--openenv-model``)
    models: tuple[str, ...] = ()
    #: the marker's ``models=[...]`` as written; None: the models come from the options
    models_source: str | None = None

    def arms(self, default_policy: str) -> list[Arm]:
        """Who plays these episodes; raises ``EnvConfigError`` for names ids cannot tell apart."""
        policies = self.policies or (self.policy or default_policy,)
        return arms_of(policies, self.models)

    def specs(self, arms: list[Arm] | str, settings: Settings) -> list[EpisodeSpec]:
        """Episode i of every arm, then episode i + 1: a run stopped early (a budget) still
        has the arms' episodes on the same seeds."""
        if isinstance(arms, str):
            arms = [Arm(arms)]
        repeats = settings.run.repeats
        several = len(arms) > 1
        return [
            EpisodeSpec(
                env=self.env,
                index=i,
                seed=self.seed + i,
                repeat=r,
                repeats=repeats,
                policy=arm.policy,
                config=self.config,
                prefix=settings.run.id_prefix or "",
                min_reward=self.min_reward,
                judge_at=self.judge_at,
                model=arm.model,
                arm=id_part(arm.name) if several else "",
            )
            for i in range(self.n)
            for arm in arms
            for r in range(repeats)
        ]
