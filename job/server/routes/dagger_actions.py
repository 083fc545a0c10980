"""What a dagger's editors do to it: deploy, stop, restart, delete, move, edit, roll back, publish, preview."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter

from job.control.errors import ControlError
from job.server.bodies import CheckIn, EditIn, MoveIn, PreviewIn, PublishIn, RollbackIn
from job.server.routes.daggers import D
from job.server.routes.deps import API, Plane, State, ref, spec_ok, table_json

router = APIRouter(prefix=API, tags=["daggers"])


def _desired(action: str) -> Callable[..., dict[str, Any]]:
    def route(team: str, name: str, plane: Plane) -> dict[str, Any]:
        view: dict[str, Any] = getattr(plane, action)(ref(team, name)).to_dict()
        return view

    route.__name__ = action
    route.__doc__ = {
        "deploy": "Run the dagger's current version.",
        "stop": "Stop the dagger gracefully.",
        "restart": "Stop and start the dagger.",
        "delete": "Delete the dagger (team admins).",
    }[action]
    return route


for _action in ("deploy", "stop", "restart"):
    router.post(f"{D}/{_action}")(_desired(_action))
router.delete(D)(_desired("delete"))


@router.post(f"{D}/move")
def move(team: str, name: str, body: MoveIn, plane: Plane) -> dict[str, Any]:
    """Move the dagger to another cluster of its team."""
    return plane.move(ref(team, name), body.cluster, reason=body.reason).to_dict()


@router.post(f"{D}/check-edit")
def check_edit(team: str, name: str, body: CheckIn, plane: Plane, state: State) -> dict[str, Any]:
    """Whether a spec could resume from the dagger's checkpoint (changes nothing)."""
    return plane.check_edit(ref(team, name), spec_ok(state, body.spec)).to_dict()


@router.put(f"{D}/spec")
def edit(team: str, name: str, body: EditIn, plane: Plane, state: State) -> dict[str, Any]:
    """Make a spec the dagger's next version. 409 with ``current_version`` when someone else made a
    version after ``expected_version``."""
    return plane.edit(
        ref(team, name),
        spec_ok(state, body.spec),
        expected_version=body.expected_version,
        allow_fresh_start=body.allow_fresh_start,
        comment=body.comment,
    ).to_dict()


@router.post(f"{D}/rollback")
def rollback(team: str, name: str, body: RollbackIn, plane: Plane) -> dict[str, Any]:
    """Make an earlier version's spec the next version."""
    return plane.rollback(
        ref(team, name), body.to_version, allow_fresh_start=body.allow_fresh_start
    ).to_dict()


@router.post(f"{D}/publish")
def publish(team: str, name: str, body: PublishIn, plane: Plane) -> dict[str, Any]:
    """Publish the dagger's rows to a Kafka topic too (a new version)."""
    return plane.publish_to_kafka(
        ref(team, name),
        body.topic,
        bootstrap_servers=body.bootstrap_servers,
        fmt=body.format,
        proto_class=body.proto_class,
    ).to_dict()


@router.post(f"{D}/preview")
def preview(team: str, name: str, body: PreviewIn, plane: Plane, state: State) -> dict[str, Any]:
    """Run the dagger's SQL over the last minutes of its topics (Spark runs in the server)."""
    if not state.settings.allow_preview:
        raise ControlError("this server does not run previews")
    return table_json(
        plane.preview(
            ref(team, name), minutes=body.minutes, limit=body.limit, spark_factory=state.preview_session
        )
    )
