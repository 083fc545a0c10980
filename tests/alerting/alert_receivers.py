"""Local receivers the alerting tests deliver to: an HTTP server (Slack, PagerDuty and webhook endpoints)
and a small asyncio SMTP server, each on a port chosen by the OS.

Both bind their port at once but listen only after :meth:`up`: until then a connection is refused,
exactly like a receiver that is down, and no other program can take the port meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One request an HTTP receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class HttpReceiver:
    """Records every POST answered 2xx. Answers 202 with a PagerDuty-like JSON on paths under /pagerduty, ``ok``
    otherwise (or what ``respond`` returns: (status, body) or (status, body, headers))."""

    def __init__(self, respond: Callable[[Received], tuple[Any, ...]] | None = None) -> None:
        self.received: list[Received] = []
        self.respond = respond
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                got = Received(
                    self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length)
                )
                status, body, *extra = receiver._answer(got)
                if 200 <= status < 300:
                    with receiver._lock:
                        receiver.received.append(got)
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output quiet
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.server.daemon_threads = True
        self.server.server_bind()  # the port is ours; connections are refused until up()
        self.port = int(self.server.server_address[1])
        self._thread: threading.Thread | None = None

    def _answer(self, got: Received) -> tuple[Any, ...]:
        if self.respond is not None:
            return self.respond(got)
        if got.path.startswith("/pagerduty"):
            dedup = json.loads(got.body).get("dedup_key", "")
            return 202, json.dumps(
                {"status": "success", "message": "Event processed", "dedup_key": dedup}
            ).encode()
        return 200, b"ok"

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def up(self) -> HttpReceiver:
        """Start listening and serving."""
        self.server.server_activate()
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self

    def posts(self, prefix: str = "/") -> list[Received]:
        """Return the requests received under ``prefix``, in arrival order."""
        with self._lock:
            return [r for r in self.received if r.path.startswith(prefix)]

    def wait_for(self, count: int, prefix: str = "/", timeout: float = 30.0) -> list[Received]:
        """Wait until at least ``count`` requests arrived under ``prefix``; return them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.posts(prefix)
            if len(got) >= count:
                return got
            time.sleep(0.1)
        raise AssertionError(
            f"{len(self.posts(prefix))} requests under {prefix}, not {count}, after {timeout}s"
        )

    def close(self) -> None:
        if self._thread is not None:
            self.server.shutdown()
            self._thread.join(5)
        self.server.server_close()


class SmtpReceiver:
    """A minimal SMTP server (EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT) that keeps every mail."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))  # ours; connections are refused until up()
        self.port = int(self.sock.getsockname()[1])
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._server: asyncio.base_events.Server | None = None

    def up(self) -> SmtpReceiver:
        """Start listening."""

        async def start() -> None:
            self._server = await asyncio.start_server(self._session, sock=self.sock)

        asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)
        return self

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def send(line: str) -> None:
            writer.write(line.encode() + b"\r\n")

        sender, rcpts = "", []
        send("220 localhost test SMTP")
        try:
            while True:
                await writer.drain()
                raw = await reader.readline()
                if not raw:
                    break
                line = raw.decode(errors="replace").rstrip("\r\n")
                verb = line[:4].upper()
                if verb == "EHLO":
                    send("250-localhost")
                    send("250 8BITMIME")
                elif verb == "HELO":
                    send("250 localhost")
                elif verb == "MAIL":
                    sender, rcpts = line.split(":", 1)[1].strip(), []
                    send("250 OK")
                elif verb == "RCPT":
                    rcpts.append(line.split(":", 1)[1].strip())
                    send("250 OK")
                elif verb == "DATA":
                    send("354 End data with <CR><LF>.<CR><LF>")
                    await writer.drain()
                    lines = []
                    while True:
                        data = await reader.readline()
                        if data in (b".\r\n", b".\n", b""):
                            break
                        lines.append(data[1:] if data.startswith(b"..") else data)
                    with self._lock:
                        self.messages.append(email.message_from_bytes(b"".join(lines)))
                        self.envelopes.append((sender, list(rcpts)))
                    send("250 OK queued")
                elif verb in ("RSET", "NOOP"):
                    send("250 OK")
                elif verb == "QUIT":
                    send("221 Bye")
                    await writer.drain()
                    break
                else:
                    send("502 Command not implemented")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def mails(self) -> list[Message]:
        with self._lock:
            return list(self.messages)

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Message]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.mails()
            if len(got) >= count:
                return got
            time.sleep(0.1)
        raise AssertionError(f"{len(self.mails())} mails, not {count}, after {timeout}s")

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._server.wait_closed(), 2)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.sock.close()
        self.loop.close()
