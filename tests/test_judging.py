"""A judge model decides episodes by a rubric (``--openenv-judge``, the ``judge`` fixture),
and ``python -m pytest_openenv rescore`` decides saved episodes again with no policy call.

The judge is ``servers/judge_server.py``: an OpenAI-compatible server whose verdict follows
the rubric, reached through the real ``openai`` client path of the package; the envs are
real OpenEnv servers (``servers/openenv_servers.py``: echo_env, a coding_env like OpenEnv's)
and the embedded tic-tac-toe engine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import played_rows, read_jsonl
from servers.judge_server import serve_judge
from servers.openenv_servers import serve_in_thread

POLICIES = """
def say_hello(messages, tools):
    return {"name": "step", "arguments": {"message": "hello"}}


def run_code(messages, tools):
    return {"name": "step", "arguments": {"code": "print(1)"}}
"""

#: the judge's key: it must never reach a file the run writes
JUDGE_KEY = "sk-judge-secret-7f3a9c"

#: env kind, env spec, policy, more options
ENVS = {
    "echo_env": ("echo", "openenv:echo_env", "policies:say_hello", ()),
    "coding_env": (
        "endless",
        "openenv:coding_env",
        "policies:run_code",
        ("--openenv-judge-at=turn-limit", "--openenv-max-turns=2"),
    ),
}
#: env -> (a word its transcripts show, a word they never show)
WORDS = {"echo_env": ("hello", "goodbye"), "coding_env": ("print(1)", "import os")}


@pytest.fixture
def policies(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(policies=POLICIES)


def summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def files_text(folder: Path) -> str:
    return "".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    )


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("env", sorted(ENVS))
def test_a_judge_decides_remote_env_episodes_by_the_rubric_pass_and_fail(
    run_pytest, pytester: pytest.Pytester, policies: None, env: str, workers: str
) -> None:
    kind, spec, policy, more = ENVS[env]
    shown, never = WORDS[env]
    with serve_in_thread(kind) as server, serve_judge() as judge:
        common = (
            f"--openenv-env={spec}",
            f"--openenv-server={server.url}",
            f"--openenv-policy={policy}",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            "--openenv-n=3",
            "-n",
            workers,
            *more,
        )
        passing = run_pytest(
            *common, f'--openenv-judge-rubric=The agent must say "{shown}"', "--openenv-output=a"
        )
        failing = run_pytest(
            *common, f'--openenv-judge-rubric=The agent must say "{never}"', "--openenv-output=b"
        )
        assert judge.judge_requests == 6
    assert passing.ret == pytest.ExitCode.OK, passing.stdout.str()[-3000:]
    passing.assert_outcomes(passed=3)
    assert failing.ret == pytest.ExitCode.TESTS_FAILED
    failing.assert_outcomes(failed=3)
    for folder, verdict in (("a", True), ("b", False)):
        rows = played_rows(pytester.path / folder)
        assert len(rows) == 3
        for row in rows:
            assert row["passed"] is verdict and row["verify_metrics"]["verdict"] is verdict
            assert row["judge"]["passed"] is verdict and row["judge"]["model"] == "judge-model"
            assert row["judge"]["score"] == (1.0 if verdict else 0.0)
            assert ("shows" if verdict else "never shows") in row["judge"]["reasoning"]
            assert row["extra"]["judged_by"] == "judge"
        figures = summary(pytester.path / folder)["judge"]
        assert (figures["judged"], figures["judge_passed"]) == (3, 3 if verdict else 0)
        assert figures["judge_errors"] == 0 and figures["prompt_tokens"] > 0
    # the failed episodes go to failures.jsonl with the judge's reasoning as their reason
    failed = read_jsonl(pytester.path / "b" / "failures.jsonl")
    assert all("the judge judge-model failed it" in r["extra"]["reason"] for r in failed)
    failing.stdout.fnmatch_lines(["*judge judge-model: 3 verdict(s), 0 passed; judge errors: 0*"])


@pytest.mark.parametrize("answer", ["answer prose", "answer nothing", "answer wrong-json"])
def test_a_judge_that_gives_no_verdict_makes_the_item_error_counted_apart(
    run_pytest, pytester: pytest.Pytester, answer: str
) -> None:
    with serve_judge() as judge:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=3",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            f"--openenv-judge-rubric=Judge it, {answer}",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=3)  # never failed: the agent did nothing wrong
    rows = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    assert [r["failure"]["outcome"] for r in rows] == ["error"] * 3
    for row in rows:
        assert row["judge"]["error"] and "judge judge-model" in row["failure"]["message"]
        assert row["messages"], "the played transcript is kept"
        assert row["judge"]["env_passed"] is True  # the expert never loses: the env's own
    figures = summary(pytester.path / "openenv-results")
    assert figures["figures"]["errored"] == 3 and figures["figures"]["failed"] == 0
    assert figures["judge"]["judge_errors"] == 3 and figures["judge"]["judged"] == 0
    result.stdout.fnmatch_lines(["*judge errors: 3 (their items errored*"])


def test_the_judge_fixture_decides_inside_a_test_and_its_failure_is_an_error(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        test_judged="""
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2)
def test_judged(episode, judge):
    verdict = judge(episode, 'The agent must say "play_move"')
    assert verdict.passed, verdict.explain()

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, seed=100)
def test_refused(episode, judge):
    assert judge(episode, "answer prose").passed
"""
    )
    with serve_judge() as judge:
        result = run_pytest(
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            '--openenv-judge-rubric=The agent must say "play_move"',
            "-n",
            "0",
        )
    result.assert_outcomes(passed=2, errors=2)
    rows = {
        r["test"].split("::")[1][:11] + r["episode_id"]: r
        for r in played_rows(pytester.path / "openenv-results")
    }
    judged = [r for key, r in rows.items() if key.startswith("test_judged")]
    refused = [r for key, r in rows.items() if key.startswith("test_refuse")]
    assert len(judged) == 2 and all(r["judge"]["passed"] for r in judged)
    assert len(refused) == 2
    assert all(r["failure"]["outcome"] == "error" and r["judge"]["error"] for r in refused)
    figures = summary(pytester.path / "openenv-results")["figures"]
    assert (figures["passed"], figures["failed"], figures["errored"]) == (2, 0, 2)


def test_cached_judge_calls_replay_with_the_endpoint_down_and_the_key_stays_out(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", JUDGE_KEY)
    common = (
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=3",
        "--openenv-judge=judge-model",
        "--openenv-judge-rubric=The agent wins: reward at least 0",
        "--openenv-cache=cache",
        "-n",
        "0",
    )
    with serve_judge() as judge:
        endpoint = judge.base_url
        recorded = run_pytest(*common, f"--openenv-judge-endpoint={endpoint}", "--openenv-output=a")
        assert judge.judge_requests == 3
        assert all(JUDGE_KEY in seen for seen in judge.authorizations)
    # the judge is gone: its port answers nothing now
    replayed = run_pytest(
        *common, f"--openenv-judge-endpoint={endpoint}", "--openenv-replay", "--openenv-output=b"
    )
    assert recorded.ret == replayed.ret == pytest.ExitCode.OK, replayed.stdout.str()[-3000:]
    replayed.assert_outcomes(passed=3)
    before = {r["episode_id"]: r["judge"] for r in played_rows(pytester.path / "a")}
    after = {r["episode_id"]: r["judge"] for r in played_rows(pytester.path / "b")}
    assert before == after and len(after) == 3
    for folder in ("a", "b", "cache"):
        assert JUDGE_KEY not in files_text(pytester.path / folder)
    for result in (recorded, replayed):
        assert JUDGE_KEY not in result.stdout.str() + result.stderr.str()
    metadata = json.loads((pytester.path / "b" / "metadata.json").read_text(encoding="utf-8"))
    assert metadata["identity"]["judge"]["model"] == "judge-model"
    assert len(metadata["identity"]["judge"]["rubric_sha256"]) == 64


def test_a_rubric_changed_after_the_run_calls_the_judge_again_and_the_policy_never(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_judge() as server:
        first = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=6",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=fake",
            "--openenv-judge=judge-model",
            "--openenv-judge-rubric=The agent wins: reward at least 0",
            "-n",
            "0",
        )
        assert first.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        policy_calls, judge_calls = server.policy_requests, server.judge_requests
        assert policy_calls > 0 and judge_calls == 6
        rescore = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest_openenv",
                "rescore",
                "openenv-results",
                "--out",
                "rescored",
                '--openenv-judge-rubric=The agent must say "never-said"',
            ],
            cwd=pytester.path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert server.policy_requests == policy_calls  # no policy call
        assert server.judge_requests == judge_calls + 6  # the judge read every transcript
    assert rescore.returncode == 1, rescore.stderr
    assert "no policy call" in rescore.stdout
    before = {r["episode_id"]: r for r in played_rows(pytester.path / "openenv-results")}
    after = {r["episode_id"]: r for r in played_rows(pytester.path / "rescored")}
    assert sorted(after) == sorted(before)
    for key, row in after.items():
        assert row["passed"] is False and row["judge"]["passed"] is False
        assert row["messages"] == before[key]["messages"]
    assert read_jsonl(pytester.path / "rescored" / "results.jsonl") == []
    rescored = summary(pytester.path / "rescored")
    assert rescored["figures"]["passed"] == 0 and rescored["figures"]["tokens_spent"] == 0
    paired = rescored["baseline"]["paired"]
    passed_before = sum(1 for r in before.values() if r["passed"])
    assert paired["pass"]["only_b_passed"] == passed_before
    assert paired["paired_episodes"] == 6
    assert (pytester.path / "rescored" / "report.html").exists()
    page = (pytester.path / "rescored" / "report.html").read_text(encoding="utf-8")
    assert "never shows the agent saying never-said" in page


def test_rescore_refuses_an_output_folder_it_would_overwrite(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "run").mkdir()
    (pytester.path / "run" / "results.jsonl").write_text("", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "rescore", "run", "--out", "run"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "another folder than DIR" in done.stderr


def test_the_judge_agreement_with_tic_tac_toe_outcomes_is_counted_with_its_interval(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "step-summary.md"))
    # the env passes a draw (a non-loss); a judge asking for a win (reward >= 1) does not
    with serve_judge() as judge:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=12",
            "--openenv-policy=random",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            "--openenv-judge-rubric=The agent wins: reward at least 1",
            "-n",
            "2",
        )
    rows = played_rows(pytester.path / "openenv-results")
    assert len(rows) == 12
    env_passed = [r["judge"]["env_passed"] for r in rows]
    judge_passed = [r["judge"]["passed"] for r in rows]
    agreed = sum(e == j for e, j in zip(env_passed, judge_passed, strict=True))
    assert all(isinstance(e, bool) for e in env_passed)
    assert [r["reward"] >= 1 for r in rows] == judge_passed
    assert [r["judge"]["env_outcome"] != "loss" for r in rows] == env_passed
    agreement = summary(pytester.path / "openenv-results")["judge"]["agreement"]
    assert (agreement["compared"], agreement["agreed"]) == (12, agreed)
    assert agreement["rate"] == pytest.approx(agreed / 12)
    low, high = agreement["ci"]
    assert low <= agreed / 12 <= high and high - low > 0
    assert agreement["judge_failed_env_passed"] == sum(
        e and not j for e, j in zip(env_passed, judge_passed, strict=True)
    )
    result.stdout.fnmatch_lines([f"*judge agrees with the env's own verdict: *({agreed}/12;*"])
    # the training split follows the judge's verdict, not the env's
    train = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert len(train) == sum(judge_passed) and all(r["judge"]["passed"] for r in train)
    step = (pytester.path / "step-summary.md").read_text(encoding="utf-8")
    assert "judge agrees with the env's own verdict: " in step and f"({agreed}/12;" in step
    card = (pytester.path / "openenv-results" / "README.md").read_text(encoding="utf-8")
    assert "## The judge model" in card and f"the judge agreed on {agreed} of 12" in card


def test_a_judge_without_a_key_is_a_usage_error_before_any_episode(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-judge=gpt-4o-mini")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-judge=gpt-4o-mini" in result.stderr.str()
    assert "OPENAI_API_KEY" in result.stderr.str()
    assert not (pytester.path / "openenv-results").exists()


def test_a_dead_judge_endpoint_is_a_usage_error_before_any_episode(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_judge() as judge:
        dead = judge.base_url
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-judge=judge-model",
        f"--openenv-judge-endpoint={dead}",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-judge=judge-model: the judge's endpoint" in result.stderr.str()
    assert not (pytester.path / "openenv-results").exists()


@pytest.mark.parametrize(
    ("rubric", "says"),
    [("@missing.md", "cannot read the rubric file"), ("   ", "the rubric is empty")],
)
def test_a_rubric_that_cannot_be_read_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester, rubric: str, says: str
) -> None:
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-judge=judge-model",
        f"--openenv-judge-rubric={rubric}",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str() and "--openenv-judge-rubric" in result.stderr.str()


def test_a_resume_with_another_rubric_is_refused_naming_the_judge(
    run_pytest, pytester: pytest.Pytester
) -> None:
    (pytester.path / "rubric.md").write_text("The agent wins: reward at least 0\n", "utf-8")
    with serve_judge() as judge:
        common = (
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            "-n",
            "0",
        )
        first = run_pytest(*common, "--openenv-n=2", "--openenv-judge-rubric=@rubric.md")
        same = run_pytest(
            *common, "--openenv-n=3", "--openenv-judge-rubric=@rubric.md", "--openenv-resume"
        )
        resumed = summary(pytester.path / "openenv-results")["judge"]
        other = run_pytest(
            *common, "--openenv-n=3", "--openenv-judge-rubric=another", "--openenv-resume"
        )
        assert judge.judge_requests == 3  # two, then the one episode the resume added
    assert first.ret == same.ret == pytest.ExitCode.OK, same.stdout.str()[-2000:]
    assert other.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-judge" in other.stderr.str()
    assert len(played_rows(pytester.path / "openenv-results")) == 3
    # the resumed folder's verdicts are all counted; only the new episode's tokens are spent
    rows = played_rows(pytester.path / "openenv-results")
    new = next(r for r in rows if r["episode_id"] == "ep-000002")["judge"]
    assert (resumed["asked"], resumed["judged"], resumed["judge_passed"]) == (3, 3, 3)
    assert resumed["prompt_tokens"] == new["prompt_tokens"]


def test_the_judge_s_tokens_count_in_the_run_budget(run_pytest, pytester: pytest.Pytester) -> None:
    # the expert spends no tokens: only the judge's can reach the budget
    with serve_judge() as judge:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=20",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            "--openenv-max-total-tokens=500",
            "-n",
            "0",
        )
        asked = judge.judge_requests
    assert "run budget reached" in result.stdout.str(), result.stdout.str()[-2000:]
    assert 1 <= asked < 20
    figures = summary(pytester.path / "openenv-results")
    assert figures["figures"]["prompt_tokens"] == 0
    assert figures["judge"]["prompt_tokens"] >= 500 - figures["judge"]["completion_tokens"]
    assert figures["budget"]["spent_tokens"] == (
        figures["judge"]["prompt_tokens"] + figures["judge"]["completion_tokens"]
    )


def test_the_inspect_log_and_the_report_show_the_judge_s_verdict_and_reasoning(
    run_pytest, pytester: pytest.Pytester
) -> None:
    from inspect_ai.log import read_eval_log

    prices = {"judge-model": {"input": 1.0, "output": 2.0}}  # USD per million tokens
    (pytester.path / "prices.json").write_text(json.dumps(prices), encoding="utf-8")
    with serve_judge() as judge:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=2",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            '--openenv-judge-rubric=The agent must say "play_move"',
            "--openenv-inspect-log",
            "--openenv-prices=prices.json",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    folder = pytester.path / "openenv-results"
    (path,) = (folder / "inspect-logs").glob("*.eval")
    samples = read_eval_log(str(path)).samples or []
    assert len(samples) == 2
    for sample in samples:
        score = sample.scores["judge"]
        assert score.value == "C" and score.answer == "pass"
        assert "shows the agent saying play_move" in str(score.explanation)
        assert score.metadata["judge_model"] == "judge-model"
        assert score.metadata["env_passed"] is True
    # the judge's spend priced under its own model, row by row and in all
    rows = played_rows(folder)
    for row in rows:
        judged = row["judge"]
        expected = (judged["prompt_tokens"] * 1.0 + judged["completion_tokens"] * 2.0) / 1e6
        assert judged["cost_usd"] == pytest.approx(expected) and expected > 0
    total = summary(folder)["judge"]["cost_usd"]
    assert total == pytest.approx(sum(r["judge"]["cost_usd"] for r in rows))
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "judgeBox" in page  # the episode view renders the row's judge
    assert "shows the agent saying play_move" in page


def rescore(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "rescore", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_rescore_reads_a_remote_env_run_under_xdist_by_threshold_or_by_judge(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    with serve_in_thread("endless") as server:
        first = run_pytest(
            "--openenv-env=openenv:coding_env",
            f"--openenv-server={server.url}",
            "--openenv-policy=policies:run_code",
            "--openenv-judge-at=turn-limit",
            "--openenv-max-turns=2",
            "--openenv-min-reward=0.1",
            "--openenv-n=4",
            "-n",
            "2",
        )
    assert first.ret == pytest.ExitCode.OK, first.stdout.str()[-2000:]
    # the server is gone: a rescore reads rows, never the env
    stricter = rescore(
        pytester.path, "openenv-results", "--out", "strict", "--openenv-min-reward=1"
    )
    assert stricter.returncode == 1, stricter.stderr
    rows = played_rows(pytester.path / "strict")
    assert len(rows) == 4 and not any(r["passed"] for r in rows)
    assert {r["extra"]["judged_by"] for r in rows} == {"min-reward"}
    assert all(
        "below the pass threshold 1 (--openenv-min-reward)" in r["extra"]["reason"] for r in rows
    )
    assert all("judge" not in r for r in rows)
    paired = summary(pytester.path / "strict")["baseline"]["paired"]["pass"]
    assert (paired["only_b_passed"], paired["only_a_passed"]) == (4, 0)
    prices = {"judge-model": {"input": 1.0, "output": 2.0}}  # USD per million tokens
    (pytester.path / "prices.json").write_text(json.dumps(prices), encoding="utf-8")
    with serve_judge() as judge:
        judged = rescore(
            pytester.path,
            "openenv-results",
            "--out",
            "judged",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            '--openenv-judge-rubric=The agent must say "print(1)"',
            "--openenv-min-pass-rate=0.9",
            "--openenv-prices=prices.json",
        )
        assert judge.judge_requests == 4 and judge.policy_requests == 0
    assert judged.returncode == 0, judged.stdout + judged.stderr
    rows = played_rows(pytester.path / "judged")
    assert len(rows) == 4 and all(r["passed"] and r["judge"]["passed"] for r in rows)
    rescored = summary(pytester.path / "judged")
    assert rescored["gate"]["passed"] is True and rescored["judge"]["judged"] == 4
    spent = rescored["judge"]
    assert spent["cost_usd"] == pytest.approx(
        (spent["prompt_tokens"] * 1.0 + spent["completion_tokens"] * 2.0) / 1e6
    )
    assert spent["cost_usd"] > 0
    metadata = json.loads((pytester.path / "judged" / "metadata.json").read_text("utf-8"))
    assert metadata["rescored_from"].endswith("openenv-results")
    assert metadata["identity"]["judge"]["model"] == "judge-model"


def test_a_judge_endpoint_that_quotes_the_key_in_its_errors_never_puts_it_in_a_file(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", JUDGE_KEY)
    with serve_judge(always_status=500, echo_auth=True) as judge:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=2",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            "--openenv-max-retries=0",
            "-n",
            "0",
        )
        assert any(JUDGE_KEY in seen for seen in judge.authorizations)
    result.assert_outcomes(errors=2)
    rows = played_rows(pytester.path / "openenv-results")
    assert all("injected HTTP 500" in r["judge"]["error"] for r in rows)
    assert JUDGE_KEY not in files_text(pytester.path / "openenv-results")
    assert JUDGE_KEY not in result.stdout.str() + result.stderr.str()


def test_a_rubric_without_a_judge_model_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester
) -> None:
    result = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-judge-rubric=wins")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-judge-rubric given without a judge model" in result.stderr.str()
