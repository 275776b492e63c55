"""The measuring side of `ipctrace bench` (analysis/cli/bench.py says what it measures): one
run of a case under a configuration (untraced, the attach floor, the clock floor, ipctrace,
an untraced bystander, bpftrace, perf), its median, and the event storm."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis import DRIVER, LOADER
from analysis.errors import MeasureError, UsageError
from analysis.model import decoded
from analysis.run import broker, privilege
from analysis.run.options import online_cpus
from analysis.store import events as events_mod
from analysis.store import safeio
from analysis.store.results import read_iterations_bin, trace_file

if TYPE_CHECKING:
    import argparse

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


def need(tool: str) -> None:
    if not shutil.which(tool):
        raise UsageError(f"{tool} is not installed; run 'sudo ./ipctrace setup --test'")


def ensure_tracefs() -> None:
    """bpftrace and perf name tracepoints through tracefs."""
    if os.path.exists(f"{TRACEFS}/events/raw_syscalls"):
        return
    if privilege.brokered():
        broker.simple("tracefs")
        return
    r = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True, text=True)
    if r.returncode:
        raise UsageError(f"tracefs is not mounted and mounting it failed: {r.stderr.strip()}")


class _Tracer:
    """The loader writing into outdir, which it gets as our descriptor (under sudo the broker
    takes no path); `cmd + [command...]` runs it."""

    def __init__(self, outdir: Path, *options: str) -> None:
        self.fd = safeio.open_dir(outdir)
        self.cmd = [str(LOADER), *options, "--out", safeio.proc_path(self.fd), "--"]

    def run(self, command: list[str], **kw: Any) -> subprocess.CompletedProcess:
        return privilege.run_as_root(self.cmd + command, pass_fds=(self.fd,), **kw)

    def popen(self, command: list[str], **kw: Any) -> subprocess.Popen:
        return privilege.popen_root(self.cmd + command, pass_fds=(self.fd,), **kw)

    def __enter__(self) -> _Tracer:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _median_rtt(outdir: Path) -> tuple[float, int]:
    wl = json.loads((outdir / "workload.json").read_text())
    it, _ = read_iterations_bin(outdir / "iterations.bin", wl["metrics"])
    lat = it.loc[it["metric"].astype(str) == wl["primary_metric"], "latency_ns"].to_numpy()
    if not len(lat):
        raise MeasureError(f"{outdir}: no iterations recorded")
    return float(np.median(lat)), len(lat)


def _check(proc_or_rc: int | subprocess.CompletedProcess, what: str, log: Path) -> None:
    rc = proc_or_rc if isinstance(proc_or_rc, int) else proc_or_rc.returncode
    if rc != 0:
        lines = [ln for ln in Path(log).read_text(errors="replace").splitlines() if ln.strip()]
        raise MeasureError(f"bench: {what} failed (exit {rc}): {lines[-1] if lines else 'no message'}")


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _wait_for(cond: Callable[[], bool], what: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            raise MeasureError(f"bench: {what} ended before it was ready (exit {proc.returncode})")
        if time.monotonic() > end:
            raise MeasureError(f"bench: {what} not ready after {timeout} s")
        time.sleep(0.05)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGINT) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Case:
    """A workload run the same way under every configuration."""

    def __init__(
        self, name: str, workload: str, syscalls: int, iterations: int, warmup: int, placement: str | None = None
    ) -> None:
        self.name, self.workload, self.syscalls = name, workload, syscalls
        self.iterations, self.warmup, self.placement = iterations, warmup, placement

    def driver(self, outdir: Path) -> list[str]:
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


def run_one(cfg: str, case: Case, outdir: Path) -> float:
    """One run of case under cfg; returns its median iteration (ns)."""
    outdir.mkdir(parents=True)
    log = outdir / "log"
    drv = case.driver(outdir)
    with open(log, "w") as lf:
        if cfg == "untraced":
            _check(subprocess.run(drv, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL), cfg, log)
        elif cfg in ("floor", "clock", "ipctrace"):
            options = {"floor": ["--floor"], "clock": ["--floor=clock"], "ipctrace": []}[cfg]
            with _Tracer(outdir, *options) as tracer:
                _check(tracer.run(drv, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL), cfg, log)
            if cfg == "ipctrace":
                lost = trace_file(outdir).drops.total
                if lost:
                    raise MeasureError(f"bench: ipctrace lost {lost} events in a {case.workload} run")
        elif cfg == "perf":
            perf = [
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
            ]
            _check(subprocess.run(perf + drv, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL), cfg, log)
        elif cfg == "bystander":
            # A tracer whose root is `sleep`: the workload is not followed and pays only the filter.
            (outdir / "bystander").mkdir()
            with _Tracer(outdir / "bystander") as bystander:
                watcher = bystander.popen(["sleep", "3600"], stdout=lf, stderr=lf, stdin=subprocess.DEVNULL)
                try:
                    _wait_for(
                        lambda: any(_comm(c) == "sleep" for c in _children(watcher.pid)),
                        "the bystander tracer",
                        watcher,
                    )
                    _check(subprocess.run(drv, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL), cfg, log)
                finally:
                    _stop(watcher, signal.SIGTERM)
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


def storm(args: argparse.Namespace, work: Path) -> dict[str, Any]:
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
    with open(log, "w") as lf, _Tracer(outdir) as tracer:
        _check(tracer.run(["sh", "-c", script], stdout=lf, stderr=lf, stdin=subprocess.DEVNULL), "the event storm", log)
    tf = trace_file(outdir)
    frame = events_mod.to_frame(events_mod.read_events_bin(outdir / "events.bin")[0])
    switches = decoded.switches(decoded.Events(frame))
    windows, on_cpu_rate = [], 0.0
    for c in cpus:
        wl = json.loads((outdir / f"cpu{c}" / "workload.json").read_text())
        it, _ = read_iterations_bin(outdir / f"cpu{c}" / "iterations.bin", wl["metrics"])
        tid, t0, t1 = int(it["tid"].iloc[0]), int(it["t_start_ns"].min()), int(it["t_end_ns"].max())
        windows.append((t0, t1))
        own = frame[(frame["tid"] == tid) & (frame["ts"] >= t0) & (frame["ts"] <= t1)]
        on_cpu = _on_cpu_ns(switches, tid, t0, t1)
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
        "drops": tf.drops.total,
        "records": tf.records,
    }


def _on_cpu_ns(switches: decoded.Switches, tid: int, t0: int, t1: int) -> int:
    """Time tid spent on a CPU within [t0, t1], from its switches."""
    mine = ((switches.prev_tid == tid) | (switches.next_tid == tid)) & (switches.ts >= t0) & (switches.ts <= t1)
    ts = switches.ts[mine]
    out = switches.prev_tid[mine] == tid
    off = int(((ts[1:] - ts[:-1]) * (out[:-1] & ~out[1:])).sum())
    if len(ts) and out[-1]:
        off += t1 - ts[-1]
    if len(ts) and not out[0]:
        off += ts[0] - t0
    return (t1 - t0) - off
