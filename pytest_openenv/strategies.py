"""Hypothesis strategies and a state machine for property tests of environments.

The public name the docs promise (docs/writing-tests.md); the code lives in
``pytest_openenv.testing.strategies``.
"""

from .testing.strategies import *  # noqa: F403
from .testing.strategies import __all__  # noqa: F401
