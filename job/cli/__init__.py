"""``daggers``, the command line: one module per command group (see :mod:`job.cli.main`).

``daggers`` (the console script) and ``python -m job.cli`` both run :func:`main`.
"""

from job.cli.main import app, main

__all__ = ["app", "main"]
