"""Gates and budgets that a run of several models cannot fool, on the loopback OpenAI server.

Each model of a run misbehaves its own way (``Faults``): ``first/model`` plays the first
legal move, ``idle-model`` never calls a tool (it never passes), ``down-model``'s endpoint
answers 503 to every request, and a model may report lying ``usage``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from llm_helpers import (
    ENV,
    all_rows,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    dist,
)
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer

FIRST, IDLE, DOWN = "first/model", "idle-model", "down-model"
LIAR = "liar-model"
PRICES = {FIRST: {"input": 1.5, "output": 6.0}, LIAR: {"input": 1.0, "output": 1.0}}


@pytest.fixture(name="server")
def server_fixture() -> Any:
    faults = Faults(by_model={IDLE: "no_tool_call"}, status_by_model={DOWN: 503})
    server = OpenAICompatServer(faults).start()
    yield server
    server.stop()


def endpoint(server: OpenAICompatServer) -> str:
    return f"--openenv-llm-endpoint={server.base_url}"


def summary(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads((pytester.path / "openenv-results" / "summary.json").read_text())


def checks(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    return {check["check"]: check for check in summary(pytester)["gate"]["checks"]}


@pytest.mark.slow
def test_gate_vs_naming_the_first_model_gates_the_next_one_and_says_so_at_start(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    result = run_pytest(
        ENV,
        "--openenv-n=10",
        "--openenv-max-turns=3",
        endpoint(server),
        f"--openenv-model={FIRST}",
        f"--openenv-model={IDLE}",
        f"--openenv-gate-vs={FIRST}",
    )
    text = result.stdout.str()
    # said before the first episode: the header comes before any item's status
    head = text[: text.index("collected")]
    assert f"--openenv-gate-vs='{FIRST}' is the first model listed" in head, text
    assert f"they judge '{IDLE}' against it instead" in head
    # IDLE never passes: judged against FIRST it is significantly worse, and the run fails
    assert result.ret == 1, text
    vs = checks(pytester)["vs"]
    assert vs["model"] == IDLE and vs["vs"] == FIRST and not vs["passed"]
    assert vs["only_vs_passed"] >= 5 and vs["only_model_passed"] == 0
    result.stdout.fnmatch_lines([f"*FAIL*vs*: {IDLE} not significantly worse than {FIRST}*"])


@pytest.mark.slow
def test_gate_vs_naming_the_only_model_is_no_passing_comparison(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    result = run_pytest(
        ENV,
        "--openenv-n=2",
        "--openenv-max-turns=2",
        endpoint(server),
        f"--openenv-model={IDLE}",
        f"--openenv-gate-vs={IDLE}",
    )
    assert result.ret == 1, result.stdout.str()
    assert "is the gated model itself" in checks(pytester)["vs"]["detail"]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_a_reference_that_judged_no_episode_fails_the_vs_check(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer, workers: int
) -> None:
    result = run_pytest(
        ENV,
        "--openenv-n=6",
        "--openenv-max-turns=3",
        "--openenv-max-retries=0",
        endpoint(server),
        f"--openenv-model={IDLE}",
        f"--openenv-model={DOWN}",
        f"--openenv-gate-model={IDLE}",
        f"--openenv-gate-vs={DOWN}",
        *dist(workers),
    )
    text = result.stdout.str()
    models = {m["name"]: m for m in summary(pytester)["models"]}
    assert models[DOWN]["errored"] == 6 and models[IDLE]["passed"] == 0
    assert result.ret == 1, text
    vs = checks(pytester)["vs"]
    assert not vs["passed"]
    assert vs["detail"].startswith(f"{DOWN} judged no episode (6 errored)")
    result.stdout.fnmatch_lines([f"*[[]FAIL[]] vs*: {IDLE} not significantly worse than {DOWN}*"])


MARKED = f"""
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=3, policy="openai",
                     models=[{FIRST!r}, "unpriced-model"])
def test_models(episode):
    pass
"""


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_a_marker_model_missing_from_the_price_table_is_refused_under_a_cost_budget(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer, workers: int
) -> None:
    pytester.makepyfile(test_marked=MARKED)
    result = run_pytest(
        endpoint(server),
        f"--openenv-model={FIRST}",  # priced, and checked at start: the marker's other is not
        "--openenv-max-cost=0.01",
        "--openenv-prices=" + json.dumps(PRICES),
        "test_marked.py",
        *dist(workers),
    )
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + err
    assert "--openenv-max-cost=0.01: --openenv-prices has no price for 'unpriced-model'" in err
    assert "test_marked.py::test_models" in err
    assert server.requests == 0
    assert not (pytester.path / "openenv-results").exists()


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 10**400, "completion_tokens": 7, "total_tokens": 10**400},
        {"prompt_tokens": 10**300, "completion_tokens": 10**300},
    ],
    ids=["400-digit", "overflows-times-price"],
)
@pytest.mark.slow
def test_absurd_usage_numbers_are_unreadable_usage_never_an_internal_error(
    run_pytest, pytester: pytest.Pytester, usage: dict[str, int]
) -> None:
    faults = Faults(usage_by_model={LIAR: usage})
    with OpenAICompatServer(faults) as server:
        result = run_pytest(  # run_pytest fails on an INTERNALERROR or a traceback
            ENV,
            "--openenv-n=2",
            endpoint(server),
            f"--openenv-model={LIAR}",
            "--openenv-prices=" + json.dumps(PRICES),
            "--openenv-max-cost=5",
            "--openenv-progress=0.01",
        )
    assert result.ret in (0, 1), result.stdout.str()
    figures = summary(pytester)
    assert figures["figures"]["prompt_tokens"] == 0
    assert figures["figures"]["cost_usd"] == 0.0
    assert figures["budget"]["answers_without_usage"] >= 2
    for row in all_rows(pytester).values():
        assert row["metrics"]["prompt_tokens"] == 0
        assert row["metrics"]["cost_usd"] == 0.0
    assert (pytester.path / "openenv-results" / "report.html").exists()


@pytest.mark.parametrize(
    "usage",
    [None, {"prompt_tokens": -500, "completion_tokens": -9}],
    ids=["usage-null", "negative"],
)
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_usage_a_budget_cannot_count_warns_at_once_and_the_summary_says_so(
    run_pytest, pytester: pytest.Pytester, usage: Any, workers: int
) -> None:
    faults = Faults(usage_by_model={LIAR: usage})
    with OpenAICompatServer(faults) as server:
        budget = ("--openenv-max-total-tokens=100", "--openenv-max-cost=0.001")
        args = (ENV, "--openenv-n=4", endpoint(server), f"--openenv-model={LIAR}")
        args += ("--openenv-prices=" + json.dumps(PRICES), *budget, "-v")
        result = run_pytest(*args, *dist(workers))
        text = result.stdout.str()
        assert result.ret in (0, 1), text
        # warned as the first such answer came in, before the next episode's line
        warning = "openenv: WARNING: liar-model (in openenv::test_episode[ep-000000]) reported "
        if workers:
            warning = "openenv: WARNING: liar-model (in openenv::test_episode[ep-00000"
        assert warning in text, text
        assert text.count("cannot be enforced") == 1
        if not workers:
            assert text.index("cannot be enforced") < text.index("test_episode[ep-000001]")
        figures = summary(pytester)["budget"]
        assert figures["answers_without_usage"] >= 4
        assert "was not enforced" in figures["unenforced"]
        assert figures["stopped"] is None  # nothing counted: the run played on
        result.stdout.fnmatch_lines(["*WARNING: budget not enforced: * model answer(s) in 4 *"])

        # asked for strict budgets: the first such answer stops the run
        strict = run_pytest(*args, "--openenv-strict-budget", "-n", "0")
    assert strict.ret == pytest.ExitCode.INTERRUPTED, strict.stdout.str()
    stopped = summary(pytester)["budget"]
    assert "--openenv-strict-budget stops the run" in stopped["stopped"]
    assert stopped["not_started"] == 3


@pytest.mark.slow
def test_a_price_table_that_is_not_an_object_is_a_bad_value_not_a_missing_file(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    for value, kind in (("[1]", "a JSON list"), ("1", "a JSON number")):
        result = run_pytest(
            ENV,
            "--openenv-n=1",
            endpoint(server),
            f"--openenv-model={FIRST}",
            f"--openenv-prices={value}",
        )
        err = result.stderr.str()
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert f"--openenv-prices='{value}' is invalid: {kind}, not a non-empty JSON object" in err
        assert "does not exist" not in err.replace("no file of that name exists", "")
    assert server.requests == 0


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_a_misspelt_gate_vs_with_one_model_is_refused_before_any_episode(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer, workers: int
) -> None:
    result = run_pytest(
        ENV,
        "--openenv-n=3",
        endpoint(server),
        f"--openenv-model={FIRST}",
        "--openenv-gate-vs=typo",
        *dist(workers),
    )
    err = result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + err
    assert (
        f"--openenv-gate-vs='typo' is not a model or policy this run plays: it plays '{FIRST}'"
        in err
    )
    assert server.requests == 0


MODELS_IN_MARKER = f"""
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, models=[{FIRST!r}, {IDLE!r}])
def test_models(episode):
    pass
"""


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_marker_models_with_an_endpoint_need_no_model_option_and_metadata_names_who_played(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer, workers: int
) -> None:
    pytester.makepyfile(test_marked=MODELS_IN_MARKER)
    result = run_pytest(endpoint(server), "--openenv-max-turns=2", "test_marked.py", *dist(workers))
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    rows = all_rows(pytester)
    assert sorted(r["model"] for r in rows.values()) == [FIRST, FIRST, IDLE, IDLE]
    assert {body["model"] for body in server.bodies} == {FIRST, IDLE}
    metadata = json.loads((pytester.path / "openenv-results" / "metadata.json").read_text())
    assert metadata["settings"]["llm"]["model"] is None
    assert metadata["identity"]["model"] is None

    # a model option no test plays would be recorded as the run's: refused before the run
    asked = server.requests
    dummy = run_pytest(endpoint(server), "--openenv-model=unused", "test_marked.py")
    assert dummy.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-model='unused' (command line or ini openenv_model) is played by no" in (
        dummy.stderr.str()
    )
    assert server.requests == asked
    again = json.loads((pytester.path / "openenv-results" / "metadata.json").read_text())
    text = json.dumps(again)
    assert "unused" not in text, text[max(0, text.find("unused") - 300) :][:400]


@pytest.mark.slow
def test_a_test_without_models_still_needs_the_model_option(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    pytester.makepyfile(
        test_unmarked="""
        import pytest

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=1)
        def test_plain(episode):
            pass
        """
    )
    for workers in (0, 2):
        result = run_pytest(endpoint(server), "test_unmarked.py", *dist(workers))
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert "test_unmarked.py::test_plain: --openenv-policy=openai cannot be used: " in (
            result.stderr.str()
        )
        assert "--openenv-policy=openai needs --openenv-model" in result.stderr.str()
    assert server.requests == 0
    bundled = run_pytest(ENV, endpoint(server))
    assert bundled.ret == pytest.ExitCode.USAGE_ERROR
    assert "needs --openenv-model" in bundled.stderr.str()


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_episodes_a_budget_kept_from_starting_are_skipped_in_pytests_line_and_junit(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer, workers: int
) -> None:
    import xml.etree.ElementTree as ET

    result = run_pytest(
        ENV,
        "--openenv-n=10",
        endpoint(server),
        f"--openenv-model={FIRST}",
        "--openenv-max-total-tokens=1500",
        "--junitxml=junit.xml",
        "-rs",
        *dist(workers),
    )
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, text
    budget = summary(pytester)["budget"]
    left = budget["not_started"]
    assert left > 0
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped") == left, text
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 10 - left
    assert "not started: run budget reached" in text  # -rs gives the reason
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (int(suite.get("tests", 0)), int(suite.get("skipped", 0))) == (10, left)
    skipped = [case for case in suite.iter("testcase") if case.find("skipped") is not None]
    assert len(skipped) == left
    assert "--openenv-resume runs it" in skipped[0].find("skipped").get("message", "")
    # the plugin's own figures do not count them twice
    assert summary(pytester)["figures"]["skipped"] == left


@pytest.mark.slow
def test_a_gate_over_the_episodes_lf_re_ran_says_so_and_cannot_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import SCRIPTED, XDIST_WORKER_VARS, assert_clean

    for name in XDIST_WORKER_VARS:
        monkeypatch.delenv(name, raising=False)
    gate = ("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=20", "--openenv-min-pass-rate=0.9")
    first = pytester.runpytest_subprocess(*gate, SCRIPTED)  # the cache plugin on: --lf works
    assert_clean(first)
    failed = summary(pytester)["figures"]["failed"]
    assert first.ret == 1 and 0 < failed < 20
    # the episodes that failed, played again by a teacher that never loses
    again = pytester.runpytest_subprocess(*gate, "--openenv-policy=expert", "--lf")
    assert_clean(again)
    text = again.stdout.str()
    figures = summary(pytester)
    assert figures["figures"]["ran"] == failed and figures["figures"]["passed"] == failed
    assert again.ret == 1, text
    gate_json = figures["gate"]
    assert gate_json["checks_passed"] and not gate_json["passed"]
    assert f"--lf played only the {failed} episode(s) that failed last time" in gate_json["subset"]
    assert "judged a subset: --lf played only" in text
    # with --openenv-resume the folder's earlier rows are judged as well: no subset
    assert_clean(pytester.runpytest_subprocess(*gate, SCRIPTED))
    resumed = pytester.runpytest_subprocess(*gate, SCRIPTED, "--lf", "--openenv-resume")
    assert_clean(resumed)
    figures = summary(pytester)
    assert figures["gate"]["subset"] is None and figures["figures"]["ran"] == 20


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_an_episode_the_endpoint_fails_mid_way_keeps_its_turns_and_every_billed_token(
    run_pytest, pytester: pytest.Pytester, workers: int
) -> None:
    # every episode: two good answers, then a 500 with no retry left on its third turn (a
    # tic-tac-toe game cannot end in two moves)
    with OpenAICompatServer(Faults(status_by_turn={3: 500})) as server:
        result = run_pytest(
            ENV,
            "--openenv-n=3",
            endpoint(server),
            f"--openenv-model={FIRST}",
            "--openenv-max-retries=0",
            "--openenv-max-total-tokens=1000000",
            *dist(workers),
        )
        served = list(server.served)
    text = result.stdout.str()
    assert result.ret == 1, text
    rows = all_rows(pytester).values()
    assert len(rows) == 3 and len(served) == 6
    for row in rows:
        assert row["failure"]["outcome"] == "error", row["failure"]
        assert "HTTP 500" in row["failure"]["message"]
        # what was played before the fault: the answered turns, their transcript and tokens
        assert row["metrics"]["turns"] == 2
        assert [m["role"] for m in row["messages"]].count("assistant") == 2
        assert len(row["tool_trace"]) == 2
        assert row["metrics"]["prompt_tokens"] > 0 and row["metrics"]["completion_tokens"] > 0
    # every token the endpoint served is counted: the rows, the figures and the budget agree
    billed_in, billed_out = sum(p for p, _ in served), sum(c for _, c in served)
    assert sum(r["metrics"]["prompt_tokens"] for r in rows) == billed_in
    assert sum(r["metrics"]["completion_tokens"] for r in rows) == billed_out
    figures = summary(pytester)
    assert (figures["figures"]["prompt_tokens"], figures["figures"]["completion_tokens"]) == (
        billed_in,
        billed_out,
    )
    assert figures["budget"]["spent_tokens"] == billed_in + billed_out
