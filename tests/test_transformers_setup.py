"""``--openenv-policy=transformers``: a wrong model or a missing extra is exit 4 at start.

These checks read files only (no torch), so they run whether or not the extra is
installed; the missing extra is shown by hiding torch from the child pytest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ENV = "--openenv-env=openspiel:tic_tac_toe"
POLICY = "--openenv-policy=transformers"
TEMPLATE = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"


def model_folder(root: Path, *, template: str | None = TEMPLATE) -> Path:
    """The files of a checkpoint folder, as far as the start checks read them."""
    folder = root / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    tokenizer: dict[str, object] = {"eos_token": "</s>"}
    if template is not None:
        tokenizer["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return folder


def usage_error(run_pytest, *args: str) -> str:
    result = run_pytest(ENV, POLICY, "--openenv-n=1", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert "passed" not in result.stdout.str()  # before any episode
    return result.stderr.str()


def test_no_model_names_what_it_may_be(run_pytest) -> None:
    err = usage_error(run_pytest)
    assert "--openenv-policy=transformers needs --openenv-model=PATH_OR_ID" in err
    assert "a .gguf file, or a Hub model id" in err


def test_a_missing_path(run_pytest, tmp_path: Path) -> None:
    err = usage_error(run_pytest, f"--openenv-model={tmp_path / 'nowhere'}")
    assert "nowhere does not exist; pass a checkpoint folder, a .gguf file" in err


@pytest.mark.slow
def test_a_folder_that_is_not_a_model(run_pytest, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    err = usage_error(run_pytest, f"--openenv-model={tmp_path}")
    assert "is not a model checkpoint (no config.json)" in err
    err = usage_error(run_pytest, f"--openenv-model={tmp_path / 'notes.txt'}")
    assert "is a file but not a .gguf model" in err


def test_a_folder_holding_a_gguf_points_at_the_file(run_pytest, tmp_path: Path) -> None:
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    err = usage_error(run_pytest, f"--openenv-model={tmp_path}")
    assert f"pass the .gguf file itself, e.g. --openenv-model={tmp_path / 'tiny.gguf'}" in err


def test_an_adapter_folder_says_to_merge_it(run_pytest, tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_text("{}")
    err = usage_error(run_pytest, f"--openenv-model={tmp_path}")
    assert "is a PEFT adapter, not a model; merge it into its base" in err


def test_a_config_that_is_not_a_transformers_config(run_pytest, tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    (folder / "config.json").write_text(json.dumps({"hidden": 4}))
    err = usage_error(run_pytest, f"--openenv-model={folder}")
    assert "config.json has no model_type" in err


def test_a_model_without_a_tokenizer(run_pytest, tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    (folder / "tokenizer_config.json").unlink()
    err = usage_error(run_pytest, f"--openenv-model={folder}")
    assert "has no tokenizer" in err and "tokenizer.save_pretrained(PATH)" in err


def test_a_model_without_a_chat_template_names_the_fix(run_pytest, tmp_path: Path) -> None:
    folder = model_folder(tmp_path, template=None)
    err = usage_error(run_pytest, f"--openenv-model={folder}")
    assert "has no chat template" in err
    assert "tokenizer.chat_template = open('template.jinja').read()" in err


def test_an_endpoint_does_not_go_with_a_local_model(run_pytest, tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    err = usage_error(
        run_pytest, f"--openenv-model={folder}", "--openenv-llm-endpoint=http://127.0.0.1:9/v1"
    )
    assert (
        "--openenv-llm-endpoint=http://127.0.0.1:9/v1 is set but the policy is 'transformers'"
        in err
    )
    assert "which calls no endpoint" in err


def test_the_missing_extra_is_named(run_pytest, pytester: pytest.Pytester, tmp_path) -> None:
    # a None entry in sys.modules is how Python says "not importable" (find_spec gives None)
    pytester.makeconftest("import sys\nsys.modules['torch'] = None\n")
    folder = model_folder(tmp_path)
    err = usage_error(run_pytest, f"--openenv-model={folder}")
    assert "--openenv-policy=transformers needs torch" in err
    assert "pip install 'pytest-openenv[transformers]'" in err


def test_the_bad_option_is_named_in_the_policy_list(run_pytest) -> None:
    err = usage_error(run_pytest, "--openenv-policy=transformer")
    assert "--openenv-policy='transformer' is unknown" in err and "transformers" in err


@pytest.mark.slow
def test_a_looping_chat_template_is_a_usage_error_within_its_render_bound(
    run_pytest, tmp_path: Path
) -> None:
    """transformers' own renderer is bounded too (checked at start, before any episode)."""
    pytest.importorskip("transformers")
    import time

    looping = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    folder = model_folder(tmp_path, template=looping + TEMPLATE)
    started = time.monotonic()
    err = usage_error(run_pytest, f"--openenv-model={folder}")
    assert f"--openenv-model={folder}" in err
    assert "did not finish rendering within 5s" in err
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_a_checkpoint_that_needs_its_own_code_is_refused_unless_allowed(
    run_pytest, tmp_path: Path
) -> None:
    folder = model_folder(tmp_path)
    config = {"model_type": "acme", "auto_map": {"AutoModelForCausalLM": "modeling_acme.Acme"}}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_acme.py").write_text("raise SystemExit('the checkpoint code ran')\n")
    err = usage_error(run_pytest, f"--openenv-model={folder}")
    assert "needs its own Python code" in err
    assert "AutoModelForCausalLM -> modeling_acme.Acme" in err
    assert "--openenv-trust-remote-code" in err
    # allowed: the start check lets it through (what loads it is transformers' business)
    allowed = run_pytest(
        ENV,
        POLICY,
        "--openenv-n=1",
        f"--openenv-model={folder}",
        "--openenv-trust-remote-code",
        "--collect-only",
    )
    assert "needs its own Python code" not in allowed.stderr.str()


def test_a_weight_type_torch_does_not_offer_names_the_choices(run_pytest, tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    err = usage_error(run_pytest, f"--openenv-model={folder}", "--openenv-model-dtype=fp8")
    assert "--openenv-model-dtype" in err and "fp8" in err
    assert "auto, float32, bfloat16, float16" in err
