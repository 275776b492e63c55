"""`ipctrace run` for real, with small counts: files, schema, figures that must hold."""

import json
import os
import pty
import select
import signal
import subprocess
import time

import pandas as pd
import pytest

from analysis.store import results
from analysis.store.results import ITER_COLUMNS
from conftest import HOME, cli_argv, cli_env, read_json, run_argv, spawn

ITER, WARM, RUNS = 2000, 200, 2


def run(ipctrace, out, name, *extra, iterations=ITER, runs=RUNS):
    p = ipctrace(
        "run",
        name,
        "--no-trace",
        "--quiet",
        "--iterations",
        iterations,
        "--warmup",
        WARM,
        "--runs",
        runs,
        "--out",
        out,
        *extra,
    )
    assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def pipe_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "pipe"
    args = [
        "run",
        "pipe",
        "--no-trace",
        "--json",
        "--iqr",
        "--iterations",
        ITER,
        "--warmup",
        WARM,
        "--runs",
        RUNS,
        "--out",
        out,
    ]
    p = subprocess.run(cli_argv(*map(str, args)), capture_output=True, text=True, timeout=300, env=cli_env())
    assert p.returncode == 0, p.stderr
    return out, p


def test_pipe_writes_the_three_files(pipe_dir):
    out, p = pipe_dir
    for f in ["iterations.parquet", "summary.json", "meta.json", "workload.json"]:
        assert (out / f).stat().st_size > 0, f
    assert not (out / "iterations.bin").exists(), "the raw file goes once decoded"
    assert not (out / results.INCOMPLETE).exists()
    assert not (out / ".progress").exists()
    assert json.loads(p.stdout) == read_json(out / "summary.json"), "--json prints summary.json"


def test_pipe_iterations(pipe_dir):
    out, _ = pipe_dir
    df = pd.read_parquet(out / "iterations.parquet")
    assert list(df.columns) == list(ITER_COLUMNS)
    assert len(df) == ITER * RUNS
    assert (df["latency_ns"] > 0).all()
    assert (df["latency_ns"] == df["t_end_ns"] - df["t_start_ns"]).all()
    assert df["seq"].is_monotonic_increasing and df["t_start_ns"].is_monotonic_increasing
    assert sorted(df["run"].unique()) == list(range(RUNS))
    assert (df.groupby("run")["iteration"].agg(["min", "max", "count"]).values == [0, ITER - 1, ITER]).all()
    assert set(df["metric"].astype(str)) == {"rtt"}


def test_pipe_summary(pipe_dir):
    out, _ = pipe_dir
    s = read_json(out / "summary.json")
    assert s["schema_version"] == 1 and s["workload"] == "pipe" and s["status"] == "complete"
    assert s["primary_metric"] == "rtt" and s["placement"] == "cross-cpu"
    assert {t["role"] for t in s["threads"]} == {"measuring", "peer"}
    assert s["params"]["iterations"] == ITER and s["params"]["runs"] == RUNS and s["params"]["size"] == 1
    assert set(s["host"]) >= {"kernel", "cpu_model", "cores"}
    rtt, ow = s["metrics"]["rtt"], s["metrics"]["one_way"]
    df = pd.read_parquet(out / "iterations.parquet")
    assert rtt["n"] == ITER * RUNS and rtt["unit"] == "ns" and rtt["derived"] is False
    assert rtt["mean"] == pytest.approx(df["latency_ns"].mean())
    assert rtt["median"] == df["latency_ns"].median() and rtt["max"] == df["latency_ns"].max()
    assert 0 < rtt["min"] <= rtt["median"] <= rtt["p90"] <= rtt["p99"] <= rtt["p999"] <= rtt["max"]
    assert rtt["ci95_mean"][0] <= rtt["mean"] <= rtt["ci95_mean"][1]
    assert rtt["ci95_median"][0] <= rtt["median"] <= rtt["ci95_median"][1]
    # two runs: no interval of the runs' means (model/stats.py: none below 3 runs)
    assert rtt["runs"] == RUNS and rtt["runs_ci95_mean"] is None
    assert ow["derived"] is True and ow["from"] == "rtt" and ow["mean"] == pytest.approx(rtt["mean"] / 2)
    assert rtt["iqr"]["n"] + rtt["iqr"]["removed"] == rtt["n"]
    assert rtt["iqr"]["max"] <= rtt["max"]


def test_pipe_meta(pipe_dir):
    out, _ = pipe_dir
    m = read_json(out / "meta.json")
    assert m["status"] == "complete" and m["clock_source"] == "CLOCK_MONOTONIC"
    assert m["command"][:3] == ["ipctrace", "run", "pipe"] and m["version"]
    assert m["start_time"] <= m["end_time"]


@pytest.mark.timing
def test_pipe_is_slower_than_a_null_syscall(ipctrace, tmp_path):
    run(ipctrace, tmp_path / "pipe", "pipe", "--same-cpu")
    run(ipctrace, tmp_path / "null", "null-syscall")
    pipe = read_json(tmp_path / "pipe" / "summary.json")["metrics"]["rtt"]
    null = read_json(tmp_path / "null" / "summary.json")["metrics"]["syscall"]
    assert null["n"] == ITER * RUNS and null["min"] > 0
    assert pipe["median"] > null["median"]


def test_table_comes_from_summary(ipctrace, tmp_path):
    p = run(ipctrace, tmp_path / "o", "orwc", runs=1)
    s = read_json(tmp_path / "o" / "summary.json")
    lines = p.stdout.splitlines()
    assert lines[-1] == f"results: {tmp_path / 'o'}"
    for metric in ["open", "read", "write", "close"]:
        row = next(line.split() for line in lines if line.startswith(metric + " "))
        scale = {"ns": 1, "us": 1e3, "ms": 1e6}[row[1]]
        assert int(row[2]) == s["metrics"][metric]["n"] == ITER
        assert float(row[3]) == pytest.approx(s["metrics"][metric]["median"] / scale, rel=0.01)


def test_default_results_dir(ipctrace, tmp_path):
    p = ipctrace("run", "null-syscall", "--no-trace", "--quiet", "--iterations", 100, "--warmup", 10, "--runs", 1)
    assert p.returncode == 0, p.stderr
    (d,) = (tmp_path / "results").iterdir()
    assert d.name.startswith("null-syscall-") and (d / "summary.json").exists()


def test_driver_rejection_leaves_nothing(ipctrace, tmp_path):
    """pipe runs two sides, so one CPU is refused by the driver: exit 2, no directory."""
    p = ipctrace("run", "pipe", "--no-trace", "--cpus", "0", "--out", tmp_path / "r")
    assert p.returncode == 2
    assert len(p.stderr.splitlines()) == 1 and "--cpus" in p.stderr
    assert not (tmp_path / "r").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    p = ipctrace("run", "pipe", "--no-trace", "--cpus", "0", "--out", empty)
    assert p.returncode == 2 and list(empty.iterdir()) == []


def test_tracing_needs_the_loader_or_no_trace(ipctrace, tmp_path, monkeypatch):
    env = dict(cli_env(), IPCTRACE_HOME=str(tmp_path / "home"), IPCTRACE_OUTPUT=".output")
    (tmp_path / "home" / ".output").mkdir(parents=True)
    os.symlink(HOME / ".output" / "ipcbench", tmp_path / "home" / ".output" / "ipcbench")
    p = subprocess.run(
        cli_argv("run", "pipe", "--out", tmp_path / "r"),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 2 and "use --no-trace" in p.stderr and len(p.stderr.splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_sigint_keeps_what_was_measured(tmp_path):
    out = tmp_path / "i"
    p = spawn(run_argv("pipe", str(out), "--no-trace", iterations="3000000", warmup="10"))
    deadline = time.monotonic() + 60
    while not (out / "iterations.bin").exists() or (out / "iterations.bin").stat().st_size < 64:
        assert time.monotonic() < deadline and p.poll() is None, "the run did not start"
        time.sleep(0.1)
    time.sleep(2)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 130, stderr
    assert stderr.splitlines()[-1].startswith("ipctrace: interrupted by SIGINT")
    s, m = read_json(out / "summary.json"), read_json(out / "meta.json")
    assert s["status"] == m["status"] == "interrupted"
    assert 0 < s["metrics"]["rtt"]["n"] < 3_000_000
    assert len(pd.read_parquet(out / "iterations.parquet")) == s["metrics"]["rtt"]["n"]
    assert "status: interrupted" in stdout
    assert not (out / results.INCOMPLETE).exists()


def test_progress_bar_only_on_a_terminal(tmp_path):
    """stderr on a pseudo-terminal shows the bar; --quiet or a pipe shows none."""

    def stderr_of(*extra, tty=True):
        master, slave = pty.openpty()
        err = slave if tty else subprocess.PIPE
        p = subprocess.Popen(
            cli_argv(
                "run",
                "pipe",
                "--no-trace",
                "--iterations",
                "50000",
                "--warmup",
                "10",
                "--runs",
                "1",
                "--out",
                str(tmp_path / str(time.time())),
                *extra,
            ),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=cli_env(),
        )
        os.close(slave)
        data = b""
        while True:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
            elif p.poll() is not None:
                break
        p.wait(timeout=120)
        os.close(master)
        assert p.returncode == 0
        return data.decode(errors="replace") if tty else p.stderr.read().decode()

    assert "/50000" in stderr_of() and "pipe [" in stderr_of()
    assert "/50000" not in stderr_of("--quiet")
    assert "/50000" not in stderr_of(tty=False)


def test_driver_killed_is_a_failed_measurement(tmp_path):
    """The driver dying under us: exit 1, one line, the directory keeps INCOMPLETE and says failed."""
    out = tmp_path / "k"
    p = spawn(run_argv("pipe", str(out), "--no-trace", iterations="3000000", warmup="10"))
    deadline = time.monotonic() + 60
    while not (out / "iterations.bin").exists():
        assert time.monotonic() < deadline and p.poll() is None, "the run did not start"
        time.sleep(0.1)
    driver = next(
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit() and _parent(pid) == p.pid and "ipcbench" in _cmdline(pid)
    )
    os.kill(driver, signal.SIGKILL)
    _, stderr = p.communicate(timeout=60)
    assert p.returncode == 1
    assert stderr.splitlines() == ["ipctrace: pipe: measurement failed: killed by SIGKILL"]
    assert (out / results.INCOMPLETE).exists() and not (out / "summary.json").exists()
    meta = read_json(out / "meta.json")
    assert meta["status"] == "failed" and "SIGKILL" in meta["error"]


def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""
