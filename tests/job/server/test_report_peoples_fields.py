"""A controller's report may not write what people set on a dagger (unit: the body model alone)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from job.control.models import Dagger, DaggerStatus
from job.server.bodies import PEOPLES_FIELDS, StatusIn


def test_every_field_people_set_is_listed_and_no_status_field_is() -> None:
    # updated_at: the status row has its own, which the control plane keeps
    assert set(Dagger.__table__.columns.keys()) - {"id", "updated_at"} <= PEOPLES_FIELDS
    assert not (set(DaggerStatus.__table__.columns.keys()) - {"dagger_id"}) & PEOPLES_FIELDS


@pytest.mark.parametrize("field", ["desired_state", "current_version", "tombstone", "team_id"])
def test_a_report_setting_a_peoples_field_is_refused_by_name(field: str) -> None:
    with pytest.raises(ValidationError) as err:
        StatusIn.model_validate({"actual_state": "running", field: "x"})
    assert f"{field}: a controller's report may not set it" in str(err.value)


def test_a_newer_controllers_unknown_field_passes_on() -> None:
    status = StatusIn.model_validate({"actual_state": "running", "lag_forecast": 3})
    assert status.sent() == {"actual_state": "running", "lag_forecast": 3}
