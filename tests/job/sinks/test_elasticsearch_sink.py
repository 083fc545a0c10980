"""The Elasticsearch sink against noida-db's Elasticsearch REST API: exact documents in per-day
indices with the mapping made on first write, a replay that overwrites (no duplicates), retries on
429/5xx, the server down past the retries, and clear errors at spec check time."""

from __future__ import annotations

import contextlib
import http.server
import json
import logging
import select
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests

from job.errors import SinkError, SpecError
from job.sinks.elasticsearch import ElasticsearchSink, document_id
from job.sinks.registry import build_sinks
from job.spec import ElasticsearchSinkSpec, parse_spec
from job.stack.elastic import NoidaElasticsearch
from job.stack.ports import free_port
from tests.helpers import booking_spec

W1 = datetime(2026, 3, 2, 23, 59, tzinfo=UTC)
W2 = datetime(2026, 3, 3, 0, 0, tzinfo=UTC)


def batch(counts: list[int], fares: list[float] | None = None) -> pa.Table:
    n = len(counts)
    return pa.table(
        {
            "tag_city_id": pa.array([1, 1, 2, None][:n], pa.int32()),
            "tag_s2id": ["-7830489120239730688", "3344475382534373376", "-7830489120239730688", "42"][:n],
            "num_of_bookings": pa.array(counts, pa.int64()),
            "avg_fare": pa.array(fares or [10.5] * n, pa.float64()),
            "window_timestamp": pa.array([W1, W1, W2, W2][:n], pa.timestamp("us", tz="UTC")),
        }
    )


def sink_for(url: str, index: str, dagger: str = "d1", **settings: Any) -> ElasticsearchSink:
    spec = ElasticsearchSinkSpec.model_validate(
        {"type": "elasticsearch", "hosts": url, "index": index, "refresh": True, **settings}
    )
    return ElasticsearchSink(spec, dagger, sleep=lambda s: None)


def search_all(url: str, index: str) -> list[dict[str, Any]]:
    """Every document of ``index`` (a pattern), as {_index, _id, _source}, sorted by index and id."""
    requests.post(f"{url}/{index}/_refresh", timeout=10)
    resp = requests.post(
        f"{url}/{index}/_search", json={"size": 10_000, "query": {"match_all": {}}}, timeout=30
    )
    resp.raise_for_status()
    hits = resp.json()["hits"]["hits"]
    return sorted(
        ({"_index": h["_index"], "_id": h["_id"], "_source": h["_source"]} for h in hits),
        key=lambda d: (d["_index"], d["_id"]),
    )


# ---- spec check time -----------------------------------------------------------------------


def spec_text(index: str, extra: str = "", hosts: str = "http://127.0.0.1:9200") -> str:
    return booking_spec(
        "es-spec",
        topic="t",
        sink=f'sink:\n  type: elasticsearch\n  hosts: {hosts}\n  index: "{index}"\n{extra}',
    )


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (
            "bookings-{city}",
            "index 'bookings-{city}' uses {city}: the only field an index name may carry is {window:FORMAT}",
        ),
        (
            "bookings-{window}",
            "index 'bookings-{window}': {window} needs a strftime format, e.g. {window:%Y.%m.%d}",
        ),
        (
            "Bookings-{window:%Y}",
            "index 'Bookings-{window:%Y}' gives names like 'Bookings-2026' that Elasticsearch "
            "refuses: an index name is lower case",
        ),
        (
            "bookings-{window:%H:%M}",
            "index 'bookings-{window:%H:%M}' gives names like 'bookings-23:59' that "
            "Elasticsearch refuses (it has ':'): an index name is lower case",
        ),
        ("bookings-{window:%Y", "index 'bookings-{window:%Y' is not a valid pattern"),
    ],
)
def test_a_bad_index_pattern_fails_the_spec_check_naming_the_line(index: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(spec_text(index), "es.yaml")
    text = str(info.value)
    assert text.startswith(f"es.yaml:13: sinks[0].index: {message}"), text


def test_a_host_url_with_credentials_is_refused_without_showing_them() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(spec_text("b", hosts="https://elastic:pw-s3cret@es.internal:9200"), "es.yaml")
    assert str(info.value).startswith(
        "es.yaml:12: sinks[0].hosts: a host URL may not carry credentials: use "
        "username and password (or api_key) with ${VARIABLE}s"
    )
    assert "pw-s3cret" not in str(info.value)


def test_credentials_come_from_the_environment_and_are_never_shown() -> None:
    spec = parse_spec(
        spec_text("b", "  username: ${ES_USER}\n  password: ${ES_PASSWORD}\n"),
        "es.yaml",
        env={"ES_USER": "daggers", "ES_PASSWORD": "pw-s3cret"},
    )
    sink_spec = spec.sinks[0]
    assert isinstance(sink_spec, ElasticsearchSinkSpec)
    assert sink_spec.username == "daggers" and sink_spec.password is not None
    assert sink_spec.password.get_secret_value() == "pw-s3cret"
    assert "pw-s3cret" not in repr(spec) and "pw-s3cret" not in spec.model_dump_json()
    with pytest.raises(SpecError) as info:
        parse_spec(
            spec_text("b", "  api_key: ${ES_KEY}\n  username: u\n  password: p\n"),
            "es.yaml",
            env={"ES_KEY": "k"},
        )
    assert "give either api_key or username/password, not both" in str(info.value)


def test_the_document_id_is_stable_across_processes_and_keyed_on_dagger_window_and_tags() -> None:
    key = [("window_timestamp", W1), ("tag_city_id", 1), ("tag_s2id", "42")]
    here = document_id("d1", key)
    code = (
        "from datetime import UTC, datetime; from job.sinks.elasticsearch import document_id; "
        "print(document_id('d1', [('window_timestamp', datetime(2026, 3, 2, 23, 59, tzinfo=UTC)), "
        "('tag_city_id', 1), ('tag_s2id', '42')]))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
        env={"PYTHONHASHSEED": "123"},
    ).stdout.strip()
    assert other == here and len(here) == 32
    assert document_id("d2", key) != here
    assert document_id("d1", [key[0], ("tag_city_id", 2), key[2]]) != here
    assert document_id("d1", [("window_timestamp", W2), *key[1:]]) != here


# ---- against noida-db's Elasticsearch ------------------------------------------------------


@pytest.mark.integration
def test_exact_documents_in_daily_indices_then_a_replay_overwrites_them(elasticsearch) -> None:  # type: ignore[no-untyped-def]
    prefix = f"bk-{uuid.uuid4().hex[:8]}"
    sink = sink_for(elasticsearch.url, prefix + "-{window:%Y.%m.%d}", batch_size=3)
    sink.open()
    assert sink.write(batch([3, 4, 5, 6]), 0) == 4
    docs = search_all(elasticsearch.url, f"{prefix}-*")
    rows = batch([3, 4, 5, 6]).to_pylist()
    want = [
        {
            "_index": f"{prefix}-{r['window_timestamp']:%Y.%m.%d}",
            "_id": document_id(
                "d1",
                [
                    ("window_timestamp", r["window_timestamp"]),
                    ("tag_city_id", r["tag_city_id"]),
                    ("tag_s2id", r["tag_s2id"]),
                ],
            ),
            "_source": {**r, "window_timestamp": r["window_timestamp"].isoformat().replace("+00:00", "Z")},
        }
        for r in rows
    ]
    assert docs == sorted(want, key=lambda d: (d["_index"], d["_id"]))
    assert {d["_index"] for d in docs} == {f"{prefix}-2026.03.02", f"{prefix}-2026.03.03"}
    mapping = requests.get(f"{elasticsearch.url}/{prefix}-2026.03.02/_mapping", timeout=10).json()
    assert mapping[f"{prefix}-2026.03.02"]["mappings"]["properties"] == {
        "tag_city_id": {"type": "keyword"},
        "tag_s2id": {"type": "keyword"},
        "num_of_bookings": {"type": "long"},
        "avg_fare": {"type": "double"},
        "window_timestamp": {"type": "date"},
    }

    # the same windows again with new values (a replay, or a late update): overwritten, no duplicates
    replay = sink_for(elasticsearch.url, prefix + "-{window:%Y.%m.%d}")
    replay.open()
    assert replay.write(batch([3, 4, 5, 7], [1.0, 2.0, 3.0, 4.0]), 1) == 4
    after = search_all(elasticsearch.url, f"{prefix}-*")
    assert [d["_id"] for d in after] == [d["_id"] for d in docs]
    assert sorted(d["_source"]["num_of_bookings"] for d in after) == [3, 4, 5, 7]
    assert sorted(d["_source"]["avg_fare"] for d in after) == [1.0, 2.0, 3.0, 4.0]
    assert sink.metrics.rows_written == 4 and sink.metrics.retries == 0
    sink.close()
    replay.close()


@pytest.mark.integration
def test_the_server_down_past_the_retries_fails_with_a_clear_error(tmp_path: Path) -> None:
    server = NoidaElasticsearch(tmp_path / "es", free_port())
    server.start()
    try:
        sink = sink_for(server.url, "down-test", max_retries=2)
        sink.open()
        assert sink.write(batch([1]), 0) == 1
    finally:
        server.stop()
    with pytest.raises(SinkError) as info:
        sink.write(batch([2]), 1)
    assert info.value.message == (
        f"giving up writing to Elasticsearch at {server.url} after 3 attempts: "
        f"cannot reach {server.url}: ConnectionError"
    )
    assert sink.metrics.retries == 2 and sink.metrics.failures == 1

    closed = sink_for(f"http://127.0.0.1:{free_port()}", "x")
    with pytest.raises(SinkError) as info:
        closed.open()
    assert info.value.message == f"Elasticsearch at {closed.spec.hosts[0]} is unreachable: ConnectionError"


# ---- back-off on 429 and 5xx (a scripted HTTP server: which status comes when) --------------


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers like Elasticsearch; the bulk endpoint answers from ``script`` in turn: a whole-request
    status, or ``"item429"``/``"item400"`` (every document refused with 429/400), then 200 for all."""

    script: list[int | str] = []
    bulks: list[int] = []

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._send(200, {"version": {"number": "8.15.3"}, "tagline": "You Know, for Search"})

    def do_HEAD(self) -> None:  # noqa: N802 - indices.exists: yes
        self.send_response(200)
        self.send_header("X-Elastic-Product", "Elasticsearch")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self) -> None:  # noqa: N802 - put_mapping, or _bulk
        if "_bulk" in self.path:
            self.do_POST()
            return
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(200, {"acknowledged": True})

    def do_POST(self) -> None:  # noqa: N802 - _bulk
        lines = [
            json.loads(x) for x in self.rfile.read(int(self.headers["Content-Length"])).splitlines() if x
        ]
        actions = lines[0::2]
        self.bulks.append(len(actions))
        step = self.script.pop(0) if self.script else 200
        if isinstance(step, int) and step != 200:
            self._send(
                step, {"error": {"type": "es_rejected_execution_exception", "reason": "busy"}, "status": step}
            )
            return
        status = {"item429": 429, "item400": 400}.get(str(step), 201)
        error = {
            429: {"type": "es_rejected_execution_exception", "reason": "queue full"},
            400: {"type": "mapper_parsing_exception", "reason": "failed to parse field [avg_fare]"},
        }
        items = [
            {
                "index": {
                    "_index": a["index"]["_index"],
                    "_id": a["index"]["_id"],
                    "status": status,
                    **({"error": error[status]} if status in error else {}),
                }
            }
            for a in actions
        ]
        self._send(200, {"errors": status != 201, "took": 1, "items": items})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@pytest.fixture
def scripted() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Scripted.bulks = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_429_and_5xx_are_retried_with_back_off_then_the_write_goes_through(scripted: str) -> None:
    _Scripted.script = [503, "item429", 502]
    waits: list[float] = []
    spec = ElasticsearchSinkSpec.model_validate(
        {"type": "elasticsearch", "hosts": scripted, "index": "b", "max_retries": 3, "max_backoff_s": 1.5}
    )
    sink = ElasticsearchSink(spec, "d1", sleep=waits.append)
    sink.open()
    assert sink.write(batch([1, 2, 3]), 0) == 3
    assert _Scripted.bulks == [3, 3, 3, 3]  # the whole batch each time (same ids: idempotent)
    assert sink.metrics.retries == 3 and len(waits) == 3
    # back-off: 0.5 s, 1 s, then capped at 1.5 s, each times a jitter of 0.5-1.5
    assert 0.25 <= waits[0] <= 0.75 and 0.5 <= waits[1] <= 1.5 and 0.75 <= waits[2] <= 2.25

    _Scripted.script = [429, 429, 429]
    sink2 = ElasticsearchSink(spec.model_copy(update={"max_retries": 2}), "d1", sleep=lambda s: None)
    sink2.open()
    with pytest.raises(SinkError) as info:
        sink2.write(batch([1]), 1)
    assert info.value.message == (
        f"giving up writing to Elasticsearch at {scripted} after 3 attempts: HTTP 429 "
        "on the bulk write: es_rejected_execution_exception: busy"
    )


def test_a_document_refused_for_good_fails_at_once(scripted: str) -> None:
    _Scripted.script = ["item400"]
    sink = sink_for(scripted, "b", max_retries=5)
    sink.open()
    with pytest.raises(SinkError) as info:
        sink.write(batch([1]), 0)
    doc = document_id(
        "d1", [("window_timestamp", W1), ("tag_city_id", 1), ("tag_s2id", "-7830489120239730688")]
    )
    assert info.value.message == (
        f"Elasticsearch refused document {doc} in index b (HTTP 400): "
        "mapper_parsing_exception: failed to parse field [avg_fare]"
    )
    assert _Scripted.bulks == [1] and sink.metrics.retries == 0


@pytest.mark.integration
def test_an_index_whose_mapping_conflicts_fails_with_elasticsearchs_reason(elasticsearch) -> None:  # type: ignore[no-untyped-def]
    index = f"conflict-{uuid.uuid4().hex[:8]}"
    made = requests.put(
        f"{elasticsearch.url}/{index}",
        timeout=10,
        json={"mappings": {"properties": {"num_of_bookings": {"type": "keyword"}}}},
    )
    assert made.status_code == 200, made.text
    sink = sink_for(elasticsearch.url, index)
    sink.open()
    with pytest.raises(SinkError) as info:
        sink.write(batch([1]), 0)
    assert info.value.message == (
        f"Elasticsearch at {elasticsearch.url} refused adding the mapping to index {index} "
        "(HTTP 400): illegal_argument_exception: mapper [num_of_bookings] cannot be changed "
        "from type [keyword] to [long]"
    )


def test_a_missing_client_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from job.common.optional import MissingDependencyError

    monkeypatch.setitem(sys.modules, "elasticsearch", None)  # what `import elasticsearch` finds uninstalled
    spec = parse_spec(spec_text("b"), "es.yaml")
    with pytest.raises(MissingDependencyError) as info:
        build_sinks(spec.sinks, dagger="es-spec")
    assert info.value.title == "elasticsearch is not installed"
    assert (
        info.value.message
        == "the elasticsearch sink needs the elasticsearch package, from Daggers' elasticsearch extra"
    )
    assert info.value.hint == (
        "install the elasticsearch extra: pip install '.[elasticsearch]' in a Daggers checkout, "
        "or pip install 'daggers-<version>-py3-none-any.whl[elasticsearch]' from a built wheel"
    )


# ---- credentials and TLS -------------------------------------------------------------------


def test_a_clear_api_key_or_password_is_refused_by_the_registry() -> None:
    from job.control.specs import check_no_clear_secrets, raw_spec

    with pytest.raises(SpecError) as info:
        check_no_clear_secrets(raw_spec(spec_text("b", "  api_key: abc\n")))
    assert info.value.message == "sink.api_key: a secret in clear text would be stored in the registry"
    check_no_clear_secrets(raw_spec(spec_text("b", "  api_key: ${ES_KEY}\n")))
    with pytest.raises(SpecError):
        check_no_clear_secrets(raw_spec(spec_text("b", "  username: u\n  password: pw\n")))


def test_basic_auth_and_api_key_go_in_the_header_and_never_in_logs_or_errors(
    scripted: str, caplog: pytest.LogCaptureFixture
) -> None:
    import base64

    _Scripted.script = [401]
    seen: list[str] = []
    original = _Scripted.do_POST

    def record(handler: _Scripted) -> None:
        seen.append(handler.headers.get("Authorization", ""))
        original(handler)

    caplog.set_level(logging.DEBUG)
    _Scripted.do_POST = record  # type: ignore[method-assign]
    try:
        basic = parse_spec(
            spec_text("b", "  username: ${ES_USER}\n  password: ${ES_PASSWORD}\n", scripted),
            "es.yaml",
            env={"ES_USER": "daggers", "ES_PASSWORD": "pw-s3cret"},
        )
        sink = build_sinks(basic.sinks, dagger="es-spec")[0]
        assert isinstance(sink, ElasticsearchSink)
        sink._sleep = lambda s: None
        sink.open()
        with pytest.raises(SinkError) as info:
            sink.write(batch([1]), 0)
        assert info.value.message == (
            f"Elasticsearch at {scripted} refused the bulk write (HTTP 401): "
            "es_rejected_execution_exception: busy"
        )
        keyed = parse_spec(
            spec_text("b", "  api_key: ${ES_KEY}\n", scripted), "es.yaml", env={"ES_KEY": "a2V5LXMzY3JldA=="}
        )
        sink = build_sinks(keyed.sinks, dagger="es-spec")[0]
        sink.open()
        assert sink.write(batch([1]), 0) == 1
    finally:
        _Scripted.do_POST = original  # type: ignore[method-assign]
    assert seen == [f"Basic {base64.b64encode(b'daggers:pw-s3cret').decode()}", "ApiKey a2V5LXMzY3JldA=="]
    assert "pw-s3cret" not in caplog.text and "a2V5LXMzY3JldA==" not in caplog.text


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a server certificate for 127.0.0.1 that it signed (openssl), in a folder."""
    d = tmp_path_factory.mktemp("tls")
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=daggers-test-ca",
        cwd=d,
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
        cwd=d,
    )
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
        cwd=d,
    )
    return d


@contextlib.contextmanager
def tls_in_front_of(port: int, certs: Path) -> Iterator[int]:
    """Serve TLS on a new port and pass the bytes on to 127.0.0.1:``port``; yield the TLS port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")

    class Pipe(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                tls = context.wrap_socket(self.request, server_side=True)
            except (ssl.SSLError, OSError):
                return  # a client that does not trust us hangs up
            with tls, socket.create_connection(("127.0.0.1", port)) as plain:
                pair = {tls: plain, plain: tls}
                while True:
                    ready, _, _ = select.select(list(pair), [], [], 30)
                    if not ready:
                        return
                    for src in ready:
                        data = src.recv(65536)
                        if not data:
                            return
                        pair[src].sendall(data)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Pipe)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.integration
def test_https_with_the_ca_file_writes_and_without_it_fails_clearly(
    elasticsearch, certificates: Path
) -> None:  # type: ignore[no-untyped-def]
    port = int(elasticsearch.url.rsplit(":", 1)[1])
    prefix = f"tls-{uuid.uuid4().hex[:8]}"
    with tls_in_front_of(port, certificates) as tls_port:
        url = f"https://127.0.0.1:{tls_port}"
        sink = sink_for(url, prefix, ca_certs=str(certificates / "ca.pem"))
        sink.open()
        assert sink.write(batch([3, 4]), 0) == 2
        sink.close()
        assert sorted(d["_source"]["num_of_bookings"] for d in search_all(elasticsearch.url, prefix)) == [
            3,
            4,
        ]

        untrusted = sink_for(url, prefix)  # the system's CAs do not know ours
        with pytest.raises(SinkError) as info:
            untrusted.open()
        assert info.value.message == f"Elasticsearch at {url} is unreachable: TlsError"
        unchecked = sink_for(url, prefix, verify_certs=False)
        unchecked.open()
        assert unchecked.write(batch([5]), 1) == 1
    with pytest.raises(SinkError) as info:
        sink_for(url, prefix, ca_certs=str(certificates / "missing.pem")).open()
    assert info.value.message == f"ca_certs {str(certificates / 'missing.pem')!r} is not a file"
