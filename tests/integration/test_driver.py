"""The workload driver .output/ipcbench, run for real with small counts."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from analysis import DRIVER
from analysis.store.results import read_iterations_bin
from conftest import needs_driver, spawn

ISSUE3 = {
    "pipe": ["rtt"],
    "pipe-self": ["write_read"],
    "pipe-nonblock": ["write", "read", "write_eagain"],
    "null-syscall": ["syscall"],
    "orwc": ["open", "read", "write", "close"],
}
ITERATIONS, WARMUP, RUNS = 300, 30, 2

pytestmark = needs_driver


def ipcbench(*args, **kw):
    return subprocess.run([str(DRIVER), *map(str, args)], capture_output=True, text=True, timeout=120, **kw)


def measure(tmp_path, name, *extra, iterations=ITERATIONS, runs=RUNS):
    out = tmp_path / name
    p = ipcbench("run", name, "--out", out, "--iterations", iterations, "--warmup", WARMUP, "--runs", runs, *extra)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    meta = json.loads((out / "workload.json").read_text())
    df, warnings = read_iterations_bin(out / "iterations.bin", meta["metrics"])
    assert warnings == []
    return meta, df


def leftovers(meta):
    """What this invocation (its tag) left in the file system."""
    tag = meta["tag"]
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return [str(p) for p in [*Path(tmp).glob(f"ipctrace-{tag}"), *Path("/dev/shm").glob(f"ipctrace-{tag}-*")]]


@pytest.fixture(scope="module")
def catalog():
    p = ipcbench("list")
    assert p.returncode == 0, p.stderr
    return {w["name"]: w for w in json.loads(p.stdout)["workloads"]}


def test_list_describes_issue3_workloads(catalog):
    for name, metrics in ISSUE3.items():
        w = catalog[name]
        assert w["metrics"] == metrics and w["primary_metric"] == metrics[0]
        assert w["summary"]
    assert catalog["pipe"]["derived"] == {"one_way": {"from": "rtt", "factor": 0.5}}
    assert "fresh" in catalog["pipe-self"]["flags"]
    assert catalog["orwc"]["seed"].startswith("004_")


@pytest.mark.parametrize("name", sorted(ISSUE3))
def test_run_records_every_timed_iteration(tmp_path, name):
    meta, df = measure(tmp_path, name)
    assert meta["status"] == "complete" and meta["error"] is None
    assert meta["runs_completed"] == RUNS and meta["iterations_completed"] == ITERATIONS * RUNS
    assert meta["metrics"] == ISSUE3[name] and meta["clock"] == "CLOCK_MONOTONIC"
    counts = df.groupby("metric", observed=False).size()
    assert counts.to_dict() == {m: ITERATIONS * RUNS for m in ISSUE3[name]}
    assert (df["latency_ns"] > 0).all()
    assert (np.diff(df["seq"].to_numpy()) == 1).all() and df["seq"].iloc[0] == 0
    assert (np.diff(df["t_start_ns"].to_numpy()) >= 0).all()  # seq follows time
    for (run, metric), g in df.groupby(["run", "metric"], observed=True):
        assert sorted(g["iteration"]) == list(range(ITERATIONS)), (run, metric)
    measuring = [t for t in meta["threads"] if t["role"] == "measuring"]
    assert len(measuring) == 1 and set(df["tid"]) == {measuring[0]["tid"]}
    assert leftovers(meta) == []


def test_pipe_default_placement_is_cross_cpu(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    meta, df = measure(tmp_path, "pipe", runs=1)
    roles = {t["role"]: t for t in meta["threads"]}
    assert meta["placement"] == "cross-cpu"
    assert roles["measuring"]["cpu"] != roles["peer"]["cpu"]
    assert set(df["cpu"]) == {roles["measuring"]["cpu"]}


@pytest.mark.parametrize("cpus, placement", [("0,0", "same-cpu"), ("0,1", "cross-cpu")])
def test_cpus_store_the_placement_they_make(tmp_path, cpus, placement):
    """--cpus A,B (what the labs pass) is one CPU or two, and workload.json says which."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    meta, _ = measure(tmp_path, "pipe", "--cpus", cpus, runs=1)
    assert meta["placement"] == placement
    assert sorted(t["cpu"] for t in meta["threads"]) == sorted(int(c) for c in cpus.split(","))


def test_same_cpu_and_no_pin(tmp_path):
    meta, _ = measure(tmp_path, "pipe", "--same-cpu", runs=1)
    cpus = {t["cpu"] for t in meta["threads"]}
    assert meta["placement"] == "same-cpu" and len(cpus) == 1 and cpus != {-1}
    (tmp_path / "n").mkdir()
    meta, _ = measure(tmp_path / "n", "pipe", "--no-pin", runs=1)
    assert meta["placement"] == "none" and {t["cpu"] for t in meta["threads"]} == {-1}


@pytest.mark.timing
def test_pipe_round_trip_costs_more_than_a_syscall(tmp_path):
    _, pipe = measure(tmp_path, "pipe", iterations=2000, runs=1)
    _, null = measure(tmp_path, "null-syscall", iterations=2000, runs=1)
    assert pipe["latency_ns"].median() > null["latency_ns"].median()


def test_sizes_and_fresh_pipes(tmp_path):
    meta, df = measure(tmp_path, "pipe-self", "--fresh", "--size", "128K", runs=1)
    assert meta["params"]["fresh"] is True and meta["params"]["size"] == 128 * 1024
    assert len(df) == ITERATIONS
    _, df = measure(tmp_path, "pipe", "--size", "100000", runs=1)
    assert len(df) == ITERATIONS


def test_progress_counts_timed_iterations_of_all_runs(tmp_path):
    prog = tmp_path / "progress"
    prog.write_bytes(b"\xff" * 8)
    measure(tmp_path, "null-syscall", "--progress", prog)
    assert int.from_bytes(prog.read_bytes(), "little") == ITERATIONS * RUNS


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_keeps_what_was_measured(tmp_path, sig, code):
    out, prog = tmp_path / "i", tmp_path / "progress"
    prog.write_bytes(bytes(8))
    p = spawn(
        [
            str(DRIVER),
            "run",
            "pipe",
            "--out",
            str(out),
            "--iterations",
            "50000000",
            "--warmup",
            "10",
            "--runs",
            "2",
            "--progress",
            str(prog),
        ]
    )
    deadline = time.monotonic() + 20
    while int.from_bytes(prog.read_bytes(), "little") < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == code, err
    meta = json.loads((out / "workload.json").read_text())
    assert meta["status"] == "interrupted" and meta["runs_completed"] == 0
    df, _ = read_iterations_bin(out / "iterations.bin", meta["metrics"])
    assert len(df) == meta["iterations_completed"] >= 100
    assert sorted(df["iteration"]) == list(range(len(df)))
    assert leftovers(meta) == []
    assert not [
        q for q in Path("/proc").glob("[0-9]*") if (q / "cmdline").exists() and str(out).encode() in _cmdline(q)
    ]


def _cmdline(proc_dir):
    try:
        return (proc_dir / "cmdline").read_bytes()
    except OSError:
        return b""


BAD = [
    (["run", "nosuch", "--out", "{d}"], "unknown workload"),
    (["run", "pipe", "--out", "{d}", "--iterations", "0"], "--iterations"),
    (["run", "pipe", "--out", "{d}", "--iterations", "-5"], "--iterations"),
    (["run", "pipe", "--out", "{d}", "--iterations", "abc"], "--iterations"),
    (["run", "pipe", "--out", "{d}", "--iterations", "99999999999999999999"], "--iterations"),
    (["run", "pipe", "--out", "{d}", "--warmup", "2000000000"], "--warmup"),
    (["run", "pipe", "--out", "{d}", "--runs", "0"], "--runs"),
    (["run", "pipe", "--out", "{d}", "--cpus", "0,999"], "CPU 999"),
    (["run", "pipe", "--out", "{d}", "--size", "-1"], "--size"),
    (["run", "pipe", "--out", "{d}", "--size", "99999999999"], "at most"),
    (["run", "pipe-self", "--out", "{d}", "--size", "2M"], "at most"),
    (["run", "null-syscall", "--out", "{d}", "--size", "8"], "--size"),
    (["run", "pipe", "--out", "{d}", "--same-cpu", "--cross-cpu"], "exclude"),
    (["run", "pipe", "--out", "{d}", "--fresh"], "--fresh"),
    (["run", "pipe", "--out", "{d}", "--no-such-flag"], "unknown option"),
    (["run", "pipe", "--out", "/proc/nope"], "/proc/nope"),
    (["run", "pipe"], "--out"),
    (["run"], "workload name"),
    (["nosuchcommand"], "unknown command"),
    ([], "no command"),
    (["list", "extra"], "no arguments"),
]


@pytest.mark.parametrize("args, says", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    d = tmp_path / "out"
    p = ipcbench(*[a.format(d=d) for a in args])
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipcbench: ") and says in lines[0], p.stderr
    assert not d.exists()


def test_existing_measurement_is_not_overwritten(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "iterations.bin").write_bytes(b"keep")
    p = ipcbench("run", "pipe", "--out", d, "--iterations", 10)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1
    assert (d / "iterations.bin").read_bytes() == b"keep"


def test_selftest():
    p = ipcbench("selftest")
    last = p.stdout.splitlines()[-1]
    passed, failed = (int(x.split()[0]) for x in last.split(", "))
    assert p.returncode == 0 and failed == 0 and passed > 100, p.stdout


@pytest.mark.timing
def test_bench_workloads_reads_both_tools():
    """The two measurements bench-workloads divides, on a few round trips each."""
    import shutil

    from analysis.run import bench_workloads as bench

    perf = shutil.which("perf")
    if not perf:
        pytest.skip("perf is not installed")
    cpu = min(os.sched_getaffinity(0))
    ours = bench.ipcbench_mean_ns([cpu], ["--cpus", f"{cpu},{cpu}"], 500)
    theirs = bench.perf_mean_ns(perf, [cpu], 500)
    assert 0 < ours < 1e7 and 0 < theirs < 1e7
