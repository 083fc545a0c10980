"""A TCP relay in front of a real service, which a test can cut: the service stays up for everyone
else, but whoever talks through the relay finds it unreachable (connection refused); or hold: whoever talks
through it waits, as on a service that hangs, until the test releases it."""

from __future__ import annotations

import contextlib
import socket
import threading


class Relay:
    """Forwards connections on ``127.0.0.1:port`` (chosen by the OS) to ``127.0.0.1:target``."""

    def __init__(self, target: int) -> None:
        self.target = target
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._flowing = threading.Event()  # cleared: every byte is held (see hold)
        self._flowing.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                self._flowing.wait()
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def hold(self) -> None:
        """Hold every byte from now on, both ways, until :meth:`release`: the service seems to hang (its
        connections stay open)."""
        self._flowing.clear()

    def release(self) -> None:
        """Pass on what was held, and all that comes after."""
        self._flowing.set()

    def cut(self) -> None:
        """Stop listening and drop every connection: the port now refuses connections.

        The listening socket is shut down before it is closed: a close alone does not wake the thread
        blocked in ``accept()``, and the kernel would go on completing connections nobody serves."""
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._lock:
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.close()
            self._open.clear()
