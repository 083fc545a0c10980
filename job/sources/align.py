"""A capped micro-batch reads every partition up to one moment of record time.

Spark's watermark is the newest event time read on any partition, less the delay: a micro-batch that reads
one partition further in event time than another makes the other's records still waiting late, although that
partition was written in order (Flink keeps a watermark per partition and takes the smallest, so it drops none
of them). A batch that reads every partition to its end is one moment's (:func:`job.sources.offsets.probe_ends`);
one capped by ``max_records_per_batch`` shares the cap in proportion to what each partition has pending
(:func:`job.sources.offsets.split_limit`), which reads a partition whose backlog holds a burst far ahead of one
that holds only the steady feed. :func:`align_ends` then cuts every partition back to the record time of the
first record left unread on a partition the cap cut: no record left unread is older than one read.

Record times are the Kafka timestamps, which ``daggers produce`` sets to the event time; where the broker gives
none, the proportional share stays.
"""

from __future__ import annotations

import contextvars
import dataclasses
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition

from job.errors import SourceError
from job.sources.offsets import Offsets, beginning_offsets, end_offsets, split_limit

Key = tuple[str, str]
#: Looks up the record time (epoch ms) at each offset asked for; a key whose record has no time is left out.
TimesAt = Callable[[dict[Key, int]], dict[Key, int]]
#: At most this many shares of a limit: what an alignment leaves of it is shared again (and aligned) while it
#: is more than a tenth of the limit.
PASSES = 3
#: A plan's look-ups of record times stop after this many seconds: the share in proportion to what each
#: partition has pending stays for that batch (SourceError, which job.sources.kafka answers so). One partition
#: at a time (:func:`record_times`), the plans of 2 M records on 4 partitions on tansu took 0.34-0.70 s at most.
BUDGET_S = 2.0
#: The monotonic time by which a plan's look-ups must end (set by :class:`_Memo` while it looks up): a fetch
#: of :func:`record_times` waits no longer (a fetch under way on noida-db waited out its own 10 s).
_PLAN_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("plan_deadline", default=None)


def aligned_limit(
    start: Offsets,
    end: Offsets,
    max_rows: int,
    times_at: TimesAt,
    newest: dict[Key, int] | None = None,
    tolerance_ms: int = 0,
    budget_s: float = BUDGET_S,
    falls: set[Key] | None = None,
) -> Offsets:
    """Return the ends of a micro-batch from ``start`` that reads at most ``max_rows`` records, all partitions
    to one moment of record time give or take ``tolerance_ms`` (see :func:`align_ends`; ``newest``: the time
    of each partition's last record, where known): ``end`` itself when everything fits. What an alignment
    leaves of the limit after a cut is shared again from there, in proportion to what each partition read up
    to that moment (its recent rate; what it has pending when it read none), up to :data:`PASSES` shares.
    A record time found is not looked up again. ``falls``: the partitions known to fall back in record time
    somewhere (kept from plan to plan by the caller, which passes the same set each time; this plan adds
    the ones whose record times looked up show it): their ranges are looked up in the middle too
    (:func:`_middles`). Raises SourceError when the look-ups are not done within ``budget_s`` (or one
    fails)."""
    ends = split_limit(start, end, max_rows)
    memo = _Memo(times_at, budget_s)
    aligned = ends
    try:
        for n in range(PASSES):
            if ends == end:
                return ends
            # a share again that cannot be aligned keeps the alignment before it
            aligned = align_ends(
                start, ends, end, memo, newest, tolerance_ms, memo.learnt, falls, aligned if n else None
            )
            left = max_rows - _records(start, aligned)
            if aligned == ends or n == PASSES - 1 or left <= max_rows // 10:
                return aligned
            more = _share(start, aligned, end, left)
            if more == aligned:
                return aligned
            ends = more
        return ends
    finally:
        if falls is not None:
            falls.update(_fallen(memo.learnt, newest or {}, tolerance_ms))


def _fallen(learnt: dict[Key, dict[int, int]], newest: dict[Key, int], tolerance_ms: int) -> set[Key]:
    """Return the partitions whose record times ``learnt`` (partition -> offset -> time) fall back, by more
    than the tolerance, or are newer than the partition's last record (``newest``) by more than it."""
    return {
        k
        for k, times in learnt.items()
        if _falls(times, 0, max(times, default=0), tolerance_ms)
        or (k in newest and max(times.values(), default=newest[k]) > newest[k] + tolerance_ms)
    }


class _Memo:
    """A look-up of record times (:data:`TimesAt`) that remembers what it found (a record keeps its time)
    and gives up once ``budget_s`` has passed."""

    def __init__(self, times_at: TimesAt, budget_s: float) -> None:
        self.times_at = times_at
        self.budget_s = budget_s
        self.deadline = time.monotonic() + budget_s
        self.learnt: dict[Key, dict[int, int]] = {}  # partition -> offset -> its record's time

    def __call__(self, want: dict[Key, int]) -> dict[Key, int]:
        """Return the times at ``want`` (see :data:`TimesAt`). Raises SourceError past the budget."""
        ask = {k: at for k, at in want.items() if at not in self.learnt.get(k, {})}
        if ask:
            late = SourceError(f"record times not all found within {self.budget_s:g} s")
            if time.monotonic() > self.deadline:
                raise late
            token = _PLAN_DEADLINE.set(self.deadline)
            try:
                found = self.times_at(ask)
            except SourceError:
                if time.monotonic() >= self.deadline:
                    raise late from None
                raise
            finally:
                _PLAN_DEADLINE.reset(token)
            for k, t in found.items():
                self.learnt.setdefault(k, {})[ask[k]] = t
        return {k: self.learnt[k][at] for k, at in want.items() if at in self.learnt.get(k, {})}


def _records(start: Offsets, ends: Offsets) -> int:
    return sum(hi - start.get(t, {}).get(p, 0) for t, ps in ends.items() for p, hi in ps.items())


def _share(start: Offsets, ends: Offsets, end: Offsets, left: int) -> Offsets:
    """Return ``ends`` moved on by at most ``left`` records in all, shared in proportion to what each
    partition read from ``start`` (:func:`job.sources.offsets.split_limit` when none read any), none past
    ``end``."""
    weights = {(t, p): hi - start.get(t, {}).get(p, 0) for t, ps in ends.items() for p, hi in ps.items()}
    room = {(t, p): end.get(t, {}).get(p, hi) - hi for t, ps in ends.items() for p, hi in ps.items()}
    total = sum(w for k, w in weights.items() if room[k] > 0)
    if total <= 0:
        return split_limit(ends, end, left)
    out: Offsets = {t: dict(ps) for t, ps in ends.items()}
    for (t, p), w in weights.items():
        out[t][p] += min(room[(t, p)], w * left // total) if room[(t, p)] > 0 else 0
    return out


def align_ends(
    start: Offsets,
    capped: Offsets,
    end: Offsets,
    times_at: TimesAt,
    newest: dict[Key, int] | None = None,
    tolerance_ms: int = 0,
    learnt: dict[Key, dict[int, int]] | None = None,
    falls: set[Key] | None = None,
    fallback: Offsets | None = None,
) -> Offsets:
    """Return ``capped`` (ends under a read limit, from ``start``, short of the look-up's ``end`` on at least one
    partition) with every partition cut back so that it reads no record newer than the horizon (the time of the
    first record left unread on a partition the limit cut, the earliest of them) plus ``tolerance_ms``, and
    leaves none unread older than the horizon less ``tolerance_ms``. ``newest``: the time of each partition's
    last record, where known (a partition read to its end is not looked up then). The partition that sets the
    horizon keeps its share, so the batch reads at least one record when ``capped`` did. Returns ``fallback``
    (``capped`` when None: the stream goes on) when no partition would read a record or a record needed
    has no time (the proportional share then stays).

    With a tolerance of half the watermark delay, no record left unread is later than the delay behind one
    read. Each partition is taken as written in record-time order, in runs: a record older (by more than the
    tolerance) than one before it in its partition ends the run (what follows is late: a tail copied or
    replayed, a burst of old records), and no partition is read past the end of its run. A partition whose
    first unread or last record is such a drop (its time older than its first record read) is searched for
    the end of its run first; the last time of that run is then its share of the horizon, whether the limit
    cut it or not (its older records wait). A run that ends between two look-ups, before a tail whose times
    stay above the first record read, is seen by none of them: in a partition of ``falls`` (known to fall
    back in time somewhere), the middle of the range is looked up too, which sees it when it falls there
    (one more round; a sure test would read every record); so is the middle of a range whose ends are
    within the tolerance of each other (a burst, or a tail risen again to where the range starts).
    Look-ups: one round for the ends and one for the first records read, one for those middles, then a few
    rounds of an interpolation search in the partitions read too far, which starts from the record times
    ``learnt`` (partition -> offset -> time)."""
    kept = capped if fallback is None else fallback  # what an alignment that cannot be made returns
    read = {
        (t, p): (start.get(t, {}).get(p, 0), hi)
        for t, ps in capped.items()
        for p, hi in ps.items()
        if hi > start.get(t, {}).get(p, 0)
    }
    cut = {(t, p): hi for t, ps in capped.items() for p, hi in ps.items() if hi < end.get(t, {}).get(p, hi)}
    if not read or not cut:
        return kept
    # partition -> offset -> time, as found
    seen = {k: dict((learnt or {}).get(k, {})) for k in {*read, *cut}}

    def look(want: dict[Key, int]) -> bool:
        found = times_at(want) if want else {}
        for k, t in found.items():
            seen[k][want[k]] = t
        return len(found) == len(want)

    # what each read partition reaches: the first record a cut one leaves unread (its last read is no newer),
    # the last record of one read to its end
    top = {**{k: hi - 1 for k, (_, hi) in read.items()}, **cut}
    for k, at in top.items():
        if k not in cut and k in (newest or {}):
            seen[k].setdefault(at, (newest or {})[k])
    if not look({k: at for k, at in top.items() if at not in seen[k]}):
        return kept
    if not look({k: lo for k, (lo, _) in read.items() if lo not in seen[k]}):
        return kept
    doubtful = {
        k: r for k, r in read.items() if k in (falls or set()) or _flat(seen[k], r[0], top[k], tolerance_ms)
    }
    if not look(_middles(doubtful, top, seen)):
        return kept
    reach = {k: seen[k][at] for k, at in top.items()}
    # a record known older than one before it in its partition: the run ended on the way, where it is found
    ended = {
        k: _Bracket(lo - 1, None, top[k], reach[k]).seeded(seen[k], None, tolerance_ms)
        for k, (lo, _) in read.items()
        if _falls(seen[k], lo, top[k], tolerance_ms)
    }
    dropped = _searched(ended, look, seen, None, tolerance_ms)
    if dropped is None:
        return kept
    last = {**reach, **{k: b.ta for k, b in dropped.items() if b.ta is not None}}
    # a partition read to the end of its run holds the others back as one the limit cut there
    horizon = min(last[k] for k in {*cut, *(k for k, b in dropped.items() if b.ta is not None)})
    # per partition read past the horizon (and the tolerance): its first record newer than the horizon, or
    # the end of its run, is in (a, b]; b is the first unread record of a cut partition, the last record of
    # one read to its end, the end of the run of one searched above
    search = {
        k: _Bracket(lo - 1, None, *_past(dropped.get(k), top[k], reach[k])).seeded(
            seen[k], horizon, tolerance_ms
        )
        for k, (lo, _) in read.items()
        if last[k] > horizon + tolerance_ms
    }
    searched = _searched(search, look, seen, horizon, tolerance_ms)
    if searched is None:
        return kept
    out: Offsets = {t: dict(ps) for t, ps in capped.items()}
    for (t, p), b in {**dropped, **searched}.items():
        out[t][p] = b.end()
    # records out of order around the horizon could leave nothing to read: the stream must go on
    if any(out[t][p] > lo for (t, p), (lo, _) in read.items()):
        return out
    return kept


def _falls(times: dict[int, int], lo: int, top: int, tolerance_ms: int) -> bool:
    """Whether a record time known in ``[lo, top]`` (``times``: offset -> time) is older, by more than the
    tolerance, than one known before it there (the later one may be newer again than both: a tail that
    rises past the end of the run before it)."""
    peak: int | None = None
    for at in sorted(at for at in times if lo <= at <= top):
        if peak is not None and times[at] < peak - tolerance_ms:
            return True
        peak = times[at] if peak is None else max(peak, times[at])
    return False


def _flat(times: dict[int, int], lo: int, top: int, tolerance_ms: int) -> bool:
    """Whether the record a partition reaches (``top``) is no newer, by more than the tolerance, than its first
    record read (``lo``; ``times``: offset -> time): a burst, or a run that ended between them and a tail
    that rose again to about where the range starts (a drop the two look-ups cannot tell apart)."""
    return lo in times and top in times and times[top] <= times[lo] + tolerance_ms


def _middles(
    read: dict[Key, tuple[int, int]], top: dict[Key, int], seen: dict[Key, dict[int, int]]
) -> dict[Key, int]:
    """Return the offset halfway between the first record read and the one a partition reaches (``top``),
    per partition of ``read`` with no record time known in between yet (``seen``): a run that ends between
    them and a tail after it whose times stay above the first record's leave the two alike (a drop hidden
    between look-ups)."""
    out: dict[Key, int] = {}
    for k, (lo, _) in read.items():
        if top[k] - lo > 1 and not any(lo < at < top[k] for at in seen[k]):
            out[k] = (lo + top[k]) // 2
    return out


def _past(bracket: _Bracket | None, top: int, reach: int) -> tuple[int, int]:
    """Return (offset, time) of the record a partition is read short of: the end of its run where one was
    searched (``bracket``), else ``top`` at ``reach``."""
    return (bracket.b, bracket.tb) if bracket is not None else (top, reach)


def _searched(
    search: dict[Key, _Bracket],
    look: Callable[[dict[Key, int]], bool],
    seen: dict[Key, dict[int, int]],
    horizon: int | None,
    tolerance_ms: int,
) -> dict[Key, _Bracket] | None:
    """Return the brackets of ``search`` narrowed until closed (:meth:`_Bracket.open`), one look-up per open
    partition a round (``look`` records the times found in ``seen``); None when a record has no time."""
    while any(b.open(tolerance_ms, horizon) for b in search.values()):
        probe = {k: b.probe(horizon) for k, b in search.items() if b.open(tolerance_ms, horizon)}
        if not look({k: at for k, at in probe.items() if at not in seen[k]}):
            return None
        for k, at in probe.items():
            search[k] = search[k].narrowed(at, seen[k][at], horizon, tolerance_ms)
    return search


@dataclass(frozen=True)
class _Bracket:
    """Offsets ``a`` (its record at or before the horizon and in the partition's run; ``ta`` its time, None
    for the one before the start) and ``b`` (its record newer, at ``tb``, or older than the run by more than
    the tolerance: the run ended): the first such record is in ``(a, b]``. ``peak``: the newest time known
    at or before ``a``. ``halve`` says that the next probe bisects (an interpolation that did not halve the
    bracket is not tried twice in a row). A horizon of None looks for the end of the run alone."""

    a: int
    ta: int | None
    b: int
    tb: int
    halve: bool = False
    peak: int | None = None

    def open(self, tolerance_ms: int, horizon: int | None) -> bool:
        """Whether to look further: more than one record in the bracket, and its times not within the
        tolerance (then reading through ``a`` leaves no record unread older than ``tb`` less it); a bracket
        that ends on a drop (``tb`` not newer than the horizon) is narrowed to one record."""
        if self.b - self.a <= 1:
            return False
        drop = horizon is None or self.tb <= horizon
        return drop or self.ta is None or self.tb - self.ta > tolerance_ms

    def end(self) -> int:
        """The partition's end: the first newer record, or past ``a`` where the bracket closed on time."""
        return self.b if self.b - self.a <= 1 else self.a + 1

    def probe(self, horizon: int | None) -> int:
        """The offset to look at next: where the horizon falls between the times of ``a`` and ``b`` (record
        times grow about evenly with offsets), else halfway."""
        if self.halve or self.ta is None or horizon is None or not self.ta <= horizon < self.tb:
            return (self.a + self.b) // 2
        at = self.a + 1 + (self.b - self.a - 1) * (horizon - self.ta) // (self.tb - self.ta)
        return min(max(at, self.a + 1), self.b - 1)

    def past(self, t: int, horizon: int | None, tolerance_ms: int) -> bool:
        """Whether a record at ``t`` after ``a`` is newer than the horizon or ends the run (older than
        :attr:`peak` by more than the tolerance)."""
        return (horizon is not None and t > horizon) or (
            self.peak is not None and t < self.peak - tolerance_ms
        )

    def seeded(self, times: dict[int, int], horizon: int | None, tolerance_ms: int) -> _Bracket:
        """The bracket narrowed by the record ``times`` known in it (offset -> time), in offset order up to
        the first one past (:meth:`past`). The first record read (just after ``a``) sets :attr:`peak` but not
        ``a``: a bracket closed on the tolerance there would read one record."""
        out = self
        for at in sorted(at for at in times if self.a < at < self.b):
            t = times[at]
            if out.past(t, horizon, tolerance_ms):
                return dataclasses.replace(out, b=at, tb=t)
            peak = t if out.peak is None else max(out.peak, t)
            out = (
                dataclasses.replace(out, peak=peak)
                if at == self.a + 1
                else dataclasses.replace(out, a=at, ta=t, peak=peak)
            )
        return out

    def narrowed(self, at: int, t: int, horizon: int | None, tolerance_ms: int) -> _Bracket:
        """The bracket once the record at ``at`` is known to be at ``t``."""
        width = self.b - self.a
        if self.past(t, horizon, tolerance_ms):
            nxt = dataclasses.replace(self, b=at, tb=t)
        else:
            nxt = dataclasses.replace(self, a=at, ta=t, peak=t if self.peak is None else max(self.peak, t))
        return dataclasses.replace(nxt, halve=not self.halve and 2 * (nxt.b - nxt.a) > width)


def first_stamped(
    times_at: TimesAt, at_ms: int, lows: dict[Key, int], highs: dict[Key, int]
) -> dict[Key, int]:
    """Return, per partition of ``highs``, the first offset in ``[low, high)`` whose record is stamped at or
    after ``at_ms``, ``high`` when none is (:func:`_stamped_from`: a partition may end in records older than
    its middle), all partitions in each round of look-ups. A partition whose record has no time answers
    ``low`` (read it all)."""
    searches = {k: _stamped_from(lows[k], hi, at_ms) for k, hi in highs.items()}
    out: dict[Key, int] = {}
    want: dict[Key, int] = {}
    for k, search in searches.items():
        try:
            want[k] = next(search)
        except StopIteration as done:
            out[k] = done.value
    while want:
        found = times_at(want)
        asked, want = want, {}
        for k in asked:
            try:
                want[k] = searches[k].send(found.get(k))
            except StopIteration as done:
                out[k] = done.value
    return out


def _stamped_from(low: int, high: int, at_ms: int) -> Generator[int, int | None, int]:
    """Search one partition (see :func:`first_stamped`): yields the offsets to look up, is sent their times
    (None: no time), returns the offset found.

    Looks back from ``high`` 1, 2, 4, ... records down to ``low``; then, in offset order, the first pair of
    those samples that crosses ``at_ms`` is halved down to the first record at or after it. A record older
    than one before it ends a run of rising times (a tail copied, a burst of old records): a pair whose later
    sample is older than its earlier one holds the end of a run, which is halved first (its last records
    may be at or after ``at_ms``). About ``3 log2(n)`` look-ups for ``n`` records."""
    if high <= low:
        return high
    samples: dict[int, int] = {}
    step = 1
    while True:
        at = max(high - step, low)
        t = yield at
        if t is None:
            return low
        samples[at] = t
        if at == low:
            break
        step *= 2
    if samples[low] >= at_ms:
        return low
    order = sorted(samples)
    for x, y in zip(order, order[1:], strict=False):
        tx, ty = samples[x], samples[y]
        if ty >= tx and ty < at_ms:
            continue
        peak, crossing = tx, ty >= at_ms
        while y - x > 1:  # the first record in (x, y] at or after at_ms, or that ends x's run
            m = (x + y) // 2
            t = yield m
            if t is None:
                return low
            if t >= at_ms or t < peak:
                y, ty = m, t
            else:
                x, peak = m, max(peak, t)
        if crossing or ty >= at_ms:
            return y  # (from the end of a run there when it ended before at_ms: the crossing is after it)
        # x's run ended before at_ms: the records at or after it are further on
    return high


def offsets_back_to(consumer: Consumer, at_ms: int, highs: Offsets, timeout: float = 10.0) -> Offsets:
    """Return, per partition of ``highs`` (offsets read so far), the first offset at or before it whose
    record is stamped at or after ``at_ms`` (:func:`first_stamped`, looked up by record times), within the
    partition's bounds. ``offsets_for_times`` is not used: tansu answers it by the broker's append time of
    each record batch, and a backlog loaded after its events answers offset 0 (the whole topic again).
    Raises SourceError when the broker cannot be reached."""
    tps = [TopicPartition(t, int(p)) for t, ps in highs.items() for p in ps]
    firsts, ends = beginning_offsets(consumer, tps, timeout), end_offsets(consumer, tps, timeout)
    lows = {(t, p): firsts[t][p] for t, ps in highs.items() for p in ps}
    tops = {
        (t, p): max(min(int(hi), ends[t][p]), lows[(t, p)]) for t, ps in highs.items() for p, hi in ps.items()
    }
    found = first_stamped(lambda want: record_times(consumer, want, timeout), at_ms, lows, tops)
    out: Offsets = {}
    for (t, p), off in sorted(found.items()):
        out.setdefault(t, {})[p] = off
    return out


def record_times(consumer: Consumer, wanted: dict[Key, int], timeout: float = 10.0) -> dict[Key, int]:
    """Return the Kafka timestamp (epoch ms) of the record at each wanted offset, leaving out a record with
    none. Partitions are fetched one after another: tansu answers a fetch of several partitions in the middle
    of a backlog in 0.1-1.8 s, each of them alone in ~5-20 ms (4 partitions of 500k records; noida-db may
    send whole partitions to a fetch of several and not answer at all). Raises SourceError when a fetch fails
    or the look-ups do not end within ``timeout``, or by the deadline of the plan that looks them up
    (:class:`_Memo`), whichever comes first."""
    deadline = time.monotonic() + timeout
    plan = _PLAN_DEADLINE.get()
    if plan is not None and plan < deadline:
        deadline, timeout = plan, max(plan - time.monotonic(), 0.0)
    out: dict[Key, int] = {}
    for key, offset in wanted.items():
        found = _record_time(consumer, key, offset, deadline, timeout)
        if found is not None:
            out[key] = found
    return out


def _record_time(consumer: Consumer, key: Key, offset: int, deadline: float, timeout: float) -> int | None:
    """Return the Kafka timestamp of the record at ``offset`` of partition ``key`` (the first one at or after
    it), None when it has none or the partition ends before it. Raises SourceError when the fetch fails or
    does not answer by ``deadline``."""
    consumer.assign([TopicPartition(key[0], int(key[1]), offset)])
    try:
        while True:
            if time.monotonic() >= deadline:
                raise SourceError(
                    f"no answer to a fetch of {key[0]}[{key[1]}] at {offset} within {timeout:.1f} s"
                )
            msg = consumer.poll(min(0.2, max(deadline - time.monotonic(), 0.001)))
            if msg is None or (str(msg.topic()), str(msg.partition())) != key:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return None  # nothing there (deleted meanwhile): no time
                raise SourceError(f"fetch from {key[0]}[{key[1]}] failed: {err.str()}")
            at = msg.offset()
            if at is None or at < offset:
                continue  # the first record at or after the offset (a transaction's marker has none)
            kind, ts = msg.timestamp()
            return int(ts) if kind != TIMESTAMP_NOT_AVAILABLE and ts > 0 else None
    except KafkaException as exc:
        raise SourceError(f"cannot fetch record times: {exc.args[0]}") from None
    finally:
        consumer.unassign()
