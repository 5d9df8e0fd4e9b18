"""A judge model that decides an episode by a rubric (``--openenv-judge``, the ``judge``
fixture, ``python -m pytest_openenv rescore``).

``prompt.py`` writes what the judge is asked, ``verdict.py`` reads its answer (strict JSON,
checked), ``judge.py`` asks it through the package's own LLM policies, so its calls go
through the response cache and its key is read from the environment as every key is.
"""

from __future__ import annotations

from .judge import Judge, build_judge, judge_provider
from .verdict import JudgeVerdict

__all__ = ["Judge", "JudgeVerdict", "build_judge", "judge_provider"]
