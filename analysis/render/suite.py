"""suite.md: a suite's table as Markdown, this machine's figures beside the reports', with the
reports' notes as footnotes."""

from analysis.model import seeds
from analysis.model.suite import here
from analysis.render.table import fmt, pick_unit


def fmt_ns(v, scale_from=None):
    if v is None:
        return "-"
    scale, unit = pick_unit(scale_from if scale_from is not None else v)
    return f"{fmt(v, scale)} {unit}"


def fmt_interval(ci, scale_from):
    if not ci:
        return ""
    scale, _ = pick_unit(scale_from)
    return f" [{fmt(ci[0], scale)}, {fmt(ci[1], scale)}]"


def fmt_here(m):
    if not m or not m.get("n"):
        return "-", "-", "0"
    mean = m.get("mean")
    return fmt_ns(mean) + fmt_interval(m.get("ci95_mean"), mean), fmt_ns(m.get("median")), str(m["n"])


def fmt_iqr(m):
    """The mean after removing values beyond 1.5 IQR (--iqr), as report 002 averaged."""
    q = (m or {}).get("iqr")
    if not q or not q.get("n"):
        return "-"
    return fmt_ns(q["mean"]) + fmt_interval(q.get("ci95_mean"), q["mean"]) + f", {q.get('removed', 0)} removed"


def fmt_figure(f):
    return f"{f.report_id} ({f.machine}): {fmt_ns(f.value_ns)}" + fmt_interval(f.ci95_ns, f.value_ns)


def markdown(rows, head):
    h = head["host"]
    lines = [
        "# ipctrace suite",
        "",
        f"Machine: {h.get('cpu_model') or h.get('machine')}, {h.get('cores')} CPUs "
        f"(online {h.get('online_cpus')}), Linux {h.get('kernel')}.  ",
        f"Placement: {head['placement']}. Counts: {head['runs']} runs x {head['iterations']} iterations "
        f"after {head['warmup']} warm-up each"
        + (" (--quick)" if head["quick"] else "")
        + f"; {'traced with eBPF' if head['traced'] else 'not traced'}. Started {head['started']}.",
        "",
    ]
    if head["interrupted"]:
        lines += ["**Interrupted**: rows after the interruption were not run.", ""]
    iqr = head.get("iqr")
    lines += [
        "Here: mean [95 % CI of the mean] and median over all timed iterations"
        + (", and the mean without the values beyond 1.5 IQR" if iqr else "")
        + ". Reports: their figure [their 95 % CI] and the machine it ran on; notes below the table.",
        "",
        "| experiment | run as | metric | n | here: mean [95 % CI] | here: median | "
        + ("here: 1.5 IQR mean [95 % CI] | " if iqr else "")
        + "reports |",
        "|---|---|---|---:|---:|---:|" + ("---:|" if iqr else "") + "---|",
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
                + f"{'<br>'.join(cells) or '-'} |"
            )
    if notes:
        lines += [""] + [f"[^{i}]: {n}" for i, n in enumerate(notes, 1)]
    warnings = [(r.experiment.id, w) for r in rows if r.summary for w in r.summary.get("warnings", [])]
    if warnings:
        lines += ["", "Warnings:"] + [f"- {eid}: {w}" for eid, w in warnings]
    return "\n".join(lines) + "\n"
