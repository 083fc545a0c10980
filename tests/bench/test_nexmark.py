"""Nexmark on Daggers: the generator follows Nexmark's rules, the golden rows are Flink 2.3's, a few queries run
as real daggers over protobuf on a real broker (tansu) and give Flink's rows, and the queries that need
retractions are refused by ``daggers sql check`` with their line, column and a hint.

The golden files (bench/nexmark/golden) are refreshed with ``python -m bench.nexmark golden`` (Flink's
virtualenv: bench/setup_flink.sh); ``python -m bench.nexmark compare`` runs every ported query."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from typer.testing import CliRunner

from bench.flink_compat.rows import canonical, row
from bench.nexmark import generate as gen
from bench.nexmark.oracle import EVENTS, closed, cut_text, dataset, digest, read_golden, spec_text
from bench.nexmark.queries import QUERIES, REFUSED, query

#: the queries the suite runs as daggers (about a minute of Spark): a filter, a session window, SPLIT_INDEX,
#: and two TUMBLE windows joined
RUN = ["q2", "q11", "q22", "q8"]


@pytest.fixture(scope="module")
def events() -> dict[str, pa.Table]:
    return dataset()


# ---- the generator -----------------------------------------------------------------------------------


def test_events_follow_nexmark_mix_ids_and_times() -> None:
    made = gen.generate(5_000, seed=1, c=gen.Config(rate=1_000))
    person, auction, bid = (made.tables[t] for t in gen.TABLES)
    assert (person.num_rows, auction.num_rows, bid.num_rows) == (100, 300, 4_600)  # 1 : 3 : 46
    assert person.column("id").to_pylist() == list(range(1000, 1100))
    assert auction.column("id").to_pylist() == list(range(1000, 1300))
    # event n is at base + n ms (1,000 events/s); the 4th event (n=3) is the third auction
    assert made.numbers["auction"][:3].tolist() == [1, 2, 3]
    t = auction.column("dateTime").cast(pa.int64()).to_numpy()
    assert (t - gen.Config().base_ms).tolist()[:3] == [1, 2, 3]
    assert set(auction.column("category").to_pylist()) == {10, 11, 12, 13, 14}
    # a seller, a bidder, an auction: never more than 10 ids ahead of the last made (Nexmark's leads)
    n_auction, n_bid = made.numbers["auction"], made.numbers["bid"]
    assert (auction.column("seller").to_numpy() - 1000 <= gen.last_person(gen.Config(), n_auction) + 10).all()
    assert (bid.column("auction").to_numpy() - 1000 <= gen.last_auction(gen.Config(), n_bid) + 10).all()
    assert (bid.column("bidder").to_numpy() - 2000 <= gen.last_person(gen.Config(), n_bid) + 10).all()
    prices = bid.column("price").to_numpy()
    assert prices.min() >= 100 and prices.max() <= 100_000_000
    hot = pc.is_in(bid.column("channel"), pa.array(gen.HOT_CHANNELS)).to_numpy(zero_copy_only=False)
    assert 0.45 < hot.mean() < 0.55
    urls = bid.column("url").to_pylist()
    assert all(u.startswith("https://www.nexmark.com/") and "/item.htm?query=1" in u for u in urls)
    assert gen.last_auction(gen.Config(), np.array([0, 1, 4, 50, 51])).tolist() == [-1, 0, 2, 2, 3]


def test_a_longer_run_begins_with_a_shorter_runs_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gen, "CHUNK", 1_000)
    short, long = gen.generate(1_000, seed=9), gen.generate(3_000, seed=9)
    assert long.tables["bid"].num_rows == 3 * short.tables["bid"].num_rows
    for t in gen.TABLES:
        assert long.tables[t].slice(0, short.tables[t].num_rows).equals(short.tables[t])
    assert not gen.generate(1_000, seed=10).tables["bid"].equals(short.tables["bid"])


def test_events_as_flink_and_daggers_read_them(events: dict[str, pa.Table]) -> None:
    from job.schema.registry import default_registry

    bid = events["bid"].slice(0, 50)
    lines = gen.json_lines(bid).decode().splitlines()
    first = json.loads(lines[0])
    assert (
        first["dateTime"] == "2026-03-02 07:59:00.008"
    )  # event 4, the first bid, at 500 events/s and first["auction"] == bid["auction"][0].as_py()
    assert [json.loads(x)["extra"] for x in lines] == bid.column("extra").to_pylist()
    cls = default_registry().message_class("nexmark.Bid")
    decoded = [cls.FromString(p) for p in gen.encode("bid", bid)]
    assert [m.price for m in decoded] == bid.column("price").to_pylist()
    assert [m.url for m in decoded] == bid.column("url").to_pylist()
    assert [m.dateTime.seconds * 1000 + m.dateTime.nanos // 1_000_000 for m in decoded] == bid.column(
        "dateTime"
    ).cast(pa.int64()).to_pylist()


# ---- the golden rows -----------------------------------------------------------------------------------


def test_every_query_has_a_golden_file_from_flink() -> None:
    for q in QUERIES:
        body = read_golden(q.id)
        assert body["flink_sql"] == q.flink, (
            f"{q.id}: golden file from another query: python -m bench.nexmark golden"
        )
        assert body["engine"].startswith("Apache Flink 2.3") and body["events"]["count"] == EVENTS
        assert body["count"] > 0, q.id
        if body["rows"] is not None:
            assert digest(body["rows"]) == body["sha256"]


def test_golden_rows_of_stateless_queries_equal_the_events(events: dict[str, pa.Table]) -> None:
    """Flink's rows of q0 and q2, checked against the events with pyarrow."""
    bid = events["bid"].slice(0, events["bid"].num_rows - 1)  # without the closer
    assert read_golden("q0")["count"] == bid.num_rows == EVENTS * 46 // 50
    q0 = [
        row(r)
        for r in zip(
            *(bid.column(c).to_pylist() for c in ("auction", "bidder", "price", "dateTime", "extra")),
            strict=True,
        )
    ]
    assert digest(canonical(q0)) == read_golden("q0")["sha256"]
    kept = bid.filter(pc.equal(pc.divide(bid["auction"], 123), pc.divide(bid["auction"], 123)))
    kept = bid.filter(
        pc.equal(pc.subtract(bid["auction"], pc.multiply(pc.divide(bid["auction"], 123), 123)), 0)
    )
    q2 = canonical(
        [[a, p] for a, p in zip(kept["auction"].to_pylist(), kept["price"].to_pylist(), strict=True)]
    )
    assert read_golden("q2")["rows"] == q2 and len(q2) > 0


def test_closed_leaves_out_the_closers_rows() -> None:
    cut = cut_text()
    assert closed(
        [[1, "2026-03-02 08:00:00.000000"], [-1, 5], ["closer", 1], [2, cut[:10]], [3, "x"]], cut
    ) == [[1, "2026-03-02 08:00:00.000000"], [3, "x"]]


# ---- the refused queries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("refused", REFUSED, ids=[r.id for r in REFUSED])
def test_sql_check_refuses_the_queries_that_need_retractions(tmp_path: Path, refused) -> None:  # type: ignore[no-untyped-def]
    from job.cli import app

    q = query("q0").__class__(refused.id, "", refused.tables, "", refused.dagger)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        spec_text(q, {t: f"nexmark-{t}" for t in refused.tables}, "127.0.0.1:9", tmp_path / "ckpt")
    )
    result = CliRunner().invoke(app, ["sql", "check", str(spec), "--state-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"line {refused.line}, column {refused.col}: {refused.says}" in result.output
    assert "hint: " in result.output and "Traceback" not in result.output


# ---- Daggers against Flink's rows ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def topics(tansu_broker: str, events: dict[str, pa.Table]) -> dict[str, str]:
    from bench.nexmark.oracle import produce_tables

    return produce_tables(tansu_broker, events)


@pytest.mark.integration
@pytest.mark.parametrize("query_id", RUN)
def test_daggers_gives_flinks_rows(
    spark,
    tansu_broker: str,
    topics: dict[str, str],
    tmp_path: Path,  # type: ignore[no-untyped-def]
    query_id: str,
) -> None:
    from bench.nexmark.oracle import run_dagger

    q = query(query_id)
    golden = read_golden(query_id)
    got = run_dagger(spark, q, topics, tansu_broker, tmp_path)
    assert got["columns"] == golden["columns"]
    rows = closed(got["rows"], cut_text())
    if golden["rows"] is not None:
        assert rows == golden["rows"]
    assert (len(rows), digest(rows)) == (golden["count"], golden["sha256"])
