"""Env families (adapters) and backends. See ``base`` for the two interfaces."""
