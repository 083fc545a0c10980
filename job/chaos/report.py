"""Write a chaos report: ``report.json``, ``report.md`` and PNG plots of throughput and lag."""

from __future__ import annotations

import json
import os
from pathlib import Path

from job.chaos.results import CaseResult, Report
from job.common.words import counted


def _plots(report: Report, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s.t for s in report.samples]
    names = []
    charts: list[tuple[str, str, list[tuple[str, list[float]]]]] = [
        (
            "throughput.png",
            "events/s",
            [
                ("read by the dagger", _rate([s.read for s in report.samples], t)),
                ("acknowledged by the broker", _rate([s.produced for s in report.samples], t)),
            ],
        ),
        ("lag.png", "events behind", [("lag (acknowledged − read)", [float(s.lag) for s in report.samples])]),
    ]
    for name, ylabel, series in charts:
        fig, ax = plt.subplots(figsize=(9, 3.2), dpi=110)
        for label, ys in series:
            ax.plot(t, ys, label=label, linewidth=1.4)
        for case in report.cases:
            ax.axvspan(case.started_s, case.ended_s, color="tab:red", alpha=0.15)
            ax.text(case.started_s, ax.get_ylim()[1] * 0.92, case.name, fontsize=8, color="tab:red")
            if case.moved_to and case.running_again_s is not None:
                at = case.started_s + case.running_again_s
                ax.axvline(at, color="tab:green", linestyle="--", linewidth=1)
                ax.text(
                    at, ax.get_ylim()[1] * 0.82, f" runs on {case.moved_to}", fontsize=8, color="tab:green"
                )
        ax.set_xlabel("seconds since the load started")
        ax.set_ylabel(ylabel)
        ax.legend(loc="upper right", fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / name)
        plt.close(fig)
        names.append(name)
    return names


def _rate(counts: list[int], t: list[float], span: int = 5) -> list[float]:
    out = []
    for i in range(len(counts)):
        j = max(0, i - span)
        dt = t[i] - t[j]
        out.append((counts[i] - counts[j]) / dt if dt > 0 else 0.0)
    return out


def _faults(report: Report) -> list[str]:
    """The faults table; under the control plane with the cluster hit, where the dagger went and when."""

    def recovered(c: CaseResult) -> str:
        return str(c.recovered_s) if c.recovered_s is not None else "not within the run"

    if report.mode != "control-plane":
        return [
            "| case | target | fault | from (s) | to (s) | time to recover (s) |",
            "|---|---|---|---:|---:|---:|",
            *[
                f"| {c.name} | {c.target} | {c.fault} | {c.started_s} | {c.ended_s} | {recovered(c)} |"
                for c in report.cases
            ],
        ]

    def again(c: CaseResult) -> str:
        if c.running_again_s is not None:
            return str(c.running_again_s)
        lost = c.fault in ("kill", "stop") and c.target in ("dagger", "cluster")
        return "not within the run" if lost else "same process"

    rows = [
        f"| {c.name} | {c.target} | {c.fault} | {c.cluster or ''} | {c.started_s} | {c.ended_s} | "
        f"{c.moved_to or 'stayed'} | {again(c)} | {recovered(c)} |"
        for c in report.cases
    ]
    return [
        "| case | target | fault | dagger on | from (s) | to (s) | dagger went to | "
        "running again after (s) | time to recover (s) |",
        "|---|---|---|---|---:|---:|---|---:|---:|",
        *rows,
        "",
        "*dagger on*: its cluster when the fault started (the one a cluster case hits). *running again "
        "after*: from the fault's start until the control plane reported the dagger running in a new "
        "process (on *dagger went to* when it moved). *time to recover*: from the fault's end until the "
        "lag was back to about four seconds of load.",
    ]


def _moves(report: Report) -> list[str]:
    """The control plane's audit of the dagger's moves."""
    if report.mode != "control-plane":
        return []
    if not report.moves:
        return ["## Moves (control-plane audit)", "", "The dagger never moved.", ""]
    return [
        "## Moves (control-plane audit)",
        "",
        "| at (s) | by | action | from | to | reason |",
        "|---:|---|---|---|---|---|",
        *[
            f"| {m.get('t', '')} | {m['user']} | {m['action']} | {m['details'].get('from', '')} | "
            f"{m['details'].get('to', '')} | {m['details'].get('reason', '')} |"
            for m in report.moves
        ],
        "",
    ]


def write_report(report: Report, out: Path) -> Path:
    """Write the report files into ``out``; return the Markdown file."""
    (out / "report.json").write_text(json.dumps(report.to_dict(), indent=2, default=str))
    plots = _plots(report, out) if report.samples else []
    loads = [s.load_1m for s in report.samples if getattr(s, "load_1m", 0.0)]
    lines = [
        f"# Chaos experiment: {report.experiment}",
        "",
        report.description,
        "",
        f"- started {report.started_at}, ran {report.duration_s:.0f} s",
        f"- events generated {report.events_generated:,}; acknowledged by the broker {report.events_acknowledged:,}; "
        f"in the topic at the end {report.events_in_topic:,}; read by the dagger {report.rows_read:,}",
        "- ground truth: the dagger's SQL as a Spark batch over every record in the topic",
        *(
            [
                f"- **the broker lost {report.events_acknowledged - report.events_in_topic:,} acknowledged records** "
                "(acknowledged, but not in the topic after the run); the dagger cannot count what the broker dropped"
            ]
            if report.events_in_topic < report.events_acknowledged
            else []
        ),
        *(
            [
                "- the dagger ran under the control plane (two clusters, a controller each, failing over to each "
                "other); the controllers restarted and moved it"
            ]
            if report.mode == "control-plane"
            else []
        ),
        f"- dagger process restarts: {report.dagger_restarts}",
        *(
            [
                f"- machine: {counted(os.cpu_count() or 0, 'core')}, load average (1 min) {min(loads):.1f} to {max(loads):.1f} "
                "during the run (times to recover stretch with it)"
            ]
            if loads
            else []
        ),
        f"- **outputs equal the ground truth: {'yes' if report.exact else 'NO'}**",
        "",
        "## Faults",
        "",
        *_faults(report),
        "",
        *_moves(report),
        "## Outputs per window (expected versus written)",
        "",
        "| window end (UTC) | expected points | written points | equal |",
        "|---|---:|---:|---:|",
        *[
            f"| {w.window} | {w.expected_points} | {w.written_points} | {w.matching} |"
            for w in report.windows
        ],
        "",
        *[f"![{name}]({name})" for name in plots],
        "",
    ]
    md = out / "report.md"
    md.write_text("\n".join(lines))
    return md
