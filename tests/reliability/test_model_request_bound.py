"""A model endpoint that never finishes its answer errors the episode; it never holds the run.

The real ``openai`` and ``anthropic`` SDKs against the loopback fake model: one that
hangs (accepts, never answers) and one that trickles a valid answer one byte at a
time (slowloris: every socket read succeeds, so a per-read timeout never fires).
Without ``--openenv-timeout`` the bound is ``--openenv-request-timeout`` (default
120 s; the tests set 1 s so they do not wait for the default). A Ctrl-C ends a run
whose check before the run is being trickled.
"""

from __future__ import annotations

import json
import signal
import time

import pytest
from faults import Launcher, read_rows
from servers.anthropic_messages import AnthropicMessagesServer
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer
from servers.scripted_http import ScriptedHTTP, trickled

from pytest_openenv.config.options import DEFAULT_REQUEST_TIMEOUT, OPTIONS
from pytest_openenv.config.settings import RunSettings, Settings
from pytest_openenv.policies.llm.common import LLMConfig

SERVERS = {"openai": OpenAICompatServer, "anthropic": AnthropicMessagesServer}
FAULTS = {"hang": Faults(hang=True), "trickle": Faults(trickle=0.5)}
#: (provider, --openenv-llm-client): openai's endpoint requests go through http.client by
#: default; the SDK path keeps its own bound (the httpx hooks of deadline.py)
CLIENTS = [("anthropic", "auto"), ("openai", "http"), ("openai", "sdk")]


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize(("provider", "client"), CLIENTS)
@pytest.mark.slow
def test_a_stalled_answer_errors_the_episode_without_openenv_timeout(
    launcher: Launcher, provider: str, client: str, fault: str
) -> None:
    server = SERVERS[provider](FAULTS[fault]).start()
    try:
        finished = launcher.run(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=1",
            f"--openenv-policy={provider}",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=fake-model",
            "--openenv-request-timeout=1",
            "--openenv-max-retries=1",
            f"--openenv-llm-client={client}",
            # the body trickles for minutes (one byte per 0.5 s); the SDK default waits 10 min
            timeout=90,
        )
    finally:
        server.stop()
    assert finished.returncode == 1, finished.text[-3000:]
    [failure] = read_rows(launcher.output / "failures.jsonl")
    assert failure["failure"]["outcome"] == "error"
    message = failure["failure"]["message"]
    assert "timed out" in message and "--openenv-request-timeout=1s" in message, message
    assert server.requests == 2  # the first request and its one retry, both bounded
    if provider == "openai":  # the path named is the one taken
        assert all(("(http.client)" in agent) == (client == "http") for agent in server.user_agents)


def test_the_default_request_bound_is_stated_and_used() -> None:
    option = next(opt for opt in OPTIONS if opt.flag == "request-timeout")
    assert option.default == DEFAULT_REQUEST_TIMEOUT == 120
    assert "default 120" in option.help
    config = LLMConfig.from_settings(Settings(), "m")
    assert config.client_options()["timeout"] == 120
    # an episode budget smaller than the request bound wins, a larger one does not
    assert (
        LLMConfig.from_settings(Settings(run=RunSettings(timeout=5.0)), "m").client_options()[
            "timeout"
        ]
        == 5.0
    )
    assert (
        LLMConfig.from_settings(Settings(run=RunSettings(timeout=900.0)), "m").client_options()[
            "timeout"
        ]
        == 120
    )


@pytest.mark.slow
def test_ctrl_c_ends_a_run_whose_model_check_is_trickled(launcher: Launcher) -> None:
    """The check's thread was stuck in a read that never timed out, and the run's exit
    waited for it: two Ctrl-C did not end the run."""
    body = json.dumps({"data": [{"id": f"m{i}"} for i in range(40)]}).encode()
    with ScriptedHTTP({"/v1/models": trickled(body, every=2.0)}) as server:
        run = launcher.start(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=2",
            f"--openenv-llm-endpoint={server.url}/v1",
            "--openenv-model=m",
        )
        deadline = time.monotonic() + 60
        while not server.requests:
            assert run.proc.poll() is None, run.read()
            assert time.monotonic() < deadline, "the check never asked"
            time.sleep(0.05)
        time.sleep(0.5)  # in the middle of the trickled answer
        interrupted = time.monotonic()
        run.signal_controller(signal.SIGINT)
        finished = run.wait(timeout=30)
        took = time.monotonic() - interrupted
    assert took < 5, took
    assert finished.returncode == pytest.ExitCode.INTERRUPTED, finished.text[-3000:]
    assert "INTERNALERROR" not in finished.text
