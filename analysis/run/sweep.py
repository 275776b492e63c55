"""A message-size sweep: the workload measured once per size (one results sub-directory each),
then the fit over the sizes (model/sizefit.py), the sweep's summary.json and figure, and each
size's summary restated with the fitted copy cost (its breakdown recomputed with it)."""

import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.errors import Interrupted, UsageError
from analysis.model import breakdown, sizefit, stats
from analysis.render import plots
from analysis.run import progress, report, runner
from analysis.run.options import RunOptions
from analysis.store import events as events_mod
from analysis.store import rundir
from analysis.store.host import host_info
from analysis.store.jsonfiles import Stats
from analysis.store.results import (
    SCHEMA_VERSION,
    read_breakdown,
    read_iterations,
    run_summary_file,
    workload_file,
    write_json,
)
from analysis.store.summaryfile import CopyEstimate, CopyFit, Fit, SweepSize, SweepSummary


def with_size(opts: RunOptions, s: int) -> RunOptions:
    return dataclasses.replace(opts, size=s)


def measure(
    workload: str, sizes: list[int], opts: RunOptions, work: Path, out: Path, trace: bool, quiet: bool
) -> tuple[dict[int, Path], str, Interrupted | None]:
    """Run workload at each size into work/size-S (shown as out/size-S); returns ({size: dir},
    status, the Interrupted that stopped it or None). Interrupted before two sizes: raised."""
    dirs: dict[int, Path] = {}
    started = time.monotonic()
    if not quiet:
        n = opts.runs * opts.iterations * len(sizes)
        progress.announce(
            "sweep", opts.runs * len(sizes), n, progress.disk_estimate(n, trace, opts.keep_raw, opts.calibrate), work
        )
    try:
        for k, s in enumerate(sizes):
            if not quiet:
                print(f"{progress.overall(k, len(sizes), started)}: size {s} B ...", file=sys.stderr, flush=True)
            runner.run_workload(
                workload, with_size(opts, s), work / f"size-{s}", trace=trace, quiet=quiet, shown=out / f"size-{s}"
            )
            dirs[s] = work / f"size-{s}"
    except Interrupted as e:
        if getattr(e, "resdir", None):
            dirs[sizes[len(dirs)]] = work / f"size-{sizes[len(dirs)]}"
        if len(dirs) < 2:
            raise
        return dirs, "interrupted", e
    return dirs, "complete", None


def size_points(resdir: Path | str, metric: str) -> tuple[np.ndarray, np.ndarray, str, str]:
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
    s = run_summary_file(resdir)
    return (
        np.full(len(it), float(s.params["size"])),
        it["latency_ns"].to_numpy(np.float64),
        "message size (untraced run: bytes copied unknown)",
        f"{metric} latency per iteration, ns",
    )


def finish(
    out: Path,
    workload: str,
    dirs: dict[int, Path],
    opts: RunOptions,
    status: str,
    shown: Path | None = None,
) -> SweepSummary:
    """Fit over the sizes measured, write the sweep's summary.json and figure, and each size's estimate."""
    first = run_summary_file(next(iter(dirs.values())))
    metric = first.primary_metric or next(iter(first.metrics))
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
    f = sizefit.fit(points)
    traced = "copied" in x_what
    report.saved(
        out,
        plots.sweep_fit(
            points.assign(size=f["x_median"]),
            f,
            "sweep.png",
            "in-kernel ns per iteration" if traced else f"{metric} ns",
            "bytes copied per iteration" if traced else "message size (bytes)",
        ),
    )
    per_size = {}
    for (s, d), xb in zip(dirs.items(), f["x_median"]):
        est = CopyEstimate(
            bytes=float(xb),
            ns=float(xb * f["ns_per_byte"]),
            ns_per_byte=f["ns_per_byte"],
            ns_per_byte_ci95=f["ns_per_byte_ci95"],
            estimated=True,
            source=str(shown or out),
        )
        restate_copy(d, est)
        measured = run_summary_file(d).metrics.get(metric) or Stats()
        per_size[str(s)] = SweepSize(
            dir=str(Path(d).name),
            bytes_per_iteration=float(xb),
            median_ns=float(points.loc[points["size"] == s, "median_ns"].iloc[0]),  # of y (fitted)
            metric_median_ns=measured.median,  # the metric's own (the round trip's)
            copy_ns_estimated=est.ns,
        )
    summary = SweepSummary(
        schema_version=SCHEMA_VERSION,
        kind="sweep",
        workload=workload,
        status=status,
        metric=metric,
        sizes=[int(s) for s in dirs],
        x=x_what,
        y=y_what,
        params={**{k: v for k, v in opts.params().items() if k != "size"}, "sizes": [int(s) for s in dirs]},
        host=host_info(),
        copy=CopyFit(
            ns_per_byte=Fit(f["ns_per_byte"], f["ns_per_byte_ci95"]),
            fixed_ns=Fit(f["fixed_ns"], f["fixed_ns_ci95"]),
            method=f"Theil-Sen over per-size medians; 95 % CI from {sizefit.BOOTSTRAP} bootstrap replicates "
            "resampling the sizes and each size's iterations",
            estimated=True,
        ),
        per_size=per_size,
        metrics={},
    )
    write_json(out / "summary.json", summary.to_json())
    return summary


def restate_copy(resdir: Path | str, est: CopyEstimate) -> None:
    """Record the sweep's estimate in a size's summary and, when traced, recompute its
    breakdown with the fitted ns/byte so each iteration's copy is bytes x slope."""
    resdir = Path(resdir)
    s = run_summary_file(resdir)
    s = dataclasses.replace(s, copy_estimate=est)
    events = resdir / "events.parquet"
    if os.path.lexists(resdir / "breakdown.parquet") and os.path.lexists(events):
        workload = workload_file(resdir)
        frame, info = breakdown.compute(
            read_iterations(resdir),
            events_mod.read_parquet(resdir),
            workload,
            max(est.ns_per_byte or 0.0, 0.0),
            s.host.machine or "x86_64",
        )
        with rundir.breakdown_written_alongside(frame, resdir):
            bd = breakdown.summarize_frame(
                frame,
                info,
                workload,
                primary=s.primary_metric,
                tasks=s.trace.file.tasks if s.trace else None,
                tracer_tids=s.trace.file.tracer.tids if s.trace else (),
            )
        s = s.with_breakdown(bd)
    write_json(resdir / "summary.json", s.to_json())
