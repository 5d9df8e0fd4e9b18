"""A run split by ``--openenv-shard`` and merged by ``python -m pytest_openenv merge`` is the
run on one machine: the same rows, the same summary.json figures, the same gate and exit code.

The comparison leaves out what differs between machines by nature: timings (``wall_time_s``,
``episodes_per_s``, ``episode_seconds``, each row's ``metrics.wall_time_s``), the output path,
and the merge's own ``shards`` block. Floats are compared to 12 significant digits: a pooled
mean adds the same terms in another order when the reports arrive in another order.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_openenv.config.shard import Shard, parse_shard

#: three episode tests: one that loses at times (random), one that never does (expert), one
#: where two policies play the same seeds (pairs for --openenv-gate-vs and the baseline)
SUITE = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=7, policy="random")
def test_random(episode):
    assert episode.passed

@pytest.mark.openenv("openspiel:tic_tac_toe", n=5)
def test_expert(episode):
    assert episode.passed

@pytest.mark.openenv("openspiel:tic_tac_toe", n=4, policies=["scripted", "random"])
def test_pair(episode):
    assert episode.passed
"""

TIMINGS = {"wall_time_s", "episodes_per_s", "episode_seconds", "output", "shards"}


def differences(one: Any, other: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, timings aside (floats to 12 digits)."""
    if isinstance(one, dict) and isinstance(other, dict):
        found = []
        for key in sorted(set(one) | set(other)):
            if key in TIMINGS:
                continue
            if key not in one or key not in other:
                found.append(f"{path}/{key}: only in {'first' if key in one else 'second'}")
                continue
            found.extend(differences(one[key], other[key], f"{path}/{key}"))
        return found
    if isinstance(one, list) and isinstance(other, list) and len(one) == len(other):
        return [
            d
            for i, pair in enumerate(zip(one, other, strict=True))
            for d in differences(*pair, f"{path}[{i}]")
        ]
    if isinstance(one, float) and isinstance(other, float):
        return [] if math.isclose(one, other, rel_tol=1e-12) else [f"{path}: {one} != {other}"]
    return [] if one == other else [f"{path}: {one!r} != {other!r}"]


def rows(folder: Path, name: str) -> list[dict[str, Any]]:
    path = folder / name
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if isinstance(row.get("metrics"), dict):
            row["metrics"].pop("wall_time_s", None)
        found.append(row)
    return found


def merge(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "merge", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_same_run(single: Path, merged: Path) -> None:
    for name in ("results.jsonl", "failures.jsonl", "preferences.jsonl"):
        assert rows(merged, name) == rows(single, name), name
    one = json.loads((single / "summary.json").read_text())
    other = json.loads((merged / "summary.json").read_text())
    assert differences(one, other) == []
    for name in ("README.md", "report.html", "metadata.json"):
        assert (merged / name).is_file(), name


def play_shards(run_pytest, pytester, count: int, *options: str) -> list[Path]:
    folders = []
    for index in range(count):
        # one shard under xdist: the split is the same in every process
        workers = ("-n", "2") if index == 1 else ("-n", "0")
        run_pytest(*options, f"--openenv-shard={index}/{count}", *workers)
        folders.append(pytester.path / "openenv-results" / f"shard-{index}-of-{count}")
    return folders


@pytest.mark.slow
def test_three_shards_merged_are_one_run_with_repeats_a_failing_gate_a_vs_gate_and_a_baseline(
    pytester, run_pytest
):
    pytester.makepyfile(test_suite=SUITE)
    common = ("--openenv-repeats=2", "--openenv-min-pass-rate=0.7", "--openenv-gate-vs=scripted")
    single = run_pytest(*common, "--openenv-output=single", "-n", "0")
    assert single.ret == 1  # random loses too often: the gate fails
    shards = play_shards(run_pytest, pytester, 3, *common)
    merged = merge("merged", *shards, cwd=pytester.path)
    assert merged.returncode == single.ret, merged.stdout + merged.stderr
    assert "exit code 1" in merged.stdout
    assert_same_run(pytester.path / "single", pytester.path / "merged")
    summary = json.loads((pytester.path / "merged" / "summary.json").read_text())
    assert summary["gate"]["passed"] is False
    assert summary["figures"]["ran"] == 2 * (7 + 5 + 2 * 4)
    assert summary["passk"]["k"] == 2 and summary["comparisons"]

    # the same seeds judged against the single run as a baseline, without a vs gate
    baseline = ("--openenv-repeats=2", f"--openenv-baseline={pytester.path / 'single'}")
    again = run_pytest(*baseline, "--openenv-output=again", "-n", "0")
    for folder in shards:
        folder.rename(folder.with_name(folder.name + ".first"))
    shards = play_shards(run_pytest, pytester, 3, *baseline)
    merged = merge("merged-baseline", *shards, cwd=pytester.path)
    assert merged.returncode == again.ret == 0, merged.stdout + merged.stderr
    assert_same_run(pytester.path / "again", pytester.path / "merged-baseline")
    checks = json.loads((pytester.path / "merged-baseline" / "summary.json").read_text())["gate"]
    assert any(check["check"] == "baseline" for check in checks["checks"]), checks


def test_a_missing_shard_is_refused_naming_it_and_its_episodes_and_nothing_is_written(
    pytester, run_pytest
):
    pytester.makepyfile(test_suite=SUITE)
    shards = [
        run_pytest(f"--openenv-shard={i}/3", "-n", "0")
        and pytester.path / f"openenv-results/shard-{i}-of-3"
        for i in (0, 2)
    ]
    refused = merge("merged", *shards, cwd=pytester.path)
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "shard 1/3 (--openenv-shard=1/3)" in refused.stderr
    # test_random's n=7: indices 1 and 4 are shard 1's
    assert "test_suite.py::test_random: ep-000001, ep-000004." in refused.stderr
    assert not (pytester.path / "merged").exists()
    assert [p.name for p in pytester.path.iterdir() if p.name.startswith(".merged")] == []

    partial = merge("merged", *shards, "--allow-partial", cwd=pytester.path)
    assert partial.returncode in (0, 1), partial.stderr
    assert "PARTIAL: shard(s) 1 of 3 missing" in partial.stdout
    summary = json.loads((pytester.path / "merged" / "summary.json").read_text())
    assert summary["shards"] == {"count": 3, "merged": [0, 2], "missing": [1], "partial": True}
    assert summary["figures"]["partial"] is True
    played = {row["test"] for row in rows(pytester.path / "merged", "results.jsonl")}
    assert not any("ep-000001" in test for test in played)


def test_an_overlapping_shard_or_another_runs_shard_is_refused_naming_why(pytester, run_pytest):
    pytester.makepyfile(test_suite=SUITE)
    run_pytest("--openenv-shard=0/2", "-n", "0")
    run_pytest("--openenv-shard=1/2", "-n", "0")
    run_pytest("--openenv-shard=1/2", "-n", "0", "--openenv-output=twice")
    run_pytest("--openenv-shard=1/2", "-n", "0", "--openenv-seed=5", "--openenv-output=other")
    run_pytest("--openenv-shard=1/3", "-n", "0", "--openenv-output=thirds")
    first = pytester.path / "openenv-results" / "shard-0-of-2"
    second = pytester.path / "openenv-results" / "shard-1-of-2"

    twice = merge("m", first, second, pytester.path / "twice", cwd=pytester.path)
    assert twice.returncode == 4 and "shards overlap" in twice.stderr, twice.stderr
    assert "both shard 1/2" in twice.stderr

    other = merge("m", first, pytester.path / "other", cwd=pytester.path)
    assert other.returncode == 4
    assert "field seed differs (5 vs 0, --openenv-seed)" in other.stderr, other.stderr

    thirds = merge("m", first, pytester.path / "thirds", cwd=pytester.path)
    assert thirds.returncode == 4 and "field shard count differs (3 vs 2)" in thirds.stderr
    assert not (pytester.path / "m").exists()

    merged = merge("m", first, second, cwd=pytester.path)
    assert merged.returncode in (0, 1), merged.stderr
    assert (pytester.path / "m" / "results.jsonl").exists()


def test_a_resumed_shard_folder_refuses_another_shard(pytester, run_pytest):
    pytester.makepyfile(test_suite=SUITE)
    run_pytest("--openenv-shard=0/2", "-n", "0", "--openenv-output=out")
    refused = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--openenv-shard=1/2", "--openenv-output=out", "--openenv-resume"
    )
    assert refused.ret == 4
    assert 'shard="0/2"' in refused.stderr.str() and "--openenv-shard" in refused.stderr.str()
    resumed = run_pytest(
        "--openenv-shard=0/2", "-n", "0", "--openenv-output=out", "--openenv-resume"
    )
    assert "skipped" in resumed.stdout.str()


def test_shards_split_every_test_by_episode_index_and_say_so(pytester, run_pytest):
    pytester.makepyfile(test_suite=SUITE)
    result = run_pytest("--openenv-shard=1/3", "-n", "0", "-v")
    text = result.stdout.str()
    assert "plays shard 1/3 (from --openenv-shard)" in text
    ran = set(re.findall(r"test_suite\.py::test_\w+\[[\w-]*ep-(\d{6})\]", text))
    assert ran == {"000001", "000004"}, ran
    # 7 + 5 + 2 * 4 episodes; shard 1 of 3 holds indices 1, 4 of 7, 1, 4 of 5, 1 of 4 (twice)
    last = text.splitlines()[-1]
    assert (
        "14 deselected" in last and sum(map(int, re.findall(r"(\d+) (?:passed|failed)", last))) == 6
    )
    metadata = json.loads(
        (pytester.path / "openenv-results" / "shard-1-of-3" / "metadata.json").read_text()
    )
    assert metadata["identity"]["shard"] == "1/3"
    assert metadata["shard"]["source"] == "option"
    random_test = metadata["shard"]["tests"]["test_suite.py::test_random"]
    assert random_test == {"n": 7, "repeats": 1, "arms": [""]}


@pytest.mark.parametrize(
    ("environ", "shard"),
    [
        ({"JOB_COMPLETION_INDEX": "2"}, "auto/4"),
        ({"SLURM_ARRAY_TASK_ID": "2"}, "auto/4"),
        ({"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "4"}, "auto"),
        # an array numbered from 1 (--array=1-4): the third task is shard 2
        ({"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1"}, "auto/4"),
    ],
)
def test_the_scheduler_variables_give_the_shard(environ, shard):
    parsed = parse_shard(shard, environ)
    assert (parsed.index, parsed.count) == (2, 4)
    assert parsed.source == ("kubernetes" if "JOB_COMPLETION_INDEX" in environ else "slurm")
    assert parsed.described().endswith(
        "(from JOB_COMPLETION_INDEX)"
        if parsed.source == "kubernetes"
        else "(from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT)"
    )


@pytest.mark.parametrize(
    ("environ", "option", "source", "said"),
    [
        ({"JOB_COMPLETION_INDEX": "1"}, "auto/2", "kubernetes", "(from JOB_COMPLETION_INDEX)"),
        (
            {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"},
            "auto",
            "slurm",
            "(from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT)",
        ),
    ],
)
def test_a_scheduler_index_plays_that_shard_and_the_run_says_where_it_came_from(
    pytester, run_pytest, monkeypatch, environ, option, source, said
):
    pytester.makepyfile(test_suite=SUITE)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    result = run_pytest(f"--openenv-shard={option}", "-n", "0")
    assert f"plays shard 1/2 {said}" in result.stdout.str()
    metadata = json.loads(
        (pytester.path / "openenv-results" / "shard-1-of-2" / "metadata.json").read_text()
    )
    assert metadata["shard"]["source"] == source and metadata["identity"]["shard"] == "1/2"


@pytest.mark.parametrize(
    ("value", "environ", "said"),
    [
        ("3/3", {}, "the index 3 is not below the count 3"),
        ("1", {}, "no shard count"),
        ("a/3", {}, "the index 'a' is not a whole number"),
        ("0/0", {}, "the count must be at least 1"),
        ("auto/3", {}, "neither JOB_COMPLETION_INDEX nor SLURM_ARRAY_TASK_ID is set"),
        ("auto", {"JOB_COMPLETION_INDEX": "1"}, "the index came from JOB_COMPLETION_INDEX"),
        ("auto", {"SLURM_ARRAY_TASK_ID": "1"}, "the shard count is not known"),
    ],
)
def test_a_bad_shard_is_a_usage_error_naming_the_option_and_the_forms(value, environ, said):
    with pytest.raises(pytest.UsageError) as refused:
        parse_shard(value, environ)
    assert str(refused.value).startswith(f"--openenv-shard={value!r} is invalid: {said}")
    assert "expected I/N (0 <= I < N" in str(refused.value)


def test_a_bad_shard_stops_the_run_with_exit_4(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--openenv-shard=2/2")
    assert result.ret == 4
    assert "--openenv-shard='2/2' is invalid" in result.stderr.str()


def test_a_shard_holds_an_episode_by_its_index_whatever_the_count_of_episodes():
    shard = Shard(1, 3)
    assert [i for i in range(10) if shard.holds(i)] == [1, 4, 7]
    assert shard.folder_name == "shard-1-of-3"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The Hub stand-in (tests/servers/hub_standin.py) with a token of this test's own."""
    import secrets as random_tokens

    from servers.hub_standin import HubStandIn

    token = "hf_" + random_tokens.token_hex(16)
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with HubStandIn(token) as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        yield standin, token


def test_the_merged_folder_pushes_and_holds_no_secret_a_shard_let_through(
    pytester, run_pytest, hub
):
    standin, token = hub
    pytester.makepyfile(test_suite=SUITE)
    for index in (0, 1):
        run_pytest(f"--openenv-shard={index}/2", "-n", "0")
    first = pytester.path / "openenv-results" / "shard-0-of-2"
    # a shard played where the token was not known to be one left it in a transcript
    lines = (first / "results.jsonl").read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"content":"', f'"content":"{token} ', 1)
    (first / "results.jsonl").write_text("".join(lines))
    merged = merge("merged", first, first.with_name("shard-1-of-2"), cwd=pytester.path)
    assert merged.returncode in (0, 1), merged.stderr
    folder = pytester.path / "merged"
    for path in folder.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert token not in merged.stdout + merged.stderr
    pushed = subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "push", "merged", "alice/merged-run"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pushed.returncode == 0, pushed.stderr
    (commit,) = standin.commits("alice/merged-run")
    assert commit.files["results.jsonl"] == (folder / "results.jsonl").read_bytes()
    assert commit.files["summary.json"] == (folder / "summary.json").read_bytes()
    assert 'load_dataset("alice/merged-run", split="train")' in commit.files["README.md"].decode()


def test_a_shard_past_every_tests_n_holds_nothing_and_is_not_missing(tmp_path):
    from pytest_openenv.dataset.shards import ShardFolder, check_shards
    from pytest_openenv.errors import ShardsRefused

    tests = {"t.py::test_a": {"n": 2, "repeats": 1, "arms": [""]}}
    identity = {"identity": {"seed": 0, "shard": "0/3"}}
    folders = [ShardFolder(tmp_path / f"s{i}", identity, i, 3, "option", tests) for i in (0, 1)]
    # n=2 over 3 shards: shard 2 holds no episode, so the two folders are the whole run
    assert check_shards(folders, allow_partial=False).missing == []
    with pytest.raises(ShardsRefused, match=r"shard 1/3 .* holds t\.py::test_a: ep-000001\."):
        check_shards(folders[:1], allow_partial=False)
