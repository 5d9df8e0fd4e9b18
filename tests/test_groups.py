"""Figures per group: (test function, env, model or policy), never one pooled figure.

Three tests of one file on different envs and policies, and two models on the same seeds
against the loopback OpenAI-compatible server: each group gets its own terminal line, its
entry in summary.json's ``groups``, its own gate verdict, its pairing with the baseline's
group, and its row in the step summary and the card. Every expected figure is computed here
from the rows the run wrote.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl
from llm_helpers import ENV, clean_sdk_env_fixture, dist  # noqa: F401 - fixture
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer

THREE_TESTS = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=4, policy="expert")
def test_expert(episode):
    assert episode.passed, episode.explain()

@pytest.mark.openenv("openspiel:tic_tac_toe", n=8, policy="random", seed=3)
def test_random(episode):
    assert episode.passed, episode.explain()

@pytest.mark.openenv("reasoning_gym:chain_sum", n=3)
def test_chain(episode):
    assert episode.passed, episode.explain()
"""

#: (test function, env, policy) of each test of THREE_TESTS, in the order groups are listed
GROUPS = [
    ("test_three.py::test_chain", "reasoning_gym:chain_sum", "scripted"),
    ("test_three.py::test_expert", "openspiel:tic_tac_toe", "expert"),
    ("test_three.py::test_random", "openspiel:tic_tac_toe", "random"),
]
RANDOM_LABEL = "test_three.py::test_random · openspiel:tic_tac_toe · random"


def folder(pytester: pytest.Pytester) -> Path:
    return pytester.path / "openenv-results"


def summary(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((folder(pytester) / "summary.json").read_text())


def rows_by_group(pytester: pytest.Pytester) -> dict[tuple[str, str, str], list[dict]]:
    """Each written row with the outcome its file gives, by (test function, env, arm)."""
    out: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for name, passed in (("results.jsonl", True), ("failures.jsonl", False)):
        for row in read_jsonl(folder(pytester) / name):
            key = (row["test"].rpartition("[")[0], row["env"], row["model"] or row["policy"])
            out[key].append({**row, "written_passed": passed})
    return dict(out)


def wilson(passed: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = passed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_three_tests_in_one_file_give_a_line_a_summary_entry_and_a_gate_verdict_each(
    run_pytest, pytester: pytest.Pytester, workers: int
) -> None:
    pytester.makepyfile(test_three=THREE_TESTS)
    result = run_pytest("--openenv-min-pass-rate=0.85", *dist(workers))
    played = rows_by_group(pytester)
    assert sorted(played) == GROUPS
    random_rows = played[GROUPS[2]]
    random_rate = sum(r["written_passed"] for r in random_rows) / len(random_rows)
    assert random_rate < 0.85, "the random player must lose some games for this test"
    pooled_passed = sum(r["written_passed"] for rows in played.values() for r in rows)
    pooled_n = sum(len(rows) for rows in played.values())
    assert pooled_passed / pooled_n >= 0.85, "the pooled rate must hide the random group's"

    # summary.json: one entry per group, with its key fields and its own figures
    data = summary(pytester)
    groups = data["groups"]
    assert [(g["test"], g["env"], g["policy"]) for g in groups] == GROUPS
    for group in groups:
        rows = played[(group["test"], group["env"], group["policy"])]
        passed = sum(r["written_passed"] for r in rows)
        assert (group["ran"], group["passed"], group["model"]) == (len(rows), passed, None)
        assert group["pass_rate_ci95"] == pytest.approx(list(wilson(passed, len(rows))))
        rewards = [r["reward"] for r in rows]
        assert group["mean_reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert data["figures"]["pooled"] is True and data["figures"]["group_count"] == 3
    assert data["figures"]["ran"] == pooled_n

    # the gate judged each group: the random one failed, and the verdict names it
    assert result.ret == 1, result.stdout.str()
    gate = data["gate"]
    assert gate["failed_groups"] == [RANDOM_LABEL]
    checks = {c["group"]: c for c in gate["checks"] if c["check"] == "pass rate"}
    assert sorted(checks) == sorted(g["label"] for g in groups)
    assert not checks[RANDOM_LABEL]["passed"]
    assert checks[RANDOM_LABEL]["value"] == pytest.approx(random_rate)
    assert all(c["passed"] for label, c in checks.items() if label != RANDOM_LABEL)

    # the terminal: a line per group first, the pooled figures after, labelled
    text = result.stdout.str()
    section = text[text.index("= openenv =") :]
    assert section.index("groups: 3") < section.index("pooled (all groups)")
    assert section.index("pooled (all groups)") < section.index("pass rate:")
    result.stdout.fnmatch_lines(
        [
            "groups: 3 (test, env, policy / model)*",
            "*test*env*policy / model*passed*pass rate (95% CI)*mean reward*tokens*cost*",
            "*test_three.py::test_chain*reasoning_gym:chain_sum*scripted*3/3*100.0%*",
            "*test_three.py::test_expert*openspiel:tic_tac_toe*expert*4/4*100.0%*",
            f"*test_three.py::test_random*openspiel:tic_tac_toe*random*"
            f"{sum(r['written_passed'] for r in random_rows)}/{len(random_rows)}*",
            "pooled (all groups)*",
        ]
    )
    result.stdout.fnmatch_lines([f"*[[]FAIL[]] pass rate [[]{RANDOM_LABEL}[]]*"])
    result.stdout.fnmatch_lines([f"*failed group(s): {RANDOM_LABEL}"])
    # the card and report.html show the table of groups too
    card = (folder(pytester) / "README.md").read_text()
    assert "## Figures per group" in card and "## Pooled figures (all groups)" in card
    assert "| `test_three.py::test_random` | `openspiel:tic_tac_toe` | `random` |" in card
    page = (folder(pytester) / "report.html").read_text()
    assert 'id="groups"' in page and 'id="chart-group"' in page


@pytest.mark.slow
def test_the_pooled_gate_option_judges_every_group_together(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_three=THREE_TESTS)
    result = run_pytest("--openenv-min-pass-rate=0.85", "--openenv-gate-pooled")
    played = rows_by_group(pytester)
    pooled = [r["written_passed"] for rows in played.values() for r in rows]
    assert sum(pooled) / len(pooled) >= 0.85
    assert result.ret == 0, result.stdout.str()
    gate = summary(pytester)["gate"]
    assert gate["config"]["judges"] == "pooled"
    (check,) = gate["checks"]
    assert check["group"] == "pooled (all groups)"
    assert check["value"] == pytest.approx(sum(pooled) / len(pooled))
    result.stdout.fnmatch_lines(["*[[]ok  []] pass rate [[]pooled (all groups)[]]*"])


def test_one_group_keeps_the_summary_as_it_was(run_pytest, pytester: pytest.Pytester) -> None:
    result = run_pytest(ENV, "--openenv-n=3", "--openenv-min-pass-rate=0.5")
    assert result.ret == 0, result.stdout.str()
    text = result.stdout.str()
    assert "groups:" not in text and "pooled" not in text
    result.stdout.fnmatch_lines(["env: openspiel:tic_tac_toe    policy: expert", "episodes: 3 *"])
    data = summary(pytester)
    (group,) = data["groups"]
    assert (group["env"], group["policy"], group["ran"]) == ("openspiel:tic_tac_toe", "expert", 3)
    assert data["figures"]["pooled"] is False
    assert "group" not in data["gate"]["checks"][0]


@pytest.mark.slow
def test_the_baseline_pairs_group_with_group_and_reports_a_new_one(
    run_pytest, pytester: pytest.Pytester
) -> None:
    two_tests = "\n@pytest.mark".join(THREE_TESTS.split("\n@pytest.mark")[:3])  # no chain
    pytester.makepyfile(test_three=two_tests)
    first = run_pytest("--openenv-output=before")
    assert first.ret == 1  # the random player loses some: no gate set
    pytester.makepyfile(test_three=THREE_TESTS)
    result = run_pytest("--openenv-baseline=before")
    data = summary(pytester)
    checks = {c["group"]: c for c in data["gate"]["checks"] if c["check"] == "baseline"}
    labels = [g["label"] for g in data["groups"]]
    assert sorted(checks) == sorted(labels)
    chain = next(label for label in labels if "test_chain" in label)
    # the new test has no group in the baseline: reported, not compared, not pooled
    assert checks[chain]["not_compared"] is True and checks[chain]["paired_with"] is None
    for label in labels:
        if label == chain:
            continue
        check = checks[label]
        # the same seeds on both sides: paired episode by episode with its own group
        assert check["paired"] is True
        assert check["paired_with"] == label
        group = next(g for g in data["groups"] if g["label"] == label)
        assert check["comparison"]["paired_episodes"] == group["ran"]
        assert check["comparison"]["newly_failing"] == 0  # seeded: the same games again
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"*[[]n/a []] baseline [[]{chain}[]]*not compared*"])


def test_a_baseline_that_holds_none_of_the_runs_groups_fails_the_gate(
    run_pytest, pytester: pytest.Pytester
) -> None:
    two_tests = "\n@pytest.mark".join(THREE_TESTS.split("\n@pytest.mark")[:3])  # no chain
    pytester.makepyfile(test_three=two_tests)
    run_pytest("--openenv-output=before")
    # the same games under new test names: every group is new to the baseline
    renamed = two_tests.replace("def test_expert", "def test_teacher")
    pytester.makepyfile(test_three=renamed.replace("def test_random", "def test_coin"))
    result = run_pytest("--openenv-baseline=before", "--openenv-min-pass-rate=0")
    assert result.ret == 1, result.stdout.str()
    checks = [c for c in summary(pytester)["gate"]["checks"] if c["check"] == "baseline"]
    assert [c.get("not_compared", False) for c in checks] == [True, True, False]
    assert checks[2]["passed"] is False
    assert sorted(checks[2]["not_compared_groups"]) == sorted(c["group"] for c in checks[:2])
    result.stdout.fnmatch_lines(
        ["*[[]FAIL[]] baseline*nothing compared*has none of this run's groups*test_coin*"]
    )
    assert "test_expert" in checks[2]["detail"]  # the baseline's own groups are named


FIRST, LAST = "first/model", "last-model"


@pytest.fixture(name="server")
def server_fixture() -> Any:
    server = OpenAICompatServer(Faults(by_model={LAST: "last"})).start()
    yield server
    server.stop()


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_two_models_give_a_group_each_and_the_gate_judges_both(
    run_pytest,
    pytester: pytest.Pytester,
    server: OpenAICompatServer,
    workers: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    step_summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    result = run_pytest(
        ENV,
        "--openenv-n=6",
        f"--openenv-llm-endpoint={server.base_url}",
        f"--openenv-model={FIRST}",
        f"--openenv-model={LAST}",
        "--openenv-min-pass-rate=1.0",
        *dist(workers),
    )
    played = rows_by_group(pytester)
    data = summary(pytester)
    groups = data["groups"]
    assert [(g["policy"], g["model"]) for g in groups] == [("openai", FIRST), ("openai", LAST)]
    for group in groups:
        rows = played[(group["test"], group["env"], group["model"])]
        assert group["ran"] == len(rows) == 6
        assert group["passed"] == sum(r["written_passed"] for r in rows)
        assert group["prompt_tokens"] == sum(r["metrics"]["prompt_tokens"] for r in rows)
    # both models' groups were judged, each on its own figures; every failing one is named
    judged = {c["group"]: c for c in data["gate"]["checks"] if c["check"] == "pass rate"}
    assert sorted(judged) == sorted(g["label"] for g in groups)
    failing = [g["label"] for g in groups if g["passed"] < g["ran"]]
    assert failing, "the fake models must lose some games for this test"
    assert data["gate"]["failed_groups"] == failing
    assert result.ret == 1
    # several models on the same seeds keep their paired comparison
    (pair,) = data["comparisons"]
    assert (pair["a"], pair["b"], pair["paired_episodes"]) == (FIRST, LAST, 6)
    result.stdout.fnmatch_lines(
        [
            "groups: 2 *",
            f"*openspiel:tic_tac_toe*openai / {FIRST}*",
            f"*openspiel:tic_tac_toe*openai / {LAST}*",
            "pooled (all groups)*",
        ]
    )
    markdown = step_summary.read_text()
    assert f"| `openai / {FIRST}` |" in markdown and "Pooled (all groups):" in markdown


def test_a_baseline_summary_without_groups_gets_them_from_its_rows(tmp_path: Path) -> None:
    from pytest_openenv.report.baseline import load_baseline

    def row(test: str, seed: int, passed: bool, model: str | None = None) -> str:
        return json.dumps(
            {
                "episode_id": f"ep-{seed:06d}",
                "test": f"{test}[ep-{seed:06d}]",
                "seed": seed,
                "env": "openspiel:tic_tac_toe",
                "policy": "openai" if model else "expert",
                "model": model,
                "passed": passed,
                "reward": 1.0 if passed else -1.0,
                "extra": {"repeat": 0},
            }
        )

    (tmp_path / "summary.json").write_text(json.dumps({"figures": {"passed": 3, "ran": 4}}))
    (tmp_path / "results.jsonl").write_text(
        "\n".join([row("t.py::a", 0, True), row("t.py::a", 1, True), row("t.py::b", 0, True, "m")])
        + "\n"
    )
    (tmp_path / "failures.jsonl").write_text(row("t.py::b", 1, False, "m") + "\n")
    baseline = load_baseline(str(tmp_path), relative_to=tmp_path)
    a = baseline.group(("t.py::a", "openspiel:tic_tac_toe", "expert"))
    b = baseline.group(("t.py::b", "openspiel:tic_tac_toe", "m"))
    assert a is not None and b is not None and len(baseline.groups) == 2
    assert (a.rates["pass@1"].successes, a.rates["pass@1"].trials) == (2.0, 2)
    assert (b.rates["pass@1"].successes, b.rates["pass@1"].trials) == (1.0, 2)
    assert b.outcomes == {("t.py::b", 0, 0): (True, 1.0), ("t.py::b", 1, 0): (False, -1.0)}
    assert a.label == "t.py::a · openspiel:tic_tac_toe · expert"
