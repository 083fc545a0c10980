"""``python -m job.cli.control``: the control-plane commands on their own."""

import os
import sys

from job.cli.control import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
sys.exit(main())
