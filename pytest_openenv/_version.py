"""The package's version, in a module of its own: every layer may read it (the User-Agent of
a request, metadata.json) without importing the package root, which names the public API."""

__version__ = "0.1.0"
