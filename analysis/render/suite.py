"""A suite's table, this machine's figures beside the seed reports': suite.md (Markdown, the
reports' notes as footnotes) and the aligned table printed on the terminal."""

from collections.abc import Sequence
from typing import Any

from analysis.model import seeds
from analysis.model.seeds import Figure
from analysis.model.suite import Row, here, measured, traced_here
from analysis.render.table import fmt, pick_unit, render
from analysis.store.jsonfiles import Stats, SuiteFacts


def fmt_ns(v: float | None, scale_from: float | None = None) -> str:
    if v is None:
        return "-"
    scale, unit = pick_unit(scale_from if scale_from is not None else v)
    return f"{fmt(v, scale)} {unit}"


def fmt_interval(ci: Sequence[float] | None, scale_from: float | None) -> str:
    if not ci:
        return ""
    scale, _ = pick_unit(scale_from)
    return f" [{fmt(ci[0], scale)}, {fmt(ci[1], scale)}]"


def fmt_here(m: Stats | None) -> tuple[str, str, str]:
    if not m or not m.n:
        return "-", "-", "0"
    return fmt_ns(m.mean) + fmt_interval(m.ci95_mean, m.mean), fmt_ns(m.median), str(m.n)


def fmt_iqr(m: Stats | None) -> str:
    """The mean after removing values beyond 1.5 IQR (--iqr), as report 002 averaged."""
    q = m.iqr if m else None
    if not q or not q.n:
        return "-"
    return fmt_ns(q.mean) + fmt_interval(q.ci95_mean, q.mean) + f", {0 if q.removed is None else q.removed} removed"


def fmt_traced(r: Row, metric: str) -> str:
    """The traced median beside its untraced twin's figure, with the probe effect."""
    traced, effect = traced_here(r, metric)
    if traced is None:
        return "-"
    return fmt_ns(traced) + ("" if effect is None else f" ({effect:.2f}x)")


def fmt_figure(f: Figure) -> str:
    return f"{f.report_id} ({f.machine}): {fmt_ns(f.value_ns)}" + fmt_interval(f.ci95_ns, f.value_ns)


def figures_from(rows: list[Row], head: SuiteFacts) -> str:
    """Which run "here" means, in one sentence: the reports measured without probes."""
    if not head.traced:
        return "Here: the runs' own figures (not traced, as the reports measured)."
    if any(measured(r) == "untraced twin" for r in rows):
        return (
            "Here: each traced run's untraced twin (the reports measured without probes);\n"
            "traced: the traced median; effect: the probe effect (traced / untraced)."
        )
    return "Here: the traced runs' figures, probes attached (no untraced twin: --no-calibrate)."


def ratio_here(r: Row, metric: str, f: Figure) -> float | None:
    """Ours / the report's figure, like with like: a report's median with our median, any
    other statistic with our mean."""
    m = here(r, metric) or Stats()
    ours = m.median if f.statistic == "median" else m.mean
    return None if ours is None or not f.value_ns else ours / f.value_ns


def terminal(rows: list[Row], head: SuiteFacts) -> str:
    """The table printed after a suite: aligned columns, one line per report figure (the
    experiment's own figures on its first line), the reports named below it."""
    h = head.host
    lines = [
        f"ipctrace suite on {h.cpu_model or h.machine}, {h.cores} CPUs, Linux {h.kernel}",
        f"placement {head.placement}; {head.runs} runs x {head.iterations} iterations "
        f"after {head.warmup} warm-up" + (" (--quick)" if head.quick else ""),
        figures_from(rows, head),
    ]
    if head.interrupted:
        lines.append("interrupted: the experiments after the interruption were not run")
    table: list[list[str]] = []
    cited: dict[Any, Any] = {}
    for r in rows:
        e = r.experiment
        for metric in r.metrics:
            m = here(r, metric)
            traced, effect = traced_here(r, metric)
            if m and m.n:
                ours = [str(m.n), fmt_ns(m.median), fmt_ns(m.mean)]
                ours += [fmt_ns(traced, m.median), "-" if effect is None else f"{effect:.2f}x"]
                if r.status == "interrupted":
                    ours[0] += " (interrupted)"
            else:
                ours = [r.status if r.status != "complete" else "not measured", "", "", "", ""]
            figs: list[Any] = [f for f in seeds.figures_for(e.id) if f.metric == metric] or [None]
            for k, f in enumerate(figs):
                lead = [e.id, metric] + ours if k == 0 else ["", "", "", "", "", "", ""]
                if f is None:
                    table.append(lead + ["-", "", ""])
                    continue
                cited.setdefault(f.report_id, f.report)
                x = ratio_here(r, metric, f)
                table.append(
                    lead + [f"{f.report_id} {f.statistic}", fmt_ns(f.value_ns), "-" if x is None else f"{x:.2f}x"]
                )
    header = ["experiment", "metric", "n", "median", "mean", "traced", "effect", "report", "figure", "here/report"]
    if not any(r.untraced for r in rows):
        # no twin: no traced column beside the figures
        header = header[:5] + header[7:]
        table = [t[:5] + t[7:] for t in table]
    lines += render(table, header, left=2)
    lines += [seeds.citation(report) for _, report in sorted(cited.items())]
    failed = [r for r in rows if r.status.startswith("failed")]
    lines += [f"{r.experiment.id}: {r.status}" for r in failed]
    return "\n".join(lines) + "\n"


def markdown(rows: list[Row], head: SuiteFacts) -> str:
    h = head.host
    lines = [
        "# ipctrace suite",
        "",
        f"Machine: {h.cpu_model or h.machine}, {h.cores} CPUs (online {h.online_cpus}), Linux {h.kernel}.  ",
        f"Placement: {head.placement}. Counts: {head.runs} runs x {head.iterations} iterations "
        f"after {head.warmup} warm-up each"
        + (" (--quick)" if head.quick else "")
        + f"; {'traced with eBPF' if head.traced else 'not traced'}. Started {head.started}.",
        "",
    ]
    if head.interrupted:
        lines += ["**Interrupted**: rows after the interruption were not run.", ""]
    iqr = head.iqr
    twins = any(r.untraced for r in rows)
    lines += [
        figures_from(rows, head),
        "",
        "Here: mean [95 % CI of the mean] and median over all timed iterations"
        + (", and the mean without the values beyond 1.5 IQR" if iqr else "")
        + ". Reports: their figure [their 95 % CI] and the machine it ran on; notes below the table.",
        "",
        "| experiment | run as | metric | n | here: mean [95 % CI] | here: median | "
        + ("here: 1.5 IQR mean [95 % CI] | " if iqr else "")
        + ("traced median (probe effect) | " if twins else "")
        + "reports |",
        "|---|---|---|---:|---:|---:|" + ("---:|" if iqr else "") + ("---:|" if twins else "") + "---|",
    ]
    notes = []
    for r in rows:
        e = r.experiment
        for metric in r.metrics:
            figs = [f for f in seeds.figures_for(e.id) if f.metric == metric]
            cells = []
            for f in figs:
                if f.note:
                    notes.append(f"{e.id}, {f.report_id}: {f.note}")
                    cells.append(fmt_figure(f) + f" [^{len(notes)}]")
                else:
                    cells.append(fmt_figure(f))
            m = here(r, metric)
            mean, median, n = fmt_here(m)
            if r.status == "interrupted" and n != "0":
                mean += " (interrupted)"
            elif r.status != "complete":
                mean = r.status.replace("|", "/")
            lines.append(
                f"| {e.title} | `{e.options_text()}` | {metric} | {n} | {mean} | {median} | "
                + (f"{fmt_iqr(m)} | " if iqr else "")
                + (f"{fmt_traced(r, metric)} | " if twins else "")
                + f"{'<br>'.join(cells) or '-'} |"
            )
    if notes:
        lines += [""] + [f"[^{i}]: {n}" for i, n in enumerate(notes, 1)]
    cited = sorted({f.report for r in rows for f in seeds.figures_for(r.experiment.id)})
    if cited:
        lines += ["", "Reports:"] + [f"- {seeds.citation(report)}" for report in cited]
    warnings = [(r.experiment.id, w) for r in rows if r.summary for w in r.summary.warnings]
    if warnings:
        lines += ["", "Warnings:"] + [f"- {eid}: {w}" for eid, w in warnings]
    return "\n".join(lines) + "\n"
