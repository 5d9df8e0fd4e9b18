"""Model-backed policies: the OpenAI and Anthropic SDKs, and what they share."""
