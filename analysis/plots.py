"""Drawing only: each function takes what analysis/heatmaps.py (or a DataFrame)
computed and writes one PNG. No statistics are computed here."""
import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402

COMPONENT_COLOURS = {
    "user": "#4e79a7", "syscall": "#f28e2b", "copy": "#e15759", "sched_delay": "#76b7b2",
    "blocked": "#bab0ac", "irq": "#edc948", "preempted": "#b07aa1", "residual": "#9c755f",
}
DPI = 110


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def latency_heatmap(grid, path):
    fig, ax = plt.subplots(figsize=(9, 4.2))
    counts = np.ma.masked_equal(grid.counts, 0)
    mesh = ax.pcolormesh(grid.x_edges, grid.y_edges, counts, cmap="viridis",
                         norm=LogNorm(vmin=1, vmax=max(int(grid.counts.max()), 2)))
    ax.set_yscale("log")
    ax.set_xlabel(grid.x_label)
    ax.set_ylabel(grid.y_label)
    ax.set_title(grid.title)
    fig.colorbar(mesh, ax=ax, label="iterations")
    return _save(fig, path)


def breakdown_heatmap(grid, path):
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(grid.y_names) + 1.8))
    im = ax.imshow(grid.counts, aspect="auto", cmap="magma_r", vmin=0, vmax=max(1.0, float(grid.counts.max())),
                   interpolation="nearest")
    ax.set_yticks(range(len(grid.y_names)), grid.y_names)
    ax.set_xticks(range(len(grid.x_names)), grid.x_names, rotation=40, ha="right", fontsize=8)
    ax.set_xlabel(grid.x_label)
    ax.set_title(grid.title)
    for (y, x), share in np.ndenumerate(grid.counts):
        if share >= 0.005:
            ax.text(x, y, f"{share * 100:.0f}", ha="center", va="center", fontsize=7,
                    color="white" if share > 0.5 else "black")
    fig.colorbar(im, ax=ax, label="share of the bucket's latency")
    return _save(fig, path)


def histogram(hist, path, unit="ns"):
    fig, ax = plt.subplots(figsize=(9, 3.8))
    ax.stairs(hist.counts, hist.edges, fill=True, color="#4e79a7", alpha=0.85)
    if hist.log:
        ax.set_xscale("log")
    for rank, (peak, share) in enumerate(zip(hist.peaks_ns, hist.peak_shares)):
        ax.axvline(peak, color="#e15759", ls="--", lw=1)
        ax.annotate(f"peak {rank + 1}: {peak:,.0f} {unit} ({share * 100:.0f} %)", (peak, 0.95 - 0.08 * rank),
                    xycoords=("data", "axes fraction"), fontsize=8, color="#e15759",
                    xytext=(4, 0), textcoords="offset points")
    ax.set_xlabel(f"{hist.metric} ({unit}{', log scale' if hist.log else ''})")
    ax.set_ylabel("iterations")
    ax.set_title(f"{hist.metric}: {hist.n:,} iterations, {len(hist.peaks_ns)} peak(s)")
    return _save(fig, path)


def sweep_fit(points, fit, path, y_label, x_label):
    """points: DataFrame size (x), median_ns, ci_lo, ci_hi; fit: what cmd_sweep.fit returned."""
    fig, ax = plt.subplots(figsize=(8, 4))
    x = points["size"].to_numpy(np.float64)
    y = points["median_ns"].to_numpy(np.float64)
    ax.errorbar(x, y, yerr=[y - points["ci_lo"], points["ci_hi"] - y], fmt="o", color="#4e79a7",
                label="median per size (95 % CI)")
    xs = fit["band_x"]
    ax.plot(xs, fit["fixed_ns"] + fit["ns_per_byte"] * xs, color="#e15759",
            label=f"Theil-Sen: {fit['fixed_ns']:,.0f} ns + {fit['ns_per_byte']:.4f} ns/byte")
    ax.fill_between(xs, fit["band_lo"], fit["band_hi"], color="#e15759", alpha=0.15, label="95 % band (bootstrap)")
    ax.set_xlabel(x_label, fontsize=9)
    ax.set_ylabel(y_label, fontsize=9)
    ax.legend(fontsize=8)
    ax.set_title("copy cost: time against bytes")
    return _save(fig, path)


def suite_chart(rows, path):
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
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.5 / max(len(keys), 1) - 0.08), ncol=3)
    ax.grid(axis="x", which="major", alpha=0.3)
    ax.set_title("every experiment: here and in the seed reports")
    return _save(fig, path)
