"""Every kind of clear secret, tried through the real control plane (a SQLite registry) and through a real
``daggers server``, is refused naming the field; afterwards the registry (its dump and its file, the spec
versions and the audit log with the refused attempts' entries) and the server's log hold no trace of it."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from job.control import ControlPlane, Registry
from job.control.errors import ControlError
from job.errors import SpecError
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.server.server_world import running_server, seed_tokens

MESSAGE = "a secret in clear text would be stored in the registry"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq{s}\n-----END PRIVATE KEY-----"


def _config(lines: str) -> Callable[[str], str]:
    """Return a spec change that gives the stream a consumer_config of ``lines`` (indented 6)."""
    return lambda text: text.replace(
        "    start_from: earliest\n", f"    start_from: earliest\n    consumer_config:\n{lines}"
    )


#: kind -> (the field named, how the spec is changed to hold secret s).
KINDS: dict[str, tuple[str, Callable[[str, str], str]]] = {
    "default": (
        "sink.password",
        lambda t, s: t + "  username: u\n  password: ${INFLUX_PASSWORD:-" + s + "}\n",
    ),
    "userinfo": ("sink.url", lambda t, s: t.replace("${DAGGERS_INFLUX}", f"http://admin:{s}@127.0.0.1:9")),
    "query": ("sink.url", lambda t, s: t.replace("${DAGGERS_INFLUX}", f"http://127.0.0.1:9/?u=admin&p={s}")),
    "default url": (
        "sink.url",
        lambda t, s: t.replace("${DAGGERS_INFLUX}", "${DAGGERS_INFLUX:-http://admin:" + s + "@127.0.0.1:9}"),
    ),
    "jaas": (
        "streams[0].consumer_config.sasl.jaas.config",
        lambda t, s: _config(
            "      sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="u" password="{s}";\'\n'
        )(t),
    ),
    "pem": (
        "streams[0].consumer_config.ssl.key.pem",
        lambda t, s: _config(
            "      ssl.key.pem: |\n" + "".join(f"        {line}\n" for line in PEM.format(s=s).splitlines())
        )(t),
    ),
    "keystore": (
        "streams[0].consumer_config.ssl.keystore.password",
        lambda t, s: _config(f"      ssl.keystore.password: {s}\n")(t),
    ),
    "bootstrap": (
        "streams[0].bootstrap_servers",
        lambda t, s: t.replace("${DAGGERS_BOOTSTRAP}", f"admin:{s}@127.0.0.1:9092"),
    ),
    "dsn": (
        "sinks[0].dsn",
        lambda t, s: t.replace(
            "sink:\n",
            f"sinks:\n- type: postgres\n  dsn: host=db user=app password={s} dbname=x\n  table: t\n-\n",
        ),
    ),
}
#: cluster field -> the add_cluster arguments holding secret s.
CLUSTER_KINDS: dict[str, Callable[[str], dict[str, str]]] = {
    "influx_url": lambda s: {"influx_url": f"http://admin:{s}@127.0.0.1:8086"},
    "kafka_bootstrap": lambda s: {"kafka_bootstrap": f"127.0.0.1:9092,admin:{s}@127.0.0.1:9093"},
    "spark_ui_url": lambda s: {"spark_ui_url": f"http://127.0.0.1:4040/?token={s}"},
    "spark_master": lambda s: {"spark_master": f"spark://admin:{s}@127.0.0.1:7077"},
}
CLUSTER = {
    "team": "team-a",
    "datacentre": "jkt",
    "spark_master": "local[2]",
    "kafka_bootstrap": "127.0.0.1:9092",
    "influx_url": "http://127.0.0.1:8086",
}


def secret(kind: str) -> str:
    return f"S3cr3t{kind.replace(' ', '').replace('_', '')}{uuid.uuid4().hex[:8]}"


def traces(db: Path, secrets: list[str]) -> list[str]:
    """Return the secrets found in the registry's SQL dump or in the bytes of its files (a journal too)."""
    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
    raw = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))
    return [s for s in secrets if s in dump or s.encode() in raw]


def test_each_kind_of_clear_secret_is_refused_and_leaves_no_trace(tmp_path: Path) -> None:
    db = tmp_path / "registry.db"
    registry = Registry(f"sqlite:///{db}")
    root = seed(registry)
    alice, vera, adam = (ControlPlane(registry, u) for u in ("alice", "vera", "adam"))
    base = alice.create("a-jkt", bookings_spec("base"))
    tried: list[str] = []
    for kind, (field, put) in KINDS.items():
        s = secret(kind)
        tried.append(s)
        with pytest.raises(SpecError) as info:
            alice.create("a-jkt", put(bookings_spec(f"new-{kind.replace(' ', '-')}"), s))
        assert (kind, info.value.message) == (kind, f"{field}: {MESSAGE}")
        with pytest.raises(SpecError) as info:
            alice.edit(base.ref, put(bookings_spec("base"), s), expected_version=1, allow_fresh_start=True)
        assert (kind, info.value.message) == (kind, f"{field}: {MESSAGE}")
        with pytest.raises(SpecError) as info:
            alice.check_edit(base.ref, put(bookings_spec("base"), s))
        assert (kind, info.value.message) == (kind, f"{field}: {MESSAGE}")
        checked = vera.validate("a-jkt", put(bookings_spec("v"), s))
        assert (kind, checked.ok, checked.message) == (kind, False, f"{field}: {MESSAGE}")
    for field, put_cluster in CLUSTER_KINDS.items():
        s = secret(field)
        tried.append(s)
        for who, plane in (("root", root), ("adam", adam)):
            with pytest.raises(ControlError) as cinfo:
                plane.add_cluster(f"c-{who}", **{**CLUSTER, **put_cluster(s)})
            assert (who, cinfo.value.message) == (who, f"cluster {field}: {MESSAGE}")
            assert s not in str(cinfo.value)
    assert [c.name for c in root.clusters()] == ["a-jkt", "b-jkt", "a-sgp"]
    assert alice.dagger(base.ref).current_version == 1
    registry.close()
    assert traces(db, tried) == []


def test_the_server_answers_422_naming_the_field_and_keeps_no_trace(tmp_path: Path) -> None:
    db = tmp_path / "registry.db"
    registry = Registry(f"sqlite:///{db}")
    _, tokens = seed_tokens(registry)
    registry.close()
    log = tmp_path / "server.log"
    tried: list[str] = []
    with running_server(f"sqlite:///{db}", log) as url:

        def post(who: str, path: str, body: dict[str, object]) -> requests.Response:
            return requests.post(
                f"{url}/api/v1{path}",
                json=body,
                timeout=60,
                headers={"Authorization": f"Bearer {tokens[who]}"},
            )

        for kind, (field, put) in KINDS.items():
            s = secret(kind)
            tried.append(s)
            created = post("alice", "/daggers", {"cluster": "a-jkt", "spec": put(bookings_spec("leak"), s)})
            assert (kind, created.status_code, created.json()["error"]["message"]) == (
                kind,
                422,
                f"{field}: {MESSAGE}",
            )
            checked = post("vera", "/validate", {"cluster": "a-jkt", "spec": put(bookings_spec("leak"), s)})
            assert (kind, checked.status_code, checked.json()["ok"], checked.json()["message"]) == (
                kind,
                200,
                False,
                f"{field}: {MESSAGE}",
            )
        for field, put_cluster in CLUSTER_KINDS.items():
            s = secret(field)
            tried.append(s)
            added = post("adam", "/clusters", {"name": "c-new", **CLUSTER, **put_cluster(s)})
            assert (field, added.status_code, added.json()["error"]["message"]) == (
                field,
                422,
                f"cluster {field}: {MESSAGE}",
            )
            assert s not in added.text
    assert traces(db, tried) == []
    assert [s for s in tried if s in log.read_text()] == []
