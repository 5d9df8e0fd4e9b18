"""Controller side: the process that sees every report and is the only writer of files.

The xdist controller, or the single pytest process with ``-n 0``.
"""
