"""`ipctrace explain DIR`: the causal chain of one iteration of a traced run, event by event.

Each line is one kernel event of the workload's threads, with its time since the
iteration started: who entered or left which syscall, who woke whom (the wake-up),
how long a woken thread waited for a CPU, interrupts and preemptions. Then the
critical path (who worked on the message when) and the component totals of
analysis/model/breakdown.py for that iteration.
"""

import dataclasses
import json

from analysis.model.explain import explain
from analysis.render.explain import render


def register(subparsers):
    p = subparsers.add_parser(
        "explain", help="the causal chain of one iteration of a traced run", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("dir", metavar="DIR", help="results directory of a traced run")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--iteration", type=int, metavar="K", help="iteration K (0-based) of the run given by --run")
    which.add_argument("--median", action="store_true", help="the iteration with the median latency (default)")
    which.add_argument("--p99", action="store_true", help="the iteration at the 99th percentile of latency")
    p.add_argument("--metric", metavar="M", help="metric to explain (default: the primary metric)")
    p.add_argument("--run", type=int, metavar="R", help="run index (default: all runs; 0 with --iteration)")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON (its fields, segments and sums)")


def run(args):
    which = "p99" if args.p99 else "median"
    x = explain(args.dir, args.metric, args.run, args.iteration, which)
    if args.json:
        doc = dataclasses.asdict(x)
        doc["chain"] = [{"at_ns": at, "who": who, "what": what} for at, who, what in x.chain]
        print(json.dumps(doc, indent=1, default=_plain))
    else:
        print(render(x))
    return 0


def _plain(v):
    """numpy's numbers as JSON's."""
    return v.item() if hasattr(v, "item") else str(v)
