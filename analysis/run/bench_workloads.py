"""The measuring side of `ipctrace bench-workloads`: the mean round trip of ipcbench's pipe and
of `perf bench sched pipe` on the same CPUs (analysis/cli/bench_workloads.py divides them)."""

import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Sequence

from analysis import DRIVER
from analysis.errors import Interrupted, MeasureError, UsageError
from analysis.store.results import read_iterations_bin, read_json

TARGET = (0.85, 1.15)


MESSAGE_BYTES = 4  # perf bench sched pipe writes one int each way


USECS_PER_OP = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s+usecs/op")


def ipcbench_mean_ns(mask: Iterable[int], driver_args: Sequence[str], iterations: int) -> float:
    with tempfile.TemporaryDirectory(prefix="ipctrace-bench-") as tmp:
        out = os.path.join(tmp, "r")
        cmd = [
            "taskset",
            "-c",
            ",".join(map(str, mask)),
            str(DRIVER),
            "run",
            "pipe",
            "--out",
            out,
            "--iterations",
            str(iterations),
            "--warmup",
            str(max(1, iterations // 10)),
            "--runs",
            "1",
            "--size",
            str(MESSAGE_BYTES),
            *driver_args,
        ]
        p = _run(cmd)
        if p.returncode:
            raise MeasureError(f"ipcbench run pipe failed (exit {p.returncode}): {_last_line(p.stderr)}")
        meta = read_json(os.path.join(out, "workload.json"))
        df, _ = read_iterations_bin(os.path.join(out, "iterations.bin"), meta["metrics"])
        rtt = df.loc[df["metric"] == "rtt", "latency_ns"]
        if len(rtt) != iterations:
            raise MeasureError(f"ipcbench run pipe recorded {len(rtt)} of {iterations} round trips")
        return float(rtt.mean())


def perf_mean_ns(perf: str, mask: Iterable[int], iterations: int) -> float:
    cmd = ["taskset", "-c", ",".join(map(str, mask)), perf, "bench", "sched", "pipe", "-l", str(iterations)]
    p = _run(cmd)
    m = USECS_PER_OP.search(p.stdout)
    if p.returncode or not m:
        raise MeasureError(
            f"perf bench sched pipe failed (exit {p.returncode}): {_last_line(p.stderr) or _last_line(p.stdout)}"
        )
    return float(m.group(1)) * 1000.0


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run cmd to completion; Ctrl-C reaches it through the process group and ends us too."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError as e:
        raise UsageError(f"cannot run {cmd[0]}: {e.strerror}") from None
    except KeyboardInterrupt:
        raise Interrupted(signal.SIGINT) from None


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""
