"""The API's request bodies (pydantic): names, sizes and enums are checked before any operation runs."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from job.common.names import REGISTRY_NAME_PATTERN
from job.server.plain import check_plain


class Body(BaseModel):
    """A request body: a field the API does not know is an error (a typo is not silently ignored), and no
    field holds a NUL, a non-finite number, an integer beyond 64 bits or deep nesting (job.server.plain)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _plain(cls, data: Any) -> Any:
        return check_plain(data)


Name = Annotated[str, Field(pattern=REGISTRY_NAME_PATTERN, max_length=63)]
#: A process id (the registry keeps it in a 32-bit column).
Pid = Annotated[int, Field(gt=0, le=2**31 - 1)]


class UserIn(Body):
    """A new user."""

    name: Name
    superuser: bool = False


class TeamIn(Body):
    """A new team."""

    name: Name


class MemberIn(Body):
    """A member's role."""

    role: str = Field(pattern="^(viewer|editor|admin)$")


class DatacentreIn(Body):
    """A new data centre."""

    name: Name
    description: str = Field(default="", max_length=1000)


class ClusterIn(Body):
    """A new cluster."""

    name: Name
    team: Name
    datacentre: Name
    spark_master: str = Field(max_length=255)
    kafka_bootstrap: str = Field(max_length=1024)
    influx_url: str = Field(max_length=255)
    spark_ui_url: str | None = Field(default=None, max_length=255)
    description: str = Field(default="", max_length=1000)
    failover_to: Name | None = None


class FailoverIn(Body):
    """A cluster's failover target (None: none)."""

    failover_to: Name | None = None


class SpecIn(Body):
    """A spec text for a cluster (validate, preview)."""

    cluster: Name
    spec: str
    minutes: float = Field(default=5.0, gt=0, le=24 * 60)
    limit: int = Field(default=100, gt=0, le=10_000)


class CreateIn(Body):
    """A new dagger."""

    cluster: Name
    spec: str
    deploy: bool = False
    comment: str = Field(default="", max_length=1000)


class EditIn(Body):
    """A new spec version, from the version the editor started from."""

    spec: str
    expected_version: int = Field(gt=0)
    allow_fresh_start: bool = False
    comment: str = Field(default="", max_length=1000)


class CheckIn(Body):
    """A spec text to compare with the dagger's current one."""

    spec: str


class MoveIn(Body):
    """A move to another cluster."""

    cluster: Name
    reason: str | None = Field(default=None, max_length=1000)


class RollbackIn(Body):
    """A rollback."""

    to_version: int = Field(gt=0)
    allow_fresh_start: bool = False


class PublishIn(Body):
    """A Kafka sink to add."""

    topic: str = Field(max_length=249)
    bootstrap_servers: str | None = Field(default=None, max_length=1024)
    format: str = Field(default="json", pattern="^(json|protobuf)$")
    proto_class: str | None = Field(default=None, max_length=255)


class PreviewIn(Body):
    """How much to preview."""

    minutes: float = Field(default=5.0, gt=0, le=24 * 60)
    limit: int = Field(default=100, gt=0, le=10_000)


class TokenIn(Body):
    """A new token: for a user (personal) or for a cluster's controller; it expires after ``expires_in_s``
    (default and at most the server's maximum, 366 days)."""

    user: Name | None = None
    cluster: Name | None = None
    description: str = Field(default="", max_length=255)
    expires_in_s: float | None = Field(default=None, gt=0)


class ExpireIn(Body):
    """When a token expires (None: now; at most the server's maximum lifetime from now)."""

    at: float | None = None


class OidcLinkIn(Body):
    """An OIDC subject to map to a user (of the server's provider)."""

    subject: str = Field(min_length=1, max_length=255)


class OidcSigninIn(Body):
    """An id token from the server's OIDC provider."""

    id_token: str = Field(min_length=1, max_length=16_384)


class ControllerBody(Body):
    """A cluster controller's body: a field this version does not know (a newer controller's) is ignored, not
    refused, so a controller and a server of different ages interoperate (a person's body refuses one)."""

    model_config = ConfigDict(extra="ignore")


class ClaimIn(ControllerBody):
    """A controller claiming its cluster."""

    host: str = Field(max_length=255)
    pid: Pid
    stale_s: float = Field(gt=0)
    gone: bool = False
    metrics_url: str | None = Field(default=None, max_length=255)


class ReleaseIn(ControllerBody):
    """A controller letting its cluster go."""

    host: str = Field(max_length=255)
    pid: Pid


class FailoverRoundIn(ControllerBody):
    """A controller's failover check. The server decides by its own clock and its ``failover_after_s``;
    ``after_s`` may only make the wait longer, and ``now`` (sent by older controllers) is ignored."""

    after_s: float | None = Field(default=None, gt=0)
    now: float | None = None


#: A dagger's id, and integers as the registry's 32- and 64-bit columns hold them.
DaggerId = Annotated[int, Field(gt=0, le=2**63 - 1)]
Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]


class ReportedBody(ControllerBody):
    """A status or a sample in a controller's report: each field typed as the registry stores it, so a value
    that does not fit is a 422 naming the field. A field this version does not know is passed on (the
    control plane drops it and logs it once: a newer controller's)."""

    model_config = ConfigDict(extra="allow")

    def sent(self) -> dict[str, Any]:
        """The fields the controller sent, and only those."""
        return self.model_dump(exclude_unset=True)


#: A dagger's fields that people set (job.control.models.Dagger), which no controller report may write: one in a
#: report is refused, not dropped as a newer controller's unknown field would be.
PEOPLES_FIELDS = frozenset(
    {"name", "team_id", "cluster_id", "current_version", "desired_state", "restart_generation", "tombstone"}
    | {"moving_from_id", "created_by", "created_at", "dagger_id", "spec_text", "is_superuser"}
)


class StatusIn(ReportedBody):
    """A dagger's status as its controller reports it (job.control.models.DaggerStatus)."""

    @model_validator(mode="after")
    def _no_peoples_fields(self) -> StatusIn:
        """Refuse a field that people set (:data:`PEOPLES_FIELDS`): a controller reports, it never decides."""
        taken = sorted(set(self.model_extra or {}) & PEOPLES_FIELDS)
        if taken:
            raise ValueError(f"{', '.join(taken)}: a controller's report may not set it")
        return self

    actual_state: str = Field(default="created", max_length=16)
    running_version: Int32 | None = None
    running_generation: Int32 | None = None
    checkpoint: str | None = None
    host: str | None = Field(default=None, max_length=255)
    pid: Int32 | None = None
    pid_start_time: Int32 | None = None
    started_at: float | None = None
    stop_requested_at: float | None = None
    restarts: Int32 = 0
    next_restart_at: float | None = None
    last_exit_code: Int32 | None = None
    last_error: str | None = None
    progress: dict[str, Any] | None = None
    lag: Int64 | None = None
    lag_at: float | None = None
    lag_error: str | None = None
    lag_error_at: float | None = None
    lag_unknown: str | None = None
    log_path: str | None = None


class SampleIn(ReportedBody):
    """A dagger's progress sample (job.control.models.Sample)."""

    dagger_id: DaggerId
    at: float
    input_rows: Int64 = 0
    input_rows_per_s: float = 0.0
    processed_rows_per_s: float = 0.0
    batch_duration_ms: Int32 = 0
    lag: Int64 | None = None


class ReportIn(ControllerBody):
    """One controller round: status changes by dagger id, samples, health, hand-overs done. The heartbeat
    is the server's time when the report arrives; ``now`` (sent by older controllers) is ignored."""

    updates: dict[DaggerId, StatusIn] = Field(default={}, max_length=100_000)
    samples: list[SampleIn] = Field(default=[], max_length=100_000)
    health: dict[str, Any] | None = None
    now: float | None = None
    handed: list[DaggerId] = Field(default=[], max_length=100_000)
    host: str = Field(max_length=255)
    pid: Pid
    prune_before: float | None = None
    metrics_url: str | None = Field(default=None, max_length=255)
