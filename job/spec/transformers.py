"""The transformers: steps on a stream before the SQL, or on the SQL's result."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from job.spec.base import IDENT_RE, SpecModel, check_columns


class DeduplicateTransformer(SpecModel):
    """Drops a record when a record with the same key was kept less than ``ttl_s`` earlier (event time)."""

    type: Literal["deduplicate"]
    keys: list[str] = Field(
        min_length=1, description="The columns whose values together are the record's key."
    )
    ttl_s: int = Field(
        ge=1,
        le=30 * 86400,
        description="How long (seconds of event time) a key is remembered after its first record.",
    )

    @field_validator("keys")
    @classmethod
    def _keys(cls, v: list[str]) -> list[str]:
        return check_columns(v) or v


class InvalidRecordFilter(SpecModel):
    """Drops records that miss a required value, fall outside a range, or fail a condition."""

    type: Literal["invalid_record_filter"]
    required: list[str] = Field(
        default_factory=list, description="Columns that must have a value: not NULL, not '' and not NaN."
    )
    ranges: dict[str, tuple[float | None, float | None]] = Field(
        default_factory=dict, description="Column -> [min, max], both inclusive (null: unbounded)."
    )
    where: str | None = Field(
        default=None,
        validate_default=True,
        description="A Spark SQL condition a valid record satisfies, e.g. \"status <> 'UNKNOWN'\".",
    )

    @field_validator("required")
    @classmethod
    def _required(cls, v: list[str]) -> list[str]:
        return check_columns(v) or v

    @field_validator("ranges")
    @classmethod
    def _ranges(
        cls, v: dict[str, tuple[float | None, float | None]]
    ) -> dict[str, tuple[float | None, float | None]]:
        for name, (low, high) in v.items():
            if not IDENT_RE.match(name):
                raise ValueError(f"{name!r} is not a column name (letters, digits, _)")
            if low is not None and high is not None and low > high:
                raise ValueError(f"{name}: the minimum {low} is above the maximum {high}")
        return v

    @field_validator("where")
    @classmethod
    def _where(cls, v: str | None, info: Any) -> str | None:
        if v is not None:
            from job.errors import SqlError
            from job.sql.parse import parse_condition
            from job.sql.validate import check_functions

            tree = None
            try:
                tree = parse_condition(v)
                check_functions(tree)
            except SqlError as exc:
                where = "" if tree is None else f" (in the condition {v[:200]!r})"
                raise ValueError(f"{exc.reason}{where}") from None
        if v is None and not info.data.get("required") and not info.data.get("ranges"):
            raise ValueError("give at least one of required, ranges or where")
        return v


class HashTransformer(SpecModel):
    """Replaces the values of columns by their SHA-256 (hex), e.g. to mask personal data."""

    type: Literal["hash"]
    columns: list[str] = Field(
        min_length=1, description="The columns to hash (their values become 64 hex digits)."
    )

    @field_validator("columns")
    @classmethod
    def _columns(cls, v: list[str]) -> list[str]:
        return check_columns(v) or v


TransformerSpec = Annotated[
    DeduplicateTransformer | InvalidRecordFilter | HashTransformer, Field(discriminator="type")
]
TRANSFORMER_TYPES = ("deduplicate", "invalid_record_filter", "hash")


def transformer_columns(transformers: list[TransformerSpec]) -> set[str]:
    """Return the columns that ``transformers`` read (a source must decode them even if the SQL does not)."""
    out: set[str] = set()
    for t in transformers:
        if isinstance(t, DeduplicateTransformer):
            out |= set(t.keys)
        elif isinstance(t, HashTransformer):
            out |= set(t.columns)
        else:
            out |= set(t.required) | set(t.ranges)
    return out
