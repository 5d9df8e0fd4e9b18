"""Helpers for users' own tests: hypothesis strategies and the syrupy extension."""
