"""Print and record benchmark results: the console table, a section of the dated history (bench/results/history.md) and a PNG plot."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Where recorded runs go: the dated history (BENCHMARKS.md keeps only the current figure of each measure).
HISTORY = ROOT / "bench" / "results" / "history.md"
#: Where the benchmarks' plots go, and how the history links one (relative to the history's folder).
PLOTS = ROOT / "bench" / "results" / "plots"
PLOT_LINK = "plots/"
TITLES = {
    "engine": "Daggers (job.cli run)",
    "loop": "hand-written loop (confluent-kafka, protobuf, s2sphere)",
    "sparkudf": "PySpark, per-row Python UDF (s2sphere)",
    "quix": "Quix Streams 3.28 (group_by + tumbling window)",
    "baseline": "Daggers, --baseline engine features pinned",
}
#: The peers of bench/run.py (every other runner is Daggers: the engine, a baseline, a variant) and the
#: Daggers run each is compared with: Daggers on the same query, the engine unless named here.
PEERS = ("loop", "sparkudf", "quix", "flink-udf", "flink-builtin")
DAGGERS_SIDE = {"flink-builtin": "engine-builtin"}


def machine() -> str:
    """Return CPU model, nproc, memory, Python and kernel as one line."""
    model = platform.machine()
    mem = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        kb = next(
            int(x.split()[1])
            for x in Path("/proc/meminfo").read_text().splitlines()
            if x.startswith("MemTotal")
        )
        mem = f"{kb / 1024**2:.1f} GiB"
    except (OSError, StopIteration):
        pass
    nproc = len(os.sched_getaffinity(0))
    return f"{model}, nproc={nproc}, memory={mem}, Python {platform.python_version()}, Linux {platform.release()}"


def section_header(
    title: str, command: str, load_before: tuple[float, ...], load_after: tuple[float, ...]
) -> list[str]:
    """Return the first lines of a history section: its title, the command, the date, the machine and
    the load average before and after."""
    return [
        "",
        f"## {title}",
        "",
        f"- Command: `{command}`",
        f"- Date: {datetime.now(UTC).strftime('%a %b %d %H:%M:%S UTC %Y')}",
        f"- Machine: {machine()}",
        "- Load average (1/5/15 min) before: "
        + "/".join(f"{x:.1f}" for x in load_before)
        + ", after: "
        + "/".join(f"{x:.1f}" for x in load_after),
    ]


def publish(lines: list[str], append: bool) -> None:
    """Print a section and, when ``append``, add it to the dated history (bench/results/history.md)."""
    text = "\n".join(lines) + "\n"
    print(text)
    if append:
        with HISTORY.open("a") as fh:
            fh.write(text)


def _load(t: Any) -> str:
    return "/".join(f"{x:.2f}" for x in t) if t else "?"


def run_line(r: Any) -> str:
    """One line about a pre-loaded run (a RunResult or its dict)."""
    d = r if isinstance(r, dict) else r.__dict__
    if not d.get("events"):
        return f"{d['runner']}: {d.get('check') or 'no result'} {d.get('note', '')}".strip()
    steady = (
        f", {d['steady_events_per_s']:,.0f}/s after the first batch" if d.get("steady_events_per_s") else ""
    )
    return (
        f"{d['runner']}: {d['events']:,} events in {d['seconds']:.1f} s = {d['events_per_s']:,.0f} events/s"
        f"{steady} (startup {d['startup_s']:.0f} s); driver {d['driver_peak_mb']:.0f} MB, workers "
        f"{d['worker_peak_mb']:.0f} MB, CPU {d['job_cores']:.2f} cores = {d.get('cpu_us_per_event', 0):.1f} µs/event (+broker {d['broker_cores']:.2f}, "
        f"influxd {d['influx_cores']:.2f}); {d['check']}; load {_load(d['load_before'])}"
    )


def latency_split(
    windows: list[tuple[float, float, float, float]], batches: list[tuple[float, float, int, float | None]]
) -> list[tuple[float, float, float, float]]:
    """Split each window's latency (a live run's ``window_timeline``: end, closing record sent, first and last
    point in InfluxDB; ``batch_timeline``: reported at, duration ms, rows, watermark; seconds after the feed's
    start) into (the closing record waiting for its batch to start, that batch, the eviction batch after it,
    the rest: from the eviction's end to the window's last point). A batch starts at its report time less its
    duration; the closing record's batch is the first that reads rows and starts after the record was sent,
    the eviction the first batch without rows that starts after it. A window whose batches the timeline does
    not hold is left out."""
    spans = [(at - ms / 1000, at, rows) for at, ms, rows, _ in batches]
    out: list[tuple[float, float, float, float]] = []
    for _, sent, _, last in windows:
        reads = next(((s, e) for s, e, rows in spans if rows > 0 and s >= sent - 0.05), None)
        if reads is None:
            continue
        evicts = next(((s, e) for s, e, rows in spans if rows == 0 and s >= reads[1] - 0.2), None)
        if evicts is None:
            continue
        out.append(
            (
                round(max(0.0, reads[0] - sent), 2),
                round(reads[1] - reads[0], 2),
                round(evicts[1] - evicts[0], 2),
                round(max(0.0, last - evicts[1]), 2),
            )
        )
    return out


def _split(d: dict[str, Any]) -> str:
    """`` (each window: wait/batch/eviction/rest s ...)`` from the run's timelines, where they hold one."""
    split = latency_split(d.get("window_timeline") or [], d.get("batch_timeline") or [])
    if not split:
        return ""
    each = ", ".join("/".join(f"{x:.1f}" for x in w) for w in split)
    return f"; per window, s waiting/closing batch/eviction/rest: {each}"


def live_line(live: Any) -> str:
    """One line about a live run."""
    d = live if isinstance(live, dict) else live.__dict__
    if d.get("delay_p50_s") is not None:
        delays = (
            f"{len(d['windows'])} windows, watermark→InfluxDB p50 {d['delay_p50_s']:.2f} s p99 "
            f"{d['delay_p99_s']:.2f} s (from the job's own watermark: p50 {_f(d['delay_status_p50_s'])} p99 "
            f"{_f(d['delay_status_p99_s'])}){_split(d)}"
        )
    else:
        delays = "no window closed while measured"
    return (
        f"live {d['rate']:,.0f}/s (sent {d.get('feeder_rate', 0):,.0f}/s): {delays}; job input "
        f"{d['input_rows_per_s']:,.0f} rows/s; batch p50 {d['batch_ms_p50']:.0f} ms p99 {d['batch_ms_p99']:.0f} ms; "
        f"driver {d['driver_peak_mb']:.0f} MB, workers {d['worker_peak_mb']:.0f} MB{_pss(d)} (growth "
        f"{d.get('driver_growth_mb_per_min', 0):+.1f} and {d.get('worker_growth_mb_per_min', 0):+.1f} MB/min), "
        f"CPU {d['job_cores']:.2f} cores{_second_half(d)} (+broker {d['broker_cores']:.2f}, "
        f"influxd {d['influx_cores']:.2f}); "
        f"feeder behind by at most {d['feeder_behind_s']:.1f} s; load {_load(d['load_before'])} → "
        f"{_load(d['load_after'])}" + (f". {d['note']}" if d.get("note") else "")
    )


def _second_half(d: dict[str, Any]) -> str:
    """`` (second half of the feed: X)`` when the run read it (runs before 7 Dec 2026 did not)."""
    if not d.get("job_cores_second_half"):
        return ""
    return f" (second half of the feed: {d['job_cores_second_half']:.2f})"


def _pss(d: dict[str, Any]) -> str:
    """`` (PSS: driver X, workers Y MB)`` when the run read PSS (RSS counts a page a fork shares once per
    process)."""
    if not d.get("worker_peak_pss_mb"):
        return ""
    return f" (PSS: driver {d['driver_peak_pss_mb']:.0f}, workers {d['worker_peak_pss_mb']:.0f} MB)"


def summary_lines(summary: dict[str, dict[str, Any]]) -> list[str]:
    """One line per runner run more than once (``bench/run.py --runs``): the median and the worst of its
    figures; then one line per peer run more than once: Daggers against it, the ratio of their medians."""
    units = {
        "events_per_s": ("events/s", ",.0f"),
        "cpu_us_per_event": ("CPU µs/event", ".2f"),
        "cpu_us_per_event_second_half": ("the feed's second half", ".2f"),
        "delay_p99_s": ("watermark → InfluxDB p99 s", ".2f"),
        "batch_ms_p99": ("batch p99 ms", ",.0f"),
        "input_rows_per_s": ("input rows/s", ",.0f"),
    }
    lines = []
    for runner, figures in summary.items():
        runs = max((f["runs"] for f in figures.values()), default=0)
        if runs < 2:
            continue
        parts = [
            f"{units[k][0]} median {f['median']:{units[k][1]}} worst {f['worst']:{units[k][1]}}"
            for k, f in figures.items()
            if k in units
        ]
        lines.append(f"{runner}, {runs} runs: " + "; ".join(parts))
    return lines + ratio_lines(summary)


def ratio_lines(summary: dict[str, dict[str, Any]]) -> list[str]:
    """Per peer run more than once, Daggers (:data:`DAGGERS_SIDE`) against it: the ratio of the median
    events/s and of the median CPU µs an event of both."""
    lines = []
    for peer in PEERS:
        theirs = summary.get(peer, {})
        ours_name = DAGGERS_SIDE.get(peer, "engine")
        ours = summary.get(ours_name, {})
        if theirs.get("events_per_s", {}).get("runs", 0) < 2 or not ours.get("events_per_s"):
            continue
        a, b = ours["events_per_s"]["median"], theirs["events_per_s"]["median"]
        if not b:
            continue
        line = (
            f"{ours_name} against {peer}, medians: {a / b:.1f}x the events/s ({a:,.0f} against {b:,.0f}, "
            f"{ours['events_per_s']['runs']} and {theirs['events_per_s']['runs']} runs)"
        )
        oc = ours.get("cpu_us_per_event", {}).get("median") or 0.0
        tc = theirs.get("cpu_us_per_event", {}).get("median") or 0.0
        if oc and tc:
            line += f"; {peer} takes {tc / oc:.1f}x the CPU an event ({tc:.2f} against {oc:.2f} µs)"
        lines.append(line)
    return lines


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key, entry in results["workloads"].items():
        runs = entry.get("runs", {})
        for name, d in runs.items():
            ratio = ""
            # a repeated run (--runs) against the engine's run of its round: baseline_2 against engine_2
            number = name.rpartition("_")[2] if _family(name) != name else ""
            engine = runs.get(f"engine_{number}", {}) if number else runs.get("engine", {})
            if _family(name) != "engine" and d.get("events_per_s") and engine.get("events_per_s"):
                ratio = f"{engine['events_per_s'] / d['events_per_s']:.1f}x"
                if d.get("cpu_us_per_event") and engine.get("cpu_us_per_event"):
                    ratio += f" (CPU/event: {d['cpu_us_per_event'] / engine['cpu_us_per_event']:.1f}x)"
            steady = (
                f" ({d['steady_events_per_s']:,.0f} after batch 1)" if d.get("steady_events_per_s") else ""
            )
            title = TITLES.get(name) or (
                f"{TITLES.get(_family(name), _family(name))} (run {name.rpartition('_')[2]})"
                if _family(name) != name
                else name
            )
            rows.append(
                [
                    f"({key})",
                    title,
                    f"{d.get('events', 0):,}",
                    f"{d.get('events_per_s', 0):,.0f}{steady}",
                    ratio,
                    f"{d.get('startup_s', 0):.0f}",
                    f"{d.get('driver_peak_mb', 0):,.0f}",
                    f"{d.get('worker_peak_mb', 0):,.0f}",
                    f"{d.get('job_cores', 0):.2f}",
                    f"{d.get('cpu_us_per_event', 0):.1f}",
                    f"{d.get('broker_cores', 0):.2f}",
                    f"{d.get('influx_cores', 0):.2f}",
                    d.get("check", ""),
                    f"{_load(d.get('load_before'))} → {_load(d.get('load_after'))}",
                ]
            )
    return rows


def _family(label: str) -> str:
    name, _, number = label.rpartition("_")
    return name if name and number.isdigit() else label


HEAD = [
    "workload",
    "runner",
    "events",
    "events/s",
    "Daggers is",
    "startup s",
    "driver MB",
    "workers MB",
    "job cores",
    "job CPU µs/event",
    "broker cores",
    "influxd cores",
    "result",
    "load avg (1/5/15 min) before → after",
]


def table(results: dict[str, Any]) -> str:
    """Return the console table of a run (plain text)."""
    lines = [" | ".join(HEAD)]
    lines += [" | ".join(r) for r in _rows(results)]
    for key, entry in results["workloads"].items():
        lives = entry.get("lives") or ({"engine": entry["live"]} if "live" in entry else {})
        for label, live in lives.items():
            lines.append(f"({key}) " + ("" if len(lives) == 1 else f"{label}: ") + live_line(live))
        comps = entry.get("components", {})
        for name, st in (comps.get("stages") or {}).items():
            lines.append(
                f"({key}) component {name}: {st['rows']:,} rows in {st['seconds']:.3f} s = "
                f"{st['rows_per_s']:,.0f} rows/s, CPU {st.get('cpu_us_per_row', 0):.2f} µs/row"
            )
        if comps.get("error"):
            lines.append(f"({key}) components failed: {comps['error']}")
    return "\n".join(lines)


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def plot(results: dict[str, Any], path: Path) -> None:
    """Write a PNG with a panel per figure the run has: events/s per runner, the watermark → InfluxDB
    delays of a live run, and its memory over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    live = next((e["live"] for e in results["workloads"].values() if "live" in e), None)
    labels, values, colors = [], [], []
    for key, entry in results["workloads"].items():
        for name, d in entry.get("runs", {}).items():
            if d.get("events_per_s"):
                labels.append(f"({key}) {name}")
                values.append(d["events_per_s"])
                colors.append("tab:blue" if name == "engine" else "tab:gray")
    panels = (
        (["bars"] if values else [])
        + (["delays"] if live and live.get("delay_quantiles") else [])
        + (["memory"] if live and live.get("memory_series") else [])
    )
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        if panel == "bars":
            ax.barh(labels[::-1], values[::-1], color=colors[::-1])
            for i, v in enumerate(values[::-1]):
                ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
            ax.axvline(100_000, color="tab:red", ls="--", lw=1)
            ax.text(
                100_000, len(values) - 0.5, "goal 100k/s ", color="tab:red", fontsize=8, va="top", ha="right"
            )
            ax.set_xscale("log")
            ax.set_xlabel("events/s end to end (broker → InfluxDB), log scale")
            ax.set_title(f"{results['cores']} core(s), {results['date']}", fontsize=9)
        elif panel == "delays":
            q = live["delay_quantiles"]
            ax.plot(q, [i / (len(q) - 1) for i in range(len(q))])
            ax.axvline(5.0, color="tab:red", ls="--", lw=1, label="goal: p99 ≤ 5 s")
            ax.set_xlabel("seconds from a window's watermark to its point in InfluxDB")
            ax.set_ylabel("fraction of points")
            ax.set_title(f"live at {live['rate']:,.0f} events/s: {len(live['windows'])} windows", fontsize=9)
            ax.legend(fontsize=8)
        else:
            series = live["memory_series"]
            ax.plot([s[0] for s in series], [s[1] for s in series], label="driver (JVM + Python)")
            ax.plot([s[0] for s in series], [s[2] for s in series], label="Python workers")
            ax.axhline(2048, color="tab:red", ls="--", lw=1, label="driver goal: 2 GB")
            ax.set_xlabel("seconds since the feeder started (before 0: startup and warm-up)")
            ax.set_ylabel("RSS MB")
            ax.set_title(
                f"live at {live['rate']:,.0f} events/s: memory ({results['cores']} core(s))", fontsize=9
            )
            ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def record(results: dict[str, Any], stamp: str) -> Path:
    """Append a section about ``results`` to the dated history and write its plot; return the plot's path."""
    png = PLOTS / f"end-to-end-{stamp}.png"
    plot(results, png)
    parts = [
        f"\n## End to end: `{results['command']}`\n",
        f"- Date: {results['date']}",
        f"- Machine: {results['machine']} (shared VM: other engineers' test suites were running; the "
        "load average next to each result says how busy it was)",
        f"- Job under test on {results['cores']} core(s) (`local[{results['slots']}]`"
        + (", pinned with sched_setaffinity" if results["cores"] == 1 else "")
        + f"), broker {results['broker']}",
        "- events/s: pre-loaded topic, from the start of the first micro-batch to the moment the last expected "
        "point was visible in InfluxDB (startup excluded, shown apart). Memory: peak RSS; CPU: mean cores "
        "used by the job's process tree over the same span, read from /proc.",
        "",
        _md_table(HEAD, _rows(results)),
        "",
    ]
    for key, entry in results["workloads"].items():
        summary = summary_lines(entry.get("summary") or {})
        if summary:
            parts += [f"- ({key}) {line}" for line in summary] + [""]
        if "live" in entry:
            parts += [f"- ({key}) {live_line(entry['live'])}", ""]
        stages = (entry.get("components") or {}).get("stages") or {}
        if stages:
            parts += [
                f"Components of ({key}) alone (one thread each; Spark on local[{results['cores']}]):",
                "",
                _md_table(
                    ["stage", "rows", "seconds", "rows/s", "CPU µs/row"],
                    [
                        [
                            n,
                            f"{s['rows']:,}",
                            f"{s['seconds']:.3f}",
                            f"{s['rows_per_s']:,.0f}",
                            f"{s.get('cpu_us_per_row', 0):.2f}",
                        ]
                        for n, s in stages.items()
                    ],
                ),
                "",
            ]
    parts.append(f"![events/s]({PLOT_LINK}{png.name})\n")
    with HISTORY.open("a") as fh:
        fh.write("\n".join(parts))
    return png
