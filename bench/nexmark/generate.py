"""Nexmark's events, vectorised with numpy and seeded: Person, Auction and Bid as Nexmark's generator makes them.

The rules are those of nexmark-flink's generator (``GeneratorConfig``, ``model/*Generator``,
``NexmarkGenerator``) with its default configuration; only the random draws differ (numpy, not Java's
``SplittableRandom``), so the distribution is Nexmark's and the values are this module's, the same for
the same seed:

* event ``n`` (from 0) is a person, an auction or a bid by ``n % 50`` against the mix 1 : 3 : 46; its time
  is ``base + floor(n * 1e6 / rate µs) / 1000`` ms (``rate`` events per second of event time, Nexmark's
  ``firstEventRate``, 10,000 by default): events are in time order, nothing is late;
* ids: a person's id is the number of persons before it + 1000, an auction's likewise; an auction's
  seller is, 3 times in 4, the first of the last 100 persons (a hot seller), else one of the last 1,000
  persons or 10 ids ahead; a bid's auction is, 1 time in 2, the first of the last 100 auctions (a hot
  auction), else one of the last 100 auctions or 10 ahead; its bidder, 3 times in 4, the second of the
  last 100 persons, else one of the last 1,000 persons or 10 ahead; like Nexmark's generator, a bid's
  bidder gets the first person id (1000) added twice;
* prices are ``round(10 ** U(0, 6) * 100)``; an auction's reserve is its initial bid plus another price,
  its category 10-14, its length up to twice the time of the next 1,666 events;
* a bid comes 1 time in 2 from a hot channel (Google, Facebook, Baidu, Apple, each with one URL), else
  from one of 10,000 channels ``channel-i`` whose URL has ``&channel_id=<i's bits reversed>`` 9 times in
  10; URLs are ``https://www.nexmark.com/<a>/<b>/<c>/item.htm?query=1``;
* names, e-mail addresses, credit cards, cities and states from Nexmark's lists; ``extra`` pads each
  event to Nexmark's average size (person 200, auction 500, bid 100 bytes) ±20% with a slice of one
  1 MiB random string.

Events are made in chunks of :data:`CHUNK` with a random generator per (seed, chunk), so a longer run
begins with the chunks of a shorter one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TABLES = ("person", "auction", "bid")
MESSAGES = {"person": "nexmark.Person", "auction": "nexmark.Auction", "bid": "nexmark.Bid"}
CHUNK = 1_000_000
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
HOT_SELLER_BATCH = HOT_AUCTION_BATCH = HOT_BIDDER_BATCH = 100
PERSON_ID_LEAD = AUCTION_ID_LEAD = 10
US_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
US_CITIES = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
]
FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS = 10_000
EXTRA_POOL = 1024 * 1024
#: 2026-03-02 07:59:00 UTC: a run of a few minutes spans 8 o'clock (q14's day and other times)
DEFAULT_BASE = datetime(2026, 3, 2, 7, 59, tzinfo=UTC)


@dataclass(frozen=True)
class Config:
    """Nexmark's generator settings (its defaults): the mix, the hot ratios, the sizes and the event rate."""

    rate: float = 10_000.0
    base: datetime = DEFAULT_BASE
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    in_flight_auctions: int = 100
    active_people: int = 1000
    person_bytes: int = 200
    auction_bytes: int = 500
    bid_bytes: int = 100

    @property
    def total(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    @property
    def base_ms(self) -> int:
        return int(self.base.timestamp() * 1000)

    def time_ms(self, n: np.ndarray) -> np.ndarray:
        """The event time (epoch ms) of event number ``n``."""
        return self.base_ms + (n * (1e6 / self.rate)).astype(np.int64) // 1000


@dataclass(frozen=True)
class Events:
    """Generated events: one Arrow table per event type (columns as the proto's fields, times as
    ``timestamp[ms, UTC]``), each in event order, with each row's event number in ``numbers``."""

    tables: dict[str, pa.Table]
    numbers: dict[str, np.ndarray] = field(repr=False)

    def __len__(self) -> int:
        return sum(t.num_rows for t in self.tables.values())


# --------------------------------------------------------------------------- ids (Nexmark's arithmetic)


def last_person(c: Config, event: np.ndarray) -> np.ndarray:
    """The base-0 id of the last person made at or before event ``event``."""
    epoch, offset = event // c.total, event % c.total
    offset = np.where(offset >= c.person_proportion, c.person_proportion - 1, offset)
    return epoch * c.person_proportion + offset


def last_auction(c: Config, event: np.ndarray) -> np.ndarray:
    """The base-0 id of the last auction made at or before event ``event``."""
    epoch, offset = event // c.total, event % c.total
    person = offset < c.person_proportion
    bid = offset >= c.person_proportion + c.auction_proportion
    epoch = np.where(person, epoch - 1, epoch)
    offset = np.where(person | bid, c.auction_proportion - 1, offset - c.person_proportion)
    return epoch * c.auction_proportion + offset


def _below(rng: np.random.Generator, bound: np.ndarray) -> np.ndarray:
    """A uniform integer in [0, bound) per element."""
    return (rng.random(len(bound)) * bound).astype(np.int64)


def next_person(rng: np.random.Generator, c: Config, event: np.ndarray) -> np.ndarray:
    """A random base-0 person id among the active people, or a few ahead."""
    people = last_person(c, event) + 1
    active = np.minimum(people, c.active_people)
    return people - active + _below(rng, active + PERSON_ID_LEAD)


def next_auction(rng: np.random.Generator, c: Config, event: np.ndarray) -> np.ndarray:
    """A random base-0 auction id among the auctions likely still open, or a few ahead."""
    hi = last_auction(c, event)
    lo = np.maximum(hi - c.in_flight_auctions, 0)
    return lo + _below(rng, hi - lo + 1 + AUCTION_ID_LEAD)


def prices(rng: np.random.Generator, n: int) -> np.ndarray:
    """Nexmark's prices: ``Math.round(10 ** U(0, 6) * 100)``."""
    return np.floor(10.0 ** (rng.random(n) * 6.0) * 100.0 + 0.5).astype(np.int64)


# --------------------------------------------------------------------------- strings, without a loop


def gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Return the strings ``buf[starts[i]:starts[i] + lengths[i]]`` (ASCII bytes) as an Arrow string array."""
    lengths = lengths.astype(np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.arange(offsets[-1], dtype=np.int64) - np.repeat(
        offsets[:-1] - starts.astype(np.int64), lengths
    )
    data = buf[index]
    return pa.LargeStringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(data)).cast(
        pa.string()
    )


def random_strings(rng: np.random.Generator, n: int, max_length: int, special: str = " ") -> pa.Array:
    """Nexmark's ``nextString``: 3 to ``max_length - 1`` characters, each ``special`` 1 time in 13 else a
    lower-case letter; a space ``special`` is trimmed from both ends."""
    width = max_length - 1
    length = 3 + _below(rng, np.full(n, max_length - 3))
    chars = (rng.integers(0, 26, (n, width), dtype=np.uint8) + ord("a")).astype(np.uint8)
    chars[rng.integers(0, 13, (n, width)) == 0] = ord(special)
    inside = np.arange(width)[None, :] < length[:, None]
    if special == " ":
        keep = inside & (chars != ord(" "))
        first = keep.argmax(axis=1)
        last = width - 1 - keep[:, ::-1].argmax(axis=1)
        starts, lengths = first, np.where(keep.any(axis=1), last - first + 1, 0)
    else:
        starts, lengths = np.zeros(n, dtype=np.int64), length
    return gather(chars.reshape(-1), np.arange(n, dtype=np.int64) * width + starts, lengths)


@dataclass(frozen=True)
class Fixed:
    """What Nexmark's generator makes once per run: the padding pool, the hot URLs, the 10,000 channels."""

    pool: np.ndarray
    channels: pa.Array  # hot channels first, then channel-0 .. channel-9999
    urls: pa.Array


def _fixed(seed: int) -> Fixed:
    rng = np.random.default_rng([seed, 1 << 40])
    pool = rng.integers(ord("a"), ord("z") + 1, EXTRA_POOL, dtype=np.uint8)
    n = len(HOT_CHANNELS) + CHANNELS
    parts = [random_strings(rng, n, 5, "_") for _ in range(3)]
    base = pc.binary_join_element_wise(
        "https://www.nexmark.com", parts[0], parts[1], parts[2], "item.htm?query=1", "/"
    )
    i = np.arange(CHANNELS, dtype=np.uint32)
    bits = np.zeros(CHANNELS, dtype=np.uint32)
    for b in range(32):  # Java's Integer.reverse, then Math.abs of it as a signed int
        bits |= ((i >> np.uint32(b)) & np.uint32(1)) << np.uint32(31 - b)
    channel_id = np.abs(bits.view(np.int32)).astype(np.int64)  # abs(MIN_VALUE) stays negative, as in Java
    with_id = rng.integers(0, 10, CHANNELS) > 0
    ids = pa.array(channel_id).cast(pa.string())
    suffix = pc.if_else(pa.array(with_id), pc.binary_join_element_wise("&channel_id=", ids, ""), "")
    urls = pa.concat_arrays(
        [
            base.slice(0, len(HOT_CHANNELS)),
            pc.binary_join_element_wise(base.slice(len(HOT_CHANNELS)), suffix, ""),
        ]
    )
    names = pc.binary_join_element_wise("channel-", pa.array(i.astype(np.int64)).cast(pa.string()), "")
    channels = pa.concat_arrays([pa.array(HOT_CHANNELS), names])
    return Fixed(pool, channels, urls)


def extras(rng: np.random.Generator, fixed: Fixed, current: np.ndarray, desired: int) -> pa.Array:
    """Nexmark's ``nextExtra``: padding to ``desired`` bytes on average, ±20%, a slice of the pool."""
    want = np.maximum(desired - current, 0)
    delta = np.floor(want * 0.2 + 0.5).astype(np.int64)
    size = want - delta + _below(rng, 2 * delta)
    size = np.where(current > desired, 0, size)
    starts = _below(rng, np.full(len(size), len(fixed.pool)) - size)
    return gather(fixed.pool, starts, size)


def _pick(values: list[str], rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(values).take(pa.array(rng.integers(0, len(values), n)))


def _ms(values: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.timestamp("ms", tz="UTC"))


# --------------------------------------------------------------------------- the three event types


def persons(rng: np.random.Generator, c: Config, fixed: Fixed, event: np.ndarray) -> pa.Table:
    n = len(event)
    name = pc.binary_join_element_wise(_pick(FIRST_NAMES, rng, n), _pick(LAST_NAMES, rng, n), " ")
    email = pc.binary_join_element_wise(random_strings(rng, n, 7), "@", random_strings(rng, n, 5), ".com", "")
    digits = rng.integers(0, 10, (n, 16), dtype=np.uint8) + ord("0")
    card = np.full((n, 19), ord(" "), dtype=np.uint8)
    for g in range(4):
        card[:, g * 5 : g * 5 + 4] = digits[:, g * 4 : g * 4 + 4]
    card_text = gather(card.reshape(-1), np.arange(n, dtype=np.int64) * 19, np.full(n, 19))
    city, state = _pick(US_CITIES, rng, n), _pick(US_STATES, rng, n)
    size = 8 + sum(
        pc.utf8_length(a).to_numpy(zero_copy_only=False) for a in (name, email, card_text, city, state)
    )
    return pa.table(
        {
            "id": last_person(c, event) + FIRST_PERSON_ID,
            "name": name,
            "emailAddress": email,
            "creditCard": card_text,
            "city": city,
            "state": state,
            "dateTime": _ms(c.time_ms(event)),
            "extra": extras(rng, fixed, size, c.person_bytes),
        }
    )


def auctions(rng: np.random.Generator, c: Config, fixed: Fixed, event: np.ndarray) -> pa.Table:
    n = len(event)
    hot = _below(rng, np.full(n, c.hot_sellers_ratio)) > 0
    seller = (
        np.where(
            hot, last_person(c, event) // HOT_SELLER_BATCH * HOT_SELLER_BATCH, next_person(rng, c, event)
        )
        + FIRST_PERSON_ID
    )
    category = FIRST_CATEGORY_ID + rng.integers(0, NUM_CATEGORIES, n)
    initial = prices(rng, n)
    t = c.time_ms(event)
    ahead = c.in_flight_auctions * c.total // c.auction_proportion
    horizon = c.time_ms(event + ahead) - t
    expires = t + 1 + _below(rng, np.maximum(horizon * 2, 1))
    name, desc = random_strings(rng, n, 20), random_strings(rng, n, 100)
    reserve = initial + prices(rng, n)
    size = (
        8
        + pc.utf8_length(name).to_numpy(zero_copy_only=False)
        + pc.utf8_length(desc).to_numpy(zero_copy_only=False)
        + 40
    )
    return pa.table(
        {
            "id": last_auction(c, event) + FIRST_AUCTION_ID,
            "itemName": name,
            "description": desc,
            "initialBid": initial,
            "reserve": reserve,
            "dateTime": _ms(t),
            "expires": _ms(expires),
            "seller": seller,
            "category": category,
            "extra": extras(rng, fixed, size, c.auction_bytes),
        }
    )


def bids(rng: np.random.Generator, c: Config, fixed: Fixed, event: np.ndarray) -> pa.Table:
    n = len(event)
    hot_auction = _below(rng, np.full(n, c.hot_auction_ratio)) > 0
    auction = (
        np.where(
            hot_auction,
            last_auction(c, event) // HOT_AUCTION_BATCH * HOT_AUCTION_BATCH,
            next_auction(rng, c, event),
        )
        + FIRST_AUCTION_ID
    )
    hot_bidder = _below(rng, np.full(n, c.hot_bidders_ratio)) > 0
    bidder = (
        np.where(
            hot_bidder,
            last_person(c, event) // HOT_BIDDER_BATCH * HOT_BIDDER_BATCH + 1,
            next_person(rng, c, event),
        )
        + 2 * FIRST_PERSON_ID
    )
    price = prices(rng, n)
    hot_channel = rng.integers(0, 2, n) > 0
    which = np.where(
        hot_channel, rng.integers(0, len(HOT_CHANNELS), n), len(HOT_CHANNELS) + rng.integers(0, CHANNELS, n)
    )
    take = pa.array(which)
    return pa.table(
        {
            "auction": auction,
            "bidder": bidder,
            "price": price,
            "channel": fixed.channels.take(take),
            "url": fixed.urls.take(take),
            "dateTime": _ms(c.time_ms(event)),
            "extra": extras(rng, fixed, np.full(n, 32), c.bid_bytes),
        }
    )


MAKERS = {"person": persons, "auction": auctions, "bid": bids}


def kinds(c: Config, event: np.ndarray) -> np.ndarray:
    """0 (person), 1 (auction) or 2 (bid) for each event number, by Nexmark's mix."""
    rem = event % c.total
    return np.where(
        rem < c.person_proportion, 0, np.where(rem < c.person_proportion + c.auction_proportion, 1, 2)
    )


def chunk(seed: int, index: int, count: int, c: Config, fixed: Fixed | None = None) -> Events:
    """Events ``index * CHUNK`` to ``index * CHUNK + count - 1`` (count <= CHUNK) of the run ``seed``."""
    fixed = fixed or _fixed(seed)
    rng = np.random.default_rng([seed, index])
    event = np.arange(index * CHUNK, index * CHUNK + count, dtype=np.int64)
    kind = kinds(c, event)
    tables, numbers = {}, {}
    for k, name in enumerate(TABLES):
        numbers[name] = event[kind == k]
        tables[name] = MAKERS[name](rng, c, fixed, numbers[name])
    return Events(tables, numbers)


def chunks(count: int, seed: int, c: Config | None = None) -> Iterator[Events]:
    """The run's ``count`` events, chunk by chunk."""
    c = c or Config()
    fixed = _fixed(seed)
    for index, lo in enumerate(range(0, count, CHUNK)):
        yield chunk(seed, index, min(CHUNK, count - lo), c, fixed)


def generate(count: int, seed: int, c: Config | None = None) -> Events:
    """The run's ``count`` events at once."""
    parts = list(chunks(count, seed, c))
    return Events(
        {t: pa.concat_tables([p.tables[t] for p in parts]) for t in TABLES},
        {t: np.concatenate([p.numbers[t] for p in parts]) for t in TABLES},
    )


# --------------------------------------------------------------------------- closers


#: The marker of the closers: an id of -1 and the text ``closer``; rows carrying either are not compared.
CLOSER_ID = -1
CLOSER_TEXT = "closer"


def closers(at_ms: int) -> dict[str, pa.Table]:
    """One event per table at ``at_ms``: its watermark closes every window before it on Daggers (Flink's end
    of input closes them too). A closer bid is for no auction a query keeps (id -1, no channel id, price 0)."""
    t = _ms(np.array([at_ms]))
    return {
        "person": pa.table(
            {
                "id": [CLOSER_ID],
                "name": [CLOSER_TEXT],
                "emailAddress": [CLOSER_TEXT],
                "creditCard": [CLOSER_TEXT],
                "city": [CLOSER_TEXT],
                "state": [CLOSER_TEXT],
                "dateTime": t,
                "extra": [CLOSER_TEXT],
            }
        ),
        "auction": pa.table(
            {
                "id": [CLOSER_ID],
                "itemName": [CLOSER_TEXT],
                "description": [CLOSER_TEXT],
                "initialBid": [0],
                "reserve": [0],
                "dateTime": t,
                "expires": t,
                "seller": [CLOSER_ID],
                "category": [0],
                "extra": [CLOSER_TEXT],
            }
        ),
        "bid": pa.table(
            {
                "auction": [CLOSER_ID],
                "bidder": [CLOSER_ID],
                "price": [0],
                "channel": [CLOSER_TEXT],
                "url": [CLOSER_TEXT],
                "dateTime": t,
                "extra": [CLOSER_TEXT],
            }
        ),
    }


# --------------------------------------------------------------------------- protobuf and JSON lines


def encode(table_name: str, table: pa.Table) -> list[bytes]:
    """Serialize the rows of ``table`` as the table's protobuf message (one reused message object; a field
    at its default is cleared, so the bytes are those of a fresh message)."""
    from job.schema.registry import default_registry

    msg = default_registry().message_class(MESSAGES[table_name])()
    names, columns = [], []
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            ms = col.cast(pa.int64()).to_numpy()
            columns.append(list(zip((ms // 1000).tolist(), (ms % 1000 * 1_000_000).tolist(), strict=True)))
        else:
            columns.append(col.to_pylist())
        names.append(name)
    stamps = {n: getattr(msg, n) for n in names if pa.types.is_timestamp(table.column(n).type)}
    plain = [i for i, n in enumerate(names) if n not in stamps]
    timed = [(i, stamps[n]) for i, n in enumerate(names) if n in stamps]
    ser, out = msg.SerializeToString, []
    append = out.append
    for values in zip(*columns, strict=True):
        for i in plain:
            setattr(msg, names[i], values[i])
        for i, ts in timed:
            ts.seconds, ts.nanos = values[i]
        append(ser())
    return out


def json_lines(table: pa.Table) -> bytes:
    """The rows of ``table`` as JSON lines as Flink's ``json`` format reads them (times as ``yyyy-MM-dd
    HH:mm:ss.SSS``), built column-wise by Arrow (the generated strings need no escaping)."""
    if table.num_rows == 0:
        return b""
    parts: list[Any] = []
    for i, name in enumerate(table.column_names):
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            text = col.cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("ms")).cast(pa.string())
            value = pc.binary_join_element_wise('"', text, '"', "")
        elif pa.types.is_string(col.type):
            value = pc.binary_join_element_wise('"', col, '"', "")
        else:
            value = col.cast(pa.string())
        parts += ["{" if i == 0 else ",", f'"{name}":', value]
    parts.append("}\n")
    lines = pc.binary_join_element_wise(*parts, "").cast(pa.large_string()).combine_chunks()
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64, count=len(lines) + 1, offset=lines.offset * 8)
    return lines.buffers()[2].to_pybytes()[offsets[0] : offsets[-1]]


def write_json(events: dict[str, pa.Table], folder: Path, parts: int = 1) -> dict[str, str]:
    """Write each table as JSON lines under ``<folder>/<table>/`` (``parts`` files, row i in file i % parts, so
    each file is in time order); return {table: its folder} (a Flink filesystem table reads a folder)."""
    out = {}
    for name, table in events.items():
        where = folder / name
        where.mkdir(parents=True, exist_ok=True)
        index = np.arange(table.num_rows)
        for k in range(parts):
            rows = table if parts == 1 else table.take(pa.array(index[k::parts]))
            (where / f"part-{k}.jsonl").write_bytes(json_lines(rows))
        out[name] = str(where)
    return out


def append_json(events: dict[str, pa.Table], files: dict[str, str], parts: int = 1, first: int = 0) -> None:
    """Append more rows to the files :func:`write_json` made (row ``first + i`` of a table in file
    ``(first + i) % parts``)."""
    for name, table in events.items():
        index = np.arange(table.num_rows)
        for k in range(parts):
            take = index[(k - first) % parts :: parts]
            with (Path(files[name]) / f"part-{k}.jsonl").open("ab") as fh:
                fh.write(json_lines(table.take(pa.array(take))))


def describe(events: Events) -> str:
    """One line: how many events of each type."""
    return json.dumps({t: events.tables[t].num_rows for t in TABLES})
