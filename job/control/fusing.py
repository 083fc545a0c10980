"""Which daggers of a cluster could run as one query (``isolation: fused``), for the hint that says so.

A shared dagger is a streaming query of its own: its micro-batches cost the same however few rows it
reads, and on a small host many light daggers that read one stream alike wait on each other at every
window end (BENCHMARKS.md, the density sweep: 10 light daggers and a heavy one on 2 cores, light p99 up
to 11.2 s shared, 6.2 s fused). Fused, such daggers are one query (:mod:`job.shared.fusion`). Daggers
does not fuse a shared dagger by itself: a fused group starts a new generation of its query when a
member joins, is edited or leaves, which a team may not want. So it tells the team which of its daggers
could be one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from job.control.spec_check import CheckedSpec
    from job.spec import DaggerSpec

log = logging.getLogger("daggers.control")


@dataclass(frozen=True)
class Candidate:
    """A dagger of the cluster: its ref, spec text and the cluster's variables (``DAGGERS_BOOTSTRAP``,
    ``DAGGERS_INFLUX``; its spec is checked as data, :mod:`job.control.spec_check`)."""

    ref: str
    text: str
    env: Mapping[str, str]


def _checked(candidate: Candidate) -> CheckedSpec | None:
    """Return ``candidate``'s spec checked as data, or None when it does not check (its own run reports that)."""
    from job.control.spec_check import check_spec

    try:
        return check_spec(candidate.text, candidate.env, candidate.ref)
    except Exception as exc:  # noqa: BLE001 - a hint only
        log.debug("%s: not read for the fusion hint: %s", candidate.ref, exc)
        return None


def fusion_group(checked: CheckedSpec) -> str | None:
    """Return the fused group a checked spec's query would join (:func:`job.shared.fusion.fusion_key`), or
    None when it cannot fuse, is dedicated, or has no plan on the server's schemas."""
    from job.shared.fusion import fusion_key, why_not_fusible

    if checked.spec.isolation == "dedicated" or checked.plan is None:
        return None
    return fusion_key(checked.plan) if why_not_fusible(checked.plan) is None else None


def isolation_of(candidate: Candidate) -> str:
    """Return ``candidate``'s ``isolation`` ("" when its spec does not parse: ``dagger show`` still shows it)."""
    checked = _checked(candidate)
    return checked.spec.isolation if checked is not None else ""


def _topics(spec: DaggerSpec) -> frozenset[str]:
    return frozenset(t for s in spec.streams for t in s.topics)


def fusible_with(target: Candidate, others: list[Candidate]) -> list[str]:
    """Return the refs of ``others`` whose queries could be one with ``target``'s: the same stream read
    alike (source, watermark delay, window, trigger, parallelism, SQL settings; the SQL may differ).

    Each spec is checked once, as data. Empty when ``target`` cannot fuse or is dedicated.
    """
    mine = _checked(target)
    if mine is None:
        return []
    key = fusion_group(mine)
    if key is None:
        return []
    alike = [
        (o.ref, checked)
        for o in others
        if o.ref != target.ref
        and (checked := _checked(o)) is not None
        and _topics(checked.spec) == _topics(mine.spec)
    ]
    return sorted(ref for ref, checked in alike if fusion_group(checked) == key)


def fusion_hint(cluster: str, isolation: str, partners: list[str]) -> str | None:
    """Return the hint for a shared dagger whose query could be one with ``partners``' (None if none)."""
    if isolation != "shared" or not partners:
        return None
    shown = ", ".join(partners[:5]) + (f" and {len(partners) - 5} more" if len(partners) > 5 else "")
    return (
        f"it reads its stream as {len(partners)} other dagger{'s' * (len(partners) > 1)} of {cluster} "
        f"{'do' if len(partners) > 1 else 'does'} ({shown}); with isolation: fused in their specs they run "
        "as one query, one read and one micro-batch for all, which many light daggers on a small host "
        "need to keep their latency (README: Fused daggers)"
    )
