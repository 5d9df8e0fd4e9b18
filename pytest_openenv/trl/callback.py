"""``EvalCallback``: the model being trained, judged every N steps by a pytest-openenv run.

Each evaluation is a whole run in this process (``pytest.main``: the bundled episode test
on one env, or a suite file), whose policy is the trainer's model as it is at that step (the
``transformers`` policy over the model and tokenizer in memory; nothing is saved unless
``keep_best`` asks). So each step leaves a normal output folder (``results.jsonl``,
``failures.jsonl``, ``summary.json``, ``report.html``) with the run's own figures and gate,
and the evaluations pair up seed by seed: each against step 0 and against the best before
it, by the exact McNemar test the plugin's baselines use (``best.py`` says which is best).
"""

from __future__ import annotations

import json
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from transformers import Trainer, TrainerCallback

from ..errors import EvaluationRunFailed
from ..policies.llm.checkpoint import Checkpoint
from ..policies.llm.template_fit import probe
from ..policies.llm.transformers_local import LocalSampling, TransformersPolicy
from ..report.paired import Outcome, compare_pair
from ..util.endpoints import redact
from ..util.render_bound import bounded_render
from .best import BEST_RULES, BestRule, is_new_best, rule_text, save_checkpoint

#: exit codes after which a run's summary.json holds its figures (episodes or a gate failed)
WITH_FIGURES = (0, 1)
#: the prefix of every key an evaluation logs
PREFIX = "openenv/"


class TrainedModelPolicy(TransformersPolicy):
    """The ``transformers`` policy over a model and tokenizer already in memory.

    No prompt blocks are kept between turns (``prefixes``): the weights change with every
    training step, and blocks encoded by an earlier model would be stale. No response cache
    either (``cache_identity`` None): the same conversation gets a new answer each step.
    """

    name: ClassVar[str] = "transformers"

    def __init__(self, model: Any, tokenizer: Any, label: str, sampling: LocalSampling) -> None:
        template = str(getattr(tokenizer, "chat_template", None) or "")
        checkpoint = Checkpoint(
            spec=label, source=label, folder=Path(), gguf_file=None, chat_template=template
        )
        super().__init__(checkpoint, sampling, None)
        self._in_memory = (model, tokenizer)

    def _load(self) -> tuple[Any, Any, Any]:
        import torch

        model, tokenizer = self._in_memory

        def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            with bounded_render(f"the chat template of {self.model}"):
                return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)

        self.fit = probe(render)
        self.prefixes = None
        return torch, tokenizer, model

    def cache_identity(self) -> None:  # type: ignore[override]
        return None


def _policy_fixture(policy: TrainedModelPolicy) -> types.ModuleType:
    """A plugin whose ``openenv_policy`` fixture is the trained model's policy (a module:
    pytest reads a plugin object's fixtures from its class, a module's from the module)."""

    @pytest.fixture(scope="session", name="openenv_policy")
    def openenv_policy() -> TrainedModelPolicy:
        return policy

    plugin = types.ModuleType("pytest_openenv_trained_model")
    plugin.openenv_policy = openenv_policy  # type: ignore[attr-defined]
    return plugin


class _Override:
    """Registers ``_policy_fixture`` last, so its fixture wins over the plugin's default."""

    def __init__(self, policy: TrainedModelPolicy) -> None:
        self.policy = policy

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.pluginmanager.register(_policy_fixture(self.policy), "pytest-openenv-trained-model")


def read_outcomes(folder: Path) -> dict[Any, Outcome]:
    """(test, env, seed, episode id) -> (passed, reward; None when the episode errored),
    from the rows: the same episode of two runs on the same seeds has the same key (a
    suite's tests may share an env and seeds, so the test is part of it)."""
    outcomes: dict[Any, Outcome] = {}
    for name in ("results.jsonl", "failures.jsonl"):
        path = folder / name
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            errored = (row.get("failure") or {}).get("outcome") == "error"
            key = (row.get("test"), row.get("env"), row.get("seed"), row.get("episode_id"))
            outcomes[key] = (bool(row.get("passed")), None if errored else row.get("reward"))
    return outcomes


class EvalCallback(TrainerCallback):
    """Evaluates the model being trained at step 0 and every ``every`` steps.

    ``env``: an env spec (``openspiel:tic_tac_toe``), played on ``n`` fixed seeds from
    ``seed`` (keep them apart from the training seeds); or ``suite``: a pytest-openenv
    suite file or folder, whose tests, markers and gates run instead. ``server``: a
    deployed OpenEnv server (a URL, or several) the episodes play on, as
    ``--openenv-server``. ``pytest_args``: more arguments for every run
    (``--openenv-max-turns=5``, ``--openenv-env-config=...``); ``min_pass_rate`` adds
    ``--openenv-min-pass-rate``. ``max_tokens`` and ``temperature`` are the model's
    sampling (0: greedy). Each evaluation's output folder is ``output/step-000010``.

    Logged at each evaluation (under ``openenv/``): ``pass_rate`` with its Wilson interval
    (``pass_rate_low``, ``pass_rate_high``), ``mean_reward``, ``tokens``, ``episodes``;
    after step 0, ``p_vs_step0`` and ``p_vs_best`` (two-sided exact McNemar on the paired
    seeds, against step 0 and against the best evaluation before this one, whose step is
    ``vs_best_step``), then ``best_step`` (the best so far, this one included) and
    ``new_best`` (1 when this evaluation became the best). Attached to the trainer
    (``attach``), the figures go through ``Trainer.log`` to every ``report_to`` logger and
    ``state.log_history``; given only in ``callbacks=``, they go to ``state.log_history``
    alone (a callback is not handed the trainer).

    The best so far (``best_by``): step 0, then each evaluation with a higher pass rate
    than the best's (``higher``), or only one that passes significantly more of the same
    seeds (``significant``: exact McNemar at ``1 - confidence``). ``keep_best`` saves the
    model of each new best to ``output/best`` (``save_pretrained``, the tokenizer beside
    it, and ``openenv_best.json`` naming its step and its evaluation's folder).

    The gate, from the first evaluation after step 0: training stops when a run fails its
    gate (``stop_on_gate``: ``min_pass_rate``, or any gate in ``pytest_args`` or the suite),
    or when the pass rate fell significantly below step 0's (``stop_on_drop``: McNemar at
    ``1 - confidence``). ``stopped_because`` then says why.
    """

    def __init__(
        self,
        env: str | None = None,
        *,
        suite: str | Path | None = None,
        server: str | Sequence[str] | None = None,
        n: int = 20,
        seed: int = 10_000,
        every: int = 10,
        output: str | Path = "openenv-evals",
        pytest_args: Sequence[str] = (),
        min_pass_rate: float | None = None,
        stop_on_gate: bool = True,
        stop_on_drop: bool = False,
        best_by: BestRule = "higher",
        keep_best: bool = False,
        confidence: float = 0.95,
        max_tokens: int = 256,
        temperature: float = 0.0,
        request_timeout: float = 600.0,
    ) -> None:
        if (env is None) == (suite is None):
            raise ValueError("EvalCallback needs one of env= (an env spec) or suite= (a path)")
        if every < 1:
            raise ValueError(f"EvalCallback(every={every}): evaluate every 1 or more steps")
        if best_by not in BEST_RULES:
            raise ValueError(
                f"EvalCallback(best_by={best_by!r}): one of {', '.join(map(repr, BEST_RULES))}"
            )
        self.env = env
        self.suite = None if suite is None else Path(suite)
        self.servers = (server,) if isinstance(server, str) else tuple(server or ())
        self.n = n
        self.seed = seed
        self.every = every
        self.output = Path(output)
        self.pytest_args = list(pytest_args)
        if min_pass_rate is not None:
            self.pytest_args.append(f"--openenv-min-pass-rate={min_pass_rate}")
        self.stop_on_gate = stop_on_gate
        self.stop_on_drop = stop_on_drop
        self.best_by: BestRule = best_by
        self.keep_best = keep_best
        self.confidence = confidence
        self.sampling = LocalSampling(
            temperature=temperature,
            max_tokens=max_tokens,
            request_timeout=request_timeout,
            timeout=None,
        )
        self.trainer: Trainer | None = None
        #: each evaluation's logged figures, with its step and folder
        self.evaluations: list[dict[str, Any]] = []
        #: the step of the best evaluation so far (None before step 0's)
        self.best_step: int | None = None
        #: the folder ``keep_best`` saved the best model to (None: none saved)
        self.best_checkpoint: Path | None = None
        #: why the gate stopped training; None: it did not
        self.stopped_because: str | None = None
        self._outcomes: dict[int, dict[Any, Outcome]] = {}
        self._rates: dict[int, float | None] = {}

    def attach(self, trainer: Trainer) -> EvalCallback:
        """Add this callback to ``trainer`` and log through it (its loggers see the figures)."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    # -- the trainer's events -------------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step not in self._outcomes:
            self.evaluate(state, control, kwargs["model"], kwargs["processing_class"])
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.every == 0 and state.global_step not in self._outcomes:
            self.evaluate(state, control, kwargs["model"], kwargs["processing_class"])
        return control

    # -- one evaluation ---------------------------------------------------------------
    def run_args(self, folder: Path) -> list[str]:
        args = ["-p", "no:cacheprovider", "-q", f"--openenv-output={folder}"]
        if self.suite is not None:
            args.append(str(self.suite))
        else:
            args += [f"--openenv-env={self.env}", f"--openenv-n={self.n}"]
            args.append(f"--openenv-seed={self.seed}")
        args += [f"--openenv-server={server}" for server in self.servers]
        return args + self.pytest_args

    def shown_args(self, folder: Path) -> list[str]:
        """``run_args`` as a message may show them: server URLs without their passwords."""
        prefix = "--openenv-server="
        return [
            prefix + redact(arg[len(prefix) :]) if arg.startswith(prefix) else arg
            for arg in self.run_args(folder)
        ]

    def play(self, step: int, model: Any, processing_class: Any) -> Path:
        """One run with the model as it is now; its output folder."""
        folder = self.output / f"step-{step:06d}"
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        policy = TrainedModelPolicy(model, tokenizer, f"trained model, step {step}", self.sampling)
        was_training = bool(getattr(model, "training", False))
        model.eval()
        try:
            code = int(pytest.main(self.run_args(folder), plugins=[_Override(policy)]))
        finally:
            policy.close()
            if was_training:
                model.train()
        if code not in WITH_FIGURES or not (folder / "summary.json").exists():
            raise EvaluationRunFailed(
                f"the evaluation at step {step} ended with exit code {code} and no figures "
                f"(pytest arguments: {' '.join(self.shown_args(folder))}); its output is above"
            )
        return folder

    def evaluate(self, state: Any, control: Any, model: Any, processing_class: Any) -> None:
        step = int(state.global_step)
        folder = self.play(step, model, processing_class)
        models = {"model": model, "processing_class": processing_class}
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        figures = summary.get("figures") or {}
        low, high = figures.get("pass_rate_ci95") or (None, None)
        entry: dict[str, Any] = {
            f"{PREFIX}pass_rate": figures.get("pass_rate"),
            f"{PREFIX}pass_rate_low": low,
            f"{PREFIX}pass_rate_high": high,
            f"{PREFIX}mean_reward": figures.get("mean_reward"),
            f"{PREFIX}tokens": (figures.get("prompt_tokens") or 0)
            + (figures.get("completion_tokens") or 0),
            f"{PREFIX}episodes": figures.get("episodes"),
        }
        outcomes = read_outcomes(folder)
        comparisons = self.pair(step, outcomes, entry)
        self._outcomes[step] = outcomes
        self._rates[step] = entry[f"{PREFIX}pass_rate"]
        new_best = self.best_step is None or is_new_best(
            self.best_by,
            entry[f"{PREFIX}pass_rate"],
            self._rates[self.best_step],
            comparisons["best"],
        )
        if new_best:
            self.best_step = step
        entry[f"{PREFIX}best_step"] = self.best_step
        entry[f"{PREFIX}new_best"] = int(new_best)
        record = {"step": step, "folder": str(folder), **entry, "paired": comparisons}
        if new_best and self.keep_best:
            record["checkpoint"] = str(self.keep(step, folder, entry, comparisons, models))
        (folder / "training_eval.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
        self.evaluations.append(record)
        self.log(state, entry)
        if step > 0:
            self.gate(step, summary.get("gate"), comparisons.get("step 0"), control)

    def keep(
        self,
        step: int,
        folder: Path,
        entry: dict[str, Any],
        comparisons: dict[str, Any],
        models: dict[str, Any],
    ) -> Path:
        """Save the model of a new best evaluation to ``output/best``."""
        vs_best = comparisons.get("best")
        record = {
            "step": step,
            "evaluation": folder.name,
            "evaluation_folder": str(folder.resolve()),
            "pass_rate": entry[f"{PREFIX}pass_rate"],
            "pass_rate_ci95": [entry[f"{PREFIX}pass_rate_low"], entry[f"{PREFIX}pass_rate_high"]],
            "rule": rule_text(self.best_by, self.confidence),
            "previous_best": None
            if vs_best is None
            else {
                "step": entry[f"{PREFIX}vs_best_step"],
                "paired_episodes": vs_best["paired_episodes"],
                "only_this_passed": vs_best["pass"]["only_a_passed"],
                "only_previous_passed": vs_best["pass"]["only_b_passed"],
                "p_value": vs_best["pass"]["p_value"],
                "test": vs_best["pass"]["test"],
            },
        }
        self.best_checkpoint = save_checkpoint(
            self.output / "best", models["model"], models["processing_class"], record
        )
        return self.best_checkpoint

    def pair(
        self, step: int, outcomes: dict[Any, Outcome], entry: dict[str, Any]
    ) -> dict[str, Any]:
        """This evaluation against step 0 and against the best before it (McNemar)."""
        if not self._outcomes or self.best_step is None:
            return {}
        first = min(self._outcomes)
        found = {}
        for name, earlier in (("step 0", first), ("best", self.best_step)):
            found[name] = compare_pair(
                f"step {step}",
                f"step {earlier}",
                outcomes,
                self._outcomes[earlier],
                self.confidence,
            )
        entry[f"{PREFIX}p_vs_step0"] = found["step 0"]["pass"]["p_value"]
        entry[f"{PREFIX}p_vs_best"] = found["best"]["pass"]["p_value"]
        entry[f"{PREFIX}vs_best_step"] = self.best_step
        return found

    def gate(
        self, step: int, gate: dict[str, Any] | None, vs_first: dict[str, Any] | None, control: Any
    ) -> None:
        reason = None
        if self.stop_on_gate and gate and gate.get("passed") is False:
            checks = [c.get("detail") or c.get("rule") for c in gate.get("checks") or []]
            reason = f"the run at step {step} failed its gate ({'; '.join(map(str, checks))})"
        elif self.stop_on_drop and vs_first is not None:
            verdict = vs_first["pass"]
            if verdict["better"] == vs_first["b"]:
                reason = (
                    f"step {step} passes significantly fewer seeds than step 0 "
                    f"(exact McNemar p = {verdict['p_value']:.3g})"
                )
        if reason is not None:
            self.stopped_because = reason
            control.should_training_stop = True

    def log(self, state: Any, entry: dict[str, Any]) -> None:
        figures = {key: value for key, value in entry.items() if value is not None}
        if self.trainer is not None:
            # the base class's log: GRPOTrainer's own would take (and clear) its pending metrics;
            # and a log clears the trainer's should_log, which would drop this step's own entry
            # of loss and rewards, so it is put back as the step had it
            should_log = self.trainer.control.should_log
            Trainer.log(self.trainer, figures)
            self.trainer.control.should_log = should_log
        else:
            state.log_history.append({**figures, "step": int(state.global_step)})
