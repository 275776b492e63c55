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

import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats as sps

from analysis import DRIVER, LOADER
from analysis.errors import MeasureError, UsageError
from analysis.run import doctor
from analysis.run.options import count, online_cpus
from analysis.store import events as events_mod
from analysis.store.results import read_iterations_bin

CONFIGS = ("untraced", "floor", "clock", "ipctrace", "bystander", "bpftrace", "perf")
PLACEMENTS = ("same-cpu", "cross-cpu")
TRACEFS = "/sys/kernel/tracing"
BPFTRACE_PROG = (
    'tracepoint:raw_syscalls:sys_enter /comm == "ipcbench"/ { @enter = count(); } '
    'tracepoint:raw_syscalls:sys_exit /comm == "ipcbench"/ { @exit = count(); }'
)
# Targets of the issue: ipctrace within 10 % of the floor, <= 200 ns per traced syscall.
FLOOR_MARGIN = 1.10
NS_PER_SYSCALL_MAX = 200
STORM_EVENTS_PER_S = 4e6
STORM_WINDOW_NS = 100_000_000


def register(subparsers):
    p = subparsers.add_parser(
        "bench",
        help="probe effect of tracing against untraced runs, the attach floor, bpftrace and perf",
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
    p.add_argument("--warmup", type=count("iterations", 0, 10_000_000), default=2000)
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
        default=",".join(CONFIGS),
        help=f"comma-separated subset of {','.join(CONFIGS)} (untraced is always run)",
    )
    p.add_argument(
        "--storm-iterations",
        type=count("iterations", 0, 1_000_000_000),
        default=2_000_000,
        help="null-syscall iterations per CPU of the event storm (0: no storm)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")


def _need(tool):
    if not shutil.which(tool):
        raise UsageError(f"{tool} is not installed; run 'sudo ./ipctrace setup --test'")


def _ensure_tracefs():
    """bpftrace and perf name tracepoints through tracefs."""
    if os.path.exists(f"{TRACEFS}/events/raw_syscalls"):
        return
    r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True, text=True)
    if r.returncode:
        raise UsageError(f"tracefs is not mounted and mounting it failed: {r.stderr.strip()}")


def _median_rtt(outdir):
    wl = json.loads((outdir / "workload.json").read_text())
    it, _ = read_iterations_bin(outdir / "iterations.bin", wl["metrics"])
    lat = it.loc[it["metric"].astype(str) == wl["primary_metric"], "latency_ns"].to_numpy()
    if not len(lat):
        raise MeasureError(f"{outdir}: no iterations recorded")
    return float(np.median(lat)), len(lat)


def _check(proc_or_rc, what, log):
    rc = proc_or_rc if isinstance(proc_or_rc, int) else proc_or_rc.returncode
    if rc != 0:
        lines = [ln for ln in Path(log).read_text(errors="replace").splitlines() if ln.strip()]
        raise MeasureError(f"bench: {what} failed (exit {rc}): {lines[-1] if lines else 'no message'}")


def _children(pid):
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _comm(pid):
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _wait_for(cond, what, proc, timeout=30):
    end = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            raise MeasureError(f"bench: {what} ended before it was ready (exit {proc.returncode})")
        if time.monotonic() > end:
            raise MeasureError(f"bench: {what} not ready after {timeout} s")
        time.sleep(0.05)


def _stop(proc, sig=signal.SIGINT):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Case:
    """A workload run the same way under every configuration."""

    def __init__(self, name, workload, syscalls, iterations, warmup, placement=None):
        self.name, self.workload, self.syscalls = name, workload, syscalls
        self.iterations, self.warmup, self.placement = iterations, warmup, placement

    def driver(self, outdir):
        return [
            str(DRIVER),
            "run",
            self.workload,
            "--out",
            str(outdir),
            "--iterations",
            str(self.iterations),
            "--warmup",
            str(self.warmup),
            "--runs",
            "1",
            *([f"--{self.placement}"] if self.placement else []),
        ]


def run_one(cfg, case, outdir):
    """One run of case under cfg; returns its median iteration (ns)."""
    outdir.mkdir(parents=True)
    log = outdir / "log"
    drv = case.driver(outdir)
    with open(log, "w") as lf:
        if cfg in ("untraced", "floor", "clock", "ipctrace", "perf"):
            wrap = {
                "untraced": [],
                "floor": [str(LOADER), "--floor", "--out", str(outdir), "--"],
                "clock": [str(LOADER), "--floor=clock", "--out", str(outdir), "--"],
                "ipctrace": [str(LOADER), "--out", str(outdir), "--"],
                "perf": [
                    "perf",
                    "record",
                    "-q",
                    "-e",
                    "raw_syscalls:sys_enter",
                    "-e",
                    "raw_syscalls:sys_exit",
                    "-o",
                    str(outdir / "perf.data"),
                    "--",
                ],
            }[cfg]
            _check(subprocess.run(wrap + drv, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL), cfg, log)
            if cfg == "ipctrace":
                tj = json.loads((outdir / "trace.json").read_text())
                if tj["drops"]["total"]:
                    raise MeasureError(f"bench: ipctrace lost {tj['drops']['total']} events in a {case.workload} run")
        elif cfg == "bystander":
            # A tracer whose root is `sleep`: the workload is not followed and pays only the filter.
            tracer = subprocess.Popen(
                [str(LOADER), "--out", str(outdir / "bystander"), "--", "sleep", "3600"],
                stdout=lf,
                stderr=lf,
                stdin=subprocess.DEVNULL,
            )
            try:
                _wait_for(
                    lambda: any(_comm(c) == "sleep" for c in _children(tracer.pid)), "the bystander tracer", tracer
                )
                _check(subprocess.run(drv, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL), cfg, log)
            finally:
                _stop(tracer, signal.SIGTERM)
        elif cfg == "bpftrace":
            # -c starts the driver only once the probes are attached.
            bt = subprocess.run(
                ["bpftrace", "-e", BPFTRACE_PROG, "-c", shlex.join(drv)],
                stdout=subprocess.PIPE,
                stderr=lf,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            _check(bt, cfg, log)
            counted = [int(n) for n in re.findall(r"^@\w+: (\d+)$", bt.stdout, re.M)]
            if len(counted) != 2 or min(counted) < case.syscalls * case.iterations:
                raise MeasureError(f"bench: bpftrace counted {counted}, fewer syscalls than the run made")
    return _median_rtt(outdir)[0]


def _interval(x):
    """Median over the rounds and its distribution-free 95 % interval (order statistics):
    one round disturbed by the rest of the machine moves neither much."""
    x = np.sort(np.asarray(x, float))
    n = len(x)
    # the largest k with P(Binomial(n, 1/2) < k) <= 2.5 %; below 6 rounds no such k exists
    k = int(sps.binom.ppf(0.025, n, 0.5))
    if sps.binom.cdf(k, n, 0.5) > 0.025:
        k -= 1
    lo, hi = (x[k], x[n - k - 1]) if k >= 0 else (float("nan"), float("nan"))
    return float(np.median(x)), float(lo), float(hi)


def storm(args, work):
    """null-syscall on every CPU at once under one tracer: events per second and drops."""
    outdir = work / "storm"
    outdir.mkdir()
    log = outdir / "log"
    cpus = sorted(online_cpus())
    runs = [
        shlex.join(
            [
                str(DRIVER),
                "run",
                "null-syscall",
                "--out",
                str(outdir / f"cpu{c}"),
                "--iterations",
                str(args.storm_iterations),
                "--warmup",
                "1000",
                "--runs",
                "1",
                "--cpus",
                str(c),
            ]
        )
        + f" & p{c}=$!;"
        for c in cpus
    ]
    script = " ".join(runs) + " rc=0;" + "".join(f' wait "$p{c}" || rc=1;' for c in cpus) + " exit $rc"
    with open(log, "w") as lf:
        _check(
            subprocess.run(
                [str(LOADER), "--out", str(outdir), "--", "sh", "-c", script],
                stdout=lf,
                stderr=lf,
                stdin=subprocess.DEVNULL,
            ),
            "the event storm",
            log,
        )
    tj = json.loads((outdir / "trace.json").read_text())
    frame = events_mod.to_frame(events_mod.read_events_bin(outdir / "events.bin")[0])
    windows, on_cpu_rate = [], 0.0
    for c in cpus:
        wl = json.loads((outdir / f"cpu{c}" / "workload.json").read_text())
        it, _ = read_iterations_bin(outdir / f"cpu{c}" / "iterations.bin", wl["metrics"])
        tid, t0, t1 = int(it["tid"].iloc[0]), int(it["t_start_ns"].min()), int(it["t_end_ns"].max())
        windows.append((t0, t1))
        own = frame[(frame["tid"] == tid) & (frame["ts"] >= t0) & (frame["ts"] <= t1)]
        on_cpu = _on_cpu_ns(frame, tid, t0, t1)
        on_cpu_rate += len(own) * 1e9 / on_cpu if on_cpu else 0.0
    t0, t1 = min(w[0] for w in windows), max(w[1] for w in windows)
    ts = frame["ts"].to_numpy(np.int64)
    ts = ts[(ts >= t0) & (ts <= t1)]
    span = (t1 - t0) / 1e9
    # The busiest 100 ms: on a shared machine the workload does not hold its CPUs throughout.
    per_window = np.bincount((ts - t0) // STORM_WINDOW_NS) if len(ts) else np.zeros(1, np.int64)
    return {
        "cpus": cpus,
        "iterations_per_cpu": args.storm_iterations,
        "seconds": span,
        "events_in_window": int(len(ts)),
        "events_per_s": len(ts) / span if span > 0 else float("nan"),
        "peak_events_per_s": float(per_window.max() * 1e9 / STORM_WINDOW_NS),
        "events_per_on_cpu_s": on_cpu_rate,
        "drops": int(tj["drops"]["total"]),
        "records": int(tj["records"]),
    }


def _on_cpu_ns(frame, tid, t0, t1):
    """Time tid spent on a CPU within [t0, t1], from its switch records."""
    sw = frame[
        (frame["type"] == "switch")
        & ((frame["tid"] == tid) | (frame["next_tid"] == tid))
        & (frame["ts"] >= t0)
        & (frame["ts"] <= t1)
    ]
    ts = sw["ts"].to_numpy(np.int64)
    out = (sw["tid"] == tid).to_numpy()
    off = int(((ts[1:] - ts[:-1]) * (out[:-1] & ~out[1:])).sum())
    if len(ts) and out[-1]:
        off += t1 - ts[-1]
    if len(ts) and not out[0]:
        off += ts[0] - t0
    return (t1 - t0) - off


def run(args):
    if os.geteuid() != 0:
        raise UsageError("bench traces with eBPF: run it as root (sudo ./ipctrace bench)")
    for prog in (DRIVER, LOADER):
        if not os.access(prog, os.X_OK):
            raise UsageError(f"{prog} is not built; run 'make'")
    configs = ["untraced"] + [c for c in args.configs.split(",") if c and c != "untraced"]
    bad = [c for c in configs if c not in CONFIGS]
    if bad:
        raise UsageError(f"unknown bench configuration {', '.join(bad)} (choose from {', '.join(CONFIGS)})")
    if "bpftrace" in configs:
        _need("bpftrace")
    if "perf" in configs:
        _need("perf")
    if "bpftrace" in configs or "perf" in configs:
        _ensure_tracefs()
    placements = PLACEMENTS if args.placement == "both" else (args.placement,)
    cases = [Case(p, "pipe", 4, args.iterations, args.warmup, p) for p in placements]
    if args.syscall_iterations:
        cases.append(Case("null-syscall", "null-syscall", 1, args.syscall_iterations, 1000))

    clock = doctor.probe()["features"].get("clock", {}).get("detail", "not reported")
    print(f"clock read on this machine: {clock}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="ipctrace-bench-"))
    med = {(k.name, c): [] for k in cases for c in configs}
    try:
        for r in range(args.rounds):
            for k in cases:
                order = configs[:]
                random.shuffle(order)
                for c in order:
                    med[(k.name, c)].append(run_one(c, k, work / f"{r}-{k.name}-{c}"))
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        result = {"rounds": args.rounds, "clock_read": clock, "cases": {}}
        for k in cases:
            base = np.array(med[(k.name, "untraced")])
            rows = {"untraced_median_ns": list(map(float, base)), "iterations": k.iterations}
            what = "round trip" if k.workload == "pipe" else "syscall"
            print(
                f"\n{k.name} ({k.workload}): untraced median {what} {np.median(base):.0f} ns "
                f"(median of {args.rounds} rounds; each figure: median over the rounds, 95 % interval)"
            )
            print(f"  {'config':<10} {'ratio':>6} {'95% CI':>15} {'ns/syscall':>11} {'95% CI':>13}")
            for c in configs[1:]:
                x = np.array(med[(k.name, c)])
                ratio, rlo, rhi = _interval(x / base)
                ns, nlo, nhi = _interval((x - base) / k.syscalls)
                rows[c] = {
                    "ratio": ratio,
                    "ratio_ci95": [rlo, rhi],
                    "ns_per_syscall": ns,
                    "ns_per_syscall_ci95": [nlo, nhi],
                    "median_ns": list(map(float, x)),
                }
                print(f"  {c:<10} {ratio:6.3f} {rlo:7.3f}..{rhi:<6.3f} {ns:11.0f} {nlo:6.0f}..{nhi:<6.0f}")
            result["cases"][k.name] = rows
            _print_targets(rows, floor_target=k.workload == "pipe")
        if args.storm_iterations:
            s = storm(args, work)
            result["storm"] = s
            ok = s["events_per_s"] >= STORM_EVENTS_PER_S and not s["drops"]
            print(
                f"\nevent storm (null-syscall traced on CPUs {','.join(map(str, s['cpus']))} at once): "
                f"{s['events_per_s'] / 1e6:.2f} M events/s over {s['seconds']:.2f} s (busiest 100 ms: "
                f"{s['peak_events_per_s'] / 1e6:.2f} M/s; {s['events_per_on_cpu_s'] / 1e6:.2f} M/s counting "
                f"only the time the workload was on its CPUs), "
                f"{s['drops']} drops [{'meets' if ok else 'MISSES'} target >= "
                f"{STORM_EVENTS_PER_S / 1e6:.0f} M/s, 0 drops]"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _print_targets(rows, floor_target):
    if "ipctrace" not in rows:
        return
    t = rows["ipctrace"]
    checks = []
    if floor_target and "floor" in rows:
        lim = rows["floor"]["ratio"] * FLOOR_MARGIN
        checks.append((t["ratio"] <= lim, f"ratio {t['ratio']:.3f} <= floor x 1.10 = {lim:.3f}"))
    checks.append(
        (t["ns_per_syscall"] <= NS_PER_SYSCALL_MAX, f"{t['ns_per_syscall']:.0f} ns/syscall <= {NS_PER_SYSCALL_MAX}")
    )
    for peer in ("bpftrace", "perf"):
        if peer in rows:
            checks.append((t["ratio"] < rows[peer]["ratio"], f"below {peer} ({rows[peer]['ratio']:.3f})"))
    if "bystander" in rows and "floor" in rows:
        checks.append(
            (
                rows["bystander"]["ratio"] <= rows["floor"]["ratio_ci95"][1],
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
