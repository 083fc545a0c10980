"""CondEq, Filters and SelectFields on Spark over lists of serialized messages of a team's own
schema (a .proto folder made here): exact values, nested paths, enums by name, and errors."""

from __future__ import annotations

import base64

import pytest

from job.errors import SqlError
from job.schema.compile import compile_descriptor_set
from job.schema.registry import SchemaRegistry
from job.sql import translate
from job.sql.parse import parse
from job.sql.rewrite import render, to_spark
from job.sql.validate import check_functions

pytestmark = pytest.mark.integration

ORDER = "team.orders.Order"
PROTO = """syntax = "proto3";
package team.orders;

enum Status { STATUS_UNKNOWN = 0; OPEN = 1; CANCELLED = 2; }
message Item { string sku = 1; int32 qty = 2; double price = 3; }
message Order {
  string order_number = 1;
  Status status = 2;
  Item item = 3;
  repeated string tags = 4;
  bool paid = 5;
}
"""


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> SchemaRegistry:
    root = tmp_path_factory.mktemp("team-protos")
    (root / "team" / "orders").mkdir(parents=True)
    (root / "team" / "orders" / "order.proto").write_text(PROTO)
    return SchemaRegistry(compile_descriptor_set(root, root.parent / (root.name + "-out")))


def messages_sql(schema: SchemaRegistry) -> str:
    cls = schema.message_class(ORDER)
    orders = [
        cls(
            order_number="o1", status=1, item={"sku": "a", "qty": 2, "price": 1.5}, tags=["x", "y"], paid=True
        ),
        cls(order_number="o2", status=2, tags=[]),  # item unset: qty reads 0
        cls(order_number="o3", status=1, item={"sku": "b", "qty": 10, "price": 2.0}),
        cls(order_number="o4", status=2, item={"sku": "c", "qty": 9}, paid=True),
    ]
    return "array(" + ", ".join(f"X'{o.SerializeToString().hex()}'" for o in orders) + ")"


def run(spark, schema: SchemaRegistry, sql: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    from job.functions.spark_udfs import register_functions

    register_functions(spark, descriptor_set_b64=base64.b64encode(schema.descriptor_set).decode())
    tree = parse(sql)
    check_functions(tree)
    return [tuple(r) for r in spark.sql(render(to_spark(tree))).collect()]


def test_select_filter_and_aggregate(spark, schema: SchemaRegistry) -> None:  # type: ignore[no-untyped-def]
    cols = [
        f"SelectFields(m, '{ORDER}', 'order_number')",
        f"SelectFields(m, '{ORDER}', 'item.qty')",
        f"SelectFields(m, '{ORDER}', 'status')",
        f"SelectFields(Filters(m, '{ORDER}', CondEq('status', 'CANCELLED')), 'order_number')",
        f"SelectFields(Filters(m, '{ORDER}', CondEq('status', 'CANCELLED'), CondEq('item.qty', 9)), 'item.sku')",
        f"SelectFields(Filters(m, '{ORDER}', CondEq('paid', true), CondEq('item.price', 1.5D)), 'order_number')",
        f"cardinality(Filters(m, '{ORDER}'))",
        f"cardinality(Filters(m, '{ORDER}', CondEq('status', 'NOT_A_STATUS')))",
        f"ArrayAggregate(SelectFields(m, '{ORDER}', 'item.qty'), 'max', 'int')",  # 10, not '9' as text
        f"ArrayAggregate(SelectFields(m, '{ORDER}', 'item.qty'), 'sum', 'int')",
        f"ArrayAggregate(SelectFields(m, '{ORDER}', 'item.price'), 'average', 'double')",
        f"ElementAt(SelectFields(m, '{ORDER}', 'order_number'), -1)",
        f"SelectFields(m, '{ORDER}', 'tags')",
        f"SelectFields(m, '{ORDER}', 'item')",
        f"SelectFields(n, '{ORDER}', 'order_number')",
        f"Filters(n, '{ORDER}', CondEq('status', 'OPEN'))",
    ]
    got = run(
        spark,
        schema,
        f"SELECT {', '.join(cols)} FROM VALUES ({messages_sql(schema)}, "
        "CAST(NULL AS ARRAY<BINARY>)) AS t(m, n)",
    )
    assert got == [
        (
            ["o1", "o2", "o3", "o4"],
            ["2", "0", "10", "9"],
            ["OPEN", "CANCELLED", "OPEN", "CANCELLED"],
            ["o2", "o4"],
            ["c"],
            ["o1"],
            4,
            0,
            10,
            21,
            (1.5 + 0.0 + 2.0 + 0.0) / 4,
            "o4",
            ['["x","y"]', "[]", "[]", "[]"],
            [
                '{"sku":"a","qty":2,"price":1.5}',
                "{}",
                '{"sku":"b","qty":10,"price":2.0}',
                '{"sku":"c","qty":9}',
            ],
            None,
            None,
        )
    ]


def test_an_unknown_field_or_class_fails_with_its_name(spark, schema: SchemaRegistry) -> None:  # type: ignore[no-untyped-def]
    from job.errors import FunctionError
    from job.query.runner import explain_failure

    with pytest.raises(Exception, match="team.orders.Item has no field 'weight'") as info:
        run(spark, schema, f"SELECT SelectFields({messages_sql(schema)}, '{ORDER}', 'item.weight')")
    err = explain_failure(info.value)  # what the CLI and the console show: one line, no traceback
    assert isinstance(err, FunctionError)
    assert str(err) == "team.orders.Item has no field 'weight' (path 'item.weight')"
    with pytest.raises(Exception, match="unknown proto_class 'team.orders.Nope'"):
        run(spark, schema, f"SELECT SelectFields({messages_sql(schema)}, 'team.orders.Nope', 'x')")


@pytest.mark.parametrize(
    ("sql", "col", "needle"),
    [
        ("SELECT Filters(m, 'a.B', m) FROM s", 26, "a predicate must be CondEq(field, value), found m"),
        ("SELECT SelectFields(m, 'x') FROM s", 21, "the two-argument form reads the result of Filters(...)"),
        (
            "SELECT SelectFields(m, 'a.B', 'x..y') FROM s",
            31,
            "the field path must be field names joined by dots",
        ),
        (
            "SELECT Filters(m, 'a.B', CondEq('a b', 1)) FROM s",
            33,
            "the field must be field names joined by dots",
        ),
        ("SELECT Filters(m) FROM s", 8, "Filters takes 2 or more arguments, found 1"),
    ],
)
def test_arguments_are_checked_before_spark(sql: str, col: int, needle: str) -> None:
    with pytest.raises(SqlError) as info:
        translate(sql, {"s": {"m"}})
    assert needle in info.value.reason
    assert (info.value.line, info.value.col) == (1, col)
