"""``--openenv-resume`` at collection: each test's rows in results.jsonl against how it plays now.

The controller hands every worker the rows already in results.jsonl with what each says
of how it was played (``dataset/identity.RowIdentity``). A resumed item is skipped, so
its row stands for the episode this run would play: if the test's marker (or the command
line) now resolves to another env, config, seed, policy, model or pass rule, the row is
another episode under the same id. Such a test fails its collection with the reason, and
the report carries it to the controller, which refuses the run (exit 4) before any
episode: refusing keeps every earlier row (re-running would replace them without a word).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..config.settings import Settings
from ..dataset.identity import (
    UNCHECKED,
    PlayedNow,
    RowIdentity,
    prompt_digest,
    row_mismatch,
    row_problem,
)
from ..envs.base import EnvFamily
from ..episode.loop import sampling_of
from ..episode.service import EpisodeService
from ..episode.spec import EpisodeSpec
from ..policies.arms import Arm
from .episode_plan import EpisodeTest
from .fixtures import fixture_is_ours


class ResumeCheck:
    def __init__(self, rows: Mapping[str, RowIdentity]) -> None:
        #: node id -> what its row in results.jsonl says
        self.rows = rows
        self._by_function: dict[str, list[tuple[str, RowIdentity]]] | None = None
        self._by_episode: dict[tuple[Any, ...], list[str]] | None = None
        #: refusals found since the last collection report (which carries them)
        self.refused: list[str] = []

    def rows_of(self, function: str) -> list[tuple[str, RowIdentity]]:
        if self._by_function is None:
            by_function: dict[str, list[tuple[str, RowIdentity]]] = {}
            for nodeid, row in self.rows.items():
                by_function.setdefault(nodeid.rpartition("[")[0], []).append((nodeid, row))
            self._by_function = by_function
        return self._by_function.get(function, [])

    def by_episode(self) -> dict[tuple[Any, ...], list[str]]:
        """Node ids of the rows, by what episode each is (env, config, seed, policy, model,
        repeat): the same episode under another id is a row this run would play again."""
        if self._by_episode is None:
            index: dict[tuple[Any, ...], list[str]] = {}
            for nodeid, row in self.rows.items():
                key = episode_key(row.env, row.config, row.seed, row.policy, row.model, row.repeat)
                index.setdefault(key, []).append(nodeid)
            self._by_episode = index
        return self._by_episode

    def check_twins(
        self,
        metafunc: pytest.Metafunc,
        now: PlayedNow,
        specs: list[EpisodeSpec],
    ) -> None:
        """Refuse to play an episode whose row is already there under another id.

        Two ways to get there: the episode ids of a test changed (a marker's
        ``models=[...]`` went from two models to one, so ``a-ep-000000`` is now
        ``ep-000000``), or the test was renamed (its old rows are of a test this run does
        not collect). Refused rather than replaced: nothing earlier is touched.
        """
        if now.env is UNCHECKED or now.policy is UNCHECKED:
            return
        function = metafunc.definition.nodeid
        # the bundled episode test is the whole run's, or none of it
        bundled = function.partition("::")[0] == "openenv"
        for spec in specs:
            nodeid = f"{function}[{spec.episode_id}]"
            if nodeid in self.rows:
                continue
            key = episode_key(now.env, now.config, spec.seed, now.policy, now.model, spec.repeat)
            for other in self.by_episode().get(key, ()):
                other_function = other.rpartition("[")[0]
                if other_function == function:
                    why = (
                        "its episode id changed since (the marker's models=[...], "
                        "--openenv-model or --openenv-id-prefix differ from that run's)"
                    )
                elif not_collected(metafunc.config.rootpath, other_function, bundled):
                    why = (
                        "a test this run does not collect (renamed or removed?); rename it "
                        "back, or move its rows out of results.jsonl"
                    )
                else:
                    continue  # another test of this run plays the same episode: its own row
                message = (
                    f"--openenv-resume: results.jsonl holds {other}, the episode of env "
                    f"{now.env}, seed {spec.seed}, policy {now.policy}"
                    + (f", model {now.model}" if now.model else "")
                    + f" that this run would play again as {nodeid}: {why}. Keeping both "
                    "would put one episode twice in the dataset and count it twice. Set it "
                    "back as recorded, use another --openenv-output, or drop --openenv-resume "
                    "(the earlier files are then moved aside, not deleted)"
                )
                self.refused.append(message)
                raise pytest.Collector.CollectError(f"{function}: {message}")

    def check(
        self,
        metafunc: pytest.Metafunc,
        test: EpisodeTest,
        family: EnvFamily,
        arm: Arm,
        specs: list[EpisodeSpec],
        service: EpisodeService,
    ) -> None:
        """Raise a collection error naming the first row the test would now play otherwise."""
        rows = self.rows_of(metafunc.definition.nodeid)
        now = played_now(metafunc, test, family, arm, service.settings, service)
        self.check_twins(metafunc, now, specs)
        if not rows:
            return
        seeds = {spec.episode_id: spec.seed for spec in specs}
        differ = [
            (nodeid, row)
            for nodeid, row in rows
            if row.episode_id in seeds and row_mismatch(row, now, seeds[row.episode_id]) is not None
        ]
        if not differ:
            return
        nodeid, row = differ[0]
        message = row_problem(nodeid, row, now, seeds[row.episode_id], more=len(differ) - 1)
        assert message is not None
        self.refused.append(message)
        raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: {message}")

    def take(self) -> str | None:
        """The refusals for the collection report being made (then forgotten)."""
        if not self.refused:
            return None
        text, self.refused = "\n".join(self.refused), []
        return text


def episode_key(
    env: Any, config: Any, seed: Any, policy: Any, model: Any, repeat: Any
) -> tuple[Any, ...]:
    try:
        parsed = json.loads(config) if isinstance(config, str) else config
        config_text = json.dumps(parsed, sort_keys=True)
    except (TypeError, ValueError):
        config_text = str(config)
    return (env, config_text, seed, policy, model, repeat or 0)


def not_collected(rootpath: Path, function: str, bundled: bool) -> bool:
    """Whether the test function of a row is gone: its file, or its ``def``, no longer
    there (or the bundled test, in a run of test files)."""
    path, _, name = function.partition("::")
    if path == "openenv":
        return not bundled
    name = name.rpartition("::")[2]
    try:
        text = (rootpath / path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return f"def {name}(" not in text


def played_now(
    metafunc: pytest.Metafunc,
    test: EpisodeTest,
    family: EnvFamily,
    arm: Arm,
    settings: Settings,
    service: EpisodeService,
) -> PlayedNow:
    """What the rows of this test must say, were they played by this run."""
    definition = metafunc.definition
    rule = family.pass_rule().overridden(
        min_reward=test.min_reward if test.min_reward is not None else settings.run.min_reward,
        judge_at=test.judge_at or settings.run.judge_at,
    )
    env_is_ours = fixture_is_ours(definition, "openenv_env")
    policy_is_ours = fixture_is_ours(definition, "openenv_policy")
    played = service.policy(arm.policy, arm.model) if policy_is_ours else None
    prompt = settings.run.system_prompt
    if prompt is None:
        prompt = family.default_system_prompt()
    sampling = sampling_of(played) if played is not None else None
    return PlayedNow(
        env=family.spec if env_is_ours else UNCHECKED,
        config=family.config_json if env_is_ours else UNCHECKED,
        policy=played.name if played is not None else UNCHECKED,
        model=played.model if played is not None else UNCHECKED,
        min_reward=float(rule.min_reward),
        judged_at_turn_limit=rule.at_turn_limit,
        arguments_form=settings.output.tool_arguments or "string",
        system_prompt=prompt_digest(prompt) if env_is_ours else UNCHECKED,
        max_turns=(settings.run.max_turns or family.default_max_turns())
        if env_is_ours
        else UNCHECKED,
        prompt_style=getattr(family, "prompt_style", None) if env_is_ours else UNCHECKED,
        sampling=(json.dumps(sampling, sort_keys=True) if sampling else None)
        if played is not None
        else UNCHECKED,
        sources={
            "env": "the openenv marker's env, else --openenv-env",
            "env_config": "the openenv marker's keywords over --openenv-env-config",
            "seed": "the openenv marker's seed, else --openenv-seed",
            "policy": test.policy_source or f"the default teacher of {test.env}",
            "model": "--openenv-model",
            "min_reward": "the openenv marker's min_reward, else --openenv-min-reward or "
            f"the pass rule of {family.spec}",
            "judge_at": "the openenv marker's judge_at, else --openenv-judge-at",
            "tool_arguments": "--openenv-tool-arguments (or the --openenv-chat-template check)",
            "system_prompt": "--openenv-system-prompt (a digest of the text is compared)",
            "max_turns": "--openenv-max-turns",
            "prompt_style": "--openenv-prompt-style",
            "sampling": "--openenv-temperature / --openenv-max-tokens",
        },
    )
