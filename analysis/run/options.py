"""The run options shared by every command that measures (run, suite, sweep, bench).

add_run_options(parser) declares them once, so a flag means the same in every
command; run_options(args) turns the parsed namespace into a RunOptions.
Everything a user can get wrong is rejected here, before anything is created:
argparse type errors become one `ipctrace: ...` line with exit 2.
"""

import argparse
import dataclasses
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from analysis.errors import UsageError

# The driver's bounds (workloads/driver.h): beyond them a figure is absurd, not just slow.
MAX_ITERATIONS = 1_000_000_000
MAX_RUNS = 10_000
MAX_SIZE = 64 << 20
MAX_INJECT_NS = 1_000_000_000  # --inject-*-spin
MAX_INJECT_US = 1_000_000  # --inject-peer-sleep
MAX_INJECT_EVERY = 1_000_000  # --inject-every
MAX_INJECT_SYSCALLS = 1_000_000

# --inject-* (known costs at known places, for validating the breakdown): RunOptions field -> driver option
INJECT = {
    "inject_peer_spin": "--inject-peer-spin",
    "inject_peer_syscalls": "--inject-peer-syscalls",
    "inject_peer_sleep": "--inject-peer-sleep",
    "inject_measuring_spin": "--inject-measuring-spin",
    "inject_every": "--inject-every",
}

PLACEMENTS = ("cross-cpu", "same-cpu", "no-pin")


def _whole(text: str, what: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of {what}")
    return int(text)


def count(what: str, lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: a whole number in [lo, hi]."""

    def parse(text: str) -> int:
        n = _whole(text, what)
        if n < lo:
            raise argparse.ArgumentTypeError(f"{n} {what}: must be at least {lo}")
        if n > hi:
            raise argparse.ArgumentTypeError(f"{n} {what}: must be at most {hi}")
        return n

    return parse


def size(text: str) -> int:
    """argparse type: bytes, with an optional K or M suffix (KiB, MiB)."""
    m = re.fullmatch(r"([+-]?[0-9]+)([kKmM]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in bytes (e.g. 64, 4K, 1M)")
    n = int(m.group(1)) << {"": 0, "k": 10, "m": 20}[m.group(2).lower()]
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text}: a message carries at least 1 byte")
    if n > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"{text}: messages larger than {MAX_SIZE >> 20} MiB are not supported")
    return n


def online_cpus() -> set[int]:
    """The set of online CPU numbers, from /sys/devices/system/cpu/online ("0-3,6")."""
    try:
        with open("/sys/devices/system/cpu/online") as f:
            text = f.read().strip()
    except OSError:
        return set(range(os.cpu_count() or 1))
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    return cpus


def cpu_list(text: str) -> tuple[int, ...]:
    """argparse type: "A,B" (measuring side, peer) or "A" of online CPUs."""
    parts = text.split(",")
    if not 1 <= len(parts) <= 2 or not all(re.fullmatch(r"[0-9]+", p.strip()) for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give one or two CPU numbers, as A,B")
    cpus = tuple(int(p) for p in parts)
    online = online_cpus()
    for c in cpus:
        if c not in online:
            raise argparse.ArgumentTypeError(f"CPU {c} is not online (online: {format_cpus(online)})")
    return cpus


def format_cpus(cpus: Iterable[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


@dataclasses.dataclass(frozen=True)
class RunOptions:
    iterations: int = 100_000
    warmup: int = 10_000
    runs: int = 5
    size: int | None = None  # None: the workload's default (1 byte)
    placement: str | None = None  # one of PLACEMENTS, "cpus", or None for the workload's default
    cpus: tuple | None = None
    mode: str | None = None
    procs: bool = False
    fresh: bool = False
    containers: bool = False
    iqr: bool = False
    sample_hz: int = 0  # stack sampler of the tracer (flame graphs), 0 = off
    keep_raw: bool = False  # keep events.bin and iterations.bin once decoded into parquet
    ringbuf_mb: float = 0  # the tracer's ring buffer, 0 = the tracer's default
    calibrate: bool = False  # an untraced run beside the traced one: the probe effect
    inject_peer_spin: int | None = None  # ns; None = not injected (INJECT)
    inject_peer_syscalls: int | None = None
    inject_peer_sleep: int | None = None  # us
    inject_measuring_spin: int | None = None  # ns
    inject_every: int | None = None  # only every k-th message of each side gets it
    # rt-tests style (0: not given)
    priority: int = 0  # SCHED_FIFO priority of the workload's threads
    interval_us: int = 0  # a pause after each iteration
    duration_s: int = 0  # each run lasts this long (at most --iterations)
    break_at_us: int = 0  # the first iteration slower than this ends the measurement
    hist: bool = False  # a terminal histogram after the table

    def injections(self) -> dict[str, int]:
        """{driver option: value} of the --inject-* given (--inject-every only with a cost)."""
        given = {opt: getattr(self, f) for f, opt in INJECT.items() if getattr(self, f) is not None}
        return given if set(given) - {"--inject-every"} else {}

    def driver_args(self) -> list[str]:
        """The `ipcbench run` arguments that carry these options."""
        a = ["--iterations", str(self.iterations), "--warmup", str(self.warmup), "--runs", str(self.runs)]
        if self.size is not None:
            a += ["--size", str(self.size)]
        if self.placement == "cpus":
            a += ["--cpus", ",".join(map(str, self.cpus or ()))]
        elif self.placement:
            a.append("--" + self.placement)
        if self.mode:
            a += ["--mode", self.mode]
        a += [f"--{flag}" for flag in ("procs", "fresh", "containers") if getattr(self, flag)]
        for opt, value in (
            ("--priority", self.priority),
            ("--interval", self.interval_us),
            ("--duration", self.duration_s),
            ("--break-at", self.break_at_us),
        ):
            if value:
                a += [opt, str(value)]
        for opt, value in self.injections().items():
            a += [opt, str(value)]
        return a

    def params(self) -> dict[str, Any]:
        """The options as stored in summary.json's params."""
        p = dataclasses.asdict(self)
        p["size"] = self.size or 1
        p["cpus"] = list(self.cpus) if self.cpus else None
        for f in INJECT:  # the driver's params.inject records those given
            del p[f]
        return p


def number(what: str, lo: float, hi: float, unit: str, kind: str = "a number of") -> Callable[[str], float]:
    """argparse type: a decimal number in (lo, hi] of unit ("'x' is not KIND UNIT")."""

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind} {unit}") from None
        if not lo < x <= hi:
            raise argparse.ArgumentTypeError(f"{text}: {what} takes more than {lo:g} and at most {hi:g} {unit}")
        return x

    return parse


# argparse type: the tracer's ring buffer in MiB
ringbuf_size = number("the ring buffer", 0, 4096, "MiB", "a size in")


DEFAULT_ITERATIONS = 100_000
DURATION_ITERATIONS = 2_000_000  # --duration without --iterations: the arrays' room


def add_run_options(
    parser: argparse.ArgumentParser, out_help: str = "results directory (default results/WORKLOAD-YYYYmmdd-HHMMSS)"
) -> None:
    g = parser.add_argument_group("measurement")
    g.add_argument(
        "-n",
        "--iterations",
        type=count("iterations", 1, MAX_ITERATIONS),
        default=None,
        metavar="N",
        help=f"timed iterations per run (default {DEFAULT_ITERATIONS}; {DURATION_ITERATIONS:,} at most with --duration)",
    )
    g.add_argument(
        "-w",
        "--warmup",
        type=count("warm-up iterations", 0, MAX_ITERATIONS),
        default=10_000,
        metavar="N",
        help="untimed iterations before each run (default 10000)",
    )
    g.add_argument(
        "-r",
        "--runs",
        type=count("runs", 1, MAX_RUNS),
        default=5,
        metavar="R",
        help="repetitions; their spread gives the between-runs interval (default 5)",
    )
    g.add_argument(
        "-s", "--size", type=size, metavar="BYTES", help="bytes per message, K/M suffixes allowed (default 1)"
    )
    g.add_argument("--mode", metavar="M", help="workload variant (see ipctrace list)")
    g.add_argument("--procs", action="store_true", help="peer is a forked process instead of a thread")
    g.add_argument("--fresh", action="store_true", help="create the IPC object anew every iteration")
    g.add_argument("--containers", action="store_true", help="zmq-tcp-netns: run the peer in a podman container")
    r = parser.add_argument_group("as rt-tests does")
    r.add_argument(
        "--priority",
        type=count("priority", 1, 99),
        default=0,
        metavar="N",
        help="run the workload's threads under SCHED_FIFO priority N (root)",
    )
    r.add_argument(
        "--interval",
        type=count("us", 1, 10_000_000),
        default=0,
        metavar="US",
        help="pause US microseconds after each iteration (lets the CPUs go idle: wake-up from idle on purpose)",
    )
    r.add_argument(
        "-d",
        "--duration",
        type=count("seconds", 1, 86_400),
        default=0,
        metavar="S",
        help=f"each run lasts S seconds (at most --iterations; {DURATION_ITERATIONS:,} unless given)",
    )
    r.add_argument(
        "--break-at",
        type=count("us", 1, 10_000_000),
        default=0,
        metavar="US",
        help="stop at the first iteration slower than US microseconds, keep the trace, and explain that iteration",
    )
    r.add_argument("--hist", action="store_true", help="a histogram of the latencies after the table")
    p = parser.add_argument_group("placement (one of)").add_mutually_exclusive_group()
    p.add_argument("-C", "--cpus", type=cpu_list, metavar="A,B", help="pin measuring side to CPU A, peer to CPU B")
    p.add_argument("--same-cpu", action="store_true", help="both sides on one CPU")
    p.add_argument("--cross-cpu", action="store_true", help="the two sides on different CPUs")
    p.add_argument("--no-pin", action="store_true", help="leave placement to the scheduler")
    i = parser.add_argument_group("known costs, for validating the breakdown (workloads with the flag inject)")
    i.add_argument(
        "--inject-peer-spin",
        type=count("ns", 1, MAX_INJECT_NS),
        metavar="NS",
        help="the peer spins NS ns in user space after receiving, before replying",
    )
    i.add_argument(
        "--inject-peer-syscalls",
        type=count("system calls", 1, MAX_INJECT_SYSCALLS),
        metavar="N",
        help="the peer makes N null system calls (getppid) before replying",
    )
    i.add_argument(
        "--inject-peer-sleep",
        type=count("us", 1, MAX_INJECT_US),
        metavar="US",
        help="the peer sleeps US us (timer slack 1 ns) before replying",
    )
    i.add_argument(
        "--inject-measuring-spin",
        type=count("ns", 1, MAX_INJECT_NS),
        metavar="NS",
        help="the measuring side spins NS ns in user space after sending, before waiting",
    )
    i.add_argument(
        "--inject-every",
        type=count("messages", 1, MAX_INJECT_EVERY),
        metavar="K",
        help="only into every K-th message of each side (message m gets it when m mod K = K - 1, "
        "warm-up included): the injected iterations and their baseline in one run",
    )
    o = parser.add_argument_group("output")
    o.add_argument("-o", "--out", metavar="DIR", type=Path, help=out_help)
    o.add_argument(
        "--iqr",
        action="store_true",
        help="also give every figure after removing values outside 1.5 IQR (raw figures stay)",
    )
    o.add_argument("--no-trace", action="store_true", help="measure in user space only, without eBPF")
    add_tracer_options(o)
    twin = o.add_mutually_exclusive_group()
    twin.add_argument(
        "--calibrate",
        action="store_true",
        default=None,
        help="after the traced run, the same run untraced (in DIR/untraced): how much tracing "
        "slowed this workload, per metric (summary.json probe_effect, the table, the report); "
        "`run` does this by default, sweep and suite only when asked",
    )
    twin.add_argument(
        "--no-calibrate",
        dest="calibrate",
        action="store_false",
        help="no untraced twin: the figures stand without their probe effect",
    )
    o.add_argument("--json", action="store_true", help="print summary.json instead of the table")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def add_tracer_options(o: argparse._ActionsContainer) -> None:
    """The tracer's options that run, sweep, suite and trace share, into argument group o."""
    o.add_argument(
        "--keep-raw",
        action="store_true",
        help="keep the raw files once decoded into parquet: the tracer's events.bin (~37 B a record) and the "
        "driver's iterations.bin (40 B an iteration)",
    )
    o.add_argument(
        "--sample-hz",
        type=count("samples per second", 1, 100_000),
        default=0,
        metavar="N",
        help="also sample the workload's stacks N times a second per CPU, and its off-CPU stacks "
        "(on-CPU and off-CPU flame graphs in ipctrace report)",
    )
    o.add_argument(
        "--ringbuf-mb",
        type=ringbuf_size,
        default=0,
        metavar="MB",
        help="the tracer's ring buffer (default 64 MiB); events lost when it is full are "
        "counted and their iterations left out of the breakdown",
    )


def run_options(args: argparse.Namespace, calibrate_by_default: bool = False) -> RunOptions:
    """RunOptions from a namespace that add_run_options filled. calibrate_by_default: a traced
    run gets its untraced twin unless --no-calibrate (what `ipctrace run` does)."""
    placement = next((p for p in PLACEMENTS if getattr(args, p.replace("-", "_"))), None)
    if args.cpus:
        placement = "cpus"
    if placement == "cross-cpu" and len(online_cpus()) < 2:
        raise UsageError("--cross-cpu needs two online CPUs; this machine has one")
    if args.sample_hz and args.no_trace:
        raise UsageError("--sample-hz samples with the tracer; it cannot go with --no-trace")
    if args.ringbuf_mb and args.no_trace:
        raise UsageError("--ringbuf-mb sizes the tracer's buffer; it cannot go with --no-trace")
    if args.calibrate and args.no_trace:
        raise UsageError("--calibrate compares a traced run with an untraced one; it cannot go with --no-trace")
    calibrate = args.calibrate if args.calibrate is not None else calibrate_by_default and not args.no_trace
    iterations = args.iterations or (DURATION_ITERATIONS if args.duration else DEFAULT_ITERATIONS)
    if args.inject_every and not any(getattr(args, f) for f in INJECT if f != "inject_every"):
        raise UsageError("--inject-every needs one of the --inject-* costs")
    return RunOptions(
        iterations=iterations,
        warmup=args.warmup,
        runs=args.runs,
        size=args.size,
        placement=placement,
        cpus=args.cpus,
        mode=args.mode,
        procs=args.procs,
        fresh=args.fresh,
        containers=args.containers,
        iqr=args.iqr,
        sample_hz=args.sample_hz,
        keep_raw=args.keep_raw,
        ringbuf_mb=args.ringbuf_mb,
        calibrate=calibrate,
        priority=args.priority,
        interval_us=args.interval,
        duration_s=args.duration,
        break_at_us=args.break_at,
        hist=args.hist,
        **{f: getattr(args, f) for f in INJECT},
    )
