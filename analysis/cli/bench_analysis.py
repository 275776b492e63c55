"""ipctrace bench-analysis [--iterations N]: how long the analysis of a large traced run takes.

Writes a synthetic traced run of N ping-pong round trips on one CPU (12 kernel
records each: the two sides' write and read syscalls, both wake-ups, both
context switches; 1 M round trips give 12 M events), then analyses it in a
fresh process the way a run and its report do: statistics, decode events.bin,
the per-iteration breakdown (breakdown.parquet, summary) with events.parquet
written alongside (tracing.finish), heat maps, histograms with peaks and the
breakdown's folded stacks. Prints the time of each stage, the total and the peak memory (RSS) of
that process. Target: at most 10 s and 2 GB for 1 M iterations and 10 M events.
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analysis.errors import MeasureError
from analysis.run import bench_analysis
from analysis.run.options import count

TARGET_S = 10.0


TARGET_BYTES = 2 << 30


INTERNAL = True  # a developer benchmark (make bench): runnable, not listed among the commands


def register(sub):
    p = sub.add_parser(
        "bench-analysis",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--iterations",
        type=count("iterations", 1000, 20_000_000),
        default=1_000_000,
        metavar="N",
        help="round trips to synthesise (default 1000000, i.e. 12 M events)",
    )


def run(args):
    with tempfile.TemporaryDirectory(prefix="ipctrace-bench-analysis-") as tmp:
        out = Path(tmp)
        t = time.perf_counter()
        nev = bench_analysis.write_synthetic(out, args.iterations)
        print(f"synthesised {args.iterations:,} iterations and {nev:,} events in {time.perf_counter() - t:.1f} s")
        # A fresh process, so that its peak memory is the analysis' alone.
        p = subprocess.run(
            [
                sys.executable,
                "-c",
                "import json, sys; from analysis.run.bench_analysis import analyse; "
                "print(json.dumps(analyse(sys.argv[1])))",
                str(out),
            ],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            raise MeasureError(f"bench-analysis: the analysis failed: {last}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"  {'stage':<32} {'wall':>7} {'cpu':>7} {'peak RSS so far':>16}")
    for stage, (wall, cpu, rss) in r["times"].items():
        print(f"  {stage:<32} {wall:6.2f}s {cpu:6.2f}s {rss / 2**30:12.2f} GiB")
    total = sum(v[0] for k, v in r["times"].items() if k != "imports")
    total_cpu = sum(v[1] for k, v in r["times"].items() if k != "imports")
    peak = r["peak_rss_bytes"]
    ok = total <= TARGET_S and peak <= TARGET_BYTES
    print(
        f"analysis of {args.iterations:,} iterations / {nev:,} events: {total:.1f} s wall, {total_cpu:.1f} s CPU "
        f"(target <= {TARGET_S:g} s), peak memory {peak / 2**30:.2f} GiB (target <= 2 GiB): "
        f"{'within target' if ok else 'OVER TARGET'}; closure residual {r['closure_residual_pct']:.2f} %"
    )
    return 0 if ok else 1
