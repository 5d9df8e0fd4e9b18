"""The ``reasoning_gym`` family: any reasoning_gym dataset, one question per episode.

``reasoning_gym:chain_sum`` asks the question of ``create_dataset("chain_sum",
size=1, seed=episode seed, **env_config)``; the agent answers with one tool,
``answer(answer)``; the dataset's ``score_answer`` is the verifier, and a fully
correct answer (score >= 1.0) passes. The ``scripted`` policy plays the oracle
answer, so a pipeline can be smoke-tested without a model.

Remote episodes speak OpenEnv's reasoning_gym server: reset ``{dataset_name,
dataset_config, seed, size}``, action ``{answer}``, observation ``{question,
score, correct_answer}``. The server builds the same size-1 dataset from the same
seed, so the oracle (computed here when reasoning_gym is installed) still holds.

Generating a question runs the dataset's own code, which a config can make
endless (``{"min_terms": 100000000}`` for chain_sum). Each generation waits at
most ``PYTEST_OPENENV_GENERATION_TIMEOUT`` seconds (default 60): the first
question is generated at start-up, so such a config is a usage error before any
episode; a slow question later is that episode's error. (A thread cannot be
killed: the abandoned generation goes on in the background until the process ends.)
"""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from typing import Any, ClassVar

from ...errors import GenerationTimeout
from ...util.envseconds import seconds_from_env
from ..base import (
    ActionRejected,
    Backend,
    EnvConfigError,
    EnvFamily,
    ProposedCall,
    StepResult,
    ToolSpec,
    single_argument,
)
from . import openenv_style

#: create_dataset arguments the family sets itself
RESERVED_KEYS = ("seed", "size")
#: size-1 datasets kept per process (one per episode seed in flight, plus slack)
CACHE_SIZE = 256
INSTALL_HINT = "pip install 'pytest-openenv[reasoning-gym]'"
#: environment variable: seconds generating one question may take
GENERATION_TIMEOUT_ENV = "PYTEST_OPENENV_GENERATION_TIMEOUT"
DEFAULT_GENERATION_TIMEOUT = 60.0


def generation_timeout() -> float:
    try:
        return seconds_from_env(GENERATION_TIMEOUT_ENV, DEFAULT_GENERATION_TIMEOUT)
    except ValueError as exc:
        raise EnvConfigError(str(exc)) from None


def first_entry(dataset: Any, seconds: float) -> dict[str, Any]:
    """``dataset[0]``, or ``GenerationTimeout`` after ``seconds`` (the work is abandoned)."""
    outcome: dict[str, Any] = {}

    def generate() -> None:
        try:
            outcome["entry"] = dataset[0]
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=generate, name="reasoning-gym-question", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise GenerationTimeout(f"no question after {seconds:g}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["entry"]


def _import_reasoning_gym() -> Any | None:
    try:
        import reasoning_gym
    except ImportError:
        return None
    return reasoning_gym


class ReasoningGymFamily(EnvFamily):
    name: ClassVar[str] = "reasoning_gym"
    default_min_reward: ClassVar[float] = 1.0
    system_prompt: ClassVar[str] = (
        "You solve reasoning tasks. Work the problem out, then call the answer tool "
        "exactly once with your final answer only (no explanation, no units unless asked)."
    )
    prompt_styles: ClassVar[tuple[str, ...]] = ("native", "openenv")

    def __init__(self, variant: str, config: dict[str, Any]) -> None:
        super().__init__(variant, config)
        reserved = sorted(set(config) & set(RESERVED_KEYS))
        if reserved:
            raise EnvConfigError(
                f"reasoning_gym env config may not set {reserved}: the episode seed is the "
                "dataset seed and every episode is one question (size 1); pass only the "
                f"dataset's own options, e.g. {{'min_terms': 2, 'max_terms': 4}}"
            )
        self._rg = _import_reasoning_gym()
        self._lock = threading.Lock()
        #: seed -> (size-1 dataset, its question entry)
        self._datasets: OrderedDict[int, tuple[Any, dict[str, Any]]] = OrderedDict()
        #: question text -> oracle answer, so remote episodes get a scripted move too
        self._oracle: OrderedDict[str, str] = OrderedDict()
        if self._rg is not None:
            self._validate()

    # -- validation -------------------------------------------------------------
    def _validate(self) -> None:
        from reasoning_gym.factory import DATASETS

        names = sorted(DATASETS)
        if self.variant not in DATASETS:
            close = difflib.get_close_matches(self.variant, names, n=5, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise EnvConfigError(
                f"unknown reasoning_gym dataset {self.variant!r}{hint} "
                f"(reasoning_gym has {len(names)} datasets, e.g. chain_sum, leg_counting, "
                "basic_arithmetic)"
            )
        try:
            self.question_for(0, seconds=generation_timeout())
        except GenerationTimeout as exc:
            raise EnvConfigError(
                f"{exc}; use a config whose questions take seconds, not minutes"
            ) from None
        except Exception as exc:  # dataset configs raise TypeError/ValueError/AssertionError
            raise EnvConfigError(
                f"reasoning_gym could not build {self.variant!r} with env config "
                f"{self.config}: {type(exc).__name__}: {exc}"
            ) from None

    def bind_servers(self, servers: tuple[str, ...]) -> None:
        super().bind_servers(servers)
        if not servers and self._rg is None:
            raise EnvConfigError(
                f"the reasoning_gym family needs reasoning_gym to run embedded: {INSTALL_HINT} "
                "(or pass --openenv-server URL of an OpenEnv reasoning_gym server)"
            )

    # -- datasets and the oracle ---------------------------------------------------
    def question_for(self, seed: int, seconds: float | None = None) -> tuple[Any, dict[str, Any]]:
        """The size-1 dataset of one episode seed and its question (cached: the backend and
        the oracle share it), generated within ``seconds`` (default: the generation timeout).
        """
        with self._lock:
            if seed in self._datasets:
                self._datasets.move_to_end(seed)
                return self._datasets[seed]
        if self._rg is None:
            raise EnvConfigError(f"reasoning_gym is not installed: {INSTALL_HINT}")
        dataset = self._rg.create_dataset(self.variant, size=1, seed=seed, **self.config)
        try:
            entry = first_entry(dataset, generation_timeout() if seconds is None else seconds)
        except GenerationTimeout as exc:
            raise GenerationTimeout(
                f"reasoning_gym {self.variant!r} with env config {self.config} generated {exc} "
                f"for seed {seed} (set {GENERATION_TIMEOUT_ENV} to wait longer)"
            ) from None
        with self._lock:
            self._datasets[seed] = (dataset, entry)
            while len(self._datasets) > CACHE_SIZE:
                self._datasets.popitem(last=False)
        return dataset, entry

    def _remember_oracle(self, seed: int) -> None:
        if self._rg is None:
            return
        entry = self.question_for(seed)[1]
        with self._lock:
            self._oracle[str(entry["question"])] = str(entry["answer"])
            while len(self._oracle) > CACHE_SIZE:
                self._oracle.popitem(last=False)

    def _oracle_answer(self, current: StepResult) -> str | None:
        question = current.observation.get("question")
        if question is None:
            return None
        with self._lock:
            return self._oracle.get(str(question))

    # -- EnvFamily -------------------------------------------------------------------
    def default_system_prompt(self) -> str:
        # OpenEnv's harness records no system message (openenv collect gives an LLM teacher
        # its own, outside the transcript)
        return "" if self.prompt_style == "openenv" else self.system_prompt

    def tools(self) -> list[ToolSpec]:
        if self.prompt_style == "openenv":
            return [openenv_style.ANSWER]
        return [
            ToolSpec(
                name="answer",
                description="Submit your final answer to the question. Ends the episode.",
                parameters={
                    "type": "object",
                    "properties": {
                        "answer": {
                            "type": "string",
                            "description": "The final answer only, as text.",
                        }
                    },
                    "required": ["answer"],
                    "additionalProperties": False,
                },
            )
        ]

    def embedded_backend(self) -> Backend:
        from .engine import ReasoningGymEngine

        if self._rg is None:
            raise EnvConfigError(f"reasoning_gym is not installed: {INSTALL_HINT}")
        return ReasoningGymEngine(self.question_for)

    def remote_backend(self, server_url: str) -> Backend:
        from ..remote.backend import RemoteBackend

        return RemoteBackend(server_url)

    action_fields: ClassVar[tuple[str, ...]] = ("answer",)

    def hosted_by(self, report: Any) -> dict[str, Any] | None:
        """The dataset a server serves: from its state (``dataset_name``, ``dataset_config``),
        the reset's metadata ``task`` (OpenEnv's reasoning_gym server) or the entry's
        ``dataset_metadata.source_dataset``."""
        state = report.state or {}
        first = report.first
        name = state.get("dataset_name")
        if not name and first is not None:
            entry = first.observation.get("dataset_metadata")
            name = first.metadata.get("task") or (
                entry.get("source_dataset") if isinstance(entry, dict) else None
            )
        if not isinstance(name, str) or not name:
            return None
        hosted: dict[str, Any] = {"dataset_name": name}
        if isinstance(state.get("dataset_config"), dict):
            hosted["dataset_config"] = state["dataset_config"]
        return hosted

    def hosting_mismatch(self, hosted: dict[str, Any]) -> str | None:
        name = hosted["dataset_name"]
        if self.variant != "composite" and name != self.variant:
            return f"it serves reasoning_gym dataset {name!r}, not {self.variant!r}"
        config = hosted.get("dataset_config")
        if config is not None and config != self.config:
            return (
                f"it serves {name} with dataset config {config}, but the env config asks for "
                f"{self.config}"
            )
        return None

    def reset_options(self, *, seed: int, episode_id: str) -> dict[str, Any]:
        self._remember_oracle(seed)
        return {"dataset_name": self.variant, "dataset_config": dict(self.config), "size": 1}

    def describe_task(self, first: StepResult) -> str:
        if self.prompt_style == "openenv":
            return openenv_style.task_prompt(first)
        question = first.observation.get("question")
        if not question:
            return "The environment sent no question. Call the answer tool with an empty answer."
        return f"{question}\n\nCall the answer tool with your final answer."

    def describe_result(self, call: ProposedCall, result: StepResult) -> str:
        if self.prompt_style == "openenv":
            return openenv_style.tool_result(call, result)
        score = result.observation.get("score")
        score = result.reward if score is None else score
        shown = "none" if score is None else f"{float(score):g}"
        parts = [f"Submitted answer: {call.arguments.get('answer')!s}.", f"Score: {shown}."]
        correct = result.observation.get("correct_answer")
        if correct is not None:
            parts.append(f"Correct answer: {correct}.")
        return " ".join(parts)

    def to_action(self, call: ProposedCall, current: StepResult) -> dict[str, Any]:
        answer = single_argument(call, "answer", "answer", "your final answer as a string")
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            # Models often send numbers bare; the verifier compares text.
            answer = str(answer)
        if not isinstance(answer, str):
            raise ActionRejected(
                f"answer must be a string, got {answer!r} ({type(answer).__name__})"
            )
        return {"answer": answer}

    def builtin_policy_problem(self, policy: str) -> str | None:
        if policy == "random":
            return (
                "a reasoning_gym question has no list of legal answers to draw from at "
                "random (scripted plays the oracle answer)"
            )
        return None

    def scripted_call(self, current: StepResult) -> ProposedCall | None:
        answer = self._oracle_answer(current)
        return None if answer is None else ProposedCall("answer", {"answer": answer})

    def task_info(self, first: StepResult, prompt: str) -> dict[str, Any]:
        return {"prompt": prompt, "answer": self._oracle_answer(first)}

    def outcome(self, reward: float, done: bool, status: str | None = None) -> str:
        # words for the answer (a score of 1 is correct), whatever threshold the run sets
        if not done:
            return "unanswered"
        if reward >= self.default_min_reward:
            return "correct"
        return "partial" if reward > 0 else "wrong"
