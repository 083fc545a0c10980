"""Every spec, SQL, alerting and chaos example in the docs is validated as the command that reads it would
(``daggers sql check``: the spec's fields, its schemas and its SQL, through job.query.plan.plan; ``daggers alerts
check``; the chaos experiment loader). A YAML or SQL block without a marker fails (tests/docs/blocks.py).

docs/sql.md's and docs/functions.md's SQL examples are run by tests/job/sql/test_sql_docs.py and
tests/job/sql/test_docs_examples.py, with their sample schemas and results."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from job.errors import SpecError, SqlError
from tests.docs.blocks import ROOT, Block, all_blocks

TESTED_ELSEWHERE = {ROOT / "docs" / "sql.md", ROOT / "docs" / "functions.md"}
CHECKED = [b for b in all_blocks() if b.lang in ("yaml", "yml", "sql")]
SPECS = [
    b
    for b in CHECKED
    if b.marker and b.marker[0] == "check" and b.marker[1].split()[0] in ("spec", "spec-patch", "sql")
]
SEED = ROOT / "examples" / "bookings-per-s2.yaml"
#: Secrets the examples read from the environment without a default.
ENV = {**os.environ, "PG_PASSWORD": "docs-example", "ES_API_KEY": "docs-example"}
_RELATIVE = ("schema_dir", "udf_file", "dart_store")


def test_every_yaml_and_sql_example_is_checked_or_says_where_it_is() -> None:
    kinds = ("spec", "spec-patch", "sql", "alerts", "chaos", "skip")
    bad = [
        b.where
        for b in CHECKED
        if b.path not in TESTED_ELSEWHERE or b.lang != "sql"
        if b.marker is None
        or b.marker[0] != "check"
        or b.marker[1].split()[0] not in kinds
        or (b.marker[1].startswith(("skip", "sql")) and len(b.marker[1].split()) < 2)
    ]
    assert bad == []
    assert len(SPECS) >= 15


def spec_text(block: Block) -> str:
    """Return the whole spec a block stands for, as YAML, with relative paths resolved against examples/
    (where the seed specs are; the docs' ``../tests/...`` paths are written from there)."""
    kind, *arg = block.marker[1].split() if block.marker else ("spec",)
    data: dict[str, Any]
    if kind == "spec":
        data = yaml.safe_load(block.text)
    elif kind == "spec-patch":
        data = {**yaml.safe_load(SEED.read_text()), **yaml.safe_load(block.text)}
        if "sinks" in data:
            data.pop("sink", None)
    else:
        data = {**yaml.safe_load((ROOT / arg[0]).read_text()), "sql": block.text}
    for key in _RELATIVE:
        if isinstance(data.get(key), str) and "://" not in data[key] and not Path(data[key]).is_absolute():
            data[key] = str((ROOT / "examples" / data[key]).resolve())
    return yaml.safe_dump(data, sort_keys=False)


@pytest.mark.parametrize("block", SPECS, ids=[b.where for b in SPECS])
def test_the_spec_example_passes_sql_check(block: Block, tmp_path: Path) -> None:
    from job.query.plan import plan
    from job.spec import parse_spec

    p = plan(parse_spec(spec_text(block), source=block.where, env=ENV), tmp_path)
    assert p.translation.spark_sql and p.translation.columns


def test_a_broken_example_fails_the_check(tmp_path: Path) -> None:
    """The check is not a formality: a misspelt function or field in an example is an error."""
    from job.query.plan import plan
    from job.spec import parse_spec

    sql = Block(
        ROOT / "README.md",
        1,
        "sql",
        "SELECT coutn(1) AS n, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS t\n"
        "FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
        ("check", "sql examples/bookings-per-s2.yaml"),
    )
    with pytest.raises(SqlError, match="unknown function coutn") as info:
        plan(parse_spec(spec_text(sql), env=ENV), tmp_path)
    assert info.value.hint == "did you mean count?"
    patch = Block(ROOT / "README.md", 1, "yaml", "watermark_delay: 5000\n", ("check", "spec-patch"))
    with pytest.raises(SpecError, match=re.escape("watermark_delay")):
        parse_spec(spec_text(patch), env=ENV)


ALERTS = [b for b in CHECKED if b.marker == ("check", "alerts")]


@pytest.mark.parametrize("block", ALERTS, ids=[b.where for b in ALERTS])
def test_the_alerting_example_passes_alerts_check(block: Block) -> None:
    from alerting.config import parse_config

    config = parse_config(block.text, source=block.where, env=ENV, base_dir=ROOT / "examples" / "alerts")
    assert config.rules and config.routes


CHAOS = [b for b in CHECKED if b.marker == ("check", "chaos")]


@pytest.mark.parametrize("block", CHAOS, ids=[b.where for b in CHAOS])
def test_the_chaos_example_loads(block: Block, tmp_path: Path) -> None:
    from job.chaos.experiment import load_experiment

    path = tmp_path / "experiment.yaml"
    path.write_text(block.text)
    experiment = load_experiment(path)
    assert (ROOT / experiment.dagger).is_file() and experiment.cases
