"""The lookups: enrichment of the SQL's result from outside, before the sinks."""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from job.errors import SpecError
from job.spec.base import IDENT_RE, NAME_RE, REFERENCE_RE, SpecModel, has_reference

#: A response path: ``$`` then ``.name`` or ``[n]`` steps (a subset of JsonPath), or a bare name (``email``).
PATH_RE = re.compile(r"^(?:\$(?:\.[A-Za-z_@][A-Za-z0-9_@\-]*|\[\d+\]|\['[^']+'\])*|[A-Za-z_][A-Za-z0-9_]*)$")
OUTPUT_TYPES = ("string", "long", "double", "boolean", "json")


def parse_path(text: str) -> tuple[str | int, ...]:
    """Return the steps of a response path (``$._source.name`` -> ("_source", "name"); ``email`` ->
    ("email",); ``$.tags[0]`` -> ("tags", 0); ``$`` -> ()). Raises ValueError naming the path when it is
    not one."""
    if not PATH_RE.match(text):
        raise ValueError(
            f"{text!r} is not a response path: write $ then .field or [n] steps "
            "(e.g. $._source.name), or a bare column name"
        )
    if not text.startswith("$"):
        return (text,)
    steps: list[str | int] = []
    for m in re.finditer(r"\.([A-Za-z_@][A-Za-z0-9_@\-]*)|\[(\d+)\]|\['([^']+)'\]", text[1:]):
        name, index, quoted = m.groups()
        steps.append(int(index) if index is not None else name if name is not None else quoted)
    return tuple(steps)


def pattern_fields(pattern: str) -> list[str]:
    """Return the row columns a request pattern names (``/customers/{customer_id}`` -> ["customer_id"]).
    Raises ValueError when the pattern's braces do not parse or a ``{…}`` is not a plain column name."""
    import string

    pattern = REFERENCE_RE.sub("", pattern)  # ${NAME}: a host variable, not a column
    try:
        parts = list(string.Formatter().parse(pattern))
    except ValueError as exc:
        raise ValueError(f"{pattern!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    names: list[str] = []
    for _, name, spec, conv in parts:
        if name is None:
            continue
        if not IDENT_RE.match(name) or spec or conv:
            raise ValueError(f"{pattern!r}: {{{name}}} is not a column name (letters, digits, _)")
        if name not in names:
            names.append(name)
    return names


class OutputColumn(SpecModel):
    """Where a new column's value is in a lookup's response, and its type."""

    path: str = Field(
        description="The value's path in the response: $ then .field or [n] steps (JsonPath subset, "
        "e.g. $._source.name), or a bare name (a PostgreSQL result column)."
    )
    type: Literal["string", "long", "double", "boolean", "json"] = Field(
        default="string",
        description="The column's type. string: text (an object or list becomes its JSON text); json: the JSON text "
        "of any value; long, double, boolean: a value that is not one becomes NULL and is counted "
        "(bad_values).",
    )

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        parse_path(v)
        return v


class _LookupModel(SpecModel):
    """Settings every lookup has."""

    name: str | None = Field(
        default=None,
        description="The lookup's name in errors and status (default: its type, numbered when several share one).",
    )
    fail_on_errors: bool = Field(
        default=False,
        description="A request that times out or fails (after retries): true stops the dagger with an error "
        "naming the lookup; false writes the batch's rows with NULL in this lookup's columns and "
        "counts them (errors, rows_with_errors in status). A key that is not found is never an error: "
        "its columns are NULL (a miss).",
    )
    connect_timeout_s: float = Field(
        default=5.0, gt=0, le=300, description="Seconds to wait for a connection."
    )
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Seconds one request (one batch of keys) may take (upstream's socket/stream timeout).",
    )
    retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Retries of a failed request (0.2 s, then doubling) before it counts as an error.",
    )
    capacity: int = Field(
        default=8, ge=1, le=256, description="Requests in flight at most (upstream's Async I/O capacity)."
    )
    max_keys_per_request: int = Field(
        default=5000,
        ge=1,
        le=100_000,
        description="Distinct keys per request at most (PostgreSQL: per = ANY($1) query; Elasticsearch: per _mget); "
        "more keys go in several requests, up to capacity at once.",
    )
    cache_size: int = Field(
        default=100_000,
        ge=0,
        le=10_000_000,
        description="Keys whose result is kept in memory at most (0: no cache).",
    )
    cache_ttl_s: float = Field(
        default=300.0,
        gt=0,
        description="How long a key's result (found or not found; never an error) is reused before it is asked "
        "again: a change at the source reaches the output within this long.",
    )
    output_mapping: dict[str, OutputColumn] = Field(
        min_length=1,
        description="New column -> where its value is in the response: a path (text, as type string) or "
        "{path, type}. Columns are added after the SQL's, in this order.",
    )

    @field_validator("name")
    @classmethod
    def _lookup_name(cls, v: str | None) -> str | None:
        if v is not None and not NAME_RE.match(v):
            raise ValueError(
                f"{v!r} must be 2-63 lower-case letters, digits or dashes, starting with a letter"
            )
        return v

    @field_validator("output_mapping", mode="before")
    @classmethod
    def _paths_alone(cls, v: Any) -> Any:
        """A path alone (``name: $.x``) is ``{path: $.x}``."""
        return (
            {c: {"path": t} if isinstance(t, str) else t for c, t in v.items()} if isinstance(v, dict) else v
        )

    @field_validator("output_mapping")
    @classmethod
    def _outputs(cls, v: dict[str, OutputColumn]) -> dict[str, OutputColumn]:
        for column in v:
            if not IDENT_RE.match(column):
                raise ValueError(f"{column!r} is not a column name (letters, digits, _)")
        return v

    def outputs(self) -> dict[str, OutputColumn]:
        """Return output_mapping: new column -> its :class:`OutputColumn`."""
        return dict(self.output_mapping)

    def key_columns(self) -> list[str]:
        """Return the row columns a request is built from (the lookup's key), in order."""
        raise NotImplementedError


class PostgresLookup(_LookupModel):
    """Looks rows up in PostgreSQL: one ``query`` a batch with every distinct key in ``$1`` (an array)."""

    type: Literal["postgres"]
    dsn: SecretStr = Field(description="libpq connection URI or key=value string (held as a secret).")
    password: SecretStr | None = Field(
        default=None, description="The password, if not in the dsn (never logged)."
    )
    key: str = Field(
        description="The row column whose values are looked up (the $1 array holds its distinct values)."
    )
    query: str = Field(
        description="A SELECT whose first column is the key it matched, with one $1 for the array of keys, e.g. "
        "SELECT customer_id, email, tier FROM customers WHERE customer_id = ANY($1). Output paths name "
        "its result columns. A key matching several rows takes the first."
    )

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not IDENT_RE.match(v):
            raise ValueError(f"{v!r} is not a column name (letters, digits, _)")
        return v

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        if v.count("$1") != 1:
            raise ValueError(
                "the query must hold $1 (the array of keys) exactly once, e.g. WHERE id = ANY($1)"
            )
        if re.search(r"\$[2-9]", v):
            raise ValueError("the query takes one parameter, $1 (the array of keys)")
        return v

    def key_columns(self) -> list[str]:
        return [self.key]


class ElasticsearchLookup(_LookupModel):
    """Looks documents up by id in Elasticsearch: one ``_mget`` per batch of distinct ids."""

    type: Literal["elasticsearch"]
    hosts: list[str] = Field(min_length=1, description="Node URLs, e.g. http://127.0.0.1:9200.")
    index: str = Field(min_length=1, description="The index the documents are in.")
    id_pattern: str = Field(
        description="The document id, built from the row's columns, e.g. {customer_id} or {country}-{customer_id}."
    )
    username: str | None = Field(default=None, description="Basic auth user name.")
    password: SecretStr | None = Field(default=None, description="Basic auth password (never logged).")
    api_key: SecretStr | None = Field(
        default=None, description="An API key, instead of basic auth (never logged)."
    )
    verify_certs: bool = Field(default=True, description="Check the server's TLS certificate (https hosts).")
    ca_certs: str | None = Field(
        default=None, description="A CA bundle file to check the server's certificate with."
    )

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        for host in v:
            if not has_reference(host) and not re.match(r"^https?://[^/\s]+", host):
                raise ValueError(f"{host!r} is not an http(s):// URL")
        return v

    @field_validator("id_pattern")
    @classmethod
    def _id_pattern(cls, v: str) -> str:
        if not pattern_fields(v):
            raise ValueError(f"{v!r} names no column: write {{column}} where the row's value goes")
        return v

    def key_columns(self) -> list[str]:
        return pattern_fields(self.id_pattern)


class HttpLookup(_LookupModel):
    """Calls an HTTP(S) endpoint once per distinct key, up to ``capacity`` at once; the JSON answer is the response.

    200: found; 404: not found (a miss); anything else, or no answer: an error."""

    type: Literal["http"]
    url: str = Field(
        description="The URL, with {column} where a row's value goes (URL-quoted), e.g. "
        "http://profiles:8080/customers/{customer_id}."
    )
    verb: Literal["GET", "POST", "PUT"] = Field(default="GET", description="The HTTP method.")
    body: dict[str, Any] | None = Field(
        default=None,
        description='POST/PUT: a JSON body; a text value "{column}" becomes the row\'s value (its own type), other '
        "text with {column} in it is filled in.",
    )
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="Request headers (e.g. Authorization; never logged)."
    )
    verify_certs: bool = Field(default=True, description="Check the server's TLS certificate (https URLs).")
    ca_certs: str | None = Field(
        default=None, description="A CA bundle file to check the server's certificate with (https URLs)."
    )

    @field_validator("verb", mode="before")
    @classmethod
    def _verb(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://", v) and not has_reference(v.split("/", 1)[0]):
            raise ValueError(f"{v!r} is not an http(s):// URL")
        pattern_fields(v)
        return v

    @model_validator(mode="after")
    def _request(self) -> HttpLookup:
        if self.body is not None and self.verb == "GET":
            raise ValueError("a GET has no body: use verb POST or PUT, or put the columns in the url")
        if not self.key_columns():
            raise ValueError(
                "neither the url nor the body names a column: write {column} where a row's value goes"
            )
        return self

    def key_columns(self) -> list[str]:
        names = pattern_fields(self.url)
        for text in _body_texts(self.body):
            names += [n for n in pattern_fields(text) if n not in names]
        return names


def _body_texts(value: Any) -> list[str]:
    """Return every text inside a JSON body template (keys' values, nested)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _body_texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _body_texts(v)]
    return []


LookupSpec = Annotated[PostgresLookup | ElasticsearchLookup | HttpLookup, Field(discriminator="type")]
LOOKUP_TYPES = ("elasticsearch", "http")  # "postgres" is a sink type too (SINK_TYPES)


def lookup_names(lookups: list[LookupSpec]) -> list[str]:
    """Return each lookup's name: its ``name``, or its type (``-2``, ``-3`` … for repeats)."""
    used: set[str] = set()
    out = []
    for lookup in lookups:
        base = lookup.name or lookup.type
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        out.append(name)
    return out


def check_lookups(lookups: list[LookupSpec], columns: list[str]) -> None:
    """Check the lookups against the columns the SQL outputs (after the result's transformers): each key column
    must be one of them or an earlier lookup's, and no new column may repeat one.

    Raises SpecError naming the lookup, its field and the column."""
    available = list(columns)
    for i, (lookup, name) in enumerate(zip(lookups, lookup_names(lookups), strict=True)):
        where = f"lookups[{i}] ({name})"
        for column in lookup.key_columns():
            field = {"postgres": "key", "elasticsearch": "id_pattern", "http": "url"}[lookup.type]
            if isinstance(lookup, HttpLookup) and column not in pattern_fields(lookup.url):
                field = "body"
            if column not in available:
                near = difflib.get_close_matches(column, available, n=3, cutoff=0.6)
                raise SpecError(
                    f"{where}.{field}: the SQL does not output column {column!r}; its rows have "
                    f"{', '.join(available) or 'no columns'}",
                    hint=f"did you mean {' or '.join(near)}?" if near else "select the column in the SQL",
                )
        for column in lookup.output_mapping:
            if column in available:
                raise SpecError(
                    f"{where}.output_mapping: column {column!r} is already in the rows",
                    hint="give the new column another name",
                )
            available.append(column)
