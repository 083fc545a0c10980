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
``DAGGERS_ATLAS_BASEMAP``  :attr:`AtlasSettings.basemap`   ``offline``
``DAGGERS_ATLAS_BASEMAP_URL`` :attr:`AtlasSettings.basemap_url` (none)
``DAGGERS_ATLAS_TILE_SIZE`` :attr:`AtlasSettings.tile_size` ``256``
``DAGGERS_ATLAS_ATTRIBUTION`` :attr:`AtlasSettings.attribution` (none)
========================== ============================== ==========================

The base map (:mod:`web_atlas.basemap`) is ``offline`` (Natural Earth land, coastline, borders and
GeoNames place names shipped with Daggers), ``style`` (a MapLibre style URL in ``basemap_url``),
``tiles`` (an XYZ raster tile URL template such as ``https://tiles.example/{z}/{x}/{y}.png``) or
``none``. Vector tiles come with a style: give its URL as ``style``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from job.spec.wording import problem
from web_atlas.basemap import BaseMap, BaseMapKind, base_map
from web_atlas.errors import AtlasError

ENV_INFLUX = "DAGGERS_INFLUX"
ENV_DATABASE = "DAGGERS_ATLAS_DB"
ENV_USERNAME = "DAGGERS_INFLUX_USERNAME"
ENV_PASSWORD = "DAGGERS_INFLUX_PASSWORD"
ENV_REFRESH = "DAGGERS_ATLAS_REFRESH_S"
ENV_FLY = "DAGGERS_ATLAS_FLY_MS"
ENV_BASEMAP = "DAGGERS_ATLAS_BASEMAP"
ENV_BASEMAP_URL = "DAGGERS_ATLAS_BASEMAP_URL"
ENV_TILE_SIZE = "DAGGERS_ATLAS_TILE_SIZE"
ENV_ATTRIBUTION = "DAGGERS_ATLAS_ATTRIBUTION"

DEFAULT_INFLUX_URL = "http://127.0.0.1:8086"
DEFAULT_DATABASE = "daggers"


class AtlasSettings(BaseModel):
    """The Atlas's connection and refresh settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    influx_url: str = Field(
        default=DEFAULT_INFLUX_URL, description="InfluxDB 1.x base URL (the v1 /query API is used)."
    )
    database: str = Field(
        default=DEFAULT_DATABASE, min_length=1, description="The database daggers write to."
    )
    username: str | None = Field(default=None, description="InfluxDB user name, when auth is on.")
    password: SecretStr | None = Field(
        default=None, description="InfluxDB password (from the environment only; never logged or shown)."
    )
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="Seconds an InfluxQL query may take.")
    refresh_s: float = Field(
        default=10.0, ge=1, le=3600, description="Seconds between re-reads when the map follows live data."
    )
    fly_ms: int = Field(
        default=1200,
        ge=0,
        le=10_000,
        description="Milliseconds the map takes to fly to a newly chosen area (0: jump).",
    )
    play_interval_s: float = Field(
        default=1.5, ge=0.2, le=60, description="Seconds each window stays on screen while playing."
    )
    basemap: BaseMapKind = Field(
        default="offline",
        description="What is drawn under the cells: offline (the shipped Natural Earth map), style (a MapLibre "
        "style URL), tiles (an XYZ raster tile URL template) or none (a plain background).",
    )
    basemap_url: str | None = Field(
        default=None,
        description="The MapLibre style URL (basemap=style) or the XYZ tile URL template with {z}, {x} and {y} "
        "(basemap=tiles); http(s), or a path on the Atlas's own server.",
    )
    tile_size: int = Field(default=256, description="Pixel size of the raster tiles (256 or 512).")
    attribution: str = Field(
        default="", description="Credit line of a deployment's base map, shown on the map."
    )

    @field_validator("tile_size")
    @classmethod
    def _tile_size(cls, value: int) -> int:
        if value not in (256, 512):
            raise ValueError(f"{value} is not 256 or 512")
        return value

    @field_validator("basemap_url")
    @classmethod
    def _basemap_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if urlsplit(value).scheme not in ("http", "https") and not value.startswith("/"):
            raise ValueError(f"{value!r} is not an http(s) URL or a path such as /app/static/style.json")
        return value

    @model_validator(mode="after")
    def _basemap_needs_url(self) -> AtlasSettings:
        if self.basemap in ("style", "tiles") and not self.basemap_url:
            raise ValueError(f"basemap={self.basemap} needs {ENV_BASEMAP_URL}")
        if self.basemap == "tiles" and not all(p in (self.basemap_url or "") for p in ("{z}", "{x}", "{y}")):
            raise ValueError("a tile URL needs {z}, {x} and {y} in it")
        return self

    @field_validator("influx_url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL such as http://127.0.0.1:8086")
        if parts.username or parts.password:
            raise ValueError(
                "put the user name and password in DAGGERS_INFLUX_USERNAME/_PASSWORD, not the URL"
            )
        return value.strip().rstrip("/")

    def base_map(self, *, dark: bool) -> BaseMap:
        """Return the configured base map in the light or dark variant."""
        return base_map(
            self.basemap,
            dark=dark,
            url=self.basemap_url,
            tile_size=self.tile_size,
            attribution=self.attribution,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AtlasSettings:
        """Return the settings read from ``env`` (default: ``os.environ``); unset variables keep defaults.

        Raises:
            AtlasError: a variable holds a bad value; the message names the variable.
        """
        env = os.environ if env is None else env
        names = {
            "influx_url": ENV_INFLUX,
            "database": ENV_DATABASE,
            "username": ENV_USERNAME,
            "password": ENV_PASSWORD,
            "refresh_s": ENV_REFRESH,
            "fly_ms": ENV_FLY,
            "basemap": ENV_BASEMAP,
            "basemap_url": ENV_BASEMAP_URL,
            "tile_size": ENV_TILE_SIZE,
            "attribution": ENV_ATTRIBUTION,
        }
        values = {field: env[var] for field, var in names.items() if env.get(var, "").strip()}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else ""
                where = names.get(field, field)
                given = (
                    error["input"] if isinstance(error["input"], str) else None
                )  # as the variable holds it
                message = problem(error, cls.model_fields.get(field), given)
                problems.append(f"{where}: {message}" if where else message)
            raise AtlasError(
                "; ".join(problems), hint="fix the variable, or pass --influx/--db to daggers atlas"
            ) from None


__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_INFLUX_URL",
    "ENV_ATTRIBUTION",
    "ENV_BASEMAP",
    "ENV_BASEMAP_URL",
    "ENV_DATABASE",
    "ENV_FLY",
    "ENV_INFLUX",
    "ENV_PASSWORD",
    "ENV_REFRESH",
    "ENV_TILE_SIZE",
    "ENV_USERNAME",
    "AtlasSettings",
]
