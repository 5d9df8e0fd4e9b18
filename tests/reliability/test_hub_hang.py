"""A Hub that accepts and never answers: the push gives up, or Ctrl-C stops it, and either
way the exact retry command is printed (never the token).

The real huggingface_hub client against the local stand-in (tests/servers/hub_standin.py)
in its ``hang`` mode; ``PYTEST_OPENENV_HUB_TIMEOUT=1`` stands in for the 60 s default.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults import Finished, Launcher, default_sigint
from servers.hub_standin import HubStandIn

EPISODES = ("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=2", "--openenv-min-reward=-1")


@pytest.fixture
def token() -> str:
    return "hf_" + secrets.token_hex(16)


@pytest.fixture
def hub(token: str) -> Iterator[HubStandIn]:
    with HubStandIn(token) as standin:
        yield standin


def hub_env(hub: HubStandIn, token: str, folder: Path, timeout: str) -> dict[str, str]:
    return {
        "HF_TOKEN": token,
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(folder / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "PYTEST_OPENENV_HUB_TIMEOUT": timeout,
    }


def retry_words(text: str) -> list[str]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith("retry with:"):
            return shlex.split(lines[i + 1].strip())
    raise AssertionError(f"no retry command in:\n{text[-3000:]}")


def wait_for_request(hub: HubStandIn, proc: subprocess.Popen[bytes]) -> None:
    """Until the push is under way (its first Hub request arrived); the test is bounded."""
    deadline = time.monotonic() + 60
    while not hub.requests:
        assert proc.poll() is None, "the run ended before it pushed"
        assert time.monotonic() < deadline, "no Hub request within 60 s"
        time.sleep(0.05)


def cli(folder: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PYTEST_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_openenv", "push", *args],
        cwd=folder,
        env={**full, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=default_sigint,
    )


def finish(proc: subprocess.Popen[bytes]) -> Finished:
    try:
        out, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the push did not end within 90 s") from None
    return Finished(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


@pytest.mark.slow
def test_a_run_pushing_to_a_silent_hub_ends_with_the_retry_command(
    launcher: Launcher, hub: HubStandIn, token: str
) -> None:
    hub.hang = True
    finished = launcher.run(
        *EPISODES,
        "--openenv-push-to-hub=alice/silent",
        env=hub_env(hub, token, launcher.folder, "1"),
        timeout=90,
    )
    assert finished.returncode == 1, finished.text[-3000:]  # every episode passed
    assert "ERROR: push to the Hub (alice/silent) failed" in finished.stdout
    assert "did not answer within 1s" in finished.stdout
    assert "PYTEST_OPENENV_HUB_TIMEOUT" in finished.stdout
    assert retry_words(finished.stdout) == [
        "python",
        "-m",
        "pytest_openenv",
        "push",
        str(launcher.output),
        "alice/silent",
    ]
    assert token not in finished.text
    assert len(hub.requests) == 1  # create_repo: not retried, bounded


@pytest.mark.slow
def test_the_push_command_against_a_silent_hub_ends_with_the_retry_command(
    launcher: Launcher, hub: HubStandIn, token: str
) -> None:
    launcher.run(*EPISODES)  # an output folder to push
    hub.hang = True
    env = hub_env(hub, token, launcher.folder, "1")
    finished = finish(cli(launcher.folder, env, str(launcher.output), "bob/silent"))
    assert finished.returncode == 1, finished.text
    assert "did not answer within 1s" in finished.stderr
    assert retry_words(finished.stderr)[3:] == ["push", str(launcher.output), "bob/silent"]
    assert token not in finished.text
    assert "Traceback" not in finished.stderr


@pytest.mark.slow
def test_ctrl_c_during_the_push_command_prints_the_retry_command(
    launcher: Launcher, hub: HubStandIn, token: str
) -> None:
    launcher.run(*EPISODES)
    hub.hang = True
    env = hub_env(hub, token, launcher.folder, "600")  # only Ctrl-C ends it
    proc = cli(launcher.folder, env, str(launcher.output), "bob/stopped", "--private")
    wait_for_request(hub, proc)
    proc.send_signal(signal.SIGINT)
    finished = finish(proc)
    assert finished.returncode == 130, finished.text
    assert "interrupted" in finished.stderr
    assert retry_words(finished.stderr)[3:] == [
        "push",
        str(launcher.output),
        "bob/stopped",
        "--private",
    ]
    assert token not in finished.text
    assert "Traceback" not in finished.stderr


@pytest.mark.slow
def test_ctrl_c_during_the_runs_push_prints_the_retry_command(
    launcher: Launcher, hub: HubStandIn, token: str
) -> None:
    hub.hang = True
    run = launcher.start(
        *EPISODES,
        "--openenv-push-to-hub=alice/stopped",
        env=hub_env(hub, token, launcher.folder, "600"),
    )
    wait_for_request(hub, run.proc)
    run.signal_controller(signal.SIGINT)
    finished = run.wait(timeout=90)
    finished.assert_clean()
    assert finished.returncode == pytest.ExitCode.INTERRUPTED, finished.text[-3000:]
    assert "interrupted (Ctrl-C)" in finished.stdout
    assert retry_words(finished.stdout)[3:] == ["push", str(launcher.output), "alice/stopped"]
    assert token not in finished.text
    # the local files are complete: the retry has everything to upload
    assert (launcher.output / "results.jsonl").read_text().count("\n") == 2


@pytest.mark.parametrize("value", ["soon", "0", "-5", "inf", "nan"])
def test_a_malformed_hub_timeout_is_a_usage_error_before_any_episode(
    launcher: Launcher, hub: HubStandIn, token: str, value: str
) -> None:
    finished = launcher.run(
        *EPISODES,
        "--openenv-push-to-hub=alice/x",
        env=hub_env(hub, token, launcher.folder, value),
    )
    assert finished.returncode == pytest.ExitCode.USAGE_ERROR, finished.text[-2000:]
    assert f"PYTEST_OPENENV_HUB_TIMEOUT={value!r} is invalid" in finished.stderr
    assert not launcher.output.exists()
    assert hub.requests == []
