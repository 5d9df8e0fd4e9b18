"""Real runs to look at, and a real headless Chromium to look with (Debian's chromium and
chromium-driver, installed by ``.ci/system-packages``; selenium drives them, nothing is
downloaded)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1600",
)

#: a policy that plants hostile content in its first reply (markup that would run, ANSI
#: escapes, a known secret) together with an illegal move, then plays the first legal move
HOSTILE_POLICY = r"""
import os
import re

HOSTILE = (
    "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">"
    "<b>not bold</b> \x1b[31mred\x1b[0m secret=" + os.environ.get("PLANTED_API_KEY", "")
)


def play(messages, tools, turn):
    if turn.turn == 1:
        illegal = {"name": "play_move", "arguments": {"action_id": 99}}
        return {"content": HOSTILE, "tool_calls": [illegal]}
    text = [m["content"] for m in messages if "Legal actions" in (m.get("content") or "")][-1]
    listed = text.rsplit("Legal actions:", 1)[1].split("\n")[0]
    return {"name": "play_move", "arguments": {"action_id": int(re.findall(r"\d+", listed)[0])}}
"""

PLANTED_SECRET = "sk-planted-0123456789abcdef"


def run_pytest(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A real pytest run in ``folder`` (its own process, as a user would start it)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def hostile_run(folder: Path, n: int = 12) -> Path:
    """tic-tac-toe with the hostile policy: failures, illegal moves, markup, a secret."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hostile_policy.py").write_text(HOSTILE_POLICY)
    done = run_pytest(
        folder,
        "--openenv-env=openspiel:tic_tac_toe",
        f"--openenv-n={n}",
        "--openenv-policy=hostile_policy:play",
        "-n",
        "2",
        env={"PLANTED_API_KEY": PLANTED_SECRET},
    )
    assert "INTERNALERROR" not in done.stdout, done.stdout[-3000:]
    assert done.returncode == 1, done.stdout[-3000:]  # the first-legal player loses some
    return folder / "openenv-results"


def reasoning_run(folder: Path, n: int = 10) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    done = run_pytest(folder, "--openenv-env=reasoning_gym:chain_sum", f"--openenv-n={n}")
    assert done.returncode == 0, done.stdout[-3000:]
    return folder / "openenv-results"


def rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def outcome_of(row: dict[str, Any]) -> str:
    failure = row.get("failure")
    if not failure:
        return "passed"
    return "errored" if failure.get("outcome") == "error" else "failed"


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="openenv-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def wait_ready(driver: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.execute_script("return document.body && document.body.dataset.ready") == "1":
            return
        time.sleep(0.05)
    raise AssertionError(f"the page never finished loading: {console_errors(driver)}")


def wait_for(driver: Any, script: str, timeout: float = 20) -> None:
    """Until the JavaScript expression ``script`` is true (the view server answers async)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.execute_script(f"return !!({script})"):
            return
        time.sleep(0.05)
    raise AssertionError(f"never true: {script}; console: {console_errors(driver)}")


def shown_ids(driver: Any) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#episode-rows tr')).map(r => r.dataset.id)"
    )


@contextlib.contextmanager
def viewer(folder: Path) -> Iterator[str]:
    """``python -m pytest_openenv view DIR --port 0`` running; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_openenv", "view", str(folder), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert match, (line, process.stderr.read() if process.poll() is not None else "")
        yield match.group(1)
    finally:
        process.terminate()
        process.wait(timeout=10)
