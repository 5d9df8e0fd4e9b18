"""End to end: episodes as items, one writer, xdist, resume, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import read_jsonl

EPISODE_RECORD_KEYS = {
    "episode_id",
    "messages",
    "reward",
    "done",
    "tool_trace",
    "metrics",
    "verify_metrics",
    "artifacts",
    "task",
    "extra",
}
OUR_KEYS = {"schema_version", "env", "seed", "policy", "model", "tools", "test", "passed"}
TTT = "--openenv-env=openspiel:tic_tac_toe"


def outcome_counts(result: pytest.RunResult) -> dict[str, int]:
    return result.parseoutcomes()


@pytest.mark.slow
def test_headline_command_with_8_workers(run_pytest, pytester: pytest.Pytester) -> None:
    result = run_pytest(TTT, "--openenv-n=200", "-n", "8")
    counts = outcome_counts(result)
    assert counts.get("passed", 0) + counts.get("failed", 0) == 200
    out = pytester.path / "openenv-results"
    results = read_jsonl(out / "results.jsonl")
    failures = read_jsonl(out / "failures.jsonl")
    assert len(results) == counts["passed"]
    assert len(failures) == counts.get("failed", 0) + counts.get("errors", 0)
    ids = [r["episode_id"] for r in results + failures]
    assert len(ids) == len(set(ids)) == 200
    assert [r["episode_id"] for r in results] == sorted(r["episode_id"] for r in results)
    for row in results + failures:
        assert set(row) >= EPISODE_RECORD_KEYS | OUR_KEYS, set(row) ^ (
            EPISODE_RECORD_KEYS | OUR_KEYS
        )
    assert all(r["passed"] and r["reward"] >= 0 for r in results)
    assert all(not r["passed"] and r["failure"]["outcome"] == "failed" for r in failures)
    for name in ("metadata.json", "summary.json", "README.md"):
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["figures"]["passed"] == len(results)
    assert "pass rate:" in result.stdout.str()
    assert "95% Wilson CI" in result.stdout.str()


def _episodes(folder: Path) -> dict[str, tuple[float, list[str]]]:
    rows = read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl")
    return {
        r["episode_id"]: (r["reward"], [t["arguments_text"] for t in r["tool_trace"]]) for r in rows
    }


@pytest.mark.slow
def test_same_seed_same_episodes_across_worker_counts_and_runs(
    run_pytest, pytester: pytest.Pytester
) -> None:
    seen = []
    for extra in (["-n", "0"], ["-n", "3"], ["-n", "0"]):
        out = f"out{len(seen)}"
        run_pytest(
            TTT,
            "--openenv-n=12",
            "--openenv-seed=5",
            "--openenv-policy=random",
            f"--openenv-output={out}",
            *extra,
        )
        seen.append(_episodes(pytester.path / out))
    assert len(seen[0]) == 12
    assert seen[0] == seen[1] == seen[2]
    assert len({tuple(v[1]) for v in seen[0].values()}) > 1, "random policy should vary by seed"


SLOW_SUITE = """
import os
import time
import pytest
from pytest_openenv.policies.scripted import ScriptedPolicy

class SlowScripted(ScriptedPolicy):
    def act(self, turn):
        time.sleep(float(os.environ.get("SLOW_MOVE_S", "0")))
        return super().act(turn)

@pytest.fixture
def openenv_policy():
    return SlowScripted()

@pytest.mark.openenv("openspiel:tic_tac_toe", n=300)
def test_game(episode):
    assert episode.passed, episode.explain()
"""


@pytest.mark.slow
def test_sigkill_leaves_whole_lines_and_resume_completes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow=SLOW_SUITE)
    results = pytester.path / "openenv-results" / "results.jsonl"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_slow.py"]
    # slow moves while the run is killed mid-way; the resumed run plays the rest at full speed
    slow = {**os.environ, "SLOW_MOVE_S": "0.02"}
    proc = subprocess.Popen(
        cmd, cwd=pytester.path, env=slow, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.exists() and results.read_bytes().count(b"\n") >= 20:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = read_jsonl(results)  # fails on a torn line
    assert 20 <= len(before) < 300
    resumed = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--openenv-resume")
    counts = resumed.parseoutcomes()
    assert counts.get("skipped", 0) >= len(before)
    after = read_jsonl(results)
    failures = read_jsonl(pytester.path / "openenv-results" / "failures.jsonl")
    ids = [r["episode_id"] for r in after]
    assert len(ids) == len(set(ids)), "a passing episode was written twice"
    assert {r["episode_id"] for r in before} <= set(ids), "resume lost earlier rows"
    assert len(after) + len(failures) == 300
    assert "skipped" in resumed.stdout.str()


@pytest.mark.parametrize(
    ("env", "config"),
    [
        ("openspiel:connect_four", "{}"),
        ("openspiel:catch", "{}"),
        ("openspiel:tic_tac_toe", '{"agent_player": 1}'),
    ],
)
@pytest.mark.slow
def test_other_games_and_seats(
    run_pytest, pytester: pytest.Pytester, env: str, config: str
) -> None:
    result = run_pytest(
        f"--openenv-env={env}",
        "--openenv-n=4",
        f"--openenv-env-config={config}",
        "--openenv-max-turns=60",
    )
    counts = outcome_counts(result)
    assert counts.get("passed", 0) + counts.get("failed", 0) == 4
    rows = _episodes(pytester.path / "openenv-results")
    assert len(rows) == 4
    assert all(actions for _, actions in rows.values())


@pytest.mark.slow
def test_verbose_lines_show_reward_and_turns(run_pytest) -> None:
    result = run_pytest(TTT, "--openenv-n=3", "-v")
    result.stdout.re_match_lines(
        [r".*openenv::test_episode\[ep-000000\] (PASSED|FAILED) \(reward="]
    )


def test_plugin_is_inert_without_episode_tests(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_ok():\n    assert 1 + 1 == 2\n")
    result = run_pytest("test_plain.py", TTT)
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "openenv-results").exists()
    assert "pass rate:" not in result.stdout.str()
    assert "= openenv =" not in result.stdout.str()


@pytest.mark.slow
def test_user_suite_with_marker_on_two_workers(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=6, policy="random", seed=7)
        def test_never_crashes(episode):
            assert episode.done
            assert episode.turns >= 3
            assert episode.messages[0]["role"] == "system"

        def test_not_an_episode():
            assert True
        """
    )
    result = run_pytest("-n", "2", "--openenv-train-on=test")  # every game the test passed
    result.assert_outcomes(passed=7)
    rows = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert sorted(r["seed"] for r in rows) == list(range(7, 13))
    assert {r["policy"] for r in rows} == {"random"}
    assert all(r["test"].startswith("test_user.py::test_never_crashes[ep-") for r in rows)


@pytest.mark.slow
def test_existing_results_are_moved_aside_not_destroyed(
    run_pytest, pytester: pytest.Pytester
) -> None:
    run_pytest(TTT, "--openenv-n=3")
    out = pytester.path / "openenv-results"
    first = (out / "results.jsonl").read_bytes()
    run_pytest(TTT, "--openenv-n=2")
    kept = [p for p in out.iterdir() if p.name.startswith("results.") and p.name != "results.jsonl"]
    assert len(kept) == 1 and kept[0].read_bytes() == first
    assert len(read_jsonl(out / "results.jsonl")) <= 2


@pytest.mark.slow
def test_loadscope_warns(run_pytest) -> None:
    result = run_pytest(TTT, "--openenv-n=2", "-n", "2", "--dist", "loadscope")
    assert "--dist loadscope sends all episodes" in result.stdout.str()


def test_a_worker_count_far_above_the_cpus_warns_naming_openenv_n(run_pytest) -> None:
    """``openenv collect -n 200`` means 200 episodes; here ``-n 200`` is 200 processes."""
    many = str(4 * (os.cpu_count() or 1) + 1)
    # --collect-only: xdist starts no worker, while the warning comes at configure as in a run
    result = run_pytest(TTT, "-n", many, "--collect-only")
    text = result.stdout.str() + result.stderr.str()
    assert f"-n {many} starts {many} pytest-xdist worker processes" in text, text[-3000:]
    assert f"pass --openenv-n={many}" in text
    for quiet in ([TTT, "-n", "2"], [TTT, "-n", many, f"--openenv-n={many}"], ["-n", many]):
        result = run_pytest(*quiet, "--collect-only")
        text = result.stdout.str() + result.stderr.str()
        assert "worker processes" not in text, (quiet, text[-3000:])


@pytest.mark.slow
def test_dist_each_is_refused_pointing_at_repeats(run_pytest, pytester: pytest.Pytester) -> None:
    """``--dist each`` counted every episode once per worker (n=12 for 6)."""
    result = run_pytest(TTT, "--openenv-n=3", "-n", "2", "--dist", "each")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
    text = result.stdout.str() + result.stderr.str()
    assert "--dist each runs every episode once on every worker" in text
    assert "--openenv-repeats" in text
    assert not (pytester.path / "openenv-results" / "results.jsonl").exists()


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_one_episode_in_two_items_is_refused_pointing_at_repeats(
    run_pytest, pytester: pytest.Pytester, workers: str
) -> None:
    """Pytest-repeat's ``--count 2`` (a parametrization on top of the
    episode's, as here) wrote two rows with one ``episode_id``."""
    pytester.makepyfile(
        test_twice="""
        import pytest

        @pytest.mark.parametrize("attempt", ["1-2", "2-2"])
        @pytest.mark.openenv("openspiel:tic_tac_toe", n=2)
        def test_game(episode, attempt):
            assert episode.passed
        """
    )
    result = run_pytest("-n", workers)
    # a collection error: pytest stops before any item (2); xdist reports it as a failure (1)
    expected = pytest.ExitCode.INTERRUPTED if workers == "0" else pytest.ExitCode.TESTS_FAILED
    assert result.ret == expected, result.stdout.str()[-3000:]
    text = result.stdout.str() + result.stderr.str()
    assert "test_twice.py::test_game: an episode test cannot be parametrized further" in text
    assert "parametrize 'attempt'" in text and "--openenv-repeats K" in text, text[-3000:]
    assert "Traceback" not in text
    assert not (pytester.path / "openenv-results" / "results.jsonl").exists()


def test_a_parametrized_fixture_of_an_episode_test_is_refused_naming_it(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """``@pytest.fixture(params=...)`` in an episode test's closure wrote every episode
    id twice (two items each), as a ``parametrize`` marker would have."""
    pytester.makepyfile(
        test_variants="""
        import pytest

        @pytest.fixture(params=["short", "long"])
        def prompt_style(request):
            return request.param

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=2, policy="random")
        def test_game(episode, prompt_style):
            assert episode.passed
        """
    )
    result = run_pytest("-n", "0")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-3000:]
    text = result.stdout.str() + result.stderr.str()
    assert "test_variants.py::test_game: an episode test cannot use a parametrized fixture" in text
    assert "'prompt_style' has @pytest.fixture(params=...)" in text, text[-3000:]
    assert "--openenv-repeats K" in text and "Traceback" not in text
    assert not (pytester.path / "openenv-results" / "results.jsonl").exists()


@pytest.mark.slow
def test_resume_skips_finished_episodes_failed_ones_too(
    run_pytest, pytester: pytest.Pytester
) -> None:
    first = run_pytest(TTT, "--openenv-n=20", "--openenv-policy=scripted")
    passed = first.parseoutcomes()["passed"]
    failed = first.parseoutcomes().get("failed", 0)
    assert failed > 0, "seeds 0..19 include losses for the first-legal policy"
    again = run_pytest(TTT, "--openenv-n=20", "--openenv-policy=scripted", "--openenv-resume")
    counts = again.parseoutcomes()
    assert counts["skipped"] == passed + failed  # a failed episode finished: kept as it was
    assert counts.get("failed", 0) == 0
    out = pytester.path / "openenv-results"
    figures = json.loads((out / "summary.json").read_text())["figures"]
    assert (figures["passed"], figures["failed"], figures["played"]) == (passed, failed, 0)
    assert len(read_jsonl(out / "results.jsonl")) == passed
    assert len(read_jsonl(out / "failures.jsonl")) == failed


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--openenv-env=nosuch:thing"], "unknown env family 'nosuch'"),
        (["--openenv-env=openspiel:tic_tac_to"], "did you mean tic_tac_toe"),
        (["--openenv-env=tictactoe"], "family:variant"),
        ([TTT, "--openenv-n=0"], "--openenv-n="),
        ([TTT, "--openenv-n=many"], "--openenv-n="),
        ([TTT, "--openenv-env-config={bad json"], "--openenv-env-config="),
        ([TTT, "--openenv-env-config=[1]"], "--openenv-env-config="),
        ([TTT, '--openenv-env-config={"opponent": "smart"}'], "opponent 'smart'"),
        ([TTT, "--openenv-policy=genius"], "--openenv-policy="),
        ([TTT, "--openenv-output=blocker/sub"], "--openenv-output="),
    ],
)
@pytest.mark.slow
def test_bad_input_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester, args: list[str], needle: str
) -> None:
    (pytester.path / "blocker").write_text("a file, not a folder")
    result = run_pytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in result.stderr.str(), result.stderr.str()
    assert not (pytester.path / "openenv-results").exists()


@pytest.mark.slow
def test_corrupt_results_on_resume_names_file_and_line(
    run_pytest, pytester: pytest.Pytester
) -> None:
    out = pytester.path / "openenv-results"
    out.mkdir()
    good = json.dumps({"episode_id": "ep-000000", "test": "x"})
    (out / "results.jsonl").write_text(f"{good}\n{{not json\n{good}\n")
    result = run_pytest(TTT, "--openenv-resume")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{out / 'results.jsonl'}:2" in result.stderr.str()
    assert (out / "results.jsonl").read_text().count("\n") == 3, "must not touch the file"


@pytest.mark.slow
def test_ini_keys_work_and_cli_wins(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nopenenv_env = openspiel:tic_tac_toe\nopenenv_n = 3\n")
    result = run_pytest()
    assert sum(result.parseoutcomes().get(k, 0) for k in ("passed", "failed")) == 3
    result = run_pytest("--openenv-n=2")
    assert sum(result.parseoutcomes().get(k, 0) for k in ("passed", "failed")) == 2


def test_import_does_not_load_heavy_modules() -> None:
    code = (
        "import sys, pytest_openenv.plugin\n"
        "heavy = [m for m in ('pyspiel', 'openai', 'anthropic', 'reasoning_gym', "
        "'huggingface_hub', 'datasets', 'hypothesis', 'websockets') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('policy="nope"', "openenv marker policy='nope' cannot be used: *is unknown*"),
        ("n=-3", "openenv marker n=-3 is invalid: expected a positive integer"),
        ('seed="x"', "openenv marker seed='x' is invalid: expected an integer"),
        # A policy that is not a string was a raw TypeError at collection
        ("policy=5", "openenv marker policy=5 is invalid: expected a policy name*"),
    ],
)
def test_a_bad_marker_is_one_collection_error_naming_the_test(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        test_marked=f"""
        import pytest

        @pytest.mark.openenv("openspiel:tic_tac_toe", {marker})
        def test_game(episode):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # collection failed: nothing ran
    result.stdout.fnmatch_lines([f"test_marked.py::test_game: {message}"])
    assert "Traceback" not in result.stdout.str() and "plugin.py" not in result.stdout.str()
    assert not (pytester.path / "openenv-results" / "results.jsonl").exists()
