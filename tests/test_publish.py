"""Pushing the output folder to the Hub: the real huggingface_hub client against a local
stand-in of the Hub API (tests/servers/hub_standin.py), reached through HF_ENDPOINT."""

from __future__ import annotations

import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from servers.hub_standin import HubStandIn, closed_port

from pytest_openenv.dataset.hub import retry_command

UPLOADED = (
    "results.jsonl",
    "failures.jsonl",
    "metadata.json",
    "summary.json",
    "README.md",
    "pass-rate.svg",  # the chart the card shows, linked relatively
    "report.html",
)
EPISODES = ("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=3", "--openenv-output=out")
ALL_PASS = (
    "--openenv-min-reward=-1"  # every tic-tac-toe episode passes: exit 0 unless the push fails
)


@pytest.fixture
def token() -> str:
    return "hf_" + secrets.token_hex(16)


@pytest.fixture
def hf_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, token: str) -> None:
    """What the pushing subprocess sees: our token, an empty HF home, no offline mode."""
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_OIDC_RESOURCE", raising=False)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, hf_env: None, token: str):
    with HubStandIn(token) as standin:
        monkeypatch.setenv("HF_ENDPOINT", standin.url)
        yield standin


def local_files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in UPLOADED}


def assert_token_nowhere(token: str, root: Path, *texts: str) -> None:
    for text in texts:
        assert token not in text
    for path in root.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), f"token leaked into {path}"


def retry_line(output: str) -> list[str]:
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith("retry with:"):
            words = shlex.split(lines[i + 1].strip())
            assert words[:4] == ["python", "-m", "pytest_openenv", "push"], words
            return [sys.executable, *words[1:]]
    raise AssertionError(f"no retry command in:\n{output}")


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openenv", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_push_creates_the_repo_and_uploads_the_folder_in_one_commit(
    run_pytest, pytester: pytest.Pytester, hub: HubStandIn, token: str
) -> None:
    message = "first run: 'quotes', \"double\" & ünïcode"
    result = run_pytest(
        *EPISODES,
        ALL_PASS,
        "--openenv-push-to-hub=alice/ttt-episodes",
        "--openenv-private",
        f"--openenv-commit-message={message}",
        "--openenv-license=mit",
        "-n",
        "2",
    )
    assert result.ret == 0, result.stdout.str()
    # created once, as a private dataset repo, by the controller only
    assert hub.create_payloads == [
        {
            "name": "ttt-episodes",
            "organization": "alice",
            "visibility": "private",
            "type": "dataset",
        }
    ]
    commits = hub.commits("alice/ttt-episodes")
    assert len(commits) == 1
    assert commits[0].summary == message
    # the five files, byte for byte what is on disk
    folder = pytester.path / "out"
    assert commits[0].files == local_files(folder)
    assert len(commits[0].files["results.jsonl"].splitlines()) == 3
    # the token went in the Authorization header of every request, and nowhere else
    assert hub.requests and all(
        r.headers.get("authorization") == f"Bearer {token}" for r in hub.requests
    )
    assert all(token.encode() not in r.body for r in hub.requests)
    assert_token_nowhere(token, pytester.path, result.stdout.str(), result.stderr.str())
    assert f"pushed to the Hub: {hub.url}/datasets/alice/ttt-episodes" in result.stdout.str()
    # the card that arrived names the repo in its loading snippet and carries the license
    from huggingface_hub import DatasetCard

    card = DatasetCard(commits[0].files["README.md"].decode())
    assert card.data.license == "mit"
    assert card.data.configs[0]["data_files"] == [{"split": "train", "path": "results.jsonl"}]
    assert 'load_dataset("alice/ttt-episodes", split="train")' in card.text


@pytest.mark.slow
def test_failed_upload_keeps_the_files_fails_the_run_and_the_retry_uploads(
    run_pytest, pytester: pytest.Pytester, hub: HubStandIn, token: str
) -> None:
    hub.fail["commit"] = 500
    result = run_pytest(*EPISODES, ALL_PASS, "--openenv-push-to-hub=alice/retry-me")
    out = result.stdout.str()
    assert result.ret == 1, out  # every episode passed: only the failed upload fails the run
    assert "ERROR: push to the Hub (alice/retry-me) failed: HfHubHTTPError" in out
    assert "500" in out
    folder = pytester.path / "out"
    before = local_files(folder)  # all five exist and are whole
    assert len(before["results.jsonl"].splitlines()) == 3
    assert hub.commits("alice/retry-me") == []
    # public by default: no visibility asked for
    assert hub.create_payloads == [{"name": "retry-me", "organization": "alice", "type": "dataset"}]

    hub.fail.clear()
    retried = subprocess.run(
        retry_line(out), cwd=pytester.path, capture_output=True, text=True, timeout=120
    )
    assert retried.returncode == 0, retried.stderr
    assert f"{hub.url}/datasets/alice/retry-me" in retried.stdout
    commits = hub.commits("alice/retry-me")
    assert len(commits) == 1
    assert commits[0].files == before == local_files(folder)
    assert commits[0].summary.startswith("pytest-openenv: 3 openspiel:tic_tac_toe episodes")
    assert_token_nowhere(token, pytester.path, out, result.stderr.str(), retried.stdout)


@pytest.mark.slow
def test_hub_down_then_back_the_retry_command_works(
    run_pytest, pytester: pytest.Pytester, hf_env: None, monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    port = closed_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    result = run_pytest(*EPISODES, ALL_PASS, "--openenv-push-to-hub=bob/later")
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "ERROR: push to the Hub (bob/later) failed" in out
    folder = pytester.path / "out"
    before = local_files(folder)

    with HubStandIn(token, port=port) as hub:  # the Hub is back, where it was
        retried = subprocess.run(
            retry_line(out), cwd=pytester.path, capture_output=True, text=True, timeout=120
        )
        assert retried.returncode == 0, retried.stderr
        assert hub.commits("bob/later")[0].files == before == local_files(folder)


def test_missing_token_is_a_usage_error_before_any_episode(
    run_pytest, pytester: pytest.Pytester, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN")
    result = run_pytest(*EPISODES, "--openenv-push-to-hub=alice/no-token")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-push-to-hub=alice/no-token needs a Hugging Face token" in result.stderr.str()
    assert "HF_TOKEN" in result.stderr.str()
    assert not (pytester.path / "out").exists()  # no episode ran, nothing was written
    assert hub.requests == []


@pytest.mark.parametrize("repo", ["just-a-name", "a/b/c", "bad id/x", "alice/x--y", "-a/x"])
@pytest.mark.slow
def test_malformed_repo_id_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester, hub: HubStandIn, repo: str
) -> None:
    result = run_pytest(*EPISODES, f"--openenv-push-to-hub={repo}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--openenv-push-to-hub={repo!r} is invalid" in result.stderr.str()
    assert not (pytester.path / "out").exists()
    assert hub.requests == []


@pytest.mark.slow
def test_cli_rejects_bad_input_with_exit_2(
    pytester: pytest.Pytester, hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.mkdir("empty")
    not_output = run_cli("push", "empty", "alice/x", cwd=pytester.path)
    assert not_output.returncode == 2
    assert "is not a pytest-openenv output folder" in not_output.stderr
    assert "results.jsonl" in not_output.stderr
    missing = run_cli("push", "nowhere", "alice/x", cwd=pytester.path)
    assert missing.returncode == 2 and "nowhere is not a folder" in missing.stderr
    bad_repo = run_cli("push", "empty", "alice", cwd=pytester.path)
    assert bad_repo.returncode == 2 and "owner/name" in bad_repo.stderr
    bad_license = run_cli("push", "empty", "alice/x", "--license", "MIT License", cwd=pytester.path)
    assert bad_license.returncode == 2 and "license" in bad_license.stderr
    monkeypatch.delenv("HF_TOKEN")
    no_token = run_cli("push", "empty", "alice/x", cwd=pytester.path)
    assert no_token.returncode == 2 and "HF_TOKEN" in no_token.stderr
    assert hub.requests == []


@pytest.mark.slow
def test_cli_push_of_an_earlier_run_refreshes_a_generated_card_only(
    run_pytest, pytester: pytest.Pytester, hub: HubStandIn
) -> None:
    assert run_pytest(*EPISODES, ALL_PASS).ret == 0  # a run without push
    folder = pytester.path / "out"
    pushed = run_cli("push", "out", "dave/older", "--license", "cc-by-4.0", cwd=pytester.path)
    assert pushed.returncode == 0, pushed.stderr
    card = hub.commits("dave/older")[0].files["README.md"].decode()
    assert 'load_dataset("dave/older", split="train")' in card
    from huggingface_hub import DatasetCard

    assert DatasetCard(card).data.license == "cc-by-4.0"
    assert card == (folder / "README.md").read_text()  # the local copy matches the Hub
    # a card edited by hand (generator line removed) goes up as it is
    (folder / "README.md").write_text("---\nlicense: mit\n---\n# my own words\n")
    again = run_cli("push", "out", "dave/older", cwd=pytester.path)
    assert again.returncode == 0, again.stderr
    latest = hub.commits("dave/older")[-1]
    assert latest.files["README.md"] == b"---\nlicense: mit\n---\n# my own words\n"


def test_retry_command_quotes_what_the_shell_would_split(tmp_path: Path) -> None:
    folder = tmp_path / "my runs" / "it's here"
    command = retry_command(folder, "alice/x", private=True, commit_message='say "hi"; rm -rf /')
    assert shlex.split(command) == [
        "python",
        "-m",
        "pytest_openenv",
        "push",
        str(folder),
        "alice/x",
        "--private",
        "--commit-message",
        'say "hi"; rm -rf /',
    ]


def test_interrupted_run_is_not_pushed_and_says_how_to_push(
    run_pytest, pytester: pytest.Pytester, hub: HubStandIn
) -> None:
    pytester.makepyfile(
        test_stop="""
        def test_episode(episode):
            if episode.episode_id == "ep-000001":
                raise KeyboardInterrupt
        """
    )
    result = run_pytest("test_stop.py", *EPISODES, "--openenv-push-to-hub=alice/partial")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    out = result.stdout.str()
    assert "not pushed to the Hub: the run ended early (exit code 2)" in out
    assert shlex.split(out.split("push the folder with:")[1].splitlines()[1])[-2:] == [
        str(pytester.path / "out"),
        "alice/partial",
    ]
    assert hub.requests == []
    assert (pytester.path / "out" / "results.jsonl").exists()


@pytest.mark.slow
def test_cli_push_refuses_a_folder_a_live_run_holds_and_never_touches_its_card(
    run_pytest, pytester: pytest.Pytester, hub: HubStandIn
) -> None:
    """Push uploaded a folder a live run was writing and rewrote its card."""
    import json
    import os

    from pytest_openenv.dataset.folder import LOCK
    from pytest_openenv.dataset.lock import RunLock

    assert run_pytest(*EPISODES, ALL_PASS).ret == 0
    folder = pytester.path / "out"
    before = local_files(folder)
    live = RunLock(folder / LOCK)
    live.acquire()  # as a run does for its whole session (this process stays alive)
    try:
        refused = run_cli("push", "out", "erin/live", cwd=pytester.path)
    finally:
        live.release()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"is being written by a live run (pid {os.getpid()} on " in refused.stderr
    assert hub.requests == []
    assert local_files(folder) == before  # the card was not rewritten for the repo

    # a killed run's folder: pushed, with a warning that says how to finish it
    metadata = json.loads((folder / "metadata.json").read_text())
    metadata["finished_at"] = None
    (folder / "metadata.json").write_text(json.dumps(metadata))
    pushed = run_cli("push", "out", "erin/live", cwd=pytester.path)
    assert pushed.returncode == 0, pushed.stderr
    assert "did not finish" in pushed.stderr
    assert "run the same pytest command again with --openenv-resume" in pushed.stderr
    assert not (folder / LOCK).exists()  # the push's own hold was released
