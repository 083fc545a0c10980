"""The dagger spec: what a user writes in YAML, validated by pydantic.

Every bad value is reported with the path of its field (``streams[0].topics``) and, when the spec
came from a YAML file, the line it is on. One module per section: :mod:`~job.spec.base` (the models' base
and shared checks), :mod:`~job.spec.transformers`, :mod:`~job.spec.streams`, :mod:`~job.spec.sinks`,
:mod:`~job.spec.lookups`, :mod:`~job.spec.dagger` (the root, :class:`DaggerSpec`) and
:mod:`~job.spec.loading` (YAML, ``${VAR}`` and line numbers); every public name is importable from here.
"""

from job.spec.base import (
    CODE_KAFKA_SETTINGS,
    IDENT_RE,
    NAME_RE,
    REFERENCE_RE,
    SpecModel,
    check_bootstrap,
    check_client_settings,
    check_columns,
    has_reference,
)
from job.spec.dagger import DaggerSpec
from job.spec.loading import format_validation, interpolate_env, load_spec, parse_spec
from job.spec.lookups import (
    LOOKUP_TYPES,
    OUTPUT_TYPES,
    PATH_RE,
    ElasticsearchLookup,
    HttpLookup,
    LookupSpec,
    OutputColumn,
    PostgresLookup,
    check_lookups,
    lookup_names,
    parse_path,
    pattern_fields,
)
from job.spec.sinks import (
    SINK_TYPES,
    ElasticsearchSinkSpec,
    InfluxSinkSpec,
    KafkaSinkSpec,
    LogSinkSpec,
    PostgresSinkSpec,
    SinkSpec,
)
from job.spec.streams import FailoverSpec, StreamSpec
from job.spec.transformers import (
    TRANSFORMER_TYPES,
    DeduplicateTransformer,
    HashTransformer,
    InvalidRecordFilter,
    TransformerSpec,
    transformer_columns,
)

__all__ = [
    "CODE_KAFKA_SETTINGS",
    "IDENT_RE",
    "LOOKUP_TYPES",
    "NAME_RE",
    "OUTPUT_TYPES",
    "PATH_RE",
    "REFERENCE_RE",
    "SINK_TYPES",
    "TRANSFORMER_TYPES",
    "DaggerSpec",
    "DeduplicateTransformer",
    "ElasticsearchLookup",
    "ElasticsearchSinkSpec",
    "FailoverSpec",
    "HashTransformer",
    "HttpLookup",
    "InfluxSinkSpec",
    "InvalidRecordFilter",
    "KafkaSinkSpec",
    "LogSinkSpec",
    "LookupSpec",
    "OutputColumn",
    "PostgresLookup",
    "PostgresSinkSpec",
    "SinkSpec",
    "SpecModel",
    "StreamSpec",
    "TransformerSpec",
    "check_bootstrap",
    "check_client_settings",
    "check_columns",
    "check_lookups",
    "format_validation",
    "has_reference",
    "interpolate_env",
    "load_spec",
    "lookup_names",
    "parse_path",
    "parse_spec",
    "pattern_fields",
    "transformer_columns",
]
