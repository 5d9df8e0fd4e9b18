"""Where ``--openenv-model`` points for ``--openenv-policy=transformers``, checked before a run.

Read from the files alone (no torch, no transformers), so a wrong path is one usage error
at start on the controller, before any worker loads anything: a checkpoint folder
(``config.json`` + tokenizer files, what ``save_pretrained`` writes), a ``.gguf`` file
(transformers loads it with ``gguf_file=``), or a Hub model id (its small files fetched
or taken from the local Hub cache; the weights are fetched by the worker that loads them).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import CheckpointProblem

#: the files that say what a checkpoint is and how it speaks; fetched for a Hub id at start
DESCRIPTIVE_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
#: how to give a checkpoint a chat template, for the error that finds none
TEMPLATE_FIX = (
    "give it one that renders tools and tool calls: tokenizer.chat_template = "
    "open('template.jinja').read(); tokenizer.save_pretrained(PATH) (it writes "
    "chat_template.jinja)"
)


@dataclass(frozen=True)
class Checkpoint:
    #: as given on the command line (recorded as the row's ``model``)
    spec: str
    #: what ``from_pretrained`` is given: a folder or a Hub id
    source: str
    #: the folder holding the descriptive files (for a Hub id: its cached snapshot)
    folder: Path
    #: the ``.gguf`` file inside ``folder``, for ``gguf_file=``
    gguf_file: str | None
    chat_template: str
    #: the Hub snapshot's commit, when ``spec`` is a Hub id
    revision: str | None = None
    #: the checkpoint's own code it needs (``auto_map`` of config.json or
    #: tokenizer_config.json: class -> module.Class); empty: transformers' classes do
    own_code: tuple[str, ...] = ()

    def fingerprint(self) -> str:
        """A digest of what decides the checkpoint's answers, for response-cache keys.

        A checkpoint retrained in place gets a new fingerprint, so a cache never replays the
        old model's answers for it. A Hub snapshot is named by its commit; a local folder is
        read whole (about half a second per GB).
        """
        digest = hashlib.sha256(self.chat_template.encode("utf-8"))
        if self.revision is not None:
            digest.update(f"hub:{self.source}@{self.revision}".encode())
            return digest.hexdigest()
        files = (
            [self.folder / self.gguf_file]
            if self.gguf_file
            else sorted(p for p in self.folder.iterdir() if _decides_answers(p))
        )
        for path in files:
            digest.update(path.name.encode("utf-8") + b"\0")
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        return digest.hexdigest()


def _decides_answers(path: Path) -> bool:
    if not path.is_file():
        return False
    return path.name in DESCRIPTIVE_FILES or path.suffix in WEIGHT_SUFFIXES


def find_checkpoint(spec: str) -> Checkpoint:
    """The checkpoint ``spec`` names; raises ``CheckpointProblem`` saying what is wrong."""
    path = Path(spec).expanduser()
    if path.is_file():
        if path.suffix != ".gguf":
            raise CheckpointProblem(
                f"{path} is a file but not a .gguf model; pass a checkpoint folder "
                "(what save_pretrained writes: config.json, weights, tokenizer) or a .gguf file"
            )
        return _gguf_checkpoint(spec, path)
    if path.is_dir():
        return _folder_checkpoint(spec, path.resolve())
    if _looks_like_hub_id(spec):
        return _hub_checkpoint(spec)
    raise CheckpointProblem(
        f"{path} does not exist; pass a checkpoint folder, a .gguf file or a Hub model id "
        "(org/name)"
    )


def _folder_checkpoint(spec: str, folder: Path, revision: str | None = None) -> Checkpoint:
    config = folder / "config.json"
    if not config.is_file():
        ggufs = sorted(p.name for p in folder.glob("*.gguf"))
        if ggufs:
            raise CheckpointProblem(
                f"{folder} has no config.json but holds {', '.join(ggufs)}; pass the .gguf "
                f"file itself, e.g. --openenv-model={folder / ggufs[0]}"
            )
        if (folder / "adapter_config.json").is_file():
            raise CheckpointProblem(
                f"{folder} is a PEFT adapter, not a model; merge it into its base "
                "(model.merge_and_unload()) and save_pretrained the result"
            )
        raise CheckpointProblem(
            f"{folder} is not a model checkpoint (no config.json); pass the folder "
            "save_pretrained wrote, or a .gguf file"
        )
    try:
        model_config = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointProblem(f"{config} is not readable JSON ({exc})") from None
    if not isinstance(model_config, dict) or "model_type" not in model_config:
        raise CheckpointProblem(f"{config} has no model_type: it is not a transformers config")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise CheckpointProblem(
            f"{folder} has no tokenizer ({' / '.join(TOKENIZER_FILES)}); save the tokenizer "
            "beside the model: tokenizer.save_pretrained(PATH)"
        )
    template = folder_chat_template(folder)
    if template is None:
        raise CheckpointProblem(f"{folder} has no chat template; {TEMPLATE_FIX}")
    source = str(folder) if revision is None else spec
    return Checkpoint(spec, source, folder, None, template, revision, own_code(folder))


def own_code(folder: Path) -> tuple[str, ...]:
    """What ``auto_map`` in the folder's configs names: code transformers would import from
    the checkpoint (``trust_remote_code``), as ``file: class -> module.Class``."""
    found: list[str] = []
    for name in ("config.json", "tokenizer_config.json"):
        try:
            data = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        mapping = data.get("auto_map") if isinstance(data, dict) else None
        if isinstance(mapping, dict):
            found += [f"{name}: {key} -> {value}" for key, value in mapping.items()]
        elif mapping:
            found.append(f"{name}: auto_map {mapping!r}")
    return tuple(found)


def folder_chat_template(folder: Path) -> str | None:
    """The template ``AutoTokenizer`` would use with tools, newest file form first."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    for name in ("chat_template.json", "tokenizer_config.json"):
        data = _json_file(folder / name)
        if data is not None:
            template = _pick_template(data.get("chat_template"))
            if template:
                return template
    return None


def _pick_template(value: Any) -> str | None:
    """A template string, or the one a tool-calling request picks from a named list."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, list):
        named = {item.get("name"): item.get("template") for item in value if isinstance(item, dict)}
        for name in ("tool_use", "default"):
            if isinstance(named.get(name), str):
                return named[name]
    return None


def _json_file(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointProblem(f"{path} is not readable JSON ({exc})") from None
    return data if isinstance(data, dict) else None


def _gguf_checkpoint(spec: str, path: Path) -> Checkpoint:
    try:
        from gguf import GGUFReader
    except ImportError:
        raise CheckpointProblem(
            f"{path} is a GGUF file, which transformers reads with the gguf package: "
            "pip install 'pytest-openenv[transformers]'"
        ) from None
    try:
        reader = GGUFReader(str(path))
        field = reader.get_field("tokenizer.chat_template")
        template = field.contents() if field is not None else None
    except Exception as exc:  # gguf raises plain ValueErrors and struct errors alike
        raise CheckpointProblem(f"{path} is not a readable GGUF file ({exc})") from None
    if not isinstance(template, str) or not template:
        raise CheckpointProblem(
            f"{path} carries no chat template (GGUF key tokenizer.chat_template); convert it "
            f"to a checkpoint folder (from_pretrained(..., gguf_file=...), save_pretrained) "
            f"and {TEMPLATE_FIX}"
        )
    folder = path.resolve().parent
    return Checkpoint(spec, str(folder), folder, path.name, template)


def _looks_like_hub_id(spec: str) -> bool:
    parts = spec.split("/")
    return len(parts) == 2 and all(parts) and not spec.startswith((".", "~"))


def _hub_checkpoint(spec: str) -> Checkpoint:
    from huggingface_hub import snapshot_download

    try:
        snapshot = Path(snapshot_download(spec, allow_patterns=list(DESCRIPTIVE_FILES)))
    except Exception as exc:  # offline, unknown repo, gated repo: all say the same to the user
        raise CheckpointProblem(
            f"{spec!r} is neither a local folder or file nor a Hub model this machine can "
            f"fetch ({type(exc).__name__}: {str(exc)[:300]}); pass a checkpoint folder or a "
            ".gguf file"
        ) from None
    return _folder_checkpoint(spec, snapshot, revision=snapshot.name)
