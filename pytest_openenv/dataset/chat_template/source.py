"""Where a chat template comes from: a local folder or file, or a model in the HF cache.

The files transformers reads a tokenizer's template from, in its order of preference:
``chat_template.jinja``, the ``chat_template`` of ``tokenizer_config.json`` (a string,
or a list of named templates: ``tool_use`` when there are tools, else ``default``), and
``chat_template.json``. The special tokens a template may use (``bos_token`` ...) come
from ``tokenizer_config.json`` and ``special_tokens_map.json``. A model id is looked up
in the local Hugging Face cache only: the check never downloads at start-up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import TemplateNotFound

TEMPLATE_FILE = "chat_template.jinja"
TOKENIZER_CONFIG = "tokenizer_config.json"
TEMPLATE_JSON = "chat_template.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
#: the special tokens transformers hands every template
SPECIAL_TOKENS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template's source and the special tokens it is rendered with."""

    model: str
    """What the user named (``--openenv-chat-template``)."""
    source: str
    """The file the template text came from."""
    text: str
    tokens: dict[str, str] = field(default_factory=dict)


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]  # a serialised AddedToken
    return None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TemplateNotFound(f"{path} cannot be read as JSON: {exc}") from None
    if not isinstance(value, dict):
        raise TemplateNotFound(f"{path} does not hold a JSON object")
    return value


def _named_template(value: Any, where: Path) -> str | None:
    """A ``chat_template`` value: a string, or transformers' list of named templates."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {
            item.get("name"): item.get("template")
            for item in value
            if isinstance(item, dict) and isinstance(item.get("template"), str)
        }
        # rows always carry tools: transformers then prefers the tool_use template
        for name in ("tool_use", "default"):
            if name in named:
                return named[name]
    raise TemplateNotFound(
        f"{where}: chat_template is neither a string nor a list of named templates with a "
        "'default' or 'tool_use' one"
    )


def from_files(model: str, files: dict[str, Path]) -> ChatTemplate:
    """The template among a model's files (name -> path of those that exist)."""
    config = _read_json(files[TOKENIZER_CONFIG]) if TOKENIZER_CONFIG in files else {}
    tokens: dict[str, str] = {}
    if SPECIAL_TOKENS_MAP in files:
        special = _read_json(files[SPECIAL_TOKENS_MAP])
        tokens.update({k: t for k in SPECIAL_TOKENS if (t := _token_text(special.get(k)))})
    tokens.update({k: t for k in SPECIAL_TOKENS if (t := _token_text(config.get(k)))})
    if TEMPLATE_FILE in files:
        path = files[TEMPLATE_FILE]
        try:
            return ChatTemplate(model, str(path), path.read_text(encoding="utf-8"), tokens)
        except OSError as exc:
            raise TemplateNotFound(f"{path} cannot be read: {exc}") from None
    if TOKENIZER_CONFIG in files:
        text = _named_template(config.get("chat_template"), files[TOKENIZER_CONFIG])
        if text:
            return ChatTemplate(model, str(files[TOKENIZER_CONFIG]), text, tokens)
    if TEMPLATE_JSON in files:
        path = files[TEMPLATE_JSON]
        text = _named_template(_read_json(path).get("chat_template"), path)
        if text:
            return ChatTemplate(model, str(path), text, tokens)
    found = ", ".join(sorted(files)) or f"none of {', '.join(FILES)}"
    raise TemplateNotFound(
        f"{shown(model)} has no chat template (it has {found}; a template is in "
        f"{TEMPLATE_FILE} or in the chat_template of {TOKENIZER_CONFIG}): name a chat model, "
        "e.g. the instruct variant"
    )


def shown(model: str) -> str:
    """``model`` in a message, cut short (a value pasted by mistake can be long)."""
    return model if len(model) <= 200 else f"{model[:200]}... ({len(model)} characters)"


FILES = (TEMPLATE_FILE, TOKENIZER_CONFIG, TEMPLATE_JSON, SPECIAL_TOKENS_MAP)


def load_chat_template(model: str) -> ChatTemplate:
    """The chat template of ``model``: a folder, a template or config file, or a cached id."""
    path = Path(model).expanduser()
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except (OSError, ValueError):  # a name too long for a path, a NUL byte: an id, if any
        is_dir = is_file = False
    if is_dir:
        return from_files(model, {name: path / name for name in FILES if (path / name).is_file()})
    if is_file:
        if path.name in (TOKENIZER_CONFIG, TEMPLATE_JSON):
            siblings = {n: path.parent / n for n in FILES if (path.parent / n).is_file()}
            return from_files(model, {**siblings, path.name: path})
        return from_files(model, {TEMPLATE_FILE: path})  # a bare template file, any name
    return from_cache(model)


def from_cache(model: str) -> ChatTemplate:
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError:
        raise TemplateNotFound(
            f"{model!r} is neither a folder or file here nor a Hugging Face model id (owner/name)"
        ) from None
    files: dict[str, Path] = {}
    for name in FILES:
        found = try_to_load_from_cache(model, name)
        if isinstance(found, str):
            files[name] = Path(found)
    if not files:
        raise TemplateNotFound(
            f"{shown(model)} is not a local folder and is not in the Hugging Face cache (the check "
            "never downloads); fetch its tokenizer files first: hf download "
            f"{model} {TOKENIZER_CONFIG} {TEMPLATE_FILE} (or pass the model's local folder)"
        )
    return from_files(model, files)
