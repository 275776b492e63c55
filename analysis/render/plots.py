"""Drawing only: each function takes what analysis/model/heatmaps.py (or a DataFrame)
computed and returns one PNG (a Picture named as its file: run/ writes it). No statistics are
computed here."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from analysis.render.htmlparts import Picture  # noqa: E402
from analysis.render.table import pick_unit  # noqa: E402

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

    from analysis.model.heatmaps import Grid, Histogram

COMPONENT_COLOURS = {
    "user": "#4e79a7",
    "entry": "#a0cbe8",
    "syscall": "#f28e2b",
    "copy": "#e15759",
    "wakeup": "#59a14f",
    "runqueue": "#76b7b2",
    "blocked": "#bab0ac",
    "irq": "#edc948",
    "preempted": "#b07aa1",
    "steal": "#ff9da7",
    "residual": "#9c755f",
}
DPI = 110


def _save(fig: Figure, name: str, margins: tuple[float, float, float, float] | None = None) -> Picture:
    """The figure as the PNG named name (a Picture: run/ writes it where it belongs). margins (left, right, bottom, top) in inches place the axes without a layout pass:
    tight_layout measures every label by drawing the figure once more."""
    if margins is None:
        fig.tight_layout()
    else:
        w, h = fig.get_size_inches()
        left, right, bottom, top = margins
        fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h)
    png = io.BytesIO()
    try:
        fig.savefig(png, dpi=DPI, format="png")
    finally:
        plt.close(fig)
    return Picture(name, png.getvalue())


def log_ticks(lo: float, hi: float) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Ticks of a linear axis of log10 values spanning [lo, hi]: (major positions, their
    labels in plain numbers, minor positions). Drawn this way instead of a log-scale axis,
    whose locators and mathtext labels take most of a figure's drawing time."""
    decades = np.arange(np.floor(lo), np.ceil(hi) + 1)
    # Every 1..9 multiple of each decade; the major ones are decades, or 1-2-5 steps when the
    # range holds fewer than three decades, or every multiple when it holds fewer than three of those.
    values = (np.arange(1, 10)[None, :] * 10.0 ** decades[:, None]).ravel()
    inside = values[(np.log10(values) >= lo - 1e-9) & (np.log10(values) <= hi + 1e-9)]
    mantissa = np.round(inside / 10.0 ** np.floor(np.log10(inside) + 1e-9)).astype(int)
    major = inside[mantissa == 1]
    if len(major) < 3:
        major = inside[np.isin(mantissa, (1, 2, 5))]
    if len(major) < 3:
        major = inside
    if len(major) < 2:
        # A range narrower than the step between two multiples: three ticks inside it,
        # at three significant digits.
        spread = 10.0 ** (lo + (hi - lo) * np.array([0.1, 0.5, 0.9]))
        digits = 10.0 ** (np.floor(np.log10(spread)) - 2)
        major = np.unique(np.round(spread / digits) * digits)
    minor = np.setdiff1d(inside, major)
    return np.log10(major), [_short(v) for v in major], np.log10(minor)


def _short(value: float) -> str:
    """20k, 500k, 1M: a tick label short enough that 1-2-5 steps over three decades do not overlap."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _log_axis(axis: Axis, lo: float, hi: float) -> None:
    major, labels, minor = log_ticks(lo, hi)
    axis.set_ticks(major, labels)
    axis.set_ticks(minor, minor=True)


def latency_heatmap(grid: Grid, name: str) -> Picture:
    fig, ax = plt.subplots(figsize=(9, 4.2))
    counts = np.ma.masked_equal(grid.counts, 0)
    # Log-spaced latency buckets drawn on a linear axis of their log10 (see log_ticks).
    y_edges = np.log10(grid.y_edges)
    mesh = ax.pcolormesh(
        grid.x_edges, y_edges, counts, cmap="viridis", norm=LogNorm(vmin=1, vmax=max(int(grid.counts.max()), 2))
    )
    _log_axis(ax.yaxis, y_edges[0], y_edges[-1])
    ax.set_ylim(y_edges[0], y_edges[-1])
    for end, start, run in grid.run_gaps:
        # the blank between two runs is labelled: the next run's set-up and warm-up, untimed
        ax.axvspan(end, start, color="0.93", zorder=0)
        ax.axvline(start, color="0.45", linewidth=0.8, linestyle="--")
        ax.text(start, y_edges[-1], f" run {run}", va="top", ha="left", fontsize=8, color="0.3")
    if grid.run_gaps:
        ax.text(
            1.0,
            -0.16,
            "grey: between runs (set-up and warm-up, not timed)",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
            color="0.4",
        )
    ax.set_xlabel(grid.x_label)
    ax.set_ylabel(grid.y_label)
    ax.set_title(grid.title)
    bar = fig.colorbar(mesh, ax=ax, label="iterations")
    vmax: Any = mesh.norm.vmax  # a LogNorm of the counts: one number
    c_major, c_labels, c_minor = log_ticks(0.0, np.log10(vmax))
    bar.set_ticks((10.0**c_major).tolist(), labels=c_labels)
    bar.set_ticks((10.0**c_minor).tolist(), minor=True)
    return _save(fig, name, margins=(0.9, 0.3, 0.6, 0.4))


def breakdown_heatmap(grid: Grid, name: str) -> Picture:
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(grid.y_names) + 1.8))
    im = ax.imshow(
        grid.counts,
        aspect="auto",
        cmap="magma_r",
        vmin=0,
        vmax=max(1.0, float(grid.counts.max())),
        interpolation="nearest",
    )
    ax.set_yticks(range(len(grid.y_names)), grid.y_names)
    ax.set_xticks(range(len(grid.x_names)), grid.x_names, rotation=40, ha="right", fontsize=8)
    ax.set_xlabel(grid.x_label)
    ax.set_title(grid.title)
    for (y, x), share in np.ndenumerate(grid.counts):
        if share >= 0.005:
            ax.text(
                x,
                y,
                f"{share * 100:.0f}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if share > 0.5 else "black",
            )
    fig.colorbar(im, ax=ax, label="share of the bucket's latency")
    # the left margin holds the longest row name (a merge's "server_runqueue" as well as "user")
    left = max(1.1, 0.3 + 0.085 * max((len(str(n)) for n in grid.y_names), default=0))
    return _save(fig, name, margins=(left, 0.3, 1.1, 0.4))


def _time_text(ns: float) -> str:
    """64.9 us, 4.10 ms: three significant digits in the unit the tables pick."""
    for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if abs(ns) >= scale:
            x = ns / scale
            return f"{x:.{2 if x < 10 else 1 if x < 100 else 0}f} {name}"
    return f"{ns:.0f} ns"


def histogram(hist: Histogram, name: str, unit: str = "ns") -> Picture:
    fig, ax = plt.subplots(figsize=(9, 3.8))
    # A log histogram is drawn on a linear axis of log10 values (see log_ticks).
    place = np.log10 if hist.log else np.asarray
    edges = place(hist.edges)
    ax.stairs(hist.counts, edges, fill=True, color="#4e79a7", alpha=0.85)
    if hist.log:
        _log_axis(ax.xaxis, edges[0], edges[-1])
        ax.set_xlim(edges[0], edges[-1])
    lo, hi = ax.get_xlim()
    for rank, (peak, share) in enumerate(zip(hist.peaks_ns, hist.peak_shares)):
        x = place(peak)
        # in the unit the tables use (64.9 us, not 64,938 ns); a peak in the right half is
        # labelled to its left, so that no label runs off the plot
        left = x > lo + 0.6 * (hi - lo)
        ax.axvline(float(x), color="#e15759", ls="--", lw=1)
        ax.annotate(
            f"peak {rank + 1}: {_time_text(peak) if unit == 'ns' else f'{peak:,.0f} {unit}'} ({share * 100:.0f} %)",
            (x, 0.95 - 0.08 * rank),
            xycoords=("data", "axes fraction"),
            fontsize=8,
            color="#e15759",
            xytext=(-4 if left else 4, 0),
            textcoords="offset points",
            ha="right" if left else "left",
            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85},
        )
    ax.set_xlabel(f"{hist.metric} ({unit}{', log scale' if hist.log else ''})")
    ax.set_ylabel("iterations")
    ax.set_title(f"{hist.metric}: {hist.n:,} iterations, {len(hist.peaks_ns)} peak(s)")
    return _save(fig, name, margins=(0.9, 0.2, 0.6, 0.4))


def overlay(latencies: Mapping[str, npt.ArrayLike], metric: str, name: str) -> Picture:
    """The compare page's distributions: one outline per run (label -> latencies in ns) over
    the same log buckets, each as a share of its run's iterations, so that runs of different
    lengths overlay; the median of each a dashed line of its colour."""
    fig, ax = plt.subplots(figsize=(9, 3.6))
    vals = [np.asarray(v, np.float64) for v in latencies.values()]
    lo = max(min(float(v[v > 0].min()) for v in vals if (v > 0).any()), 1.0)
    hi = max(float(v.max()) for v in vals)
    edges = np.log10(np.geomspace(lo, hi * 1.0001, 120))
    for k, (label, v) in enumerate(latencies.items()):
        v = np.asarray(v, np.float64)
        counts, _ = np.histogram(np.log10(np.maximum(v, lo)), edges)
        colour = f"C{k}"
        ax.stairs(
            counts / max(len(v), 1), edges, color=colour, lw=1.4, label=f"{label} (median {_time_text(np.median(v))})"
        )
        ax.axvline(np.log10(max(np.median(v), lo)), color=colour, ls="--", lw=0.9)
    _log_axis(ax.xaxis, edges[0], edges[-1])
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel(f"{metric} (ns, log scale)")
    ax.set_ylabel("share of its iterations")
    ax.set_title(f"{metric}: the runs' distributions (dashed: medians)")
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, name, margins=(0.9, 0.2, 0.6, 0.4))


def sweep_fit(points: pd.DataFrame, fit: Mapping[str, Any], name: str, y_label: str, x_label: str) -> Picture:
    """points: DataFrame size (x), median_ns, ci_lo, ci_hi; fit: what model/sizefit.fit returned."""
    fig, ax = plt.subplots(figsize=(8, 4))
    x = points["size"].to_numpy(np.float64)
    y = points["median_ns"].to_numpy(np.float64)
    ax.errorbar(
        x,
        y,
        yerr=[y - points["ci_lo"], points["ci_hi"] - y],
        fmt="o",
        color="#4e79a7",
        label="median per size (95 % CI)",
    )
    xs = fit["band_x"]
    ax.plot(
        xs,
        fit["fixed_ns"] + fit["ns_per_byte"] * xs,
        color="#e15759",
        label=f"Theil-Sen: {fit['fixed_ns']:,.0f} ns + {fit['ns_per_byte']:.4f} ns/byte",
    )
    ax.fill_between(xs, fit["band_lo"], fit["band_hi"], color="#e15759", alpha=0.15, label="95 % band (bootstrap)")
    # The axis is the points' and the line's, not the band's: with few sizes a resample may
    # keep only one and give a steep line, so the band can reach far above the points (lopsided).
    line = fit["fixed_ns"] + fit["ns_per_byte"] * np.asarray(xs, np.float64)
    top = max(float(np.max(points["ci_hi"])), float(np.max(line)))
    bottom = min(float(np.min(points["ci_lo"])), float(np.min(line)), 0.0)
    if float(np.max(fit["band_hi"])) > top * 1.25 or float(np.min(fit["band_lo"])) < bottom - 0.25 * top:
        ax.set_ylim(bottom - 0.05 * top, top * 1.25)
        ax.text(
            0.01,
            0.98,
            f"band cut at the axis: {len(x)} sizes give a wide bootstrap band",
            transform=ax.transAxes,
            fontsize=8,
            va="top",
            color="#e15759",
        )
    ax.set_xlabel(x_label, fontsize=9)
    ax.set_ylabel(y_label, fontsize=9)
    ax.legend(fontsize=8)
    ax.set_title("copy cost: time against bytes")
    return _save(fig, name)


def _bytes(v: float) -> str:
    v = int(round(v))
    for div, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if v >= div and v % div == 0:
            return f"{v // div}{suffix}"
    return str(v)


def latency_by_size(
    sizes: npt.ArrayLike,
    medians: npt.ArrayLike,
    lo: npt.ArrayLike,
    hi: npt.ArrayLike,
    metric: str | None,
    name: str,
) -> Picture:
    """A sweep's latency against the message size: each size's median with its 95 % interval,
    both axes on a log scale (sizes span decades; so does the latency of the largest)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    x, y = np.asarray(sizes, np.float64), np.asarray(medians, np.float64)
    lo_ns, hi_ns = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    ax.errorbar(x, y, yerr=[np.maximum(y - lo_ns, 0), np.maximum(hi_ns - y, 0)], fmt="o-", color="#4e79a7", capsize=3)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _bytes(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    scale, unit = pick_unit(float(np.nanmedian(y)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v / scale:g}"))
    ax.set_xlabel("message size (bytes, log scale)", fontsize=9)
    ax.set_ylabel(f"{metric} median, {unit} (log scale)", fontsize=9)
    ax.set_title(f"{metric} against the message size (median, 95 % CI)")
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, name)


def suite_chart(rows: pd.DataFrame, name: str) -> Picture:
    """rows: suite_table() -> one line per experiment and metric: ours (mean, 95 % CI; median)
    and each report's figure, on a log axis."""
    keys = list(dict.fromkeys(zip(rows["experiment"], rows["metric"])))
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(keys) + 1.6))
    machines = [m for m in dict.fromkeys(rows["machine"].dropna())]
    markers = "sD^vP*Xph"
    for y, (exp, metric) in enumerate(keys):
        r = rows[(rows["experiment"] == exp) & (rows["metric"] == metric)]
        first = r.iloc[0]
        if np.isfinite(first["mean_ns"]):
            lo, hi = first["ci95_lo_ns"], first["ci95_hi_ns"]
            if np.isfinite(lo) and lo > 0:
                ax.plot([lo, hi], [y, y], color="#4e79a7", lw=3, alpha=0.5)
            ax.plot(first["mean_ns"], y, "o", color="#4e79a7", label="here: mean, 95 % CI" if y == 0 else None)
            ax.plot(first["median_ns"], y, "|", color="#1f3b5c", ms=12, label="here: median" if y == 0 else None)
        for _, f in r.dropna(subset=["report_value_ns"]).iterrows():
            k = machines.index(f["machine"])
            ax.plot(f["report_value_ns"], y, markers[k % len(markers)], color="#e15759", alpha=0.8, ms=6)
    for k, m in enumerate(machines):
        ax.plot([], [], markers[k % len(markers)], color="#e15759", label=f"report: {m}")
    ax.set_xscale("log")
    ax.set_yticks(range(len(keys)), [f"{e} ({m})" for e, m in keys], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ns (log scale)")
    # below the axis label, a fixed distance in points (not a share of an axis whose height
    # grows with the experiments: with one it landed on the label)
    from matplotlib.transforms import offset_copy

    below = offset_copy(ax.transAxes, fig=fig, y=-34, units="points")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below, ncol=3)
    ax.grid(axis="x", which="major", alpha=0.3)
    ax.set_title("every experiment: here and in the seed reports")
    return _save(fig, name)


def medians(
    labels: Sequence[str], values: Sequence[float | None], cis: Sequence[Sequence[float | None]], name: str
) -> Picture:
    """One bar per run: its median with the median's 95 % interval, on a log axis when the
    medians span more than a decade (a lab's runs side by side)."""
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(labels) + 1.2))
    y = np.arange(len(labels))
    v = np.asarray(values, np.float64)
    lo = np.array([c[0] for c in cis], np.float64)
    hi = np.array([c[1] for c in cis], np.float64)
    ax.barh(y, v, color="#4e79a7", alpha=0.8)
    ax.errorbar(v, y, xerr=[np.maximum(v - lo, 0), np.maximum(hi - v, 0)], fmt="none", color="#1f3b5c", capsize=3)
    if v.min() > 0 and v.max() / v.min() > 10:
        ax.set_xscale("log")
    scale, unit = pick_unit(float(np.median(v)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / scale:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"median, {unit} (95 % CI)", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, name)
