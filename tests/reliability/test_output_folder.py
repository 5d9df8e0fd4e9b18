"""The output folder: the plugin writes only files it owns, and never overwrites anyone's.

A folder holding anything the plugin did not write (a project's README, notes,
dot-files, sub-folders, a metadata.json of another tool) is refused with exit 4
naming those files, before any episode and without touching a byte. A folder an
earlier run wrote is reused: that run's files are moved aside, never overwritten.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faults import ENV, Launcher, episode_ids, read_rows

from pytest_openenv.dataset.card import GENERATED_MARKER
from pytest_openenv.dataset.writer import remove_stale_temps

N = 3
RUN = (f"--openenv-env={ENV}", f"--openenv-n={N}", "test_eps.py")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize(
    ("files", "named"),
    [
        ({"notes.txt": "my notes\n"}, ["notes.txt"]),
        ({".env": "SECRET=1\n", ".notes.tmp-42": "draft\n"}, [".env", ".notes.tmp-42"]),
        ({"data/train.csv": "a,b\n"}, ["data/"]),
        ({"README.md": "# My project\n"}, ["README.md (not a dataset card"]),
        ({"metadata.json": '{"name": "my-package"}\n'}, ["metadata.json (not written by"]),
        ({"summary.json": "{}\n", "results.jsonl": "", "paper.pdf": "%PDF"}, ["paper.pdf"]),
    ],
)
@pytest.mark.slow
def test_folder_with_foreign_files_is_refused_untouched(
    launcher: Launcher, files: dict[str, str], named: list[str]
) -> None:
    launcher.write_episode_test()
    for name, text in files.items():
        (launcher.output / name).parent.mkdir(parents=True, exist_ok=True)
        (launcher.output / name).write_text(text)
    before = snapshot(launcher.output)

    finished = launcher.run(*RUN)
    assert finished.returncode == 4, finished.text[-3000:]
    assert "holds files pytest-openenv did not write" in finished.stderr
    for name in named:
        assert name in finished.stderr, finished.stderr
    assert snapshot(launcher.output) == before  # not one byte written, moved or deleted
    assert "test_ep[" not in finished.stdout  # no episode ran


@pytest.mark.slow
def test_output_dot_in_a_project_keeps_its_readme(launcher: Launcher) -> None:
    launcher.write_episode_test()
    readme = launcher.folder / "README.md"
    readme.write_text("# My project\n\nHand-written docs.\n")
    before = snapshot(launcher.folder)

    finished = launcher.run(*RUN, "--openenv-output=.")
    assert finished.returncode == 4, finished.text[-3000:]
    assert "README.md" in finished.stderr and "test_eps.py" in finished.stderr
    assert readme.read_text() == "# My project\n\nHand-written docs.\n"
    assert snapshot(launcher.folder) == before
    assert not list(launcher.folder.glob("*.jsonl"))


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_rerun_moves_every_earlier_file_aside(launcher: Launcher, workers: str) -> None:
    launcher.write_episode_test()
    first = launcher.run("-n", workers, *RUN)
    assert first.returncode in (0, 1), first.stdout[-3000:]
    earlier = {
        name: (launcher.output / name).read_bytes()
        for name in ("metadata.json", "summary.json", "results.jsonl", "README.md", "report.html")
    }
    assert json.loads(earlier["metadata.json"])["written_by"] == "pytest-openenv"

    second = launcher.run("-n", workers, *RUN, "--openenv-seed=50")
    assert second.returncode in (0, 1), second.stdout[-3000:]
    for name, data in earlier.items():
        stem, _, suffix = name.partition(".")
        kept = [p for p in launcher.output.glob(f"{stem}.*.{suffix}") if p.read_bytes() == data]
        assert len(kept) == 1, (
            f"the earlier {name} was not kept: {sorted(launcher.output.iterdir())}"
        )
        assert f"earlier run's {name} kept as {kept[0]}" in second.stdout
    assert json.loads((launcher.output / "metadata.json").read_text())["settings"]["seed"] == 50
    assert not (launcher.output / ".openenv.lock").exists()  # released at the end

    third = launcher.run("-n", workers, *RUN)  # a folder of backups is still ours
    assert third.returncode in (0, 1), third.stdout[-3000:]


@pytest.mark.slow
def test_a_killed_rerun_never_shows_the_earlier_card(launcher: Launcher) -> None:
    """The card and report describe the earlier run's data, so they go aside
    with it; a rerun killed before its end left the old card beside the new metadata."""
    import signal
    import time

    launcher.write_episode_test()
    assert launcher.run(*RUN).returncode in (0, 1)
    card = (launcher.output / "README.md").read_bytes()
    run = launcher.start(*RUN, "--openenv-seed=50", env={"FAULT_DELAY": "0.3"})
    results = launcher.output / "results.jsonl"
    deadline = time.monotonic() + 60
    # the rerun's first row: its claim has moved the earlier files aside
    while not (results.exists() and b'"seed":50' in results.read_bytes()):
        assert run.proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    run.signal_group(signal.SIGKILL)
    run.wait()
    assert not (launcher.output / "README.md").exists()
    assert not (launcher.output / "report.html").exists()
    assert [p.read_bytes() for p in launcher.output.glob("README.*.md")] == [card]
    assert json.loads((launcher.output / "metadata.json").read_text())["settings"]["seed"] == 50

    again = launcher.run(*RUN)  # the backups leave the folder ours
    assert again.returncode in (0, 1), again.text[-3000:]
    assert (launcher.output / "README.md").exists()


@pytest.mark.slow
def test_hand_edited_card_is_kept(launcher: Launcher) -> None:
    launcher.write_episode_test()
    assert launcher.run(*RUN).returncode in (0, 1)
    card = launcher.output / "README.md"
    edited = card.read_text().replace(GENERATED_MARKER, "") + "\nCurated by hand.\n"
    card.write_text(edited)

    again = launcher.run(*RUN, "--openenv-resume", "--openenv-n=5")
    assert again.returncode in (0, 1), again.text[-3000:]
    assert card.read_text() == edited
    assert "(edited by hand): kept as it is" in again.stdout
    rows = read_rows(launcher.output / "results.jsonl") + read_rows(
        launcher.output / "failures.jsonl"
    )
    assert sorted(episode_ids(rows)) == [f"ep-{i:06d}" for i in range(5)]


def test_empty_existing_folder_is_used(launcher: Launcher) -> None:
    launcher.write_episode_test()
    launcher.output.mkdir()
    finished = launcher.run(*RUN)
    assert finished.returncode in (0, 1), finished.text[-3000:]
    assert (launcher.output / "results.jsonl").exists()


def test_stale_temp_cleanup_deletes_only_our_temp_files(tmp_path: Path) -> None:
    ours = tmp_path / ".results.jsonl.tmp-4242"
    others = [tmp_path / ".bashrc.tmp-4242", tmp_path / ".notes.tmp-1", tmp_path / ".x.tmp-99"]
    for path in [ours, *others]:
        path.write_text("data\n")
    remove_stale_temps(tmp_path)
    assert not ours.exists()
    assert all(path.read_text() == "data\n" for path in others)


@pytest.mark.slow
def test_files_this_run_is_told_to_write_may_sit_inside(launcher: Launcher) -> None:
    launcher.write_episode_test()
    inside = ("--junitxml=out/junit.xml", "--openenv-output=out")
    assert launcher.run(*RUN, *inside).returncode in (0, 1)
    again = launcher.run(*RUN, *inside)  # its own junit.xml does not make the folder foreign
    assert again.returncode in (0, 1), again.text[-3000:]
    refused = launcher.run(*RUN, "--openenv-output=out")  # without it, that file is foreign
    assert refused.returncode == 4 and "junit.xml" in refused.stderr


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_a_symlinked_results_file_is_written_through_and_stays_a_link(
    launcher: Launcher, workers: str
) -> None:
    """Rows were appended through the link, then the link was replaced by a
    regular file at the final rewrite (the target kept the rows unsorted, the link lost)."""
    launcher.write_episode_test()
    keep_all = "--openenv-min-reward=-1"
    assert launcher.run(*RUN, keep_all).returncode == 0
    results = launcher.output / "results.jsonl"
    elsewhere = launcher.folder / "big-disk"
    elsewhere.mkdir()
    target = elsewhere / "rows.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(reversed(lines)))  # unsorted: the end of the run rewrites it
    results.unlink()
    results.symlink_to(target)

    again = launcher.run("-n", workers, *RUN, keep_all, "--openenv-n=5", "--openenv-resume")
    assert again.returncode == 0, again.text[-3000:]
    assert results.is_symlink() and results.resolve() == target.resolve()
    ids = episode_ids(read_rows(target))
    assert ids == [f"ep-{i:06d}" for i in range(5)]  # every row, sorted, in the target
    assert not [p for p in elsewhere.iterdir() if p != target]  # no temp file left there
