"""No secret reaches any output, with every feature that could carry one in use at once.

OPENAI_API_KEY, ANTHROPIC_API_KEY and HF_TOKEN hold marker values, and server URLs
carry ``user:password@``. The runs use the response cache, the Hub push, a remote
OpenEnv server reached with credentials in its URL, JUnit XML, ``-v``/``-rA``
output, the step summary, failing episodes, and model endpoints that quote the
request's credentials back in their error bodies. Then every byte written (files
under the run folder, the Hub stand-in's uploads, stdout, stderr) is scanned.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from faults import ENV, Launcher, read_rows
from servers.anthropic_messages import serve_anthropic
from servers.hub_standin import HubStandIn
from servers.openai_compat import serve_openai
from servers.openenv_servers import serve_in_thread

OPENAI_KEY = "sk-proj-MARKERopenaiQ7f3a9c2e41"
ANTHROPIC_KEY = "sk-ant-api03-MARKERanthropicZ5b8d"
HF_TOKEN = "hf_MARKERhubtokenW9Qx2LmP"
URL_USER, URL_PASSWORD = "MARKERuser", "MARKERpassword"
#: the raw markers, and the forms a secret takes on the wire: a Basic auth header
#: (base64 of user:password) and the keys base64-encoded
MARKERS = (
    "MARKERopenai",
    "MARKERanthropic",
    "MARKERhubtoken",
    URL_USER,
    URL_PASSWORD,
    base64.b64encode(f"{URL_USER}:{URL_PASSWORD}".encode()).decode(),
    *(base64.b64encode(key.encode()).decode()[:16] for key in (OPENAI_KEY, ANTHROPIC_KEY)),
)
MODEL = "fake-model"


def leaks_in(root: Path, *texts: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {m}" for m in MARKERS if m.encode() in data]
    for number, text in enumerate(texts):
        found += [f"output #{number}: {m}" for m in MARKERS if m in text]
    return found


def with_credentials(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{URL_USER}:{URL_PASSWORD}@{rest}"


@pytest.fixture
def secret_env(tmp_path: Path) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": OPENAI_KEY,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        "HF_TOKEN": HF_TOKEN,
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "work" / "step-summary.md"),
    }


@pytest.mark.slow
def test_no_marker_in_any_output(launcher: Launcher, secret_env: dict[str, str]) -> None:
    work, outputs = launcher.folder, []
    common = (f"--openenv-env={ENV}", "--openenv-n=4", f"--openenv-model={MODEL}", "-v", "-rA")

    # 1. collection through the official-API path (key in every request), response cache,
    #    a remote env server with credentials in its URL, JUnit XML, step summary, a gate,
    #    Hub push
    with (
        serve_openai() as model,
        serve_in_thread("tictactoe") as env_server,
        HubStandIn(HF_TOKEN) as hub,
    ):
        finished = launcher.run(
            *common,
            "-n",
            "2",
            "--openenv-policy=openai",
            f"--openenv-server={with_credentials(env_server.url)}",
            f"--openenv-cache={work / 'llm-cache'}",
            "--openenv-push-to-hub=alice/secret-scan",
            "--openenv-min-pass-rate=0.1",  # a gate verdict in summary, card and terminal
            "--openenv-output=out-collect",
            "--junitxml=junit-collect.xml",
            env={**secret_env, "OPENAI_BASE_URL": model.base_url, "HF_ENDPOINT": hub.url},
        )
        assert finished.returncode in (0, 1), finished.stdout[-3000:]
        # 4 episodes, +1: the controller's seed probe (preflight.py)
        assert model.requests > 0 and env_server.stats()["sessions_opened"] == 4 + 1
        (commit,) = hub.commits("alice/secret-scan")
        uploaded = b"".join(commit.files.values()).decode("utf-8", "replace")
        outputs += [finished.stdout, finished.stderr, uploaded]
    rows = read_rows(work / "out-collect" / "results.jsonl")
    rows += read_rows(work / "out-collect" / "failures.jsonl")
    assert len(rows) == 4
    assert {row["extra"]["server"] for row in rows} == {env_server.url}  # stored, without userinfo
    metadata = json.loads((work / "out-collect" / "metadata.json").read_text())
    assert env_server.url in json.dumps(metadata)
    assert list((work / "llm-cache").rglob("*.json")), "the cache stored nothing"
    assert (work / "step-summary.md").read_text().strip()

    # 2. an OpenAI-compatible endpoint (credentials in its URL) that answers 401 and quotes
    #    the Authorization header it received
    with serve_openai(always_status=401, echo_auth=True) as model:
        finished = launcher.run(
            *common,
            "--openenv-policy=openai",
            f"--openenv-llm-endpoint={with_credentials(model.base_url)}",
            "--openenv-output=out-401",
            "--junitxml=junit-401.xml",
            "--showlocals",
            env=secret_env,
        )
        assert finished.returncode == 1, finished.stdout[-3000:]
        assert model.requests > 0
        outputs += [finished.stdout, finished.stderr]
    assert "HTTP 401" in finished.stdout  # the error reached the user, scrubbed
    assert read_rows(work / "out-401" / "failures.jsonl")

    # 3. the Anthropic API path, rate-limited then refusing, quoting the key it received
    with serve_anthropic(statuses=[429], echo_auth=True, always_status=403) as model:
        finished = launcher.run(
            *common,
            "--openenv-policy=anthropic",
            "--openenv-max-retries=1",
            "--openenv-output=out-403",
            "--junitxml=junit-403.xml",
            env={**secret_env, "ANTHROPIC_BASE_URL": model.base_url},
        )
        assert finished.returncode == 1, finished.stdout[-3000:]
        outputs += [finished.stdout, finished.stderr]
    assert "HTTP 403" in finished.stdout

    for run in launcher.runs:
        outputs += list(run.read())
    assert leaks_in(launcher.folder.parent, *outputs) == []


#: One variable of each family of credential names, with marker values
CLOUD_SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "MARKERawsSecretQ7f3a9c2e41wJalrXUtnFEMI",
    "AZURE_OPENAI_KEY": "MARKERazureOpenAI5b8d0c1e2f",
    "AWS_SESSION_TOKEN": "MARKERawsSessionToken9x8y7z",
    "PGPASSWORD": "MARKERpostgresPassword42",
    "AZURE_STORAGE_CONNECTION_STRING": "AccountName=x;AccountKey=MARKERazureStorage77==",
}

LEAKY_POLICY = """
import os


def leak(messages, tools):
    quoted = ", ".join(f"{name}={os.environ[name]}" for name in sorted(os.environ)
                       if os.environ[name].count("MARKER"))
    raise RuntimeError(f"could not sign the request with {quoted}")
"""


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_cloud_credentials_in_a_callable_policys_exception_reach_no_output(
    launcher: Launcher, workers: str
) -> None:
    work = launcher.folder
    (work / "leaky.py").write_text(LEAKY_POLICY)
    finished = launcher.run(
        f"--openenv-env={ENV}", "--openenv-n=2", "--openenv-policy=leaky:leak",
        "-n", workers, "-v", "-rA", "--junitxml=junit.xml",
        env=CLOUD_SECRETS,
    )  # fmt: skip
    assert finished.returncode == 1, finished.stdout[-3000:]
    failures = read_rows(launcher.output / "failures.jsonl")
    assert len(failures) == 2
    assert "could not sign the request with" in failures[0]["failure"]["message"]
    junit = (work / "junit.xml").read_text()
    assert "could not sign the request with" in junit
    found = [
        f"{where}: {name}"
        for name, value in CLOUD_SECRETS.items()
        for where, text in (
            ("stdout", finished.stdout),
            ("stderr", finished.stderr),
            ("junit", junit),
            ("failures.jsonl", (launcher.output / "failures.jsonl").read_text()),
        )
        if value.split("MARKER")[1][:12] in text
    ]
    assert not found, found


#: a credential an env takes as a reset field (OpenEnv's repl env documents ``hf_token``)
CONFIG_TOKEN = "hf_MARKERenvConfigTokenK3v9ZqR"
SAY_42 = """
def say_42(messages, tools):
    return {"name": "step", "arguments": {"answer": "42"}}
"""
MARKED_TEST = """
import pytest


@pytest.mark.openenv("openenv:repl_env", n=2, policy="policies:say_42", **{config!r})
def test_repl(episode):
    # the env echoed the credential in its task: a failure message quoting it
    assert episode.reward > 1, episode.messages[1]["content"]
"""


def config_leaks(root: Path, *texts: str) -> list[str]:
    """Where the credential (or a form of it) is, outside the test's own source files."""
    forms = (CONFIG_TOKEN, "MARKERenvConfigToken", base64.b64encode(CONFIG_TOKEN.encode()).decode())
    found = [
        f"{path}: {form}"
        for path in root.rglob("*")
        if path.is_file() and path.suffix != ".py"
        for form in forms
        if form.encode() in path.read_bytes()
    ]
    return found + [
        f"output #{i}: {form}" for i, text in enumerate(texts) for form in forms if form in text
    ]


@pytest.mark.parametrize("where", ["option", "marker"])
@pytest.mark.slow
def test_a_credential_in_the_env_config_reaches_the_env_and_no_output(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)  # known only from the env config
    pytester.makepyfile(policies=SAY_42)
    config = {
        "task_prompt": "What is six times seven?",
        "expected_answer": "42",
        "hf_token": CONFIG_TOKEN,
        # an env that quotes it back in what it shows the agent
        "context": f"signed in with {CONFIG_TOKEN}",
    }
    received: list[dict[str, object]] = []
    with serve_in_thread("reset_task", received=received) as server:
        common = (
            f"--openenv-server={server.url}",
            "--openenv-cache=llm-cache",  # what the agent saw, stored per answer
            "--openenv-inspect-log",
            "-v",
            "-rA",
            "--junitxml=junit.xml",
        )
        if where == "option":
            args = (
                "--openenv-env=openenv:repl_env",
                f"--openenv-env-config={json.dumps(config)}",
                "--openenv-policy=policies:say_42",
                *common,
            )
            result = run_pytest(*args, "--openenv-n=2")
            # the folder records the config withheld: resuming it with the same config is
            # the same run, not a different env config
            resumed = run_pytest(*args, "--openenv-n=3", "--openenv-resume")
            assert resumed.ret == 0, resumed.stdout.str() + resumed.stderr.str()
            assert resumed.parseoutcomes().get("passed") == 1
        else:
            pytester.makepyfile(test_marked=MARKED_TEST.format(config=config))
            result = run_pytest(*common, "-n", "2")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == (0 if where == "option" else 1), text
    # the env was given the credential as written, on every episode's reset (the checks
    # before the run also reset without the config, to see which fields the server takes)
    given = [fields.get("hf_token") for fields in received]
    assert given.count(CONFIG_TOKEN) >= 2 and set(given) <= {CONFIG_TOKEN, None}, given
    out = pytester.path / "openenv-results"
    rows = read_rows(out / "results.jsonl") + read_rows(out / "failures.jsonl")
    assert len(rows) == (3 if where == "option" else 2)
    # what it was apart from the credential stays in the record
    shown = json.loads(rows[0]["task"]["config"])
    assert shown["hf_token"] == "***" and shown["expected_answer"] == "42"
    outputs = [result.stdout.str(), result.stderr.str()]
    if where == "option":
        outputs += [resumed.stdout.str(), resumed.stderr.str()]
    assert list((pytester.path / "llm-cache").rglob("*.json")), "the cache stored nothing"
    assert list((out / "inspect-logs").iterdir()), "no inspect log was written"
    assert config_leaks(pytester.path, *outputs) == []
    if where == "option":
        card = (out / "README.md").read_text()
        assert "Withheld: the value of `hf_token`" in card
        metadata = json.loads((out / "metadata.json").read_text())
        assert metadata["settings"]["env_config"]["hf_token"] == "***"
    else:
        assert "signed in with ***" in text  # the failure message, scrubbed


def test_a_dropped_credential_field_is_named_in_the_usage_error_never_shown() -> None:
    """A server that drops an ``hf_token`` reset field is refused by name: the value the
    user sent (and the one the server's state holds) stay out of the message."""
    from pytest_openenv.envs.generic import REFUSED, GenericFamily
    from pytest_openenv.envs.remote.hosting import Survey
    from pytest_openenv.errors import EnvConfigError
    from pytest_openenv.util.endpoints import ServerURL

    sent, held = "hf_MARKERsentTokenQ4z8", "hf_MARKERheldTokenP2w6"
    family = GenericFamily("repl_env", {"hf_token": sent, "difficulty": "hard"})
    survey = Survey(
        state={"hf_token": held, "difficulty": "easy"},
        config_status={"hf_token": REFUSED, "difficulty": "confirmed"},
    )
    with pytest.raises(EnvConfigError) as refused:
        family._check_config_taken(ServerURL.parse("http://127.0.0.1:1"), survey)
    message = str(refused.value)
    assert "did not take the reset field hf_token=*** " in message, message
    assert sent not in message and held not in message and "MARKER" not in message
