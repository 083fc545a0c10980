"""Whether a benchmark run may be called a result: the rules that make ``bench/run.py`` and
``bench/bench_density.py`` exit non-zero with a ``BENCHMARK FAILED: ...`` line.

A benchmark that quietly prints "0 events/s" or a wrong aggregate and exits 0 measures nothing. A run of
``bench/run.py`` fails when any runner (the engine or a peer) that was run

* processed no events (``events`` is 0), or did not finish (the engine must), or
* gave a result other than the expected one (its ``check`` says ``DIFFERENT``);

and when its live run (``--rate``)

* lost its dagger (the job exited before the harness stopped it), or wrote no window,
* read fewer than ``KEEP_UP`` of the events per second the feeder offered (it fell behind),
* could not be offered the rate (the feeder fell behind: the run did not measure what it says), or
* missed its goal: a watermark → InfluxDB p99 over ``--live-goal-s`` (:data:`LIVE_P99_GOAL_S`).

With ``--runs N`` every run is judged, the engine's and each peer's (``loop_2`` is the loop's second run): one run
that misses fails the benchmark.

A step of ``bench/bench_density.py`` fails when a dagger failed (at start or during the step), a dagger
wrote no window the step could measure, or the heavy dagger read fewer than ``KEEP_UP`` of its offered
rate, or missed a goal it reports against: the heavy dagger's p99 over :data:`HEAVY_P99_GOAL_S`, or the
step's memory (PSS of all its processes) over ``--mem-cap-gb``. A step skipped because it would not fit in
memory is reported, not failed.

A peer stopped at ``--peer-timeout`` is fine when every window it closed is equal; a peer that could not
run here (``check`` "not run": e.g. no Quix virtualenv) is reported, not failed.
"""

from __future__ import annotations

from typing import Any

NOT_RUN = "not run"
#: The share of the offered events per second a dagger must read to be said to keep up.
KEEP_UP = 0.9
#: The start of a density step's note when the step was skipped for want of memory (not a failure).
SKIPPED = "skipped:"
#: The live run's goal: each window in InfluxDB within this many seconds of its watermark, p99 (README).
LIVE_P99_GOAL_S = 5.0
#: The heavy dagger's goal beside the light ones in a density step, p99 seconds (issue 8).
HEAVY_P99_GOAL_S = 10.0


def failures(results: dict[str, Any]) -> list[str]:
    """Return one line per runner, or live run, that makes a ``bench/run.py`` run fail (empty when sound)."""
    out = []
    for key, entry in results.get("workloads", {}).items():
        for runner, run in (entry.get("runs") or {}).items():
            check = str(run.get("check") or "")
            if check == NOT_RUN:
                continue
            where = f"workload ({key}), {runner}"
            if not run.get("events"):
                out.append(
                    f"{where}: processed no events ({check or 'no result'}) {run.get('note', '')}".strip()
                )
            elif "DIFFERENT" in check:
                out.append(f"{where}: a result other than the expected one: {check}")
            elif runner == "engine" and not run.get("complete"):
                out.append(f"{where}: did not finish ({check})")
        lives = entry.get("lives") or ({"engine": entry["live"]} if entry.get("live") else {})
        goal = float(results.get("live_goal_s") or LIVE_P99_GOAL_S)
        for label, live in lives.items():
            where = f"workload ({key}), live" + (
                "" if label == "engine" and len(lives) == 1 else f" ({label})"
            )
            out.extend(f"{where}: {why}" for why in live_failures(live, goal))
    return out


def live_failures(live: dict[str, Any], goal_s: float = LIVE_P99_GOAL_S) -> list[str]:
    """Return why a live run (``bench.run.LiveResult`` as a dict) is not a result, or missed the p99 goal of
    ``goal_s``: empty when it is a result that met it."""
    out = []
    p99 = live.get("delay_p99_s")
    if p99 is not None and float(p99) > goal_s:
        out.append(f"watermark → InfluxDB p99 {float(p99):.2f} s, over the goal of {goal_s:g} s")
    rate = float(live.get("rate") or 0)
    offered = float(live.get("feeder_rate") or 0)
    if live.get("job_exit") is not None:
        out.append(
            f"the dagger exited with code {live['job_exit']} during the run "
            f"({live.get('job_error') or 'see its log'})"
        )
    if not live.get("windows"):
        out.append(f"the dagger wrote no window ({live.get('note') or 'none closed while measured'})")
    if offered and float(live.get("input_rows_per_s") or 0) < KEEP_UP * offered:
        out.append(
            f"the dagger fell behind: it read {float(live.get('input_rows_per_s') or 0):,.0f} of the "
            f"{offered:,.0f} events/s offered"
        )
    if not offered:
        out.append(f"the feeder sent nothing ({live.get('note') or 'no record'})")
    elif offered < KEEP_UP * rate or "feeder fell behind" in str(live.get("note") or ""):
        out.append(
            f"the feeder offered {offered:,.0f} of the {rate:,.0f} events/s asked for: the run does not "
            f"measure that rate"
        )
    return out


def density_failures(
    steps: list[dict[str, Any]],
    mem_cap_mb: float | None = None,
    mem_goal_mb: float | None = None,
    heavy_goal_s: float = HEAVY_P99_GOAL_S,
) -> list[str]:
    """Return why the steps of a density run (``bench.bench_density.Step`` as dicts) are not results, or missed
    a goal: the heavy dagger's p99 over ``heavy_goal_s``, a step's mean PSS over ``mem_cap_mb`` (the run's
    ``--mem-cap-gb``) or ``mem_goal_mb``."""
    out = []
    for step in steps:
        where = f"{step.get('mode')} N={step.get('n')}" + (
            f" (run {step['run']})" if int(step.get("run") or 1) > 1 else ""
        )
        note = str(step.get("note") or "").strip()
        if note.startswith(SKIPPED):
            continue
        if not step.get("ran"):
            out.append(f"{where}: did not run ({note or 'no reason recorded'})")
            continue
        failed = step.get("failed") or []
        if failed:
            out.append(
                f"{where}: {len(failed)} dagger(s) failed: {', '.join(failed[:4])}"
                + (f" ({step['failed_error']})" if step.get("failed_error") else "")
            )
        silent = [name for name, n in (step.get("points") or {}).items() if not n and name not in failed]
        if silent:
            out.append(f"{where}: {len(silent)} dagger(s) wrote no measured window: {', '.join(silent[:4])}")
        offered = float(step.get("heavy_offered") or 0)
        if offered and float(step.get("heavy_rate") or 0) < KEEP_UP * offered:
            out.append(
                f"{where}: the heavy dagger fell behind: it read {float(step.get('heavy_rate') or 0):,.0f} "
                f"of the {offered:,.0f} events/s offered"
            )
        heavy = step.get("heavy_p99_s")  # None: it timed no window (a silent dagger, above)
        if heavy is not None and float(heavy) > heavy_goal_s:
            out.append(
                f"{where}: the heavy dagger's p99 {float(heavy):.1f} s, over the goal of {heavy_goal_s:g} s"
            )
        memory = float(step.get("pss_mb") or step.get("rss_mb") or 0)
        for limit, what in ((mem_cap_mb, "cap (--mem-cap-gb)"), (mem_goal_mb, "goal (--mem-goal-mb)")):
            if limit is not None and memory > limit:
                out.append(
                    f"{where}: {memory:,.0f} MB of memory (mean PSS), over the {what} of {limit:,.0f} MB"
                )
    return out
