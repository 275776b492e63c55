"""`ipctrace bench-workloads`: is our pipe round trip the one perf measures?

Runs `ipcbench run pipe` (untraced) and `perf bench sched pipe` with the same
CPU placement, interleaved round by round so that both see the same machine,
and prints the ratio of their mean round trips (target 0.85-1.15).

perf bench sends an int (4 bytes) each way and reports total time / loops as
usecs/op, the mean round trip; ipcbench runs with --size 4 and its mean rtt is
compared. perf cannot pin its two processes apart, only confine both with
taskset, so each placement gives both tools the same affinity mask:
  same-cpu   both tools under taskset -c A (ipcbench --cpus A,A)
  two-cpus   both tools under taskset -c A,B, free to move (ipcbench --no-pin)
and ipcbench's own cross-cpu placement (peer pinned to B) is shown beside them
for reference, without a perf counterpart.
"""

import argparse
import os
import shutil
import statistics
import time

from analysis import DRIVER
from analysis.errors import UsageError
from analysis.render.table import render
from analysis.run import bench_workloads


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench-workloads",
        description="Run the pipe workload and 'perf bench sched pipe' with the same CPU placement, "
        "interleaved, and print the ratio of their mean round trips (target 0.85-1.15).",
    )
    p.add_argument(
        "--iterations",
        type=_positive,
        default=40000,
        metavar="N",
        help="round trips per run, for both tools (default 40000: perf's fork and exit, "
        "inside its total, stay below 1 %%)",
    )
    p.add_argument(
        "--rounds", type=_positive, default=11, metavar="R", help="interleaved rounds per placement (default 11)"
    )


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= n <= 10_000_000:
        raise argparse.ArgumentTypeError(f"{text} is outside 1..10000000")
    return n


def run(args: argparse.Namespace) -> int:
    if not DRIVER.exists():
        raise UsageError(f"the workload driver {DRIVER} is not built; run 'make'")
    perf = shutil.which("perf")
    if not perf:
        raise UsageError("perf is not installed (apt-get install linux-perf)")
    cpus = sorted(os.sched_getaffinity(0))
    a, b = cpus[0], cpus[1] if len(cpus) > 1 else None
    placements = [("same-cpu", [a], ["--cpus", f"{a},{a}"])]
    if b is not None:
        placements.append(("two-cpus", [a, b], ["--no-pin"]))
        placements.append(("cross-cpu", [a, b], ["--cpus", f"{a},{b}"]))

    ours: dict[str, list[float]] = {name: [] for name, _, _ in placements}
    theirs: dict[str, list[float]] = {name: [] for name, _, _ in placements}
    started = time.monotonic()
    for rnd in range(args.rounds):
        for name, mask, driver_args in placements:
            # alternate who goes first, so a drift in machine load favours neither
            ipcbench_first = rnd % 2 == 0 or name == "cross-cpu"
            # the pinned cross-cpu reference is ten times slower here: fewer round trips
            n = args.iterations if name != "cross-cpu" else max(1, args.iterations // 5)
            if ipcbench_first:
                ours[name].append(bench_workloads.ipcbench_mean_ns(mask, driver_args, n))
            if name != "cross-cpu":
                theirs[name].append(bench_workloads.perf_mean_ns(perf, mask, n))
            if not ipcbench_first:
                ours[name].append(bench_workloads.ipcbench_mean_ns(mask, driver_args, n))

    rows, verdicts = [], []
    for name, mask, _ in placements:
        if theirs[name]:
            # one ratio per round from back-to-back runs; their median resists load bursts
            ratios = [o / t for o, t in zip(ours[name], theirs[name])]
            ratio = statistics.median(ratios)
            inside = bench_workloads.TARGET[0] <= ratio <= bench_workloads.TARGET[1]
            verdicts.append(inside)
            rows.append(
                [
                    name,
                    ",".join(map(str, mask)),
                    f"{statistics.median(ours[name]) / 1000:.2f}",
                    f"{statistics.median(theirs[name]) / 1000:.2f}",
                    f"{ratio:.3f}",
                    f"{min(ratios):.2f}-{max(ratios):.2f}",
                    "yes" if inside else "NO",
                ]
            )
        else:
            rows.append(
                [name + " (pinned)", f"{a}/{b}", f"{statistics.median(ours[name]) / 1000:.2f}", "-", "-", "-", "-"]
            )
    print(
        f"pipe round trip, {bench_workloads.MESSAGE_BYTES}-byte messages, {args.iterations} round trips per run "
        f"({max(1, args.iterations // 5)} pinned cross-cpu), "
        f"{args.rounds} interleaved rounds ({time.monotonic() - started:.0f} s)"
    )
    for line in render(
        rows,
        [
            "placement",
            "CPUs",
            "ipcbench mean (us)",
            "perf bench (us/op)",
            "ratio",
            "round ratios",
            f"in {bench_workloads.TARGET[0]}-{bench_workloads.TARGET[1]}",
        ],
    ):
        print(line)
    print(
        "means are medians over rounds; ratio = median over rounds of ipcbench mean rtt / perf usecs/op "
        "from back-to-back runs.\ntwo-cpus lets both tools' processes move between the CPUs; "
        "cross-cpu pins ipcbench's peer apart, which perf cannot do"
    )
    print(f"bench-workloads: {sum(verdicts)}/{len(verdicts)} placements within target")
    return 0
