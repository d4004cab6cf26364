"""``zkconsumer compare``'s report: ``report.md`` (:func:`render_markdown`), ``compare.png``
(:func:`render_chart`, matplotlib, Agg) and ``compare.json``, written by :func:`write_report`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from zkconsumer.migration.compare_settings import CHANGES, LABELS, CompareResult


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "timeout" if value is None else fmt.format(value)


def _assignment_text(a: Mapping[str, Sequence[int]]) -> str:
    return "; ".join(f"{n}: {','.join(map(str, ps)) or '-'}" for n, ps in sorted(a.items()))


def render_markdown(result: CompareResult, chart_name: str = "compare.png") -> str:
    s = result.settings
    lines = [
        "# zkconsumer vs kafka-python: the same group workload",
        "",
        f"Measured {result.when} on this machine ({os.cpu_count()} CPUs), topic "
        f"`{s.topic}`, {s.members} members (one thread each), range assignment, session "
        f"timeout {s.session_timeout_ms} ms for both, auto-commit every "
        f"{s.commit_interval_ms} ms for both, backlog {s.messages} messages, then "
        f"{s.rate:g} msg/s during the changes.",
        "",
    ]
    if result.incomplete is not None:
        done = ", ".join(r.protocol for r in result.results) or "none"
        lines += [f"**Incomplete**: the comparison stopped early ({result.incomplete}); "
                  f"only the completed runs are shown ({done}).", ""]
    lines += [
        "| protocol | initial assignment (s) | join (s) | leave (s) | kill (s) "
        "| throughput (msg/s) | produced | delivered | lost | duplicated |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result.results:
        times = []
        for name in CHANGES:
            c = r.change(name)
            times.append(_num(c.reassignment_s if c else None))
        lines.append(
            f"| {LABELS[r.protocol]} | " + " | ".join(times)
            + f" | {_num(r.throughput, '{:.0f}')} | {r.produced} | {r.delivered} "
            f"| {r.lost} | {r.duplicated} |"
        )
    lines += [
        "",
        "Duplicates by the change they followed: "
        + "; ".join(
            f"{r.protocol}: " + ", ".join(f"{k} {v}" for k, v in r.duplicated_by_change.items())
            for r in result.results
        ) + ".",
        "",
        "Times are from the change (process spawned, SIGTERM sent, SIGKILL sent) to the last "
        "assignment event that completed the new assignment. Throughput: the backlog over the "
        "time from releasing the held members to its last message's first delivery (backlog "
        "produced in "
        + ", ".join(f"{r.backlog_produce_s:.2f} s for {r.protocol}" for r in result.results)
        + ").",
        "",
        "## Assignments after each change",
        "",
        "| change | expected (range) | "
        + " | ".join(LABELS[r.protocol] for r in result.results) + " | protocols agree |",
        "|---|---|" + "---|" * len(result.results) + "---|",
    ]
    for name in CHANGES:
        per = [r.change(name) for r in result.results]
        expected = next((c.expected for c in per if c is not None), {})
        cells = []
        for c in per:
            if c is None:
                cells.append("n/a")
            else:
                mark = "" if c.as_expected else " (differs from expected)"
                cells.append(_assignment_text(c.assignment) + mark)
        assigned = [c.assignment for c in per if c is not None]
        agree = "yes" if len(assigned) == len(per) and all(
            a == assigned[0] for a in assigned) else "no"
        who = next((c.member for c in per if c is not None and c.member), None)
        label = f"{name} {who}" if who else name
        lines.append(f"| {label} | {_assignment_text(expected)} | " + " | ".join(cells)
                     + f" | {agree} |")
    lines += ["", f"![delivered messages over time]({chart_name})", ""]
    errors = [(r.protocol, e) for r in result.results for e in r.errors]
    if errors:
        lines += ["## Problems seen", ""] + [f"- {p}: {e}" for p, e in errors] + [""]
    return "\n".join(lines)


def render_chart(result: CompareResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(result.results), 1, figsize=(10, 3.6 * len(result.results)),
                             squeeze=False)
    for ax, r in zip(axes[:, 0], result.results, strict=True):
        for name, points in sorted(r.timeline.items()):
            if points:
                xs = [0.0] + [t for t, _ in points]
                ys = [0] + [n for _, n in points]
                ax.step(xs, ys, where="post", label=name)
        for c in r.changes:
            ax.axvline(c.at_s, color="grey", linestyle="--", linewidth=0.8)
            ax.annotate(c.change + (f" {c.member}" if c.member else ""), (c.at_s, 0),
                        xytext=(3, 3), textcoords="offset points", fontsize=8, rotation=90,
                        va="bottom", color="dimgrey")
        ax.set_title(f"{LABELS[r.protocol]}: lost {r.lost}, duplicated {r.duplicated}")
        ax.set_xlabel("seconds since the run started")
        ax.set_ylabel("messages delivered")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(result: CompareResult, output: Path) -> dict[str, Path]:
    """Write ``report.md``, ``compare.png`` and ``compare.json`` into ``output``."""
    output.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": output / "report.md", "chart": output / "compare.png",
             "json": output / "compare.json"}
    render_chart(result, paths["chart"])
    paths["markdown"].write_text(render_markdown(result, paths["chart"].name))
    paths["json"].write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return paths
