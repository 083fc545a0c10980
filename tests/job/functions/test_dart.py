"""The dart store: reading collections from a folder and over HTTP, the refresh rate, stale copies
on a failed re-read, and the vectorised look-ups (exact values)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from job.errors import FunctionError
from job.functions.dart import DartStore, read_url, store_url
from tests.helpers import FakeClock, serve_directory


def write(root: Path, kind: str, name: str, doc: object) -> None:
    path = root / kind / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_get_and_contains_from_a_folder(tmp_path: Path) -> None:
    write(tmp_path, "dart-get", "cities", {"1": "Jakarta", "2": "Bandung", "3": 7, "4": None})
    write(tmp_path, "dart-contains", "blocked", {"data": ["c-1", "c-2", "c-2"]})
    store = DartStore(store_url(str(tmp_path)))
    keys = pa.array(["2", "1", "9", None, "3", "4"])
    assert store.get("cities", keys, 1).to_pylist() == ["Bandung", "Jakarta", None, None, "7", None]
    assert store.contains("blocked", pa.array(["c-2", "c-3", None]), 1).to_pylist() == [True, False, False]
    # regex: an item takes the place of %s; the whole value must match (Java's Pattern.matches)
    got = store.contains("blocked", pa.array(["c-1-x", "c-2", "xc-1", "c-3-x"]), 1, regex="^%s-.*")
    assert got.to_pylist() == [True, False, False, False]
    assert store.reads == 2  # one read per collection, whatever the number of rows


def test_refresh_rate_is_honoured_and_an_empty_collection_is_read_again(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    write(tmp_path, "dart-get", "m", {"k": "v1"})
    store = DartStore(store_url(str(tmp_path)), clock=clock)
    k = pa.array(["k"])
    assert store.get("m", k, 1).to_pylist() == ["v1"]
    write(tmp_path, "dart-get", "m", {"k": "v2"})
    clock.now += 3600  # exactly the refresh period: still fresh (the original re-reads after it)
    assert store.get("m", k, 1).to_pylist() == ["v1"]
    clock.now += 1
    assert store.get("m", k, 1).to_pylist() == ["v2"]
    assert store.reads == 2
    clock.now += 10
    assert store.get("m", k, 0.001).to_pylist() == ["v2"] and store.reads == 3  # 3.6 s: a shorter rate
    write(tmp_path, "dart-contains", "empty", {"data": []})
    assert store.contains("empty", k, 24).to_pylist() == [False]
    write(tmp_path, "dart-contains", "empty", {"data": ["k"]})
    assert store.contains("empty", k, 24).to_pylist() == [True]  # an empty collection is read again


def test_a_failed_reread_keeps_the_old_copy_a_first_read_fails(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    write(tmp_path, "dart-get", "m", {"k": "v1"})
    store = DartStore(store_url(str(tmp_path)), clock=clock)
    assert store.get("m", pa.array(["k"]), 1).to_pylist() == ["v1"]
    (tmp_path / "dart-get" / "m").write_text("{not json")
    clock.now += 7200
    assert store.get("m", pa.array(["k"]), 1).to_pylist() == ["v1"]
    with pytest.raises(FunctionError, match=r"dart-get/nope: .*No such file"):
        store.get("nope", pa.array(["k"]), 1)
    write(tmp_path, "dart-contains", "bad", {"items": []})
    with pytest.raises(FunctionError, match=r'a dart-contains collection is a JSON object \{"data"'):
        store.contains("bad", pa.array(["k"]), 1)


def test_over_http_one_request_per_collection(tmp_path: Path) -> None:
    write(tmp_path, "dart-get", "city names", {str(i): f"city-{i}" for i in range(1000)})
    with serve_directory(tmp_path) as (url, requests):
        store = DartStore(store_url(url))
        keys = pa.array([str(i % 1200) for i in range(100_000)])
        got = store.get("city names", keys, 1).to_pylist()
        assert got[:3] == ["city-0", "city-1", "city-2"] and got[1100] is None and got[1999] == "city-799"
        store.get("city names", keys, 1)
        assert requests == ["/dart-get/city%20names"]
        with pytest.raises(FunctionError, match="404"):
            read_url(f"{url}/dart-get/missing")


def test_a_query_with_darts_needs_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from job.errors import SpecError
    from job.query.plan import plan
    from tests.helpers import make_spec

    monkeypatch.delenv("DAGGERS_DART_STORE", raising=False)
    spec, _ = make_spec(
        name="darts",
        bootstrap="127.0.0.1:9",
        topic="t",
        proto_class="daggers.events.BookingLog",
        sql="SELECT order_number FROM data_stream WHERE DartContains('vip', customer_id, 24)",
        influx_url="http://127.0.0.1:9",
        db="d",
        measurement="m",
        checkpoint=tmp_path / "ckpt",
    )
    with pytest.raises(SpecError, match="dart_store: the SQL calls DartContains but the spec names no store"):
        plan(spec, tmp_path)
    assert plan(spec.model_copy(update={"dart_store": str(tmp_path)}), tmp_path).translation.columns == {
        "data_stream": ["customer_id", "order_number"]
    }
    monkeypatch.setenv("DAGGERS_DART_STORE", "http://127.0.0.1:9/darts")
    plan(spec, tmp_path)


def test_a_relative_store_is_relative_to_the_spec_file(tmp_path: Path) -> None:
    from job.spec import load_spec

    text = (Path(__file__).resolve().parents[3] / "examples").glob("*.yaml")
    example = next(iter(sorted(text)))
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(example.read_text() + "\ndart_store: darts\n")
    assert load_spec(spec_path).dart_store == str(tmp_path / "darts")
    spec_path.write_text(example.read_text() + "\ndart_store: http://127.0.0.1:8/darts\n")
    assert load_spec(spec_path).dart_store == "http://127.0.0.1:8/darts"
