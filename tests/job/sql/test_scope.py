"""Column scope: each SELECT sees only its own FROM (CTEs, subqueries, UNION ALL branches, UNNEST),
nested fields against the schema's types, and errors with line, column and a suggestion."""

from __future__ import annotations

import pytest

from job.errors import SqlError
from job.sql import translate
from tests.job.sql.test_dialect import TABLES

BOTH = {
    "booking": {"customer_id", "order_number", "service_type", "event_timestamp"},
    "payment": {"customer_id", "order_id", "order_amount", "event_timestamp"},
}  # names only, no types


@pytest.mark.parametrize("tables", [TABLES, BOTH], ids=["typed", "names"])
@pytest.mark.parametrize(
    ("sql", "used"),
    [
        # an unqualified column of a CTE body or a union branch reads that SELECT's one table
        (
            "WITH b AS (SELECT customer_id, rowtime FROM booking) SELECT customer_id FROM b",
            {"booking": ["customer_id"], "payment": []},
        ),
        (
            "SELECT customer_id FROM booking UNION ALL SELECT customer_id FROM payment",
            {"booking": ["customer_id"], "payment": ["customer_id"]},
        ),
        (
            "SELECT customer_id, order_number FROM `booking` UNION ALL (SELECT customer_id, order_id AS order_number "
            "FROM `payment`)",
            {"booking": ["customer_id", "order_number"], "payment": ["customer_id", "order_id"]},
        ),
        (
            "SELECT n FROM (SELECT count(1) AS n FROM booking GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), customer_id)",
            {"booking": ["customer_id"], "payment": []},
        ),
        (
            "SELECT c, COUNT(1) AS n FROM (SELECT customer_id AS c, rowtime FROM booking UNION ALL "
            "SELECT customer_id AS c, rowtime FROM payment) AS u GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), c",
            {"booking": ["customer_id"], "payment": ["customer_id"]},
        ),
        (
            "WITH b (c, t) AS (SELECT customer_id, rowtime FROM booking) SELECT c FROM b",
            {"booking": ["customer_id"], "payment": []},
        ),
        (
            "SELECT booking.customer_id FROM booking JOIN payment ON booking.order_number = payment.order_id",
            {"booking": ["customer_id", "order_number"], "payment": ["order_id"]},
        ),
    ],
)
def test_each_select_sees_its_own_from(tables, sql: str, used: dict[str, list[str]]) -> None:  # type: ignore[no-untyped-def]
    assert translate(sql, tables).columns == used


def test_star_reads_every_column() -> None:
    assert translate("SELECT * FROM payment", TABLES).columns["payment"] == sorted(TABLES["payment"])
    assert translate("SELECT p.* FROM payment AS p", TABLES).columns["payment"] == sorted(TABLES["payment"])


def test_nested_fields_and_unnest_columns() -> None:
    t = translate(
        "SELECT route.pickup.lat, booking.route.km, i.name, m.`value` FROM booking, "
        "UNNEST(booking.items) AS i (id, quantity, name), UNNEST(metadata) AS m (`key`, `value`)",
        TABLES,
    )
    assert t.columns["booking"] == ["items", "metadata", "route"]


@pytest.mark.parametrize(
    ("sql", "line", "col", "message", "hint"),
    [
        (
            "SELECT customer_id FROM booking JOIN payment ON booking.order_number = payment.order_id",
            1,
            8,
            "column customer_id is in booking and payment; qualify it",
            None,
        ),
        (
            "WITH b AS (SELECT customer_id FROM booking)\nSELECT customr_id FROM b",
            2,
            8,
            "unknown column customr_id",
            "did you mean customer_id?",
        ),
        (
            "WITH p AS (SELECT order_amount order_id, rowtime FROM payment)\nSELECT p.order_amount FROM p",
            2,
            8,
            "p has no column order_amount",
            "did you mean order_id?",
        ),
        (
            "SELECT customer_id FROM booking UNION ALL\nSELECT order_amont FROM payment",
            2,
            8,
            "unknown column order_amont",
            "did you mean order_amount, order_id?",
        ),
        (
            "SELECT route.pickup.latt FROM booking",
            1,
            8,
            "route.pickup has no field latt",
            "did you mean lat?",
        ),
        (
            "SELECT m.`key` FROM booking, UNNEST(metadata) AS m (`key`, `value`)\nWHERE x.y = 1",
            2,
            7,
            "unknown table or alias x in x.y",
            None,
        ),
        (
            "SELECT c FROM (SELECT customer_id FROM booking) AS s",
            1,
            8,
            "unknown column c",
            "columns: customer_id",
        ),
    ],
)
def test_scope_errors(sql: str, line: int, col: int, message: str, hint: str | None) -> None:
    with pytest.raises(SqlError) as info:
        translate(sql, TABLES)
    err = info.value
    assert message in str(err) and (err.line, err.col) == (line, col)
    if hint:
        assert err.hint is not None and err.hint.startswith(hint)


@pytest.mark.parametrize(
    ("sql", "line", "col", "name"),
    [
        ("SELECT customer_id, order_number AS customer_id FROM booking", 1, 21, "customer_id"),
        ("SELECT customer_id,\n  order_number AS CUSTOMER_ID FROM booking", 2, 3, "CUSTOMER_ID"),
        (
            "SELECT b.customer_id, p.customer_id\nFROM booking AS b JOIN payment AS p ON b.customer_id = p.customer_id\n"
            "AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '1' MINUTE",
            1,
            23,
            "customer_id",
        ),
        (
            "SELECT b.*, p.*\nFROM booking AS b JOIN payment AS p ON b.customer_id = p.customer_id\n"
            "AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '1' MINUTE",
            1,
            13,
            "customer_id",
        ),
    ],
)
def test_two_output_columns_of_one_name_are_refused(sql: str, line: int, col: int, name: str) -> None:
    """A sink's row holds one value a name: a second column of the same name (Spark's names are
    case-insensitive) would silently take the first one's place, so the query is refused at it."""
    with pytest.raises(SqlError) as info:
        translate(sql, TABLES)
    err = info.value
    assert str(err).startswith(f"line {line}, column {col}: two output columns are named {name};")
    assert err.hint == f"give one of them a name of its own: … AS {name}_2"


def test_output_columns_renamed_apart_run() -> None:
    sql = (
        "SELECT b.customer_id, p.customer_id AS payer\nFROM booking AS b JOIN payment AS p ON "
        "b.customer_id = p.customer_id\nAND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '1' MINUTE"
    )
    assert translate(sql, TABLES).output_columns == ["customer_id", "payer"]


@pytest.mark.parametrize(
    ("sql", "col", "message", "hint"),
    [
        (
            "SELECT LOCALTIMESTAMP AS t FROM booking",
            8,
            "LOCALTIMESTAMP (the wall clock's time of day or timestamp) is not supported",
            "a dagger judges rows by event time: use rowtime",
        ),
        (
            "SELECT customer_id, localtime AS t FROM booking",
            21,
            "LOCALTIME (the wall clock's time of day or timestamp) is not supported",
            "a dagger judges rows by event time: use rowtime",
        ),
        (
            "SELECT JSON_VALUE(customer_id, '$.a' RETURNING INT) AS j FROM booking",
            38,  # where the parser stopped: the start of the word, not its end
            "Expecting ) (near 'RETURNING')",
            "JSON_VALUE/JSON_QUERY (… RETURNING type) are not supported: JsonQuery(json, path)",
        ),
    ],
)
def test_flinks_wall_clock_and_returning_are_refused_with_a_hint(
    sql: str, col: int, message: str, hint: str
) -> None:
    """Flink reads these; Dagger SQL refuses them naming what to write, not as an unknown column or a bare
    parse error."""
    with pytest.raises(SqlError) as info:
        translate(sql, TABLES)
    assert str(info.value).startswith(f"line 1, column {col}: {message}")
    assert info.value.hint is not None and info.value.hint.startswith(hint)
