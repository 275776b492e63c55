"""`ipctrace explain DIR`: the causal chain of one iteration of a traced run, event by event.

Each line is one kernel event of the workload's threads, with its time since the
iteration started: who entered or left which syscall, who woke whom (the wake-up),
how long a woken thread waited for a CPU, interrupts and preemptions. Then the
critical path (who worked on the message when) and the component totals of
analysis/model/breakdown.py for that iteration.
"""

import argparse
import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.errors import UsageError
from analysis.model.explain import explain
from analysis.render.explain import render
from analysis.store.rundir import explain_inputs


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("explain", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", metavar="DIR", help="results directory of a traced run")
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--iteration", type=int, metavar="K", help="iteration K (0-based) of the repetition given by --repetition"
    )
    which.add_argument("--median", action="store_true", help="the iteration with the median latency (default)")
    which.add_argument("--p99", action="store_true", help="the iteration at the 99th percentile of latency")
    which.add_argument("--percentile", type=float, metavar="P", help="the iteration at the P-th percentile")
    which.add_argument("--max", action="store_true", help="the slowest iteration")
    which.add_argument("--slowest", type=int, metavar="N", help="the N slowest iterations, each explained")
    p.add_argument("--metric", metavar="M", help="metric to explain (default: the primary metric)")
    p.add_argument(
        "--repetition",
        "--run",  # the older name: a "run" is a results directory elsewhere (compare, collect)
        dest="run",
        type=int,
        metavar="R",
        help="which of the run's --runs repetitions, 0-based (default: all; 0 with --iteration)",
    )
    p.add_argument("--json", action="store_true", help="print the explanation as JSON (its fields, segments and sums)")


def run(args: argparse.Namespace) -> int:
    if args.slowest is not None and args.slowest < 1:
        raise UsageError("--slowest N: N is at least 1")
    if args.slowest:
        choices = [f"slowest:{k}" for k in range(1, args.slowest + 1)]
    elif args.max:
        choices = ["max"]
    elif args.percentile is not None:
        choices = [f"percentile:{args.percentile}"]
    else:
        choices = ["p99" if args.p99 else "median"]
    if os.path.lexists(os.path.join(args.dir, "merge.json")):
        return _explain_merged(args, choices)
    with explain_inputs(args.dir) as inputs:
        xs = [inputs.answer(explain(inputs, args.metric, args.run, args.iteration, which)) for which in choices]
    if args.json:
        docs = []
        for x in xs:
            doc = dataclasses.asdict(x)
            doc["chain"] = [{"at_ns": at, "who": who, "what": what} for at, who, what in x.chain]
            docs.append(doc)
        print(json.dumps(docs if args.slowest else docs[0], indent=1, default=_plain))
    else:
        print("\n\n".join(render(x) for x in xs))
    return 0


def _explain_merged(args: argparse.Namespace, choices: Sequence[str]) -> int:
    """A merged directory (ipctrace merge): its joined round trips, part by part across hosts."""
    from analysis.model.crosshost import explain_merged
    from analysis.render.crosshost import explain_text
    from analysis.store.rundir import read_merged

    doc, joined = read_merged(args.dir)
    xs = [explain_merged(doc, joined, str(Path(args.dir)), which, args.run, args.iteration) for which in choices]
    if args.json:
        print(json.dumps(xs if args.slowest else xs[0], indent=1))
    else:
        print("\n\n".join(explain_text(x) for x in xs))
    return 0


def _plain(v: Any) -> object:
    """numpy's numbers as JSON's."""
    return v.item() if hasattr(v, "item") else str(v)
