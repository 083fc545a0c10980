"""A response path's value made its column's type; distinct keys of one or several columns."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from job.enrich.keys import distinct_keys, spread
from job.enrich.values import BadValue, column_values, convert, extract


def test_extract() -> None:
    doc = {"_source": {"name": "Ann", "tags": ["a", "b"], "address": {"city": "Jakarta"}}}
    assert extract(doc, ("_source", "address", "city")) == "Jakarta"
    assert extract(doc, ("_source", "tags", 1)) == "b"
    assert extract(doc, ("_source", "tags", 5)) is None
    assert extract(doc, ("_source", "name", "x")) is None
    assert extract(doc, ("missing", "x")) is None
    assert extract(doc, ()) == doc


@pytest.mark.parametrize(
    ("value", "kind", "want"),
    [
        ("x", "string", "x"),
        (7, "string", "7"),
        (True, "string", "true"),
        ({"b": 1, "a": [1]}, "string", '{"a":[1],"b":1}'),
        (dt.date(2026, 3, 2), "string", "2026-03-02"),
        ("x", "json", '"x"'),
        (None, "long", None),
        (5, "long", 5),
        ("12", "long", 12),
        (3.0, "long", 3),
        (decimal.Decimal("4"), "long", 4),
        (2, "double", 2.0),
        ("2.5", "double", 2.5),
        (decimal.Decimal("1.25"), "double", 1.25),
        (True, "boolean", True),
        ("False", "boolean", False),
    ],
)
def test_convert(value: object, kind: str, want: object) -> None:
    assert convert(value, kind) == want


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("x", "long"),
        (1.5, "long"),
        (True, "long"),
        ("nan", "double"),
        ({"a": 1}, "double"),
        (1, "boolean"),
        ("yes", "boolean"),
    ],
)
def test_bad_values(value: object, kind: str) -> None:
    with pytest.raises(BadValue):
        convert(value, kind)


def test_column_values_take_typed_values_as_they_are_and_convert_others() -> None:
    docs = [{"n": 1}, {"n": None}, {}, {"n": "2"}, {"n": "x"}]
    assert column_values(docs[:3], ("n",), "long") == ([1, None, None], 0)
    assert column_values(docs, ("n",), "long") == ([1, None, None, 2, None], 1)
    assert column_values([{"a": {"b": True}}], ("a", "b"), "string") == (["true"], 0)


def test_distinct_keys_of_several_columns_with_types_kept() -> None:
    t = pa.table({"city": [1, 2, 1, None, 1], "day": pa.array([dt.date(2026, 3, 2)] * 5)})
    keys, index = distinct_keys(t, ["city", "day"])
    assert keys == [(1, dt.date(2026, 3, 2)), (2, dt.date(2026, 3, 2))]
    assert index.to_pylist() == [0, 1, 0, None, 0]
    assert spread(pa.array(["one", "two"]), index).to_pylist() == ["one", "two", "one", None, "one"]
    dictionary = pa.table({"k": pa.array(["a", "b", "a"]).dictionary_encode()})
    assert distinct_keys(dictionary, ["k"])[0] == [("a",), ("b",)]


def test_ttl_cache_expiry_bound_and_order() -> None:
    from job.enrich.cache import ABSENT, TtlCache

    now = [0.0]
    cache = TtlCache(3, 10.0, lambda: now[0])
    cache.put_many([("a",), ("b",), ("c",)], [1, None, 3])
    assert cache.get_many([("a",), ("b",), ("z",)]) == [1, None, ABSENT]  # None: a cached "not found"
    now[0] = 5.0
    cache.put_many([("a",)], [10])  # written again: fresh, and the newest
    cache.put_many([("d",)], [4])  # over the bound: the oldest written ("b") goes
    assert len(cache) == 3
    assert cache.get_many([("a",), ("b",), ("c",), ("d",)]) == [10, ABSENT, 3, 4]
    now[0] = 10.0  # c was written at 0: expired; a and d at 5: held until 15
    assert cache.get_many([("a",), ("c",), ("d",)]) == [10, ABSENT, 4]
    now[0] = 15.0
    assert cache.get_many([("a",), ("d",)]) == [ABSENT, ABSENT]
    empty = TtlCache(0, 10.0)
    empty.put_many([("a",)], [1])
    assert len(empty) == 0
