"""job.sql.join_lag: how long a query's joins hold windows back behind the watermark."""

from __future__ import annotations

import pytest

from job.sql.join_lag import join_lag_ms
from job.sql.parse import parse

HEAD = "SELECT COUNT(*) AS n FROM pings AS a JOIN later AS b ON a.driver_id = b.driver_id"


@pytest.mark.parametrize(
    ("condition", "lag"),
    [
        ("", None),  # a join without a time bound: not known
        (" AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND", 10_000),
        (
            " AND b.rowtime BETWEEN a.rowtime - INTERVAL '5' SECOND AND a.rowtime + INTERVAL '1' MINUTE",
            65_000,
        ),
        (" AND b.rowtime BETWEEN a.rowtime - INTERVAL '2' MINUTE AND a.rowtime", 120_000),
        (" AND b.rowtime BETWEEN a.rowtime AND a.rowtime * 2", None),
        (" AND b.rowtime >= a.rowtime", None),
    ],
)
def test_interval_joins(condition: str, lag: int | None) -> None:
    assert join_lag_ms(parse(HEAD + condition)) == lag


def test_no_join_and_the_widest_of_two() -> None:
    assert join_lag_ms(parse("SELECT COUNT(*) AS n FROM data_stream")) == 0
    two = (
        HEAD + " AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND JOIN third AS c "
        "ON c.driver_id = a.driver_id AND c.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '30' SECOND"
    )
    assert join_lag_ms(parse(two)) == 30_000
