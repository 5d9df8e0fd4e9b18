"""Resume checks the recorded run identity: another env, seed, policy or config is refused.

Resume skips by test id, and ``test_ep[ep-000004]`` names another episode under
another seed, game or policy: resuming into such a folder used to exit 0 with
two runs' rows in one dataset. Now it is exit 4 naming the field, both values
and the option, before any episode, with the folder left as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faults import ENV, Launcher, episode_ids, read_rows

N = 3
FIRST = (f"--openenv-env={ENV}", f"--openenv-n={N}", "test_eps.py")
KEEP_ALL = "--openenv-min-reward=-1"  # every episode passes: all land in results.jsonl


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


@pytest.mark.parametrize(
    ("change", "recorded", "now"),
    [
        (["--openenv-env=openspiel:connect_four"], f'env="{ENV}"', 'env="openspiel:connect_four"'),
        (["--openenv-seed=7"], "seed=0", "seed=7"),
        # no policy named: the identity holds the teacher that played (tic-tac-toe: expert)
        (["--openenv-policy=random"], 'policy="expert"', 'policy="random"'),
        (
            ['--openenv-env-config={"opponent": "first"}'],
            "env_config={}",
            'env_config={"opponent": "first"}',
        ),
        (["--openenv-repeats=2"], "repeats=1", "repeats=2"),
        (["--openenv-min-reward=1"], "min_reward=null", "min_reward=1.0"),
    ],
)
@pytest.mark.slow
def test_resume_with_another_identity_is_refused(
    launcher: Launcher, change: list[str], recorded: str, now: str
) -> None:
    launcher.write_episode_test()
    first = launcher.run(*FIRST)
    assert first.returncode in (0, 1), first.stdout[-3000:]
    kept = snapshot(launcher.output)

    env_arg = next((a for a in change if a.startswith("--openenv-env=")), FIRST[0])
    resumed = launcher.run(env_arg, *change, *FIRST[1:], "--openenv-resume")
    assert resumed.returncode == 4, resumed.text[-3000:]
    message = resumed.stderr
    assert f"written by a run with {recorded}, this run has {now}" in message, message
    field = recorded.partition("=")[0]
    assert f"(--openenv-{field.replace('_', '-')})" in message, message
    assert snapshot(launcher.output) == kept
    assert "test_ep[" not in resumed.stdout  # no episode ran


@pytest.mark.slow
def test_resume_with_the_same_identity_extends_the_run(launcher: Launcher) -> None:
    launcher.write_episode_test()
    assert launcher.run(*FIRST, KEEP_ALL).returncode == 0
    resumed = launcher.run(FIRST[0], "--openenv-n=5", "test_eps.py", KEEP_ALL, "--openenv-resume")
    assert resumed.returncode == 0, resumed.text[-3000:]
    # the gate and card count the whole dataset: the earlier run's rows pass once each
    assert (
        f"{N + 2} passed, 0 failed, 0 errored, 0 skipped ({N} of the passed from the earlier "
        "run: --openenv-resume)"
    ) in resumed.stdout
    rows = read_rows(launcher.output / "results.jsonl")
    assert sorted(episode_ids(rows)) == [f"ep-{i:06d}" for i in range(5)]


@pytest.mark.slow
def test_killed_run_records_its_identity_before_the_first_episode(launcher: Launcher) -> None:
    launcher.write_episode_test()
    run = launcher.start(*FIRST[:1], "--openenv-n=40", "test_eps.py", env={"FAULT_DELAY": "0.02"})
    assert run.wait_rows(2)
    run.signal_group(9)  # SIGKILL: no session end, no final metadata.json
    run.wait()
    metadata = json.loads((launcher.output / "metadata.json").read_text())
    assert metadata["identity"]["seed"] == 0 and metadata["finished_at"] is None

    resumed = launcher.run(
        *FIRST[:1], "--openenv-n=40", "--openenv-seed=3", "test_eps.py", "--openenv-resume"
    )
    assert resumed.returncode == 4, resumed.text[-3000:]
    assert "seed=0" in resumed.stderr and "seed=3" in resumed.stderr


@pytest.mark.slow
def test_folder_of_an_earlier_version_is_checked_from_its_settings(launcher: Launcher) -> None:
    launcher.write_episode_test()
    assert launcher.run(*FIRST).returncode in (0, 1)
    path = launcher.output / "metadata.json"
    metadata = json.loads(path.read_text())
    for key in ("written_by", "folder_format", "identity"):
        del metadata[key]  # as the version before run identities wrote it
    path.write_text(json.dumps(metadata))

    resumed = launcher.run(*FIRST, "--openenv-seed=9", "--openenv-resume")
    assert resumed.returncode == 4, resumed.text[-3000:]
    assert "seed=0" in resumed.stderr and "seed=9" in resumed.stderr


def tear_last_line(results: Path) -> bytes:
    raw = results.read_bytes()
    last_start = raw.rstrip(b"\n").rfind(b"\n") + 1
    results.write_bytes(raw[: last_start + (len(raw) - last_start) // 2])  # half a line
    return results.read_bytes()


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_collect_only_and_a_refused_resume_change_no_byte(launcher: Launcher, workers: str) -> None:
    """Both cut the torn line off results.jsonl; neither may write at all."""
    launcher.write_episode_test()
    assert launcher.run(*FIRST, KEEP_ALL).returncode == 0
    tear_last_line(launcher.output / "results.jsonl")
    kept = snapshot(launcher.output)

    listed = launcher.run("-n", workers, *FIRST, KEEP_ALL, "--openenv-resume", "--collect-only")
    assert listed.returncode == 0, listed.text[-3000:]
    assert snapshot(launcher.output) == kept

    refused = launcher.run("-n", workers, *FIRST, "--openenv-seed=5", "--openenv-resume")
    assert refused.returncode == 4, refused.text[-3000:]
    assert snapshot(launcher.output) == kept

    resumed = launcher.run("-n", workers, *FIRST, KEEP_ALL, "--openenv-resume")
    assert resumed.returncode == 0, resumed.text[-3000:]
    assert "ended in a torn line" in resumed.stdout
    assert sorted(episode_ids(read_rows(launcher.output / "results.jsonl"))) == [
        f"ep-{i:06d}" for i in range(N)
    ]
