"""Several models in one run, against the loopback OpenAI-compatible server.

The fake model plays differently per model name (``Faults.by_model``): ``first/model`` the
first legal move, ``last-model`` the last one, ``idle-model`` never calls a tool. Every
figure the plugin prints is checked against a computation made here from the rows: the
exact McNemar test from binomial coefficients, the signed-rank test by enumerating every
sign assignment, the cost as tokens x the price table.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from llm_helpers import (
    ENV,
    all_rows,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    dist,
    failures,
    output,
)
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer

FIRST, LAST, IDLE = "first/model", "last-model", "idle-model"
PRICES = {FIRST: {"input": 1.5, "output": 6.0}, LAST: {"input": 0.25, "output": 2.0}}


@pytest.fixture(name="server")
def server_fixture() -> Any:
    server = OpenAICompatServer(Faults(by_model={LAST: "last", IDLE: "no_tool_call"})).start()
    yield server
    server.stop()


def args(server: OpenAICompatServer, *models: str, n: int = 10, extra: tuple = ()) -> list[str]:
    return [
        ENV,
        f"--openenv-n={n}",
        f"--openenv-llm-endpoint={server.base_url}",
        *(f"--openenv-model={model}" for model in models),
        *extra,
    ]


def summary(pytester: pytest.Pytester, folder: str = "openenv-results") -> dict[str, Any]:
    return json.loads((pytester.path / folder / "summary.json").read_text())


def by_model(rows: dict[str, dict[str, Any]]) -> dict[str, dict[tuple[str, int], dict]]:
    out: dict[str, dict[tuple[str, int], dict]] = {}
    for row in rows.values():
        key = (row["test"].rpartition("[")[0], row["seed"])
        out.setdefault(row["model"], {})[key] = row
    return out


def mcnemar_by_hand(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def signed_rank_by_enumeration(differences: list[float]) -> float:
    """Two-sided p of the signed-rank sum: every sign assignment of the ranked magnitudes."""
    nonzero = [d for d in differences if d]
    if not nonzero:
        return 1.0
    magnitudes = sorted(abs(d) for d in nonzero)
    rank_of = {
        m: sum(i + 1 for i, x in enumerate(magnitudes) if x == m) / magnitudes.count(m)
        for m in magnitudes
    }
    ranks = [rank_of[abs(d)] for d in nonzero]
    observed = sum(r for r, d in zip(ranks, nonzero, strict=True) if d > 0)
    sums = [
        sum(r for r, s in zip(ranks, signs, strict=True) if s)
        for signs in itertools.product((0, 1), repeat=len(ranks))
    ]
    low = sum(1 for s in sums if s <= observed + 1e-9) / len(sums)
    high = sum(1 for s in sums if s >= observed - 1e-9) / len(sums)
    return min(1.0, 2 * min(low, high))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_two_models_play_the_same_seeds_and_are_compared_pairwise(
    run_pytest,
    pytester: pytest.Pytester,
    server: OpenAICompatServer,
    workers: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (pytester.path / "prices.json").write_text(json.dumps(PRICES))
    step_summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    result = run_pytest(
        *args(server, FIRST, LAST, extra=("--openenv-prices=prices.json",)), *dist(workers)
    )
    assert result.ret in (0, 1), result.stdout.str()
    # ids carry the model's id part; rows keep its exact name
    rows = all_rows(pytester)
    assert len(rows) == 20
    assert {r["episode_id"] for r in rows.values() if r["model"] == FIRST} == {
        f"first_model-ep-{i:06d}" for i in range(10)
    }
    played = by_model(rows)
    assert set(played) == {FIRST, LAST}
    assert set(played[FIRST]) == set(played[LAST])  # the same seeds
    assert {r["model"]: r["policy"] for r in rows.values()} == {FIRST: "openai", LAST: "openai"}
    # the server saw both model names, so the two really played differently
    assert {body["model"] for body in server.bodies} == {FIRST, LAST}

    figures = summary(pytester)
    models = {m["name"]: m for m in figures["models"]}
    assert [m["name"] for m in figures["models"]] == [FIRST, LAST]  # in the order named
    for name, mine in played.items():
        assert models[name]["passed"] == sum(r["passed"] for r in mine.values())
        assert models[name]["ran"] == 10
        # cost: tokens x the price table, per row, per model and for the run
        for row in mine.values():
            metrics = row["metrics"]
            expected = (
                metrics["prompt_tokens"] * PRICES[name]["input"]
                + metrics["completion_tokens"] * PRICES[name]["output"]
            ) / 1e6
            assert metrics["cost_usd"] == pytest.approx(expected, rel=1e-12)
        assert models[name]["cost_usd"] == pytest.approx(
            sum(r["metrics"]["cost_usd"] for r in mine.values())
        )
        assert models[name]["prompt_tokens"] == sum(
            r["metrics"]["prompt_tokens"] for r in mine.values()
        )
    assert figures["figures"]["cost_usd"] == pytest.approx(
        sum(r["metrics"]["cost_usd"] for r in rows.values())
    )

    # the paired tests, by hand
    (pair,) = figures["comparisons"]
    assert (pair["a"], pair["b"], pair["paired_episodes"]) == (FIRST, LAST, 10)
    keys = sorted(played[FIRST])
    only_first = sum(
        1 for k in keys if played[FIRST][k]["passed"] and not played[LAST][k]["passed"]
    )
    only_last = sum(1 for k in keys if played[LAST][k]["passed"] and not played[FIRST][k]["passed"])
    assert (pair["pass"]["only_a_passed"], pair["pass"]["only_b_passed"]) == (only_first, only_last)
    assert pair["pass"]["p_value"] == pytest.approx(mcnemar_by_hand(only_first, only_last))
    differences = [played[FIRST][k]["reward"] - played[LAST][k]["reward"] for k in keys]
    assert any(differences), "the two models should differ on some seed"
    assert pair["reward"]["p_value"] == pytest.approx(signed_rank_by_enumeration(differences))
    assert pair["reward"]["mean_difference"] == pytest.approx(sum(differences) / 10)
    assert pair["verdict"].startswith(f"{FIRST} vs {LAST}: no significant difference")
    result.stdout.fnmatch_lines(["models (same seeds):", f"*{FIRST}*10*", f"*{FIRST} vs {LAST}*"])

    markdown = step_summary.read_text()
    assert f"| `{FIRST}` | {models[FIRST]['passed']}/10 |" in markdown
    assert f"- `{FIRST}` vs `{LAST}`: no significant difference" in markdown
    card = (output(pytester) / "README.md").read_text()
    assert "## Models on the same seeds" in card and f"| `{LAST}` |" in card
    page = (output(pytester) / "report.html").read_text()
    assert 'id="models"' in page and f'data-model="{LAST}"' in page


HOSTILE_NAMES = ('m2|<a href="https://evil.example">click</a>', "m3```python")


def test_model_names_sit_in_code_spans_in_the_card_and_the_step_summary(
    run_pytest,
    pytester: pytest.Pytester,
    server: OpenAICompatServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A name holding a link or a fence makes neither a live link nor a block, anywhere."""
    from markdown_it import MarkdownIt

    step_summary = pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    result = run_pytest(*args(server, FIRST, *HOSTILE_NAMES, n=2))
    assert result.ret in (0, 1), result.stdout.str()
    card = (output(pytester) / "README.md").read_text()
    for name, text in (("card", card), ("step summary", step_summary.read_text())):
        tokens = MarkdownIt("commonmark").enable("table").parse(text)
        inline = [child for t in tokens for child in (t.children or [])]
        links = [t.attrs.get("href", "") for t in inline if t.type == "link_open"]
        assert not [href for href in links if "evil" in str(href)], name
        assert not [t for t in inline if t.type == "html_inline"], name
        assert not [t for t in tokens if t.type == "html_block" and "href" in t.content], name
        # no name opened a block that swallows what follows
        assert not [t for t in tokens if t.type == "fence" and "m3" in t.content], name
        assert not [t for t in tokens if t.type == "code_block"], name
        shown = {t.content for t in inline if t.type == "code_inline"}
        for model in HOSTILE_NAMES:
            assert model in shown, (name, model)  # in a code span, exactly
        rendered = MarkdownIt("commonmark").enable("table").render(text)
        assert '<a href="https://evil' not in rendered, name
    headings = [t.content for t in MarkdownIt().parse(card) if t.type == "inline"]
    assert {"Models on the same seeds", "Files", "Loading"} <= set(headings)


@pytest.mark.slow
def test_a_significant_difference_and_the_gate_against_another_model(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    common = (ENV, "--openenv-n=10", "--openenv-max-turns=3")
    common += (f"--openenv-llm-endpoint={server.base_url}",)
    models = (f"--openenv-model={FIRST}", f"--openenv-model={IDLE}")
    gate = ("--openenv-min-pass-rate=0", f"--openenv-gate-model={IDLE}")
    result = run_pytest(*common, *models, *gate, f"--openenv-gate-vs={FIRST}")
    figures = summary(pytester)
    played = by_model(all_rows(pytester))
    wins = sum(r["passed"] for r in played[FIRST].values())
    assert wins >= 5 and not any(r["passed"] for r in played[IDLE].values())
    (pair,) = figures["comparisons"]
    # IDLE never passes: FIRST alone passed every seed FIRST passed
    assert pair["pass"]["p_value"] == pytest.approx(mcnemar_by_hand(wins, 0)) == 2 / 2**wins
    assert pair["pass"]["better"] == FIRST
    assert pair["verdict"].startswith(f"{FIRST} is better than {IDLE} on pass rate")
    # the gate judged IDLE (not the first listed) and found it significantly worse
    assert result.ret == 1
    checks = {c["check"]: c for c in figures["gate"]["checks"]}
    assert checks["pass rate"]["value"] == 0.0
    assert not checks["vs"]["passed"]
    assert checks["vs"]["compared"] == pytest.approx(1 / 2**wins)  # one-sided: P(X >= wins)
    assert (checks["vs"]["only_vs_passed"], checks["vs"]["only_model_passed"]) == (wins, 0)
    result.stdout.fnmatch_lines(
        [f"*FAIL*vs [[]*{IDLE}[]]: {IDLE} not significantly worse than {FIRST}*"]
    )

    # the other way round the gate passes
    again = run_pytest(
        *common, *models, *gate[:1], f"--openenv-gate-model={FIRST}", "--openenv-gate-vs=" + IDLE
    )
    assert again.ret == 0, again.stdout.str()


def test_marker_models_and_policies(run_pytest, pytester: pytest.Pytester, server) -> None:
    pytester.makepyfile(
        test_pair=f"""
        import pytest

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=3, policy="openai",
                             models=[{FIRST!r}, {LAST!r}])
        def test_models(episode):
            assert episode.model in ({FIRST!r}, {LAST!r})

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=2, policies=["scripted", "random"])
        def test_policies(episode):
            pass
        """
    )
    result = run_pytest(
        f"--openenv-llm-endpoint={server.base_url}", f"--openenv-model={FIRST}", "-v"
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*test_models?last-model-ep-000002? PASSED*",
            "*test_policies?random-ep-000001? PASSED*",
        ]
    )
    rows = all_rows_by_test(pytester)
    assert Counter(r["model"] for r in rows["test_models"]) == {FIRST: 3, LAST: 3}
    assert Counter(r["policy"] for r in rows["test_policies"]) == {"scripted": 2, "random": 2}


def all_rows_by_test(pytester: pytest.Pytester) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name in ("results.jsonl", "failures.jsonl"):
        path = output(pytester) / name
        for line in path.read_text().splitlines() if path.exists() else []:
            row = json.loads(line)
            out.setdefault(row["test"].rpartition("::")[2].partition("[")[0], []).append(row)
    return out


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_a_run_budget_stops_cleanly_and_resume_completes_each_episode_once(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer, workers: int
) -> None:
    n = 12
    stopped = run_pytest(
        *args(server, FIRST, LAST, n=n, extra=("--openenv-max-total-tokens=1500",)),
        *dist(workers),
    )
    text = stopped.stdout.str()
    assert stopped.ret == pytest.ExitCode.INTERRUPTED, text
    first = summary(pytester)
    budget = first["budget"]
    assert budget["stopped"].startswith("run budget reached: ")
    assert "--openenv-max-total-tokens=1500" in budget["stopped"]
    assert budget["spent_tokens"] >= 1500
    rows = all_rows(pytester)  # each written once, the folder consistent
    assert 0 < len(rows) < 2 * n
    assert budget["not_started"] == 2 * n - first["figures"]["ran"] > 0
    assert first["figures"]["skipped"] == budget["not_started"]
    assert first["figures"]["episodes"] == 2 * n
    assert "episode(s) not started, reported as skipped" in text
    assert (output(pytester) / "report.html").exists()

    resumed = run_pytest(
        *args(server, FIRST, LAST, n=n, extra=("--openenv-resume",)), *dist(workers)
    )
    assert resumed.ret in (0, 1), resumed.stdout.str()
    rows = all_rows(pytester)  # fails on an episode written twice
    assert len(rows) == 2 * n
    assert Counter(r["model"] for r in rows.values()) == {FIRST: n, LAST: n}
    final = summary(pytester)
    assert final["figures"]["ran"] == 2 * n
    assert {m["name"]: m["ran"] for m in final["models"]} == {FIRST: n, LAST: n}
    assert final["comparisons"][0]["paired_episodes"] == n  # earlier passes are paired too
    assert final.get("budget") is None


def test_an_episode_over_its_token_limit_fails_with_the_reason(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    result = run_pytest(*args(server, FIRST, n=3, extra=("--openenv-episode-max-tokens=300",)))
    assert result.ret == 1
    rows = failures(pytester)
    assert len(rows) == 3
    for row in rows:
        assert row["failure"]["outcome"] == "failed"  # never an error
        assert "token_limit: the episode used" in row["failure"]["message"]
        used = row["metrics"]["prompt_tokens"] + row["metrics"]["completion_tokens"]
        assert used > 300
        # the reply that passed the limit is not in the transcript: no dangling tool call
        calls = [m for m in row["messages"] if m.get("tool_calls")]
        assert len(calls) == sum(1 for m in row["messages"] if m["role"] == "tool")
    assert summary(pytester)["figures"]["errored"] == 0


@pytest.mark.slow
def test_paired_baseline_against_an_earlier_folder_with_the_same_seeds(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    run_pytest(*args(server, FIRST, extra=("--openenv-output=before",)))
    before = {r["seed"]: r["passed"] for r in all_rows_in(pytester.path / "before")}
    run_pytest(*args(server, LAST, extra=("--openenv-baseline=before",)))
    now = {r["seed"]: r["passed"] for r in all_rows_in(output(pytester))}
    (check,) = summary(pytester)["gate"]["checks"]
    assert check["paired"] is True and "paired exact McNemar" in check["rule"]
    lost = sum(1 for seed in now if before[seed] and not now[seed])
    gained = sum(1 for seed in now if now[seed] and not before[seed])
    comparison = check["comparison"]
    assert (comparison["newly_failing"], comparison["newly_passing"]) == (lost, gained)
    by_hand = sum(math.comb(lost + gained, i) for i in range(lost, lost + gained + 1))
    assert comparison["p_value"] == pytest.approx(by_hand / 2 ** (lost + gained))

    # other seeds: the unpaired test, and the check says why
    run_pytest(*args(server, LAST, extra=("--openenv-baseline=before", "--openenv-seed=5")))
    (check,) = summary(pytester)["gate"]["checks"]
    assert check["paired"] is False and "two-proportion z-test" in check["rule"]
    assert "have no earlier episode with the same test, seed and repeat" in check["detail"]


def all_rows_in(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for name in ("results.jsonl", "failures.jsonl"):
        path = folder / name
        if path.exists():
            rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (
            (f"--openenv-model={FIRST}", f"--openenv-model={FIRST}"),
            "--openenv-model='first/model' is listed twice",
        ),
        (
            (f"--openenv-model={FIRST}", "--openenv-max-cost=1"),
            "--openenv-max-cost=1 needs --openenv-prices",
        ),
        ((f"--openenv-model={FIRST}", "--openenv-prices={not json"), "--openenv-prices="),
        (
            (f"--openenv-model={FIRST}", '--openenv-prices={"m": {"input": -1, "output": 0}}'),
            "'input' must be a number >= 0",
        ),
        (
            (f"--openenv-model={FIRST}", "--openenv-max-total-tokens=0"),
            "--openenv-max-total-tokens='0' is invalid",
        ),
        (
            (f"--openenv-model={FIRST}", "--openenv-episode-max-tokens=x"),
            "--openenv-episode-max-tokens='x'",
        ),
        (
            (f"--openenv-model={FIRST}", f"--openenv-model={LAST}", "--openenv-gate-vs=other"),
            "--openenv-gate-vs='other' is not one of the run's models",
        ),
        (("--openenv-model=a/b", "--openenv-model=a:b"), "would share the episode ids a_b-ep-"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer, extra: tuple, named: str
) -> None:
    result = run_pytest(ENV, "--openenv-n=2", f"--openenv-llm-endpoint={server.base_url}", *extra)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert named in result.stderr.str(), result.stderr.str()
    assert server.requests == 0


@pytest.mark.slow
def test_a_resume_with_other_models_is_refused(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    run_pytest(*args(server, FIRST, LAST, n=2))
    refused = run_pytest(*args(server, FIRST, IDLE, n=2, extra=("--openenv-resume",)))
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert '"first/model", "last-model"' in refused.stderr.str()
    assert "(--openenv-model)" in refused.stderr.str()


@pytest.mark.slow
def test_models_from_an_ini_file_and_replay_per_model(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    pytester.makeini(
        f"""
        [pytest]
        openenv_env = openspiel:tic_tac_toe
        openenv_n = 3
        openenv_model = {FIRST} {LAST}
        openenv_cache = cache
        """
    )
    endpoint = f"--openenv-llm-endpoint={server.base_url}"
    recorded = run_pytest(endpoint)
    assert recorded.ret in (0, 1), recorded.stdout.str()
    before = {k: (r["model"], r["reward"]) for k, r in all_rows(pytester).items()}
    assert Counter(model for model, _ in before.values()) == {FIRST: 3, LAST: 3}
    asked = server.requests
    replayed = run_pytest(endpoint, "--openenv-replay")
    assert replayed.ret == recorded.ret
    assert server.requests == asked  # every answer of both models came from the cache
    assert {k: (r["model"], r["reward"]) for k, r in all_rows(pytester).items()} == before


def test_a_budget_reached_by_the_last_episode_is_no_interruption(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    result = run_pytest(*args(server, FIRST, n=1, extra=("--openenv-max-total-tokens=1",)))
    assert result.ret in (0, 1), result.stdout.str()
    budget = summary(pytester)["budget"]
    assert budget["stopped"] is None and budget["not_started"] == 0
    assert budget["spent_tokens"] > 1


def test_policies_from_the_command_line_and_prices_from_a_toml_table(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    pytester.makepyprojecttoml(
        f"""
        [tool.pytest.ini_options]
        openenv_prices = {{ "{FIRST}" = {{ input = 3, output = 5 }} }}
        """
    )
    result = run_pytest(
        ENV,
        "--openenv-n=2",
        "--openenv-policy=scripted",
        "--openenv-policy=openai",
        f"--openenv-llm-endpoint={server.base_url}",
        f"--openenv-model={FIRST}",
        "-v",
    )
    assert result.ret in (0, 1), result.stdout.str()
    result.stdout.fnmatch_lines(["*test_episode?scripted-ep-000001? *", "*first_model-ep-000001*"])
    rows = all_rows(pytester)
    assert {r["policy"] for r in rows.values()} == {"scripted", "openai"}
    for row in rows.values():
        metrics = row["metrics"]
        expected = (metrics["prompt_tokens"] * 3 + metrics["completion_tokens"] * 5) / 1e6
        assert metrics["cost_usd"] == pytest.approx(expected)
        assert (metrics["cost_usd"] == 0) == (row["policy"] == "scripted")
    assert [m["name"] for m in summary(pytester)["models"]] == ["scripted", FIRST]


MODELS_MARKER = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, policy="openai", models={models})
def test_models(episode):
    pass
"""


@pytest.mark.slow
def test_a_marker_that_drops_a_model_is_refused_on_resume_not_duplicated(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    common = (f"--openenv-llm-endpoint={server.base_url}", f"--openenv-model={FIRST}")
    pytester.makepyfile(test_models=MODELS_MARKER.format(models=[FIRST, LAST]))
    assert run_pytest(*common).ret == 0
    before = (output(pytester) / "results.jsonl").read_bytes()
    pytester.makepyfile(test_models=MODELS_MARKER.format(models=[FIRST]))
    resumed = run_pytest(*common, "--openenv-resume")
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR, resumed.stdout.str()
    err = resumed.stderr.str()
    assert "results.jsonl holds test_models.py::test_models[first_model-ep-000000]" in err
    assert "would play again as test_models.py::test_models[ep-000000]" in err
    assert (output(pytester) / "results.jsonl").read_bytes() == before


@pytest.mark.slow
def test_changed_sampling_is_refused_on_resume_even_without_metadata(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    common = (ENV, "--openenv-n=2", f"--openenv-llm-endpoint={server.base_url}")
    assert run_pytest(*common, f"--openenv-model={FIRST}").ret in (0, 1)
    (output(pytester) / "metadata.json").unlink()
    resumed = run_pytest(
        *common, f"--openenv-model={FIRST}", "--openenv-resume", "--openenv-temperature=0.9"
    )
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR, resumed.stdout.str()
    err = resumed.stderr.str()
    assert 'played with sampling="{\\"max_tokens\\": 256, \\"temperature\\": 0.2}"' in err, err
    assert "--openenv-temperature" in err


@pytest.mark.slow
def test_a_pooled_gate_vs_one_model_judges_every_other_model(
    run_pytest, pytester: pytest.Pytester, server: OpenAICompatServer
) -> None:
    twin = "twin-model"  # plays as FIRST does: not worse than it
    models = (FIRST, twin, IDLE)
    gate = (f"--openenv-gate-vs={FIRST}", "--openenv-gate-pooled")
    result = run_pytest(*args(server, *models, extra=("--openenv-max-turns=3", *gate)))
    text = result.stdout.str()
    played = by_model(all_rows(pytester))
    wins = sum(r["passed"] for r in played[FIRST].values())
    assert wins >= 5 and not any(r["passed"] for r in played[IDLE].values())
    checks = {c["model"]: c for c in summary(pytester)["gate"]["checks"] if c["check"] == "vs"}
    # both models but the reference are judged, each over all its groups
    assert set(checks) == {twin, IDLE}, checks
    assert checks[twin]["passed"] and checks[twin]["group"] == f"pooled ({twin}, all its groups)"
    assert not checks[IDLE]["passed"]
    assert checks[IDLE]["compared"] == pytest.approx(1 / 2**wins)
    # the last model listed fails the run, as it does without --openenv-gate-pooled
    assert result.ret == 1, text
    assert "gate: FAILED" in text
    result.stdout.fnmatch_lines([f"*FAIL*vs [[]pooled ({IDLE}, all its groups)[]]*"])
