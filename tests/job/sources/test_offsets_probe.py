"""A look-up probes again until its partitions' records came within PROBE_SPREAD_S of one another (at most
PROBE_PASSES times), and keeps the closest probe: with the broker's answers faked."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from job.sources import offsets as kofs

TPS = [TopicPartition("t", 0), TopicPartition("t", 1)]


def _probes(monkeypatch: pytest.MonkeyPatch, spreads: list[float]) -> list[dict]:
    """Fake the broker: probe k answers ends (10 k, 20 k) with records ``spreads[k]`` apart; return the
    listings each probe was asked for."""
    asked: list[dict] = []

    def probe(consumer, listed, deadline):  # type: ignore[no-untyped-def]
        k = len(asked)
        asked.append(dict(listed))
        return {("t", 0): 10 * (k + 1), ("t", 1): 20 * (k + 1)}, {("t", 0): k, ("t", 1): k}, spreads[k]

    monkeypatch.setattr(kofs, "_listed", lambda consumer, tp, timeout: (0, 5))
    monkeypatch.setattr(kofs, "_probe", probe)
    return asked


def test_an_idle_or_prompt_look_up_takes_one_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _probes(monkeypatch, [0.0])
    assert kofs.probe_ends(None, TPS) == ({"t": {"0": 10, "1": 20}}, {("t", 0): 0, ("t", 1): 0})  # type: ignore[arg-type]
    assert len(asked) == 1


def test_it_probes_again_at_the_newest_ends_until_they_come_together(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _probes(monkeypatch, [0.1, 0.05, kofs.PROBE_SPREAD_S, 0.0])
    ends, times = kofs.probe_ends(None, TPS)  # type: ignore[arg-type]
    assert ends == {"t": {"0": 30, "1": 60}} and times == {("t", 0): 2, ("t", 1): 2}
    assert asked == [
        {("t", 0): (0, 5), ("t", 1): (0, 5)},
        {("t", 0): (0, 10), ("t", 1): (0, 20)},
        {("t", 0): (0, 20), ("t", 1): (0, 40)},
    ]


def test_when_none_comes_together_it_keeps_the_closest(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _probes(monkeypatch, [0.1, 0.03, 0.08, 0.09, 0.0])
    ends, _ = kofs.probe_ends(None, TPS)  # type: ignore[arg-type]
    assert ends == {"t": {"0": 20, "1": 40}}
    assert len(asked) == kofs.PROBE_PASSES == 4
