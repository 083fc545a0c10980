"""The command lines bench/run.py gives the peers that read the topic and write InfluxDB themselves."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import run
from bench.workloads import WORKLOADS


def _argv(peer: str, folder: Path) -> list[str] | None:
    stack = run.Stack(
        folder,
        SimpleNamespace(bootstrap="127.0.0.1:19092"),
        SimpleNamespace(url="http://127.0.0.1:18086"),
    )
    loaded = run.Loaded(topic="bench-a-1", events=10, total=12, expected={}, produce_s=0.1)
    progress = folder / f"{peer}-progress.json"
    return run.peer_argv(peer, WORKLOADS["a"], stack, loaded, folder, argparse.Namespace(), progress)


SHARED = [
    "--bootstrap", "127.0.0.1:19092", "--topic", "bench-a-1", "--influx", "http://127.0.0.1:18086",
    "--db", "bench",
]  # fmt: skip


def test_the_loop_peers_command_line(tmp_path: Path) -> None:
    assert _argv("loop", tmp_path) == [
        run.PYTHON,
        str(run.ROOT / "bench/peers/loop_peer.py"),
        *SHARED,
        "--measurement", "drivers_loop", "--progress", str(tmp_path / "loop-progress.json"),
        "--delay-ms", str(run.WATERMARK_DELAY_MS),
    ]  # fmt: skip


def test_the_quix_peers_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quix = tmp_path / "quix-venv/bin/python"
    monkeypatch.setattr(run, "QUIX_PYTHON", quix)
    assert _argv("quix", tmp_path) is None  # no Quix Streams virtualenv here
    quix.parent.mkdir(parents=True)
    quix.touch()
    assert _argv("quix", tmp_path) == [
        str(quix),
        str(run.ROOT / "bench/peers/quix_peer.py"),
        *SHARED,
        "--measurement", "drivers_quix", "--progress", str(tmp_path / "quix-progress.json"),
        "--delay-ms", str(run.WATERMARK_DELAY_MS),
        "--descriptors", str(tmp_path / "descriptors.pb"), "--state-dir", str(tmp_path / "quix-state"),
    ]  # fmt: skip
    assert (tmp_path / "descriptors.pb").stat().st_size > 0
