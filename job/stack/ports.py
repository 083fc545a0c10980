"""TCP port helpers: ask the OS for a free port, and check whether a port is taken."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now, chosen by the OS (bind to port 0).

    The socket is closed before returning, so another program may still take the port in the
    meantime; callers that start a server should be ready to retry with another port.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``count`` distinct free TCP ports on ``host``, chosen by the OS.

    All sockets stay bound until every port is chosen, so the ports differ from each other
    (two calls of :func:`free_port` in a row may return the same port).
    """
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


def port_in_use(host: str, port: int) -> bool:
    """Return True when something listens on (or holds) ``host:port``, so a server cannot bind it.

    The check binds the port with ``SO_REUSEADDR`` (so sockets in TIME_WAIT do not count) and also
    tries to connect, which catches listeners bound to another address that covers ``host``.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
