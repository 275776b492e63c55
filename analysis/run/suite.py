"""A suite: every experiment of the seed reports (with --all every workload) run one after
another with one placement policy; an experiment that fails does not stop the others. The
table's files (suite.csv, suite.md, suite.json) are written at the end, also when interrupted."""

import csv
import dataclasses
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

from analysis.errors import Interrupted, MeasureError, UsageError
from analysis.model import seeds
from analysis.model.suite import CSV_FIELDS, Row, table_rows
from analysis.render.suite import markdown
from analysis.run import progress, runner
from analysis.run.options import RunOptions
from analysis.store import safeio
from analysis.store.host import host_info
from analysis.store.jsonfiles import SuiteFacts
from analysis.store.results import run_summary_file


def plan(all_workloads: bool) -> list[tuple[seeds.Experiment, list[str]]]:
    """The experiments to run: the reports', then (with --all) one per other workload."""
    plan_ = [(e, seeds.metrics_for(e.id)) for e in seeds.EXPERIMENTS]
    if all_workloads:
        done = {e.workload for e in seeds.EXPERIMENTS}
        for w in runner.catalog():
            if w["name"] not in done:
                metrics = [w["primary_metric"]] + [d for d in (w.get("derived") or {})]
                plan_.append((seeds.Experiment(w["name"], w.get("summary", ""), w["name"]), metrics))
    return plan_


def experiment_options(base: RunOptions, e: seeds.Experiment) -> RunOptions:
    opts = dataclasses.replace(base, mode=e.mode, fresh=e.fresh)
    if e.max_iterations and opts.iterations > e.max_iterations:
        opts = dataclasses.replace(opts, iterations=e.max_iterations, warmup=min(opts.warmup, e.max_iterations // 10))
    return opts


def measure(rows: list[Row], base: RunOptions, trace: bool, work: Path, out: Path, quiet: bool) -> Interrupted | None:
    """Run each row's experiment into work/ID (shown as out/ID), filling its status, results
    directory and summary; returns the Interrupted that stopped the suite, or None."""
    started = time.monotonic()
    if not quiet:
        sizes = [experiment_options(base, r.experiment) for r in rows]
        n = sum(o.runs * o.iterations for o in sizes)
        progress.announce(
            "suite",
            sum(o.runs for o in sizes),
            n,
            progress.disk_estimate(n, trace, base.keep_raw, base.calibrate),
            work,
        )
    for k, r in enumerate(rows, 1):
        e = r.experiment
        if not quiet:
            print(f"{progress.overall(k - 1, len(rows), started)}: {e.options_text()}", file=sys.stderr, flush=True)
        try:
            r.resdir = runner.run_workload(
                e.workload, experiment_options(base, e), work / e.id, trace=trace, quiet=True, shown=out / e.id
            )
            r.status = "complete"
        except Interrupted as exc:
            resdir = getattr(exc, "resdir", None)
            if resdir:
                r.resdir, r.status = resdir, "interrupted"
            return exc
        except (MeasureError, UsageError) as exc:
            r.status = f"failed: {exc}"
            if not quiet:
                print(f"ipctrace suite: {e.id}: {exc}", file=sys.stderr, flush=True)
        if r.resdir:
            r.summary = run_summary_file(r.resdir)
            twin = r.resdir / runner.CALIBRATION_DIR
            if (twin / "summary.json").is_file():
                r.untraced = run_summary_file(twin)
    return None


def head(base: RunOptions, trace: bool, quick: bool, started: datetime.datetime, interrupted: bool) -> SuiteFacts:
    """The suite's facts: when, where, the placement policy and the counts."""
    policy = base.placement or "each workload's default (two sides on two CPUs, sched-yield on one)"
    if base.placement == "cpus":
        policy = "cpus " + ",".join(map(str, base.cpus or ()))  # set with placement "cpus"
    return SuiteFacts(
        started=started.isoformat(timespec="seconds"),
        host=host_info(),
        placement=policy,
        iterations=base.iterations,
        warmup=base.warmup,
        runs=base.runs,
        traced=trace,
        quick=quick,
        iqr=base.iqr,
        interrupted=interrupted,
    )


def write_files(work: Path, rows: list[Row], facts: SuiteFacts) -> tuple[str, dict[str, Any]]:
    """suite.csv, suite.md and suite.json; returns the Markdown and the JSON document."""
    write_csv(work / "suite.csv", rows)
    md = markdown(rows, facts)
    doc = {**facts.to_json(), "rows": list(table_rows(rows))}
    safeio.write_text(work / "suite.md", md)
    safeio.write_text(work / "suite.json", json.dumps(doc, indent=1) + "\n")
    return md, doc


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def write_csv(path: Path, rows: list[Row]) -> None:
    with safeio.created(path) as p, open(p, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        w.writeheader()
        for row in table_rows(rows):
            w.writerow({k: ("" if v is None else v) for k, v in row.items()})
