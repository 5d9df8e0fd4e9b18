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
