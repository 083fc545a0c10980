"""Chaos experiment files: valid ones load; bad ones name the field and line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from job.chaos.experiment import TEMPLATE, load_experiment
from job.cli import app
from job.errors import SpecError


def test_example_and_template_load(tmp_path: Path) -> None:
    exp = load_experiment("examples/chaos/outages.yaml")
    assert [c.target for c in exp.cases] == ["broker", "dagger", "influxdb"]
    path = tmp_path / "t.yaml"
    path.write_text(TEMPLATE.format(name="t"))
    assert load_experiment(path).load.topic == "chaos-t"


def test_bad_fields_are_named_with_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TEMPLATE.format(name="b").replace("fault: stop", "fault: melt").replace("events_per_s: 2000",
                                                                                          "events_per_s: -1"))
    with pytest.raises(SpecError) as info:
        load_experiment(path)
    text = str(info.value)
    assert f"{path}:7: load.events_per_s: Input should be greater than 0" in text
    assert f"{path}:13: cases[0].fault: Input should be 'stop', 'kill' or 'pause'" in text


def test_case_after_the_load_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "late.yaml"
    path.write_text(TEMPLATE.format(name="l").replace("at_s: 120", "at_s: 500"))
    with pytest.raises(SpecError, match=r"cases\[1\] \(dagger killed\) starts at 500.0 s, after the load ends"):
        load_experiment(path)


def test_cli_new_and_list(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["chaos", "new", "night", "--folder", str(tmp_path)])
    assert result.exit_code == 0 and (tmp_path / "night.yaml").exists()
    again = runner.invoke(app, ["chaos", "new", "night", "--folder", str(tmp_path)])
    assert again.exit_code == 2
    listed = runner.invoke(app, ["chaos", "list", str(tmp_path)])
    assert "night" in listed.output and "2000/s for 180 s" in listed.output
