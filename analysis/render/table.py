"""The terminal tables: a run's summary as printed after it, and the helpers every command's
tables use (units, figures to three significant digits, aligned columns).

They read nothing but the summary, so what is printed and what is stored never disagree.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from analysis.model.stats import MIN_RUNS
from analysis.render.activity import activity_lines
from analysis.render.text import fmt, fmt_mean_ci, fmt_pm, pick_unit, places, render  # noqa: F401 - the tables' helpers, imported from here too
from analysis.store.jsonfiles import Stats

if TYPE_CHECKING:
    from analysis.store.summaryfile import MetricBreakdown, ProbeEffect, RunSummary


def metric_rows(metrics: dict[str, Stats], iqr: bool = False) -> list[list[str]]:
    """One table row per metric; iqr: its figures without the outliers (--iqr), and how many
    were removed (a metric without them: its own figures)."""
    rows = []
    for name, m0 in metrics.items():
        m = m0.iqr if iqr and m0.iqr is not None else m0
        scale, unit = pick_unit(m.median)
        cim = m.ci95_median
        rci = m.runs_ci95_mean
        rows.append(
            [
                name + ("*" if m0.derived else ""),
                unit,
                str(m.n),
                fmt(m.median, scale),
                "-" if cim is None else f"{fmt(cim[0], scale)}..{fmt(cim[1], scale)}",
                fmt_mean_ci(m.mean, m.ci95_mean, scale),
                "-" if rci is None else f"{fmt(rci[0], scale)}..{fmt(rci[1], scale)}",
                fmt(m.std, scale),
                fmt(m.min, scale),
                fmt(m.p99, scale),
                fmt(m.p999, scale),
                fmt(m.max, scale),
            ]
            + ([str(0 if m.removed is None else m.removed)] if iqr else [])
        )
    return rows


HEADER = [
    "metric",
    "unit",
    "n",
    "median",
    "median 95% CI",
    "mean ± 95% CI",
    "runs 95% CI",
    "std",
    "min",
    "p99",
    "p99.9",
    "max",
]


def table(s: RunSummary) -> str:
    """The text printed after a run."""
    p = s.settings()
    head = f"{s.workload}"
    if p.iterations_from:
        # a program ipctrace did not write (`ipctrace trace`): its iterations were found, not planned
        found = {"rtt": "round trips found by --rtt", "markers": "iterations marked by the program"}
        facts = [
            f"{s.iterations_completed} {found.get(p.iterations_from, 'calls of --iteration')}"
            if p.iterations_from != "none"
            else "the whole trace (no iterations asked for)",
            f"command {shlex.join(p.command)}" if p.command else None,
            f"pids {','.join(map(str, p.pids))}" if p.pids else None,
            p.sides,
            "every task on the machine (--all-cpus)" if p.all_cpus else None,
            # --syscalls: the others' time on CPU is in the user column
            f"system calls {','.join(p.syscalls)} only (the others count as user time)" if p.syscalls else None,
        ]
    else:
        runs = p.runs
        planned = f"{runs} run{'' if runs == 1 else 's'} x " + (
            # --duration stops at S seconds or at --iterations, whichever comes first: the
            # count measured says which
            f"at most {p.duration_s} s or {p.iterations:,} iterations ({s.iterations_completed:,} iterations measured)"
            if p.duration_s
            else f"{p.iterations} iterations"
        )
        facts = [
            planned if s.status == "complete" or p.duration_s else f"{s.iterations_completed} of {planned}",
            f"size {p.size} B" if p.size else None,
            f"mode {s.mode}" if s.mode else None,
            f"placement {s.placement}" if s.placement else None,
        ]
    cpus = [f"{t.role}@{t.cpu}" for t in s.threads if t.cpu >= 0]
    if cpus:
        facts.append("cpus " + ",".join(cpus))
    lines = [head + ": " + ", ".join(f for f in facts if f)]
    if s.status != "complete":
        lines.append(f"status: {s.status} (figures cover what was measured before)")
    lines += [f"warning: {w}" for w in s.warnings]
    pe = s.probe_effect.metrics if s.probe_effect else {}
    if s.trace:
        # kept within 80 columns: what the figures are is read before the table
        lines.append(
            "traced: figures with the probes attached"
            + (
                "; untraced: the same run without them"
                if pe
                else " (a traced program has no untraced twin)"
                if p.iterations_from
                else " (no untraced twin: --no-calibrate)"
            )
        )
    if not s.metrics:
        # a traced program without iterations: its whole trace per thread
        return "\n".join(lines + ([""] + activity_lines(s.activity) if s.activity else []))
    stats = {name: s.stats(name) or Stats() for name in s.metrics}
    rows = metric_rows(stats)
    header = HEADER
    if pe:
        # The untraced twin's median and the probe effect beside the traced median, before the
        # intervals and the tail: the honest headline must be read on an 80-column terminal.
        at = HEADER.index("median") + 1
        header = HEADER[:at] + ["untraced median", "probe effect"] + HEADER[at:]
        for row, (name, m) in zip(rows, stats.items()):
            e = pe.get(name)
            scale, _ = pick_unit(m.median)
            row[at:at] = ["-", "-"] if not e else [fmt(e.untraced_median, scale), f"{e.ratio:.2f}x"]
    lines += render(rows, header)
    if any((m.runs or 0) < MIN_RUNS for m in stats.values()):
        lines.append(f"runs 95% CI: none with fewer than {MIN_RUNS} runs")
    if any(m.iqr for m in stats.values()):
        lines.append("after removing values outside 1.5 IQR:")
        lines += render(metric_rows(stats, iqr=True), HEADER + ["removed"])
    derived = [f"{k} = {m.source} x {m.factor:g}" for k, m in stats.items() if m.derived]
    if derived:
        lines.append("* derived, not measured: " + "; ".join(derived))
    lines += probe_cost_lines(s)
    for metric, b in (s.breakdown or {}).items():
        lines += breakdown_lines(metric, b, stats.get(metric) or Stats())
    lines += probe_effect_lines(s.probe_effect)
    return "\n".join(lines)


def probe_cost_lines(s: RunSummary) -> list[str]:
    """A traced program's iterations by --markers or --iteration-func: the probes' own cost
    that was subtracted from each window (or why none was), against the median it shaped."""
    cal = s.probe_calibration
    if cal is None:
        return []
    cost = cal.probe_in_window_ns
    if cost is None:
        return [f"probe cost: not subtracted from the iterations ({cal.source or 'not calibrated'})"]
    median = (s.stats(s.primary_metric) or Stats()).median
    scale, unit = pick_unit(cost)
    share = f", {100 * cost / (median + cost):.0f} % of a window" if median else ""
    mode = f" ({cal.mode})" if cal.mode else ""
    return [
        f"probe cost: {fmt(cost, scale)} {unit} subtracted from each iteration (the probes'{mode} own time "
        f"in a window{share}); {cal.source or ''}"
    ]


def probe_effect_lines(pe: ProbeEffect | None) -> list[str]:
    """run --calibrate: how much tracing slowed each metric, against the untraced twin run."""
    if not pe or not pe.metrics:
        return []
    lines = [f"probe effect (against the same run untraced, {pe.untraced_dir}/): median traced / untraced"]
    for m, e in pe.metrics.items():
        ci = e.ratio_ci95
        lines.append(
            f"  {m}: {e.traced_median:,.0f} / {e.untraced_median:,.0f} {e.unit} = "
            f"{e.ratio:.3f}x" + (f" [95% CI {ci[0]:.3f}..{ci[1]:.3f}]" if ci else "")
        )
    return lines


# Metrics whose iteration is a round trip (a message and its answer); the others time one
# operation (a lock hand-off, a system call), which a heading must not call a round trip.
ROUND_TRIP_METRICS = ("rtt", "write_read")


def iteration_noun(metric: str | None) -> str:
    return "round trip" if metric in ROUND_TRIP_METRICS else "iteration"


def breakdown_lines(metric: str, b: MetricBreakdown, measured: Stats) -> list[str]:
    """Where a traced metric's time went, per component, in the metric's own unit."""
    comps = b.components
    if not comps:
        return []
    scale, unit = pick_unit(measured.median)
    total = measured.mean
    rows = []
    for name, c in comps.items():
        if c.derived:
            continue
        share = "-" if not total or c.mean is None else f"{100 * c.mean / total:.1f} %"
        rows.append([name, unit, fmt(c.median, scale), fmt_mean_ci(c.mean, c.ci95_mean, scale), share])
    path = f"critical path of the {iteration_noun(metric)}" if b.critical_path else "measuring thread"
    # every component counts the same iterations (the schema's n: in each)
    n = next((c.n for c in comps.values()), None)
    total_n = measured.n
    counted = ""
    if n is not None and total_n:
        counted = f"; {n:,} of {total_n:,} iterations"
        if n < total_n:
            counted += f", {total_n - n:,} left out (their events may be incomplete: see the warnings)"
    lines = ["", f"where {metric} goes ({path}, from kernel events{counted}):"]
    lines += render(rows, ["component", "unit", "median", "mean ± 95% CI", "share of mean"], left=2)
    if b.closure_residual_pct is not None:
        lines.append(
            f"closure: on average {b.closure_residual_pct:.2f} % of an iteration's latency is in no known state"
        )
    copied = b.copy_bytes_mean or (comps["copy"].mean if "copy" in comps else None)
    if str(b.copy_source).startswith("estimated") and copied:
        # said only where something was copied: a futex or a semaphore moves no bytes
        lines.append(f"copy is {b.copy_source}")
    cal = b.entry_calibration or {}
    if "entry_ns" in cal:
        lines.append(
            f"entry is {b.entry_source}: {cal['entry_ns']} ns before each system call's "
            f"entry and {cal['exit_ns']} ns after its exit"
        )
    elif b.entry_source:
        lines.append(f"entry is {b.entry_source}")
    by = [p for p in b.preempted_by if p.share >= 0.05]
    if by:
        lines.append(
            "CPU held by, while the path waited for it: "
            + ", ".join(
                f"{p.comm or 'task'} (tid {p.tid}{', the tracer: probe effect' if p.tracer else ''}) "
                f"{100 * p.share:.0f} %"
                for p in by[:3]
            )
        )
    if b.steal_ns_mean:
        lines.append(
            f"steal: the hypervisor took a CPU of the workload for {b.steal_ns_mean:,.0f} ns per iteration "
            f"on average (see the tail's 'steal' label)"
        )
    return lines


def hist_lines(values_ns: Any, metric: str, width: int = 50) -> list[str]:
    """A terminal histogram of latencies, as rt-tests -h and bpftrace's hist draw one: one row
    per power-of-two bucket [2^k, 2^(k+1)) ns that holds any, its count, and a bar to scale."""
    import numpy as np

    v = np.asarray(values_ns, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return [f"{metric}: no iterations"]
    k = np.floor(np.log2(np.maximum(v, 1))).astype(np.int64)
    lo, hi = int(k.min()), int(k.max())
    counts = np.bincount(k - lo, minlength=hi - lo + 1)
    top = counts.max()
    labels = [f"[{_pow2(2**e)}, {_pow2(2 ** (e + 1))})" for e in range(lo, hi + 1)]
    lw, cw = max(map(len, labels)), len(f"{top:,}")
    lines = [f"{metric}: {len(v):,} iterations"]
    for label, c in zip(labels, counts):
        bar = "@" * int(round(c / top * width)) if c else ""
        lines.append(f"{label:<{lw}} {c:>{cw},} |{bar:<{width}}|")
    return lines


def _pow2(ns: int) -> str:
    for scale, unit in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if ns >= scale:
            return f"{ns // scale}{unit}"
    return str(ns)
