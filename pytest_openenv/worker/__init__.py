"""Worker side: every process that runs episode items (xdist workers, or ``-n 0``).

Nothing here writes files; a finished episode travels to the controller on its report.
"""
