"""The base of every model read from a user's file: a dagger spec, an alerting configuration, a chaos
experiment. An unknown field is an error (the user hears "did you mean ...?" from the file's reader), a field
may be given by its name or its alias, and NaN or ±Infinity (YAML's ``.nan``, ``.inf``, ``1.0e400``) is never a
setting."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A model of a user's file: no unknown field, name or alias, finite numbers."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)
