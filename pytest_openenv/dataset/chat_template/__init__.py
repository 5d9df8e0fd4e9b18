"""``--openenv-chat-template``: do the rows train as they look through a model's chat template?

TRL's ``SFTTrainer`` renders each row with the model's chat template
(``apply_chat_template(messages, tools=...)``). Whether a tool call survives that depends
on the template and on the form of the arguments (``--openenv-tool-arguments``):
Qwen2.5-style templates apply ``tojson`` and encode a string twice, DeepSeek-style ones
concatenate the arguments as text and fail on an object, some (SmolLM2's) drop the call
altogether. ``source`` finds a template (a local folder or file, or a model in the
Hugging Face cache: never a download), ``render`` renders it the way transformers does,
``survival`` checks a row's calls and results in the rendering, ``sample`` builds the row
checked before any episode runs.
"""
