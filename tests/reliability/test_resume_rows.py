"""Resume checks each test's rows against what its marker resolves to now.

A marker edited from tic-tac-toe/expert/seed 7 to connect-four/random/seed 1000 and run
with ``--openenv-resume`` skipped all five items and passed the gate on tic-tac-toe
rows; with ``metadata.json`` missing, truncated or without an ``identity`` even a
changed command line mixed two runs. The rows carry env, config, seed, policy, model
and the pass threshold, so each resumed row is checked against its test: a mismatch is
exit 4 naming the test, the field, both values and what sets it, before any episode,
with every file as it was (refused, not re-run: re-running would replace the earlier
rows without a word).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faults import Launcher, episode_ids, read_rows

MARKED = """
import pytest

@pytest.mark.openenv({marker})
def test_ep(episode):
    assert episode.passed, episode.explain()
"""
FIRST = '"openspiel:tic_tac_toe", n=3, policy="expert", seed=7'


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def write_test(launcher: Launcher, marker: str) -> None:
    (launcher.folder / "test_marked.py").write_text(MARKED.format(marker=marker))


#: (marker now, field, recorded, now); the first two again under xdist
CHANGES = [
    (
        '"openspiel:connect_four", n=3, policy="random", seed=1000',
        "env",
        '"openspiel:tic_tac_toe"',
        '"openspiel:connect_four"',
    ),
    ('"openspiel:tic_tac_toe", n=3, policy="expert", seed=8', "seed", "7", "8"),
    ('"openspiel:tic_tac_toe", n=3, policy="random", seed=7', "policy", '"expert"', '"random"'),
    (
        '"openspiel:tic_tac_toe", n=3, policy="expert", seed=7, opponent="first"',
        "env_config",
        "{}",
        '{"opponent": "first"}',
    ),
    (
        '"openspiel:tic_tac_toe", n=3, policy="expert", seed=7, min_reward=1',
        "min_reward",
        "0.0",
        "1.0",
    ),
]


@pytest.mark.parametrize(
    ("marker", "field", "recorded", "now", "workers"),
    [(*change, "0") for change in CHANGES] + [(*change, "2") for change in CHANGES[:2]],
)
def test_a_marker_edited_since_the_rows_were_played_is_refused(
    launcher: Launcher, marker: str, field: str, recorded: str, now: str, workers: str
) -> None:
    write_test(launcher, FIRST)
    first = launcher.run("test_marked.py")
    assert first.returncode == 0, first.text[-3000:]
    kept = snapshot(launcher.output)

    write_test(launcher, marker)
    resumed = launcher.run(
        "-n", workers, "test_marked.py", "--openenv-resume", "--openenv-min-pass-rate=0.9"
    )
    assert resumed.returncode == 4, resumed.text[-3000:]
    assert (
        "--openenv-resume: results.jsonl holds test_marked.py::test_ep[ep-000000] "
        f"(and 2 more of its rows) played with {field}={recorded}; this run plays it with "
        f"{field}={now}"
    ) in resumed.stderr, resumed.stderr
    assert "gate: PASSED" not in resumed.stdout and " skipped in " not in resumed.stdout
    assert snapshot(launcher.output) == kept


@pytest.mark.slow
def test_the_same_marker_resumes_and_extends(launcher: Launcher) -> None:
    marker = '"openspiel:tic_tac_toe", n={n}, policy="random", seed=7, min_reward=-1'
    write_test(launcher, marker.format(n=3))
    assert launcher.run("test_marked.py").returncode == 0
    write_test(launcher, marker.format(n=5))
    resumed = launcher.run("test_marked.py", "--openenv-resume")
    assert resumed.returncode == 0, resumed.text[-3000:]
    assert "2 passed, 3 skipped" in resumed.stdout
    rows = read_rows(launcher.output / "results.jsonl")
    assert sorted(episode_ids(rows)) == [f"ep-{i:06d}" for i in range(5)]


@pytest.mark.parametrize(
    "damage",
    ["missing", "identity is not a dict", "no identity, no settings"],
)
@pytest.mark.slow
def test_without_a_recorded_identity_the_rows_are_checked(launcher: Launcher, damage: str) -> None:
    write_test(launcher, FIRST)
    assert launcher.run("test_marked.py").returncode == 0
    path = launcher.output / "metadata.json"
    metadata = json.loads(path.read_text())
    if damage == "missing":
        path.unlink()
    elif damage == "identity is not a dict":
        metadata["identity"] = "tic-tac-toe"
        del metadata["settings"]
        path.write_text(json.dumps(metadata))
    else:
        path.write_text(json.dumps({"written_by": "pytest-openenv"}))
    kept = snapshot(launcher.output)

    write_test(launcher, '"openspiel:connect_four", n=3, policy="random", seed=1000')
    resumed = launcher.run("test_marked.py", "--openenv-resume")
    assert resumed.returncode == 4, resumed.text[-3000:]
    assert 'played with env="openspiel:tic_tac_toe"' in resumed.stderr, resumed.stderr
    assert snapshot(launcher.output) == kept

    # the command line's seed, too, is checked against the rows
    write_test(launcher, '"openspiel:tic_tac_toe", n=3, policy="expert"')
    reseeded = launcher.run("test_marked.py", "--openenv-resume", "--openenv-seed=100")
    assert reseeded.returncode == 4, reseeded.text[-3000:]
    assert "played with seed=7; this run plays it with seed=100" in reseeded.stderr
    assert snapshot(launcher.output) == kept


@pytest.mark.slow
def test_a_truncated_metadata_json_is_named_as_damaged(launcher: Launcher) -> None:
    write_test(launcher, FIRST)
    assert launcher.run("test_marked.py").returncode == 0
    path = launcher.output / "metadata.json"
    path.write_bytes(path.read_bytes()[:40])
    kept = snapshot(launcher.output)

    resumed = launcher.run("test_marked.py", "--openenv-resume")
    assert resumed.returncode == 4, resumed.text[-3000:]
    assert "its metadata.json is damaged (it is not whole JSON" in resumed.stderr, resumed.stderr
    assert "not written by pytest-openenv" not in resumed.stderr
    assert snapshot(launcher.output) == kept


JUDGE_IS_THE_TEST = "--openenv-train-on=test"
LENIENT = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=3, policy="random"{judge_at})
def test_ep(episode):
    assert episode.turns >= 1  # the test decides: unfinished episodes pass it too
"""


@pytest.mark.slow
def test_a_judge_point_edited_since_is_refused_and_a_lenient_test_is_not(
    launcher: Launcher,
) -> None:
    """Rows the verdict passed at the turn limit are another verdict for a test judged only
    when done; rows a lenient test body passed while unfinished say nothing of the verdict
    (kept for training with --openenv-train-on=test: the test body is the judge)."""
    test = launcher.folder / "test_marked.py"
    test.write_text(LENIENT.format(judge_at=""))
    assert (
        launcher.run("test_marked.py", JUDGE_IS_THE_TEST, "--openenv-max-turns=1").returncode == 0
    )
    again = launcher.run(
        "test_marked.py", JUDGE_IS_THE_TEST, "--openenv-max-turns=1", "--openenv-resume"
    )
    assert again.returncode == 0, again.text[-3000:]  # unfinished, passed by the test only
    assert "3 skipped" in again.stdout

    test.write_text(LENIENT.format(judge_at=', judge_at="turn-limit"'))
    assert (
        launcher.run("test_marked.py", JUDGE_IS_THE_TEST, "--openenv-max-turns=1").returncode == 0
    )
    test.write_text(LENIENT.format(judge_at=""))
    refused = launcher.run(
        "test_marked.py", JUDGE_IS_THE_TEST, "--openenv-max-turns=1", "--openenv-resume"
    )
    assert refused.returncode == 4, refused.text[-3000:]
    assert 'played with judge_at="turn-limit"; this run plays it with judge_at="done"' in (
        refused.stderr
    ), refused.stderr


RANDOM = '"openspiel:tic_tac_toe", n=10, policy="random", seed=3'


@pytest.mark.slow
def test_resume_plays_only_episodes_that_never_finished_and_replaying_failures_is_best_of_n(
    launcher: Launcher,
) -> None:
    """A failed episode finished: resume counts it by that first attempt and leaves it be
    (replaying it until it passes would turn pass@1 into best of N)."""
    write_test(launcher, RANDOM)
    first = launcher.run()
    assert first.returncode == 1, first.text[-2000:]
    failed = episode_ids(read_rows(launcher.output / "failures.jsonl"))
    passed = episode_ids(read_rows(launcher.output / "results.jsonl"))
    assert failed and passed, "the random policy must both win and lose here"
    before = json.loads((launcher.output / "summary.json").read_text())["figures"]

    resumed = launcher.run("--openenv-resume", "--openenv-min-pass-rate=0.0")
    assert resumed.returncode == 0, resumed.text[-2000:]
    after = json.loads((launcher.output / "summary.json").read_text())["figures"]
    assert after["played"] == 0  # nothing replayed
    assert (after["passed"], after["failed"], after["pass_rate"]) == (
        before["passed"],
        before["failed"],
        before["pass_rate"],
    )
    assert after["attempts"] == 1
    assert sorted(episode_ids(read_rows(launcher.output / "failures.jsonl"))) == sorted(failed)

    again = launcher.run("--openenv-resume", "--openenv-resume-failed", "--openenv-min-pass-rate=0")
    figures = json.loads((launcher.output / "summary.json").read_text())["figures"]
    assert figures["played"] == len(failed) and figures["attempts"] == 2
    assert "best of up to 2 attempts" in again.stdout
    assert "the gate was not judged" in again.stdout
    replayed = [
        r
        for r in read_rows(launcher.output / "results.jsonl")
        + read_rows(launcher.output / "failures.jsonl")
        if r["episode_id"] in failed
    ]
    assert {r["extra"].get("attempt") for r in replayed} == {2}  # each row says which attempt
    assert "best of up to 2 attempts" in (launcher.output / "README.md").read_text()


@pytest.mark.parametrize(
    ("option", "field"),
    [
        ("--openenv-tool-arguments=object", "tool_arguments"),
        ("--openenv-system-prompt=Play to win.", "system_prompt"),
        ("--openenv-max-turns=7", "max_turns"),
        ("--openenv-prompt-style=openenv", "prompt_style"),
    ],
)
@pytest.mark.slow
def test_without_metadata_every_identity_field_the_rows_show_is_checked(
    launcher: Launcher, option: str, field: str
) -> None:
    """metadata.json gone: the rows' messages and extra still tell how they were played."""
    write_test(launcher, FIRST)
    assert launcher.run("test_marked.py").returncode == 0
    (launcher.output / "metadata.json").unlink()
    kept = snapshot(launcher.output)
    resumed = launcher.run("test_marked.py", "--openenv-resume", option)
    assert resumed.returncode == 4, resumed.text[-3000:]
    assert "--openenv-resume: results.jsonl holds test_marked.py::test_ep[ep-000000]" in (
        resumed.stderr
    )
    assert f"played with {field}=" in resumed.stderr, resumed.stderr
    assert option.split("=")[0] in resumed.stderr
    assert snapshot(launcher.output) == kept
    same = launcher.run("test_marked.py", "--openenv-resume")  # as recorded: resumes
    assert same.returncode == 0, same.text[-3000:]


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_dropping_an_arm_from_a_marker_is_refused_not_played_twice(
    launcher: Launcher, workers: str
) -> None:
    """policies=["expert", "random"] then ["expert"]: the ids lose their arm part, so
    ``expert-ep-000000`` would be played again as ``ep-000000`` beside its old row."""
    write_test(launcher, '"openspiel:tic_tac_toe", n=2, policies=["expert", "random"]')
    assert launcher.run("test_marked.py").returncode in (0, 1)
    kept = snapshot(launcher.output)
    write_test(launcher, '"openspiel:tic_tac_toe", n=2, policies=["expert"]')
    resumed = launcher.run("-n", workers, "test_marked.py", "--openenv-resume")
    assert resumed.returncode == 4, resumed.text[-3000:]
    assert "results.jsonl holds test_marked.py::test_ep[expert-ep-000000]" in resumed.stderr
    assert "would play again as test_marked.py::test_ep[ep-000000]" in resumed.stderr
    assert "its episode id changed" in resumed.stderr and "models=[...]" in resumed.stderr
    assert snapshot(launcher.output) == kept


@pytest.mark.slow
def test_a_renamed_test_file_is_refused_not_played_beside_its_old_rows(
    launcher: Launcher,
) -> None:
    write_test(launcher, FIRST)
    assert launcher.run("test_marked.py").returncode == 0
    kept = snapshot(launcher.output)
    (launcher.folder / "test_marked.py").rename(launcher.folder / "test_renamed.py")
    resumed = launcher.run("test_renamed.py", "--openenv-resume")
    assert resumed.returncode == 4, resumed.text[-3000:]
    assert "results.jsonl holds test_marked.py::test_ep[ep-000000]" in resumed.stderr
    assert "would play again as test_renamed.py::test_ep[ep-000000]" in resumed.stderr
    assert "a test this run does not collect" in resumed.stderr
    assert snapshot(launcher.output) == kept
    # two tests of one run that play the same episodes are both kept, each with its rows
    (launcher.folder / "test_marked.py").write_text(
        (launcher.folder / "test_renamed.py").read_text()
    )
    both = launcher.run("test_marked.py", "test_renamed.py", "--openenv-resume")
    assert both.returncode == 0, both.text[-3000:]
    rows = read_rows(launcher.output / "results.jsonl")
    assert len(rows) == 6
