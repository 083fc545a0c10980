"""The Kafka sink: each result row becomes one record, for applications that react to aggregates.

* **value**: the row as a protobuf message (``format: protobuf``; columns are mapped to the fields of
  ``proto_class`` by name) or as a compact JSON object (``format: json``; timestamps as RFC 3339
  text, NaN and infinities as null, bytes as base64).
* **key**: from ``key_columns`` (default: ``window_timestamp`` and the ``tag_*``/``label_*``
  columns). One column: its text (a timestamp in RFC 3339, a NULL as the empty key); several: a
  compact JSON object of those columns in that order. The same row always gets the same key, hence
  the same partition (Java-compatible murmur2).
* **timestamp**: the row's ``window_timestamp`` in ms when there is one (else the producer's clock).

Delivery: an idempotent producer (``acks=all``, ``enable.idempotence``) retries inside librdkafka
for ``delivery_timeout_ms`` without duplicating; records whose delivery still failed are sent again
up to ``max_retries`` rounds with back-off, and then the batch fails with a SinkError saying how
many records were not delivered and why. No record is dropped silently: a failed batch stops the
query, and Spark runs it again at the next start.

Replay: after a crash Spark may run the last micro-batch again. Kafka has no upsert, so the replayed
batch's records are appended **again** — the same keys, values and timestamps as the first time
(at-least-once). A consumer that keeps the latest value per key (or a compacted topic) sees each
row exactly once; one that counts records sees the replayed rows twice.

Protobuf type mapping (checked by :meth:`KafkaSink.bind`, before any record is sent): integers to
integer fields they fit in (int32 → int32/int64, int64 → int64; unsigned to unsigned), floats and
decimals to double (float32 also to float), bool to bool, strings to string/bytes or to an enum by
value name, binary to bytes, timestamps to ``google.protobuf.Timestamp`` or to an int64 of epoch
milliseconds. A column without a field, a type that does not fit, and repeated or nested fields are
refused naming the column, the field and both types.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import EncodeError, Message

from job.common.words import counted
from job.errors import SchemaError, SinkError
from job.schema.registry import TIMESTAMP, SchemaRegistry, default_registry
from job.sinks.base import TIME_COLUMN, Sink, backoff_s, key_columns
from job.spec import KafkaSinkSpec

log = logging.getLogger("daggers.sink.kafka")
_RDKAFKA_LOG = logging.getLogger("daggers.sink.kafka.librdkafka")
_RDKAFKA_LOG.addHandler(logging.NullHandler())

METADATA_TIMEOUT_S = 10.0

#: Errors another round of sending may fix (librdkafka already retried inside delivery_timeout_ms).
_RETRIABLE_CODES = {
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._PURGE_QUEUE,
    KafkaError._PURGE_INFLIGHT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError._FATAL,
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
    KafkaError.UNKNOWN_PRODUCER_ID,
    KafkaError.INVALID_PRODUCER_EPOCH,
}


def _kafka_text(err: KafkaError) -> str:
    return f"{err.name()}: {err.str()}"


def _retriable(err: KafkaError) -> bool:
    return err.retriable() or err.code() in _RETRIABLE_CODES


# ---- column → value conversion -------------------------------------------------------------------


def _rfc3339(value: dt.datetime) -> str:
    """Return ``value`` as RFC 3339 text (``Z`` for UTC; microseconds only when not zero)."""
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _micros(col: pa.ChunkedArray) -> list[int | None]:
    micros: list[int | None] = col.cast(pa.timestamp("us", tz=col.type.tz)).cast(pa.int64()).to_pylist()
    return micros


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dt.datetime):
        return _rfc3339(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


def _json_column(col: pa.ChunkedArray) -> list[Any]:
    """Return the JSON-ready values of ``col``."""
    t = col.type
    values: list[Any] = col.to_pylist()
    if (
        pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
    ):
        return values
    return [_json_value(v) for v in values]


def _key_text(value: Any) -> str:
    value = _json_value(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_keys(table: pa.Table, columns: Sequence[str]) -> list[bytes | None]:
    """Return the record key of each row: None without key columns, the text of a single column, or a
    compact JSON object of several (in ``columns`` order)."""
    if not columns:
        return [None] * table.num_rows
    if len(columns) == 1:
        return [_key_text(v).encode() for v in table[columns[0]].to_pylist()]
    values = [_json_column(table[c]) for c in columns]
    return [
        json.dumps(dict(zip(columns, row, strict=True)), separators=(",", ":"), ensure_ascii=False).encode()
        for row in zip(*values, strict=True)
    ]


def encode_json(table: pa.Table) -> list[bytes]:
    """Return each row as a compact JSON object (column order kept)."""
    names = table.column_names
    values = [_json_column(table[n]) for n in names]
    return [
        json.dumps(
            dict(zip(names, row, strict=True)), separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
        for row in zip(*values, strict=True)
    ]


# ---- protobuf mapping ----------------------------------------------------------------------------

_INT32 = (FieldDescriptor.CPPTYPE_INT32,)
_INT64 = (FieldDescriptor.CPPTYPE_INT64,)
_UINT32 = (FieldDescriptor.CPPTYPE_UINT32,)
_UINT64 = (FieldDescriptor.CPPTYPE_UINT64,)

_FIELD_TYPE_NAMES: dict[int, str] = {
    v: k.removeprefix("TYPE_").lower() for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")
}


def _field_type(field: FieldDescriptor) -> str:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return f"enum {field.enum_type.full_name}"
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        return str(field.message_type.full_name)
    return _FIELD_TYPE_NAMES.get(field.type, str(field.type))


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED)


Converter = Callable[[pa.ChunkedArray], list[Any]]


def _plain(col: pa.ChunkedArray) -> list[Any]:
    values: list[Any] = col.to_pylist()
    return values


def _to_float(col: pa.ChunkedArray) -> list[Any]:
    return [None if v is None else float(v) for v in col.to_pylist()]


def _to_bytes(col: pa.ChunkedArray) -> list[Any]:
    return [None if v is None else v.encode() for v in col.to_pylist()]


def _to_timestamp(col: pa.ChunkedArray) -> list[Any]:
    out: list[Any] = []
    for us in _micros(col):
        if us is None:
            out.append(None)
        else:
            seconds, rest = divmod(us, 1_000_000)
            out.append((seconds, rest * 1000))
    return out


def _is_message(convert: Converter) -> bool:
    """True for converters that return (seconds, nanos) of a Timestamp field (set after construction)."""
    return convert is _to_timestamp


def _to_epoch_ms(col: pa.ChunkedArray) -> list[Any]:
    return [None if us is None else us // 1000 for us in _micros(col)]


def _to_enum(field: FieldDescriptor, column: str) -> Converter:
    numbers = {v.name: v.number for v in field.enum_type.values}

    def convert(col: pa.ChunkedArray) -> list[Any]:
        out: list[Any] = []
        for v in col.to_pylist():
            if v is None:
                out.append(None)
                continue
            number = numbers.get(v)
            if number is None:
                raise SinkError(
                    f"column {column!r}: {v!r} is not a value of enum {field.enum_type.full_name} "
                    f"(field {field.name!r}); values: {', '.join(numbers)}"
                )
            out.append(number)
        return out

    return convert


def _converter(arrow: pa.DataType, field: FieldDescriptor, column: str) -> Converter | None:
    """Return how to turn a column of type ``arrow`` into values of ``field``, or None when it does not fit."""
    cpp = field.cpp_type
    if pa.types.is_null(arrow):
        return _plain
    if pa.types.is_integer(arrow):
        width, signed = arrow.bit_width, pa.types.is_signed_integer(arrow)
        fits = cpp in _INT32 and (width <= 16 or (signed and width == 32))
        fits = fits or (cpp in _INT64 and (width <= 32 or signed))
        fits = fits or (cpp in _UINT32 and not signed and width <= 32)
        fits = fits or (cpp in _UINT64 and not signed)
        fits = fits or (cpp == FieldDescriptor.CPPTYPE_DOUBLE and width <= 32)
        if cpp == FieldDescriptor.CPPTYPE_ENUM and width <= 32:
            return _plain
        return _plain if fits else None
    if pa.types.is_floating(arrow):
        if cpp == FieldDescriptor.CPPTYPE_DOUBLE or (
            cpp == FieldDescriptor.CPPTYPE_FLOAT and arrow.bit_width <= 32
        ):
            return _to_float
        return None
    if pa.types.is_decimal(arrow):
        return _to_float if cpp == FieldDescriptor.CPPTYPE_DOUBLE else None
    if pa.types.is_boolean(arrow):
        return _plain if cpp == FieldDescriptor.CPPTYPE_BOOL else None
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
        if field.type == FieldDescriptor.TYPE_STRING:
            return _plain
        if field.type == FieldDescriptor.TYPE_BYTES:
            return _to_bytes
        if field.type == FieldDescriptor.TYPE_ENUM:
            return _to_enum(field, column)
        return None
    if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow):
        return _plain if field.type == FieldDescriptor.TYPE_BYTES else None
    if pa.types.is_timestamp(arrow):
        if cpp == FieldDescriptor.CPPTYPE_MESSAGE and field.message_type.full_name == TIMESTAMP:
            return _to_timestamp
        if cpp in _INT64:
            return _to_epoch_ms
        return None
    return None


@dataclass(frozen=True)
class ProtoEncoder:
    """Encodes rows of one output schema as messages of one class (see :func:`proto_encoder`)."""

    message_class: type[Message]
    columns: list[tuple[str, str, Converter]]  # (column, field name, converter)

    def encode(self, table: pa.Table) -> list[bytes]:
        """Return each row of ``table`` serialized; a NULL leaves its field unset.

        Raises SinkError naming the column of a value that does not fit (an unknown enum name).
        """
        scalars = [(f, convert(table[c])) for c, f, convert in self.columns if not _is_message(convert)]
        messages = [(f, convert(table[c])) for c, f, convert in self.columns if _is_message(convert)]
        cls = self.message_class
        out: list[bytes] = []
        try:
            for i in range(table.num_rows):
                msg = cls(**{f: values[i] for f, values in scalars if values[i] is not None})
                for f, values in messages:
                    if values[i] is not None:
                        stamp = getattr(msg, f)  # a Timestamp of the registry's pool: set its parts
                        stamp.seconds, stamp.nanos = values[i]
                out.append(msg.SerializeToString())
        except (ValueError, TypeError, EncodeError) as exc:  # pragma: no cover - bind() rules these out
            raise SinkError(f"cannot encode a row as {cls.DESCRIPTOR.full_name}: {exc}") from None
        return out


def proto_encoder(schema: pa.Schema, descriptor: Descriptor, message_class: type[Message]) -> ProtoEncoder:
    """Return the encoder of rows with ``schema`` into ``descriptor``'s messages.

    Raises SinkError listing every column that has no field, whose type does not fit its field, or
    whose field is repeated or a nested message (other than google.protobuf.Timestamp).
    """
    fields = {f.name: f for f in descriptor.fields}
    problems: list[str] = []
    plan: list[tuple[str, str, Converter]] = []
    for name, arrow in zip(schema.names, schema.types, strict=True):
        field = fields.get(name)
        if field is None:
            problems.append(f"column {name!r} has no field (fields: {', '.join(fields) or 'none'})")
            continue
        if _repeated(field):
            problems.append(
                f"column {name!r}: field {name!r} is repeated; only single-valued fields can take a column"
            )
            continue
        convert = _converter(arrow, field, name)
        if convert is None:
            problems.append(
                f"column {name!r} is {arrow}, which does not fit field {name!r} ({_field_type(field)})"
            )
            continue
        plan.append((name, name, convert))
    if problems:
        raise SinkError(
            f"the query's output does not fit proto_class {descriptor.full_name}: " + "; ".join(problems),
            hint="rename or CAST the columns in the SQL (AS <field>, CAST(x AS INT)), or change the "
            ".proto message",
        )
    return ProtoEncoder(message_class, plan)


# ---- the sink ------------------------------------------------------------------------------------


class _Delivery:
    """Collects the failed deliveries of one round: row index → error."""

    def __init__(self) -> None:
        self.failed: dict[int, KafkaError] = {}

    def callback(self, index: int, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.failed[index] = err


class KafkaSink(Sink):
    """Publishes rows to a Kafka topic (see the module docstring for encoding, keys and replays)."""

    name = "kafka"

    def __init__(
        self,
        spec: KafkaSinkSpec,
        registry: SchemaRegistry | None = None,
        producer_factory: Callable[[dict[str, Any]], Any] = Producer,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__()
        self.spec = spec
        self._registry = registry
        self._producer_factory = producer_factory
        self._sleep = sleep
        self._producer: Any = None
        self._fatal: KafkaError | None = None
        self._descriptor: Descriptor | None = None
        self._message_class: type[Message] | None = None
        self._encoder: ProtoEncoder | None = None
        self._keys: list[str] = []

    @property
    def target(self) -> str:
        return f"topic {self.spec.topic} at {self.spec.bootstrap_servers}"

    def __repr__(self) -> str:
        what = self.spec.proto_class if self.spec.format == "protobuf" else "json"
        return f"KafkaSink({self.spec.bootstrap_servers}, topic={self.spec.topic}, format={what})"

    # ---- open ---------------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.spec.bootstrap_servers,
            "client.id": f"daggers-sink-{self.spec.topic}",
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": self.spec.compression,
            "linger.ms": self.spec.linger_ms,
            "batch.num.messages": self.spec.batch_size,
            "message.timeout.ms": self.spec.delivery_timeout_ms,
            "partitioner": "murmur2_random",
            "error_cb": self._on_error,
            "logger": _RDKAFKA_LOG,
        }
        config.update({k: v.get_secret_value() for k, v in self.spec.producer_config.items()})
        return config

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = err
        log.debug("Kafka producer for %s: %s", self.spec.topic, _kafka_text(err))

    def _new_producer(self) -> Any:
        try:
            return self._producer_factory(self._config())
        except KafkaException as exc:
            raise SinkError(
                f"invalid Kafka producer settings: {exc.args[0].str()}",
                hint="check producer_config on the sink",
            ) from None

    def open(self) -> None:
        """Check the proto class, reach the broker and find (or create) the topic.

        Raises SinkError: unknown proto class, broker unreachable, topic missing (without
        ``create_topic``) or not creatable.
        """
        if self.spec.format == "protobuf":
            name = self.spec.proto_class or ""
            registry = self._registry or default_registry()
            if self._registry is not None and name not in self._registry.message_names():
                registry = default_registry()  # a team's input schema; the output class from protos/
            try:
                self._descriptor = registry.descriptor(name)
                self._message_class = registry.message_class(name)
            except SchemaError as exc:
                raise SinkError(
                    f"proto_class: {exc.message}",
                    hint="add the message to the dagger's schema (its schema_dir or schema_url) or to "
                    "a .proto file under protos/ (e.g. protos/daggers/aggregates/), or fix the "
                    "name",
                ) from None
        self._check_reachable()
        self._producer = self._new_producer()
        self._check_topic()

    def _check_reachable(self) -> None:
        from job.produce.producer import ProduceError, check_reachable

        try:
            check_reachable(self.spec.bootstrap_servers)
        except ProduceError as exc:
            raise SinkError(exc.message, hint=exc.hint) from None

    def _check_topic(self) -> None:
        try:
            # all topics: asking for one by name lets a broker auto-create it
            meta = self._producer.list_topics(timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise SinkError(
                f"cannot read metadata from the Kafka broker at {self.spec.bootstrap_servers}: "
                f"{exc.args[0].str()}"
            ) from None
        topic = meta.topics.get(self.spec.topic)
        if topic is not None and topic.error is None and topic.partitions:
            return
        if not self.spec.create_topic:
            raise SinkError(
                f"topic {self.spec.topic!r} does not exist on {self.spec.bootstrap_servers}",
                hint="create it, or set create_topic: true on the sink",
            )
        from job.produce.producer import ProduceError, ensure_topic

        try:
            ensure_topic(self.spec.bootstrap_servers, self.spec.topic, self.spec.partitions)
        except ProduceError as exc:
            raise SinkError(exc.message, hint=exc.hint) from None

    # ---- bind ---------------------------------------------------------------------------------

    def bind(self, schema: pa.Schema) -> None:
        """Check the key columns and (protobuf) that every column fits a field of the proto class.

        Raises SinkError naming each column that cannot be written.
        """
        names = schema.names
        keys = key_columns(self.spec.key_columns, names)
        if self.spec.format == "protobuf":
            if self._descriptor is None or self._message_class is None:
                raise SinkError("the Kafka sink was not opened before it was bound")
            self._encoder = proto_encoder(schema, self._descriptor, self._message_class)
        self._keys = keys
        super().bind(schema)

    # ---- write --------------------------------------------------------------------------------

    def encode(self, table: pa.Table) -> tuple[list[bytes], list[bytes | None], list[int | None]]:
        """Return (values, keys, timestamps in ms) of the rows of ``table``."""
        if self.spec.format == "protobuf":
            if self._encoder is None:
                raise SinkError("the Kafka sink was not bound to the query's output")
            values = self._encoder.encode(table)
        else:
            values = encode_json(table)
        keys = encode_keys(table, self._keys)
        if TIME_COLUMN in table.column_names and pa.types.is_timestamp(table.schema.field(TIME_COLUMN).type):
            stamps = [None if us is None else us // 1000 for us in _micros(table[TIME_COLUMN])]
        else:
            stamps = [None] * table.num_rows
        return values, keys, stamps

    def _write(self, table: pa.Table, batch_id: int) -> int:
        if table.num_rows == 0:
            return 0
        if self._producer is None:
            raise SinkError("the Kafka sink was not opened")
        values, keys, stamps = self.encode(table)
        pending = list(range(len(values)))
        attempt = 0
        while True:
            failed = self._send_round(pending, values, keys, stamps)
            if not failed:
                return len(values)
            first = failed[min(failed)]
            final = [e for e in failed.values() if not _retriable(e)]
            attempt += 1
            if final or attempt > self.spec.max_retries:
                reason = _kafka_text(final[0] if final else first)
                tried = f"after {attempt} attempt{'s' if attempt > 1 else ''}"
                raise SinkError(
                    f"{len(failed)} of {counted(len(values), 'record')} of batch {batch_id} were not delivered "
                    f"to topic {self.spec.topic!r} {tried}: {reason}",
                    hint=None if final else "is the broker up? the batch runs again at the next start",
                )
            self.metrics.retries += 1
            delay = backoff_s(attempt, self.spec.max_backoff_s)
            log.warning(
                "%d records to %s not delivered (%s); retry %d/%d in %.1fs",
                len(failed),
                self.spec.topic,
                _kafka_text(first),
                attempt,
                self.spec.max_retries,
                delay,
            )
            self._retrying(
                attempt,
                self.spec.max_retries,
                delay,
                f"{len(failed)} records not delivered: {_kafka_text(first)}",
            )
            self._sleep(delay)
            if self._fatal is not None:  # an idempotent producer in a fatal state must be replaced
                log.warning("replacing the Kafka producer after a fatal error: %s", _kafka_text(self._fatal))
                self._fatal = None
                self._producer = self._new_producer()
            pending = sorted(failed)

    def _send_round(
        self, indexes: list[int], values: list[bytes], keys: list[bytes | None], stamps: list[int | None]
    ) -> dict[int, KafkaError]:
        """Send the records at ``indexes`` and wait for every delivery; return the failed ones."""
        producer, topic, delivery = self._producer, self.spec.topic, _Delivery()
        for i in indexes:
            callback = functools.partial(delivery.callback, i)
            while True:
                try:
                    if stamps[i] is None:
                        producer.produce(topic, values[i], keys[i], on_delivery=callback)
                    else:
                        producer.produce(topic, values[i], keys[i], timestamp=stamps[i], on_delivery=callback)
                    break
                except BufferError:  # the local queue is full: let librdkafka send some
                    producer.poll(0.05)
                except KafkaException as exc:  # refused before sending (e.g. larger than message.max.bytes)
                    raise SinkError(
                        f"the record of row {i} cannot be sent to topic {topic!r}: {_kafka_text(exc.args[0])}"
                    ) from None
            producer.poll(0)
        deadline = time.monotonic() + self.spec.delivery_timeout_ms / 1000 + 10
        while len(producer) and time.monotonic() < deadline:
            producer.flush(min(1.0, max(0.0, deadline - time.monotonic())))
        if len(producer):  # librdkafka should have timed them out by now: take them back and send again
            producer.purge(in_queue=True, in_flight=False)
            producer.flush(1.0)
        return delivery.failed

    def close(self) -> None:
        """Deliver what is queued (up to the delivery timeout) and drop the producer."""
        if self._producer is not None:
            self._producer.flush(self.spec.delivery_timeout_ms / 1000)
            self._producer = None
