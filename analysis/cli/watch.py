"""ipctrace watch [--rtt | --markers [BIN] | --iteration-func BIN:FUNC] (-p PID[,PID] | -- CMD)
[--slower-than DUR | --slowest N/min] [--keep DIR] [--max-disk SIZE] [--keep-cpu PCT] [--otlp URL]
[--duration S]:
trace a program continuously, analyse its requests as they come, and keep each slow one
explained: a results directory that explain, report and collect take (--keep DIR, with a
summary row a minute per metric in DIR's Parquet dataset), and an OpenTelemetry trace whose
child spans are its critical path (--otlp URL, OTLP/HTTP protobuf)."""

import argparse
import re
from pathlib import Path

from analysis.errors import UsageError
from analysis.run.options import number


def _duration(text: str) -> int:
    """'1ms', '250us', '2s', '1500ns' -> ns."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|ms|us|ns)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 1ms, 250us, 2s)")
    return int(float(m.group(1)) * {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1}[m.group(2)])


def _per_minute(text: str) -> int:
    """'N/min' or 'N' -> N."""
    m = re.fullmatch(r"\s*([0-9]+)\s*(/\s*min)?\s*", text)
    if not m or int(m.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give N/min, N at least 1 (e.g. 10/min)")
    return int(m.group(1))


def _bytes(text: str) -> int:
    """'500M', '2G', '100k', or bytes -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)i?[bB]?\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 500M, 2G)")
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " "))


def register(sub: argparse._SubParsersAction) -> None:
    from analysis.cli.trace import _pids

    p = sub.add_parser(
        "watch",
        help="trace a service continuously; keep each slow request explained (--keep DIR) and send it as an "
        "OpenTelemetry trace (--otlp URL)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w = p.add_argument_group("what to watch (a command, or running processes)")
    w.add_argument("-p", "--pid", type=_pids, default=[], metavar="PID[,PID...]", help="running processes")
    w.add_argument(
        "-d",
        "--duration",
        type=number("--duration", 0, 31 * 86_400, "seconds"),
        default=0,
        metavar="S",
        help="stop after S seconds (a command gets SIGINT); by default until it ends or Ctrl-C",
    )
    i = p.add_argument_group("requests (one of; --rtt by default)").add_mutually_exclusive_group()
    i.add_argument("--rtt", action="store_true", help="round trips from the system calls (the default)")
    i.add_argument("--markers", nargs="?", const="", metavar="BINARY", help="the program's USDT markers")
    i.add_argument(
        "--iteration-func", action="append", default=[], metavar="BINARY:FUNCTION", help="each call is a request"
    )
    s = p.add_argument_group("which requests are kept (one of)").add_mutually_exclusive_group()
    s.add_argument("--slower-than", type=_duration, metavar="DUR", help="those slower than DUR (1ms, 250us)")
    s.add_argument(
        "--slowest", type=_per_minute, metavar="N/min", help="the N slowest of each minute (10/min by default)"
    )
    o = p.add_argument_group("where they go")
    o.add_argument(
        "--keep",
        metavar="DIR",
        help="DIR/requests/*: a results directory per request, written raw at once and whole as --keep-cpu "
        "allows (explain, report, collect take them, writing a raw one whole first); "
        "DIR/minutes/: a summary row a minute per metric (Parquet, the layout of collect --into DIR/)",
    )
    o.add_argument("--max-disk", type=_bytes, metavar="SIZE", help="kept requests within SIZE (500M): the oldest go")
    o.add_argument("--otlp", metavar="URL", help="send each as an OpenTelemetry trace, OTLP/HTTP (http://host:4318)")
    o.add_argument(
        "--keep-cpu",
        type=number("--keep-cpu", 0, 100, "percent"),
        metavar="PCT",
        help="while the program runs, writing kept requests takes at most PCT %% of one CPU (10 by default; 100: "
        "no bound): each is written raw first, whole as this allows; those it cannot write even raw are "
        "counted as not kept",
    )
    o.add_argument("-q", "--quiet", action="store_true", help="no line at the start")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the program to start and watch")


def run(args: argparse.Namespace) -> int:
    import sys

    from analysis.cli.trace import command_of
    from analysis.run import trace, watch

    command = command_of(args, "watch")
    if not command and not args.pid:
        raise UsageError("watch: name what to watch: -- CMD ARGS or --pid PID")
    if args.max_disk and not args.keep:
        raise UsageError("watch --max-disk bounds what --keep DIR keeps: give --keep DIR with it")
    if args.keep_cpu is not None and not args.keep:
        raise UsageError("watch --keep-cpu bounds the writing of what --keep DIR keeps: give --keep DIR with it")
    if not args.keep and not args.otlp:
        print("ipctrace watch: neither --keep DIR nor --otlp URL: only the last line tells", file=sys.stderr)
    if args.otlp and not re.match(r"https?://", args.otlp):
        raise UsageError(f"watch --otlp {args.otlp}: give an http:// or https:// URL (http://127.0.0.1:4318)")
    how = "markers" if args.markers is not None else "function" if args.iteration_func else "rtt"
    target = trace.Target(
        command=command,
        pids=args.pid,
        comms=[],
        duration_s=args.duration,
        iterations_from=how,
        marker_binaries=[args.markers] if args.markers else [],
        functions=args.iteration_func,
    )
    opts = watch.Options(
        slower_than_ns=args.slower_than or 0,
        slowest_per_min=args.slowest or (0 if args.slower_than else watch.DEFAULT_SLOWEST),
        keep=Path(args.keep).expanduser() if args.keep else None,
        max_disk=args.max_disk or 0,
        otlp=args.otlp,
        quiet=args.quiet,
        keep_cpu=(args.keep_cpu if args.keep_cpu is not None else watch.KEEPER_CPU_PERCENT) / 100,
    )
    return watch.watch(target, opts, sys.stdout.fileno())
