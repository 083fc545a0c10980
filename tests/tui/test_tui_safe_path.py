"""``daggers tui`` runs the console, never a ``tui.py`` of the folder it is started in (issue 49, item 15): it
starts ``python -P -m tui`` (``python -m`` alone puts the working folder first on the import path)."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

from job.control import Registry
from tests.helpers import wait_until
from tests.job.control.control_seed import seed

DAGGERS = Path(sys.executable).with_name("daggers")


def test_the_console_starts_and_a_tui_py_in_the_folder_does_not_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = Registry(url)
    seed(registry)
    registry.close()
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "tui-py-ran"
    (work / "tui.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).touch()\n")
    master, slave = os.openpty()  # a real terminal, 120x40, for the real console
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COLUMNS", "LINES", "DAGGERS_SERVER", "PYTHONSAFEPATH")
    }
    env.update(TERM="xterm-256color", DAGGERS_USER="alice")
    proc = subprocess.Popen(
        [str(DAGGERS), "tui", "--registry", url],
        cwd=work,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    screen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end closed
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_until("the console's clusters screen", lambda: b"a-sgp" in screen, 120, every_s=0.2, proc=proc)
        os.write(master, b"\x11")  # Ctrl-Q quits
        proc.wait(timeout=60)
        assert proc.returncode == 0, bytes(screen[-2000:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        os.close(master)
    assert not marker.exists()
