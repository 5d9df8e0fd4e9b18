"""``--openenv-inspect-log``: the run as inspect-ai eval logs, one per group.

Written with inspect's own public API (``inspect_ai.log``), so ``inspect view`` and
``inspect_ai.analysis.samples_df`` open them as they open inspect's own. ``figures``
computes each group's results from its rows, ``samples`` turns a row into an
``EvalSample``, ``write`` builds and writes the logs. inspect-ai is imported only here,
and only when asked (the ``inspect`` extra).
"""
