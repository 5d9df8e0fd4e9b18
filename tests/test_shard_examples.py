"""The scheduler examples of docs/long-runs.md ("Shards") do what the page says.

The Ray script runs here on a local Ray cluster (2 shards, a few episodes) and its merged
folder is checked; the Kubernetes manifest, the Slurm script and the GitHub Actions workflow
cannot run here, so what they set is checked instead: each shard's index and count reach
``--openenv-shard`` the way ``config/shard.py`` reads them, and a merge follows the shards.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from pytest_openenv.config.shard import parse_shard

PAGE = Path(__file__).resolve().parent.parent / "docs" / "long-runs.md"


def blocks_under(heading: str) -> list[tuple[str, str]]:
    """(language, text) of the code blocks in the section of ``heading``."""
    tokens = MarkdownIt().parse(PAGE.read_text(encoding="utf-8"))
    found, inside = [], False
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            inside = tokens[i + 1].content == heading
        elif inside and token.type == "fence":
            found.append((token.info.strip(), token.content))
    assert found, f"no code block under {heading!r} in {PAGE}"
    return found


def test_the_kubernetes_job_is_indexed_and_hands_its_completions_to_the_shard_option():
    ((language, text),) = blocks_under("Kubernetes: an Indexed Job")
    job = yaml.safe_load(text)
    spec = job["spec"]
    assert language == "yaml" and job["kind"] == "Job"
    assert spec["completionMode"] == "Indexed"
    (container,) = spec["template"]["spec"]["containers"]
    shard = next(arg for arg in container["args"] if arg.startswith("--openenv-shard="))
    value = shard.partition("=")[2]
    # each pod: JOB_COMPLETION_INDEX from 0 to completions - 1, the count from the option
    for index in range(spec["completions"]):
        parsed = parse_shard(value, {"JOB_COMPLETION_INDEX": str(index)})
        assert (parsed.index, parsed.count, parsed.source) == (
            index,
            spec["completions"],
            "kubernetes",
        )
    assert "--openenv-resume" in container["args"]  # a replaced pod finishes its shard


def test_the_slurm_array_gives_every_task_its_shard_and_the_merge_waits_for_all():
    (_, script), (_, submit) = blocks_under("Slurm: a job array")
    first, last = map(int, re.search(r"#SBATCH --array=(\d+)-(\d+)", script).groups())
    value = re.search(r"--openenv-shard=(\S+)", script).group(1)
    count = last - first + 1
    for task in range(first, last + 1):
        # what Slurm sets in each task of the array
        environ = {
            "SLURM_ARRAY_TASK_ID": str(task),
            "SLURM_ARRAY_TASK_COUNT": str(count),
            "SLURM_ARRAY_TASK_MIN": str(first),
        }
        parsed = parse_shard(value, environ)
        assert (parsed.index, parsed.count, parsed.source) == (task - first, count, "slurm")
    assert "--dependency=afterok" in submit
    assert f"shard-*-of-{count}" in submit and "python -m pytest_openenv merge" in submit


def test_the_actions_matrix_plays_every_shard_and_the_merge_job_needs_them_all():
    ((_, text),) = blocks_under("GitHub Actions: a matrix and a merge job")
    workflow = yaml.safe_load(text)
    play, merge = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    shards = play["strategy"]["matrix"]["shard"]
    command = next(
        step["run"] for step in play["steps"] if "--openenv-shard" in step.get("run", "")
    )
    count = int(re.search(r"--openenv-shard=\$\{\{ matrix.shard \}\}/(\d+)", command).group(1))
    assert shards == list(range(count))
    for index in shards:
        value = f"{index}/{count}"
        assert (parse_shard(value, {}).index, parse_shard(value, {}).count) == (index, count)
    assert merge["needs"] == "shard"
    merged = next(step["run"] for step in merge["steps"] if "merge" in step.get("run", ""))
    assert merged.split()[5:] == [f"shards/shard-{index}" for index in shards]


@pytest.mark.slow
def test_the_ray_script_plays_shards_as_remote_tasks_and_merges_them(tmp_path):
    ((language, script),) = blocks_under("Ray: shards as remote tasks, merged on the driver")
    assert language == "python"
    # small: 2 shards of a few episodes, on a local cluster of this machine's 2 CPUs
    for big, small in (
        ("SHARDS = 4", "SHARDS = 2"),
        ("--openenv-n=2000", "--openenv-n=5"),
        ("ray.init()", "ray.init(num_cpus=2, include_dashboard=False)"),
    ):
        assert big in script
        script = script.replace(big, small)
    path = tmp_path / "ray_shards.py"
    path.write_text(script, encoding="utf-8")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(path), str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "merged 2 of 2 shards" in done.stdout
    summary = json.loads((out / "merged" / "summary.json").read_text())
    assert summary["figures"]["ran"] == 5 and summary["shards"]["partial"] is False
    ids = [json.loads(line)["episode_id"] for line in (out / "merged" / "results.jsonl").open()]
    assert ids == [f"ep-{i:06d}" for i in range(5)]  # the expert never loses
