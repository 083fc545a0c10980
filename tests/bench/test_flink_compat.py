"""Dagger SQL gives Flink SQL's rows (issue 40): the harness of bench/flink_compat.

Every case of :mod:`bench.flink_compat.cases` runs as a dagger through the real engine over protobuf
events on a real broker (tansu), and its rows must equal the rows Apache Flink 2.3 gave for the same
events read from JSON-lines files, kept as golden files in bench/flink_compat/golden (so a machine
without Flink still checks Daggers against Flink). Where the Flink virtualenv exists
(bench/setup_flink.sh), Flink runs live and its rows must equal the golden files. Where the two differ
on purpose, the case runs Flink's spelling and says why (``Case.differs``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.flink_compat.cases import (
    CASES,
    CLOSER,
    CUT,
    DATASETS,
    LATE_BOOKINGS,
    TABLES,
    Refusal,
    case,
    to_json_event,
)
from bench.flink_compat.cases_functions import GROUPS, Group, Probe, function_refusals, probes
from bench.flink_compat.flink_side import FlinkError, flink_python, read_golden, run_flink
from bench.flink_compat.rows import TIME_FORMAT, canonical, closed, type_name, value

CUT_TEXT = value(CUT)
IDS = [c.id for c in CASES]
#: the function groups' probes: each compared on its own (test_daggers_gives_flinks_value), from one run per group
PROBES = {p.id: (g, i, p) for g, i, p in probes()}
WHOLE_IDS = [i for i in IDS if i not in {g.id for g in GROUPS}]


def _closed(rows: list[list[Any]]) -> list[list[Any]]:
    return closed(rows, CUT_TEXT, CLOSER)


# ---- the golden files and the harness's own pieces (no services) ------------------------------------


def test_every_case_has_a_golden_file_from_flink() -> None:
    for c in CASES:
        body = read_golden(c.id)
        assert body["flink_sql"] == c.flink_text, (
            f"{c.id}: golden file made from another query: rerun python -m bench.flink_compat"
        )
        assert body["engine"].startswith("Apache Flink 2.3")
        if "error" in body:  # Flink stops, as the dagger does
            assert c.daggers_error and not c.differs, c.id
            continue
        keys = next(
            (g.key_count for g in GROUPS if g.id == c.id), None
        )  # a group's probes may be later times
        assert _closed([r[:keys] for r in body["rows"]]), f"{c.id}: Flink gave no row before the closers"
        assert bool(c.differs) == (
            c.flink_sql is not None or c.daggers_rows is not None or bool(c.daggers_error)
        ), c.id


def test_golden_rows_show_the_edge_cases() -> None:
    """The golden rows hit what the events were chosen for (checked against the events, by hand)."""
    tumble = _closed(read_golden("tumble-start-end")["rows"])
    assert tumble == canonical(
        [  # o3 (10:00:59.999) in 10:00, o4 (10:01:00.000) in 10:01; 10:02, 10:03 give nothing
            [1, 1, 40000, "2026-03-02 10:04:00.000000", "2026-03-02 10:05:00.000000"],
            [1, 1, 12000, "2026-03-02 10:01:00.000000", "2026-03-02 10:02:00.000000"],
            [1, 2, 43000, "2026-03-02 10:00:00.000000", "2026-03-02 10:01:00.000000"],
            [2, 1, 0, "2026-03-02 10:00:00.000000", "2026-03-02 10:01:00.000000"],
            [2, 1, 0, "2026-03-02 10:01:00.000000", "2026-03-02 10:02:00.000000"],
            [2, 1, 0, "2026-03-02 10:04:00.000000", "2026-03-02 10:05:00.000000"],
        ]
    )
    late = {(r[0], r[3]): r[1:3] for r in _closed(read_golden("late-events")["rows"])}
    end1, end2, end3 = (f"2026-03-02 10:0{m}:00.000000" for m in (1, 2, 3))
    # l5 (city 2, 10:00:58) came after the 10:00 window closed: no row; l6 (10:01:02, behind the watermark
    # 10:01:10 but in an open window) counts; l9 (10:01:59.999) came after 10:01 closed
    assert late == {(1, end1): [2, 300], (1, end2): [2, 700], (2, end2): [1, 600], (2, end3): [2, 1500]}
    closing = _closed(read_golden("late-in-the-closing-batch")["rows"])
    assert closing == canonical([[1, 1, 100, end1], [1, 2, 600, end2]])  # m3 dropped
    join = _closed(read_golden("interval-join-bounds")["rows"])
    o1 = sorted(r[2] for r in join if r[0] == "o1")
    assert o1 == ["2026-03-02 10:00:05.000000", "2026-03-02 10:00:30.000000", "2026-03-02 10:05:05.000000"]
    distinct = {(r[0], r[3]): r[1] for r in _closed(read_golden("count-distinct")["rows"])}
    assert distinct[("ON_TRIP", "2026-03-02 10:01:00.000000")] == 1  # d1 twice: one driver
    assert distinct[("ON_TRIP", "2026-03-02 10:06:00.000000")] == 2


def test_closed_leaves_out_the_closers_rows() -> None:
    rows = [["a", "2026-03-02 10:59:59.999000"], ["b", "2026-03-02 11:00:00.000000"], [CLOSER, 1], ["c", "x"]]
    assert _closed(rows) == [["a", "2026-03-02 10:59:59.999000"], ["c", "x"]]


def test_events_as_flink_reads_them() -> None:
    event = to_json_event(LATE_BOOKINGS[-1])
    assert event["event_timestamp"] == "2026-03-02 10:01:59.999"
    assert event["event_ts_row"] == {"seconds": 1772445719, "nanos": 999_000_000}
    assert value(LATE_BOOKINGS[-1]["event_timestamp"]) == "2026-03-02 10:01:59.999000"
    assert TIME_FORMAT == "%Y-%m-%d %H:%M:%S.%f"
    assert {len(tables) for tables in DATASETS.values()} == {len(TABLES)}
    assert case("late-events").one_record_batches and case("late-events").tables == ["bookings"]
    assert case("union-all-cte").tables == ["bookings", "pings"]


# ---- Flink live (when bench/setup_flink.sh has made its virtualenv) ---------------------------------


@pytest.fixture(scope="module")
def flink_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    if flink_python() is None:
        pytest.skip(
            "no Flink virtualenv (bench/setup_flink.sh makes it): Daggers is still checked against "
            "the golden files Flink made"
        )
    try:
        return run_flink(CASES, tmp_path_factory.mktemp("flink"))
    except FlinkError as exc:
        pytest.fail(str(exc))


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("case_id", IDS)
def test_flink_live_gives_the_golden_rows(flink_rows: dict[str, dict[str, Any]], case_id: str) -> None:
    got = flink_rows[case_id]
    golden = read_golden(case_id)
    if "error" in golden:  # a case where Flink stops (as the dagger does)
        assert "error" in got, got
        return
    assert "error" not in got, got.get("error")
    assert got["columns"] == golden["columns"]
    assert sorted(map(json.dumps, got["rows"])) == sorted(map(json.dumps, golden["rows"]))


# ---- Daggers against Flink's rows -------------------------------------------------------------------


@pytest.fixture(scope="module")
def topics(tansu_broker: str) -> dict[str, dict[str, str]]:
    from bench.flink_compat.daggers_side import produce_datasets

    return produce_datasets(tansu_broker)


@pytest.mark.integration
@pytest.mark.parametrize("case_id", WHOLE_IDS)
def test_daggers_gives_flinks_rows(
    spark,
    tansu_broker: str,
    topics: dict[str, dict[str, str]],  # type: ignore[no-untyped-def]
    tmp_path: Path,
    case_id: str,
) -> None:
    from bench.flink_compat.daggers_side import run_case
    from job.errors import DaggerError

    c = case(case_id)
    golden = read_golden(case_id)
    if c.daggers_error:  # the dagger stops with a one-line error (Flink stops too, or gives rows: c.differs)
        with pytest.raises(DaggerError) as info:
            run_case(spark, c, topics, tansu_broker, tmp_path)
        assert c.daggers_error in info.value.message and "\n" not in info.value.message, info.value.message
        return
    got = run_case(spark, c, topics, tansu_broker, tmp_path)
    assert got["columns"] == golden["columns"], c.differs or c.what
    want = _closed(golden["rows"])
    if c.daggers_rows is not None:  # the engines differ on purpose: Daggers' own rows, and that they differ
        assert want != canonical(list(r) for r in c.daggers_rows), c.differs
        want = canonical(list(r) for r in c.daggers_rows)
    assert _closed(got["rows"]) == want, c.differs or c.what
    # the rows of the closers' own windows are Flink's only (its end of input closes them)
    assert Counter(map(json.dumps, _closed(got["rows"]))) == Counter(map(json.dumps, want))


def probe_rows(rows: list[list[Any]], group: Group, index: int) -> list[str]:
    """Return a probe's rows (the group's keys, then the probe's value) as JSON texts, sorted, the closers'
    rows left out (by their keys: a probe's own value may be a time after the closers')."""
    keys = group.key_count
    return sorted(json.dumps([*r[:keys], r[index]]) for r in rows if _closed([r[:keys]]))


@pytest.fixture(scope="module")
def group_run(
    spark,
    tansu_broker: str,
    topics: dict[str, dict[str, str]],  # type: ignore[no-untyped-def]
    tmp_path_factory: pytest.TempPathFactory,
) -> Any:
    """Run a function group as one dagger, once for all its probes: ``group_run(group)`` → its result."""
    from bench.flink_compat.daggers_side import run_case

    done: dict[str, dict[str, Any] | Exception] = {}

    def run(group: Group) -> dict[str, Any]:
        if (
            group.id not in done
        ):  # a failure too is kept: the group's other probes fail with it, without a rerun
            try:
                done[group.id] = run_case(
                    spark, case(group.id), topics, tansu_broker, tmp_path_factory.mktemp(group.id)
                )
            except Exception as exc:  # noqa: BLE001
                done[group.id] = exc
        got = done[group.id]
        if isinstance(got, Exception):
            raise got
        return got

    return run


@pytest.mark.integration
@pytest.mark.parametrize("probe_id", list(PROBES))
def test_daggers_gives_flinks_value(group_run: Any, probe_id: str) -> None:
    """Each expression of a function group: its values, row by row, and its type are Flink's."""
    group, index, probe = PROBES[probe_id]
    golden = read_golden(group.id)
    got = group_run(group)
    assert got["columns"][index] == golden["columns"][index] == probe.column
    want = probe_rows(golden["rows"], group, index)
    if probe.daggers is not None:  # the engines differ on purpose: Daggers' own rows, and that they differ
        mine = sorted(json.dumps(list(r)) for r in probe.daggers)
        assert mine != want, probe.differs
        want = mine
    assert probe_rows(got["rows"], group, index) == want, f"{probe.sql}: {probe.differs}"
    assert type_name(got["types"][index]) == type_name(golden["types"][index]), probe.sql


def test_probes_are_columns_of_their_groups_golden_rows() -> None:
    """Every probe has Flink's values and type in its group's golden file, and a value (not only NULLs) unless it
    is there for NULL."""
    for probe_id, (group, index, probe) in PROBES.items():
        golden = read_golden(group.id)
        assert golden["columns"][index] == probe.column, probe_id
        assert golden["types"][index], probe_id
        values = [r[index] for r in golden["rows"] if _closed([r[: group.key_count]])]
        assert values, probe_id
        assert any(v is not None for v in values) or "null" in probe_id, probe_id


def test_type_names_compare_what_both_engines_can_have() -> None:
    assert [
        type_name(t)
        for t in (
            "VARCHAR(2147483647) NOT NULL",
            "CHAR(3)",
            "TIMESTAMP(3) *ROWTIME*",
            "TIMESTAMP_LTZ(3)",
            "DECIMAL(17, 6)",
            "DECIMAL(10)",
            "INT NOT NULL",
        )
    ] == ["STRING", "STRING", "TIMESTAMP", "TIMESTAMP", "DECIMAL(*, 6)", "DECIMAL(*, 0)", "INT"]
    assert isinstance(Probe("x-y", "1").column, str) and Probe("x-y", "1").column == "f_x_y"


@pytest.mark.parametrize("refusal", function_refusals(), ids=lambda r: r.id)
def test_function_refusals_are_clear(refusal: Refusal) -> None:
    """Each expression Flink runs and Daggers cannot is refused by the SQL check at its line and column, with what
    to write instead."""
    from job.errors import SqlError
    from job.sql import translate
    from tests.job.sql.test_flink_values import TABLES as TYPED

    with pytest.raises(SqlError) as info:
        translate(refusal.sql, TYPED)
    assert (info.value.line, info.value.col) == (refusal.line, refusal.col)
    assert info.value.reason.startswith(refusal.reason) and info.value.hint


def test_the_compat_page_counts_the_functions() -> None:
    """docs/flink-compat.md names every expression of the function groups, says which differ, and counts them."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "flink-compat.md").read_text()
    differ = [p for _, _, p in PROBES.values() if p.differs]
    refusals = function_refusals()
    assert (
        f"**Function counts**: {len(PROBES)} expressions: {len(PROBES) - len(differ)} give Flink's values and "
        f"types; {len(differ)} differ on purpose"
    ) in page
    assert f"{len(refusals)} more expressions that Flink 2.3 runs are refused clearly" in page
    for probe_id, (_, _, probe) in PROBES.items():
        assert f"| `{probe_id}` |" in page, probe_id
        assert ("**differs" in page.split(f"| `{probe_id}` |")[1].split("\n")[0]) == bool(probe.differs), (
            probe_id
        )
    for r in refusals:
        assert f"| `{r.id}`: " in page, r.id


def test_golden_refresh_says_what_is_wrong_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.flink_compat.__main__ import main

    assert main(["no-such-case"]) == 2
    assert capsys.readouterr().err.startswith(
        "flink_compat: no case 'no-such-case'; the cases: tumble-start-end, "
    )
    monkeypatch.setenv("DAGGERS_FLINK_VENV", "/nonexistent")
    assert main(["tumble-start-end"]) == 2
    assert capsys.readouterr().err == "flink_compat: no Flink virtualenv: run bench/setup_flink.sh\n"
