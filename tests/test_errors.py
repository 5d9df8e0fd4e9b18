"""Every exception of the package lives in ``pytest_openenv/errors.py``, sorted by outcome.

The hierarchy is what a handler relies on (``except InfrastructureFault`` means "the
item errors"), so it is pinned here; a new exception class defined anywhere else in
the package fails the first test.
"""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

import pytest_openenv
from pytest_openenv import errors

PACKAGE = Path(pytest_openenv.__file__).parent

#: what each exception makes of a run, as drawn in errors.py's docstring
OUTCOME = {
    errors.BadInput: [
        "EnvConfigError",
        "ServerURLError",
        "JSONTooDeep",
        "CorruptLine",
        "NotARegularFile",
        "IniValueUnreadable",
        "FolderLocked",
        "ServerMismatch",
        "TemplateNotFound",
        "TemplateFailure",
        "RenderTimeout",
        "CheckpointProblem",
        "ViewError",
        "RescoreError",
        "ShardsRefused",
        "HarnessParameterError",
        "TrainingSetupError",
        "AgentUnavailable",
    ],
    errors.InfrastructureFault: [
        "EpisodeError",
        "EpisodeTimeout",
        "JudgeFailed",
        "EnvUnavailable",
        "CannotConnect",
        "CapacityReached",
        "NoServerInRotation",
        "GenerationTimeout",
        "PolicyUnavailable",
        "AnswerTooLarge",
        "CacheUnwritable",
        "ServerUnreachable",
        "EndpointFault",
        "EndpointTimeout",
        "EndpointUnreachable",
        "EndpointStatus",
        "UpstreamError",
        "ExpertError",
        "AgentProgramFault",
    ],
    errors.AgentFault: ["ActionRejected", "StatefulRequest", "ContextExhausted"],
    errors.PushError: ["NotAnOutputFolder"],
    # a run started through OpenEnv's eval API that gave no figures (openenv_harness)
    errors.HarnessRunFailed: [],
    # an evaluation run inside training that gave no figures (trl.EvalCallback)
    errors.EvaluationRunFailed: [],
}

#: where each name was defined before errors.py, and is still importable from
OLD_HOMES = {
    "pytest_openenv.envs.base": ["EnvConfigError", "ActionRejected", "EnvUnavailable"],
    "pytest_openenv.episode.loop": ["EpisodeError", "EpisodeTimeout"],
    "pytest_openenv.policies.base": ["PolicyUnavailable", "ContextExhausted"],
    "pytest_openenv.util.endpoints": ["ServerURLError", "ServerUnreachable"],
    "pytest_openenv.util.jsonlimits": ["JSONTooDeep"],
    "pytest_openenv.envs.remote.hosting": ["ServerMismatch"],
    "pytest_openenv.envs.remote.backend": ["CannotConnect", "CapacityReached"],
    "pytest_openenv.envs.remote.rotation": ["NoServerInRotation"],
    "pytest_openenv.envs.reasoning_gym.family": ["GenerationTimeout"],
    "pytest_openenv.envs.openspiel.expert": ["ExpertError"],
    "pytest_openenv.dataset.hub": ["PushError", "NotAnOutputFolder"],
    "pytest_openenv.dataset.jsonl": ["CorruptLine", "NotARegularFile"],
    "pytest_openenv.dataset.lock": ["FolderLocked"],
    "pytest_openenv.dataset.chat_template.source": ["TemplateNotFound"],
    "pytest_openenv.dataset.chat_template.render": ["TemplateFailure"],
    "pytest_openenv.util.render_bound": ["RenderTimeout"],
    "pytest_openenv.report.view": ["ViewError"],
    "pytest_openenv.policies.llm.checkpoint": ["CheckpointProblem"],
}


def exception_classes_defined_outside_errors() -> list[str]:
    """``module:Class`` for every class in the package whose bases name an exception."""
    names = {name for name in dir(errors) if isinstance(getattr(errors, name), type)}
    names |= {name for name in dir(builtins) if name.endswith(("Error", "Exception"))}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {ast.unparse(base).rpartition(".")[2] for base in node.bases}
            if bases & (names | {"Exception", "BaseException"}):
                found.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    return found


def test_no_exception_class_is_defined_outside_errors_py() -> None:
    assert exception_classes_defined_outside_errors() == []


def test_every_exception_has_the_common_base_and_its_outcome() -> None:
    listed = {name for names in OUTCOME.values() for name in names}
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert defined - listed - {"OpenEnvError", *(base.__name__ for base in OUTCOME)} == set()
    for base, names in OUTCOME.items():
        assert issubclass(base, errors.OpenEnvError)
        for name in names:
            assert issubclass(getattr(errors, name), base), name
    # one outcome each: an exception is bad input, an error or the agent's doing, never two
    outcomes = [
        errors.BadInput,
        errors.InfrastructureFault,
        errors.AgentFault,
        errors.PushError,
        errors.HarnessRunFailed,
        errors.EvaluationRunFailed,
    ]
    for name in listed:
        assert sum(issubclass(getattr(errors, name), o) for o in outcomes) == 1, name


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("EnvConfigError", ValueError),
        ("ServerURLError", ValueError),
        ("JSONTooDeep", ValueError),
        ("CorruptLine", ValueError),
        ("ServerUnreachable", ConnectionError),
        ("TemplateNotFound", ValueError),
    ],
)
def test_builtin_bases_callers_catch_are_kept(name: str, builtin: type) -> None:
    assert issubclass(getattr(errors, name), builtin)
    with pytest.raises(builtin):
        raise getattr(errors, name)(*(("f.jsonl", 3, "bad") if name == "CorruptLine" else ("x",)))


@pytest.mark.parametrize("module", sorted(OLD_HOMES))
def test_old_import_paths_give_the_same_classes(module: str) -> None:
    loaded = importlib.import_module(module)
    for name in OLD_HOMES[module]:
        assert getattr(loaded, name) is getattr(errors, name)


def test_the_package_exports_the_base_and_the_env_exceptions() -> None:
    for name in ("OpenEnvError", "ActionRejected", "EnvUnavailable", "EnvConfigError"):
        assert name in pytest_openenv.__all__
        assert getattr(pytest_openenv, name) is getattr(errors, name)


def test_hierarchy_drawn_in_the_docstring_names_every_exception() -> None:
    doc = errors.__doc__ or ""
    for name, value in vars(errors).items():
        if isinstance(value, type) and issubclass(value, BaseException):
            assert f" {name} " in doc or doc.rstrip().endswith(name) or f" {name}\n" in doc, name
