"""ipctrace sweep WORKLOAD --sizes 1,64,4096 [run options]: copy cost from a message-size sweep.

Runs the workload once per size (one results sub-directory each), then fits the
in-kernel time per iteration against the bytes copied per iteration with a
robust line (Theil-Sen over the per-size medians) and a bootstrap 95 %
interval over sizes and iterations: the slope is the copy cost in ns per byte, the intercept the fixed
cost. Each size's breakdown is then recomputed with that slope, its copy
component marked estimated.
"""

import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.errors import Interrupted, IpctraceError, MeasureError, UsageError
from analysis.model import breakdown, stats
from analysis.model.summary import RunSummary, host_info
from analysis.render import plots
from analysis.run import runner
from analysis.run.options import add_run_options, run_options, size
from analysis.store import events as events_mod
from analysis.store.results import (
    INCOMPLETE,
    SCHEMA_VERSION,
    read_breakdown,
    read_iterations,
    read_summary,
    read_workload,
    write_json,
)

DEFAULT_SIZES = "1,64,512,4096,16384,65536"
BOOTSTRAP = 2000


def register(sub):
    p = sub.add_parser(
        "sweep", help="copy cost in ns per byte from a sweep over message sizes", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("workload", metavar="WORKLOAD", help="a workload that takes --size (ipctrace list)")
    p.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        metavar="B,B,...",
        help=f"message sizes in bytes, at least two different (default {DEFAULT_SIZES})",
    )
    add_run_options(p, out_help="results directory, one sub-directory per size (default results/sweep-WORKLOAD-...)")


def parse_sizes(text):
    try:
        sizes = [size(part) for part in text.split(",") if part.strip()]
    except Exception as e:  # argparse.ArgumentTypeError carries the message
        raise UsageError(f"--sizes: {e}") from None
    sizes = sorted(set(sizes))
    if len(sizes) < 2:
        raise UsageError("--sizes: give at least two different sizes, e.g. 1,64,4096")
    return sizes


def run(args):
    if args.size is not None:
        raise UsageError("sweep: --size does not apply; give the sizes with --sizes")
    sizes = parse_sizes(args.sizes)
    opts = run_options(args)
    info = runner.workload_info(args.workload)
    for s in sizes:
        runner.check_options(info, _with_size(opts, s))
    # Made (under sudo: with the invoking user's rights), opened once and locked; we write
    # through rd.path, its pinned name.
    rd = runner.open_new_outdir(args.out, f"sweep-{args.workload}", runner.invoking_user())
    try:
        runner.mark_incomplete(rd, "a sweep")
        return _run(args, sizes, opts, rd)
    except IpctraceError as e:
        e.args = (rd.show(str(e)),)
        raise
    finally:
        rd.close()


def _run(args, sizes, opts, rd):
    out, work = rd.shown, rd.path
    dirs = {}
    status = "complete"
    try:
        for s in sizes:
            if not args.quiet:
                print(f"size {s} B ...", file=sys.stderr, flush=True)
            runner.run_workload(
                args.workload,
                _with_size(opts, s),
                work / f"size-{s}",
                trace=not args.no_trace,
                quiet=args.quiet,
                shown=out / f"size-{s}",
            )
            dirs[s] = work / f"size-{s}"
    except Interrupted as e:
        if getattr(e, "resdir", None):
            dirs[sizes[len(dirs)]] = work / f"size-{sizes[len(dirs)]}"
        status = "interrupted"
        if len(dirs) < 2:
            raise
        interrupted = e
    summary = finish(work, args.workload, dirs, opts, status, shown=out)
    os.unlink(INCOMPLETE, dir_fd=rd.fd)
    c = summary["copy"]
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{args.workload}: copy cost {c['ns_per_byte']['value']:.4f} ns/byte "
            f"(95 % CI {c['ns_per_byte']['ci95'][0]:.4f}..{c['ns_per_byte']['ci95'][1]:.4f}), "
            f"fixed {c['fixed_ns']['value']:,.0f} ns (95 % CI {c['fixed_ns']['ci95'][0]:,.0f}.."
            f"{c['fixed_ns']['ci95'][1]:,.0f}); y = {summary['y']}, x = {summary['x']}"
        )
        print(f"results: {out}")
    if status == "interrupted":
        raise interrupted
    return 0


def _with_size(opts, s):
    return dataclasses.replace(opts, size=s)


# --- measurement per size --------------------------------------------------------


def size_points(resdir, metric):
    """(x bytes copied, y ns in the kernel) per iteration of metric, and what x and y are.

    Traced: y = syscall + copy on the critical path, x = bytes the data syscalls
    returned (breakdown copy_bytes). Untraced: y = latency, x = --size.
    """
    bd = read_breakdown(resdir)
    if bd is not None:
        bd = bd[bd["metric"] == metric]
        return (
            bd["copy_bytes"].to_numpy(np.float64),
            (bd["syscall"] + bd["copy"]).to_numpy(np.float64),
            "bytes copied per iteration (from the data syscalls' return values)",
            "in-kernel time per iteration (syscall + copy on the critical path), ns",
        )
    it = read_iterations(resdir)
    it = it[it["metric"] == metric]
    s = read_summary(resdir)
    return (
        np.full(len(it), float(s["params"]["size"])),
        it["latency_ns"].to_numpy(np.float64),
        "message size (untraced run: bytes copied unknown)",
        f"{metric} latency per iteration, ns",
    )


def median_bootstrap(y, reps, rng):
    """Bootstrap replicates of the median of y without resampling n values each time.

    The median of a resample of n values from sorted y is the order statistic at
    rank J, where P(J <= j) = P(Binomial(n, (j+1)/n) >= (n+1)/2); J is drawn by
    inverting that distribution, which is exact for odd n (the lower median otherwise).
    """
    y = np.sort(np.asarray(y, dtype=np.float64))
    n = len(y)
    cdf = sps.binom.sf((n + 1) // 2 - 1, n, np.arange(1, n + 1) / n)
    j = np.searchsorted(cdf, rng.random(reps))
    return y[np.minimum(j, n - 1)]


def theil_sen(x, y):
    """Slope and intercept of Theil-Sen along the last axis; x has y's shape or is shared.

    Pairs with equal x have no slope; a row without any pair of different x gets NaN.
    """
    x = np.broadcast_to(x, np.shape(y))
    i, j = np.triu_indices(x.shape[-1], 1)
    dx = x[..., j] - x[..., i]
    with np.errstate(divide="ignore", invalid="ignore"):
        slopes = np.where(dx != 0, (y[..., j] - y[..., i]) / dx, np.nan)
    defined = ~np.isnan(slopes).all(axis=-1)
    slope = np.full(slopes.shape[:-1], np.nan)
    slope[defined] = np.nanmedian(slopes[defined], axis=-1)
    intercept = np.median(y - slope[..., None] * x, axis=-1)
    return slope, intercept


def fit(points, reps=BOOTSTRAP, seed=1):
    """points: DataFrame size, x, y arrays per size -> the line and its 95 % intervals.

    Theil-Sen over the per-size medians (x: median bytes per iteration). The
    interval comes from BOOTSTRAP replicates that resample the sizes (so that a
    size measured while the machine was busier moves the line as much as it
    would in a rerun) and redraw each size's median from its own iterations.
    """
    x = np.array([np.median(v) for v in points["x"]])
    if len(np.unique(x)) < 2:
        raise UsageError("the sizes moved the same number of bytes per iteration: nothing to fit")
    y = np.array([np.median(v) for v in points["y"]])
    slope, intercept = theil_sen(x, y)
    rng = np.random.default_rng(seed)
    redrawn = np.stack([median_bootstrap(v, reps, rng) for v in points["y"]], axis=1)
    pick = rng.integers(0, len(x), size=(reps, len(x)))
    b_slope, b_int = theil_sen(x[pick], np.take_along_axis(redrawn, pick, axis=1))
    ok = ~np.isnan(b_slope)  # replicates that drew a single size have no line
    b_slope, b_int = b_slope[ok], b_int[ok]
    xs = np.linspace(0, x.max(), 100)
    lines = b_int[:, None] + b_slope[:, None] * xs
    return {
        "x_median": x,
        "y_median": y,
        "ns_per_byte": float(slope),
        "ns_per_byte_ci95": [float(v) for v in np.percentile(b_slope, [2.5, 97.5])],
        "fixed_ns": float(intercept),
        "fixed_ns_ci95": [float(v) for v in np.percentile(b_int, [2.5, 97.5])],
        "band_x": xs,
        "band_lo": np.percentile(lines, 2.5, axis=0),
        "band_hi": np.percentile(lines, 97.5, axis=0),
    }


def finish(out, workload, dirs, opts, status, shown=None):
    """Fit over the sizes measured, write the sweep's summary.json and figure, and each size's estimate."""
    first = read_summary(next(iter(dirs.values())))
    metric = first.get("primary_metric") or next(iter(first["metrics"]))
    rows = []
    for s, d in dirs.items():
        x, y, x_what, y_what = size_points(d, metric)
        if len(y) == 0:
            raise UsageError(f"{d} holds no iterations of {metric}")
        lo, hi = stats.median_ci_ranks(len(y))
        ys = np.sort(y)
        rows.append(
            {
                "size": s,
                "dir": d,
                "x": x,
                "y": y,
                "median_ns": float(np.median(y)),
                "ci_lo": float(ys[lo]) if lo >= 0 else np.nan,
                "ci_hi": float(ys[hi]) if hi >= 0 else np.nan,
            }
        )
    points = pd.DataFrame(rows)
    f = fit(points)
    traced = "copied" in x_what
    plots.sweep_fit(
        points.assign(size=f["x_median"]),
        f,
        out / "sweep.png",
        "in-kernel ns per iteration" if traced else f"{metric} ns",
        "bytes copied per iteration" if traced else "message size (bytes)",
    )
    per_size = {}
    for (s, d), xb in zip(dirs.items(), f["x_median"]):
        est = {
            "bytes": float(xb),
            "ns": float(xb * f["ns_per_byte"]),
            "ns_per_byte": f["ns_per_byte"],
            "ns_per_byte_ci95": f["ns_per_byte_ci95"],
            "estimated": True,
            "from": str(shown or out),
        }
        restate_copy(d, est)
        per_size[str(s)] = {
            "dir": str(Path(d).name),
            "bytes_per_iteration": float(xb),
            "median_ns": float(points.loc[points["size"] == s, "median_ns"].iloc[0]),
            "copy_ns_estimated": est["ns"],
        }
    summary = {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "workload": workload,
        "status": status,
        "metric": metric,
        "sizes": [int(s) for s in dirs],
        "x": x_what,
        "y": y_what,
        "params": {**{k: v for k, v in opts.params().items() if k != "size"}, "sizes": [int(s) for s in dirs]},
        "host": host_info(),
        "copy": {
            "ns_per_byte": {"value": f["ns_per_byte"], "ci95": f["ns_per_byte_ci95"]},
            "fixed_ns": {"value": f["fixed_ns"], "ci95": f["fixed_ns_ci95"]},
            "method": f"Theil-Sen over per-size medians; 95 % CI from {BOOTSTRAP} bootstrap replicates "
            "resampling the sizes and each size's iterations",
            "estimated": True,
        },
        "per_size": per_size,
        "metrics": {},
    }
    write_json(out / "summary.json", summary)
    return summary


def restate_copy(resdir, est):
    """Record the sweep's estimate in a size's summary and, when traced, recompute its
    breakdown with the fitted ns/byte so each iteration's copy is bytes x slope."""
    resdir = Path(resdir)
    try:
        s = RunSummary.from_json(read_summary(resdir))
    except ValueError as e:
        raise MeasureError(f"{resdir}/summary.json: {e}") from None
    s = dataclasses.replace(s, copy_estimate=est)
    events = resdir / "events.parquet"
    if os.path.lexists(resdir / "breakdown.parquet") and os.path.lexists(events):
        bd = breakdown.summarize(
            read_iterations(resdir),
            events_mod.read_parquet(resdir),
            read_workload(resdir),
            primary=s.primary_metric,
            machine=s.host.get("machine"),
            tasks=s.trace.tasks if s.trace else None,
            tracer_tids=(s.trace.tracer.get("tids") or ()) if s.trace else (),
            out_dir=resdir,
            copy_ns_per_byte=max(est["ns_per_byte"], 0.0),
        )
        s = s.with_breakdown(bd)
    write_json(resdir / "summary.json", s.to_json())
