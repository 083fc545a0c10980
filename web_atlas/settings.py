"""Where the Atlas reads from: the InfluxDB server and database, taken from the environment.

``daggers atlas`` sets these variables for the Streamlit process it starts; the password is only
ever read from the environment (never a command-line argument, which other users could see in
``ps``), held as a secret and sent in an HTTP ``Authorization`` header, never in a URL.

========================== ============================== ==========================
variable                   setting                        default
========================== ============================== ==========================
``DAGGERS_INFLUX``         :attr:`AtlasSettings.influx_url` ``http://127.0.0.1:8086``
``DAGGERS_ATLAS_DB``       :attr:`AtlasSettings.database`   ``daggers``
``DAGGERS_INFLUX_USERNAME`` :attr:`AtlasSettings.username`  (none)
``DAGGERS_INFLUX_PASSWORD`` :attr:`AtlasSettings.password`  (none)
``DAGGERS_ATLAS_REFRESH_S`` :attr:`AtlasSettings.refresh_s` ``10``
``DAGGERS_ATLAS_FLY_MS``   :attr:`AtlasSettings.fly_ms`    ``1200``
========================== ============================== ==========================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from web_atlas.errors import AtlasError

ENV_INFLUX = "DAGGERS_INFLUX"
ENV_DATABASE = "DAGGERS_ATLAS_DB"
ENV_USERNAME = "DAGGERS_INFLUX_USERNAME"
ENV_PASSWORD = "DAGGERS_INFLUX_PASSWORD"
ENV_REFRESH = "DAGGERS_ATLAS_REFRESH_S"
ENV_FLY = "DAGGERS_ATLAS_FLY_MS"

DEFAULT_INFLUX_URL = "http://127.0.0.1:8086"
DEFAULT_DATABASE = "daggers"


class AtlasSettings(BaseModel):
    """The Atlas's connection and refresh settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    influx_url: str = Field(
        default=DEFAULT_INFLUX_URL, description="InfluxDB 1.x base URL (the v1 /query API is used)."
    )
    database: str = Field(default=DEFAULT_DATABASE, min_length=1, description="The database daggers write to.")
    username: str | None = Field(default=None, description="InfluxDB user name, when auth is on.")
    password: SecretStr | None = Field(
        default=None, description="InfluxDB password (from the environment only; never logged or shown)."
    )
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="Seconds an InfluxQL query may take.")
    refresh_s: float = Field(
        default=10.0, ge=1, le=3600, description="Seconds between re-reads when the map follows live data."
    )
    fly_ms: int = Field(
        default=1200, ge=0, le=10_000, description="Milliseconds the map takes to fly to a newly chosen area (0: jump)."
    )
    play_interval_s: float = Field(
        default=1.5, ge=0.2, le=60, description="Seconds each window stays on screen while playing."
    )

    @field_validator("influx_url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL such as http://127.0.0.1:8086")
        if parts.username or parts.password:
            raise ValueError("put the user name and password in DAGGERS_INFLUX_USERNAME/_PASSWORD, not the URL")
        return value.strip().rstrip("/")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AtlasSettings:
        """Return the settings read from ``env`` (default: ``os.environ``); unset variables keep defaults.

        Raises:
            AtlasError: a variable holds a bad value; the message names the variable.
        """
        env = os.environ if env is None else env
        names = {
            "influx_url": ENV_INFLUX, "database": ENV_DATABASE, "username": ENV_USERNAME,
            "password": ENV_PASSWORD, "refresh_s": ENV_REFRESH, "fly_ms": ENV_FLY,
        }
        values = {field: env[var] for field, var in names.items() if env.get(var, "").strip()}
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else "?"
                problems.append(f"{names.get(field, field)}: {error['msg']}")
            raise AtlasError("; ".join(problems), hint="fix the variable, or pass --influx/--db to daggers atlas"
                             ) from None


__all__ = [
    "DEFAULT_DATABASE", "DEFAULT_INFLUX_URL", "ENV_DATABASE", "ENV_FLY", "ENV_INFLUX", "ENV_PASSWORD", "ENV_REFRESH",
    "ENV_USERNAME", "AtlasSettings",
]
