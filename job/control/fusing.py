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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from job.control import specs

log = logging.getLogger("daggers.control")


@dataclass(frozen=True)
class Candidate:
    """A dagger of the cluster: its ref, spec text and the environment its spec is read with."""

    ref: str
    text: str
    env: Mapping[str, str]


def fusion_group(candidate: Candidate, state_dir: Path) -> str | None:
    """Return the fused group ``candidate``'s query would join (:func:`job.shared.fusion.fusion_key`), or
    None when it cannot fuse (or its spec does not plan: its own run reports that)."""
    from job.shared.fusion import fusion_key, why_not_fusible

    try:
        plan = specs.validate_text(candidate.text, candidate.env, state_dir, candidate.ref)
    except Exception as exc:  # noqa: BLE001 - a hint only: a spec that does not plan is reported elsewhere
        log.debug("%s: not planned for the fusion hint: %s", candidate.ref, exc)
        return None
    if plan.spec.isolation == "dedicated" or why_not_fusible(plan) is not None:
        return None
    return fusion_key(plan)


def isolation_of(candidate: Candidate) -> str:
    """Return ``candidate``'s ``isolation`` ("" when its spec does not parse: ``dagger show`` still shows it)."""
    try:
        return specs.parse_text(candidate.text, candidate.env, candidate.ref).isolation
    except Exception:  # noqa: BLE001
        return ""


def _topics(candidate: Candidate) -> frozenset[str] | None:
    """Return the topics ``candidate`` reads (a cheap look before planning), or None if it does not parse."""
    try:
        spec = specs.parse_text(candidate.text, candidate.env, candidate.ref)
    except Exception:  # noqa: BLE001
        return None
    return frozenset(t for s in spec.streams for t in s.topics)


def fusible_with(target: Candidate, others: list[Candidate], state_dir: Path,
                 group: Callable[[Candidate, Path], str | None] = fusion_group) -> list[str]:
    """Return the refs of ``others`` whose queries could be one with ``target``'s: the same stream read
    alike (source, watermark delay, window, trigger, parallelism, SQL settings; the SQL may differ).

    Only daggers that read the same topics are planned. Empty when ``target`` cannot fuse or is dedicated.
    """
    topics = _topics(target)
    if not topics:
        return []
    alike = [o for o in others if o.ref != target.ref and _topics(o) == topics]
    if not alike:
        return []
    key = group(target, state_dir)
    if key is None:
        return []
    return sorted(o.ref for o in alike if group(o, state_dir) == key)


def fusion_hint(cluster: str, isolation: str, partners: list[str]) -> str | None:
    """Return the hint for a shared dagger whose query could be one with ``partners``' (None if none)."""
    if isolation != "shared" or not partners:
        return None
    shown = ", ".join(partners[:5]) + (f" and {len(partners) - 5} more" if len(partners) > 5 else "")
    return (f"it reads its stream as {len(partners)} other dagger{'s' * (len(partners) > 1)} of {cluster} "
            f"{'do' if len(partners) > 1 else 'does'} ({shown}); with isolation: fused in their specs they run "
            "as one query, one read and one micro-batch for all, which many light daggers on a small host "
            "need to keep their latency (README: Fused daggers)")
