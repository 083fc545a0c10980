"""A team's own schema with no edit of the project: a .proto folder (schema_dir) or a compiled
descriptor set served over HTTP on 127.0.0.1 (schema_url), pinned in the checkpoint at the first
start like the project's protos/; and the errors a team sees for a bad folder or URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from job.errors import SchemaError, SpecError, SqlError
from job.query.plan import pin_schema, plan
from job.schema.compile import compile_descriptor_set
from job.spec import load_spec
from tests.helpers import serve_directory

RIDE = """syntax = "proto3";
package team.rides;

import "google/protobuf/timestamp.proto";
import "team/rides/zone.proto";

message RideLog {
  string ride_id = 1;
  Zone zone = 2;
  google.protobuf.Timestamp event_timestamp = 3;
  int64 fare = 4;
}
"""
ZONE = """syntax = "proto3";
package team.rides;

message Zone { string name = 1; int32 level = 2; }
"""
SPEC = """name: team-rides
streams:
  - table: rides
    bootstrap_servers: 127.0.0.1:9
    topics: [rides]
    group: team-rides
    proto_class: team.rides.RideLog
    timestamp_field: event_timestamp
sql: |
  SELECT ride_id, zone, fare FROM rides
sink: {{type: log}}
checkpoint_dir: {checkpoint}
{schema}
"""


def team_folder(root: Path, with_fare: bool = True) -> Path:
    (root / "team" / "rides").mkdir(parents=True, exist_ok=True)
    (root / "team" / "rides" / "ride.proto").write_text(
        RIDE if with_fare else RIDE.replace("  int64 fare = 4;\n", "")
    )
    (root / "team" / "rides" / "zone.proto").write_text(ZONE)
    return root


def write_spec(folder: Path, schema: str, checkpoint: Path) -> Path:
    path = folder / "rides.yaml"
    path.write_text(SPEC.format(schema=schema, checkpoint=checkpoint))
    return path


def test_a_team_folder_relative_to_the_spec_is_compiled_then_pinned(tmp_path: Path) -> None:
    team_folder(tmp_path / "team-protos")
    spec = load_spec(write_spec(tmp_path, "schema_dir: team-protos", tmp_path / "ckpt"))
    assert spec.schema_dir == str(tmp_path / "team-protos")
    first = plan(spec, tmp_path)
    assert first.translation.columns == {"rides": ["fare", "ride_id", "zone"]}
    pin_schema(first)
    # the team changes its folder: the running dagger keeps the version it started with
    team_folder(tmp_path / "team-protos", with_fare=False)
    assert plan(spec, tmp_path).translation.columns == {"rides": ["fare", "ride_id", "zone"]}
    # a new dagger (fresh checkpoint) gets the new version, which has no fare
    fresh = load_spec(write_spec(tmp_path, "schema_dir: team-protos", tmp_path / "ckpt2"))
    with pytest.raises(SqlError, match="unknown column fare"):
        plan(fresh, tmp_path)


def test_a_descriptor_set_served_over_http_is_fetched_then_pinned(tmp_path: Path) -> None:
    served = tmp_path / "registry"
    served.mkdir()
    (served / "rides-v1.pb").write_bytes(
        compile_descriptor_set(team_folder(tmp_path / "v1"), tmp_path / "out")
    )
    with serve_directory(served) as (url, requests):
        spec = load_spec(write_spec(tmp_path, f"schema_url: {url}/rides-v1.pb", tmp_path / "ckpt"))
        first = plan(spec, tmp_path)
        assert first.translation.columns == {"rides": ["fare", "ride_id", "zone"]}
        pinned = pin_schema(first)
        assert requests == ["/rides-v1.pb"]
        # the registry serves another version under the same name: the dagger keeps its pinned one
        (served / "rides-v1.pb").write_bytes(
            compile_descriptor_set(team_folder(tmp_path / "v2", with_fare=False), tmp_path / "out")
        )
        assert plan(spec, tmp_path).translation.columns == {"rides": ["fare", "ride_id", "zone"]}
        assert requests == ["/rides-v1.pb"]  # a pinned dagger does not even read the URL
        assert pinned.read_bytes() == compile_descriptor_set(tmp_path / "v1", tmp_path / "out")
        fresh = load_spec(write_spec(tmp_path, f"schema_url: {url}/rides-v1.pb", tmp_path / "ckpt2"))
        with pytest.raises(SqlError, match="unknown column fare"):
            plan(fresh, tmp_path)
        missing = load_spec(write_spec(tmp_path, f"schema_url: {url}/nope.pb", tmp_path / "ckpt3"))
        with pytest.raises(
            SchemaError, match=r"schema_url: cannot read http://127\.0\.0\.1:\d+/nope\.pb: .*404"
        ):
            plan(missing, tmp_path)
        (served / "junk.pb").write_bytes(b"\xff\x00 not a descriptor set")
        junk = load_spec(write_spec(tmp_path, f"schema_url: {url}/junk.pb", tmp_path / "ckpt4"))
        with pytest.raises(SchemaError, match="junk.pb is not a compiled FileDescriptorSet"):
            plan(junk, tmp_path)


def test_a_bad_team_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="schema_dir .*nowhere is not a folder"):
        plan(load_spec(write_spec(tmp_path, "schema_dir: nowhere", tmp_path / "ckpt")), tmp_path)
    root = team_folder(tmp_path / "broken")
    (root / "team" / "rides" / "zone.proto").write_text(ZONE.replace("int32 level = 2;", "int32 level = 2"))
    with pytest.raises(SchemaError, match=r"zone.proto:4:\d+"):  # protoc's file, line and column
        plan(load_spec(write_spec(tmp_path, "schema_dir: broken", tmp_path / "ckpt")), tmp_path)
    with pytest.raises(SpecError, match="name one schema source, not schema_dir and schema_url"):
        load_spec(
            write_spec(tmp_path, "schema_dir: broken\nschema_url: http://127.0.0.1:9/x.pb", tmp_path / "c")
        )


def test_protos_build_compiles_a_team_folder_to_serve(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from job.cli import app
    from job.schema.registry import SchemaRegistry

    out = tmp_path / "rides.pb"
    result = CliRunner().invoke(
        app, ["protos", "build", "--root", str(team_folder(tmp_path / "p")), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "serve it for schema_url:" in result.output
    assert "team.rides.RideLog" in SchemaRegistry(out.read_bytes()).message_names()


def test_protos_build_takes_a_folder_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """protoc runs inside the folder: a relative --root (and a relative cache) used to be looked up from there
    and not found ("directory does not exist"); the docs' `protos build --root tests/job/sql/protos` found it."""
    from typer.testing import CliRunner

    from job.cli import app
    from job.schema.registry import SchemaRegistry

    team_folder(tmp_path / "p")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["protos", "build", "--root", "p", "--out", "rides.pb"])
    assert result.exit_code == 0, result.output
    assert SchemaRegistry((tmp_path / "rides.pb").read_bytes()).message_names() == [
        "team.rides.RideLog",
        "team.rides.Zone",
    ]
    data = compile_descriptor_set(Path("p"), Path("cache"))
    assert (tmp_path / "cache").is_dir() and data == (tmp_path / "rides.pb").read_bytes()
