"""``python -m job.cli ...`` runs the ``daggers`` command line."""

import os

from job.cli.main import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
main()
