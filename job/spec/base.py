"""The spec models' base class, the name rules and the field checks several sections share."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError, model_validator
from pydantic_core import InitErrorDetails

from job.common.names import DAGGER_NAME_RE, IDENTIFIER_RE
from job.common.strict_model import StrictModel
from job.spec.numbers import BOOL_NOT_NUMBER_ERROR, number_kind

NAME_RE = DAGGER_NAME_RE  # \A…\Z: "pg-var\n" is no name
IDENT_RE = IDENTIFIER_RE  # likewise: "bookings\n" is no table


class SpecModel(StrictModel):
    """A section of the dagger spec. A number field takes no ``true`` or ``false`` (pydantic would read 1 or 0)."""

    @model_validator(mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        bad = [
            InitErrorDetails(type=BOOL_NOT_NUMBER_ERROR, loc=(key,), input=value)
            for key, value in data.items()
            if isinstance(value, bool)
            and (field := cls.model_fields.get(key)) is not None
            and number_kind(field.annotation) is not None
        ]
        if bad:
            raise ValidationError.from_exception_data(cls.__name__, bad)
        return data


#: A ``${NAME}`` or ``${NAME:-default}`` reference to a variable of the host the dagger runs on. A default holds
#: no ``$`` (no nested reference): each match then stops at the next ``$``, so a line of 256 KiB of unclosed
#: ``${A:-`` takes linear time, not quadratic.
REFERENCE_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^$}]*))?\}")


def has_reference(value: str) -> bool:
    """Return whether ``value`` holds a ``${NAME}`` reference. After :func:`interpolate_env` none is left,
    so only a spec checked as data (:mod:`job.control.spec_check`) has them: a value with one is checked where the
    dagger runs, once the reference is resolved."""
    return "${" in value and REFERENCE_RE.search(value) is not None


def check_bootstrap(v: str) -> str:
    """Return ``v`` when every comma-separated part is ``host:port`` (or holds a ``${NAME}`` reference);
    raise ValueError naming the bad part."""
    for part in v.split(","):
        if has_reference(part):
            continue
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{part.strip()!r} is not host:port")
    return v


#: librdkafka settings that load a library, run a command or replace the client's own callbacks: a spec's
#: Kafka client settings may not name them (a spec is data; these would make it code, in the dagger's and the
#: controller's processes).
CODE_KAFKA_SETTINGS = frozenset(
    {
        "plugin.library.paths",
        "sasl.kerberos.kinit.cmd",
        "ssl.engine.location",
        "ssl.engine.id",
        "oauthbearer_token_refresh_cb",
        "error_cb",
        "throttle_cb",
        "stats_cb",
        "log_cb",
        "on_delivery",
        "default.topic.config",
        "interceptor",
    }
)


def check_client_settings(v: dict[str, Any]) -> dict[str, Any]:
    """Return ``v`` when it names no setting of :data:`CODE_KAFKA_SETTINGS`; raise ValueError naming one."""
    for key in v:
        if str(key).strip().lower() in CODE_KAFKA_SETTINGS:
            raise ValueError(f"{key!r} loads or runs code: a dagger's Kafka settings may not set it")
    return v


def check_columns(v: list[str] | None) -> list[str] | None:
    """Return ``v`` when its names are plain identifiers without repeats; raise ValueError otherwise."""
    if v is None:
        return v
    for name in v:
        if not IDENT_RE.match(name):
            raise ValueError(f"{name!r} is not a column name (letters, digits, _)")
    if len(set(v)) != len(v):
        raise ValueError(f"a column is named twice in {v}")
    return v
