"""Test servers for lookups: a JSON HTTP server on an OS port, and fixtures' data in PostgreSQL and Elasticsearch."""

from __future__ import annotations

import contextlib
import http.server
import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import requests


@dataclass
class JsonServer:
    """What the server answers: ``docs`` (path -> JSON; other paths 404, ``failing`` paths 500) and the
    requests it had (method, path, JSON body)."""

    url: str
    docs: dict[str, Any]
    failing: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)


@contextlib.contextmanager
def json_server(docs: dict[str, Any], tls: tuple[Path, Path] | None = None) -> Iterator[JsonServer]:
    """Serve ``docs`` on 127.0.0.1 at a port the OS picks, until the block ends; over https with ``tls``
    (certificate file, key file)."""
    state = JsonServer("", dict(docs))
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            with lock:
                state.requests.append((self.command, self.path, body))
            path = self.path if body is None else f"{self.path}?{json.dumps(body, sort_keys=True)}"
            if path in state.failing:
                self.send_response(500)
                self.end_headers()
                return
            if path not in state.docs:
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps(state.docs[path]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _answer  # noqa: N815 (http.server's names)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    state.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def pg_customers(dsn: str, table: str, rows: list[tuple[str, str, str, int]]) -> None:
    """Create ``table`` (customer_id, name, tier, score) in PostgreSQL with ``rows``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (customer_id text PRIMARY KEY, name text, tier text, score int)")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s)", rows)


def es_profiles(url: str, index: str, docs: dict[str, dict[str, Any]]) -> None:
    """Index ``docs`` (id -> source) into ``index`` and refresh it."""
    for doc_id, source in docs.items():
        resp = requests.put(
            f"{url}/{index}/_doc/{doc_id}", json=source, params={"refresh": "true"}, timeout=30
        )
        assert resp.status_code in (200, 201), resp.text


def self_signed(folder: Path) -> tuple[Path, Path]:
    """Make a self-signed certificate for 127.0.0.1 (openssl) in ``folder``; return (certificate, key)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@dataclass
class InfluxGate:
    """A stand-in InfluxDB 1.x for a dagger's second sink: it takes every write while open; while closed, a write
    waits (``blocked`` is set) until it opens again. A dagger killed then has written its batch to the sinks
    before it, and not committed it: the batch runs again when the dagger starts again."""

    url: str
    database: str
    opened: threading.Event = field(default_factory=threading.Event)
    blocked: threading.Event = field(default_factory=threading.Event)
    writes: int = 0


@contextlib.contextmanager
def influx_gate(database: str) -> Iterator[InfluxGate]:
    """Serve an :class:`InfluxGate` (open) on 127.0.0.1 at a port the OS picks, until the block ends."""
    gate = InfluxGate("", database)
    gate.opened.set()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if self.path.startswith("/write"):
                if not gate.opened.is_set():
                    gate.blocked.set()
                    gate.opened.wait(timeout=600)
                gate.writes += 1
                self.send_response(204)
                self.end_headers()
                return
            if self.path.startswith("/ping"):
                self.send_response(204)
                self.end_headers()
                return
            data = json.dumps(
                {
                    "results": [
                        {"series": [{"name": "databases", "columns": ["name"], "values": [[gate.database]]}]}
                    ]
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer  # noqa: N815 (http.server's names)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    gate.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield gate
    finally:
        gate.opened.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
