"""A module the fork-server tests ask for: prints what it was given, then exits or waits."""

import json
import os
import signal
import sys
import time
from pathlib import Path


def disposition(sig: signal.Signals) -> str:
    handler = signal.getsignal(sig)
    names = {
        signal.SIG_IGN: "ignored",
        signal.SIG_DFL: "default",
        signal.default_int_handler: "KeyboardInterrupt",
    }
    return names.get(handler, "a handler")  # type: ignore[call-overload]


if __name__ == "__main__":
    if "--own-group" in sys.argv:  # as PySpark's daemon does
        os.setpgid(0, 0)
    print(
        json.dumps(
            {
                "pid": os.getpid(),
                "ppid": os.getppid(),
                "cwd": os.getcwd(),
                "argv": sys.argv[1:],
                "marker": os.environ.get("FORK_TEST_MARKER"),
                "comm": Path("/proc/self/comm").read_text().strip(),
                "signals": {s.name: disposition(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)},
            }
        ),
        flush=True,
    )
    print("to stderr", file=sys.stderr, flush=True)
    if "--hang-up" in sys.argv:  # as PySpark's source runner ends when its JVM stops first
        try:
            raise EOFError
        except EOFError:
            raise BrokenPipeError(32, "Broken pipe")  # noqa: B904 - raised while handling, as PySpark's is
    if "--fail" in sys.argv:
        raise ValueError("a real failure")
    if "--wait" in sys.argv:
        time.sleep(120)
    sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
