"""The wire: an episode's ``EpisodeOutcome`` crosses from worker to controller intact."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pytest_openenv.episode.outcome import EpisodeOutcome, outcome_of
from pytest_openenv.episode.record import dumps_record, placeholder_row, with_failure
from pytest_openenv.episode.spec import EpisodeSpec

ENV = "openspiel:tic_tac_toe"


def played_outcome() -> EpisodeOutcome:
    """An outcome with every figure away from its default."""
    spec = EpisodeSpec(
        env=ENV, index=3, seed=103, repeat=1, repeats=2, policy="openai", config="{}", model="m"
    )
    row = placeholder_row(spec, "lost", test=f"t.py::test[{spec.episode_id}]")
    row["metrics"].update(prompt_tokens=11, completion_tokens=5, cost_usd=0.25, wall_time_s=1.5)
    row["reward"] = -0.5
    with_failure(row, "failed", "lost")
    outcome = EpisodeOutcome.of_row(
        spec.episode_id, row, dumps_record(row), detail="reward=-0.5 turns=0 loss", usage_unknown=2
    )
    return dataclasses.replace(outcome, turns=4, verdict=True)


def round_trip(config: pytest.Config, outcome: EpisodeOutcome) -> pytest.TestReport:
    report = pytest.TestReport(
        "t.py::test[ep-000003-r1]", ("t.py", 0, "test"), {}, "failed", None, "call"
    )
    report.openenv_outcome = outcome  # type: ignore[attr-defined]
    data = config.hook.pytest_report_to_serializable(config=config, report=report)
    sent = json.loads(json.dumps(data))  # what xdist can send: JSON types only
    rebuilt = config.hook.pytest_report_from_serializable(config=config, data=sent)
    assert isinstance(rebuilt, pytest.TestReport)
    return rebuilt


def test_an_outcome_survives_pytest_s_report_serialization_unchanged(
    pytester: pytest.Pytester,
) -> None:
    config = pytester.parseconfigure("-p", "no:xdist")
    outcome = played_outcome()
    rebuilt = outcome_of(round_trip(config, outcome))
    assert isinstance(rebuilt, EpisodeOutcome)
    assert rebuilt == outcome
    assert dataclasses.asdict(rebuilt) == {**dataclasses.asdict(outcome), "row": None}


def test_an_outcome_keeps_its_row_dict_only_in_its_own_process(
    pytester: pytest.Pytester,
) -> None:
    config = pytester.parseconfigure("-p", "no:xdist")
    outcome = played_outcome()
    row = json.loads(outcome.line or "")
    kept = dataclasses.replace(outcome, row=row)
    assert "row" not in kept.to_wire()
    rebuilt = outcome_of(round_trip(config, kept))
    assert rebuilt is not None and rebuilt.row is None and rebuilt.line == outcome.line


def test_a_report_without_a_row_sends_only_its_episode_id(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure("-p", "no:xdist")
    bare = EpisodeOutcome("ep-000003-r1")
    assert bare.to_wire() == {"episode_id": "ep-000003-r1"}
    assert outcome_of(round_trip(config, bare)) == bare


#: a plugin of the test's own: what the controller finds on each episode report
CONTROLLER_PROBE = """
import json

import pytest

ON_WORKER = []

def pytest_configure(config):
    ON_WORKER.append(hasattr(config, "workerinput"))

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    import pytest_openenv.episode.outcome as wire
    if ON_WORKER[0]:
        return
    found = getattr(report, wire.OUTCOME_ATTR, None)
    if found is None:
        return
    with open("seen.jsonl", "a") as out:
        out.write(json.dumps({
            "when": report.when,
            "type": type(found).__name__,
            "figures": getattr(found, "has_figures", None),
            "line": getattr(found, "line", None) is not None,
        }) + "\\n")
"""


def test_the_controller_of_an_xdist_run_receives_episode_outcomes(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(outcome_probe=CONTROLLER_PROBE)
    pytester.syspathinsert()
    result = run_pytest(
        f"--openenv-env={ENV}", "--openenv-n=4", "--openenv-policy=random", "-n", "2",
        "-p", "outcome_probe",
    )  # fmt: skip
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    seen = [json.loads(line) for line in (pytester.path / "seen.jsonl").read_text().splitlines()]
    # the controller's hook sees each of the 4 items' 3 reports (workers log none here)
    assert len(seen) == 12
    assert {entry["type"] for entry in seen} == {"EpisodeOutcome"}
    calls = [entry for entry in seen if entry["when"] == "call"]
    assert len(calls) == 4 and all(entry["figures"] and entry["line"] for entry in calls)
