"""The analysis taken in pieces (run/analyse_run.py: Pieces) gives what the whole trace at once gives,
on real traced runs of workloads whose threads behave differently (ping-pong on one CPU and
across two, a thread that never blocks, ZeroMQ's I/O threads, futex, a spinlock), cut into
pieces far smaller than the default; and a damaged events.bin fails with one line and leaves
nothing that looks complete."""

import dataclasses
import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from analysis.errors import UsageError
from analysis.model import activity, breakdown, lost, streaming
from analysis.model import summary as summary_mod
from analysis.run import analyse_run
from analysis.store import events as events_mod
from analysis.store import records, rundir
from analysis.store.host import host_info
from analysis.store.results import read_iterations_bin, read_json, trace_file, workload_file
from conftest import HOME, cli_env, needs_tracing, run_argv

pytestmark = needs_tracing

# Pieces of a few thousand events: a 3 000-iteration run goes through ten or more of them.
SMALL = streaming.Pieces(events=8000, block=3000, lag=500, lead=1500, trail=800, spill=700)

WORKLOADS = {
    "pipe-same-cpu": ("pipe", "--same-cpu"),
    "pipe-cross-cpu": ("pipe", "--cross-cpu"),
    "orwc": ("orwc",),  # one thread in system calls that never blocks: its state from long ago
    "zmq-inproc": ("zmq-inproc",),  # I/O threads on the critical path
    "futex-procs": ("futex", "--procs"),
    "spin-tas-threads": ("spin-tas-threads",),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    made = {}
    base = tmp_path_factory.mktemp("streaming")
    for name, (workload, *opts) in WORKLOADS.items():
        out = base / name
        r = subprocess.run(
            run_argv(workload, out, *opts, "--keep-raw", "--no-calibrate", iterations=3000, warmup=300),
            capture_output=True,
            text=True,
            env=cli_env(),
            cwd=HOME,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr
        made[name] = out
    return made


def fresh(src, dst):
    """A copy of a run's directory as the driver and the tracer left it."""
    shutil.copytree(src, dst)
    for f in ("events.parquet", "breakdown.parquet", "summary.json"):
        (dst / f).unlink(missing_ok=True)
    wl = workload_file(dst)
    it, _ = read_iterations_bin(dst / "iterations.bin", wl.metrics)
    s = summary_mod.build(wl, it, {}, read_json(src / "summary.json")["params"], "complete", [], False, host_info())
    return wl, it, s


def with_lost_spans(d, it):
    """trace.json saying records were lost in two spans: the iterations that overlap them are
    left out of the breakdown (a mask over the iterations, in pieces)."""
    tj = read_json(d / "trace.json")
    t = it["t_start_ns"].to_numpy()
    spans = [[int(t[500]), int(t[520]), 3], [int(t[2000]), int(t[2003]), 2]]
    tj["drops"] = {**tj.get("drops", {}), "total": 5, "lost_spans": spans}
    (d / "trace.json").write_text(json.dumps(tj))


@pytest.mark.parametrize("records_lost", [False, True], ids=["all-kept", "lost-spans"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_pieces_give_what_the_whole_trace_gives(runs, tmp_path, name, records_lost):
    wl, it, s = fresh(runs[name], tmp_path / "pieces")
    if records_lost:
        with_lost_spans(tmp_path / "pieces", it)
    got = analyse_run.finish(tmp_path / "pieces", it, s, sizes=SMALL)
    # The whole trace at once: every event in one frame, the breakdown of it in one go.
    whole_dir = tmp_path / "whole"
    whole_dir.mkdir()
    ev, _, _ = events_mod.load(runs[name] / "events.bin", it, s.primary_metric)
    tj = trace_file(tmp_path / "pieces")
    left_out = lost.incomplete(it, tj.drops)
    if records_lost:
        assert left_out.sum() >= 20
    kept = it[~left_out]
    frame, info = breakdown.compute(kept, ev, wl, None, s.host.machine or "x86_64")
    with rundir.breakdown_written_alongside(frame, whole_dir):
        bd = breakdown.summarize_frame(
            frame,
            info,
            wl,
            primary=s.primary_metric,
            tasks=tj.tasks,
            tracer_tids=tj.tracer.tids,
        )
    assert json.dumps(got.to_json()["breakdown"], sort_keys=True) == json.dumps(
        s.with_breakdown(bd).to_json()["breakdown"], sort_keys=True
    )
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "pieces" / "breakdown.parquet"), pd.read_parquet(whole_dir / "breakdown.parquet")
    )
    pd.testing.assert_frame_equal(events_mod.read_parquet(tmp_path / "pieces"), ev)
    assert got.trace.records == len(ev) and got.trace.in_iterations == int((ev["iteration"] >= 0).sum())


@pytest.mark.parametrize("name", ["pipe-cross-cpu", "zmq-inproc"])
def test_the_whole_trace_view_gathered_a_block_at_a_time_is_that_of_all_events(runs, tmp_path, name):
    """The whole-trace view (a traced program's) from the columns the blocks leave it is the
    one of every event in one frame."""
    _, it, s = fresh(runs[name], tmp_path / "pieces")
    got = analyse_run.finish(tmp_path / "pieces", it, s, whole_trace=True, sizes=SMALL)
    ev, _, _ = events_mod.load(runs[name] / "events.bin", it, s.primary_metric)
    machine = s.host.machine or "x86_64"
    want = activity.summarize(ev, got.trace.file.tasks, got.trace.file.tids, machine)
    assert got.activity == want and len(want.threads) >= 2


def without_switches(path, every, seed):
    """events.bin with every `every`-th switch record left out, at random: the switches a busy
    machine's kernel never traces, whose tasks' system calls the tracer still records."""
    raw = np.fromfile(path, np.uint8)
    head, rec = raw[: events_mod.HEADER.itemsize].view(events_mod.HEADER).copy(), raw[events_mod.HEADER.itemsize :]
    rec = rec.view(events_mod.REC)
    sw = np.flatnonzero(rec["type"] == records.TYPES.index("switch") + 1)
    gone = np.random.default_rng(seed).choice(sw, size=len(sw) // every, replace=False)
    kept = np.delete(rec, gone)
    head[0]["count"] = len(kept)
    np.concatenate((head.view(np.uint8), kept.view(np.uint8))).tofile(path)
    return len(gone)


@pytest.mark.parametrize("every", [50, 200])
@pytest.mark.parametrize("name", ["pipe-cross-cpu", "zmq-inproc", "futex-procs", "orwc"])
def test_the_whole_trace_view_in_blocks_is_that_of_all_events_with_switches_missed(runs, tmp_path, name, every):
    """With switches missed (a switch in after a switch in: the stretch between is unknown), the
    view gathered a block at a time is still the one of all events at once, and no state of a
    thread or a system call is negative (a block's view once counted a thread's steps after its
    last switch before the next block's switch showed them unknown: getpid blocked -11 364 ns)."""
    _, it, s = fresh(runs[name], tmp_path / "pieces")
    for seed in range(3):
        d = tmp_path / f"missed{seed}"
        shutil.copytree(tmp_path / "pieces", d)
        assert without_switches(d / "events.bin", every, seed) >= 1 or name == "orwc"
        got = analyse_run.finish(d, it, s, whole_trace=True, sizes=SMALL)
        ev, _, _ = events_mod.load(d / "events.bin", it, s.primary_metric)
        want = activity.summarize(ev, got.trace.file.tasks, got.trace.file.tids, s.host.machine or "x86_64")
        assert got.activity == want, seed
        for x in [*want.threads, *want.syscalls]:
            assert min(x.states_ns.values()) >= 0, x


def move_late(path, start, count, to):
    """events.bin with records [start, start + count) moved to just before record `to`: a
    CPU's batch that reached the file late."""
    raw = np.fromfile(path, np.uint8)
    head, rec = raw[: events_mod.HEADER.itemsize], raw[events_mod.HEADER.itemsize :].view(events_mod.REC)
    moved = np.concatenate((rec[:start], rec[start + count : to], rec[start : start + count], rec[to:]))
    np.concatenate((head, moved.view(np.uint8))).tofile(path)


def test_records_far_out_of_place_are_put_back_in_time_order(runs, tmp_path):
    """Records moved 20 000 places later (40 blocks of this test's reader) give the same result as
    the file in the tracer's order: found by the first read, merged back where they belong."""
    _, it, s = fresh(runs["pipe-cross-cpu"], tmp_path / "moved")
    move_late(tmp_path / "moved" / "events.bin", 5000, 300, 25000)
    _, it2, s2 = fresh(runs["pipe-cross-cpu"], tmp_path / "plain")
    a = analyse_run.finish(tmp_path / "moved", it, s, sizes=SMALL)
    b = analyse_run.finish(tmp_path / "plain", it2, s2, sizes=SMALL)
    assert a.to_json()["breakdown"] == b.to_json()["breakdown"]
    pd.testing.assert_frame_equal(
        events_mod.read_parquet(tmp_path / "moved"), events_mod.read_parquet(tmp_path / "plain")
    )


def garbage_block(path, at, count):
    raw = np.fromfile(path, np.uint8)
    off = events_mod.HEADER.itemsize + at * events_mod.REC.itemsize
    raw[off : off + count * events_mod.REC.itemsize] = np.random.default_rng(3).integers(
        0, 256, count * events_mod.REC.itemsize, dtype=np.uint8
    )
    raw.tofile(path)


def cut_short(path, at):
    """The file cut in the middle of a record, its header still counting every record."""
    raw = np.fromfile(path, np.uint8)
    raw[: events_mod.HEADER.itemsize + at * events_mod.REC.itemsize + 13].tofile(path)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda p: garbage_block(p, 9000, 200), "unknown type"),
        (lambda p: cut_short(p, 9000), "truncated"),
    ],
    ids=["garbage-block", "cut-short"],
)
def test_a_damaged_events_file_fails_with_one_line_and_no_results(runs, tmp_path, damage, message):
    d = tmp_path / "damaged"
    _, it, s = fresh(runs["pipe-same-cpu"], d)
    damage(d / "events.bin")
    with pytest.raises(UsageError, match=message) as e:
        analyse_run.finish(d, it, s, sizes=SMALL)
    assert "\n" not in str(e.value)
    assert not (d / "events.parquet").exists() and not (d / "breakdown.parquet").exists()
    assert not [p.name for p in d.iterdir() if p.name.startswith(".")], "a temporary file was left"


def test_too_many_records_out_of_place_is_a_damaged_file(runs, tmp_path, monkeypatch):
    d = tmp_path / "shuffled"
    _, it, s = fresh(runs["pipe-same-cpu"], d)
    move_late(d / "events.bin", 1000, 400, 30000)
    monkeypatch.setattr(events_mod.TimeOrder, "MAX_STRAGGLERS", 100)
    with pytest.raises(UsageError, match="out of time order") as e:
        analyse_run.finish(d, it, s, sizes=SMALL)
    assert "\n" not in str(e.value) and not (d / "events.parquet").exists()


def test_the_default_pieces_hold_a_run_of_this_size_whole(runs, tmp_path):
    """A small run is one piece: the same result either way (the default sizes are not tuned to
    make the test pass)."""
    _, it, s = fresh(runs["zmq-inproc"], tmp_path / "default")
    _, it2, s2 = fresh(runs["zmq-inproc"], tmp_path / "small")
    a = analyse_run.finish(tmp_path / "default", it, s)
    b = analyse_run.finish(tmp_path / "small", it2, dataclasses.replace(s2), sizes=SMALL)
    assert a.to_json()["breakdown"] == b.to_json()["breakdown"]
