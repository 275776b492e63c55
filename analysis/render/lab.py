"""A lab's answer as text (the terminal) and as DIR/handout.html (one printable page: the
question, the claims with their verdicts, the evidence table and the report's pictures, one
explained iteration and the exercises). Both read the same Outcome of run/lab.py; nothing
here computes a figure."""

from __future__ import annotations

import datetime
from typing import Any

from analysis.model.lab import Quantity
from analysis.render.explain import render as render_explanation
from analysis.render.htmlparts import PAGE_CSS, Picture, esc, html_table, picture
from analysis.render.report import breakdown_bar
from analysis.render.table import render as render_rows

HOLDS, NOT_HERE = "holds", "not seen here"


def tag(c: Any) -> str:  # noqa: ANN401
    """A claim's verdict as the answer shows it; a claim comparing a run a foreign task disturbed
    says which."""
    word = HOLDS if c.holds else NOT_HERE
    return word + (f"; compares run {', '.join(c.beside)}, which a neighbour disturbed" if c.beside else "")


def _t(ns: float | None) -> str:
    return "-" if ns is None else Quantity(ns).show()


def evidence_rows(outcome: Any) -> tuple[list[str], list[list[str]]]:  # noqa: ANN401
    """One row per run: what it is, n, median with its interval, mean, the waking (wake-up +
    run queue) and the time in system calls (means on the critical path, traced runs only: the
    headers say so), and the system calls the explained iteration made on the path."""
    header = [
        "run",
        "workload",
        "n",
        "median",
        "median 95% CI",
        "mean",
        "wake-up + run queue (mean)",
        "syscall time (mean)",
        "calls (explained)",
    ]
    figs = {key: d.figures() for key, d in outcome.done.items()}
    twins = any(f.untraced_median_ns for f in figs.values())
    if twins:
        header.append("untraced median")
    rows = []
    for key, f in figs.items():
        ci = f.median_ci
        rows.append(
            [
                key,
                f.workload,
                f"{f.n:,}",
                _t(f.median_ns),
                f"{_t(ci[0])} .. {_t(ci[1])}" if ci else "-",
                _t(f.mean_ns),
                _t(f.waking_ns) if f.waking_ns is not None else "-",
                _t(f.comp("syscall")) if f.components else "-",
                f"{f.syscalls:,}" if f.syscalls is not None else "-",
            ]
            + ([_t(f.untraced_median_ns)] if twins else [])
        )
    return header, rows


def _evidence(outcome: Any) -> Any:  # noqa: ANN401
    d = outcome.done.get(outcome.lab.evidence)
    return d if d is not None and d.explanation is not None else None


def text(outcome: Any) -> str:  # noqa: ANN401
    lab = outcome.lab
    lines = [
        f"ipctrace lab {lab.name}: {lab.title}" + (" (--quick)" if outcome.quick else ""),
        "",
        "Question: " + lab.question,
        "",
        f"Measured (each run's results in {outcome.out}/RUN; an iteration is a round trip, in a stream a write):",
    ]
    header, rows = evidence_rows(outcome)
    lines += ["  " + r for r in render_rows(rows, header, left=2)]
    lines += ["", "Answer (each claim checked against these figures):"]
    for c in outcome.disturbed:
        lines.append(f"  busy machine: {c.text}")
    for c in outcome.claims:
        lines.append(f"  [{tag(c)}] {c.text}")
    d = _evidence(outcome)
    if d is not None:
        lines += [
            "",
            f"One iteration explained ({d.measure.label}; ipctrace explain {d.shown}):",
            *("  " + line for line in render_explanation(d.explanation).splitlines()),
        ]
    lines += ["", "Exercises:"] + [f"  {i}. {e}" for i, e in enumerate(lab.exercises, 1)]
    lines += ["", f"handout: {outcome.out}/handout.html"]
    return "\n".join(lines)


HANDOUT_CSS = """
.claim{padding:6px 10px;margin:6px 0;border-left:5px solid}
.claim.holds{border-color:#59a14f;background:#eef7ec} .claim.not{border-color:#e0a030;background:#fff6e0}
.verdict{font-weight:600;margin-right:6px}
@media print{body{max-width:none;margin:0} h2{break-after:avoid} img,pre,.claim,table{break-inside:avoid}
pre{white-space:pre-wrap;font-size:9px}}
"""


def shown_run(outcome: Any) -> Any:  # noqa: ANN401
    """The run whose iteration the handout explains and whose histogram it shows."""
    first = next(iter(outcome.done.values()))
    return _evidence(outcome) or next((x for x in outcome.done.values() if x.explanation is not None), None) or first


def handout(outcome: Any, medians: Picture | None, histogram: Picture | None) -> str:  # noqa: ANN401
    """DIR/handout.html, with the pictures run/lab.py drew for it (each run's median, or latency
    against size; the explained run's histogram)."""
    lab = outcome.lab
    done = outcome.done
    first = next(iter(done.values()))
    host = first.summary.host
    body = [
        f"<h1>Lab: {esc(lab.title)}</h1>",
        f"<p class=muted>ipctrace lab {esc(lab.name)}{' --quick' if outcome.quick else ''} &middot; "
        f"{esc(host.cpu_model or host.machine or '')}, {esc(host.cores)} CPUs, "
        f"Linux {esc(host.kernel)} &middot; {datetime.date.today().isoformat()} &middot; "
        f"{outcome.seconds:.0f} s of measuring and analysis</p>",
        f"<h2>Question</h2><p>{esc(lab.question)}</p>",
        "<h2>What this machine showed</h2>",
    ]
    for c in outcome.disturbed:
        body.append(f'<div class="claim not"><span class=verdict>Busy machine:</span>{esc(c.text)}</div>')
    for c in outcome.claims:
        cls, word = ("holds", "As expected:") if c.holds else ("not", "Not seen here:")
        if c.beside:
            word = word[:-1] + f" (compares run {', '.join(c.beside)}, disturbed):"
        body.append(f'<div class="claim {cls}"><span class=verdict>{word}</span>{esc(c.text)}</div>')
    header, rows = evidence_rows(outcome)
    body.append("<h2>Evidence</h2>" + html_table(header, [[esc(c) for c in r] for r in rows]))
    if medians:
        body.append(picture(medians))
    traced = {k: d.figures() for k, d in done.items() if d.figures().components}
    if traced:
        # The explained median iteration's components add up to a typical round trip; the means
        # are pulled by the slowest iterations (on a shared machine, mostly other tasks).
        typical = all(f.typical for f in traced.values())
        parts = {k: (f.typical if typical else f.components) for k, f in traced.items()}
        widest = max(sum(v for v in p.values() if v > 0) for p in parts.values()) or None
        body.append(
            "<h3>Where the round trip goes ("
            + ("each run's explained median iteration" if typical else "means on the critical path")
            + ", one scale)</h3>"
        )
        for k, f in traced.items():
            body.append(f"<p class=muted>{esc(k)}: {esc(f.label)}</p>" + breakdown_bar(parts[k], full_ns=widest))
    d = _evidence(outcome) or next((x for x in done.values() if x.explanation is not None), None)
    if histogram:
        body.append(f"<h3>Histogram: {esc((d or first).measure.label)}</h3>" + picture(histogram))
    if d is not None:
        body.append(
            f"<h2>One iteration explained: {esc(d.measure.label)}</h2>"
            f"<p class=muted>ipctrace explain {esc(d.shown)}</p><pre>{esc(render_explanation(d.explanation))}</pre>"
        )
    body.append("<h2>Exercises</h2><ol>" + "".join(f"<li>{esc(e)}</li>" for e in lab.exercises) + "</ol>")
    body.append(
        "<p class=muted>Every number above was measured in this run or computed from it; a claim marked "
        "“not seen here” is the textbook's expectation that this machine did not show, with what it showed "
        f"instead. The runs are in {esc(outcome.out)}: ipctrace report, compare and explain read them.</p>"
    )
    page = (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f'<link rel="icon" href="data:,"><title>ipctrace lab {esc(lab.name)}</title>'
        f"<style>{PAGE_CSS}{HANDOUT_CSS}</style></head><body>{''.join(body)}</body></html>"
    )
    return page
