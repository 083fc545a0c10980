"""The JSONPath subset of JsonUpdate/JsonDelete."""

from __future__ import annotations

import pytest

from job.functions.json_path import JsonPathError, delete, parse_path, update


@pytest.mark.parametrize(
    ("path", "steps"),
    [
        ("$", ()),
        ("$.a", ("a",)),
        ("$.a.b[0]", ("a", "b", 0)),
        ("$['a b']", ("a b",)),
        ('$["k"][-1]', ("k", -1)),
        ("$.list[2].name", ("list", 2, "name")),
        ("$.$ref", ("$ref",)),
    ],
)
def test_parse_path(path: str, steps: tuple) -> None:
    assert parse_path(path) == steps


@pytest.mark.parametrize("path", ["a.b", "$..a", "$.a[*]", "$[?(@.a)]", "$.", "$.a[", "$a"])
def test_unsupported_paths(path: str) -> None:
    with pytest.raises(JsonPathError):
        parse_path(path)


def test_update_and_delete() -> None:
    doc = '{"k1": null, "k2": "v2", "l": [1, {"x": 2}]}'
    assert update(doc, parse_path("$.k3"), "v3") == '{"k1":null,"k2":"v2","l":[1,{"x":2}],"k3":"v3"}'
    assert update(doc, parse_path("$.k1"), "v1") == '{"k1":"v1","k2":"v2","l":[1,{"x":2}]}'
    assert update(doc, parse_path("$.l[1].x"), [1, None]) == '{"k1":null,"k2":"v2","l":[1,{"x":[1,null]}]}'
    assert update(doc, parse_path("$.l[-1]"), 0) == '{"k1":null,"k2":"v2","l":[1,0]}'
    assert update(doc, parse_path("$"), {"a": "é"}) == '{"a":"é"}'
    assert update(doc, parse_path("$.no.where"), 1) is None
    assert update(doc, parse_path("$.l[5]"), 1) is None
    assert update(doc, parse_path("$.k2.x"), 1) is None  # a string has no keys
    assert update("{bad", parse_path("$.a"), 1) is None
    assert delete(doc, parse_path("$.l[0]")) == '{"k1":null,"k2":"v2","l":[{"x":2}]}'
    assert delete(doc, parse_path("$.k1")) == '{"k2":"v2","l":[1,{"x":2}]}'
    assert delete(doc, parse_path("$.missing.deep")) == '{"k1":null,"k2":"v2","l":[1,{"x":2}]}'
    assert delete(doc, parse_path("$")) is None
    assert delete("[1,", parse_path("$[0]")) is None
