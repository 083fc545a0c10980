"""``/daggers`` and the console's screens: list, create, check and preview daggers, and read one dagger."""

# no "from __future__ import annotations": FastAPI reads the routes' annotations

import hashlib
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from job.control.access import check_name
from job.control.errors import ControlError
from job.server.bodies import CreateIn, SpecIn
from job.server.routes.deps import API, Plane, State, ref, spec_ok, table_json

#: The longest range of a dagger's output a chart reads, in seconds (ten years).
MAX_OUTPUT_S = 3660 * 86_400
#: One dagger's path.
D = "/daggers/{team}/{name}"

router = APIRouter(prefix=API)


@router.get("/daggers", tags=["daggers"])
def daggers(plane: Plane, cluster: str | None = None, search: str | None = None) -> list[dict[str, Any]]:
    """The daggers of your teams (of one cluster; names containing ``search``)."""
    return [d.to_dict() for d in plane.daggers(check_name("cluster", cluster) if cluster else None, search)]


@router.get("/screens/overview", tags=["console"])
def overview(request: Request, plane: Plane) -> Response:
    """Everything the console's main screens show, in one answer: your clusters and daggers. Send the
    last ``ETag`` as ``If-None-Match``: 304 when nothing changed."""
    body = json.dumps(
        {
            "clusters": [c.to_dict() for c in plane.clusters()],
            "daggers": [d.to_dict() for d in plane.daggers()],
        },
        default=str,
    ).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers={"ETag": etag})
    return Response(body, media_type="application/json", headers={"ETag": etag})


@router.post("/daggers", tags=["daggers"], status_code=201)
def create(body: CreateIn, plane: Plane, state: State) -> dict[str, Any]:
    """Create a dagger from a spec (version 1); deploy it at once with ``deploy``."""
    return plane.create(
        body.cluster, spec_ok(state, body.spec), deploy=body.deploy, comment=body.comment
    ).to_dict()


@router.post("/validate", tags=["daggers"])
def validate(body: SpecIn, plane: Plane, state: State) -> dict[str, Any]:
    """Check a spec for a cluster without running it."""
    return plane.validate(body.cluster, spec_ok(state, body.spec)).to_dict()


@router.post("/preview", tags=["daggers"])
def preview_text(body: SpecIn, plane: Plane, state: State) -> dict[str, Any]:
    """Preview a spec that is not a dagger yet (Spark runs in the server)."""
    if not state.settings.allow_preview:
        raise ControlError("this server does not run previews")
    return table_json(
        plane.preview_text(
            body.cluster,
            spec_ok(state, body.spec),
            minutes=body.minutes,
            limit=body.limit,
            spark_factory=state.preview_session,
        )
    )


@router.get(D, tags=["daggers"])
def dagger(team: str, name: str, plane: Plane) -> dict[str, Any]:
    """One dagger (team ``-``: the one of that name in your teams)."""
    return plane.dagger(ref(team, name)).to_dict()


@router.get(f"{D}/screen", tags=["console"])
def dagger_screen(team: str, name: str, plane: Plane, samples: int = 120, audit: int = 50) -> dict[str, Any]:
    """Everything the console's dagger screen shows: the dagger, samples, versions, audit entries."""
    return plane.dagger_screen(
        ref(team, name), max(1, min(samples, 10_000)), max(1, min(audit, 1_000))
    ).to_dict()


@router.get(f"{D}/fusible", tags=["daggers"])
def fusible(team: str, name: str, plane: Plane) -> dict[str, Any]:
    """The dagger's isolation and the daggers it could be one query with."""
    isolation, partners = plane.fusible_with(ref(team, name))
    return {"isolation": isolation, "fusible_with": partners}


@router.get(f"{D}/samples", tags=["daggers"])
def samples(team: str, name: str, plane: Plane, limit: int = 120) -> list[dict[str, Any]]:
    """The dagger's last progress samples, oldest first."""
    return [x.to_dict() for x in plane.samples(ref(team, name), max(1, min(limit, 10_000)))]


@router.get(f"{D}/moves", tags=["daggers"])
def moves(team: str, name: str, plane: Plane) -> list[dict[str, Any]]:
    """The dagger's moves between clusters."""
    return [x.to_dict() for x in plane.moves(ref(team, name))]


@router.get(f"{D}/versions", tags=["daggers"])
def history(team: str, name: str, plane: Plane) -> list[dict[str, Any]]:
    """Every spec version."""
    return [x.to_dict() for x in plane.history(ref(team, name))]


@router.get(f"{D}/versions/{{number}}", tags=["daggers"])
def version(team: str, name: str, number: int, plane: Plane) -> dict[str, Any]:
    """One spec version (0: the current one)."""
    return plane.version(ref(team, name), number or None).to_dict()


@router.get(f"{D}/output", tags=["daggers"])
def output(
    team: str,
    name: str,
    plane: Plane,
    field: str,
    since_s: Annotated[int, Query(le=MAX_OUTPUT_S)] = 900,
    step_s: Annotated[int | None, Query(ge=1, le=MAX_OUTPUT_S)] = None,
    until: str | None = None,
    tag: str | None = None,
    compare: str = "",
    sink: str | None = None,
) -> dict[str, Any]:
    """The dagger's own output read back from its sink: the sum of ``field`` per step, now and the
    periods it compares with (``compare``: ``D-1``, ``D-7`` or both, comma-separated; ``tag``: ``k=v``)."""
    from job.output.model import OutputQuery, parse_compare, parse_iso, parse_tag

    query = OutputQuery(
        field=field,
        since_s=max(1, since_s),
        step_s=step_s,
        until=parse_iso(until) if until else None,
        tag=parse_tag(tag),
        compare=tuple(parse_compare(compare)),
    )
    return plane.output(ref(team, name), query, sink).to_dict()


@router.get(f"{D}/output/fields", tags=["daggers"])
def output_fields(team: str, name: str, plane: Plane, sink: str | None = None) -> dict[str, Any]:
    """The numeric fields the dagger's sink holds (what its output chart may show)."""
    return {"fields": plane.output_fields(ref(team, name), sink)}


@router.get(f"{D}/diff", tags=["daggers"])
def diff(team: str, name: str, plane: Plane, a: int | None = None, b: int | None = None) -> dict[str, Any]:
    """The diff between two spec versions."""
    return {"diff": plane.diff(ref(team, name), a, b)}
