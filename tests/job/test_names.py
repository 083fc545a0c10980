"""Names match their rule as a whole (job.common.names): ``pg-var\\n`` is no name, wherever a name is checked."""

from __future__ import annotations

import string
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import alerting.rules
import job.spec
from job.common.names import (
    DAGGER_NAME,
    DAGGER_NAME_RE,
    IDENTIFIER_RE,
    REGISTRY_NAME,
    REGISTRY_NAME_RE,
    is_name,
)
from job.control import ControlError, ControlPlane, Registry
from job.control.access import check_name
from job.errors import SpecError
from tests.job.control.control_seed import bookings_spec, seed

LOWER = string.ascii_lowercase


def dagger_rule(name: str) -> bool:
    """The documented rule, read without a regular expression: 2-63 lower-case letters, digits or dashes,
    starting with a letter."""
    return 2 <= len(name) <= 63 and name[0] in LOWER and all(c in LOWER + string.digits + "-" for c in name)


def registry_rule(name: str) -> bool:
    """1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter."""
    return 1 <= len(name) <= 63 and name[0] in LOWER and all(c in LOWER + string.digits + "._-" for c in name)


NEAR = st.text(alphabet=LOWER + string.digits + "-._\n \t\rA", max_size=70)


@given(st.one_of(NEAR, st.text(max_size=70), st.from_regex(DAGGER_NAME, fullmatch=True)))
def test_a_dagger_name_is_accepted_exactly_when_the_rule_says(name: str) -> None:
    assert is_name(name) is dagger_rule(name)
    assert (job.spec.NAME_RE.match(name) is not None) is dagger_rule(name)  # .match as job.spec calls it
    assert (alerting.rules.NAME_RE.match(name) is not None) is dagger_rule(name)


@given(st.one_of(NEAR, st.text(max_size=70), st.from_regex(REGISTRY_NAME, fullmatch=True)))
def test_a_user_team_or_cluster_name_is_accepted_exactly_when_the_rule_says(name: str) -> None:
    assert is_name(name, REGISTRY_NAME_RE) is registry_rule(name)
    if registry_rule(name):
        assert check_name("cluster", name) == name
    else:
        with pytest.raises(ControlError, match="cluster name"):
            check_name("cluster", name)


@given(st.from_regex(DAGGER_NAME, fullmatch=True), st.sampled_from(["\n", "\r\n", " ", "\t", "\x00"]))
def test_a_name_with_anything_after_it_is_refused(name: str, tail: str) -> None:
    assert not is_name(name + tail) and not is_name(name + tail, REGISTRY_NAME_RE)
    with pytest.raises(ControlError):
        check_name("user", name + tail)


def test_one_definition() -> None:
    assert job.spec.NAME_RE is DAGGER_NAME_RE and alerting.rules.NAME_RE is DAGGER_NAME_RE
    assert job.spec.IDENT_RE is IDENTIFIER_RE
    assert not is_name(None) and not is_name(12)


def test_a_table_or_column_with_a_trailing_newline_is_refused() -> None:
    text = (
        "name: pg-out\nstreams:\n  - table: data_stream\n    topics: [booking-log]\n"
        "    proto_class: daggers.events.BookingLog\n    timestamp_field: event_timestamp\n"
        "    bootstrap_servers: 127.0.0.1:9092\n    group: g\nsql: SELECT 1\n"
        'sink:\n  type: postgres\n  dsn: postgresql://u@127.0.0.1:5432/d\n  table: "analytics.bookings\\n"\n'
    )
    with pytest.raises(SpecError, match=r"'analytics.bookings\\n' is not a table name"):
        job.spec.parse_spec(text, "pg-out.yaml")
    assert is_name("bookings_2", IDENTIFIER_RE) and not is_name("bookings\n", IDENTIFIER_RE)


def test_every_user_file_model_shares_one_strict_base() -> None:
    import alerting.config
    import job.chaos.experiment
    from job.common.strict_model import StrictModel

    for model in (
        job.spec.DaggerSpec,
        alerting.config.AlertsConfig,
        alerting.rules.ThresholdRule,
        job.chaos.experiment.Experiment,
    ):
        assert issubclass(model, StrictModel), model
        assert model.model_config["extra"] == "forbid" and model.model_config["allow_inf_nan"] is False


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[tuple[Registry, ControlPlane]]:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    root = seed(registry)
    yield registry, root
    registry.close()


def test_a_dagger_named_with_a_trailing_newline_is_refused(plane: tuple[Registry, ControlPlane]) -> None:
    registry, _ = plane
    alice = ControlPlane(registry, "alice")
    text = bookings_spec("pg-var").replace("name: pg-var\n", 'name: "pg-var\\n"\n', 1)
    with pytest.raises(SpecError) as refused:
        alice.create("a-jkt", text)
    assert refused.value.message == (
        "spec:1: name: 'pg-var\\n' must be 2-63 lower-case letters, digits or dashes, starting with a letter"
    )
    alice.create("a-jkt", bookings_spec("pg-var"))
    with pytest.raises(SpecError, match="name: 'pg-var\\\\n' must be"):
        alice.edit("pg-var", text)
    assert [d.name for d in alice.daggers()] == ["pg-var"]  # one row, not two that look alike


def test_users_teams_and_clusters_with_a_trailing_newline_are_refused(
    plane: tuple[Registry, ControlPlane],
) -> None:
    _, root = plane
    for add, kind in (
        (lambda: root.add_user("ops\n"), "user"),
        (lambda: root.add_team("team-c\n"), "team"),
        (lambda: root.add_datacentre("jkt\n", ""), "data centre"),
        (
            lambda: root.add_cluster(
                "a-jkt\n",
                team="team-a",
                datacentre="jkt",
                spark_master="local[1]",
                kafka_bootstrap="127.0.0.1:9",
                influx_url="http://127.0.0.1:9",
            ),
            "cluster",
        ),
    ):
        with pytest.raises(ControlError) as refused:
            add()
        assert refused.value.message.startswith(f"{kind} name ")
        assert refused.value.message.endswith(
            "must be 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter"
        )
    assert "ops" not in [u["user"] for u in root.users()]
    assert sorted(c.name for c in root.clusters()) == ["a-jkt", "a-sgp", "b-jkt"]
