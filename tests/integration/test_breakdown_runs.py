"""The breakdown of real traced runs: closure of same- and cross-CPU pipe runs, and the
wake-up delay against perf sched timehist on the same run."""

import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from analysis.model import breakdown as bd
from analysis.model import timeline
from conftest import HOME, cli_argv, cli_env, needs_tracing, read_json, traced_pipe


def test_missing_library_is_one_line(tmp_path):
    """Without the built library the analysis says what to build, in one line, exit 2."""
    fixture = HOME / "tests" / "fixtures" / "pipe-traced"
    env = dict(cli_env(), IPCTRACE_OUTPUT=str(tmp_path))
    r = subprocess.run(
        cli_argv("explain", str(fixture)),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "libipctrace-analysis.so" in r.stderr and "make" in r.stderr, r.stderr


# `perf script -F time,event,trace` lines of a waking (pid=) or a switch-in (next_pid=)
PERF_WAKE_OR_SWITCH_IN = re.compile(
    r"^\s*(\d+\.\d+):\s+sched:(sched_waking|sched_switch):.*?"
    r"(?:next_pid=(\d+)|(?<!_)pid=(\d+))",
    re.M,
)
TIMEHIST = re.compile(r"^\s*(\d+\.\d+)\s+\[\d+\]\s+.*?\[(\d+)(?:/\d+)?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


@pytest.fixture(scope="module")
def cross_cpu_with_perf(tmp_path_factory):
    """A traced cross-CPU pipe run inside `perf sched record` (same clock: -k mono), with what
    `perf sched timehist` and `perf script` read from perf's data and the sides on which
    timehist's scheduler delays can be compared with ours (perf_sides)."""
    if not shutil.which("perf"):
        pytest.skip("perf is not installed")
    # perf on this VM now and then writes data its own tools cannot read to the end
    # ("failed to process type: 17 [Bad address]", exit 242), or leaves out or misorders
    # events so that neither side can be compared (see perf_sides): a new recording then,
    # at most three in all; our run's figures are checked on every attempt.
    why = "perf could not read its own recording"
    for _attempt in range(3):
        d = tmp_path_factory.mktemp("perf")
        data = d / "perf.data"
        traced_pipe(d / "run", wrap=["perf", "sched", "record", "-k", "mono", "-o", str(data), "--"])
        summary = read_json(d / "run" / "summary.json")
        check_closes(summary)
        th = subprocess.run(["perf", "sched", "timehist", "-i", str(data)], capture_output=True, text=True, timeout=600)
        # what perf recorded, to know which threads' wake-ups it saw wholly
        raw = subprocess.run(
            ["perf", "script", "-i", str(data), "-F", "time,event,trace", "--ns"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if th.returncode != 0 or raw.returncode != 0:
            why = f"perf could not read its own recording: {(th.stderr + raw.stderr).strip()[-300:]}"
            continue
        sides, why = perf_sides(d / "run", th.stdout, raw.stdout)
        if sides:
            return d / "run", summary, sides
    pytest.fail(f"three perf recordings, none comparable: {why}")


def perf_sides(resdir, timehist, raw):
    """({role: (our median wake-up delay, timehist's median "sch delay"), us} for the sides
    perf saw wholly, why the others were left out).

    Ours: sched_waking -> on CPU, the first wake-up of each sleep. timehist's: the rows of the
    same thread and timed part after a sleep (wait time > 0). A side is compared only if perf
    recorded its wakings and switch-ins wholly (>= 99 % of ours) and timehist paired them:
    as many rows as our wake-ups, and at most 5 % more zero delays than ours below 1 us
    (timehist prints 0 where it found no wake-up: up to 1.5 % of a side's rows in runs that
    agreed, 16 % in one that did not, median 5 against our 7.09 us, while perf's own events
    paired as ours gave 7.29 us: the zeros pull its median down). On this VM perf records none,
    or about half, of the tracepoint events that fire while CPU 1's idle task is current
    (`perf stat -a -A -e sched:sched_switch --filter 'prev_pid == 0'` counts 0 on CPU 1 where
    bpftrace counts them), so it misses the peer's switch-ins there, and in some runs a
    quarter of all events (its buffer)."""
    with open(resdir / "workload.json") as f:
        threads = {t["role"]: t["tid"] for t in json.load(f)["threads"]}
    it = pd.read_parquet(resdir / "iterations.parquet")
    lo, hi = int(it["t_start_ns"].min()), int(it["t_end_ns"].max())
    rows = []
    for line in timehist.splitlines():
        m = TIMEHIST.match(line)
        if m:
            rows.append((int(m[2]), round(float(m[1]) * 1e9), float(m[3]), round(float(m[4]) * 1000)))
    perf = pd.DataFrame(rows, columns=["tid", "t_out", "wait_ms", "delay_us"])
    seen = pd.DataFrame(
        [
            (round(float(m[1]) * 1e9), m[2], int(m[3]) if m[3] else int(m[4]))
            for m in PERF_WAKE_OR_SWITCH_IN.finditer(raw)
        ],
        columns=["ts", "event", "tid"],
    )
    seen = seen[(seen["ts"] >= lo) & (seen["ts"] <= hi)]
    frame = pd.read_parquet(resdir / "events.parquet")
    ev = timeline.Events(frame)
    events = frame[(frame["ts"] >= lo) & (frame["ts"] <= hi)]
    sides, why = {}, []
    for role, tid in threads.items():
        p = perf[(perf["tid"] == tid) & (perf["wait_ms"] > 0) & (perf["t_out"] >= lo) & (perf["t_out"] <= hi)]
        on, delay, _ = timeline.wakeup_delays(timeline.thread_timeline(ev, tid, timeline.StepRules("x86_64")))
        ours = delay[(on >= lo) & (on <= hi)] / 1000
        assert len(ours) > 10000, (role, len(ours))
        wakings = ((events["type"] == "waking") & (events["tid"] == tid)).sum()
        switch_ins = ((events["type"] == "switch") & (events["next_tid"] == tid)).sum()
        mine = seen[seen["tid"] == tid]["event"]
        recorded = ((mine == "sched_waking").sum(), (mine == "sched_switch").sum())
        if recorded[0] < 0.99 * wakings or recorded[1] < 0.99 * switch_ins:
            why.append(
                f"{role}: perf recorded {recorded[0]} of {wakings} wakings, {recorded[1]} of {switch_ins} switch-ins"
            )
        elif len(p) < 0.99 * len(ours) or (p["delay_us"] == 0).mean() > (ours < 1).mean() + 0.05:
            why.append(
                f"{role}: timehist paired {len(p)} rows for our {len(ours)} wake-ups, "
                f"{(p['delay_us'] == 0).mean():.1%} with no delay"
            )
        else:
            sides[role] = (float(np.median(ours)), float(np.median(p["delay_us"])))
    return sides, "; ".join(why)


def check_closes(summary):
    b = summary["breakdown"]["rtt"]
    assert set(b["components"]) == set(bd.COMPONENTS) | {"sched_delay"}
    assert abs(b["closure_residual_pct"]) <= 2, b["closure_residual_pct"]
    assert summary["trace"]["drops"]["total"] == 0
    c = {k: v["mean"] for k, v in b["components"].items()}
    for k in ("user", "syscall", "copy"):
        assert c[k] > 0, c
    assert b["critical_path"] is True
    assert b["copy_source"].startswith("estimated")
    assert set(b["per_side"]) == {"measuring", "peer"}
    assert (
        summary["tail"]["iterations"] >= 1 and sum(summary["tail"]["labels"].values()) >= summary["tail"]["iterations"]
    )


@needs_tracing
def test_cross_cpu_run_closes(cross_cpu_with_perf):
    resdir, summary, _ = cross_cpu_with_perf
    check_closes(summary)
    frame = pd.read_parquet(resdir / "breakdown.parquet")
    # every iteration but those the tracer could not follow wholly (trace.json drops)
    assert len(frame) == 20000 - summary["trace"]["iterations_left_out"] > 19000
    assert set(bd.COMPONENTS) <= set(frame.columns)
    # Across CPUs each side waits for its wake-up (the IPI, the idle exit, the run queue) on the
    # path, unless another task held its CPU then (preempted: this machine is shared).
    c = {k: v["mean"] for k, v in summary["breakdown"]["rtt"]["components"].items()}
    assert c["wakeup"] + c["runqueue"] > 0, c


@needs_tracing
@pytest.mark.timing
def test_same_cpu_run_closes(tmp_path):
    traced_pipe(tmp_path / "run", "--same-cpu")
    summary = read_json(tmp_path / "run" / "summary.json")
    check_closes(summary)
    # On one CPU the woken side runs only when the waker leaves the CPU: while one side waits
    # the other holds the CPU and works (rule 4), so the path is hardly ever preempted,
    # whereas each side on its own waits a good part of the round trip. A task of another
    # process that took the CPU (this machine is shared: another test's CPU hog) is named in
    # preempted_by, whether the path waited preempted or woken (runqueue), and left out of that share.
    b = summary["breakdown"]["rtt"]
    c = {k: v["mean"] for k, v in b["components"].items()}
    others = sum(h["ns_per_iteration"] for h in b["preempted_by"])
    waited = c["preempted"] + c["runqueue"] - others
    assert waited < 0.04 * summary["metrics"]["rtt"]["mean"], (c, b["preempted_by"])
    for side in ("measuring", "peer"):
        own = b["per_side"][side]["components"]
        assert own["runqueue"]["mean"] + own["preempted"]["mean"] > 0.2 * summary["metrics"]["rtt"]["mean"], own


@needs_tracing
@pytest.mark.timing
def test_wakeup_delay_agrees_with_perf_sched(cross_cpu_with_perf):
    """Median wake-up delay per side against the median "sch delay" that perf sched timehist
    prints for the same run and threads (perf_sides). timehist truncates to whole
    microseconds, so its median m stands for [m, m + 1) us: ours must lie within 10 % of that
    interval."""
    _, _, sides = cross_cpu_with_perf
    assert sides
    for role, (got, m) in sides.items():
        off = max(m - got, got - (m + 1), 0)
        assert off <= 0.10 * got, (role, got, m)
