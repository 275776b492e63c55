"""`ipctrace validate`: known costs injected at known places of ipctrace's ping-pongs and
of a known-answer program, and whether the breakdown puts each where it belongs.

Each workload case runs a traced workload (the pipe, and across CPUs the socket workloads)
with one injection of the driver (`--inject-*`) into every other message (`--inject-every
2`), so that the injected iterations and their baseline alternate within one run and drift
between runs cancels; the CPU hog, a process of its own, alternates run by run with a run
without it. A verdict compares the change of the measured latency with the change of each
component: the component meant to carry the cost must move with the latency (within 10 %
of the change or 300 ns, whichever is larger) and no other may move by more than that. An
injection that overlaps the other side's wake-up must change neither.

The cross-CPU peer spin is judged by what carries it: `user` moves by the spin within 10 %
and at least 90 % of the injected iterations hold 90 % of it on their path; the latency is
shown, not judged, as the spin also changes how the waiting side is woken.

Each program case traces examples/known_pingpong (a program without ipctrace inside: a
ping-pong over a pipe, a UNIX stream socket, loopback TCP, eventfd or a futex, on one CPU
or two) as any program is traced, by `ipctrace trace --rtt` or `--markers`, its server
spinning 20 us before every other answer. It holds where the trace leaves on average at
most 1 % of a round trip in no known state (residual; the closure column) and `user` moves by
the spin within 10 % of it; the latency and the waits are shown, not judged.

The figure compared is the mean over the iterations at or below their run's 95th
percentile of latency: per iteration the components add up to the latency exactly, so
their means add up to the mean latency, and the trimmed tail keeps the rare interrupt
or scheduler outlier of one run from deciding a verdict. --quick runs a fifth of the
iterations (the hog's and the measuring spin's fewer still), the cross-CPU spin on the
socket workloads only, and the hog and three of the sixteen program cases in its first round only.
"""

import argparse
import json
import secrets
import shutil
import sys
import tempfile
from pathlib import Path

from analysis.errors import UsageError
from analysis.render.table import render
from analysis.run import runner
from analysis.run.validate import validate
from analysis.store import safeio


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("validate", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short runs, fewer program cases (under three minutes)")
    j = p.add_mutually_exclusive_group()
    # --json prints to stdout, as every command's --json does (the table then goes to stderr);
    # --json FILE, the older form, still writes FILE as --json-file FILE does
    j.add_argument(
        "--json",
        nargs="?",
        const="-",
        type=str,
        metavar="FILE",
        help="print the verdicts as JSON (the table to stderr)",
    )
    j.add_argument("--json-file", type=Path, metavar="FILE", help="also write the verdicts as JSON to FILE")
    p.add_argument(
        "--rounds",
        type=int,
        metavar="R",
        help="rounds (default 2); a round runs each case once, the overlapping one three times",
    )
    p.add_argument(
        "--scale", type=int, metavar="K", help="K times each case's iterations (default 1 with --quick, else 5)"
    )
    p.add_argument("--out", type=Path, metavar="DIR", help="keep the runs in DIR (new or empty)")


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:+.2f}"


def run(args: argparse.Namespace) -> int:
    if args.rounds is not None and args.rounds < 1:
        raise UsageError("--rounds must be at least 1")
    if args.scale is not None and args.scale < 1:
        raise UsageError("--scale must be at least 1")
    # Locked against another run while we use it; each run below makes its directory in it.
    if args.out:
        rd = runner.open_outdir(args.out)
    else:
        rd = runner.open_outdir(Path(tempfile.gettempdir()) / f"ipctrace-validate-{secrets.token_hex(6)}", fresh=True)
    try:
        verdicts = validate(rd.shown, args.quick, args.rounds, args.scale)
    finally:
        rd.close()
        if not args.out:
            shutil.rmtree(rd.shown, ignore_errors=True)
    rows = []
    for v in verdicts:
        expected = v.expected_component
        carried = sum(v.component_deltas_ns[c] for c in expected.split("+")) if expected != "none" else None
        others = {c: d for c, d in v.component_deltas_ns.items() if c not in expected.split("+")}
        worst = max(others, key=lambda c: abs(others[c]))
        rows.append(
            [
                v.name,
                _us(v.injected_ns),
                _us(v.latency_delta_ns),
                expected,
                _us(carried),
                f"{worst} {_us(others[worst])}",
                f"{v.tolerance_ns / 1000:.2f}",
                "-" if v.closure_pct is None else f"{v.closure_pct:.2f} %",
                "holds" if v.holds else "FAILS: " + v.why,
            ]
        )
    print(
        "known costs injected into the ping-pongs (us; trimmed means of the injected iterations "
        "against their baseline; closure: the most, over the runs, of an iteration's latency in no known state on average):"
    )
    to_stdout = args.json == "-"
    text = sys.stderr if to_stdout else sys.stdout
    for line in render(
        rows,
        ["case", "injected", "latency", "meant for", "its change", "largest other", "tolerance", "closure", "verdict"],
        left=1,
    ):
        print(line, file=text)
    json_file = args.json_file or (Path(args.json) if args.json and not to_stdout else None)
    if args.json or json_file:
        doc = {
            "cases": [
                {
                    "name": v.name,
                    "injected_ns": v.injected_ns,
                    "latency_delta_ns": v.latency_delta_ns,
                    "component_deltas_ns": v.component_deltas_ns,
                    "expected_component": v.expected_component,
                    "tolerance_ns": v.tolerance_ns,
                    "holds": v.holds,
                    "why": v.why,
                    "closure_pct": v.closure_pct,
                }
                for v in verdicts
            ]
        }
        if to_stdout:
            print(json.dumps(doc, indent=1))
        else:
            assert json_file is not None  # --json FILE, or --json-file
            try:
                safeio.write_json(json_file, doc)
            except OSError as e:
                raise UsageError(f"cannot write {json_file}: {safeio.why(e)}") from None
    held = sum(v.holds for v in verdicts)
    print(f"{held} of {len(verdicts)} injections found where they belong", file=text)
    return 0 if held == len(verdicts) else 1
