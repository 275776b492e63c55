"""ipctrace trace [options] -- CMD ARGS... | --pid PID[,PID...] | --comm NAME | -a: trace a program
ipctrace did not write. Its iterations come from its markers (--markers, the USDT probes of
examples/ipctrace_marker.h), from a function's calls (--iteration-func BINARY:FUNCTION), or from
its request/response system calls (--rtt); then it has what a workload run has: the table,
the breakdown, explain, report, export and compare. Without them: the whole trace per thread."""

import argparse
import sys
from pathlib import Path

from analysis.errors import Interrupted, UsageError
from analysis.run import trace
from analysis.run.options import add_tracer_options, number


def _pids(text: str) -> list[int]:
    try:
        pids = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of pids (PID[,PID...])") from None
    if not pids or any(p <= 0 for p in pids):
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of pids (PID[,PID...])")
    return pids


def _cpus(text: str) -> list[int]:
    from analysis.run.options import format_cpus, online_cpus

    parts = [x.strip() for x in text.split(",")]
    if not parts or not all(x.isdigit() for x in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: give CPU numbers, as A,B")
    online = online_cpus()
    for c in map(int, parts):
        if c not in online:
            raise argparse.ArgumentTypeError(f"CPU {c} is not online (online: {format_cpus(online)})")
    return sorted(set(map(int, parts)))


def _syscalls(text: str, arch: str | None = None) -> dict[int, str]:
    """--syscalls LIST: names or numbers of this machine's (arch's) system calls -> {nr: name}.
    A call of another architecture only (pipe, open, fork, poll on aarch64) is refused by name."""
    import difflib
    import platform

    from analysis.store.syscalls import NAMES, missing

    arch = arch or platform.machine()
    table = NAMES.get(arch, NAMES["x86_64"])
    by_name = {name: nr for nr, name in table.items()}
    got = {}
    for item in (x.strip() for x in text.split(",")):
        if item.isdigit():
            if int(item) not in table:
                raise argparse.ArgumentTypeError(f"{arch} has no system call number {item}")
            got[int(item)] = table[int(item)]
        elif item in by_name:
            got[by_name[item]] = item
        elif why := missing(arch, item):
            raise argparse.ArgumentTypeError(why)
        else:
            near = difflib.get_close_matches(item, by_name, n=1)
            hint = f" (did you mean {near[0]}?)" if near else " (give names such as read,write or numbers)"
            raise argparse.ArgumentTypeError(f"{item!r} is not a system call on {arch}{hint}")
    return dict(sorted(got.items()))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "trace",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w = p.add_argument_group("what to trace (a command, running processes, or both)")
    w.add_argument(
        "-p", "--pid", type=_pids, default=[], metavar="PID[,PID...]", help="running processes and their threads"
    )
    w.add_argument(
        "--comm", action="append", default=[], metavar="NAME", help="processes of this name, also as they start"
    )
    w.add_argument(
        "-d",
        "--duration",
        type=number("--duration", 0, 86_400, "seconds"),
        default=0,
        metavar="S",
        help="stop after S seconds (a command gets SIGINT)",
    )
    w.add_argument(
        "--messages",
        action="store_true",
        help="also record what each write/sendto/read/recvfrom carries (a hash of its first 64 bytes, its length): "
        "the traces of two hosts are then joined by ipctrace merge",
    )
    w.add_argument(
        "-C",
        "--cpus",
        type=_cpus,
        metavar="A[,B...]",
        help="run CMD (and the calibration before it) on these CPUs only, as taskset -c does",
    )
    w.add_argument(
        "-a",
        "--all-cpus",
        action="store_true",
        help="every task on the machine, as perf trace -a does (the whole-trace view; not the tracer's own): "
        "while -- CMD runs, or for --duration S",
    )
    w.add_argument(
        "-e",
        "--syscalls",
        type=_syscalls,
        default={},
        metavar="LIST",
        help="record only these system calls (names or numbers, as perf trace -e read,write or strace -e "
        "trace=read,write): the whole-trace view; the time in the others counts as user time",
    )
    w.add_argument(
        "-t",
        "--tid",
        type=_pids,
        default=[],
        metavar="TID[,TID...]",
        help="only these threads' iterations (the others' events stay: they may be on the critical path)",
    )
    w.add_argument(
        "--measure",
        type=_pids,
        default=[],
        metavar="PID[,PID...]",
        help="--rtt: these processes ask, the others answer (by default, of two that answer each other, the one "
        "started in the trace, else the one named by --pid, else the parent, else the older)",
    )
    i = p.add_argument_group("iterations (one of)").add_mutually_exclusive_group()
    i.add_argument(
        "--rtt",
        action="store_true",
        help="round trips from the system calls: a thread's send to the receive that brings the answer",
    )
    i.add_argument(
        "--markers",
        nargs="?",
        const="",
        metavar="BINARY",
        help="the program's ipctrace:iteration_begin/end USDT markers (in CMD's binary unless BINARY is named)",
    )
    i.add_argument(
        "--iteration-func",
        action="append",
        default=[],
        metavar="BINARY:FUNCTION",
        help="each call of FUNCTION in BINARY (an executable or a shared library) is an iteration",
    )
    # The name it had: --iteration is an iteration's index everywhere else (explain --iteration K).
    i.add_argument("--iteration", dest="iteration_old", action="append", default=[], help=argparse.SUPPRESS)
    o = p.add_argument_group("output")
    o.add_argument("-o", "--out", metavar="DIR", help="results directory (default results/trace-NAME-YYYYmmdd-HHMMSS)")
    o.add_argument("--json", action="store_true", help="print summary.json instead of the table")
    o.add_argument("--hist", action="store_true", help="a histogram of each metric's latencies after the table")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_tracer_options(o)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the program to start and trace")


def command_of(args: argparse.Namespace, name: str) -> list[str]:
    """The program after `--` (REMAINDER keeps the `--`); an option left there was not ours."""
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if command and command[0].startswith("-"):
        raise UsageError(f"{name}: unrecognized arguments: {' '.join(command)}")
    return command


def run(args: argparse.Namespace) -> int:
    from analysis.cli.main import show_summary

    command = command_of(args, "trace")
    if not command and not args.pid and not args.comm and not args.all_cpus:
        raise UsageError("trace: name what to trace: -- CMD ARGS, --pid PID, --comm NAME or --all-cpus")
    if args.tid and not (args.rtt or args.markers is not None or args.iteration_func or args.iteration_old):
        raise UsageError("trace --tid picks iterations: give --rtt, --markers or --iteration-func with it")
    if args.measure and not args.rtt:
        raise UsageError("trace --measure chooses the side that asks a round trip: give --rtt with it")
    iterations = args.rtt or args.markers is not None or args.iteration_func or args.iteration_old
    if args.all_cpus and iterations:
        raise UsageError(
            "trace --all-cpus is the whole-trace view of every task: no --rtt, --markers or --iteration-func with it"
        )
    if args.syscalls and iterations:
        raise UsageError(
            "trace --syscalls filters the whole-trace view: an iteration's breakdown needs every system call "
            "(leave out --rtt, --markers or --iteration-func, or --syscalls)"
        )
    if args.all_cpus and (args.pid or args.comm):
        raise UsageError("trace --all-cpus follows every task: no --pid or --comm with it")
    if args.all_cpus and not command and not args.duration:
        raise UsageError("trace --all-cpus alone needs --duration S (or -- CMD: until it ends)")
    if args.cpus and not command:
        raise UsageError(
            "trace --cpus places a command it starts: give -- CMD ARGS (running processes stay where they are)"
        )
    if args.comm and not args.duration and not command and not args.pid:
        raise UsageError("trace --comm alone needs --duration S (nothing ends the trace otherwise)")
    for c in args.comm:
        if not c or len(c) > 15:
            raise UsageError(f"trace --comm {c!r}: a command name has 1 to 15 characters")
    if args.iteration_old:
        print("ipctrace trace: --iteration BINARY:FUNCTION is now --iteration-func", file=sys.stderr)
        args.iteration_func += args.iteration_old
    if args.markers is not None:
        how = "markers"
    elif args.iteration_func:
        how = "function"
    elif args.rtt:
        how = "rtt"
    else:
        how = None
    target = trace.Target(
        command=command,
        pids=args.pid,
        comms=args.comm,
        duration_s=args.duration,
        iterations_from=how,
        marker_binaries=[args.markers] if args.markers else [],
        functions=args.iteration_func,
        messages=args.messages,
        cpus=args.cpus or [],
        tids=args.tid,
        measure=args.measure,
        all_cpus=args.all_cpus,
        syscalls=args.syscalls,
    )
    # With --json the program's own output goes to stderr: stdout is the summary's.
    stdout_fd = sys.stderr.fileno() if args.json else sys.stdout.fileno()
    out = Path(args.out).expanduser() if args.out else None
    try:
        resdir = trace.trace_program(
            target,
            out,
            args.quiet,
            stdout_fd,
            ringbuf_mb=args.ringbuf_mb,
            sample_hz=args.sample_hz,
            keep_raw=args.keep_raw,
            live_line=not args.json,
        )
    except Interrupted as e:
        if e.resdir:
            show_summary(e.resdir, args.json)
        raise
    show_summary(resdir, args.json)
    if args.hist and not args.json:
        _hist(resdir)
    return 0


def _hist(resdir: Path | str) -> None:
    """--hist: as run --hist draws it, for each metric the trace found iterations of."""
    from analysis.render.table import hist_lines
    from analysis.store.results import read_iterations

    if not (Path(resdir) / "iterations.parquet").exists():
        print("\n--hist: the trace has no iterations (give --rtt, --markers or --iteration-func)")
        return
    iters = read_iterations(resdir)
    for metric, group in iters.groupby(iters["metric"].astype(str), sort=False, observed=True):
        print()
        print("\n".join(hist_lines(group["latency_ns"].to_numpy(), f"{metric} latency (ns)")))
