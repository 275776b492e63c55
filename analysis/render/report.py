"""The HTML pages of `ipctrace report`: one self-contained page per results directory (images
as data URIs, d3 and d3-flame-graph from analysis/render/vendor inline, no network), the
page of a sweep and of a suite, and the comparison page of several directories. Each page is
made from what run/report.py read and computed (typed results, pictures as bytes) and returned
as text: nothing here reads or writes a file."""

import dataclasses
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from analysis.model import heatmaps
from analysis.model.compare import Entry, RunDifference
from analysis.render import flame, plots
from analysis.render.activity import activity_section
from analysis.render.compare import difference_text, effect_text, p_text
from analysis.render.htmlparts import PAGE_CSS, Picture, esc, html_table, picture
from analysis.render.table import iteration_noun, pick_unit
from analysis.store.jsonfiles import Meta, Stats, SuiteFacts
from analysis.store.summaryfile import MergeFacts, MetricEffect, RunSummary, SideStats, SweepSummary
from analysis.store.summaryfile import SweepSize as SizeFacts


@dataclasses.dataclass
class Artefacts:
    """What run/report.py's make_artefacts wrote that the page shows: pictures by name, each histogram's peaks,
    the flame graphs (key -> folded stacks, title, unit), notes on what could not be made, the
    breakdown's columns and the on-CPU folded stacks (None when nothing was sampled)."""

    images: dict[str, Picture] = dataclasses.field(default_factory=dict)
    peaks: dict[str, Any] = dataclasses.field(default_factory=dict)
    flames: dict[str, tuple[Any, str, str]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    breakdown: Any = None
    oncpu: Any = None


@dataclasses.dataclass
class SweepSize:
    """One size of a sweep as its page shows it: the size, the sweep's facts of it, the run's
    statistics of the sweep's metric and its copy cost by method (method, ns, how)."""

    size: str
    facts: SizeFacts
    stats: Stats
    methods: list[tuple[str, Any, str]]


# --- HTML ---------------------------------------------------------------------


def _ns(v: float | None) -> str:
    if v is None:
        return "-"
    scale, unit = pick_unit(v)
    x = v / scale
    return f"{x:,.0f} {unit}" if scale == 1 else f"{x:.3g} {unit}"


def _ci(ci: Sequence[float] | None) -> str:
    return "-" if not ci else f"{_ns(ci[0])} .. {_ns(ci[1])}"


def _stats(summary: RunSummary, metric: str | None) -> Stats:
    """metrics[metric] of the summary; an empty Stats (n = 0, no figures) if it has none."""
    return summary.stats(metric) or Stats()


def _twins(summary: RunSummary) -> dict[str, MetricEffect]:
    """The probe effect per metric ({} without an untraced twin)."""
    return summary.probe_effect.metrics if summary.probe_effect else {}


def metrics_table(summary: RunSummary) -> str:
    """The summary's metrics; for a traced run with its untraced twin, the twin's median and
    the probe effect beside the traced median (the honest headline, as the terminal's)."""
    pe = _twins(summary)
    rows = []
    for name in summary.metrics:
        m = _stats(summary, name)
        e = pe.get(name)
        twin = [_ns(e.untraced_median), f"{e.ratio:.2f}x"] if e else ["-", "-"]
        cells = _stat_cells(m)
        rows.append(
            [
                esc(name) + (" <span class=muted>(derived)</span>" if m.derived else ""),
                f"{m.n:,}",
                cells[0],
                *(twin if pe else []),
                *cells[1:],
                _ns(m.p999),
                _ns(m.min),
                _ns(m.max),
            ]
        )
    head = ["metric", "n", "traced median" if pe else "median"]
    head += ["untraced median", "probe effect"] if pe else []
    return html_table(
        head
        + [
            "median 95 % CI",
            "mean",
            "mean 95 % CI",
            "between runs 95 % CI",
            "p99",
            "p99.9",
            "min",
            "max",
        ],
        rows,
    )


def _stat_cells(m: Stats, runs: bool = True) -> list[str]:
    """A metric's median and mean with their intervals (and the runs' interval), and p99."""
    cells = [_ns(m.median), _ci(m.ci95_median), _ns(m.mean), _ci(m.ci95_mean)]
    return cells + ([_ci(m.runs_ci95_mean)] if runs else []) + [_ns(m.p99)]


def component_means(comps: Mapping[str, Stats] | Mapping[str, SideStats]) -> dict[str, float]:
    """{component: mean ns} of those that are not derived (sched_delay: wakeup + runqueue)."""
    return {c: e.mean or 0.0 for c, e in comps.items() if not (isinstance(e, Stats) and e.derived)}


def breakdown_bar(
    means: dict[str, float], order: Sequence[str] = heatmaps.COMPONENTS, full_ns: float | None = None
) -> str:
    """A stacked bar of the mean components (ns, component_means) as HTML, with a legend.
    full_ns: the time the whole width stands for (bars of several runs to one scale); by
    default this bar's total."""
    if not any(c in means for c in order):
        # not a run's components: the parts of a merged round trip (ipctrace merge), in their order
        order = list(means)
    vals = {c: means[c] for c in order if c in means}
    total = full_ns or sum(v for v in vals.values() if v > 0) or 1.0
    colour = {c: plots.COMPONENT_COLOURS.get(c, "#999") for c in vals}
    segs = "".join(
        f'<div title="{c}: {_ns(v)}" style="width:{max(v, 0) / total * 100:.3f}%;background:{colour[c]}"></div>'
        for c, v in vals.items()
    )
    legend = "".join(f'<span><i style="background:{colour[c]}"></i>{c} {_ns(v)}</span>' for c, v in vals.items())
    return f'<div class="bar">{segs}</div><div class="legend">{legend}</div>'


def breakdown_section(summary: RunSummary) -> str:
    out = []
    for metric, b in (summary.breakdown or {}).items():
        out.append(f"<h3>{esc(metric)}</h3>{breakdown_bar(component_means(b.components))}")
        rows = [
            [esc(c), _ns(e.mean), _ci(e.ci95_mean), _ns(e.median), _ns(e.p99)]
            for c, e in b.components.items()
            if not e.derived
        ]
        out.append(html_table(["component", "mean", "mean 95 % CI", "median", "p99"], rows))
        residual = float("nan") if b.closure_residual_pct is None else b.closure_residual_pct
        out.append(
            f"<p class=muted>closure residual {residual:.2f} % of the "
            f"latency; the components follow "
            f"{'the critical path of the ' + iteration_noun(metric) if b.critical_path else 'the measuring thread alone'}; "
            f"copy: {esc('-' if b.copy_source is None else b.copy_source)}</p>"
        )
        for role, side in b.per_side.items():
            out.append(f"<p class=muted>{esc(role)}'s own view:</p>{breakdown_bar(component_means(side.components))}")
    tail = summary.tail
    if tail and tail.metric is not None:
        labels = ", ".join(f"{esc(k)}: {v}" for k, v in tail.labels.items())
        p99 = _stats(summary, tail.metric).p99
        why = ""
        if p99 is not None and tail.threshold_ns is not None and _ns(p99) != _ns(tail.threshold_ns):
            why = (
                f" (the p99 of the iterations in the breakdown; the summary's p99, {_ns(p99)}, counts every "
                f"iteration, also those left out of the breakdown)"
            )
        out.append(
            f"<p>Tail of {esc(tail.metric)}: {tail.iterations} iterations above p99 "
            f"({_ns(tail.threshold_ns)}){why}; what happened in them: {labels}</p>"
        )
    return "".join(out) or "<p class=muted>This run was not traced: no breakdown.</p>"


def flame_section(art: Artefacts) -> str:
    notes = "".join(f'<p class="warn">{esc(n)}</p>' for n in art.notes)
    if not art.flames:
        return notes + (
            "<p class=muted>No flame graphs: the run was not traced, and no stacks were sampled "
            "(ipctrace run --sample-hz N).</p>"
        )
    if "oncpu" not in art.flames and not art.notes:
        notes += (
            "<p class=muted>No on-CPU and off-CPU flame graphs: no stacks were sampled in this run; "
            "ipctrace run --sample-hz 999 samples them (and the breakdown flame graph then splits the "
            "kernel's time by function).</p>"
        )
    blocks, trees = [], {}
    for key, (folded, title, unit) in art.flames.items():
        blocks.append(
            f"<h3>{esc(title)}</h3><p class=muted>flamegraph-{key}.svg, {key}.folded; "
            f"total {int(folded.sum()):,} {unit}; click a frame to zoom</p>"
            f'<div class="flame" id="flame-{key}"></div>'
        )
        trees[key] = {"tree": flame.to_tree(folded, root=title.split(":")[0]), "unit": unit}
    script = (
        flame.SETTLE_JS + "const FLAMES=" + flame.script_json(trees) + ";"
        "for (const [k, g] of Object.entries(FLAMES)) {"
        "const el = document.getElementById('flame-' + k);"
        "drawFlame(el, g, Math.min(1240, el.clientWidth || 1200)); }"
    )
    return notes + "".join(blocks) + f"<script>{script}</script>"


def copy_section(rows: list[tuple[str, str, float, str]], event: str | None = None) -> str:
    """The copy cost by method (model/copycost.py estimates: method, metric, ns, how)."""
    if not rows:
        return "<p class=muted>No copy-cost figure: the run was not traced and is not part of a size sweep.</p>"
    table = html_table(
        ["method", "metric", "copy ns per iteration", "how"], [[esc(a), esc(m), _ns(v), esc(h)] for a, m, v, h in rows]
    )
    diffs = []
    for i, (a, m, v, _) in enumerate(rows):
        for b, m2, w, _ in rows[i + 1 :]:
            if m == m2 and v and w:
                diffs.append([esc(m), esc(f"{a} - {b}"), _ns(v - w), f"{(v - w) / w * 100:+.0f} %"])
    note = ""
    if event and event.startswith("cpu-clock") and any(r[0] == "sampling" for r in rows):
        note = (
            "<p class=muted>Sampled with the cpu-clock timer (no PMU here): time in code that runs with "
            "interrupts off is charged to where they come back on (e.g. _raw_spin_unlock_irqrestore), "
            "so the sampled share can miss part of the copy.</p>"
        )
    return table + (html_table(["metric", "difference", "ns", "relative"], diffs) if diffs else "") + note


def _lost(summary: RunSummary) -> int:
    """The kernel events the tracer lost (0 untraced)."""
    return (summary.trace.drops.total or 0) if summary.trace else 0


def trace_section(summary: RunSummary) -> str:
    t = summary.trace
    merge = MergeFacts.of(summary.extra)
    if not t and merge:
        return (
            f"<p>Merged from two traces: the client's {esc(merge.client)} and the server's {esc(merge.server)}; "
            "each one's attach modes and drops are in its own report (ipctrace report DIR).</p>"
        )
    if not t:
        return "<p class=muted>Not traced.</p>"
    out = []
    total = _lost(summary)
    if total:
        out.append(
            f'<p class="warn">{total:,} events were lost (per CPU: {esc(t.drops.per_cpu)}); '
            "the iterations they touch are marked in the breakdown.</p>"
        )
    else:
        # records lost to a full buffer are not the only loss: what the probes did not see
        # (a banner says so above) must not be called "nothing lost" here
        d = t.drops
        missed = [
            (d.switches_missed or 0, "context switches the probes did not see"),
            (d.recursion_misses or 0, "runs of the probes the kernel skipped (one already running on that CPU)"),
        ]
        missed = [(n, what) for n, what in missed if n]
        if missed:
            out.append(
                '<p class="warn">No records were lost to a full ring buffer, but '
                + "; ".join(f"{n:,} {esc(what)}" for n, what in missed)
                + ": the iterations they touch are left out of the breakdown.</p>"
            )
        else:
            out.append("<p>No events were lost.</p>")
    attach = t.file.attach
    # one row per way of attaching (or reason for none), its probes listed: not fifty rows
    # repeating "tp_btf" or the same reason
    by_mode: dict[str, list[str]] = {}
    for probe, mode in attach.items():
        by_mode.setdefault(str(mode), []).append(str(probe))
    out.append(
        html_table(
            ["attached as", "probes"],
            [[esc(mode), f"{len(ps)}: " + esc(", ".join(ps))] for mode, ps in by_mode.items()],
        )
    )
    ev = t.events
    out.append(html_table(["record type", "count"], [[esc(k), f"{v:,}"] for k, v in ev.items()]))
    return "".join(out)


def calibration_section(summary: RunSummary) -> str:
    pe = summary.probe_effect
    if not pe or not pe.metrics:
        return (
            "<p class=muted>Not calibrated: <code>ipctrace run --calibrate</code> repeats the run untraced "
            "beside the traced one; <code>ipctrace bench</code> measures the tracer's cost on this machine "
            "in general.</p>"
        )
    rows = [
        [
            esc(m),
            _ns(e.traced_median),
            _ns(e.untraced_median),
            f"{e.ratio:.3f}&times;",
            "-" if not e.ratio_ci95 else "{:.3f} .. {:.3f}".format(*e.ratio_ci95),
        ]
        for m, e in pe.metrics.items()
    ]
    return (
        f"<p>The same run without tracing ({esc(pe.untraced_dir)}/), right after the traced one: "
        "how much the probes slowed each metric.</p>"
        + html_table(["metric", "traced median", "untraced median", "traced / untraced", "95% CI"], rows)
    )


def environment_section(summary: RunSummary, meta: Meta) -> str:
    """Where and how the run ran, as tables: the machine, the threads, the settings given (a
    setting left at its default or off is left out: no "ringbuf_mb: 0"), and the command."""
    machine = [[esc(k.replace("_", " ")), esc(v)] for k, v in summary.host.facts()]
    machine += [["clock", esc(summary.clock)], ["placement", esc(summary.placement)]]
    threads = [[esc(t.role), esc(t.pid), esc(t.tid), esc("-" if t.cpu < 0 else t.cpu)] for t in summary.threads]
    given = [
        [esc(k.replace("_", " ")), esc("yes" if v is True else ", ".join(map(str, v)) if isinstance(v, list) else v)]
        for k, v in summary.params.items()
        if v not in (None, False, 0, "", [])
    ]
    run = [["command", esc(meta.command_line)], ["version", esc(meta.version)]]
    run += [["started", esc(meta.start_time)], ["ended", esc(meta.end_time)]]
    return (
        "<h3>Machine</h3>"
        + html_table(["fact", "value"], machine)
        + ("<h3>Threads</h3>" + html_table(["role", "pid", "tid", "CPU"], threads) if threads else "")
        + "<h3>Settings given</h3>"
        + html_table(["setting", "value"], given)
        + "<h3>Run</h3>"
        + html_table(["fact", "value"], [r for r in run if r[1] not in ("", "None")])
    )


def page(title: str, body: str, with_flames: bool, assets: flame.Assets) -> str:
    """The page: title, body (HTML), the bundled flame graph renderer's style and, with_flames,
    its scripts (assets: run/flamegraphs.py vendor_assets)."""
    css, d3js, flamejs = assets
    scripts = f"<script>{d3js}</script><script>{flamejs}</script>" if with_flames else ""
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f'<link rel="icon" href="data:,"><title>{esc(title)}</title>'
        f"<style>{PAGE_CSS}{css}</style>{scripts}</head><body>{body}</body></html>"
    )


def run_facts(where: object, summary: RunSummary) -> list[str]:
    """The header's facts: where, status, counts, size, mode, placement and CPUs, and whether the
    figures were measured under tracing (with the untraced twin's ratio where one was run)."""
    p = summary.settings()
    facts = [str(where), f"status {summary.status}"]
    if p.iterations_from:
        # a program ipctrace did not write: what it ran and how its iterations were found
        if p.command:
            facts.append(f"traced program: {shlex.join(p.command)}")
        facts.append(
            f"{summary.iterations_completed} iterations found by {p.iterations_from}"
            if p.iterations_from != "none"
            else "the whole trace, no iterations"
        )
        facts = [f for f in facts if f]
    else:
        facts.append(f"{summary.runs_completed} runs x {p.iterations} iterations")
    if p.size:
        facts.append(f"{p.size} B")
    if summary.mode:
        facts.append(f"mode {summary.mode}")
    if summary.placement and not p.iterations_from:
        facts.append(f"placement {summary.placement}")
    cpus = [f"{t.role} on CPU {t.cpu}" for t in summary.threads if t.cpu >= 0]
    if cpus:
        facts.append(", ".join(cpus))
    trace = summary.trace
    merge = MergeFacts.of(summary.extra)
    if merge:
        bound = merge.error_bound_ns
        facts.append(
            "merged: two hosts' traces joined by message content"
            + (f", the server's clock aligned to within ±{_ns(bound)}" if bound is not None else "")
            + (
                "; within that bound the parts it leaves open lie, at their medians, in "
                + ", ".join(
                    f"{k} {_ns(lo)}..{_ns(hi)}" for k, (lo, hi) in merge.intervals.items() if _ns(lo) != _ns(hi)
                )
                if merge.intervals and any(_ns(lo) != _ns(hi) for lo, hi in merge.intervals.values())
                else ""
            )
        )
    elif not trace:
        facts.append("untraced: the figures are the workload's own clock reads, no kernel events")
    else:
        pe = _twins(summary).get(summary.primary_metric or "")
        facts.append(
            "traced: the figures were measured with the probes attached"
            + (
                f" (median {pe.ratio:.2f}x the untraced twin's {_ns(pe.untraced_median)})"
                if pe
                else " (a traced program has no untraced twin)"
                if p.iterations_from
                else " (no untraced twin was measured)"
            )
        )
    return facts


def run_page(
    where: object,
    summary: RunSummary,
    art: Artefacts,
    explained: Mapping[str, str],
    copy_rows: list[tuple[str, str, float, str]],
    event: str | None,
    meta: Meta,
    assets: flame.Assets,
) -> str:
    """report.html of one run (where: its directory, as the header names it): its figures, the
    pictures and flame graphs run/report.py made (art), the median and p99 iterations explained,
    the copy cost by method and what the sampler counted (event), the run's meta.json."""
    imgs = art.images
    head = (
        f"<h1>{esc(summary.workload)}</h1><p class=muted>{' &middot; '.join(map(esc, run_facts(where, summary)))}</p>"
    )
    warns = list(summary.warnings)
    if _lost(summary):
        warns.insert(0, f"{_lost(summary):,} kernel events were lost")
    body = [head] + [f'<p class="warn">{esc(w)}</p>' for w in warns]
    body.append("<h2>Summary</h2>" + metrics_table(summary))
    body.append("<h2>Where the time goes</h2>" + breakdown_section(summary))
    whole = activity_section(summary.activity)
    if whole:
        body.append("<h2>The whole trace: threads, wake-ups, system calls</h2>" + whole)
    body.append(
        "<h2>Heat maps</h2>" + "".join(picture(imgs[k]) for k in ("heatmap-latency", "heatmap-breakdown") if k in imgs)
    )
    hist = []
    for m, peaks in art.peaks.items():
        hist.append(picture(imgs[f"histogram-{m}"]))
        hist.append(
            html_table(
                ["peak", "latency", "share of iterations"],
                [[str(i + 1), _ns(r.peak_ns), f"{r.share * 100:.1f} %"] for i, r in enumerate(peaks.itertuples())],
            )
        )
    body.append("<h2>Histograms</h2>" + "".join(hist))
    body.append("<h2>Flame graphs</h2>" + flame_section(art))
    expl = explained
    if expl:
        body.append(
            "<h2>Explained: the median and the p99 iteration</h2>"
            + "".join(f"<h3>{esc(k)}</h3><pre>{esc(v)}</pre>" for k, v in expl.items())
        )
    body.append("<h2>Copy cost</h2>" + copy_section(copy_rows, event))
    body.append("<h2>Tracing: attach modes and drops</h2>" + trace_section(summary))
    body.append("<h2>Probe-effect calibration</h2>" + calibration_section(summary))
    body.append("<h2>Environment</h2>" + environment_section(summary, meta))
    return page(f"ipctrace: {summary.workload}", "".join(body), bool(art.flames), assets)


def whole_trace_page(where: object, summary: RunSummary, meta: Meta, assets: flame.Assets) -> str:
    """The page of a traced program without iterations (ipctrace trace without --rtt,
    --markers or --iteration-func): its threads, wake-ups and system calls."""
    head = (
        f"<h1>{esc(summary.workload)}</h1><p class=muted>{' &middot; '.join(map(esc, run_facts(where, summary)))}</p>"
    )
    body = [head] + [f'<p class="warn">{esc(w)}</p>' for w in summary.warnings]
    body.append(
        "<p>No iterations were asked for: trace again with --rtt, --markers or --iteration-func BINARY:FUNCTION "
        "for the per-iteration breakdown, heat maps and explain.</p>"
    )
    body.append("<h2>The whole trace: threads, wake-ups, system calls</h2>" + activity_section(summary.activity))
    body.append("<h2>Tracing: attach modes and drops</h2>" + trace_section(summary))
    body.append("<h2>Environment</h2>" + environment_section(summary, meta))
    return page(f"ipctrace: {summary.workload}", "".join(body), False, assets)


def sweep_page(
    where: object,
    summary: SweepSummary,
    fit: Picture | None,
    sizes: list[SweepSize],
    latency: Picture | None,
    assets: flame.Assets,
) -> str:
    """The sweep's page: the fit (and its picture, sweep.png), the figures per size with a link to
    each size's page, latency against size, and the copy cost by method."""
    c = summary.copy
    body = [
        f"<h1>{esc(summary.workload)}: copy cost from a size sweep</h1>",
        f"<p class=muted>{esc(where)} &middot; status {esc(summary.status)} &middot; metric {esc(summary.metric)}</p>",
        "<h2>Fit</h2>",
        html_table(
            ["figure", "value", "95 % CI"],
            [
                [
                    "ns per byte",
                    f"{c.ns_per_byte.value:.4f}",
                    f"{c.ns_per_byte.ci95[0]:.4f} .. {c.ns_per_byte.ci95[1]:.4f}",
                ],
                [
                    "fixed ns",
                    f"{c.fixed_ns.value:,.0f}",
                    f"{c.fixed_ns.ci95[0]:,.0f} .. {c.fixed_ns.ci95[1]:,.0f}",
                ],
            ],
        ),
        f"<p class=muted>y: {esc(summary.y)}; x: {esc(summary.x)}; {esc(c.method)}. "
        "With few sizes the interval is wide where the sizes disagree; compare the points with the line.</p>",
    ]
    if fit is not None:
        body.append(picture(fit))
    rows, methods = [], []
    metric = summary.metric
    for s in sizes:
        size, ps, m = s.size, s.facts, s.stats
        rows.append(
            [
                f'<a href="{esc(ps.dir)}/report.html">{esc(size)} B</a>',
                f"{ps.bytes_per_iteration:,.0f}",
                _ns(ps.median_ns),
                _ns(m.median),
                _ns(ps.copy_ns_estimated),
            ]
        )
        methods += [[f"{esc(size)} B", esc(a), _ns(v), esc(h)] for a, v, h in s.methods]
    if latency is not None:
        body.append("<h2>Latency against size</h2>" + picture(latency))
    body.append(
        "<h2>Sizes</h2>"
        + html_table(
            [
                "size",
                "bytes copied per iteration",
                "in-kernel median (y)" if "kernel" in str(summary.y or "") else "median (y)",
                f"{esc(metric)} median",
                "copy ns per iteration (estimated)",
            ],
            rows,
        )
    )
    body.append(
        "<h2>Copy cost by method</h2>" + html_table(["size", "method", "copy ns per iteration", "how"], methods)
    )
    return page(f"ipctrace sweep: {summary.workload}", "".join(body), False, assets)


def _traced_cell(r: Any) -> str:  # noqa: ANN401 - a row of the suite's frame (itertuples)
    """A suite row's traced median and probe effect, where its figures are the untraced twin's."""
    traced, effect = r.traced_median_ns, r.probe_effect
    if traced is None or pd.isna(traced):
        return "-"
    return _ns(traced) + ("" if effect is None or pd.isna(effect) else f" ({effect:.2f}x)")


def suite_page(
    where: object, facts: SuiteFacts, rows: pd.DataFrame, chart: Picture, linked: set[str], assets: flame.Assets
) -> str:
    """The suite's page: rows (run/report.py suite_table: one per experiment, metric and report
    figure, ours beside the reports'), its chart, a link to each experiment's page in linked."""
    body = [
        f"<h1>ipctrace suite</h1><p class=muted>{esc(where)} &middot; started {esc(facts.started)} "
        f"&middot; placement {esc(facts.placement)} &middot; {esc(facts.runs)} runs x "
        f"{esc(facts.iterations)} iterations &middot; "
        + (
            "traced with eBPF; here: each experiment's untraced twin, as the reports measured"
            if facts.traced
            else "not traced"
        )
        + "</p>"
    ]
    notes: dict[str, int] = {}
    if facts.interrupted:
        body.append('<p class="warn">The suite was interrupted: experiments after that are missing.</p>')
    body.append("<h2>Here and in the reports</h2>" + picture(chart))
    table = []
    for r in rows.itertuples():
        name = esc(r.experiment)
        if str(r.experiment) in linked:
            name = f'<a href="{esc(r.experiment)}/report.html">{name}</a>'
        ci = None if pd.isna(r.ci95_lo_ns) else [r.ci95_lo_ns, r.ci95_hi_ns]
        report = "-" if pd.isna(r.report_value_ns) else f"{_ns(r.report_value_ns)} ({esc(r.report_statistic)})"
        note = r.note
        if isinstance(note, str) and note:
            k = notes.setdefault(note, len(notes) + 1)
            report += f' <sup><a href="#note-{k}">[{k}]</a></sup>'
        table.append(
            [
                name,
                esc(r.options),
                esc(r.metric),
                esc(r.status),
                _ns(None if pd.isna(r.mean_ns) else r.mean_ns),
                _ci(ci),
                _ns(None if pd.isna(r.median_ns) else r.median_ns),
                esc(r.measured or "-") if isinstance(r.measured, str) else "-",
                _traced_cell(r),
                esc(r.machine) if isinstance(r.machine, str) else "-",
                report,
                "-" if pd.isna(r.ratio) else f"{r.ratio:.2f}x",
            ]
        )
    body.append(
        html_table(
            [
                "experiment",
                "run as",
                "metric",
                "status",
                "mean here",
                "95 % CI",
                "median here",
                "here is",
                "traced median (probe effect)",
                "report's machine",
                "report's figure",
                "here / report",
            ],
            table,
        )
    )
    if notes:
        body.append(
            "<h3>Notes on the reports' figures</h3><ol>"
            + "".join(f'<li id="note-{k}">{esc(n)}</li>' for n, k in notes.items())
            + "</ol>"
        )
    body.append(
        "<h2>Environment</h2>"
        + html_table(["fact", "value"], [[esc(k.replace("_", " ")), esc(v)] for k, v in facts.host.facts()])
    )
    return page("ipctrace suite", "".join(body), False, assets)


def comparison_page(
    dirs: Sequence[object],
    summaries: list[RunSummary],
    table: Mapping[str, list[Entry]],
    diffs: Mapping[str, list[RunDifference]],
    overlays: dict[str, Picture],
    links: Mapping[str, str],
    assets: flame.Assets,
) -> str:
    """The comparison page: per metric (table: model/compare.py comparison) the runs' figures with
    a link to each run's page (links: by directory, relative to the page), their distributions
    overlaid (overlays, by metric), breakdown bars to one scale and the differences (diffs:
    model/compare.py explain_differences)."""
    body = ["<h1>ipctrace comparison</h1>", f"<p class=muted>against the first: {esc(dirs[0])}</p>"]
    for name, entries in table.items():
        rows = []
        for d, s, e in zip(dirs, summaries, entries):
            if not e.stats:
                continue
            m = e.stats
            ratio = "-" if e.median_ratio is None else f"{e.median_ratio:.2f}x"
            twin = _twins(s).get(name)
            marking = (
                "traced" + (f"; untraced median {_ns(twin.untraced_median)}" if twin else "") if s.trace else "untraced"
            )
            rows.append(
                [
                    f'<a href="{esc(links[str(d)])}">'
                    f"{esc(s.workload)} ({esc(d)})</a> <span class=muted>{esc(marking)}</span>",
                    f"{m.n:,}",
                    *_stat_cells(m, runs=False),
                    ratio,
                ]
            )
        body.append(
            f"<h2>{esc(name)}</h2>"
            + html_table(
                ["run", "n", "median", "median 95 % CI", "mean", "mean 95 % CI", "p99", "median / first"], rows
            )
        )
        if name in overlays:
            body.append(picture(overlays[name]))
        diffs_of_name = diffs.get(name, [])
        breakdowns = [(d, (s.breakdown or {}).get(name)) for d, s in zip(dirs, summaries)]
        traced = [(d, b.components) for d, b in breakdowns if b and b.components]
        if traced:
            full = max(sum(max((c.mean or 0.0), 0) for c in comps.values() if not c.derived) for _, comps in traced)
            body.append("<p class=muted>mean components, every bar to one scale (the longest run fills the width)</p>")
            for d, comps in traced:
                body.append(f"<p class=muted>{esc(d)}</p>{breakdown_bar(component_means(comps), full_ns=full)}")
            body.append(_components_side_by_side(traced, diffs_of_name))
        body += _difference_notes(diffs_of_name)
    return page("ipctrace comparison", "".join(body), False, assets)


def _components_side_by_side(
    traced: Sequence[tuple[object, Mapping[str, Stats]]], diffs: Sequence[RunDifference]
) -> str:
    """Each component's mean per run, and each later run minus the first with its interval."""
    by_label = {r.label: r for r in diffs}
    head = ["component"] + [esc(d) for d, _ in traced] + [f"{esc(d)} − first" for d, _ in traced[1:]]
    rows = []
    for c in heatmaps.COMPONENTS:
        cells = [_ns(comps[c].mean if c in comps else None) for _, comps in traced]
        for d, _ in traced[1:]:
            r = by_label.get(str(d))
            x = r.components.get(c) if r else None
            cells.append("-" if x is None else esc(difference_text(x, *pick_unit(abs(x.value)))))
        rows.append([c, *cells])
    return html_table(head, rows)


def _difference_notes(diffs: Sequence[RunDifference]) -> list[str]:
    notes = []
    for r in diffs:
        settings = "; ".join(f"{k}: {a} → {b}" for k, (a, b) in r.settings.items()) or "none"
        unit = pick_unit(max(abs(r.median.value), abs(r.mean.value)) or 1.0)
        notes.append(
            f"<p>{esc(r.label)}: {esc(effect_text(r, *unit))}"
            + (f" <span class=muted>({esc(r.caveat)})</span>" if r.caveat else "")
            + f"; within the runs median {esc(difference_text(r.median, *unit))} "
            f"({esc(p_text(r.median_test_p))}); settings that differ (as run): {esc(settings)}</p>"
        )
    return notes
