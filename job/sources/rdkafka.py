"""A Kafka consumer that hands what it fetched over as one byte buffer, without a Python object per record.

confluent-kafka's ``Consumer.consume()`` builds a ``Message`` object per record (its value, key and topic
as new Python objects), and the reader then calls a few methods on each: on workload (a) that was over
half of a source worker's CPU (py-spy), more than decoding, the S2 cell and the sort together. This
module drives the same librdkafka (the copy confluent-kafka ships) through its C API with ``ctypes``, and
a numba-compiled loop copies a batch's values into one buffer and frees the messages: per batch, a few
numpy arrays (offsets, error codes, where each value starts and ends) and one Python call.

librdkafka still does all the protocol work, exactly as under confluent-kafka: fetching, decompression,
reconnects, the same configuration properties. Its log lines and client-wide errors are served on the
reading thread, inside :meth:`BatchConsumer.consume`, as confluent-kafka serves them.

The C structure read here is ``rd_kafka_message_t`` (``rdkafka.h``), whose layout is part of librdkafka's
stable ABI: ``err`` (int), ``rkt``, ``partition`` (int32), ``payload``, ``len``, ``key``, ``key_len``,
``offset`` (int64), ``_private``; nine 8-byte words on a 64-bit machine.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from confluent_kafka import TopicPartition
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, types
from numba.extending import intrinsic

#: librdkafka's error codes the reader tells apart (``rd_kafka_resp_err_t``).
ERR_PARTITION_EOF = -191
ERR_AUTO_OFFSET_RESET = -140
ERR_TRANSPORT = -195
ERR_ALL_BROKERS_DOWN = -187
ERR_TIMED_OUT = -185
TRANSIENT = frozenset({ERR_TRANSPORT, ERR_ALL_BROKERS_DOWN, ERR_TIMED_OUT})

_CONSUMER = 1  # RD_KAFKA_CONSUMER
_WORDS = 9  # rd_kafka_message_t in 8-byte words
_W_ERR, _W_PAYLOAD, _W_LEN, _W_KEY, _W_KEY_LEN, _W_OFFSET = 0, 3, 4, 5, 6, 7

_LOG_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
_ERROR_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class RdkafkaError(Exception):
    """librdkafka refused a configuration property, or could not make a client."""


# --------------------------------------------------------------------------- the compiled loop


def _load_word_typing(typingctx: Any, addr: Any) -> Any:
    """The 8-byte word at address ``addr``."""
    sig = types.int64(types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()))

    return sig, codegen


_load_word: Any = intrinsic(_load_word_typing)


def _copy_bytes_typing(typingctx: Any, dst: Any, src: Any, n: Any) -> Any:
    """memcpy(dst, src, n) on addresses."""
    sig = types.void(types.int64, types.int64, types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        byte_ptr = ir.IntType(8).as_pointer()
        d = builder.inttoptr(args[0], byte_ptr)
        s = builder.inttoptr(args[1], byte_ptr)
        fn = builder.module.declare_intrinsic("llvm.memcpy", [byte_ptr, byte_ptr, ir.IntType(64)])
        builder.call(fn, [d, s, args[2], ir.Constant(ir.IntType(1), 0)])
        return context.get_dummy_value()

    return sig, codegen


_copy_bytes: Any = intrinsic(_copy_bytes_typing)


def _call_with_pointer_typing(typingctx: Any, fn: Any, arg: Any) -> Any:
    """Call the C function ``void fn(void *arg)`` at address ``fn``."""
    sig = types.void(types.int64, types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        byte_ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        builder.call(f, [builder.inttoptr(args[1], byte_ptr)])
        return context.get_dummy_value()

    return sig, codegen


_call_with_pointer: Any = intrinsic(_call_with_pointer_typing)


def _call_timestamp_typing(typingctx: Any, fn: Any, msg: Any, kind: Any) -> Any:
    """Call ``int64_t rd_kafka_message_timestamp(const rd_kafka_message_t *msg, int *kind)`` at address ``fn``."""
    sig = types.int64(types.int64, types.int64, types.int64)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        byte_ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(64), [byte_ptr, ir.IntType(32).as_pointer()])
        f = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.call(
            f, [builder.inttoptr(args[1], byte_ptr), builder.inttoptr(args[2], ir.IntType(32).as_pointer())]
        )

    return sig, codegen


_call_timestamp: Any = intrinsic(_call_timestamp_typing)


@njit(cache=True, nogil=True)
def _sizes(ptrs: np.ndarray, n: int, lens: np.ndarray) -> int:  # pragma: no cover - compiled
    total = 0
    for i in range(n):
        size = _load_word(ptrs[i] + 8 * _W_LEN)
        lens[i] = size
        total += size
    return total


@njit(cache=True, nogil=True)
def _drain(
    ptrs: np.ndarray,
    n: int,
    buf: np.ndarray,
    ends: np.ndarray,
    offsets: np.ndarray,
    errs: np.ndarray,
    nulls: np.ndarray,
    timestamps: np.ndarray,
    kind: np.ndarray,
    destroy: int,
    timestamp: int,
    keys: np.ndarray,
    key_ends: np.ndarray,
    key_nulls: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Copy each message's value (or error text) into ``buf`` back to back and free the message; note its
    offset, error code, end in ``buf``, whether its value is NULL and its timestamp; and, when ``key_ends``
    has a place for each message, its key into ``keys`` and whether it is NULL."""
    at = 0
    key_at = 0
    base = buf.ctypes.data
    kind_at = kind.ctypes.data
    with_keys = len(key_ends) >= n
    for i in range(n):
        msg = ptrs[i]
        errs[i] = np.int32(_load_word(msg + 8 * _W_ERR) & 0xFFFFFFFF)
        offsets[i] = _load_word(msg + 8 * _W_OFFSET)
        payload = _load_word(msg + 8 * _W_PAYLOAD)
        size = _load_word(msg + 8 * _W_LEN)
        nulls[i] = payload == 0
        if payload != 0 and size > 0:
            _copy_bytes(base + at, payload, size)
        at += size
        ends[i] = at
        timestamps[i] = _call_timestamp(timestamp, msg, kind_at)
        if with_keys:
            key = _load_word(msg + 8 * _W_KEY)
            key_len = _load_word(msg + 8 * _W_KEY_LEN)
            key_nulls[i] = key == 0
            if key != 0 and key_len > 0:
                _copy_bytes(keys.ctypes.data + key_at, key, key_len)
                key_at += key_len
            key_ends[i] = key_at
        _call_with_pointer(destroy, msg)


@njit(cache=True, nogil=True)
def _key_sizes(ptrs: np.ndarray, n: int) -> int:  # pragma: no cover - compiled
    total = 0
    for i in range(n):
        if _load_word(ptrs[i] + 8 * _W_KEY) != 0:
            total += _load_word(ptrs[i] + 8 * _W_KEY_LEN)
    return total


# --------------------------------------------------------------------------- the library


def _library_path() -> str:
    """The librdkafka that confluent-kafka was built with: its wheel's copy, else the system's."""
    import confluent_kafka

    here = os.path.dirname(os.path.dirname(os.path.abspath(confluent_kafka.__file__)))
    found = sorted(glob.glob(os.path.join(here, "confluent_kafka.libs", "librdkafka*.so*")))
    if found:
        return found[0]
    import ctypes.util

    return ctypes.util.find_library("rdkafka") or "librdkafka.so.1"


_LIB: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL(_library_path())
        p, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
        for name, res, args in (
            ("rd_kafka_conf_new", p, []),
            ("rd_kafka_conf_destroy", None, [p]),
            ("rd_kafka_conf_set", i, [p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, sz]),
            ("rd_kafka_conf_set_log_cb", None, [p, _LOG_CB]),
            ("rd_kafka_conf_set_error_cb", None, [p, _ERROR_CB]),
            ("rd_kafka_new", p, [i, p, ctypes.c_char_p, sz]),
            ("rd_kafka_set_log_queue", i, [p, p]),
            ("rd_kafka_poll_set_consumer", i, [p]),
            ("rd_kafka_queue_get_consumer", p, [p]),
            ("rd_kafka_queue_destroy", None, [p]),
            ("rd_kafka_consume_batch_queue", ctypes.c_ssize_t, [p, i, p, sz]),
            ("rd_kafka_topic_partition_list_new", p, [i]),
            ("rd_kafka_topic_partition_list_add", p, [p, ctypes.c_char_p, ctypes.c_int32]),
            (
                "rd_kafka_topic_partition_list_set_offset",
                i,
                [p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64],
            ),
            ("rd_kafka_topic_partition_list_destroy", None, [p]),
            ("rd_kafka_assign", i, [p, p]),
            ("rd_kafka_consumer_close", i, [p]),
            ("rd_kafka_destroy", None, [p]),
            ("rd_kafka_message_destroy", None, [p]),
            ("rd_kafka_message_timestamp", ctypes.c_int64, [p, p]),
            ("rd_kafka_err2str", ctypes.c_char_p, [i]),
        ):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        _LIB = lib
    return _LIB


def _address(fn: Any) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def error_text(code: int) -> str:
    """librdkafka's description of an error code."""
    return (_lib().rd_kafka_err2str(code) or b"").decode(errors="replace")


@dataclass
class Fetched:
    """What one :meth:`BatchConsumer.consume` returned: per message its offset, error code (0 for a record),
    timestamp (ms; -1 when none) and whether its value is NULL; the values back to back in ``buf``, message
    ``i``'s from ``ends[i - 1]`` (0 for the first) to ``ends[i]``. For a message with an error code, those
    bytes are librdkafka's text of the error. With keys, ``keys`` and ``key_ends`` hold them the same way."""

    buf: np.ndarray
    ends: np.ndarray
    offsets: np.ndarray
    errs: np.ndarray
    nulls: np.ndarray
    timestamps: np.ndarray
    keys: np.ndarray | None = None  # with_keys: the keys back to back, message i's up to key_ends[i]
    key_ends: np.ndarray | None = None
    key_nulls: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def starts(self) -> np.ndarray:
        out = np.empty_like(self.ends)
        if len(out):
            out[0] = 0
            out[1:] = self.ends[:-1]
        return out

    def value(self, i: int) -> bytes | None:
        """Message ``i``'s value (None when NULL), or its error text."""
        if self.nulls[i]:
            return None
        start = int(self.ends[i - 1]) if i else 0
        return self.buf[start : int(self.ends[i])].tobytes()

    def key(self, i: int) -> bytes | None:
        """Message ``i``'s key (None when NULL, or when consumed without keys)."""
        if self.keys is None or self.key_ends is None or self.key_nulls is None or self.key_nulls[i]:
            return None
        start = int(self.key_ends[i - 1]) if i else 0
        return self.keys[start : int(self.key_ends[i])].tobytes()


_WARM = False


def warm() -> None:
    """Load (or compile) the compiled loops now, once per process: their first call takes a second or two
    (numba's start), which a read must not count as a broker that stopped answering."""
    global _WARM
    if not _WARM:
        none, no_bytes = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8)
        _sizes(none, 0, none)
        _key_sizes(none, 0)
        no_flags = np.zeros(0, dtype=np.bool_)
        _drain(
            none,
            0,
            no_bytes,
            none,
            none,
            np.zeros(0, np.int32),
            no_flags,
            none,
            np.zeros(1, np.int32),
            0,
            0,
            no_bytes,
            none,
            no_flags,
        )
        _WARM = True


class BatchConsumer:
    """A librdkafka consumer of explicitly assigned partitions (no group subscription) whose
    :meth:`consume` returns a :class:`Fetched`.

    ``config``: librdkafka properties (values as confluent-kafka takes them: str, int, float or bool).
    ``log(level, text)`` gets librdkafka's log lines (at ``log_level`` and below) and ``error(code, text)``
    its client-wide errors; both are called on the thread that calls :meth:`consume`. Raises
    RdkafkaError for a property librdkafka refuses."""

    def __init__(
        self,
        config: dict[str, Any],
        log: Callable[[int, str], None] | None = None,
        error: Callable[[int, str], None] | None = None,
    ) -> None:
        warm()
        lib = _lib()
        self._lib = lib
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        # log lines wait on a queue that consume() serves, not called from librdkafka's own threads
        for key, value in {**config, "log.queue": True}.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            if lib.rd_kafka_conf_set(conf, key.encode(), text.encode(), errstr, len(errstr)) != 0:
                lib.rd_kafka_conf_destroy(conf)
                raise RdkafkaError(f"{key}: {errstr.value.decode(errors='replace')}")

        # the callbacks must outlive the client: kept on the object
        def on_log(rk: Any, level: int, fac: bytes | None, buf: bytes | None) -> None:
            if log is not None:
                log(level, f"{(fac or b'').decode(errors='replace')} {(buf or b'').decode(errors='replace')}")

        def on_error(rk: Any, code: int, reason: bytes | None, opaque: Any) -> None:
            if error is not None:
                error(code, (reason or b"").decode(errors="replace"))

        self._log_cb, self._error_cb = _LOG_CB(on_log), _ERROR_CB(on_error)
        lib.rd_kafka_conf_set_log_cb(conf, self._log_cb)
        lib.rd_kafka_conf_set_error_cb(conf, self._error_cb)
        rk = lib.rd_kafka_new(_CONSUMER, conf, errstr, len(errstr))  # owns conf from here on
        if not rk:
            lib.rd_kafka_conf_destroy(conf)
            raise RdkafkaError(f"cannot make a Kafka client: {errstr.value.decode(errors='replace')}")
        self._rk = rk
        lib.rd_kafka_set_log_queue(rk, None)  # log lines to the main queue,
        lib.rd_kafka_poll_set_consumer(rk)  # and that to the consumer's: served in consume()
        self._queue = lib.rd_kafka_queue_get_consumer(rk)
        self._ptrs = np.zeros(0, dtype=np.int64)
        self._kind = np.zeros(1, dtype=np.int32)
        self._destroy = _address(lib.rd_kafka_message_destroy)
        self._timestamp = _address(lib.rd_kafka_message_timestamp)

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Read these partitions, each from its offset (replacing any assignment)."""
        lib = self._lib
        parts = lib.rd_kafka_topic_partition_list_new(len(partitions))
        try:
            for tp in partitions:
                lib.rd_kafka_topic_partition_list_add(parts, tp.topic.encode(), tp.partition)
                lib.rd_kafka_topic_partition_list_set_offset(
                    parts, tp.topic.encode(), tp.partition, tp.offset
                )
            err = lib.rd_kafka_assign(self._rk, parts)
        finally:
            lib.rd_kafka_topic_partition_list_destroy(parts)
        if err:
            raise RdkafkaError(f"cannot assign {partitions}: {error_text(err)}")

    def unassign(self) -> None:
        if self._rk:
            self._lib.rd_kafka_assign(self._rk, None)

    def consume(self, num_messages: int, timeout: float, with_keys: bool = False) -> Fetched:
        """Wait up to ``timeout`` seconds for messages and return up to ``num_messages`` of them (their keys
        too ``with_keys``)."""
        if len(self._ptrs) < num_messages:
            self._ptrs = np.zeros(num_messages, dtype=np.int64)
        ptrs = self._ptrs
        n = self._lib.rd_kafka_consume_batch_queue(
            self._queue, int(timeout * 1000), ptrs.ctypes.data, num_messages
        )
        if n < 0:
            raise RdkafkaError("reading failed: the consumer's queue is gone")
        lens = np.empty(n, dtype=np.int64)
        buf = np.empty(_sizes(ptrs, n, lens), dtype=np.uint8)
        ends = np.empty(n, dtype=np.int64)
        offsets = np.empty(n, dtype=np.int64)
        errs = np.empty(n, dtype=np.int32)
        nulls = np.empty(n, dtype=np.bool_)
        timestamps = np.empty(n, dtype=np.int64)
        keys = np.empty(_key_sizes(ptrs, n) if with_keys else 0, dtype=np.uint8)
        key_ends = np.empty(n if with_keys else 0, dtype=np.int64)
        key_nulls = np.empty(n if with_keys else 0, dtype=np.bool_)
        _drain(
            ptrs,
            n,
            buf,
            ends,
            offsets,
            errs,
            nulls,
            timestamps,
            self._kind,
            self._destroy,
            self._timestamp,
            keys,
            key_ends,
            key_nulls,
        )
        if not with_keys:
            return Fetched(buf, ends, offsets, errs, nulls, timestamps)
        return Fetched(buf, ends, offsets, errs, nulls, timestamps, keys, key_ends, key_nulls)

    def close(self) -> None:
        """Leave and free the client (idempotent)."""
        if self._rk:
            rk, self._rk = self._rk, None
            self._lib.rd_kafka_queue_destroy(self._queue)
            self._lib.rd_kafka_consumer_close(rk)
            self._lib.rd_kafka_destroy(rk)

    def __del__(self) -> None:
        # at interpreter exit the library, and this module's globals (contextlib too), may be gone
        try:  # noqa: SIM105 - contextlib may be gone at exit
            self.close()
        except Exception:  # noqa: BLE001, S110 - nothing to report to at exit
            pass
