"""The rt-tests style options of `ipctrace run`, for real with small counts: --duration,
--break-at, --interval, --priority and --hist."""

import json
import subprocess

import pytest

from conftest import HOME, cli_argv, cli_env, needs_driver, needs_tracing

pytestmark = needs_driver


def run(tmp_path, *args, name="r"):
    out = tmp_path / name
    r = subprocess.run(
        cli_argv("run", "pipe", "--same-cpu", "--warmup", 50, "--runs", 1, "--quiet", "--out", out, *args),
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=HOME,
        timeout=300,
    )
    return r, out


@pytest.mark.timing
def test_duration_runs_each_run_for_its_time(tmp_path):
    r, out = run(tmp_path, "--duration", 1, "--runs", 2, "--no-trace")
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    # two runs of a second each: far more than a handful of ~5 us round trips, fewer than the room
    assert s["status"] == "complete" and s["runs_completed"] == 2 and 10_000 < s["metrics"]["rtt"]["n"] < 4_000_000
    assert "2 runs x at most 1 s" in r.stdout


@needs_tracing
@pytest.mark.timing
def test_break_at_stops_and_explains_the_iteration_that_crossed_it(tmp_path):
    # 1 us: the first timed round trip crosses it
    r, out = run(tmp_path, "--iterations", 5000, "--break-at", 1, "--no-calibrate")
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    stop = json.loads((out / "workload.json").read_text())["break"]
    assert s["status"] == "stopped" and stop["iteration"] == 0 and stop["latency_ns"] > 1000
    assert f"stopped at --break-at: run 0 iteration 0 took {stop['latency_ns'] / 1000:,.1f} us" in r.stdout
    assert "reads the clock: the iteration starts" in r.stdout  # explained at once


def test_interval_priority_and_hist(tmp_path):
    r, out = run(tmp_path, "--iterations", 300, "--interval", 200, "--priority", 10, "--hist", "--no-trace")
    assert r.returncode == 0, r.stderr
    p = json.loads((out / "summary.json").read_text())["params"]
    assert (p["interval_us"], p["priority"]) == (200, 10)
    # each of the 300 iterations waited 200 us after it: the run took at least 60 ms
    hist = r.stdout[r.stdout.index("rtt latency (ns): 300 iterations") :].splitlines()[1:]
    assert sum(int(line.split()[2].replace(",", "")) for line in hist) == 300


@pytest.mark.parametrize(
    "args, says",
    [
        (["--priority", "0"], "--priority"),
        (["--interval", "0"], "--interval"),
        (["--break-at", "x"], "--break-at"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(tmp_path, args, says):
    r, out = run(tmp_path, *args, "--no-trace")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and says in r.stderr and not out.exists()
