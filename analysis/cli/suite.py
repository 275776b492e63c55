"""`ipctrace suite`: every experiment of the seed reports (with --all every
workload), one placement policy, one table of this machine's figures beside the
reports' (suite.md and suite.csv in the suite's results directory, one results
directory per experiment under it).

An experiment that fails does not stop the others: its row says why, and the
suite exits 1 at the end. Ctrl-C writes the table of what was measured and
exits 130.
"""

import csv
import dataclasses
import datetime
import json
import os
import sys
from pathlib import Path

from analysis import LOADER
from analysis.errors import Interrupted, IpctraceError, MeasureError, UsageError
from analysis.model import seeds
from analysis.model.summary import host_info
from analysis.render.table import fmt, pick_unit
from analysis.run import runner
from analysis.run.options import add_run_options, run_options
from analysis.store import safeio
from analysis.store.results import read_summary

QUICK = {"iterations": 2000, "warmup": 200, "runs": 2}
VARIANT_FLAGS = ("size", "mode", "procs", "fresh", "containers")

CSV_FIELDS = [
    "experiment",
    "title",
    "workload",
    "options",
    "metric",
    "status",
    "n",
    "mean_ns",
    "ci95_lo_ns",
    "ci95_hi_ns",
    "median_ns",
    "runs_ci95_lo_ns",
    "runs_ci95_hi_ns",
    "iqr_mean_ns",
    "iqr_ci95_lo_ns",
    "iqr_ci95_hi_ns",
    "iqr_removed",
    "report",
    "machine",
    "report_value_ns",
    "report_ci95_lo_ns",
    "report_ci95_hi_ns",
    "report_statistic",
    "note",
]


def register(sub):
    p = sub.add_parser(
        "suite",
        help="every experiment of the seed reports, beside the reports' figures",
        description="Run every experiment of the seed reports (with --all every workload) with "
        "one placement policy and write one table: this machine's figure with its "
        "95 % interval beside the reports' figures, as suite.md and suite.csv.",
    )
    p.add_argument("--all", action="store_true", help="also every workload no report measured")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"small counts for a smoke test: {QUICK['iterations']} iterations, {QUICK['warmup']} "
        f"warm-up, {QUICK['runs']} runs (instead of --iterations/--warmup/--runs)",
    )
    add_run_options(p, out_help="suite directory (default results/suite-YYYYmmdd-HHMMSS)")


@dataclasses.dataclass
class Row:
    experiment: seeds.Experiment
    metrics: list
    status: str = "not run"  # complete, interrupted, failed: ..., not run
    summary: dict | None = None
    resdir: Path | None = None


def plan(all_workloads):
    """The experiments to run: the reports', then (with --all) one per other workload."""
    plan_ = [(e, seeds.metrics_for(e.id)) for e in seeds.EXPERIMENTS]
    if all_workloads:
        done = {e.workload for e in seeds.EXPERIMENTS}
        for w in runner.catalog():
            if w["name"] not in done:
                metrics = [w["primary_metric"]] + [d for d in (w.get("derived") or {})]
                plan_.append((seeds.Experiment(w["name"], w.get("summary", ""), w["name"]), metrics))
    return plan_


def base_options(args):
    for flag in VARIANT_FLAGS:
        if getattr(args, flag):
            raise UsageError(
                f"suite: --{flag} chooses one workload's variant; the suite runs the "
                "reports' variants (use ipctrace run for others)"
            )
    opts = run_options(args)
    if args.quick:
        opts = dataclasses.replace(opts, **QUICK)
    return opts


def experiment_options(base, e):
    opts = dataclasses.replace(base, mode=e.mode, fresh=e.fresh)
    if e.max_iterations and opts.iterations > e.max_iterations:
        opts = dataclasses.replace(opts, iterations=e.max_iterations, warmup=min(opts.warmup, e.max_iterations // 10))
    return opts


def run(args):
    base = base_options(args)
    trace = not args.no_trace
    if trace and not os.access(LOADER, os.X_OK):
        raise UsageError(f"tracing is not built ({LOADER} is missing); use --no-trace")
    rows = [Row(e, m) for e, m in plan(args.all)]
    for r in rows:
        info = runner.workload_info(r.experiment.workload)
        runner.check_options(info, experiment_options(base, r.experiment))
    # Made (under sudo: with the invoking user's rights), opened once and locked; we write
    # through rd.path, its pinned name.
    rd = runner.open_new_outdir(args.out, "suite", runner.invoking_user())
    try:
        return _run(args, base, trace, rows, rd)
    except IpctraceError as e:
        e.args = (rd.show(str(e)),)
        raise
    finally:
        rd.close()


def _run(args, base, trace, rows, rd):
    out, work = rd.shown, rd.path
    started = datetime.datetime.now(datetime.timezone.utc)
    interrupted = None
    for k, r in enumerate(rows, 1):
        e = r.experiment
        if not args.quiet:
            print(f"[{k}/{len(rows)}] {e.options_text()}", file=sys.stderr, flush=True)
        try:
            r.resdir = runner.run_workload(
                e.workload, experiment_options(base, e), work / e.id, trace=trace, quiet=True, shown=out / e.id
            )
            r.status = "complete"
        except Interrupted as exc:
            interrupted = exc
            resdir = getattr(exc, "resdir", None)
            if resdir:
                r.resdir, r.status = resdir, "interrupted"
            break
        except (MeasureError, UsageError) as exc:
            r.status = f"failed: {exc}"
            if not args.quiet:
                print(f"ipctrace suite: {e.id}: {exc}", file=sys.stderr, flush=True)
        if r.resdir:
            r.summary = read_summary(r.resdir)

    policy = base.placement or "each workload's default (two sides on two CPUs, sched-yield on one)"
    if base.placement == "cpus":
        policy = "cpus " + ",".join(map(str, base.cpus))
    head = {
        "started": started.isoformat(timespec="seconds"),
        "host": host_info(),
        "placement": policy,
        "iterations": base.iterations,
        "warmup": base.warmup,
        "runs": base.runs,
        "traced": trace,
        "quick": args.quick,
        "iqr": base.iqr,
        "interrupted": interrupted is not None,
    }
    write_csv(work / "suite.csv", rows)
    md = markdown(rows, head)
    safeio.write_text(work / "suite.md", md)
    safeio.write_text(work / "suite.json", json.dumps({**head, "rows": json_rows(rows)}, indent=1) + "\n")

    if args.json:
        print(json.dumps({**head, "rows": json_rows(rows)}, indent=1))
    else:
        print(md, end="")
        print(f"results: {out}")
    if interrupted:
        raise Interrupted(interrupted.signum, f"interrupted; the table of what was measured is in {out}")
    failed = [r.experiment.id for r in rows if r.status.startswith("failed")]
    if failed:
        raise MeasureError(
            f"{len(failed)} of {len(rows)} experiments failed ({', '.join(failed)}); see {out / 'suite.md'}"
        )
    return 0


# --- the table ------------------------------------------------------------------


def here(r, metric):
    """This machine's figure of metric: the summary.json entry, or None."""
    if not r.summary:
        return None
    return r.summary.get("metrics", {}).get(metric)


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


def csv_rows(rows):
    for r in rows:
        e = r.experiment
        for metric in r.metrics:
            m = here(r, metric) or {}
            ci, rci = m.get("ci95_mean") or [None, None], m.get("runs_ci95_mean") or [None, None]
            q = m.get("iqr") or {}
            qci = q.get("ci95_mean") or [None, None]
            base = {
                "experiment": e.id,
                "title": e.title,
                "workload": e.workload,
                "options": e.options_text(),
                "metric": metric,
                "status": r.status,
                "n": m.get("n", 0),
                "mean_ns": m.get("mean"),
                "ci95_lo_ns": ci[0],
                "ci95_hi_ns": ci[1],
                "median_ns": m.get("median"),
                "runs_ci95_lo_ns": rci[0],
                "runs_ci95_hi_ns": rci[1],
                "iqr_mean_ns": q.get("mean"),
                "iqr_ci95_lo_ns": qci[0],
                "iqr_ci95_hi_ns": qci[1],
                "iqr_removed": q.get("removed"),
            }
            figs = [f for f in seeds.figures_for(e.id) if f.metric == metric]
            if not figs:
                yield base
            for f in figs:
                lo, hi = f.ci95_ns or (None, None)
                yield {
                    **base,
                    "report": f.report,
                    "machine": f.machine,
                    "report_value_ns": f.value_ns,
                    "report_ci95_lo_ns": lo,
                    "report_ci95_hi_ns": hi,
                    "report_statistic": f.statistic,
                    "note": f.note,
                }


def write_csv(path, rows):
    with safeio.created(path) as p, open(p, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        w.writeheader()
        for row in csv_rows(rows):
            w.writerow({k: ("" if v is None else v) for k, v in row.items()})


def json_rows(rows):
    return list(csv_rows(rows))
