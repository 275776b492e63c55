"""`ipctrace explain`: the chain and the critical path of one iteration, on hand-made events and
on a real traced run (tests/fixtures/pipe-traced: `ipctrace run pipe --iterations 400 --warmup
100 --runs 1`, its breakdown.parquet, events.parquet, iterations.parquet, meta.json,
summary.json and workload.json; made anew whenever the analysis changes what it computes:
test_path_sums_are_the_breakdown compares explain with the breakdown.parquet stored there)."""

import json
import random
import shutil
import subprocess

import numpy as np
import pyarrow.parquet as pq
import pytest
from scenarios import (
    HOGGED,
    OTHER,
    PING_PONG,
    SAME_CPU_PREEMPTED,
    TASKS,
    TIMER_WAKE,
    WORKLOAD,
    WORKLOAD_JSON,
    A,
    B,
    events,
    iterations,
    path_segments,
)

from analysis.errors import UsageError
from analysis.model import breakdown as bd
from analysis.model import explain, timeline
from analysis.render.explain import render
from analysis.store import rundir
from analysis.store.results import write_iterations, write_json
from conftest import HOME, cli_argv, cli_env, needs_tracing

FIXTURE = HOME / "tests" / "fixtures" / "pipe-traced"


def explain_dir(resdir, **kw):
    """explain of the run in resdir, as the command line wires it (store.rundir reads it)."""
    with rundir.explain_inputs(resdir) as inputs:
        return inputs.answer(explain.explain(inputs, **kw))


def test_chain_by_hand():
    lines = explain.chain(timeline.Events(events(PING_PONG)), bd.sides_of(WORKLOAD, A), 1000, 2000)
    got = [(rel, who, text) for rel, who, text in lines]
    assert got[0] == (0, "A", "reads the clock: the iteration starts")
    assert (0, "B", "is blocked; off CPU since 0.950 us before the start") in got
    assert (100, "A", "enters write()") in got
    assert (200, "A", "wake-up: wakes B (sched_waking, target CPU 1)") in got
    assert (300, "A", "write() returns 1, 0.200 us after it was entered") in got
    assert (400, "A", "blocks and leaves CPU 0 (switch to idle)") in got
    # No sched_wakeup after the wakings: woken at once, the whole wait in the run queue.
    assert (450, "B", "on CPU 1 after 0.250 us in the run queue (woken at once: sched_waking -> running)") in got
    assert (500, "B", "read() returns 1, 1.480 us after it was entered") in got
    assert (600, "B", "wake-up: wakes A (sched_waking, target CPU 0)") in got
    assert (620, "B", "interrupted by hard IRQ 30 on CPU 1") in got
    assert (720, "A", "on CPU 0 after 0.120 us in the run queue (woken at once: sched_waking -> running)") in got
    assert got[-1] == (1000, "A", "reads the clock: the iteration ends after 1.000 us")
    assert [rel for rel, _, _ in got] == sorted(rel for rel, _, _ in got)


def test_chain_of_a_workload_thread_preempting_another_by_hand():
    # Both on CPU 0: B, woken by A's write(), preempts A at 1400 and gives the CPU back when it
    # blocks at 1700. A's time off CPU is a preemption (its step function's PREEMPTED), which
    # the account says when A comes back, as it says a wake-up's delays.
    got = explain.chain(timeline.Events(events(SAME_CPU_PREEMPTED, cpus={})), bd.sides_of(WORKLOAD, A), 1000, 2000)
    assert (400, "A", "is preempted on CPU 0 by B") in got
    assert (400, "B", "on CPU 0 after 0.200 us in the run queue (woken at once: sched_waking -> running)") in got
    assert (700, "B", "blocks and leaves CPU 0 (switch to A)") in got
    assert (700, "A", "back on CPU 0 after 0.300 us preempted (runnable, off CPU)") in got


def test_chain_names_a_page_fault_at_a_high_address():
    """A user address above 2^63 as the tracer stores it (a signed 64-bit a0): its bits as
    they are (a traced program's fault at 0x7f... and a kernel one, both)."""
    rows = PING_PONG + [(1500, "page_fault", A, 6, -0x1000, -1), (1510, "page_fault", A, 6, 0x7F00_0000_1000, -1)]
    got = explain.chain(timeline.Events(events(rows)), bd.sides_of(WORKLOAD, A), 1000, 2000)
    assert (500, "A", "page fault at 0xfffffffffffff000") in got
    assert (510, "A", "page fault at 0x7f0000001000") in got


def test_chain_of_a_split_wake_up_and_a_timer_by_hand():
    # sched_wakeup 180 ns after B's waking, 50 ns after A's (as in
    # test_waking_then_wakeup_splits_wakeup_and_runqueue): the split form.
    rows = PING_PONG + [(1380, "wakeup", B, 1, A, 0), (1650, "wakeup", A, 0, B, 0)]
    got = explain.chain(timeline.Events(events(rows)), bd.sides_of(WORKLOAD, A), 1000, 2000)
    assert (380, "B", "is queued to run on CPU 1 (sched_wakeup)") in got
    assert (
        450,
        "B",
        "on CPU 1 0.250 us after its wake-up began: 0.180 us being woken (sched_waking -> "
        "sched_wakeup), 0.070 us in the run queue",
    ) in got
    assert (
        720,
        "A",
        "on CPU 0 0.120 us after its wake-up began: 0.050 us being woken (sched_waking -> "
        "sched_wakeup), 0.070 us in the run queue",
    ) in got
    # TIMER_WAKE: B's sleep in clock_nanosleep() ends in the local timer's interrupt on A's CPU.
    got = explain.chain(timeline.Events(events(TIMER_WAKE)), bd.sides_of(WORKLOAD, A), 1000, 2500)
    assert (700, "A", "interrupted by the local timer on CPU 0") in got
    [(who, text)] = [(who, text) for rel, who, text in got if rel == 710]
    assert who == "A" and "hard interrupt" in text and "wakes B" in text
    assert (800, "B", "on CPU 1 after 0.090 us in the run queue (woken at once: sched_waking -> running)") in got


def test_path_segments_by_hand():
    # PING_PONG's path (test_breakdown.test_critical_path_by_hand) segment by segment, as
    # compute(path=True) hands them to explain: A until B's wake-up at 1200, B until A's at 1600.
    assert path_segments(PING_PONG, (1000, 2000)) == [
        (1000, 1100, "A", "user"),
        (1100, 1115, "A", "copy"),
        (1115, 1200, "A", "syscall"),
        (1200, 1450, "B", "runqueue"),
        (1450, 1485, "B", "syscall"),
        (1485, 1500, "B", "copy"),
        (1500, 1550, "B", "user"),
        (1550, 1565, "B", "copy"),
        (1565, 1600, "B", "syscall"),
        (1600, 1720, "A", "runqueue"),
        (1720, 1785, "A", "syscall"),
        (1785, 1800, "A", "copy"),
        (1800, 2000, "A", "user"),
    ]


def hand_results(d, rows, windows, summary_extra=None):
    """A results directory of hand-made events, as explain reads one."""
    d.mkdir()
    ev = events(rows)
    for c in ("next_pid", "other_tid", "other_pid", "run", "iteration"):
        ev[c] = 0
    ev.to_parquet(d / "events.parquet")
    write_iterations(d / "iterations.parquet", iterations(windows))
    write_json(d / "workload.json", WORKLOAD_JSON)
    write_json(
        d / "summary.json",
        {
            "schema_version": 1,
            "workload": "pipe",
            "primary_metric": "rtt",
            "metrics": {"rtt": {"n": len(windows)}},
            **(summary_extra or {}),
        },
    )
    return d


def test_explain_path_by_hand(tmp_path):
    # HOGGED (test_breakdown.test_other_task_holding_the_cpu_is_named): A preempted by the hog
    # 1040-1070, and in the run queue 1600-1720 after its wake-up while the hog held CPU 0; those
    # segments name it.
    d = hand_results(
        tmp_path / "hogged", HOGGED, [(1000, 2000)], {"trace": {"tasks": TASKS, "tracer": {"pid": 1, "tids": []}}}
    )
    x = explain_dir(d, iteration=0, run=0)
    hog = f"hog (tid {OTHER})"
    got = [(s.start_ns, s.end_ns, s.who, s.component, s.holder) for s in x.path]
    assert got == [
        (0, 25, "A", "user", None),
        (25, 35, "A", "irq", None),
        (35, 40, "A", "user", None),
        (40, 70, "A", "preempted", hog),
        (70, 100, "A", "user", None),
        (100, 115, "A", "copy", None),
        (115, 200, "A", "syscall", None),
        (200, 450, "B", "runqueue", None),
        (450, 485, "B", "syscall", None),
        (485, 500, "B", "copy", None),
        (500, 550, "B", "user", None),
        (550, 565, "B", "copy", None),
        (565, 600, "B", "syscall", None),
        (600, 720, "A", "runqueue", hog),
        (720, 785, "A", "syscall", None),
        (785, 800, "A", "copy", None),
        (800, 1000, "A", "user", None),
    ]
    assert [s.tid for s in x.path][:3] == [A, A, A] and x.path[7].tid == B
    # user 25 + 5 + 30 + 50 + 200, irq 10, preempted 30, syscall 85 + 35 + 35 + 65,
    # copy 4 x 15, runqueue 120 + 250
    want = dict.fromkeys(bd.COMPONENTS, 0)
    want.update(user=310, irq=10, preempted=30, syscall=220, copy=60, runqueue=370)
    assert x.path_sums() == want and x.components == want
    assert x.latency_ns == 1000 and x.iteration == 0 and x.critical_path
    text = render(x)
    assert f"preempted by another task (CPU held by {hog})" in text
    assert f"woken, in the run queue (CPU held by {hog})" in text
    assert "B = peer (tid 200" in text
    # the option that picks it is --repetition: the header says so ("run" is a results directory)
    assert ", repetition 0 iteration 0 (" in text.splitlines()[0]
    # the segments name the holder's tid for the labs (model.lab.path_holders)
    assert {s.holder_tid for s in x.path if s.holder} == {OTHER}


def test_path_sums_are_the_breakdown():
    """Each iteration's components in breakdown.parquet are exactly the sums of the segments
    explain shows (20 iterations of the fixture, drawn with a fixed seed)."""
    check_path_sums(FIXTURE, random.Random(13).sample(range(400), 20))


def check_path_sums(resdir, ks):
    b = pq.read_table(resdir / "breakdown.parquet").to_pandas()
    for k in ks:
        row = b[(b["run"] == 0) & (b["iteration"] == k)].iloc[0]
        x = explain_dir(resdir, iteration=k, run=0)
        want = {c: float(row[c]) for c in bd.COMPONENTS}
        assert x.path_sums() == want, k
        assert x.components == want, k
        # the path covers the window once, end to end
        assert x.path[0].start_ns == 0 and x.path[-1].end_ns == x.latency_ns == row["latency_ns"]
        assert all(p.end_ns == q.start_ns for p, q in zip(x.path, x.path[1:]))


@needs_tracing
def test_path_sums_are_the_breakdown_of_a_new_run(tmp_path):
    """The same on a run traced and analysed now (the fixture is only as new as its analysis)."""
    out = tmp_path / "run"
    r = subprocess.run(
        cli_argv("run", "pipe", "--iterations", "400", "--warmup", "100", "--runs", "1", "--quiet", "--out", str(out)),
        capture_output=True,
        text=True,
        timeout=600,
        env=cli_env(),
        cwd=HOME,
    )
    assert r.returncode == 0, r.stderr
    kept = pq.read_table(out / "breakdown.parquet", columns=["iteration"]).to_pandas()["iteration"].tolist()
    check_path_sums(out, random.Random(7).sample(kept, 20))


@pytest.mark.parametrize(
    "how, kw", [(["--median"], {}), (["--p99"], {"which": "p99"}), (["--iteration", "7"], {"iteration": 7}), ([], {})]
)
def test_explain_real_run(ipctrace, how, kw):
    r = ipctrace("explain", FIXTURE, *how)
    assert r.returncode == 0, r.stderr
    x = explain_dir(FIXTURE, **kw)
    assert r.stdout == render(x) + "\n"  # the text is the Explanation's
    lat = (pq.read_table(FIXTURE / "iterations.parquet").to_pandas()["latency_ns"]).to_numpy()
    if kw.get("iteration") is not None:
        assert (x.iteration, x.how) == (7, "iteration 7")
    elif kw.get("which") == "p99":
        assert x.how == "the 99th percentile of 400" and x.latency_ns == np.sort(lat)[int(np.ceil(0.99 * 400)) - 1]
    else:
        assert x.how == "the median of 400" and x.latency_ns == np.sort(lat)[199]
    assert x.legend[0].startswith("A = measuring (tid ") and x.legend[1].startswith("B = peer (tid ")
    times = [rel for rel, _, _ in x.chain]
    assert times == sorted(times) and times[-1] == x.latency_ns
    texts = [(who, text) for _, who, text in x.chain]
    # A round trip over two pipes: each side writes, wakes the other, reads.
    for who in "AB":
        assert any(w == who and t.startswith("enters write()") for w, t in texts)
        assert any(w == who and t.startswith("read() returns 1") for w, t in texts)
    assert any(w == "A" and t.startswith("wake-up: wakes B") for w, t in texts)
    assert any(w == "B" and t.startswith("wake-up: wakes A") for w, t in texts)
    # Each side's wake-up ends in a line saying how long it took.
    for who in "AB":
        assert any(w == who and t.startswith("on CPU ") and "in the run queue" in t for w, t in texts)
    # The critical path covers the window exactly once, and its sums are the components.
    assert x.path[0].start_ns == 0 and x.path[-1].end_ns == x.latency_ns
    assert all(p.end_ns == q.start_ns for p, q in zip(x.path, x.path[1:]))
    assert x.path_sums() == x.components
    assert sum(x.components.values()) == x.latency_ns
    assert {s.who for s in x.path} <= {"A", "B"}


def test_explain_matches_summary_median():
    """The median iteration's components come from the same computation as breakdown.parquet,
    and the text shows them."""
    x = explain_dir(FIXTURE)
    b = pq.read_table(FIXTURE / "breakdown.parquet").to_pandas()
    row = b[(b["run"] == x.run) & (b["iteration"] == x.iteration)].iloc[0]
    assert x.components == {c: float(row[c]) for c in bd.COMPONENTS}
    assert x.sides == {role: {c: float(row[f"{role}.{c}"]) for c in bd.COMPONENTS} for role in ("measuring", "peer")}
    assert x.tail_label == str(row["tail"])
    text = render(x)
    for c in bd.COMPONENTS:
        assert f"  {c:<12} {x.components[c] / 1000:>9.3f} us" in text
    with open(FIXTURE / "summary.json") as f:
        summary = json.load(f)
    assert summary["breakdown"]["rtt"]["components"]["user"]["n"] == len(b)


def one_line_error(r, code, words):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipctrace: ") and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_explain_bad_input(ipctrace, tmp_path):
    one_line_error(ipctrace("explain", tmp_path / "nowhere"), 2, "does not exist")
    one_line_error(ipctrace("explain", tmp_path), 2, "no summary.json")
    untraced = tmp_path / "untraced"
    shutil.copytree(FIXTURE, untraced)
    (untraced / "events.parquet").unlink()
    one_line_error(ipctrace("explain", untraced), 2, "was not traced")
    one_line_error(ipctrace("explain", FIXTURE, "--metric", "nope"), 2, "no metric 'nope'")
    one_line_error(ipctrace("explain", FIXTURE, "--iteration", "400"), 2, "no iteration 400")
    one_line_error(ipctrace("explain", FIXTURE, "--run", "5"), 2, "run 5 has no iterations")
    r = ipctrace("explain", FIXTURE, "--p99", "--median")
    assert r.returncode == 2 and "not allowed" in r.stderr


def test_a_segments_duration_stays_in_its_column_beside_a_cpu_holder():
    """A long "(CPU held by ...)" does not push the duration out of its column (issue 28,
    point 8): every critical-path row has its duration at the same place."""
    text = render(explain_dir(FIXTURE, which="median"))
    lines = text.splitlines()
    start = lines.index(next(x for x in lines if x.startswith("critical path")))
    rows = [x for x in lines[start + 1 :] if x.startswith("  ") and " .. " in x]
    assert any("CPU held by" in r for r in rows)
    assert len({r.index(" us", r.index(" .. ") + 20) for r in rows}) == 1


@pytest.mark.parametrize(
    "latencies, kw, how",
    [
        # a run of one (a request the watch kept) is named as itself, however it is asked for
        ([2_052_203], {}, "iteration 0"),
        ([2_052_203], {"which": "max"}, "iteration 0"),
        ([2_052_203], {"which": "p99"}, "iteration 0"),
        # a run of several as before
        ([30, 10, 20], {}, "the median of 3"),
        ([30, 10, 20], {"which": "max"}, "the slowest of 3"),
        ([30, 10, 20], {"iteration": 1}, "iteration 1"),
    ],
)
def test_pick_names_how_the_iteration_was_chosen(latencies, kw, how):
    import pandas as pd

    iters = pd.DataFrame({"metric": "rtt", "run": 0, "iteration": range(len(latencies)), "latency_ns": latencies})
    _, got = explain.pick(iters, "rtt", **kw)
    assert got == how


def test_pick_refuses_a_bad_percentile_of_a_run_of_one():
    import pandas as pd

    iters = pd.DataFrame({"metric": ["rtt"], "run": [0], "iteration": [0], "latency_ns": [5]})
    with pytest.raises(UsageError, match="percentile 150"):
        explain.pick(iters, "rtt", which="percentile:150")
