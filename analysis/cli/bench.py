"""`ipctrace bench`: what tracing costs the traced workload (the probe effect).

One invocation measures `pipe` round trips on one CPU and across CPUs, and
`null-syscall` (one getppid() per iteration), interleaved in random order within
each round, under:
  untraced    the driver alone
  floor       ipctrace-loader --floor: every probe attached, programs return at once
  clock       ipctrace-loader --floor=clock: the same, each program reads the clock
              (bpf_ktime_get_ns) before it returns: the least any tracer pays that
              timestamps each event it sees
  ipctrace    full tracing
  bystander   untraced, while ipctrace traces another process (the filter's cost)
  bpftrace    bpftrace counting raw_syscalls sys_enter/sys_exit of comm ipcbench
  perf        perf record -e raw_syscalls:sys_enter,sys_exit on the driver
Each round's median iteration is divided by the same round's untraced median;
the ratio and the ns added per syscall (4 per pipe round trip, 1 per
null-syscall iteration) are reported as mean and 95 % interval over the rounds.
Then an event storm: one long `null-syscall` run per CPU, all traced at once,
its events per second and drops.
"""

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from analysis import DRIVER, LOADER
from analysis.errors import UsageError
from analysis.model import stats
from analysis.run import bench, doctor, privilege
from analysis.run.options import count
from analysis.store import safeio


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--rounds",
        type=count("rounds", 2, 1000),
        default=7,
        help="interleaved rounds (default 7; at least 6 for a 95 %% interval)",
    )
    p.add_argument(
        "--iterations",
        type=count("iterations", 100, 10_000_000),
        default=15000,
        help="timed round trips per run (default 15000)",
    )
    p.add_argument(
        "--warmup",
        type=count("iterations", 0, 10_000_000),
        default=2000,
        help="untimed round trips before each run's timed ones (default 2000)",
    )
    p.add_argument(
        "--placement",
        choices=("same-cpu", "cross-cpu", "both"),
        default="both",
        help="where the pipe's two sides run (default both, one after the other)",
    )
    p.add_argument(
        "--syscall-iterations",
        type=count("iterations", 0, 100_000_000),
        default=200000,
        help="null-syscall iterations per run (default 200000, 0: leave it out)",
    )
    p.add_argument(
        "--configs",
        default=",".join(bench.CONFIGS),
        help=f"comma-separated subset of {','.join(bench.CONFIGS)} (untraced is always run)",
    )
    p.add_argument(
        "--storm-iterations",
        type=count("iterations", 0, 1_000_000_000),
        default=2_000_000,
        help="null-syscall iterations per CPU of the event storm (0: no storm)",
    )
    j = p.add_mutually_exclusive_group()
    # --json prints to stdout, as every command's --json does (the text then goes to stderr);
    # --json FILE, the older form, still writes FILE as --json-file FILE does
    j.add_argument(
        "--json", nargs="?", const="-", metavar="FILE", help="print the figures as JSON (the text to stderr)"
    )
    j.add_argument("--json-file", metavar="FILE", help="also write the figures as JSON to FILE")


def run(args: argparse.Namespace) -> int:
    if args.json == "-":
        with contextlib.redirect_stdout(sys.stderr):
            result = _run(args)
        print(json.dumps(result, indent=1))
        return 0
    _run(args)
    return 0


def _run(args: argparse.Namespace) -> dict[str, Any]:
    if not privilege.has_root():
        raise UsageError("bench traces with eBPF: run it as root (sudo ./ipctrace bench)")
    for prog in (DRIVER, LOADER):
        if not os.access(prog, os.X_OK):
            raise UsageError(f"{prog} is not built; run 'make'")
    configs = ["untraced"] + [c for c in args.configs.split(",") if c and c != "untraced"]
    bad = [c for c in configs if c not in bench.CONFIGS]
    if bad:
        raise UsageError(f"unknown bench configuration {', '.join(bad)} (choose from {', '.join(bench.CONFIGS)})")
    others = [c for c in configs if c in ("perf", "bpftrace")]
    if others and privilege.brokered():
        raise UsageError(
            f"bench --configs {','.join(others)}: under sudo ipctrace runs only its own tracer as root, not "
            f"{' or '.join(others)}; leave them out, or run bench as root"
        )
    if "bpftrace" in configs:
        bench.need("bpftrace")
    if "perf" in configs:
        bench.need("perf")
    if "bpftrace" in configs or "perf" in configs:
        bench.ensure_tracefs()
    placements = bench.PLACEMENTS if args.placement == "both" else (args.placement,)
    cases = [bench.Case(p, "pipe", 4, args.iterations, args.warmup, p) for p in placements]
    if args.syscall_iterations:
        cases.append(bench.Case("null-syscall", "null-syscall", 1, args.syscall_iterations, 1000))

    clock = doctor.probe()["features"].get("clock", {}).get("detail", "not reported")
    print(f"clock read on this machine: {clock}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="ipctrace-bench-"))
    med: dict[tuple[str, str], list[float]] = {(k.name, c): [] for k in cases for c in configs}
    try:
        for r in range(args.rounds):
            for k in cases:
                order = configs[:]
                random.shuffle(order)
                for c in order:
                    med[(k.name, c)].append(bench.run_one(c, k, work / f"{r}-{k.name}-{c}"))
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        result = {"rounds": args.rounds, "clock_read": clock, "cases": {}}
        for k in cases:
            base = np.array(med[(k.name, "untraced")])
            rows: dict[str, Any] = {"untraced_median_ns": list(map(float, base)), "iterations": k.iterations}
            what = "round trip" if k.workload == "pipe" else "syscall"
            print(
                f"\n{k.name} ({k.workload}): untraced median {what} {np.median(base):.0f} ns "
                f"(median of {args.rounds} rounds; each figure: median over the rounds, 95 % interval)"
            )
            print(f"  {'config':<10} {'ratio':>6} {'95% CI':>15} {'ns/syscall':>11} {'95% CI':>13}")
            for c in configs[1:]:
                x = np.array(med[(k.name, c)])
                ratio, rlo, rhi = stats.median_interval(x / base)
                ns, nlo, nhi = stats.median_interval((x - base) / k.syscalls)
                # too few rounds for an interval: none (null in JSON, "-" in the table), never NaN
                rci = [rlo, rhi] if np.isfinite([rlo, rhi]).all() else None
                nci = [nlo, nhi] if np.isfinite([nlo, nhi]).all() else None
                rows[c] = {
                    "ratio": ratio,
                    "ratio_ci95": rci,
                    "ns_per_syscall": ns,
                    "ns_per_syscall_ci95": nci,
                    "median_ns": list(map(float, x)),
                }
                rtext = f"{rlo:7.3f}..{rhi:<6.3f}" if rci else f"{'-':>15}"
                ntext = f"{nlo:6.0f}..{nhi:<6.0f}" if nci else f"{'-':>14}"
                print(f"  {c:<10} {ratio:6.3f} {rtext} {ns:11.0f} {ntext}")
            result["cases"][k.name] = rows
            _print_targets(rows, floor_target=k.workload == "pipe")
        if args.storm_iterations:
            s = bench.storm(args, work)
            result["storm"] = s
            ok = s["events_per_s"] >= bench.STORM_EVENTS_PER_S and not s["drops"]
            print(
                f"\nevent storm (null-syscall traced on CPUs {','.join(map(str, s['cpus']))} at once): "
                f"{s['events_per_s'] / 1e6:.2f} M events/s over {s['seconds']:.2f} s (busiest 100 ms: "
                f"{s['peak_events_per_s'] / 1e6:.2f} M/s; {s['events_per_on_cpu_s'] / 1e6:.2f} M/s counting "
                f"only the time the workload was on its CPUs), "
                f"{s['drops']} drops [{'meets' if ok else 'MISSES'} target >= "
                f"{bench.STORM_EVENTS_PER_S / 1e6:.0f} M/s, 0 drops]"
            )
        json_file = args.json_file or (args.json if args.json != "-" else None)
        if json_file:
            try:
                safeio.write_json(json_file, result, indent=1)
            except OSError as e:
                raise UsageError(f"cannot write {json_file}: {safeio.why(e)}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _print_targets(rows: dict[str, Any], floor_target: bool) -> None:
    if "ipctrace" not in rows:
        return
    t = rows["ipctrace"]
    checks = []
    if floor_target and "floor" in rows:
        lim = rows["floor"]["ratio"] * bench.FLOOR_MARGIN
        checks.append((t["ratio"] <= lim, f"ratio {t['ratio']:.3f} <= floor x 1.10 = {lim:.3f}"))
    checks.append(
        (
            t["ns_per_syscall"] <= bench.NS_PER_SYSCALL_MAX,
            f"{t['ns_per_syscall']:.0f} ns/syscall <= {bench.NS_PER_SYSCALL_MAX}",
        )
    )
    for peer in ("bpftrace", "perf"):
        if peer in rows:
            checks.append((t["ratio"] < rows[peer]["ratio"], f"below {peer} ({rows[peer]['ratio']:.3f})"))
    if "bystander" in rows and "floor" in rows:
        checks.append(
            (
                rows["bystander"]["ratio"] <= (rows["floor"]["ratio_ci95"] or [0, rows["floor"]["ratio"]])[1],
                f"untraced bystander {rows['bystander']['ratio']:.3f} <= floor",
            )
        )
    for ok, text in checks:
        print(f"  {'meets ' if ok else 'MISSES'} {text}")
    if "clock" in rows:
        c = rows["clock"]
        print(
            f"  (reading the clock at each probe alone adds {c['ns_per_syscall']:.0f} ns/syscall, ratio "
            f"{c['ratio']:.3f}; ipctrace's records cost {t['ns_per_syscall'] - c['ns_per_syscall']:.0f} "
            f"ns/syscall beyond that)"
        )
