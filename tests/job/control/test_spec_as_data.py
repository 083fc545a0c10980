"""A spec is data to the control plane: checking one reads no environment, file, network or code.

Each test is an attack of issue 49's "What was seen" that worked before (the server's environment read
through an error message, a planted module imported, a path probed, a URL fetched, an alias bomb), now
through the real control plane over a SQLite registry, as a viewer or an editor of team-a.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from job.check.yaml_load import MAX_DEPTH, load_yaml
from job.control import ControlPlane, Registry
from job.control.spec_check import check_spec, served_output_spec, served_spec
from job.errors import SpecError, SqlError
from tests.job.control.control_seed import bookings_spec, seed

SECRET = "pw-7f3a9c1e5b"
CLUSTER = {"DAGGERS_BOOTSTRAP": "127.0.0.1:9", "DAGGERS_INFLUX": "http://127.0.0.1:9"}


@pytest.fixture
def plane(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ControlPlane]]:
    """vera (viewer) and alice (editor) of team-a, on a registry; the process holds a secret variable."""
    monkeypatch.setenv("PGPASSWORD", SECRET)
    monkeypatch.setenv("DAGGERS_REGISTRY", f"postgresql://ops:{SECRET}@127.0.0.1:5432/registry")
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry)
    yield {
        "vera": ControlPlane(registry, "vera"),
        "alice": ControlPlane(registry, "alice"),
        "server": ControlPlane(registry, "vera", serves_clients=True),
    }
    registry.close()


def _with(extra: str, sink: str | None = None) -> str:
    """The seed's bookings spec with top-level ``extra`` lines and, if given, another sink."""
    text = bookings_spec("probe") + extra
    if sink is not None:
        head, _, _ = text.partition("sink:\n")
        text = head + "sink:\n" + sink + extra
    return text


class _Listener:
    """An HTTP server on 127.0.0.1 that records every path asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                listener.paths.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"\x0a\x00")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    server = _Listener()
    yield server
    server.close()


def test_a_reference_is_never_resolved_from_the_servers_environment(plane: dict[str, ControlPlane]) -> None:
    # was: "sinks[0].hosts: '<the password>' is not an http:// or https:// URL (the value comes from ${PGPASSWORD})"
    sink = '  type: elasticsearch\n  hosts: ["${PGPASSWORD}"]\n  index: probe\n'
    v = plane["vera"].validate("a-jkt", _with("", sink))
    assert v.ok and v.deferred == ["the values of ${PGPASSWORD}, which are resolved where the dagger runs"]
    assert SECRET not in repr(v)
    v = plane["vera"].validate(
        "a-jkt", _with("", '  type: elasticsearch\n  hosts: ["${DAGGERS_REGISTRY}x"]\n  index: probe\n')
    )
    assert v.ok and SECRET not in repr(v) and "postgresql://" not in repr(v)
    # a default is a reference too: the server never substitutes it for a variable it does not hold
    v = plane["vera"].validate(
        "a-jkt", _with("", '  type: elasticsearch\n  hosts: ["${NOPE:-not a url}"]\n  index: probe\n')
    )
    assert v.ok, v


def test_the_clusters_own_variables_come_from_the_registry(plane: dict[str, ControlPlane]) -> None:
    v = plane["vera"].validate(
        "a-jkt", _with("", '  type: elasticsearch\n  hosts: ["${DAGGERS_INFLUX}"]\n  index: probe\n')
    )
    assert v.ok and v.deferred == []
    v = plane["vera"].validate(
        "a-jkt", bookings_spec("probe").replace("${DAGGERS_BOOTSTRAP}", "${DAGGERS_INFLUX}/x")
    )
    assert not v.ok and v.message.startswith(
        "spec:7: streams[0].bootstrap_servers: 'http://127.0.0.1:9/x' is not "
    )


def test_udf_file_is_never_imported(plane: dict[str, ControlPlane], tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    module = tmp_path / "evil.py"
    module.write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise RuntimeError('imported')\n")
    text = _with(f"udf_file: {module}\n")
    v = plane["vera"].validate("a-jkt", text)
    assert (
        v.ok
        and v.columns == {}
        and v.deferred == ["the SQL's calls of udf_file's functions, which are loaded where the dagger runs"]
    )
    plane["alice"].create("a-jkt", text)
    assert (
        plane["alice"]
        .check_edit("probe", text.replace("trigger_interval_s: 1", "trigger_interval_s: 2"))
        .resume
    )
    plane["vera"].fusible_with("probe")
    assert not marker.exists()


@pytest.mark.parametrize("field", ["schema_file", "schema_dir", "checkpoint_dir", "dart_store"])
def test_a_path_is_never_read_so_it_answers_nothing_about_the_server(
    plane: dict[str, ControlPlane], field: str
) -> None:
    answers = {
        path: plane["vera"].validate("a-jkt", _with(f"{field}: {path}\n"))
        for path in ("/etc/shadow", "/etc", "/no/such/path")
    }
    assert all(v.ok for v in answers.values()), answers
    assert len({repr(v) for v in answers.values()}) == 1  # the same answer: no existence oracle


@pytest.mark.parametrize("field", ["schema_file", "schema_dir", "dart_store"])
def test_a_path_relative_to_the_spec_file_is_refused(plane: dict[str, ControlPlane], field: str) -> None:
    """The controller runs its own copy of the spec in a folder of its own: a relative path finds nothing there."""
    v = plane["vera"].validate("a-jkt", _with(f"{field}: team/things\n"))
    assert (v.ok, v.title) == (False, "Invalid dagger spec"), v
    line = _with(f"{field}: team/things\n").splitlines().index(f"{field}: team/things") + 1
    assert v.message == (
        f"spec:{line}: {field}: 'team/things' is relative to the spec file, which the dagger's controller does "
        "not run from: it would find no such path"
    )
    home = plane["vera"].validate("a-jkt", _with(f"{field}: ~/things\n"))
    assert (
        not home.ok
        and f"{field}: '~/things' is relative to the spec file ('~' is not expanded)" in home.message
    )
    # absolute, a URL (dart_store) or a host variable: named where the dagger runs
    assert plane["vera"].validate("a-jkt", _with(f"{field}: /opt/team/things\n")).ok
    assert plane["vera"].validate("a-jkt", _with(f"{field}: ${{TEAM_DIR}}/things\n")).ok
    if field == "dart_store":
        assert plane["vera"].validate("a-jkt", _with(f"{field}: file:///opt/darts\n")).ok


def test_schema_url_is_never_fetched(plane: dict[str, ControlPlane], listener: _Listener) -> None:
    v = plane["vera"].validate("a-jkt", _with(f"schema_url: {listener.url}/v/${{PGPASSWORD}}\n"))
    assert (
        v.ok
        and v.deferred[0] == "the SQL against the schema of schema_url, which is read where the dagger runs"
    )
    plane["alice"].create("a-jkt", _with(f"schema_url: {listener.url}/v/x\n"))
    assert listener.paths == []


def test_the_sql_is_still_checked_against_the_servers_schemas(plane: dict[str, ControlPlane]) -> None:
    v = plane["vera"].validate("a-jkt", bookings_spec("probe").replace("count(1)", "count(fare)"))
    assert (v.ok, v.message, v.line, v.col) == (False, "unknown column fare", 2, 14)
    v = plane["vera"].validate(
        "a-jkt",
        bookings_spec("probe").replace("count(1)", "reflect('java.lang.System', 'getenv', 'PGPASSWORD')"),
    )
    assert not v.ok and v.message.startswith("reflect is not available in Dagger SQL")
    ok = plane["vera"].validate("a-jkt", bookings_spec("probe"))
    assert ok.ok and ok.columns == {"data_stream": ["city_id", "status"]}


def test_a_server_previews_only_on_the_clusters_brokers(plane: dict[str, ControlPlane]) -> None:
    checked = check_spec(bookings_spec("probe"), CLUSTER)
    served = served_spec(checked, CLUSTER, "a preview")
    assert served.streams[0].bootstrap_servers == "127.0.0.1:9"
    other = check_spec(bookings_spec("probe").replace("${DAGGERS_BOOTSTRAP}", "127.0.0.1:19092"), CLUSTER)
    with pytest.raises(
        SpecError, match=r"streams\[0\].bootstrap_servers: a preview on the server reads only"
    ):
        served_spec(other, CLUSTER, "a preview")
    with pytest.raises(SpecError, match="cannot resolve"):
        served_spec(
            check_spec(bookings_spec("probe").replace("status = 'COMPLETED'", "status = '${CITY}'"), CLUSTER),
            CLUSTER,
            "a preview",
        )
    risky = check_spec(_with("dart_store: /etc\nspark_conf: {spark.sql.warehouse.dir: /etc}\n"), CLUSTER)
    served = served_spec(risky, CLUSTER, "a preview")
    assert (served.dart_store, served.spark_conf, served.checkpoint_dir) == (None, {}, "")
    with pytest.raises(SpecError, match="the SQL against the schema of schema_url"):
        served_spec(check_spec(_with("schema_url: http://127.0.0.1:9/x\n"), CLUSTER), CLUSTER, "a preview")
    with pytest.raises(SpecError) as info:  # a server's preview never runs a spec-named module
        plane["server"].preview_text("a-jkt", _with("udf_file: /tmp/evil.py\n"))
    assert "udf_file" in info.value.message


def test_a_server_reads_output_only_from_the_clusters_influxdb(
    plane: dict[str, ControlPlane], listener: _Listener
) -> None:
    leak = _with(
        "", f"  type: influx\n  url: {listener.url}/leak/${{PGPASSWORD}}\n  database: d\n  measurement: m\n"
    )
    plane["alice"].create("a-jkt", leak)
    from job.output import OutputQuery

    with pytest.raises(SpecError, match=r"reads only sinks on the cluster's InfluxDB"):
        plane["server"].output("probe", OutputQuery(field="bookings"))
    with pytest.raises(SpecError, match=r"reads only sinks on the cluster's InfluxDB"):
        plane["server"].output_fields("probe")
    assert listener.paths == []
    served = served_output_spec(check_spec(bookings_spec("probe"), CLUSTER), CLUSTER, None)
    assert [s.type for s in served.sinks] == ["influx"]
    pg = _with("", "  type: postgres\n  dsn: host=127.0.0.1 dbname=registry\n  table: api_tokens\n")
    with pytest.raises(SpecError, match="reads only sinks on the cluster's InfluxDB"):
        served_output_spec(check_spec(pg, CLUSTER), CLUSTER, "postgres")


def test_yaml_is_bounded(plane: dict[str, ControlPlane]) -> None:
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
    )
    assert len(bomb) < 400
    v = plane["vera"].validate("a-jkt", bomb)
    assert (v.ok, v.message) == (
        False,
        "spec:2:8: YAML aliases (*name) are not accepted: write the value out",
    )
    deep = "name: " + "[" * 5000 + "]" * 5000 + "\n"
    v = plane["vera"].validate("a-jkt", deep)
    assert (v.ok, v.message) == (False, f"spec:1:{MAX_DEPTH + 6}: nested more than {MAX_DEPTH} levels deep")
    v = plane["vera"].validate("a-jkt", "name: x\x00\n")
    assert (v.ok, v.title) == (False, "Invalid dagger spec") and "unacceptable character #x0000" in v.message
    v = plane["vera"].validate("a-jkt", "sql: '" + "x" * 300_000 + "'\n")
    assert (v.ok, v.message) == (False, "spec: the YAML text is larger than 256 KiB")
    with pytest.raises(SpecError, match="aliases"):
        load_yaml("a: &x 1\nb: *x\n")


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("trigger_interval_s: .nan", "trigger_interval_s"),
        ("trigger_interval_s: .inf", "trigger_interval_s"),
        ("watermark_delay_ms: 1.0e+400", "watermark_delay_ms"),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_field(
    plane: dict[str, ControlPlane], line: str, field: str
) -> None:
    text = (
        bookings_spec("probe")
        .replace("trigger_interval_s: 1\n", "")
        .replace("watermark_delay_ms: 10000\n", line + "\n")
    )
    v = plane["vera"].validate("a-jkt", text)
    assert not v.ok and f": {field}: " in v.message, v


def test_a_name_with_a_trailing_newline_is_refused(plane: dict[str, ControlPlane]) -> None:
    v = plane["vera"].validate("a-jkt", bookings_spec("probe").replace("name: probe", 'name: "probe\\n"'))
    assert not v.ok and v.message.startswith("spec:1: name: "), v


def test_sql_errors_keep_their_position() -> None:
    with pytest.raises(SqlError) as info:
        check_spec(bookings_spec("probe").replace("FROM data_stream", "FROM nowhere"), CLUSTER)
    assert (info.value.line, info.value.col) == (4, 6)


def test_a_line_of_unclosed_references_is_read_in_linear_time(plane: dict[str, ControlPlane]) -> None:
    import time

    text = "name: x\nsql: '" + "${A:-" * 50_000 + "'\n"  # 250 KB: quadratic took ~2 minutes of server CPU
    started = time.process_time()
    v = plane["vera"].validate("a-jkt", text)
    assert not v.ok
    assert time.process_time() - started < 20  # linear: well under a second on a quiet machine


def test_a_script_transform_is_refused_everywhere(plane: dict[str, ControlPlane]) -> None:
    """A viewer's preview ran `TRANSFORM (...) USING 'sh -c ...'` in the server's Spark (an outside audit)."""
    sql = "SELECT TRANSFORM(city_id) USING 'sh -c id' AS (x) FROM data_stream"
    head, _, rest = bookings_spec("probe").partition("sql: |\n")
    text = head + "sql: |\n  " + sql + "\n" + rest[rest.index("watermark_delay_ms") :]
    v = plane["vera"].validate("a-jkt", text)
    assert (v.ok, v.message, v.line, v.col) == (
        False,
        "TRANSFORM ... USING runs a command: it is not available in Dagger SQL",
        1,
        18,
    )
    with pytest.raises(SqlError, match="TRANSFORM"):
        plane["server"].preview_text("a-jkt", text)


def test_a_transformer_condition_is_checked_as_sql(plane: dict[str, ControlPlane]) -> None:
    where = "java_method('java.lang.System', 'getenv', 'PGPASSWORD') IS NOT NULL"
    text = bookings_spec("probe").replace(
        "    start_from: earliest\n",
        f'    start_from: earliest\n    transformers:\n      - {{type: invalid_record_filter, where: "{where}"}}\n',
    )
    v = plane["vera"].validate("a-jkt", text)
    assert not v.ok and "java_method is not available in Dagger SQL" in v.message, v
    assert v.message.startswith("spec:11: streams[0].transformers[0].where: ")


def test_big_or_deep_sql_is_refused_cheaply(plane: dict[str, ControlPlane]) -> None:
    import time

    wide = bookings_spec("probe").replace(
        "WHERE status = 'COMPLETED'", "WHERE " + " OR ".join(["status = 'x'"] * 2000)
    )
    deep = bookings_spec("probe").replace(
        "WHERE status = 'COMPLETED'", "WHERE " + "(" * 3000 + "1=1" + ")" * 3000
    )
    started = time.process_time()
    for text, message in ((wide, "the query is "), (deep, "the query is ")):
        v = plane["vera"].validate("a-jkt", text)
        assert not v.ok and v.message.startswith(message), v
    assert time.process_time() - started < 20  # was 16 s of server CPU for the 2,000 ORs alone


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ("    consumer_config: {sasl.password: !!binary aHVudGVyMg==}\n", "binary"),
        ("    consumer_config: {sasl.mechanism: !!python/object:os.system x}\n", "python/object:os.system"),
    ],
)
def test_yaml_tags_are_refused(plane: dict[str, ControlPlane], value: str, field: str) -> None:
    text = bookings_spec("probe").replace("    start_from: earliest\n", "    start_from: earliest\n" + value)
    v = plane["vera"].validate("a-jkt", text)
    assert not v.ok and f"the YAML tag {field!r} is not accepted" in v.message, v


@pytest.mark.parametrize(
    "extra",
    [
        "spark_conf: {spark.hadoop.fs.azure.account.key.acct.blob.core.windows.net: abc123}\n",
        "spark_conf: {spark.hadoop.fs.azure.sas.c.acct.blob.core.windows.net: 'sv=1&sig=abc'}\n",
    ],
)
def test_secrets_in_settings_named_by_host_are_refused(plane: dict[str, ControlPlane], extra: str) -> None:
    v = plane["vera"].validate("a-jkt", _with(extra))
    assert not v.ok and "a secret in clear text would be stored" in v.message, v


def test_a_header_with_a_literal_value_is_a_secret(plane: dict[str, ControlPlane]) -> None:
    from job.check.secrets import find_clear_secrets

    lookup = {
        "lookups": [
            {"headers": {"X-Auth": "s3cr3tvalue", "Content-Type": "application/json", "X-Key": "${KEY}"}}
        ]
    }
    assert find_clear_secrets(lookup) == ["lookups[0].headers.X-Auth"]
    assert find_clear_secrets({"bootstrap_servers": "SASL_SSL://u:hunter2@127.0.0.1:9092"}) == [
        "bootstrap_servers"
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("watermark_delay_ms: 10000", "watermark_delay_ms: " + "9" * 5000),
            "spec: not valid YAML: Exceeds the limit",
        ),
        (
            ("name: probe\n", "name: probe\nname: other\n"),
            "spec:2:1: the key 'name' is given twice in one mapping",
        ),
        (("group: dagger-probe", 'group: "a\\0b"'), "spec:8:12: a control character"),
        (
            ("WHERE status = 'COMPLETED'", "WHERE " + "lower(" * 400 + "status" + ")" * 400 + " = 'x'"),
            "the query is nested too deep",
        ),
    ],
)
def test_odd_input_is_a_clear_error_not_a_500(
    plane: dict[str, ControlPlane], change: tuple[str, str], message: str
) -> None:
    v = plane["vera"].validate("a-jkt", bookings_spec("probe").replace(*change))
    assert not v.ok and v.message.startswith(message), v


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "WITH `/etc/passwd` AS (SELECT city_id FROM data_stream) SELECT * FROM text.`/etc/passwd`",
            "'/etc/passwd' is not a plain name",
        ),
        (
            "SELECT a.value FROM (SELECT city_id FROM data_stream) AS `/tmp/x` JOIN text.`/tmp/x` AS a ON true",
            "'/tmp/x' is not a plain name",
        ),
        ("SELECT * FROM text.data_stream", "text.data_stream is not one of this dagger's streams"),
        (
            "SELECT * FROM global_temp.data_stream",
            "global_temp.data_stream is not one of this dagger's streams",
        ),
        (
            "SELECT count(x) AS n FROM data_stream LATERAL VIEW explode(sequence(1, 300000000)) t AS x",
            "sequence() of more than 1,000,000 values",
        ),
        ("SELECT repeat('a', 2147483647) AS r FROM data_stream", "repeat() more than 100,000 times"),
    ],
)
def test_a_query_reads_only_its_streams_and_stays_small(sql: str, message: str) -> None:
    """An outside audit read /etc/passwd through a CTE named after the path (Spark reads a file for a
    qualified name it does not know), and filled the preview's heap with one sequence()."""
    head, _, rest = bookings_spec("probe").partition("sql: |\n")
    text = head + "sql: |\n  " + sql + "\n" + rest[rest.index("watermark_delay_ms") :]
    with pytest.raises(SqlError) as info:
        check_spec(text, CLUSTER)
    assert info.value.reason.startswith(message), info.value.reason


def test_a_server_preview_reads_no_dart_store_and_names_escape_none() -> None:
    from job.errors import FunctionError
    from job.functions.dart import DartStore

    sql = "SELECT DartGet('../../tmp/creds.json', 'db_password', 1.0) AS v FROM data_stream"
    head, _, rest = bookings_spec("probe").partition("sql: |\n")
    text = head + "sql: |\n  " + sql + "\n" + rest[rest.index("watermark_delay_ms") :]
    with pytest.raises(SpecError, match="cannot read DartGet"):
        served_spec(check_spec(text, CLUSTER), CLUSTER, "a preview")
    with pytest.raises(FunctionError, match="is not a collection name"):
        DartStore("file:///tmp/store")._entry("dart-get", "../../creds.json", 1.0)


def test_a_condition_reads_no_table() -> None:
    from job.sql.parse import parse_condition

    with pytest.raises(SqlError, match="reads a table or a query"):
        parse_condition("EXISTS (SELECT 1 FROM text.`/etc/passwd`)")
