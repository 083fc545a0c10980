"""Chaos experiments: files (YAML or JSON) with a name, a description, a dagger, a load and cases.

A case's blast radius (``target``) is the broker, the InfluxDB, the dagger, or the cluster the dagger
runs on. With any ``cluster`` case the dagger runs under the control plane (see
:mod:`job.chaos.world`): a registry with one team and two clusters that fail over to each other, one
controller process each, the dagger created and deployed on the first. A cluster fault hits the
cluster the dagger is on when the fault starts:

* ``kill``: the cluster dies: its controller and its dagger get SIGKILL. Once the controller's
  heartbeat is ``failover_after_s`` old, the other cluster's controller takes the dagger over and
  resumes it from its checkpoint. After ``downtime_s`` the controller starts again (and stays
  empty: there is no automatic failback).
* ``stop``: the cluster is shut down on purpose: its controller gets SIGTERM, stops its daggers
  gracefully and clears its heartbeat, so there is NO failover: the dagger is down until the
  controller starts again after ``downtime_s`` and resumes it on the same cluster.
* ``pause``: the cluster hangs: controller and dagger get SIGSTOP, then SIGCONT after ``downtime_s``.
  A pause longer than ``failover_after_s`` fails over; the other controller (or the resumed one,
  whichever acts first) stops the orphaned dagger before it runs again elsewhere.
* ``slow``: the cluster is starved: controller and dagger are both slowed as by ``slow`` below.

In that mode the other targets still work: ``dagger`` signals the dagger's current process (the
controller restarts a killed one after its back-off, so ``downtime_s`` only applies to ``stop``, done
through the control plane: stop, then deploy again).

```yaml
name: broker-and-influx-outages
description: The broker is stopped for 30 s, then InfluxDB for 60 s, under steady load.
dagger: examples/bookings-per-s2.yaml     # its sql and sink measurement are used; addresses are the tool's
load: {stream: booking, topic: chaos-bookings, events_per_s: 2000, duration_s: 240, partitions: 3}
cases:
  - {name: broker down, target: broker, fault: stop, at_s: 40, downtime_s: 30}
  - {name: influx down, target: influxdb, fault: stop, at_s: 120, downtime_s: 60}
  - {name: dagger killed, target: dagger, fault: kill, at_s: 200, downtime_s: 5}
```

```yaml
name: cluster-lost                        # runs the dagger under two controllers
dagger: examples/bookings-per-s2.yaml
load: {stream: booking, topic: chaos-cluster, events_per_s: 1000, duration_s: 120}
failover_after_s: 5
cases:
  - {name: cluster lost, target: cluster, fault: kill, at_s: 40, downtime_s: 20}
```
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from job.common.strict_model import StrictModel
from job.errors import SpecError
from job.spec import format_validation


class _Model(StrictModel):
    """A section of a chaos experiment."""


class Load(_Model):
    """The events the experiment produces while it runs."""

    stream: Literal["driver_location", "booking", "api_log"] = Field(
        description="Which event schema to produce."
    )
    topic: str = Field(description="The topic the dagger reads; created by the tool.")
    events_per_s: float = Field(gt=0, le=1_000_000, description="Steady produce rate.")
    duration_s: float = Field(gt=0, le=3600, description="How long the load runs.")
    partitions: int = Field(default=3, ge=1, le=64, description="Partitions of the topic.")
    seed: int = Field(default=7, description="Seed of the event generator (same seed, same events).")


class Case(_Model):
    """One fault: what it hits (blast radius), how, when and for how long."""

    name: str = Field(description="A short name shown in the report.")
    target: Literal["broker", "influxdb", "dagger", "cluster"] = Field(
        description="The blast radius. cluster: the cluster the dagger is on when the fault starts (its "
        "controller and its dagger); any cluster case runs the dagger under the control plane, "
        "on two clusters that fail over to each other. kill: both SIGKILLed, the other cluster "
        "takes over after failover_after_s; stop: a planned shutdown (the controller stops its "
        "daggers gracefully and clears its heartbeat: no failover, the dagger waits for its "
        "cluster); pause: both SIGSTOPped (fails over when longer than failover_after_s); "
        "slow: both slowed. The controller starts again after downtime_s (no failback)."
    )
    fault: Literal["stop", "kill", "pause", "slow"] = Field(
        description="stop: graceful stop then start again; kill: SIGKILL then start again; "
        "pause: SIGSTOP then SIGCONT (a hung process); slow: the process runs only "
        "1 - slow_fraction of the time (SIGSTOP/SIGCONT every 100 ms), as on a starved disk, "
        "network or CPU: it still answers, late."
    )
    slow_fraction: float = Field(
        default=0.8,
        gt=0,
        lt=1,
        description="With fault slow: the share of each 100 ms the target is stopped.",
    )
    at_s: float = Field(ge=0, description="Seconds after the load starts.")
    after_read: int = Field(
        default=0,
        ge=0,
        description="The fault also waits until the dagger has read this many events (0: it starts at at_s). "
        "A cold dagger on a busy machine may need a minute for its first batch: after_read: 1 makes "
        "sure a fault hits a dagger that has read, and so has a checkpoint to resume. It waits at "
        "most until the load ends plus recover_timeout_s, then starts anyway (and says so in the run's output).",
    )
    downtime_s: float = Field(ge=0, le=600, description="Seconds until the target is back.")


class Experiment(_Model):
    """A chaos experiment."""

    name: str = Field(description="The experiment's name.")
    description: str = Field(default="", description="What it shows, for the report.")
    dagger: str = Field(description="Path of the dagger spec whose SQL and sink measurement are used.")
    load: Load
    cases: list[Case] = Field(default_factory=list, description="The faults, in any order.")
    watermark_delay_ms: int = Field(default=10_000, ge=0, description="The dagger's watermark delay.")
    recover_timeout_s: float = Field(
        default=300, gt=0, description="How long to wait for the outputs at the end."
    )
    failover_after_s: float = Field(
        default=5,
        gt=0,
        le=600,
        description="With cluster cases: a cluster's controller heartbeat this old "
        "makes the other cluster take its dagger over.",
    )

    @model_validator(mode="after")
    def _cases_fit(self) -> Experiment:
        for i, case in enumerate(self.cases):
            if case.at_s > self.load.duration_s:
                raise ValueError(
                    f"cases[{i}] ({case.name}) starts at {case.at_s} s, after the load ends "
                    f"({self.load.duration_s} s)"
                )
        hits = sorted(
            (c.at_s, c.at_s + c.downtime_s, i) for i, c in enumerate(self.cases) if c.target == "cluster"
        )
        for (_, end, i), (start, _, j) in zip(hits, hits[1:], strict=False):
            if start < end:
                raise ValueError(
                    f"cases[{j}] ({self.cases[j].name}) hits a cluster at {start} s, while "
                    f"cases[{i}] ({self.cases[i].name}) still does (until {end} s): "
                    "cluster cases may not overlap"
                )
        return self

    @property
    def controlled(self) -> bool:
        """Whether the dagger runs under the control plane (some case hits a cluster)."""
        return any(c.target == "cluster" for c in self.cases)


def load_experiment(path: str | Path) -> Experiment:
    """Read an experiment file (YAML or JSON); raise SpecError naming the field and line."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"no experiment file at {p}")
    text = p.read_text()
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
        node = None if p.suffix == ".json" else yaml.compose(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise SpecError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {exc}") from None
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation(exc, node, str(p), root=Experiment)) from None


TEMPLATE = """name: {name}
description: What this experiment shows.
dagger: examples/bookings-per-s2.yaml
load:
  stream: booking
  topic: chaos-{name}
  events_per_s: 2000
  duration_s: 180
  partitions: 3
cases:
  - name: broker down
    target: broker
    fault: stop
    at_s: 40
    downtime_s: 30
  - name: dagger killed
    target: dagger
    fault: kill
    at_s: 120
    downtime_s: 5
"""
