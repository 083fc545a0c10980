"""The Kafka source: a PySpark Python Data Source over protobuf topics; this module is its driver side.

* Spark partitions are Kafka offset ranges ``[start, end)`` of one topic partition (a long range
  is split so that every core gets work).
* ``read()`` runs on the executors (:mod:`job.sources.read`): it assigns (no consumer group), seeks,
  fetches with librdkafka (:mod:`job.sources.rdkafka`) and yields ``pyarrow.RecordBatch``es decoded
  column by column.
* Offsets live only in Spark's checkpoint (``{topic: {partition: next offset}}``), so a restart
  neither loses nor repeats input.
* Bad records follow the stream's policy: ``fail`` stops the query with the topic, partition and
  offset; ``skip`` leaves them out, logs and records each one (raw bytes included) under
  ``bad_records_dir`` so nothing is lost and the count is known (:mod:`job.sources.bad_records`).

Options (all strings, set by :func:`job.sources.config.source_options`): ``bootstrap_servers``,
``topics`` (JSON list), ``proto_class``, ``descriptor_set`` (base64), ``columns`` (JSON list), ``start_from``,
``max_records_per_batch``, ``split_records``, ``bad_records``, ``bad_records_dir``, ``consumer_config``
(JSON object), and for failover (:mod:`job.sources.failover`) ``failover_bootstrap_servers``,
``failover_after_s`` and ``positions_dir``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from job.errors import SourceError
from job.sources import data_loss, log_identity
from job.sources import failover as kfo
from job.sources import offsets as kofs
from job.sources.align import aligned_limit, record_times
from job.sources.bad_records import count_bad_records, publish_dead_letters
from job.sources.config import SOURCE_NAME, OffsetRange, RangeGroup, SourceConfig, source_options
from job.sources.pacing import ClosePacer
from job.sources.read import read_partition

__all__ = [
    "SOURCE_NAME",
    "DaggerKafkaSource",
    "KafkaBatchReader",
    "KafkaStreamReader",
    "OffsetRange",
    "RangeGroup",
    "SourceConfig",
    "count_bad_records",
    "pack_ranges",
    "publish_dead_letters",
    "register_source",
    "source_options",
]

log = logging.getLogger("daggers.source.kafka")

#: In the offsets of a gathering source (``cfg.gather_ms``), whose query runs no micro-batch without new data
#: (:func:`job.query.runner.eviction_conf`): a count the source moves on when it wants one batch that reads
#: nothing, the one that closes the windows the last batch's watermark passed (job.sources.pacing).
TICK_KEY = "@tick"
#: The suffix of the record-time client's key among the driver's clients (one per cluster).
ALIGN_CLIENT = "/align"
RECREATED_CONFIRMATIONS = 3  # consecutive look-ups that must show a topic shorter than the checkpoint


def pack_ranges(ranges: list[OffsetRange], pack_records: int, max_tasks: int = 0) -> list[InputPartition]:
    """Return the tasks that read ``ranges``: ``ceil(records / pack_records)`` of them (at least one, at
    most one per range, and at most ``max_tasks`` when it is not 0), the ranges dealt largest first to the
    task with the fewest records so far. Ranges are never cut (``split_records`` does that); a task of one
    range is that range itself."""
    if len(ranges) < 2 or (pack_records <= 0 and not 0 < max_tasks < len(ranges)):
        return list(ranges)
    total = sum(r.end - r.start for r in ranges)
    tasks = max(1, -(-total // pack_records)) if pack_records > 0 else len(ranges)
    if max_tasks > 0:
        tasks = min(tasks, max_tasks)
    if tasks >= len(ranges):
        return list(ranges)
    groups: list[list[OffsetRange]] = [[] for _ in range(tasks)]
    loads = [0] * tasks
    for r in sorted(ranges, key=lambda r: r.end - r.start, reverse=True):
        i = loads.index(min(loads))
        groups[i].append(r)
        loads[i] += r.end - r.start
    return [
        g[0] if len(g) == 1 else RangeGroup(sorted(g, key=lambda r: (r.topic, r.partition, r.start)))
        for g in groups
    ]


class DaggerKafkaSource(DataSource):
    """``spark.readStream.format("dagger_kafka")``: protobuf records from Kafka topics."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SourceConfig.from_options(self.options).spark_schema()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(SourceConfig.from_options(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(SourceConfig.from_options(self.options))


class KafkaBatchReader(DataSourceReader):
    """A bounded read: from ``start_from`` (earliest, latest, a time, or offsets) to the end offsets at
    planning time, or to ``end_at`` where it comes first, and at most ``max_records_per_batch`` records
    per partition (the newest ones). Previews read this way, and a fused group catches up a member that
    comes back behind the others (:mod:`job.shared.catchup`)."""

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg

    def partitions(self) -> list[InputPartition]:
        consumer = kofs.driver_consumer(self.cfg.bootstrap_servers, self.cfg.consumer_config)
        try:
            tps = kofs.partitions_of(
                consumer, self.cfg.topics, self.cfg.bootstrap_servers, proto_class=self.cfg.proto_class
            )
            ends = kofs.end_offsets(consumer, tps)
            how = self.cfg.start_from.strip().lower()
            if how == "latest":
                starts = ends
            elif how == "earliest":
                starts = kofs.beginning_offsets(consumer, tps)
            elif how.startswith("{"):
                given = json.loads(self.cfg.start_from)
                starts = {
                    t: {p: int((given.get(t) or {}).get(p, hi)) for p, hi in parts.items()}
                    for t, parts in ends.items()
                }
            else:
                starts = kofs.offsets_for_time(
                    consumer, tps, kofs.parse_start_time(self.cfg.start_from), ends
                )
        finally:
            consumer.close()
        cap = self.cfg.max_records_per_batch
        stop = json.loads(self.cfg.end_at) if self.cfg.end_at else {}
        out: list[OffsetRange] = []
        for topic, parts in ends.items():
            for part, hi in parts.items():
                hi = min(hi, int((stop.get(topic) or {}).get(part, hi)))
                lo = starts.get(topic, {}).get(part, hi)
                if cap > 0:
                    lo = max(lo, hi - cap)
                if lo < hi:
                    out.append(OffsetRange(topic, int(part), lo, hi))
        return pack_ranges(out, self.cfg.pack_records, self.cfg.max_tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.cfg, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges on the driver and reads them on the executors.

    With failover, the offsets say which cluster they belong to (:mod:`job.sources.failover`) and the
    driver reads from that cluster; it moves to the secondary when the primary has been unreachable
    for ``failover_after_s``, and never moves back.
    """

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg
        self._clients: dict[str, Consumer] = {}
        self._target: tuple[str, kofs.Offsets] | None = None
        self._available_now = False
        self._outage_since: float | None = None
        self._behind_seen = 0
        self._positioned: dict[
            tuple[str, str], int
        ] = {}  # (topic, partition) -> the last offset with a known position
        self._pacer = ClosePacer(
            cfg.close_period_ms, cfg.close_delay_ms, cfg.read_at_close, cfg.gather_ms / 1000
        )
        self._newest_ms: dict[
            tuple[str, int], int
        ] = {}  # (topic, partition) -> the newest probed record's time
        # partitions whose record times were seen to fall back (job.sources.align.aligned_limit)
        self._falls: set[tuple[str, str]] = set()
        self._log_watch = log_identity.LogWatch(cfg.loss_dir, cfg.fail_on_data_loss)
        # a batch read records since the last one that read none (see _tick); a run that resumes a checkpoint
        # starts with True: a run killed right after the batch that moved the watermark closes what it passed
        # at its first plan (a new query's initialOffset sets False: nothing was read)
        self._unclosed = True

    def _during_outage(self, start: dict[str, Any], exc: SourceError, asked_at: float) -> dict[str, Any]:
        """The broker cannot be reached: plan no new data and try again at the next trigger, until
        ``max_outage_s`` has passed (then the error stops the query). With failover, move to the
        secondary once the primary has been unreachable for ``failover_after_s``. The outage is counted
        from ``asked_at``, when the first call that got no answer was made (monotonic): a metadata call
        waits up to 10 s before it fails, and that wait is part of the outage."""
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = asked_at
        waited = now - self._outage_since
        self._log_watch.forget()  # the broker may come back with another log
        self._drop_clients()  # start afresh: a restarted broker may have new metadata
        cluster, offsets = kfo.split_cluster(start)
        if self.cfg.failover and cluster == kfo.PRIMARY and waited >= self.cfg.failover_after_s:
            try:
                return self._fail_over(offsets, waited, exc)
            except SourceError as second:
                log.warning(
                    "cannot fail over to the secondary cluster %s yet: %s",
                    self.cfg.failover_bootstrap_servers,
                    second.message,
                )
        if waited > self.cfg.max_outage_s:
            raise SourceError(
                f"{exc.message} (for {waited:.0f} s, more than max_outage_s {self.cfg.max_outage_s:.0f})",
                hint=exc.hint,
            ) from None
        log.warning("broker unavailable for %.0f s, will retry: %s", waited, exc.message)
        return start

    def _fail_over(self, start: kofs.Offsets, waited: float, exc: SourceError) -> dict[str, Any]:
        """Return the switch offsets: where to start on the secondary (a micro-batch that reads nothing)."""
        consumer = self._consumer(kfo.SECONDARY)
        tps = kofs.partitions_of(consumer, self.cfg.topics, self.cfg.failover_bootstrap_servers)
        positions = {(tp.topic, tp.partition): self._position(start, tp) for tp in tps}
        target = kfo.secondary_start(consumer, tps, positions, self.cfg.start_from)
        log.warning(
            "FAILOVER %s: the primary cluster %s has been unreachable for %.0f s (%s); switching to the "
            "secondary cluster %s at offsets %s (by the timestamps of the last records read; no "
            "automatic failback)",
            self.cfg.topics,
            self.cfg.bootstrap_servers,
            waited,
            exc.message,
            self.cfg.failover_bootstrap_servers,
            json.dumps(target, sort_keys=True),
        )
        print(
            f"daggers: FAILOVER of {self.cfg.topics} from {self.cfg.bootstrap_servers} to "
            f"{self.cfg.failover_bootstrap_servers} after {waited:.0f} s",
            file=sys.stderr,
        )
        if self.cfg.positions_dir:
            kfo.write_active(self.cfg.positions_dir, kfo.SECONDARY, self.cfg.failover_bootstrap_servers)
        self._outage_since = None
        self._target = None
        return kfo.tag(target, kfo.SECONDARY, True)

    def _ensure_positions(self, start: kofs.Offsets) -> None:
        """Make sure the position before every start offset is known (readers record it for the ranges
        they read; offsets read before failover was configured have none): fetch the missing ones."""
        for topic, parts in start.items():
            for part, offset in parts.items():
                if self._positioned.get((topic, part)) == offset:
                    continue
                try:
                    if not kfo.has_position(self.cfg.positions_dir, topic, int(part), offset):
                        kfo.record_position(
                            self._consumer(), self.cfg.positions_dir, topic, int(part), offset
                        )
                except SourceError as exc:  # e.g. deleted by retention: failover uses start_from there
                    log.warning(
                        "%s[%s]: cannot record the position before offset %d: %s",
                        topic,
                        part,
                        offset,
                        exc.message,
                    )
                self._positioned[(topic, part)] = offset  # one entry per partition: no growth over a long run

    def _position(self, start: kofs.Offsets, tp: TopicPartition) -> kfo.Position | None:
        offset = start.get(tp.topic, {}).get(str(tp.partition))
        if offset is None or not self.cfg.positions_dir:
            return None
        return kfo.find_position(self.cfg.positions_dir, tp.topic, tp.partition, offset)

    # The driver-side clients must not travel to executors with the pickled reader.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_clients"] = {}
        return state

    def _drop_clients(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients = {}

    def _consumer(self, cluster: str = kfo.PRIMARY) -> Consumer:
        if cluster not in self._clients:
            self._clients[cluster] = kofs.driver_consumer(
                self.cfg.bootstrap(cluster), self.cfg.consumer_config
            )
        return self._clients[cluster]

    def _times_consumer(self, cluster: str) -> Consumer:
        """The client that looks up record times in the middle of partitions (:mod:`job.sources.align`): a
        probe there is never at the end, so it may fetch again at once (the offset look-ups' client waits
        100 ms before fetching a partition again, ~0.1-0.2 s a probe)."""
        key = f"{cluster}{ALIGN_CLIENT}"
        if key not in self._clients:
            self._clients[key] = kofs.driver_consumer(
                self.cfg.bootstrap(cluster),
                {**(self.cfg.consumer_config or {}), "fetch.queue.backoff.ms": "1"},
            )
        return self._clients[key]

    def _partitions(self, cluster: str = kfo.PRIMARY) -> list[TopicPartition]:
        return kofs.partitions_of(
            self._consumer(cluster),
            self.cfg.topics,
            self.cfg.bootstrap(cluster),
            proto_class=self.cfg.proto_class,
        )

    def _ends(self, cluster: str = kfo.PRIMARY) -> kofs.Offsets:
        ends, self._newest_ms = kofs.probe_ends(self._consumer(cluster), self._partitions(cluster))
        return ends

    def _cluster_of(self, offsets: dict[str, Any]) -> tuple[str, kofs.Offsets]:
        cluster, bare = kfo.split_cluster(offsets)
        if cluster == kfo.SECONDARY and not self.cfg.failover:
            raise SourceError(
                f"the checkpoint of {self.cfg.topics} is on the secondary cluster, but the spec "
                "names no failover cluster",
                hint="put failover back in the spec, or start "
                "a new checkpoint (there is no automatic failback)",
            )
        return cluster, bare

    def initialOffset(self) -> dict[str, Any]:
        self._unclosed = False  # a new query: nothing read, nothing to close
        tps = self._partitions()
        how = self.cfg.start_from.strip().lower()
        if how == "earliest":
            return kfo.tag(kofs.beginning_offsets(self._consumer(), tps), kfo.PRIMARY, self.cfg.failover)
        if how.startswith("{"):  # {topic: {partition: offset}}: where a fused group's last generation stopped
            given = json.loads(self.cfg.start_from)
            firsts = kofs.beginning_offsets(self._consumer(), tps)
            return kfo.tag(
                {
                    t: {p: int((given.get(t) or {}).get(p, o)) for p, o in parts.items()}
                    for t, parts in firsts.items()
                },
                kfo.PRIMARY,
                self.cfg.failover,
            )
        ends = kofs.end_offsets(self._consumer(), tps)
        if how == "latest":
            return kfo.tag(ends, kfo.PRIMARY, self.cfg.failover)
        found = kofs.offsets_for_time(self._consumer(), tps, kofs.parse_start_time(self.cfg.start_from), ends)
        return kfo.tag(found, kfo.PRIMARY, self.cfg.failover)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.cfg.max_records_per_batch
        return ReadMaxRows(n) if n > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        cluster, bare = self._cluster_of(start)
        if not self._available_now:
            self._pacer.plan_starts(time.monotonic())  # the batch planned last has ended: time it
        if not self._available_now and self._pacer.hold():
            # no new data: the windows the last batch's watermark passed close in a short batch
            return self._tick(start)
        asked_at = time.monotonic()
        try:
            if self._available_now and (self._target is None or self._target[0] != cluster):
                self._target = (cluster, self._ends(cluster))  # the end of "now", once per cluster
            end = self._target[1] if self._target is not None else self._ends(cluster)
        except SourceError as exc:
            return self._during_outage(start, exc, asked_at)
        self._outage_since = None
        if self.cfg.positions_dir and kfo.read_active(self.cfg.positions_dir) != cluster:
            kfo.write_active(self.cfg.positions_dir, cluster, self.cfg.bootstrap(cluster))
        if self.cfg.positions_dir and cluster == kfo.PRIMARY:
            self._ensure_positions(bare)
        try:  # a log replaced by one past the position (job.sources.log_identity)
            checked = self._log_watch.check(
                self._consumer(cluster),
                cluster,
                bare,
                end,
                lambda: kofs.driver_consumer(self.cfg.bootstrap(cluster), self.cfg.consumer_config),
            )
        except data_loss.DataLossError:
            raise
        except SourceError as exc:
            return self._during_outage(start, exc, asked_at)
        if checked is not bare:
            return start if checked is None else _ticked(start, kfo.tag(checked, cluster, self.cfg.failover))
        planned = self._plan_end(cluster, bare, end, limit)
        newest = _newest_read(planned, end, self._newest_ms)
        if _advances(bare, planned):
            now = time.monotonic()
            newest_s = newest / 1000 if newest is not None else None
            if not self._available_now and not self._pacer.worth_reading(newest_s, now):
                return start  # read at window close: the records wait until they close a window
            self._pacer.planned(newest_s, now)
            self._unclosed = True
        elif self._unclosed and self.cfg.gather_ms and not self._available_now:
            # nothing new on the brokers: close what the last batch's watermark passed (record timestamps
            # that are not event times can hide a boundary from the pacer); without gathering, Spark does
            return self._tick(start)
        self._log_watch.planned(cluster, planned)
        return _ticked(start, kfo.tag(planned, cluster, self.cfg.failover))

    def _tick(self, start: dict[str, Any]) -> dict[str, Any]:
        """Return the offsets of a batch that reads nothing after ``start``. Spark runs such a batch itself
        when its watermark moved (a no-data micro-batch), unless the query turned them off, as a gathering
        source's does (after every gathered read, it was one more micro-batch that closed no window): the
        source then moves its tick on, and Spark sees new offsets."""
        self._unclosed = False
        if not self.cfg.gather_ms:
            return start
        return {**start, TICK_KEY: int(start.get(TICK_KEY, 0)) + 1}

    def _plan_end(
        self, cluster: str, start: kofs.Offsets, end: kofs.Offsets, limit: ReadLimit
    ) -> kofs.Offsets:
        behind = _ahead_of_end(start, end)
        if behind:
            # A broker that is starting up can briefly report empty partitions: believe that the
            # topic was recreated only when it says so several times in a row.
            self._behind_seen += 1
            if self._behind_seen < RECREATED_CONFIRMATIONS:
                log.warning(
                    "%s: end offsets are behind the checkpoint (%s); waiting to confirm",
                    self.cfg.topics,
                    sorted(behind),
                )
                return start
        self._behind_seen = 0
        begin = (
            kofs.beginning_offsets(self._consumer(cluster), self._partitions(cluster))
            if _has_new(start, end) or behind
            else {}
        )
        merged: kofs.Offsets = {}
        for topic, parts in end.items():
            for part, hi in parts.items():
                lo = start.get(topic, {}).get(part, begin.get(topic, {}).get(part, 0))
                if (topic, part) in behind:
                    # The topic holds fewer records than the checkpoint has read: the broker lost records
                    # or the topic was recreated. A named fault (job.sources.data_loss), or read on from its end.
                    first = begin.get(topic, {}).get(part, 0)
                    if self.cfg.fail_on_data_loss:
                        raise data_loss.error(topic, part, lo, first, hi, loss_dir=self.cfg.loss_dir)
                    merged.setdefault(topic, {})[part] = data_loss.skip_to(
                        topic, part, lo, first, hi, loss_dir=self.cfg.loss_dir
                    )
                    continue
                merged.setdefault(topic, {})[part] = max(hi, lo)
        if behind:
            self._behind_seen = 0
            return merged
        full_start = {
            t: {p: start.get(t, {}).get(p, begin.get(t, {}).get(p, 0)) for p in ps}
            for t, ps in merged.items()
        }
        if isinstance(limit, ReadMaxRows):
            # a share of the limit that reads every partition to one moment of record time
            try:  # (its client made when a batch is capped)
                merged = aligned_limit(
                    full_start,
                    merged,
                    limit.max_rows,
                    lambda want: record_times(self._times_consumer(cluster), want),
                    {(t, str(p)): ms for (t, p), ms in self._newest_ms.items()},
                    self.cfg.align_ms,
                    falls=self._falls,
                )
            except SourceError as exc:  # the share in proportion to what is pending, this once
                log.warning(
                    "%s: cannot align the batch's partitions on record time: %s", self.cfg.topics, exc.message
                )
                merged = kofs.split_limit(full_start, merged, limit.max_rows)
        return merged

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        (from_cluster, start_), (cluster, end_) = self._cluster_of(start), self._cluster_of(end)
        if from_cluster != cluster:
            return []  # the failover micro-batch: it only moves the offsets to the secondary
        out: list[OffsetRange] = []
        step = max(self.cfg.split_records, 1)
        for topic, parts in end_.items():
            for part, hi in parts.items():
                lo = start_.get(topic, {}).get(part, 0)
                for s in range(lo, hi, step):
                    out.append(OffsetRange(topic, int(part), s, min(s + step, hi), cluster, lo))
        # a split range keeps a task of its own (unless max_tasks says otherwise)
        return pack_ranges(out, min(self.cfg.pack_records, step), self.cfg.max_tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.cfg, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark has committed everything before ``end``: publish that data's bad records, and forget
        the positions of ranges before it."""
        cluster, offsets = self._cluster_of(end)
        if self.cfg.positions_dir and cluster == kfo.PRIMARY:
            kfo.prune_positions(self.cfg.positions_dir, offsets)
        if self.cfg.bad_records == "dead-letter" and self.cfg.bad_records_dir:
            publish_dead_letters(
                self.cfg.bad_records_dir,
                self.cfg.bootstrap(cluster),
                self.cfg.dead_letter_topic,
                self.cfg.consumer_config,
            )

    def stop(self) -> None:
        self._log_watch.close()
        self._drop_clients()


def _ticked(start: dict[str, Any], planned: dict[str, Any]) -> dict[str, Any]:
    """``planned`` with the tick of ``start`` (the count goes on from batch to batch), when it has one."""
    return {**planned, TICK_KEY: start[TICK_KEY]} if TICK_KEY in start else planned


def _ahead_of_end(start: kofs.Offsets, end: kofs.Offsets) -> set[tuple[str, str]]:
    return {(t, p) for t, ps in end.items() for p, hi in ps.items() if start.get(t, {}).get(p, 0) > hi}


def _has_new(start: kofs.Offsets, end: kofs.Offsets) -> bool:
    return any(p not in start.get(t, {}) for t, ps in end.items() for p in ps)


def _newest_read(
    planned: kofs.Offsets, end: kofs.Offsets, newest_ms: dict[tuple[str, int], int]
) -> int | None:
    """Return the time of the newest probed record that ``planned`` reads: over the partitions it reads to
    their end (a batch capped by a read limit does not reach the probed record)."""
    times = [
        newest_ms[(t, int(p))]
        for t, ps in planned.items()
        for p, hi in ps.items()
        if (t, int(p)) in newest_ms and hi >= end.get(t, {}).get(p, hi + 1)
    ]
    return max(times, default=None)


def _advances(start: kofs.Offsets, end: kofs.Offsets) -> bool:
    """Whether ``end`` reads anything past ``start`` (a new partition counts from 0)."""
    return any(hi > start.get(t, {}).get(p, 0) for t, ps in end.items() for p, hi in ps.items())


def register_source(spark: Any) -> None:
    """Register the Kafka data source (``SOURCE_NAME``) with ``spark``, idempotently.

    Spark refuses a name that the thread's *active* session already knows (DATA_SOURCE_ALREADY_EXISTS),
    and a ``newSession()`` child does not inherit its parent's Python data sources: with the parent
    active, the child could neither register the source nor find it. So ``spark`` is made the active
    session while it registers (:func:`job.spark.session.active_session`); ALREADY_EXISTS then means
    it had registered the source itself.
    """
    from job.spark.session import active_session

    with active_session(spark):
        try:
            spark.dataSource.register(DaggerKafkaSource)
        except Exception as exc:  # pyspark's AnalysisException; the class moved between releases
            if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
                raise
