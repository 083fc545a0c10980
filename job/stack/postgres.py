"""PostgreSQL (Debian's 15, from ``/usr/lib/postgresql/<v>/bin``) as a local service.

``initdb`` and the server refuse to run as root, so when we are root both run as the ``postgres``
user through ``runuser`` and the directory is handed to that user.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from job.common.exits import how_it_ended
from job.stack.errors import StackError
from job.stack.process import pid_alive, tail

PG_ROOT = Path("/usr/lib/postgresql")
PG_USER = "postgres"


def postgres_bin_dir() -> Path:
    """Return the folder holding ``initdb`` and ``pg_ctl`` (version 15 preferred, else the newest, else PATH).

    Raises:
        StackError: PostgreSQL is not installed.
    """
    preferred = PG_ROOT / "15" / "bin"
    if (preferred / "pg_ctl").is_file():
        return preferred
    if PG_ROOT.is_dir():
        versions = sorted(
            (p for p in PG_ROOT.iterdir() if (p / "bin" / "pg_ctl").is_file() and p.name.isdigit()),
            key=lambda p: int(p.name),
        )
        if versions:
            return versions[-1] / "bin"
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    raise StackError("PostgreSQL was not found (Debian: apt-get install postgresql-15)")


class PostgresServer:
    """A PostgreSQL cluster in ``<root>/data`` listening on ``127.0.0.1:port`` (trust auth, fsync off).

    The Unix socket is in the data folder; the server log is ``<root>/postgres.log``. The superuser
    is ``postgres``; :attr:`dsn` connects to the ``postgres`` database.
    """

    def __init__(self, root: Path, port: int) -> None:
        self.root = Path(root)
        self.port = port
        self.bin_dir = postgres_bin_dir()
        self.as_root = os.geteuid() == 0

    @property
    def data_dir(self) -> Path:
        """The cluster's data folder (PGDATA)."""
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        """The server log."""
        return self.root / "postgres.log"

    @property
    def dsn(self) -> str:
        """A libpq connection URI: ``postgresql://postgres@127.0.0.1:<port>/postgres``."""
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/postgres"

    @property
    def pid(self) -> int | None:
        """The postmaster's PID from ``postmaster.pid``, or None when it is not running."""
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
            return int(first)
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        """Return True while the postmaster runs."""
        pid = self.pid
        return pid is not None and pid_alive(pid)

    def _run(self, argv: list[str], timeout: float, what: str) -> None:
        cmd = [str(self.bin_dir / argv[0]), *argv[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", PG_USER, "--", *cmd]
        try:
            done = subprocess.run(
                cmd,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"PostgreSQL: {what} took more than {timeout:g} s") from exc
        except OSError as exc:
            raise StackError(f"PostgreSQL: cannot run {cmd[0]}: {exc.strerror or exc}") from exc
        if done.returncode != 0:
            out = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            log = tail(self.log_path) if self.log_path.exists() else ""
            raise StackError(
                f"PostgreSQL: {what} failed ({how_it_ended(done.returncode)}):\n{out}"
                + (f"\nlast lines of {self.log_path}:\n{log}" if log else "")
            )

    def _prepare_dir(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.as_root:
            return
        try:
            shutil.chown(self.root, PG_USER, PG_USER)
        except (LookupError, OSError) as exc:
            raise StackError(f"PostgreSQL: cannot give {self.root} to the {PG_USER} user: {exc}") from exc
        reachable = subprocess.run(
            ["runuser", "-u", PG_USER, "--", "test", "-w", str(self.root)], check=False
        )
        if reachable.returncode != 0:
            raise StackError(
                f"PostgreSQL: the {PG_USER} user cannot reach {self.root}; every parent folder must be "
                "traversable (chmod o+x) — use a folder outside private temp or home folders"
            )

    def start(self, timeout: float = 60.0) -> None:
        """Create the cluster if needed (``initdb``), start it and wait until it accepts connections.

        Raises:
            StackError: the directory is not usable, ``initdb`` or ``pg_ctl start`` fails (with output
                and the server log's last lines).
        """
        self._prepare_dir()
        if not (self.data_dir / "PG_VERSION").is_file():
            self._run(
                [
                    "initdb",
                    "--auth=trust",
                    "--no-sync",
                    "-U",
                    PG_USER,
                    "--encoding=UTF8",
                    "--locale=C",
                    "-D",
                    str(self.data_dir),
                ],
                timeout,
                "initdb",
            )
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data_dir} -c fsync=off"
        self._run(
            [
                "pg_ctl",
                "-w",
                "-t",
                str(int(timeout)),
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_path),
                "-o",
                opts,
                "start",
            ],
            timeout + 5,
            f"starting the server on port {self.port}",
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server (``pg_ctl stop -m fast``; SIGKILL if that fails) and wait until it is gone."""
        pid = self.pid
        if pid is None or not pid_alive(pid):
            return
        try:
            self._run(
                ["pg_ctl", "-w", "-t", str(int(timeout)), "-D", str(self.data_dir), "-m", "fast", "stop"],
                timeout + 5,
                "stopping the server",
            )
        except StackError:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
