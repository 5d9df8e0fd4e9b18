"""The plugin lives in other people's suites, configs and dataset tools without breaking them.

- A suite with its own ``episode`` fixture keeps it once the plugin is installed; its
  episode tests use ``openenv_episode`` (``episode`` stays the short name elsewhere).
- A run where no episode passes writes a card whose split ``train`` is never the
  failures, and that ``datasets`` loads without tripping on an empty ``results.jsonl``.
"""

from __future__ import annotations

import pytest
from faults import ENV, Launcher, read_rows

OWN_EPISODE_CONFTEST = """
import pytest


@pytest.fixture
def episode():
    return {"name": "the suite's own episode"}
"""

OWN_EPISODE_TESTS = f"""
import pytest


def test_ordinary(episode):
    assert episode == {{"name": "the suite's own episode"}}


@pytest.mark.openenv("{ENV}", n=2)
def test_agent(openenv_episode):
    assert openenv_episode.done
"""


def own_episode_suite(launcher: Launcher) -> None:
    (launcher.folder / "conftest.py").write_text(OWN_EPISODE_CONFTEST)
    (launcher.folder / "test_suite.py").write_text(OWN_EPISODE_TESTS)


@pytest.mark.slow
def test_a_suites_own_episode_fixture_survives_the_plugin(launcher: Launcher) -> None:
    own_episode_suite(launcher)
    finished = launcher.run("test_suite.py", "-v")
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert "test_ordinary PASSED" in finished.stdout
    assert "test_agent[ep-000000]" in finished.stdout and "test_agent[ep-000001]" in finished.stdout
    assert "3 passed" in finished.stdout
    rows = read_rows(launcher.output / "results.jsonl")
    assert sorted(row["test"] for row in rows) == [
        "test_suite.py::test_agent[ep-000000]",
        "test_suite.py::test_agent[ep-000001]",
    ]


@pytest.mark.slow
def test_an_env_on_the_command_line_does_not_parametrize_the_suites_fixture(
    launcher: Launcher,
) -> None:
    own_episode_suite(launcher)
    finished = launcher.run("test_suite.py", f"--openenv-env={ENV}", "--openenv-n=3")
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert "3 passed" in finished.stdout  # test_ordinary once, test_agent twice (marker n=2)


@pytest.mark.slow
def test_the_bundled_test_runs_beside_a_suites_own_episode_fixture(launcher: Launcher) -> None:
    own_episode_suite(launcher)
    finished = launcher.run(f"--openenv-env={ENV}", "--openenv-n=3", "--openenv-min-reward=-1")
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert len(read_rows(launcher.output / "results.jsonl")) == 3


@pytest.mark.slow
def test_episode_still_names_the_episode_in_episode_tests(launcher: Launcher) -> None:
    (launcher.folder / "test_short.py").write_text(
        f'import pytest\n\n\n@pytest.mark.openenv("{ENV}", n=2)\n'
        "def test_short(episode):\n    assert episode.done\n"
    )
    finished = launcher.run("test_short.py")
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert len(read_rows(launcher.output / "results.jsonl")) == 2


# -- the card of a run where nothing passed ------------------------------------------------


@pytest.mark.slow
def test_a_card_with_no_passing_rows_never_trains_on_failures(
    launcher: Launcher, tmp_path_factory: pytest.TempPathFactory
) -> None:
    datasets = pytest.importorskip("datasets")  # in the test extra: never skipped in CI
    finished = launcher.run(f"--openenv-env={ENV}", "--openenv-n=3", "--openenv-min-reward=2")
    assert finished.returncode == 1
    folder = launcher.output
    assert (folder / "results.jsonl").read_bytes() == b""
    assert len(read_rows(folder / "failures.jsonl")) == 3
    card = (folder / "README.md").read_text()
    assert 'load_dataset("json", data_files="results.jsonl"' not in card
    assert "No episode passed" in card
    cache = str(tmp_path_factory.mktemp("hf-cache"))
    with pytest.raises(ValueError, match="train"):
        datasets.load_dataset(str(folder), split="train", cache_dir=cache)
    everything = datasets.load_dataset(str(folder), cache_dir=cache)
    assert list(everything) == ["failures"] and everything["failures"].num_rows == 3
    failures = datasets.load_dataset(str(folder), "failures", split="train", cache_dir=cache)
    assert failures.num_rows == 3 and all(row["failure"] for row in failures)


def test_a_card_with_passing_rows_keeps_train_for_them(
    launcher: Launcher, tmp_path_factory: pytest.TempPathFactory
) -> None:
    datasets = pytest.importorskip("datasets")
    launcher.run(f"--openenv-env={ENV}", "--openenv-n=4", "--openenv-policy=scripted")  # loses some
    folder = launcher.output
    passed = len(read_rows(folder / "results.jsonl"))
    failed = len(read_rows(folder / "failures.jsonl"))
    assert passed and failed, (passed, failed)
    cache = str(tmp_path_factory.mktemp("hf-cache"))
    train = datasets.load_dataset(str(folder), split="train", cache_dir=cache)
    assert train.num_rows == passed and not any(row.get("failure") for row in train)
    failures = datasets.load_dataset(str(folder), "failures", split="train", cache_dir=cache)
    assert failures.num_rows == failed
