"""A controller's report whose status or sample does not fit the registry (a sample without its dagger, a count
that is no number, a value beyond its column) gets a 422 naming the field, through a real server on PostgreSQL,
and writes nothing; a field this version does not know is still dropped, not refused (a newer controller's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from sqlalchemy import func, select

from job.control.models import DaggerStatus, Sample
from tests.job.control.control_seed import bookings_spec
from tests.job.server.server_world import World, seeded_server

pytestmark = pytest.mark.integration

BAD = "Invalid request"


@pytest.fixture(scope="module")
def world(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, int]]:
    with seeded_server(postgres.dsn, tmp_path_factory.mktemp("server")) as w:
        yield w, w.root.create("a-jkt", bookings_spec("rp"), deploy=True).id


def report(w: World, **body: Any) -> requests.Response:
    return requests.post(
        w.api("/controller/a-jkt/report"),
        json={"host": "gw", "pid": 1, **body},
        headers=w.headers("ctl-a"),
        timeout=30,
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"samples": [{}]}, "samples.0.dagger_id: is required (and 1 more)"),
        ({"samples": [{"dagger_id": "{id}", "at": 1.0, "input_rows": "lots"}]}, "samples.0.input_rows: "),
        (
            {"samples": [{"dagger_id": "{id}", "at": 1.0, "batch_duration_ms": 2**40}]},
            "samples.0.batch_duration_ms: ",
        ),
        ({"samples": [{"dagger_id": "{id}", "at": None}]}, "samples.0.at: "),
        ({"updates": {"{id}": {"restarts": "x"}}}, "updates.{id}.restarts: "),
        ({"updates": {"{id}": {"restarts": None}}}, "updates.{id}.restarts: "),
        ({"updates": {"{id}": {"pid": 2**40}}}, "updates.{id}.pid: "),
        ({"updates": {"{id}": {"actual_state": "x" * 17}}}, "updates.{id}.actual_state: "),
        ({"updates": {"{id}": {"progress": [1]}}}, "updates.{id}.progress: "),
    ],
)
def test_a_report_that_does_not_fit_is_422_naming_the_field(
    world: tuple[World, int], body: dict[str, Any], message: str
) -> None:
    w, dagger_id = world

    def aim(value: Any) -> Any:
        if isinstance(value, dict):
            return {aim(k): aim(v) for k, v in value.items()}
        if isinstance(value, list):
            return [aim(v) for v in value]
        return (
            dagger_id
            if value == "{id}"
            else value.replace("{id}", str(dagger_id))
            if isinstance(value, str)
            else value
        )

    with w.registry.session() as s:
        before = (s.scalar(select(func.count()).select_from(Sample)), s.get(DaggerStatus, dagger_id).restarts)
    r = report(w, **aim(body))
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["title"] == BAD and error["message"].startswith(message.replace("{id}", str(dagger_id))), (
        error
    )
    with w.registry.session() as s:
        assert (
            s.scalar(select(func.count()).select_from(Sample)),
            s.get(DaggerStatus, dagger_id).restarts,
        ) == before


def test_a_newer_controllers_field_is_dropped_and_the_rest_written(world: tuple[World, int]) -> None:
    w, dagger_id = world
    r = report(
        w,
        updates={str(dagger_id): {"restarts": 3, "newer_status_field": 1}},
        samples=[{"dagger_id": dagger_id, "at": 1234.5, "input_rows": 7, "newer_sample_field": "x"}],
    )
    assert r.status_code == 200, r.text
    with w.registry.session() as s:
        assert s.get(DaggerStatus, dagger_id).restarts == 3
        sample = s.scalar(select(Sample).where(Sample.dagger_id == dagger_id, Sample.at == 1234.5))
        assert sample is not None and (sample.input_rows, sample.batch_duration_ms, sample.lag) == (
            7,
            0,
            None,
        )
