"""``--openenv-inspect-log`` and ``python -m pytest_openenv inspect-log``: inspect-ai reads
what we write, as it reads its own logs (``read_eval_log``, ``samples_df``, ``inspect view``)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

# pandas and pyarrow (what samples_df builds on) load once per process, before any pytester
# run: a first import inside an in-process pytester run is dropped at its teardown
import pandas  # noqa: F401
import pyarrow  # noqa: F401
import pytest
from helpers import played_rows as all_rows
from helpers import read_jsonl
from inspect_ai.analysis import samples_df
from inspect_ai.log import read_eval_log
from inspect_viewer import inspect_view

from pytest_openenv.report.stats import wilson_interval

#: two groups: the random player (passes and losses on the same seeds, with repeats), and
#: a model-named policy that sends broken JSON once, then the scripted move, and whose
#: seed 1 meets an outage (an errored episode)
RANDOM_TEST = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=4, policy="random")
def test_random_player(episode):
    assert episode.passed, episode.explain()
"""

#: a policy module: broken JSON first, then the scripted move; seed 1 meets an outage
FLAKY_POLICY = """
from pytest_openenv import Reply, ToolCall
from pytest_openenv.policies.base import PolicyUnavailable


def play(messages, tools, turn):
    if turn.seed == 1:
        raise PolicyUnavailable("planted outage")
    if turn.turn == 1:
        return Reply(content="a first try", tool_calls=(ToolCall("c0", "play_move", "{oops"),))
    return Reply(tool_calls=(ToolCall.from_proposed(turn.scripted, f"c{turn.turn}"),))
"""

OUTAGE_TEST = """
import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=3, opponent="first", policy="flaky_policy:play")
def test_flaky_player(episode):
    assert episode.passed, episode.explain()
"""


def two_group_run(pytester: pytest.Pytester, run_pytest: Any, *extra: str) -> Path:
    pytester.makepyfile(test_random=RANDOM_TEST, test_outage=OUTAGE_TEST, flaky_policy=FLAKY_POLICY)
    result = run_pytest("--openenv-repeats=2", "--openenv-inspect-log", "-n", "0", *extra)
    assert result.ret == 1, result.stdout.str()[-3000:]
    return pytester.path / "openenv-results"


@pytest.mark.slow
def test_every_group_gets_a_log_inspect_reads_with_one_sample_per_episode(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    folder = two_group_run(pytester, run_pytest)
    logs = sorted((folder / "inspect-logs").glob("*.eval"))
    rows = all_rows(folder)
    assert len(logs) == 2
    by_task = {}
    for path in logs:
        log = read_eval_log(str(path))
        assert log.status == "success"
        by_task[log.eval.task] = log
    random_log, flaky_log = by_task["test_random_player"], by_task["test_flaky_player"]

    # the eval spec: env, policy, model, seeds, repeats and the plugin's version
    assert random_log.eval.model == "policy/random"
    assert flaky_log.eval.model == "policy/flaky_policy:play"
    assert random_log.eval.task_file == "test_random.py"
    assert random_log.eval.config.epochs == 2
    assert random_log.eval.metadata["env"] == "openspiel:tic_tac_toe"
    assert random_log.eval.metadata["policy"] == "random"
    assert random_log.eval.metadata["seeds"] == [0, 1, 2, 3]
    from pytest_openenv import __version__

    assert random_log.eval.metadata["plugin_version"] == __version__
    assert random_log.eval.packages["pytest-openenv"] == __version__

    # one sample per episode: id without the repeat suffix, epoch = repeat + 1
    random_rows = {r["episode_id"]: r for r in rows if "test_random_player" in r["test"]}
    assert len(random_rows) == 8
    samples = {s.metadata["episode_id"]: s for s in random_log.samples or []}
    assert set(samples) == set(random_rows)
    for episode_id, sample in samples.items():
        row = random_rows[episode_id]
        assert sample.id == episode_id.rsplit("-r", 1)[0]
        assert sample.epoch == row["extra"]["repeat"] + 1
        assert sample.input == row["messages"][1]["content"]
        score = sample.scores["verdict"]
        assert score.value == ("C" if row["passed"] else "I")
        assert score.metadata["reward"] == row["reward"]
        assert score.metadata["turns"] == row["metrics"]["turns"]
        assert score.metadata["outcome"] == row["verify_metrics"]["outcome"]
        calls = [c for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
        assert [c.arguments for c in calls] == [t["arguments"] for t in row["tool_trace"]]
        assert sum(m.role == "tool" for m in sample.messages) == len(row["tool_trace"])

    # the group's figures as results, counted from its rows
    passed = sum(r["passed"] for r in random_rows.values())
    metrics = random_log.results.scores[0].metrics
    assert metrics["accuracy"].value == pytest.approx(passed / 8)
    low, high = wilson_interval(passed, 8, 0.95)
    assert (metrics["accuracy_ci_low"].value, metrics["accuracy_ci_high"].value) == (low, high)
    rewards = [r["reward"] for r in random_rows.values()]
    assert metrics["mean_reward"].value == pytest.approx(sum(rewards) / 8)
    assert {"pass@1", "pass@2", "pass^2"} <= set(metrics)

    # the flaky player: an errored episode is a sample error, a broken call a parse error
    flaky = {s.metadata["episode_id"]: s for s in flaky_log.samples or []}
    assert len(flaky) == 6
    errored = [s for s in flaky.values() if s.error is not None]
    assert {s.metadata["seed"] for s in errored} == {1}
    assert all("planted outage" in s.error.message for s in errored)
    assert all(s.scores["verdict"].value == "I" for s in errored)
    played = next(s for s in flaky.values() if s.error is None)
    first_call = played.messages[2].tool_calls[0]
    assert first_call.parse_error and "{oops" in first_call.parse_error

    # inspect's dataframes: one row per episode, with our verdicts
    frame = samples_df([str(path) for path in logs])
    assert len(frame) == len(rows) == 14
    keys = zip(frame["metadata_test"], frame["metadata_episode_id"], strict=True)
    verdicts = dict(zip(keys, frame["score_verdict"], strict=True))
    for row in rows:
        assert verdicts[row["test"], row["episode_id"]] == ("C" if row["passed"] else "I")


@pytest.mark.slow
def test_the_command_writes_the_same_logs_from_a_folder_a_resumed_run_grew(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    pytester.makepyfile(test_random=RANDOM_TEST.replace("n=4", "n=2"))
    assert run_pytest("-n", "0").ret in (0, 1)
    pytester.makepyfile(test_random=RANDOM_TEST.replace("n=4", "n=5"))
    assert run_pytest("-n", "0", "--openenv-resume").ret in (0, 1)
    folder = pytester.path / "openenv-results"
    out = pytester.path / "logs"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "inspect-log", str(folder), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("*.eval")
    log = read_eval_log(str(path))
    assert sorted(s.id for s in log.samples or []) == [f"ep-{i:06d}" for i in range(5)]
    assert str(path) in done.stdout


def inspect_log_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "inspect-log", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_the_command_skips_a_torn_last_line_and_refuses_a_file_as_out(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    """What kill -9 leaves (a last line cut off mid-write), and ``--out`` at a file, ended
    in tracebacks."""
    pytester.makepyfile(test_random=RANDOM_TEST.replace("n=4", "n=2"))
    assert run_pytest("-n", "0").ret in (0, 1)
    folder = pytester.path / "openenv-results"
    whole = all_rows(folder)
    results = folder / "results.jsonl"
    cut = b'{"episode_id": "ep-000002", "test": "test_ra'
    with results.open("ab") as handle:
        handle.write(cut)  # no newline, not JSON: a torn last line
    out = pytester.path / "logs"
    done = inspect_log_command(str(folder), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"warning: {results} ends in a line cut off mid-write" in done.stderr
    assert "Traceback" not in done.stderr
    logs = list(out.glob("*.eval"))
    samples = [s for path in logs for s in read_eval_log(str(path)).samples or []]
    assert len(samples) == len(whole) == 2

    a_file = pytester.path / "taken.txt"
    a_file.write_text("keep me")
    done = inspect_log_command(str(folder), "--out", str(a_file))
    assert done.returncode == 2, done.stderr
    assert f"error: --out {a_file} is a file" in done.stderr and "Traceback" not in done.stderr
    assert a_file.read_text() == "keep me"

    with results.open("ab") as handle:
        handle.write(b"\n" + cut + b"\n")  # a broken line with lines after it: no tear
    done = inspect_log_command(str(folder), "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert f"error: cannot read {results}:" in done.stderr and "Traceback" not in done.stderr


def test_the_command_refuses_a_folder_that_is_not_an_output_folder(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "inspect-log", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "not a pytest-openenv output folder" in done.stderr


@pytest.mark.slow
def test_a_secret_a_row_echoed_never_reaches_the_log(
    pytester: pytest.Pytester, run_pytest: Any, tmp_path: Path
) -> None:
    pytester.makepyfile(test_random=RANDOM_TEST.replace("n=4", "n=2"))
    run_pytest("-n", "0")
    folder = pytester.path / "openenv-results"
    secret = "sk-planted-inspect-0123456789"
    # an earlier run's rows, written before this key was known as one
    rows = read_jsonl(folder / "results.jsonl")
    rows[0]["messages"][1]["content"] += f" key={secret}"
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "logs"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_openenv", "inspect-log", str(folder), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OPENAI_API_KEY": secret},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("*.eval")
    with zipfile.ZipFile(path) as archive:
        text = b"".join(archive.read(name) for name in archive.namelist())
    assert secret.encode() not in text
    assert b"key=***" in text


def test_inspect_log_without_inspect_ai_is_a_usage_error_before_any_episode(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    # a conftest that hides inspect-ai, as an environment without the extra would
    pytester.makeconftest(
        """
import sys

sys.modules["inspect_ai"] = None  # what Python makes of a package it cannot import
"""
    )
    result = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-inspect-log", "-n", "0")
    assert result.ret == 4
    text = result.stderr.str()
    assert "--openenv-inspect-log" in text and "pytest-openenv[inspect]" in text
    assert not (pytester.path / "openenv-results" / "results.jsonl").exists()


@pytest.mark.slow
def test_a_folder_given_to_the_option_holds_the_logs_and_a_new_run_keeps_the_old_ones(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    pytester.makepyfile(test_random=RANDOM_TEST.replace("n=4", "n=2"))
    run_pytest("-n", "0", "--openenv-inspect-log=my-logs")
    assert len(list((pytester.path / "my-logs").glob("*.eval"))) == 1
    # the default folder sits inside the output folder; a second run moves it aside
    run_pytest("-n", "0", "--openenv-inspect-log")
    run_pytest("-n", "0", "--openenv-inspect-log")
    folder = pytester.path / "openenv-results"
    kept = [p for p in folder.iterdir() if p.name.startswith("inspect-logs.")]
    assert len(kept) == 1 and list(kept[0].glob("*.eval"))
    assert len(list((folder / "inspect-logs").glob("*.eval"))) == 1


# -- inspect view ---------------------------------------------------------------------------
def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


@pytest.mark.slow
def test_inspect_view_serves_a_written_log_and_its_samples_on_loopback(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    folder = two_group_run(pytester, run_pytest)
    log_dir = folder / "inspect-logs"
    with inspect_view(log_dir) as base:
        listing = json.loads(get(base + "/api/log-files"))
        names = sorted(Path(entry["name"]).name for entry in listing["files"])
        assert names == sorted(p.name for p in log_dir.glob("*.eval"))
        name = next(e["name"] for e in listing["files"] if "test_random_player" in e["name"])
        quoted = urllib.parse.quote(name, safe="")
        log = json.loads(get(f"{base}/api/logs/{quoted}"))
        assert log["eval"]["task"] == "test_random_player"
        assert log["results"]["scores"][0]["metrics"]["accuracy"]["value"] >= 0
        # a sample, read as the viewer reads it: byte ranges of the .eval archive
        size = int(json.loads(get(f"{base}/api/log-size/{quoted}")))
        data = get(f"{base}/api/log-bytes/{quoted}?start=0&end={size - 1}")
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            sample = json.loads(archive.read("samples/ep-000000_epoch_1.json"))
    assert sample["id"] == "ep-000000" and sample["epoch"] == 1
    assert sample["scores"]["verdict"]["value"] in ("C", "I")
    rows = {(r["test"], r["episode_id"]): r for r in all_rows(folder)}
    row = rows["test_random.py::test_random_player[ep-000000-r0]", "ep-000000-r0"]
    assert sample["scores"]["verdict"]["value"] == ("C" if row["passed"] else "I")
    calls = [c for m in sample["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]
    assert [c["arguments"] for c in calls] == [t["arguments"] for t in row["tool_trace"]]


@pytest.mark.slow
def test_a_test_path_after_the_bare_option_is_a_usage_error_not_its_folder(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    pytester.makepyfile(test_random=RANDOM_TEST.replace("n=4", "n=1"))
    result = run_pytest("--openenv-inspect-log", "test_random.py", "-n", "0")
    assert result.ret == 4
    assert "--openenv-inspect-log=DIR" in result.stderr.str()
    # written with "=", an empty value is the default folder and the path is collected
    result = run_pytest("--openenv-inspect-log=", "test_random.py", "-n", "0")
    assert result.ret in (0, 1)
    assert list((pytester.path / "openenv-results" / "inspect-logs").glob("*.eval"))


def samples_df_snippet() -> str:
    """docs/neighbouring-tools.md's Python block that reads a run's logs with samples_df."""
    from markdown_it import MarkdownIt

    page = Path(__file__).resolve().parent.parent / "docs" / "neighbouring-tools.md"
    fences = MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8"))
    (snippet,) = [
        token.content
        for token in fences
        if token.type == "fence"
        and token.info.strip() == "python"
        and "samples_df" in token.content
    ]
    return snippet


def test_the_inspect_extra_installs_what_inspect_s_dataframes_need() -> None:
    """inspect-ai does not depend on pandas or pyarrow, yet ``samples_df`` refuses to run
    without them (at the floors its ``verify_prerequisites`` checks): the extra the docs
    name for the snippet must bring them, and so must ``all``."""
    import inspect as source_of

    from inspect_ai.analysis._dataframe import util
    from packaging.requirements import Requirement
    from packaging.version import Version

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        from pip._vendor import tomli as tomllib

    checks = source_of.getsource(util.verify_prerequisites)
    needed = dict(
        re.findall(
            r'verify_required_version\(\s*"inspect_ai\.analysis",\s*"([\w-]+)",\s*"([^"]+)"', checks
        )
    )
    assert set(needed) == {"pandas", "pyarrow"}, checks
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    for extra in ("inspect", "all"):
        declared = {Requirement(text).name: Requirement(text) for text in extras[extra]}
        for name, floor in needed.items():
            assert name in declared, f"[{extra}] lacks {name}, which samples_df needs"
            lowest = [
                Version(spec.version) for spec in declared[name].specifier if spec.operator == ">="
            ]
            assert lowest and lowest[0] >= Version(floor), (extra, declared[name], floor)


@pytest.mark.slow
def test_the_docs_samples_df_snippet_reads_a_run_s_logs(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    """The snippet as the page prints it, run where the page's command ran: one row per
    episode, with the columns it asks for."""
    pytester.makepyfile(test_random=RANDOM_TEST)
    assert run_pytest("--openenv-inspect-log", "-n", "0").ret in (0, 1)
    done = subprocess.run(
        [sys.executable, "-c", samples_df_snippet()],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    header, *lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert header.split() == ["metadata_episode_id", "epoch", "score_verdict", "metadata_reward"]
    ids = {row["episode_id"] for row in all_rows(pytester.path / "openenv-results")}
    assert len(ids) == 4 and len(lines) == 4
    assert {line.split()[1] for line in lines} == ids
