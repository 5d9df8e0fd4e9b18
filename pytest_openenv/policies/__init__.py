"""Policies: who chooses the tool calls. See ``base`` for the interface."""
