"""Records the checkpoint counts on that the broker no longer has: a named fault, not an idle dagger.

A checkpoint's position past a partition's end (a broker that lost its newest records in a crash, or a topic
deleted and made again), or below its first offset (records deleted before they were read), is data loss.
Like Spark's Kafka source (``failOnDataLoss``), a stream fails at once by default, saying which partition,
the position, the broker's offsets and the way out; with ``fail_on_data_loss: false`` it reads on, with a
warning that names the records it reads and the ones gone: past the end, from the first offset the broker
holds (a broker that came back empty holds only records written since; one that kept some of its records
gives those again), so that nothing written after the broker came back is skipped, however long the loss
took to be seen; below the first offset, from the first offset.

A broker that is starting up can briefly answer with empty partitions: a loss counts only once
:data:`CONFIRMATIONS` look-ups at least :data:`CONFIRM_EVERY_S` apart all show it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from confluent_kafka import TopicPartition

from job.errors import SourceError
from job.sources import loss_mark

log = logging.getLogger("daggers.source.data_loss")

CONFIRMATIONS = 3
CONFIRM_EVERY_S = 1.0


class DataLossError(SourceError):
    """The checkpoint's position is outside what the broker holds."""

    title = "Data loss"


def describe(
    topic: str, partition: int | str, position: int, first: int, end: int, range_end: int | None = None
) -> str | None:
    """Return what is wrong with ``position`` in a partition holding offsets ``first``..``end - 1``, or None
    when the broker has it (or it is the end: nothing new yet). With ``range_end`` (a planned batch's end: the
    broker held the records up to it), records of the batch past the partition's end are lost too."""
    if range_end is not None and position <= end < range_end and position >= first:
        return (
            f"{topic}[{partition}]: offsets {end:,}..{range_end - 1:,} of a planned batch are past the "
            f"partition's end {end:,}: the broker lost records or the topic was recreated"
        )
    if position > end:
        return (
            f"{topic}[{partition}]: the checkpoint's position {position:,} is past the partition's end "
            f"{end:,} by {position - end:,} records: the broker lost records or the topic was recreated"
        )
    if position < first:
        return (
            f"{topic}[{partition}]: the checkpoint's position {position:,} is below the partition's first "
            f"offset {first:,}: {first - position:,} records were deleted before they were read"
        )
    return None


def error(
    topic: str,
    partition: int | str,
    position: int,
    first: int,
    end: int,
    range_end: int | None = None,
    loss_dir: str = "",
) -> DataLossError:
    """The error that stops a stream whose position the broker does not hold. Past the end, where the new data
    begins (the partition's first offset at the first sight of the loss; for a planned batch whose start the
    broker still holds, its end) is kept in ``loss_dir`` (:mod:`job.sources.loss_mark`): the offset the hint
    names, where ``fail_on_data_loss: false`` reads on from."""
    what = describe(topic, partition, position, first, end, range_end) or f"{topic}[{partition}]: data loss"
    past_end = position > end or (range_end is not None and first <= position <= end < range_end)
    if not past_end:
        where = f"to read on from offset {first:,} (the records in between are not read)"
    else:
        # keyed by where the checkpoint will stand: a failed batch is replayed, then planned on from its end
        lost_at = range_end if range_end is not None else position
        if position > end:  # the broker's log begins again below the position: all of it is read
            to = max(first, min(end, loss_mark.remember(loss_dir, topic, partition, lost_at, first)))
            where = (
                f"to read on from offset {to:,}, the partition's first offset when the loss was first seen "
                "(every record written since the broker came back is read; any it kept from before, again)"
            )
        else:
            to = max(first, min(end, loss_mark.remember(loss_dir, topic, partition, lost_at, end)))
            where = (
                f"to read on from offset {to:,}, where the partition ended when the loss was first seen "
                "(every record written from there on is read)"
            )
    return DataLossError(
        what,
        hint=f"{where}, set `fail_on_data_loss: false` on the stream that reads {topic!r} and deploy again; "
        "or deploy the dagger with a new checkpoint to start afresh from its start_from",
    )


def skip_to(
    topic: str,
    partition: int | str,
    position: int,
    first: int,
    end: int,
    range_end: int | None = None,
    loss_dir: str = "",
) -> int:
    """With ``fail_on_data_loss: false``: the offset to read on from, said in a warning. Past the end, that is
    where the new data begins as kept in ``loss_dir`` at the first sight of the loss (kept now when this is
    it): the partition's first offset, so that no record written after the broker came back is skipped."""
    if range_end is not None and first <= position <= end < range_end:
        loss_mark.remember(loss_dir, topic, partition, range_end, end, replace=True)  # read up to ``end``
        log.warning(
            "%s[%s]: offsets %d..%d of a planned batch are past the partition's end %d: the broker lost "
            "records or the topic was recreated; passing over them",
            topic,
            partition,
            end,
            range_end - 1,
            end,
        )
        return end
    if position > end:
        lost_at = range_end if range_end is not None else position
        mark = loss_mark.recall(loss_dir, topic, partition, lost_at)
        begins = (
            mark.end if mark is not None else loss_mark.remember(loss_dir, topic, partition, lost_at, first)
        )
        to = max(first, min(begins, end))
        since = f"first seen {mark.seen_at()}" if mark is not None else "seen now"
        log.warning(
            "%s[%s]: the checkpoint's position %d is past the partition's end %d: the broker lost records or "
            "the topic was recreated; reading on from offset %d, where the new data began when the loss was "
            "%s: the %d records it holds from there (offsets %d..%d) are read, every one written since the "
            "broker came back (and any it kept from before, again); the records the checkpoint counted at "
            "offsets %d..%d are gone",
            topic,
            partition,
            position,
            end,
            to,
            since,
            end - to,
            to,
            end - 1,
            to,
            position - 1,
        )
        return to
    log.warning(
        "%s[%s]: records %d..%d (%d) were deleted before they were read; skipping them, reading on from %d",
        topic,
        partition,
        position,
        first - 1,
        first - position,
        first,
    )
    return first


@dataclass
class LossWatch:
    """On a reader's "offset out of range" answers, end-of-partition answers below its range's end and re-seeks
    (a broker such as tansu answers a fetch past the end with nothing): looks up the partition's offsets in a
    thread of its own (a broker that does not answer must not hold up the read), at most every
    :data:`CONFIRM_EVERY_S`, and says when the position was lost on :data:`CONFIRMATIONS` look-ups in a row."""

    seen_answers: int = 0
    confirmed: int = 0
    last_at: float = field(default=-1e9)
    _running: threading.Thread | None = None
    _found: list[tuple[int, int, int] | None] = field(
        default_factory=list
    )  # (position, first, end) per look-up

    def check(
        self,
        answers: int,
        now: float,
        bootstrap: str,
        topic: str,
        partition: int,
        position: int,
        range_end: int,
    ) -> tuple[int, int] | None:
        """Return the partition's (first, end) once ``position`` (or the rest of a range up to ``range_end``)
        was outside them on enough look-ups in a row, else None. ``answers`` is the reader's count of the
        events above: a look-up starts when it changed (a broker that does not answer confirms nothing)."""
        while self._found:
            found = self._found.pop(0)
            if found is None or found[0] != position:
                self.confirmed = 0  # no answer, or the read moved on since
                continue
            if describe(topic, partition, position, found[1], found[2], range_end) is None:
                self.confirmed = 0
                continue
            self.confirmed += 1
            if self.confirmed >= CONFIRMATIONS:
                return found[1], found[2]
        running = self._running is not None and self._running.is_alive()
        if answers != self.seen_answers and not running and now - self.last_at >= CONFIRM_EVERY_S:
            self.seen_answers, self.last_at = answers, now
            self._running = threading.Thread(
                target=self._look_up, args=(bootstrap, topic, partition, position), daemon=True
            )
            self._running.start()
        return None

    def _look_up(self, bootstrap: str, topic: str, partition: int, position: int) -> None:
        from job.sources import offsets as kofs

        try:
            consumer = kofs.driver_consumer(bootstrap)
        except SourceError:
            self._found.append(None)
            return
        try:
            tp = TopicPartition(topic, partition)
            first = kofs.beginning_offsets(consumer, [tp], timeout=5.0)[topic][str(partition)]
            end = kofs.end_offsets(consumer, [tp], timeout=5.0)[topic][str(partition)]
            self._found.append((position, first, end))
        except SourceError:
            self._found.append(None)
        finally:
            consumer.close()


def _replaced_what(topic: str, partition: int | str, position: int, offset: int, end: int) -> str:
    return (
        f"{topic}[{partition}]: the record at offset {offset:,} is not the one the checkpoint read there: the "
        f"broker's log was replaced (it came back empty, or the topic was recreated) and its new log has "
        f"passed the checkpoint's position {position:,} (its end is {end:,})"
    )


def replaced_error(
    topic: str, partition: int | str, position: int, offset: int, first: int, end: int
) -> DataLossError:
    """The error that stops a stream whose partition's log was replaced by one that passed its position
    (:mod:`job.sources.log_identity`): its offsets below the position were never read."""
    return DataLossError(
        _replaced_what(topic, partition, position, offset, end),
        hint=f"to read on from offset {first:,}, the partition's first offset (every record of the new log is "
        f"read), set `fail_on_data_loss: false` on the stream that reads {topic!r} and deploy again; "
        "or deploy the dagger with a new checkpoint to start afresh from its start_from",
    )


def replaced_skip(topic: str, partition: int | str, position: int, offset: int, first: int, end: int) -> int:
    """With ``fail_on_data_loss: false``: read a replaced log on from its first offset, said in a warning."""
    log.warning(
        "%s; reading on from offset %d, the partition's first offset: the %d records of the new log "
        "(offsets %d..%d) are read; the records the checkpoint counted at offsets 0..%d are gone",
        _replaced_what(topic, partition, position, offset, end),
        first,
        end - first,
        first,
        end - 1,
        position - 1,
    )
    return first
