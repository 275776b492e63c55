"""Shared helpers: run the front end as a user would, and build results directories."""

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

HOME = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HOME))

from analysis import DRIVER, LOADER  # noqa: E402  (the build in use: IPCTRACE_OUTPUT)
from analysis.store.results import ITER_HEADER, ITER_MAGIC, ITER_REC  # noqa: E402

# The one set of markers for what a test needs; the programs are those of the build in use.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
needs_driver = pytest.mark.skipif(not DRIVER.exists(), reason=f"{DRIVER} is not built: run 'make'")
needs_loader = pytest.mark.skipif(not LOADER.exists(), reason=f"{LOADER} is not built: run 'make'")
needs_tracing = pytest.mark.skipif(
    os.geteuid() != 0 or not LOADER.exists(), reason=f"tracing needs root and {LOADER} (run 'make')"
)


def cli_env():
    env = dict(os.environ, IPCTRACE_HOME=str(HOME), PYTHONPATH=str(HOME))
    env.pop("IPCTRACE_DEBUG", None)
    # `sudo make test`: the tests run as root; those about sudo set these themselves.
    for k in ("SUDO_UID", "SUDO_GID", "SUDO_USER"):
        env.pop(k, None)
    return env


def run_cli(args):
    """cli.main in this process (the commands' imports paid once): (exit, stdout, stderr)."""
    from analysis.cli import main as cli

    out, err = io.StringIO(), io.StringIO()
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main([str(a) for a in args])
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    return rc, out.getvalue(), err.getvalue()


def cli_argv(*args):
    """The argv of `python -m analysis ARGS`: what the launcher execs."""
    return [sys.executable, "-m", "analysis", *map(str, args)]


def spawn(argv, env=None, cwd=HOME, **kw):
    """subprocess.Popen(argv) with stdout and stderr piped as text, in the front end's
    environment (cli_env) unless env is given, from the checkout unless cwd is."""
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or cli_env(), cwd=cwd, **kw
    )


def run_argv(workload, out, *opts, iterations=3000, warmup=300):
    """The argv of `ipctrace run WORKLOAD`: one quiet run of `iterations` into out, opts added."""
    return cli_argv(
        "run", workload, "--iterations", iterations, "--warmup", warmup, "--runs", 1, "--quiet", "--out", out, *opts
    )


def traced_pipe(out, *opts, wrap=()):
    """`ipctrace run pipe` traced, one run of 20 000 iterations into out (opts added; wrap: a
    command it runs under, e.g. perf record); fails the test if it fails."""
    argv = cli_argv("run", "pipe", "--iterations", 20000, "--warmup", 2000, "--runs", 1, "--quiet", "--out", out)
    r = subprocess.run([*wrap, *argv, *opts], capture_output=True, text=True, timeout=600, env=cli_env(), cwd=HOME)
    assert r.returncode == 0, r.stderr


@pytest.fixture
def ipctrace(tmp_path):
    """ipctrace(*args) runs `python -m analysis ARGS` (what the launcher execs) in tmp_path."""

    def run(*args, timeout=300, cwd=None, **kw):
        return subprocess.run(
            cli_argv(*args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd or tmp_path,
            env=cli_env(),
            **kw,
        )

    return run


def write_iterfile(path, recs, nmetrics, count=None, tail=b"", magic=ITER_MAGIC, version=1):
    """An iterations.bin holding recs (dicts of ITER_REC fields); count overrides the header's."""
    h = np.zeros(1, ITER_HEADER)
    h["magic"], h["version"], h["rec_size"] = magic, version, ITER_REC.itemsize
    h["count"] = len(recs) if count is None else count
    h["nmetrics"] = nmetrics
    body = np.zeros(len(recs), ITER_REC)
    for i, r in enumerate(recs):
        for k, v in r.items():
            body[i][k] = v
    Path(path).write_bytes(h.tobytes() + body.tobytes() + tail)


def make_iterations(latencies, metric="rtt", metrics=("rtt",), runs=1):
    """An iterations DataFrame as results.read_iterations_bin returns it."""
    import pandas as pd

    lat = np.asarray(latencies, dtype=np.int64)
    n = len(lat)
    run = np.repeat(np.arange(runs), -(-n // runs))[:n].astype(np.int32)
    start = np.cumsum(np.concatenate(([1000], lat[:-1] + 10))).astype(np.int64)
    return pd.DataFrame(
        {
            "run": run,
            "iteration": np.arange(n, dtype=np.int64),
            "seq": np.arange(n, dtype=np.int64),
            "metric": pd.Categorical([metric] * n, categories=list(metrics)),
            "t_start_ns": start,
            "t_end_ns": start + lat,
            "latency_ns": lat,
            "cpu": np.zeros(n, np.int16),
            "tid": np.full(n, 42, np.int32),
        }
    )


@pytest.fixture
def make_results(tmp_path):
    """make_results(name, latencies, ...) -> a finished results directory built without the driver."""
    from analysis.model import summary
    from analysis.store.host import host_info
    from analysis.store.jsonfiles import Workload
    from analysis.store.results import write_iterations, write_json

    def make(name, latencies, runs=1, derived=None, iqr=False, schema_version=None):
        d = tmp_path / name
        d.mkdir()
        iters = make_iterations(latencies, runs=runs)
        wl = {
            "workload": "pipe",
            "metrics": ["rtt"],
            "primary_metric": "rtt",
            "placement": "cross-cpu",
            "threads": [],
            "runs_completed": runs,
            "iterations_completed": len(latencies),
        }
        s = summary.build(
            Workload.from_json(wl),
            iters,
            derived or {},
            {"iterations": len(latencies) // runs, "runs": runs},
            "complete",
            [],
            iqr,
            host_info(),
        ).to_json()
        if schema_version is not None:
            s["schema_version"] = schema_version
        write_iterations(d / "iterations.parquet", iters)
        write_json(d / "summary.json", s)
        write_json(d / "workload.json", wl)
        return d

    return make


def read_json(path):
    return json.loads(Path(path).read_text())


def orphaned_programs(prefixes, grace=5.0):
    """BPF programs named with one of prefixes that no live process holds, after the grace
    period in which the kernel frees a program whose last fd closed: what a run left behind.
    A program some process holds belongs to that process (another run on this machine)."""
    import subprocess
    import time

    def held():
        ids = set()
        for fdinfo in Path("/proc").glob("[0-9]*/fdinfo/*"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                ids.update(
                    int(line.split()[1]) for line in fdinfo.read_text().splitlines() if line.startswith("prog_id:")
                )
        return ids

    def orphans():
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
        named = {
            p["id"]: p.get("name", "")
            for p in json.loads(out or "[]")
            if str(p.get("name", "")).startswith(tuple(prefixes))
        }
        return {i: n for i, n in named.items() if i not in held()}

    end = time.monotonic() + grace
    while (left := orphans()) and time.monotonic() < end:
        time.sleep(0.1)
    return sorted(left.items())


def wait_measuring(proc, out, at_least=2000, timeout=60):
    """Until the driver has finished at_least timed iterations (its progress counter)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        try:
            done = int.from_bytes((out / ".progress").read_bytes()[:8], "little")
        except OSError:
            done = 0
        if done >= at_least:
            return done
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no {at_least} iterations within {timeout} s")


def check_trace_events(events):
    """What the Trace Event Format asks of what we emit; raises AssertionError otherwise."""
    allowed = {"X", "M", "s", "f"}
    for e in events:
        assert e["ph"] in allowed and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], float | int)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["name"], str)
    # Complete events on one thread must nest: sort by start, longest first, check a stack.
    tracks = {}
    for e in events:
        if e["ph"] == "X":
            tracks.setdefault(e["tid"], []).append((e["ts"], -e["dur"], e))
    for slices in tracks.values():
        stack = []
        for ts, neg, e in sorted(slices, key=lambda t: (t[0], t[1])):
            while stack and ts >= stack[-1] - 1e-9:
                stack.pop()
            assert not stack or ts - neg <= stack[-1] + 1e-9, f"{e['name']} at {ts} overlaps its parent"
            stack.append(ts - neg)
    starts = {e["id"] for e in events if e["ph"] == "s"}
    ends = {e["id"] for e in events if e["ph"] == "f"}
    assert starts == ends


# A test marked `timing` compares measured times of a real kernel on a shared 2-vCPU VM: a host
# that takes the CPU for milliseconds now and then moves a figure no test can bound without losing
# its point (a spun round trip's mode, the slowest of 3 000 requests). Such a test gets one retake,
# as `validate` retakes a case; a retake is listed in the summary (-rR) and a second failure fails.
# Every other test (error wording, two analyses equal, refusals) is deterministic: it gets no
# retake, so a race that fails it now and then fails CI instead of hiding behind a second try.
RETAKES = 1


def pytest_configure(config):
    config.addinivalue_line("markers", "timing: compares measured times of a real kernel; gets one retake")


def pytest_collection_modifyitems(items):
    for item in items:
        timing = item.get_closest_marker("timing") is not None
        if item.get_closest_marker("flaky") is not None and not timing:
            raise pytest.UsageError(f"{item.nodeid}: a retake (flaky) is only for a test marked timing")
        if timing and item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=RETAKES))
