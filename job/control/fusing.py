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
from pathlib import Path
from typing import TYPE_CHECKING

from job.control import specs

if TYPE_CHECKING:
    from job.spec import DaggerSpec

log = logging.getLogger("daggers.control")


@dataclass(frozen=True)
class Candidate:
    """A dagger of the cluster: its ref, spec text and the environment its spec is read with."""

    ref: str
    text: str
    env: Mapping[str, str]


def _spec(candidate: Candidate) -> DaggerSpec | None:
    """Return ``candidate``'s spec, or None when it does not parse (its own run reports that)."""
    try:
        return specs.parse_text(candidate.text, candidate.env, candidate.ref)
    except Exception as exc:  # noqa: BLE001 - a hint only
        log.debug("%s: not read for the fusion hint: %s", candidate.ref, exc)
        return None


def fusion_group(spec: DaggerSpec, state_dir: Path) -> str | None:
    """Return the fused group ``spec``'s query would join (:func:`job.shared.fusion.fusion_key`), or None
    when it cannot fuse, is dedicated, or does not plan (its own run reports that)."""
    from job.plan import plan
    from job.shared.fusion import fusion_key, why_not_fusible

    if spec.isolation == "dedicated":
        return None
    try:
        planned = plan(spec, state_dir)
    except Exception as exc:  # noqa: BLE001 - a hint only
        log.debug("%s: not planned for the fusion hint: %s", spec.name, exc)
        return None
    return fusion_key(planned) if why_not_fusible(planned) is None else None


def isolation_of(candidate: Candidate) -> str:
    """Return ``candidate``'s ``isolation`` ("" when its spec does not parse: ``dagger show`` still shows it)."""
    spec = _spec(candidate)
    return spec.isolation if spec is not None else ""


def _topics(spec: DaggerSpec) -> frozenset[str]:
    return frozenset(t for s in spec.streams for t in s.topics)


def fusible_with(target: Candidate, others: list[Candidate], state_dir: Path) -> list[str]:
    """Return the refs of ``others`` whose queries could be one with ``target``'s: the same stream read
    alike (source, watermark delay, window, trigger, parallelism, SQL settings; the SQL may differ).

    Each spec is read once; only those that read the same topics are planned. Empty when ``target`` cannot
    fuse or is dedicated.
    """
    mine = _spec(target)
    if mine is None:
        return []
    alike = [(o.ref, spec) for o in others if o.ref != target.ref
             and (spec := _spec(o)) is not None and _topics(spec) == _topics(mine)]
    if not alike:
        return []
    key = fusion_group(mine, state_dir)
    if key is None:
        return []
    return sorted(ref for ref, spec in alike if fusion_group(spec, state_dir) == key)


def fusion_hint(cluster: str, isolation: str, partners: list[str]) -> str | None:
    """Return the hint for a shared dagger whose query could be one with ``partners``' (None if none)."""
    if isolation != "shared" or not partners:
        return None
    shown = ", ".join(partners[:5]) + (f" and {len(partners) - 5} more" if len(partners) > 5 else "")
    return (f"it reads its stream as {len(partners)} other dagger{'s' * (len(partners) > 1)} of {cluster} "
            f"{'do' if len(partners) > 1 else 'does'} ({shown}); with isolation: fused in their specs they run "
            "as one query, one read and one micro-batch for all, which many light daggers on a small host "
            "need to keep their latency (README: Fused daggers)")
