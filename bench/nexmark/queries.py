"""Nexmark's queries (nexmark-flink/src/main/resources/queries/q*.sql): what Flink runs and what a dagger runs.

Both engines read three tables, ``person``, ``auction`` and ``bid``, with the columns of Nexmark's views
(``ddl_views.sql``) and a watermark 4 s behind ``dateTime`` (Nexmark's DDL). ``flink`` is the SELECT of
Nexmark's ``INSERT INTO nexmark_qN`` as it is written, except where :attr:`Query.flink_change` says why;
``dagger`` is the same query in Dagger SQL (``rowtime`` is the event time, the proto's ``dateTime``), and
:attr:`Query.port` says what the port changes. :data:`REFUSED` are the queries Daggers refuses, each with
what ``daggers sql check`` must say.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Nexmark's watermark delay (its DDL: ``WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND``)
WATERMARK_DELAY_S = 4


@dataclass(frozen=True)
class Query:
    """One Nexmark query on both engines."""

    id: str
    what: str
    tables: tuple[str, ...]
    flink: str
    dagger: str
    port: str = ""  #: what the Dagger SQL changes from Nexmark's text, and why
    flink_change: str = ""  #: what Flink runs differently from Nexmark's text, and why


#: Nexmark's q14 calls a Java UDF, ``count_char(extra, 'c')``: both engines count with built-ins instead.
COUNT_CHAR = "CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', ''))"

_Q14_CASE = """CASE
        WHEN HOUR({t}) >= 8 AND HOUR({t}) <= 18 THEN 'dayTime'
        WHEN HOUR({t}) <= 6 OR HOUR({t}) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END"""

_Q21_SELECT = """SELECT
    auction, bidder, price, channel,
    CASE
        WHEN lower(channel) = 'apple' THEN '0'
        WHEN lower(channel) = 'google' THEN '1'
        WHEN lower(channel) = 'facebook' THEN '2'
        WHEN lower(channel) = 'baidu' THEN '3'
        ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
        END
    AS channel_id FROM bid
    where REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) is not null or
          lower(channel) in ('apple', 'google', 'facebook', 'baidu')"""

_Q22_SELECT = """SELECT
    auction, bidder, price, channel,
    SPLIT_INDEX(url, '/', 3) as dir1,
    SPLIT_INDEX(url, '/', 4) as dir2,
    SPLIT_INDEX(url, '/', 5) as dir3 FROM bid"""


_Q3_SELECT = """SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person AS P on A.seller = P.id
WHERE
    A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')"""

_Q20_SELECT = """SELECT
    auction, bidder, price, channel, url, B.`dateTime` AS bid_dateTime, B.extra AS bid_extra,
    itemName, description, initialBid, reserve, A.`dateTime` AS auction_dateTime, expires, seller, category,
    A.extra AS auction_extra
FROM
    bid AS B INNER JOIN auction AS A on B.auction = A.id
WHERE A.category = 10"""


def _stats(time: str, window: str, keys: str, extra: str, distinct: bool = True) -> str:
    """q15/q16's aggregates over ``bid`` grouped by ``window`` and ``keys``; ``distinct``: COUNT(DISTINCT x), else
    Dagger SQL's DistinctCount(x)."""
    text = f"""SELECT
     {keys}DATE_FORMAT({window}_START({time}, INTERVAL '1' DAY), 'yyyy-MM-dd') as `day`,{extra}
     count(*) AS total_bids,
     count(*) filter (where price < 10000) AS rank1_bids,
     count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
     count(*) filter (where price >= 1000000) AS rank3_bids,
     count(distinct bidder) AS total_bidders,
     count(distinct bidder) filter (where price < 10000) AS rank1_bidders,
     count(distinct bidder) filter (where price >= 10000 and price < 1000000) AS rank2_bidders,
     count(distinct bidder) filter (where price >= 1000000) AS rank3_bidders,
     count(distinct auction) AS total_auctions,
     count(distinct auction) filter (where price < 10000) AS rank1_auctions,
     count(distinct auction) filter (where price >= 10000 and price < 1000000) AS rank2_auctions,
     count(distinct auction) filter (where price >= 1000000) AS rank3_auctions
FROM bid
GROUP BY {keys}{window}({time}, INTERVAL '1' DAY)"""
    return text if distinct else text.replace("count(distinct ", "DistinctCount(")


QUERIES: tuple[Query, ...] = (
    Query(
        "q0",
        "pass through",
        ("bid",),
        "SELECT auction, bidder, price, `dateTime`, extra FROM bid",
        "SELECT auction, bidder, price, `dateTime`, extra FROM bid",
    ),
    Query(
        "q1",
        "currency conversion",
        ("bid",),
        """SELECT
    auction,
    bidder,
    0.908 * price as price, -- convert dollar to euro
    `dateTime`,
    extra
FROM bid""",
        """SELECT
    auction,
    bidder,
    0.908 * price as price, -- convert dollar to euro
    `dateTime`,
    extra
FROM bid""",
    ),
    Query(
        "q2",
        "selection",
        ("bid",),
        "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0",
        "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0",
    ),
    Query(
        "q11",
        "user sessions (SESSION window)",
        ("bid",),
        """SELECT
    B.bidder,
    count(*) as bid_count,
    SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) as starttime,
    SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) as endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND)""",
        """SELECT
    B.bidder,
    count(*) as bid_count,
    SESSION_START(B.rowtime, INTERVAL '10' SECOND) as starttime,
    SESSION_END(B.rowtime, INTERVAL '10' SECOND) as endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.rowtime, INTERVAL '10' SECOND)""",
        port="the window is over rowtime, the event time a dagger keeps its watermark on",
    ),
    Query(
        "q14",
        "calculation",
        ("bid",),
        f"""SELECT
    auction,
    bidder,
    0.908 * price as price,
    {_Q14_CASE.format(t="`dateTime`")} AS bidTimeType,
    `dateTime`,
    extra,
    {COUNT_CHAR} AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
        f"""SELECT
    auction,
    bidder,
    0.908 * price as price,
    {_Q14_CASE.format(t="`dateTime`")} AS bidTimeType,
    `dateTime`,
    extra,
    {COUNT_CHAR} AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
        port="count_char(extra, 'c') (a Java UDF of Nexmark's) counts with built-ins",
        flink_change="count_char(extra, 'c') (a Java UDF of Nexmark's jar) counts with built-ins",
    ),
    Query("q21", "add channel id (CASE, REGEXP_EXTRACT)", ("bid",), _Q21_SELECT, _Q21_SELECT),
    Query("q22", "URL directories (SPLIT_INDEX)", ("bid",), _Q22_SELECT, _Q22_SELECT),
    Query(
        "q5",
        "hot items (HOP window, its maximum joined back)",
        ("bid",),
        """SELECT AuctionBids.auction, AuctionBids.num
 FROM (
   SELECT
     auction,
     count(*) AS num,
     window_start AS starttime,
     window_end AS endtime
     FROM TABLE(
             HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
     GROUP BY auction, window_start, window_end
 ) AS AuctionBids
 JOIN (
   SELECT
     max(CountBids.num) AS maxn,
     CountBids.starttime,
     CountBids.endtime
   FROM (
     SELECT
       count(*) AS num,
       window_start AS starttime,
       window_end AS endtime
     FROM TABLE(
                HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
     GROUP BY auction, window_start, window_end
     ) AS CountBids
   GROUP BY CountBids.starttime, CountBids.endtime
 ) AS MaxBids
 ON AuctionBids.starttime = MaxBids.starttime AND
    AuctionBids.endtime = MaxBids.endtime AND
    AuctionBids.num >= MaxBids.maxn""",
        """SELECT AuctionBids.auction, AuctionBids.num
 FROM (
   SELECT
     auction,
     count(*) AS num,
     HOP_START(rowtime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS starttime,
     HOP_END(rowtime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS endtime
   FROM bid
   GROUP BY auction, HOP(rowtime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
 ) AS AuctionBids
 JOIN (
   SELECT
     max(CountBids.num) AS maxn,
     TUMBLE_END(CountBids.rt, INTERVAL '2' SECOND) AS endtime
   FROM (
     SELECT
       count(*) AS num,
       HOP_ROWTIME(rowtime, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS rt
     FROM bid
     GROUP BY auction, HOP(rowtime, INTERVAL '2' SECOND, INTERVAL '10' SECOND)
   ) AS CountBids
   GROUP BY TUMBLE(CountBids.rt, INTERVAL '2' SECOND)
 ) AS MaxBids
 ON AuctionBids.endtime = MaxBids.endtime AND
    AuctionBids.num >= MaxBids.maxn""",
        port="group windows (HOP, TUMBLE) for the window table-valued functions; the maximum per window is a "
        "2 s TUMBLE over each HOP window's rowtime (one HOP window ends every 2 s), for a GROUP BY of the "
        "window's bounds that has no window of its own",
    ),
    Query(
        "q7",
        "highest bid (TUMBLE window, its maximum joined back)",
        ("bid",),
        """SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra
from bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end as `dateTime`
  FROM TABLE(
          TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.`dateTime` BETWEEN B1.`dateTime`  - INTERVAL '10' SECOND AND B1.`dateTime`""",
        """SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra
from bid B
JOIN (
  SELECT MAX(price) AS maxprice, TUMBLE_END(rowtime, INTERVAL '10' SECOND) as `dateTime`,
    TUMBLE_ROWTIME(rowtime, INTERVAL '10' SECOND) AS rt
  FROM bid
  GROUP BY TUMBLE(rowtime, INTERVAL '10' SECOND)
) B1
ON B.price = B1.maxprice
  AND B.rowtime BETWEEN B1.rt - INTERVAL '11' SECOND AND B1.rt + INTERVAL '1' SECOND
WHERE B.`dateTime` BETWEEN B1.`dateTime`  - INTERVAL '10' SECOND AND B1.`dateTime`""",
        port="a TUMBLE group window for the table-valued function; the join also bounds the two rowtimes (a "
        "second wider than Nexmark's condition, which stays in WHERE), so Spark runs it as an interval "
        "join whose state the watermark clears",
    ),
    Query(
        "q8",
        "monitor new users (two TUMBLE windows joined)",
        ("person", "auction"),
        """SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name,
        window_start AS starttime,
        window_end AS endtime
  FROM TABLE(
            TUMBLE(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) P
JOIN (
  SELECT seller,
        window_start AS starttime,
        window_end AS endtime
  FROM TABLE(
        TUMBLE(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime""",
        """SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name,
        TUMBLE_START(rowtime, INTERVAL '10' SECOND) AS starttime,
        TUMBLE_END(rowtime, INTERVAL '10' SECOND) AS endtime
  FROM person
  GROUP BY id, name, TUMBLE(rowtime, INTERVAL '10' SECOND)
) P
JOIN (
  SELECT seller,
        TUMBLE_START(rowtime, INTERVAL '10' SECOND) AS starttime,
        TUMBLE_END(rowtime, INTERVAL '10' SECOND) AS endtime
  FROM auction
  GROUP BY seller, TUMBLE(rowtime, INTERVAL '10' SECOND)
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime""",
        port="TUMBLE group windows for the window table-valued functions",
    ),
    Query(
        "q15",
        "bidding statistics (COUNT DISTINCT with FILTER), per day",
        ("bid",),
        _stats("`dateTime`", "TUMBLE", "", ""),
        _stats("rowtime", "TUMBLE", "", "", distinct=False),
        port="a 1-day TUMBLE window over rowtime for Nexmark's GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd'); "
        "DistinctCount(x) for COUNT(DISTINCT x)",
        flink_change="a 1-day TUMBLE window for GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd'): the same rows, "
        "each once, when the day closes (Nexmark's query updates them after every bid)",
    ),
    Query(
        "q16",
        "channel statistics (COUNT DISTINCT with FILTER), per channel and day",
        ("bid",),
        _stats(
            "`dateTime`",
            "TUMBLE",
            "channel,\n     ",
            "\n     max(DATE_FORMAT(`dateTime`, 'HH:mm')) as `minute`,",
        ),
        _stats(
            "rowtime",
            "TUMBLE",
            "channel,\n     ",
            "\n     max(DATE_FORMAT(`dateTime`, 'HH:mm')) as `minute`,",
            distinct=False,
        ),
        port="a 1-day TUMBLE window over rowtime for Nexmark's GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd'); "
        "DistinctCount(x) for COUNT(DISTINCT x)",
        flink_change="a 1-day TUMBLE window for GROUP BY DATE_FORMAT(dateTime, 'yyyy-MM-dd')",
    ),
    Query(
        "q3",
        "local item suggestion (a join with no time bound)",
        ("auction", "person"),
        _Q3_SELECT,
        _Q3_SELECT,
        port="none: Spark runs an inner join of two streams with no interval, each side's rows kept for good "
        "(Flink's regular join keeps them too); its output is append-only",
    ),
    Query(
        "q20",
        "expand bid with auction (a join with no time bound)",
        ("bid", "auction"),
        _Q20_SELECT,
        _Q20_SELECT,
        port="an inner join with no interval, as q3; the columns named as Nexmark's sink table names them",
        flink_change="B.dateTime, B.extra, A.dateTime and A.extra named as Nexmark's sink table names them "
        "(bid_dateTime, ...): Flink's own names for the repeated names are dateTime0 and extra0",
    ),
)


def query(query_id: str) -> Query:
    """Return the query ``query_id``; raise KeyError when there is none."""
    for q in QUERIES:
        if q.id == query_id:
            return q
    raise KeyError(query_id)


@dataclass(frozen=True)
class Refused:
    """A Nexmark query Daggers refuses before Spark starts: its text, and where and why ``sql check`` says so."""

    id: str
    tables: tuple[str, ...]
    dagger: str
    line: int
    col: int
    says: str  #: a part of the message
    why: str  #: why it cannot run on an append-only engine


REFUSED: tuple[Refused, ...] = (
    Refused(
        "q4",
        ("auction", "bid"),
        """SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category""",
        10,
        10,
        "an aggregation over a stream needs a window in GROUP BY",
        "an aggregate with no window: Flink updates (retracts) each category's average after every bid",
    ),
    Refused(
        "q9",
        ("auction", "bid"),
        """SELECT
    id, itemName, description, initialBid, reserve, `dateTime`, expires, seller, category, extra,
    auction, bidder, price, bid_dateTime, bid_extra
FROM (
   SELECT A.*, B.auction, B.bidder, B.price, B.`dateTime` AS bid_dateTime, B.extra AS bid_extra,
     ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.`dateTime` ASC) AS rownum
   FROM auction A, bid B
   WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires
)
WHERE rownum <= 1""",
        6,
        6,
        "ROW_NUMBER() OVER (...)",
        "Top-1 by price: a higher bid retracts the auction's winning row",
    ),
    Refused(
        "q18",
        ("bid",),
        """SELECT auction, bidder, price, channel, url, `dateTime`, extra
 FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY `dateTime` DESC) AS rank_number
       FROM bid)
 WHERE rank_number <= 1""",
        2,
        18,
        "ROW_NUMBER() OVER (...)",
        "the last row per key: each newer bid retracts the one before",
    ),
    Refused(
        "q19",
        ("bid",),
        """SELECT * FROM
(SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number FROM bid)
WHERE rank_number <= 10""",
        2,
        12,
        "ROW_NUMBER() OVER (...)",
        "Top-10 by price: a higher bid retracts the tenth",
    ),
)
