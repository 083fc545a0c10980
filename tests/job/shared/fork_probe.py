"""A module the safe-path tests ask for: says whether ``daggers_cwd_probe``, a module only the working folder
holds, could be imported, and who started it."""

import json
import os
import sys

if __name__ == "__main__":
    try:
        import daggers_cwd_probe  # noqa: F401 - in the working folder only

        imported = True
    except ModuleNotFoundError:
        imported = False
    print(
        json.dumps(
            {
                "imported": imported,
                "ppid": os.getppid(),
                "cwd": os.getcwd(),
                "cwd_on_path": any(p in ("", ".", os.getcwd()) for p in sys.path),
            }
        ),
        flush=True,
    )
