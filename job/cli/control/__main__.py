"""``python -m job.cli.control``: the control-plane commands on their own."""

import os

from job.cli.control import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
main()
