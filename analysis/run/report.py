"""`ipctrace report` assembled: reads a results directory (summary, iterations, breakdown,
samples, meta), computes what its pages show (histograms, heat maps, folded stacks, explain,
copy cost, the comparison's differences), writes the pictures and folded files beside it, and
hands render/report.py typed data for the HTML it returns; the page is written here."""

import dataclasses
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from analysis.errors import UsageError
from analysis.model import copycost, explain, heatmaps
from analysis.model.compare import Run, comparison, explain_differences
from analysis.model.crosshost import explain_merged
from analysis.render import flame, plots
from analysis.render import report as page
from analysis.render.crosshost import explain_text
from analysis.render.explain import render
from analysis.render.htmlparts import Picture
from analysis.render.report import Artefacts, SweepSize
from analysis.run import flamegraphs
from analysis.run.flamegraphs import vendor_assets
from analysis.store import folded as folded_file
from analysis.store import results, rundir, safeio
from analysis.store.jsonfiles import Stats, SuiteFile
from analysis.store.results import read_iterations
from analysis.store.summaryfile import RunSummary, SweepSummary
from analysis.store.symbols import KernelSymbols, UserSymbols

# --- artefacts ----------------------------------------------------------------


def sampled_folded(resdir: Path | str) -> tuple[pd.Series | None, pd.Series | None]:
    """oncpu/offcpu folded stacks: from the folded files, else from samples.json (written then)."""
    resdir = Path(resdir)
    on, off = resdir / "oncpu.folded", resdir / "offcpu.folded"
    if os.path.lexists(on) and os.path.lexists(off):
        return folded_file.read_folded(on), folded_file.read_folded(off)
    samples = resdir / "samples.json"
    if not os.path.lexists(samples):
        return None, None
    data = results.samples_file(resdir)
    boot = Path("/proc/sys/kernel/random/boot_id")
    if data.boot_id and os.path.lexists(boot) and boot.read_text().strip() != data.boot_id:
        raise UsageError(
            f"{samples} was taken before the last reboot: its kernel addresses cannot be resolved any more"
        )
    oncpu, offcpu = flame.fold_samples(data, KernelSymbols(), UserSymbols(data.maps))
    folded_file.write_folded(on, oncpu)
    folded_file.write_folded(off, offcpu)
    return oncpu, offcpu


def sampled_kernel_shares(resdir: Path | str) -> dict[str, pd.Series]:
    """Per side, where its sampled in-kernel time went (flame.kernel_shares), {} without samples."""
    resdir = Path(resdir)
    if not os.path.lexists(resdir / "samples.json") or not os.path.lexists(resdir / "workload.json"):
        return {}
    threads = results.workload_file(resdir).threads
    roles = {t.tid: t.role or "peer" for t in threads if t.tid}
    try:
        return flame.kernel_shares(results.samples_file(resdir), roles, KernelSymbols())
    except UsageError as e:
        print(f"ipctrace: warning: breakdown flame graph without kernel functions: {e}", file=sys.stderr)
        return {}


def sample_event(resdir: Path | str) -> str | None:
    """What the sampler counted ("cpu-cycles" or "cpu-clock") and at what rate, or None."""
    path = Path(resdir) / "samples.json"
    if not os.path.lexists(path):
        return None
    data = results.samples_file(resdir)
    return f"{data.event or 'cpu-clock'} at {'?' if data.hz is None else data.hz} Hz per CPU"


def breakdown_pictures(
    resdir: Path | str, primary: str, kernel: dict[str, pd.Series] | None = None
) -> tuple[results.BreakdownColumns | None, heatmaps.Grid | None, pd.Series | None]:
    """(breakdown.parquet a column at a time; the heat map's grid of the primary metric, None
    without it; the folded stacks), None for all three without a breakdown. The columns are
    read one after another: a long run's whole breakdown (40 columns) is never in memory."""
    names = results.breakdown_columns(resdir)
    if not names:
        return None, None, None
    bd = results.BreakdownColumns(resdir, names)
    if not len(bd):
        return bd, None, None
    comps = heatmaps.component_columns(bd)
    sides = [c for c in names if "." in c and c.split(".", 1)[1] in comps]
    sums = flame.MetricSums(bd["metric"])
    # the heat map reads the components the folded stacks sum: summed as it reads them
    grid = (
        heatmaps.breakdown_heatmap(_SummedAsRead(bd, sums, comps), primary)[0]
        if (bd["metric"] == primary).any()
        else None
    )
    totals = flame.totals_by_metric(bd["metric"], lambda c: bd[c].to_numpy(), comps + sides, bd.zero, sums)
    return bd, grid, flame.folded_from_totals(totals, comps, kernel)


class _SummedAsRead:
    """breakdown.parquet's columns (BreakdownColumns) for a reader that takes them one at a
    time, each of `names` summed per metric (MetricSums) while it is in memory."""

    def __init__(self, bd: results.BreakdownColumns, sums: flame.MetricSums, names: Iterable[str]) -> None:
        self.bd, self.sums, self.names = bd, sums, set(names)
        self.columns = bd.columns

    def __getitem__(self, name: str) -> pd.Series:
        col = self.bd[name]
        if name in self.names and name not in self.sums.done:
            self.sums.add(name, None if self.bd.zero(name) else col.to_numpy())
        return col


def saved(directory: Path | str, p: Picture) -> Picture:
    """p written into directory under its name; the picture the page inlines."""
    assert p.png is not None
    _write_bytes(Path(directory) / p.name, p.png)
    return p


def read_picture(path: Path | str) -> Picture:
    """A picture already on disk (sweep.png), read only if it is a regular file (no link
    followed, no FIFO waited on): else one that says why it is not shown."""
    try:
        return Picture(Path(path).name, safeio.read_bytes(path))
    except (UsageError, OSError) as e:
        return Picture(Path(path).name, None, str(e) if isinstance(e, UsageError) else safeio.why(e))


def make_artefacts(resdir: Path | str, summary: RunSummary, log_hist: bool = True) -> Artefacts:
    """Write every figure and folded file of resdir; returns what the page shows."""
    resdir = Path(resdir)
    iters = read_iterations(resdir)
    measured = [m for m in summary.metrics if not (summary.stats(m) or Stats()).derived]
    primary = summary.primary_metric or measured[0]
    art = Artefacts()

    for m in measured:
        vals = iters.loc[iters["metric"] == m, "latency_ns"].to_numpy()
        if len(vals) == 0:
            continue
        h = heatmaps.histogram(vals, m, log=log_hist)
        art.images[f"histogram-{m}"] = saved(resdir, plots.histogram(h, f"histogram-{_safe(m)}.png"))
        art.peaks[m] = heatmaps.histogram_table(h)
    if (iters["metric"] == primary).any():
        grid = heatmaps.latency_heatmap(iters, primary)
        art.images["heatmap-latency"] = saved(resdir, plots.latency_heatmap(grid, "heatmap-latency.png"))

    bd, bd_grid, folded = breakdown_pictures(resdir, primary, sampled_kernel_shares(resdir))
    art.breakdown = bd
    if bd is not None and len(bd):
        if bd_grid is not None:
            art.images["heatmap-breakdown"] = saved(resdir, plots.breakdown_heatmap(bd_grid, "heatmap-breakdown.png"))
        folded_file.write_folded(resdir / "breakdown.folded", folded)
        art.flames["breakdown"] = (folded, "breakdown: ns per component, summed over iterations", "ns")

    try:
        oncpu, offcpu = sampled_folded(resdir)
    except UsageError as e:
        # The page is still worth having without the sampled stacks; say what is missing.
        oncpu = offcpu = None
        art.notes.append(f"on-CPU and off-CPU flame graphs not made: {e}")
        print(f"ipctrace: warning: on-CPU and off-CPU flame graphs not made: {e}", file=sys.stderr)
    if oncpu is not None:
        art.flames["oncpu"] = (oncpu, f"on-CPU: sampled stacks of the workload ({sample_event(resdir)})", "samples")
        art.flames["offcpu"] = (offcpu, "off-CPU: stacks at sched_switch, ns until running again", "ns")
        art.oncpu = oncpu
    try:
        flamegraphs.write_svgs(resdir, art.flames)
    except UsageError as e:
        art.notes.append(f"flame graph SVG files not written: {e}")
        print(f"ipctrace: warning: flame graph SVG files not written: {e}", file=sys.stderr)
    return art


def _safe(name: object) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))


# --- explain ----------------------------------------------------------------------


def explanations(resdir: Path | str) -> dict[str, str]:
    """The text of the median and the p99 iteration's Explanation, as `ipctrace explain` prints it."""
    choices = ("median", "p99")
    out: dict[str, str] = {}
    if (Path(resdir) / "merge.json").exists():
        # a merged directory: its round trips across two hosts, part by part (ipctrace explain)
        try:
            doc, joined = rundir.read_merged(resdir)
            for which in choices:
                out[which] = explain_text(explain_merged(doc, joined, str(resdir), which)) + "\n"
        except UsageError as e:
            out = dict.fromkeys(choices, f"(not available: {e})")
        return out
    try:
        with rundir.explain_inputs(resdir) as inputs:
            for which in choices:
                try:
                    out[which] = render(inputs.answer(explain.explain(inputs, which=which))) + "\n"
                except UsageError as e:
                    out[which] = f"(not available: {e})"
    except UsageError as e:
        out = dict.fromkeys(choices, f"(not available: {e})")
    return out


# --- pages ------------------------------------------------------------------------


def write_report(resdir: Path | str, summary: RunSummary, log_hist: bool = True) -> Path:
    """report.html of one run; summary: its summary.json (store.results.run_summary_file)."""
    resdir = Path(resdir)
    if not summary.metrics:
        return write_whole_trace_report(resdir, summary)
    art = make_artefacts(resdir, summary, log_hist)
    explained = explanations(resdir)
    event = sample_event(resdir)
    html = page.run_page(
        resdir,
        summary,
        art,
        explained,
        copycost.estimates(summary, art.oncpu),
        event,
        results.meta_file(resdir),
        vendor_assets(),
    )
    out = resdir / "report.html"
    _write(out, html)
    return out


def write_whole_trace_report(resdir: Path, summary: RunSummary) -> Path:
    """The page of a traced program without iterations (ipctrace trace without --rtt,
    --markers or --iteration-func): its threads, wake-ups and system calls."""
    out = resdir / "report.html"
    _write(out, page.whole_trace_page(resdir, summary, results.meta_file(resdir), vendor_assets()))
    return out


def write_sweep_report(resdir: Path | str, summary: SweepSummary, log_hist: bool = True) -> Path:
    """The fit, the figures per size, and a report page for every size. summary: the sweep's
    summary.json (store.results.summary_file)."""
    resdir = Path(resdir)
    fit = read_picture(resdir / "sweep.png") if os.path.lexists(resdir / "sweep.png") else None
    sizes, by_size = [], []
    metric = summary.metric
    for size, ps in summary.per_size.items():
        sub = resdir / ps.dir
        sub_summary = results.run_summary_file(sub)
        write_report(sub, sub_summary, log_hist)
        m = sub_summary.stats(metric) or Stats()
        if m.median is not None:
            ci = m.ci95_median or [m.median, m.median]
            by_size.append((int(size), m.median, ci[0], ci[1]))
        oncpu = folded_file.read_folded(sub / "oncpu.folded") if os.path.lexists(sub / "oncpu.folded") else None
        methods = [(a, v, h) for a, name, v, h in copycost.estimates(sub_summary, oncpu) if name == summary.metric]
        sizes.append(SweepSize(size, ps, m, methods))
    latency = None
    if by_size:
        s, med, lo, hi = zip(*sorted(by_size))
        latency = saved(resdir, plots.latency_by_size(s, med, lo, hi, metric, "sweep-latency.png"))
    out = resdir / "report.html"
    _write(out, page.sweep_page(resdir, summary, fit, sizes, latency, vendor_assets()))
    return out


def is_suite(resdir: Path | str) -> bool:
    return os.path.lexists(Path(resdir) / "suite.json") and not os.path.lexists(Path(resdir) / "summary.json")


def suite_table(suite: SuiteFile) -> pd.DataFrame:
    """suite.json's rows -> a frame of them (one row per experiment, metric and report figure),
    the reports' figures beside ours."""
    if not suite.rows:
        raise UsageError("suite.json holds no experiments")
    rows = pd.DataFrame([dataclasses.asdict(r) for r in suite.rows])
    for col in ("median_ns", "mean_ns", "ci95_lo_ns", "ci95_hi_ns", "report_value_ns"):
        rows[col] = pd.to_numeric(rows[col], errors="coerce")
    # Compare like with like: a report's median with our median, anything else with our mean.
    ours = rows["median_ns"].where(rows["report_statistic"] == "median", rows["mean_ns"])
    rows["ratio"] = ours / rows["report_value_ns"]
    return rows


def write_suite_report(resdir: Path | str, suite: SuiteFile, log_hist: bool = True) -> Path:
    """One page: every experiment of the suite beside the seed reports' figures, with the notes
    on those figures (suite.md's footnotes); and each experiment's own report page, linked."""
    resdir = Path(resdir)
    rows = suite_table(suite)
    for experiment in dict.fromkeys(rows["experiment"].astype(str)):
        sub = resdir / experiment
        if os.path.lexists(sub / "summary.json") and not os.path.lexists(sub / results.INCOMPLETE):
            write_report(sub, results.run_summary_file(sub), log_hist)
    chart = saved(resdir, plots.suite_chart(rows, "suite.png"))
    linked = {str(e) for e in rows["experiment"] if os.path.lexists(resdir / str(e) / "report.html")}
    out = resdir / "report.html"
    _write(out, page.suite_page(resdir, suite.facts, rows, chart, linked, vendor_assets()))
    return out


def write_comparison(out: Path, dirs: Sequence[Path], summaries: list[RunSummary]) -> Path:
    """One table per metric across the directories, their breakdown bars to one scale and the
    components side by side, and why each run differs from the first: the ratios and the
    differences are model/compare.py's, as `ipctrace compare`'s."""
    diffs = explain_differences(
        [Run(*rundir.read_compared(d, s)) for d, s in zip(dirs, summaries)], heatmaps.COMPONENTS
    )
    table = comparison([(str(d), s) for d, s in zip(dirs, summaries)])  # (the page labels by dirs)
    links = {
        str(d): str(Path(os.path.relpath(Path(d).resolve() / "report.html", Path(out).resolve().parent))) for d in dirs
    }
    overlays = {}
    for name in table:
        lat = {}
        for d, s in zip(dirs, summaries):
            if name in s.metrics and not (s.stats(name) or Stats()).derived:
                it = read_iterations(d)
                lat[str(d)] = it.loc[it["metric"].astype(str) == name, "latency_ns"].to_numpy()
        if len(lat) > 1:
            overlays[name] = saved(Path(out).parent, plots.overlay(lat, name, f"{Path(out).stem}-{name}.png"))
    _write(out, page.comparison_page(dirs, summaries, table, diffs, overlays, links, vendor_assets()))
    return Path(out)


def _write_bytes(path: Path, data: bytes) -> None:
    try:
        safeio.write_bytes(path, data)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None


def _write(path: Path, text: str) -> None:
    _write_bytes(path, text.encode())
