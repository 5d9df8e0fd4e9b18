"""report.html's episode view shows the judge's verdict, score and reasoning (real Chromium)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pages import chromium, console_errors, run_pytest, wait_for, wait_ready
from selenium.webdriver.common.by import By
from servers.judge_server import serve_judge


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("judged")
    with serve_judge() as judge:
        done = run_pytest(
            folder,
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=2",
            "--openenv-judge=judge-model",
            f"--openenv-judge-endpoint={judge.base_url}",
            '--openenv-judge-rubric=The agent must say "play_move"',
            "-n",
            "0",
        )
    assert done.returncode == 0, done.stdout[-2000:]
    return folder / "openenv-results"


def test_the_episode_view_shows_the_judge_s_verdict_score_and_reasoning(judged: Path) -> None:
    with chromium() as browser:
        browser.get((judged / "report.html").as_uri() + "#ep-000001")
        wait_ready(browser)
        wait_for(browser, "document.querySelector('#transcript .judge-box')")
        text = browser.find_element(By.CSS_SELECTOR, "#transcript .judge-box").text
        assert "judge judge-model: passed, score 1" in text
        assert "the env's own verdict: passed" in text
        assert "judge reasoning: the transcript shows the agent saying play_move" in text
        assert console_errors(browser) == []
