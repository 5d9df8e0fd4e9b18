"""The run configuration, typed and grouped: what each side reads instead of option strings.

``Settings.from_config`` reads every ``--openenv-*`` option once (``options.read_values``)
and fills the groups below; each option row says which field it fills (``Option.into``), so
a default lives in exactly one place, the row. Settings hold no secrets: keys and tokens are
read from the environment where they are used; server URLs keep their credentials in memory
only and ``public()`` shows them without, as it shows an env config's credential (a reset
field such as ``hf_token``, sent to the env) as ``***``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .convert import (
    INSPECT_LOGS_DEFAULT,
    TOOL_ARGUMENT_FORMS,
    check_item_count,
    check_seed_range,
)
from .options import OPTIONS, default_of, given_as, read_values
from .shard import Shard

#: the options only a sampling policy (openai, anthropic, transformers) reads
SAMPLING_OPTIONS = ("temperature", "max-tokens")


@dataclass(frozen=True)
class RunSettings:
    """Which episodes run, and how each is played and judged."""

    env: str | None = default_of("env")
    """``--openenv-env``: ``family:variant``; None leaves the plugin inert."""
    n: int = default_of("n")
    """``--openenv-n``: episodes per episode test."""
    seed: int = default_of("seed")
    """``--openenv-seed``: episode i gets seed ``seed + i``."""
    id_prefix: str | None = default_of("id-prefix")
    """``--openenv-id-prefix``: ids become ``{prefix}-ep-000000``."""
    env_config: dict[str, Any] | None = default_of("env-config")
    """``--openenv-env-config``: env options (opponent, game params, dataset config)."""
    policy: str | None = None
    """The first ``--openenv-policy``; None: each env family's best teacher (``expert`` or
    ``scripted``)."""
    policies: tuple[str, ...] = ()
    """Every ``--openenv-policy``, in order (several: each plays the same episodes)."""
    agent_command: str | None = default_of("agent-command")
    """``--openenv-agent-command``: the program ``agent:command`` runs, a template."""
    agent_writable: tuple[str, ...] = ()
    """``--openenv-agent-writable``: folders an agent may write to besides its episode's."""
    system_prompt: str | None = default_of("system-prompt")
    """``--openenv-system-prompt``; None: the family's prompt; '' sends no system message."""
    max_turns: int | None = default_of("max-turns")
    """``--openenv-max-turns``; None: the family's (``EnvFamily.default_max_turns``)."""
    min_reward: float | None = default_of("min-reward")
    """``--openenv-min-reward``; None: the family's verdict."""
    judge_at: str | None = default_of("judge-at")
    """``--openenv-judge-at``: ``done`` or ``turn-limit``; None: the family's."""
    repeats: int = default_of("repeats")
    """``--openenv-repeats``: runs per seed (pass@k)."""
    timeout: float | None = default_of("timeout")
    """``--openenv-timeout``: wall-clock seconds per episode; over it the item errors."""
    concurrency: int | str = default_of("concurrency")
    """``--openenv-concurrency``: episodes in flight per pytest process, or ``auto``."""
    prompt_style: str = default_of("prompt-style")
    """``--openenv-prompt-style``: ``native`` or ``openenv`` (OpenEnv's harness wording)."""
    shard: Shard | None = default_of("shard")
    """``--openenv-shard``: the part of the episodes this process plays; None: all."""

    @property
    def config(self) -> dict[str, Any]:
        """``env_config`` as a dict (empty when not given)."""
        return dict(self.env_config or {})

    @property
    def named_policies(self) -> tuple[str, ...]:
        """The policies named for the run, in order (none: each family's teacher)."""
        return self.policies or ((self.policy,) if self.policy else ())


@dataclass(frozen=True)
class ServerSettings:
    """Deployed OpenEnv servers (``--openenv-server``); empty: the embedded engine."""

    urls: tuple[str, ...] = ()
    """The URLs as given, credentials included: for connecting only, never shown."""

    def public(self) -> list[str]:
        """The URLs without their credentials (records, metadata, messages)."""
        from ..util.endpoints import redact

        return [redact(url) for url in self.urls]


@dataclass(frozen=True)
class LLMSettings:
    """Model calls of the LLM policies: ``openai``, ``anthropic``, ``transformers`` (no keys:
    those come from the environment)."""

    model: str | None = None
    """The first ``--openenv-model``: the model id."""
    models: tuple[str, ...] = ()
    """Every ``--openenv-model``, in order (several: each plays the same episodes)."""

    @property
    def named_models(self) -> tuple[str, ...]:
        """The models named for the run, in order."""
        return self.models or ((self.model,) if self.model else ())

    def for_model(self, model: str | None) -> LLMSettings:
        """These settings for one of the models (``model`` None: as they are)."""
        if model is None or model == self.model:
            return self
        return dataclasses.replace(self, model=model)

    endpoint: str | None = default_of("llm-endpoint")
    """``--openenv-llm-endpoint``: an OpenAI-compatible base URL; None: the official API."""
    client: str = default_of("llm-client")
    """``--openenv-llm-client``: ``auto``, ``http`` or ``sdk`` (``policies/llm/``)."""
    temperature: float = default_of("temperature")
    """``--openenv-temperature``."""
    max_tokens: int = default_of("max-tokens")
    """``--openenv-max-tokens``: per model reply."""
    request_timeout: float = default_of("request-timeout")
    """``--openenv-request-timeout``: seconds one request may take, its answer included."""
    max_retries: int | None = default_of("max-retries")
    """``--openenv-max-retries``: transport retries per call; None keeps the SDK's."""
    cache: str | None = default_of("cache")
    """``--openenv-cache``: the response cache folder."""
    sampling_given: tuple[tuple[str, str], ...] = ()
    """The sampling options set on purpose (command line or ini), each with how it was
    set, e.g. ``("temperature", "--openenv-temperature=0.7")``: a policy that does not
    sample must not be handed them (``worker/what_plays.py``)."""
    replay: bool = default_of("replay")
    """``--openenv-replay``: a cache miss is an episode error, never a network call."""
    trust_remote_code: bool = default_of("trust-remote-code")
    """``--openenv-trust-remote-code``: a transformers checkpoint may run its own code."""
    model_dtype: str = default_of("model-dtype")
    """``--openenv-model-dtype``: the weights' type for a transformers checkpoint (``auto``:
    float32 on CPU, the checkpoint's own on GPU)."""

    def public(self, run: RunSettings) -> dict[str, Any]:
        """For metadata.json: what the LLM policies used, endpoint without credentials."""
        from ..util.endpoints import redact

        return {
            "model": self.model,
            **({"models": list(self.models)} if len(self.models) > 1 else {}),
            "endpoint": redact(self.endpoint) if self.endpoint else None,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout": run.timeout,
            "request_timeout": self.request_timeout,
            "max_retries": self.max_retries,
            "concurrency": run.concurrency,
            "cache": self.cache,
            "replay": self.replay,
            "trust_remote_code": self.trust_remote_code,
            "model_dtype": self.model_dtype,
        }


@dataclass(frozen=True)
class GateSettings:
    """What decides the exit code instead of single episode failures."""

    min_pass_rate: float | None = default_of("min-pass-rate")
    """``--openenv-min-pass-rate``: the session fails iff the pass rate is below it."""
    min_mean_reward: float | None = default_of("min-mean-reward")
    """``--openenv-min-mean-reward``: the session fails iff mean reward is below it."""
    confidence: float | None = default_of("gate-confidence")
    """``--openenv-gate-confidence``: gate on the lower bound at this level."""
    metric: str = default_of("gate-metric")
    """``--openenv-gate-metric``: ``pass@1``, ``pass@k`` or ``pass^k``."""
    baseline: str | None = default_of("baseline")
    """``--openenv-baseline``: an earlier summary.json or output folder."""
    baseline_any_env: bool = default_of("baseline-any-env")
    """``--openenv-baseline-any-env``: a baseline of another env is compared, not refused."""
    pooled: bool = default_of("gate-pooled")
    """``--openenv-gate-pooled``: judge the pooled figures, not each group."""
    model: str | None = default_of("gate-model")
    """``--openenv-gate-model``: the model (or policy) whose groups the gates judge; None:
    every group (with ``--openenv-gate-vs``, every other model's)."""
    vs: str | None = default_of("gate-vs")
    """``--openenv-gate-vs``: the model the gated one must not be significantly worse than."""


@dataclass(frozen=True)
class BudgetSettings:
    """What the run may spend (``controller/budget.py``) and what tokens cost."""

    prices: dict[str, dict[str, float]] | None = default_of("prices")
    """``--openenv-prices``: model -> USD per million ``input`` / ``output`` tokens."""
    max_cost: float | None = default_of("max-cost")
    """``--openenv-max-cost``: USD the run's episodes may cost before no more start."""
    max_total_tokens: int | None = default_of("max-total-tokens")
    """``--openenv-max-total-tokens``: tokens the run may use before no more episodes start."""
    episode_max_tokens: int | None = default_of("episode-max-tokens")
    """``--openenv-episode-max-tokens``: past it an episode ends as a failure (token_limit)."""
    strict: bool = default_of("strict-budget")
    """``--openenv-strict-budget``: an answer without readable usage stops a budgeted run."""

    def public(self) -> dict[str, Any]:
        return {
            "prices": self.prices,
            "max_cost_usd": self.max_cost,
            "max_total_tokens": self.max_total_tokens,
            "episode_max_tokens": self.episode_max_tokens,
            "strict": self.strict,
        }


@dataclass(frozen=True)
class OutputSettings:
    """The output folder and how rows are written into it."""

    folder: Path = Path("openenv-results")
    """``--openenv-output``, absolute (relative ones are taken from the invocation folder)."""
    resume: bool = default_of("resume")
    """``--openenv-resume``: skip episodes that finished (passed, or failed)."""
    resume_failed: bool = default_of("resume-failed")
    """``--openenv-resume-failed``: a resume plays failed episodes again (best of N)."""
    gate_best_of: bool = default_of("gate-best-of")
    """``--openenv-gate-best-of``: the gate judges best-of-N figures too."""
    train_on: str = default_of("train-on")
    """``--openenv-train-on``: ``verdict`` (results.jsonl holds episodes whose test and env
    verdict both passed) or ``test`` (every test-passed episode)."""
    tool_arguments: str = TOOL_ARGUMENT_FORMS[0]
    """``--openenv-tool-arguments``: ``string`` (OpenAI wire form) or ``object``; when not
    given, ``string`` or the form the ``chat_template`` check chose (``controller/template``)."""
    tool_arguments_given: bool = False
    """Whether ``--openenv-tool-arguments`` was given (then the template check only checks it)."""
    chat_template: str | None = default_of("chat-template")
    """``--openenv-chat-template``: the model (id or path) whose chat template rows must fit."""
    progress: float | None = default_of("progress")
    """``--openenv-progress``: seconds between plain status lines off a terminal; None: off."""
    failure_reports: int | None = default_of("failure-reports")
    """``--openenv-failure-reports``: episode failures shown in full at the end; None: all."""
    inspect_log: Path | None = default_of("inspect-log")
    """``--openenv-inspect-log``: the folder of the inspect eval logs, absolute; None: none."""


@dataclass(frozen=True)
class PublishSettings:
    """Uploading the folder to the Hugging Face Hub (the token comes from env or login)."""

    repo: str | None = default_of("push-to-hub")
    """``--openenv-push-to-hub``: the dataset repo ``owner/name``."""
    private: bool = default_of("private")
    """``--openenv-private``: create the repo private."""
    commit_message: str | None = default_of("commit-message")
    """``--openenv-commit-message``; None: episodes, env and pass rate."""
    license: str | None = default_of("license")
    """``--openenv-license``: the card's license id."""


@dataclass(frozen=True)
class JudgeSettings:
    """A judge model that decides episodes by a rubric (``policies/judging/``); its key, as
    every key, comes from the environment."""

    model: str | None = default_of("judge")
    """``--openenv-judge``: the judge's model id; None: the env's verdict decides."""
    endpoint: str | None = default_of("judge-endpoint")
    """``--openenv-judge-endpoint``; None: ``--openenv-llm-endpoint``, else the official API."""
    rubric: str | None = default_of("judge-rubric")
    """``--openenv-judge-rubric``: the rubric's text (an ``@FILE`` already read); None: the
    built-in one."""

    @property
    def active(self) -> bool:
        return self.model is not None


@dataclass(frozen=True)
class Settings:
    """The run configuration shared by controller and workers."""

    run: RunSettings = RunSettings()
    servers: ServerSettings = ServerSettings()
    llm: LLMSettings = LLMSettings()
    gate: GateSettings = GateSettings()
    output: OutputSettings = OutputSettings()
    publish: PublishSettings = PublishSettings()
    budget: BudgetSettings = BudgetSettings()
    judge: JudgeSettings = JudgeSettings()

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        values = read_values(config)
        too_many = check_item_count(values["n"], values["repeats"], f"--openenv-n={values['n']}")
        if too_many:
            raise pytest.UsageError(too_many)
        seeds = check_seed_range(values["seed"], values["n"], f"--openenv-seed={values['seed']}")
        if seeds:
            raise pytest.UsageError(seeds)
        output = values["output"]
        folder = Path(os.path.expanduser(output)) if output else None
        if folder is None:
            folder = Path(config.rootpath) / "openenv-results"
            if values["shard"] is not None:  # shards on one filesystem never share a folder
                folder = folder / values["shard"].folder_name
        elif not folder.is_absolute():
            folder = Path(config.invocation_params.dir) / folder
        values["output"] = folder
        logs = values["inspect-log"]
        swallowed = swallowed_test_path(list(config.invocation_params.args), logs, config)
        if swallowed:
            raise pytest.UsageError(swallowed)
        if logs is not None:
            logs = Path(logs) if logs else folder / INSPECT_LOGS_DEFAULT
            values["inspect-log"] = (
                logs if logs.is_absolute() else Path(config.invocation_params.dir) / logs
            )
        if values["policy"] is None and values["llm-endpoint"]:
            values["policy"] = ("openai",)  # an endpoint without a policy means its client
        settings = cls.from_values(values)
        given = tuple(
            (flag, how) for flag in SAMPLING_OPTIONS if (how := given_as(config, flag)) is not None
        )
        if given:
            llm = dataclasses.replace(settings.llm, sampling_given=given)
            settings = dataclasses.replace(settings, llm=llm)
        return settings

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> Settings:
        """Settings from option values by flag (``read_values``); missing ones take defaults."""
        groups: dict[str, dict[str, Any]] = {field.name: {} for field in dataclasses.fields(cls)}
        for opt in OPTIONS:
            if opt.flag in values:
                group, _, name = opt.into.partition(".")
                groups[group][name] = values[opt.flag]
        groups["servers"]["urls"] = tuple(groups["servers"].get("urls") or ())
        # the first of a repeatable name is what a one-model run reads
        for group, many, one in (("run", "policies", "policy"), ("llm", "models", "model")):
            listed = groups[group].get(many)
            listed = (listed,) if isinstance(listed, str) else tuple(listed or ())
            groups[group][many] = listed
            groups[group][one] = listed[0] if listed else None
        output = groups["output"]
        output["tool_arguments_given"] = output.get("tool_arguments") is not None
        if output.get("tool_arguments") is None:
            output["tool_arguments"] = TOOL_ARGUMENT_FORMS[0]
        return cls(**{name: GROUPS[name](**fields) for name, fields in groups.items()})

    def public(self) -> dict[str, Any]:
        """For metadata.json: plain values, never secrets (an env-config credential is
        shown as ``***``: ``util/secrets.withhold_config``)."""
        from ..util.secrets import withhold_config

        run = self.run
        return {
            "env": run.env,
            "n": run.n,
            "seed": run.seed,
            "env_config": withhold_config(run.config),
            "policy": run.policy,
            **({"policies": list(run.policies)} if len(run.policies) > 1 else {}),
            "system_prompt": run.system_prompt,
            "max_turns": run.max_turns,
            "output": str(self.output.folder),
            "resume": self.output.resume,
            "train_on": self.output.train_on,
            "resume_failed": self.output.resume_failed,
            "min_reward": run.min_reward,
            "judge_at": run.judge_at,
            "tool_arguments": self.output.tool_arguments,
            "chat_template": self.output.chat_template,
            "inspect_log": str(self.output.inspect_log) if self.output.inspect_log else None,
            "prompt_style": run.prompt_style,
            "servers": self.servers.public(),
            "llm": self.llm.public(run),
            "budget": self.budget.public(),
        }


#: the class of each ``Settings`` group, by the name ``Option.into`` uses
GROUPS: dict[str, type] = {
    "run": RunSettings,
    "servers": ServerSettings,
    "llm": LLMSettings,
    "gate": GateSettings,
    "output": OutputSettings,
    "publish": PublishSettings,
    "budget": BudgetSettings,
    "judge": JudgeSettings,
}


def swallowed_test_path(args: list[str], logs: str | None, config: pytest.Config) -> str | None:
    """``--openenv-inspect-log tests/``: argparse gave the test path to the option as its
    folder (the value may follow the flag), and the run would collect nothing of it."""
    if not logs or "--openenv-inspect-log" not in args:
        return None
    after = args.index("--openenv-inspect-log") + 1
    if after >= len(args) or args[after] != logs:
        return None
    path = Path(config.invocation_params.dir) / logs.partition("::")[0]
    tests = path.is_dir() and any(
        next(path.rglob(pattern), None) is not None for pattern in ("test_*.py", "*_test.py")
    )
    if not ("::" in logs or logs.endswith(".py") or tests):
        return None
    return (
        f"--openenv-inspect-log took {logs!r} as the folder of its logs, and it is a test "
        "path: write --openenv-inspect-log=DIR for a folder of your choice, or "
        f"--openenv-inspect-log= {logs} (or the option after the paths) for the default "
        "folder inside the output folder"
    )


def check_output_writable(folder: Path) -> None:
    """Fail before any episode if the output folder cannot be created or written.

    Creates nothing: the plugin writes nothing until an episode reports.
    """
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise pytest.UsageError(
            f"--openenv-output={str(folder)!r} is not usable: {probe} exists and is not a "
            "directory; pass a folder path that is writable"
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise pytest.UsageError(
            f"--openenv-output={str(folder)!r} is not writable ({probe} denies write access); "
            "pass a folder path that is writable"
        )
