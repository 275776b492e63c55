"""The binary Perfetto export (render/perfetto_proto.py), decoded with Perfetto's own protobuf
definitions and held against the JSON export and the breakdown of the stored real run
(tests/fixtures/pipe-traced)."""

import shutil
from collections import defaultdict

import pandas as pd
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from analysis.errors import UsageError
from analysis.render import perfetto, perfetto_proto
from analysis.run import export
from analysis.store import events as events_mod
from analysis.store.results import read_breakdown, read_iterations
from conftest import HOME

FIXTURE = HOME / "tests" / "fixtures" / "pipe-traced"


def decode(data):
    """{track uuid: [(start_ns, end_ns, name, args)]}, the track names, the sched switches
    [(cpu, ts, next_pid, comm)] and the flows (starts, ends), from a serialised Trace."""
    trace = pb.Trace.FromString(data)
    seq = defaultdict(lambda: {"names": {}, "args": {}, "ts": None, "track": 0})
    names, slices, open_, switches, flows = {}, defaultdict(list), defaultdict(list), [], ([], [])
    for p in trace.packet:
        s = seq[p.trusted_packet_sequence_id]
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            s.update(names={}, args={}, ts=p.timestamp, track=p.trace_packet_defaults.track_event_defaults.track_uuid)
            continue
        for n in p.interned_data.event_names:
            s["names"][n.iid] = n.name
        for n in p.interned_data.debug_annotation_names:
            s["args"][n.iid] = n.name
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            names[d.uuid] = d.thread.thread_name or d.process.process_name or d.name
        elif p.HasField("ftrace_events"):
            b = p.ftrace_events
            t = 0
            cs = b.compact_sched
            for dt, pid, ci in zip(cs.switch_timestamp, cs.switch_next_pid, cs.switch_next_comm_index):
                t += dt
                switches.append((b.cpu, t, pid, cs.intern_table[ci]))
        elif p.HasField("track_event"):
            s["ts"] += p.timestamp
            e = p.track_event
            track = e.track_uuid or s["track"]
            if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                args = {
                    s["args"][a.name_iid]: (a.int_value if a.HasField("int_value") else a.string_value)
                    for a in e.debug_annotations
                }
                open_[track].append((s["ts"], s["names"][e.name_iid], args))
            elif e.type == pb.TrackEvent.TYPE_SLICE_END:
                start, name, args = open_[track].pop()
                slices[track].append((start, s["ts"], name, args))
            else:
                for f in e.flow_ids:
                    flows[0].append((f, s["ts"]))
                for f in e.terminating_flow_ids:
                    flows[1].append((f, s["ts"]))
    assert not any(open_.values()), "a slice was begun and never ended"
    return slices, names, switches, flows


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("proto") / "run"
    shutil.copytree(FIXTURE, d)
    return d


def test_the_slices_are_the_json_exports(run):
    data = export.perfetto_proto(run).read_bytes()
    slices, names, _, flows = decode(data)
    it, ev = read_iterations(run), events_mod.read_parquet(run)
    built = perfetto.build(it, ev, None, None)
    origin = perfetto.origin_of(it, ev)
    want = sorted(
        (origin + round(e["ts"] * 1000), origin + round((e["ts"] + e["dur"]) * 1000), e["name"])
        for e in built
        if e["ph"] == "X"
    )
    # every slice: iterations, syscalls, off-CPU time and its wake-up phases, lost spans
    got = sorted((a, b, n) for track in slices.values() for a, b, n, _ in track)
    assert got == want and len(got) > 1000
    # each flow starts once and ends once
    assert sorted(f for f, _ in flows[0]) == sorted(f for f, _ in flows[1])


def test_each_iteration_carries_its_breakdown(run):
    slices, _, _, _ = decode(export.perfetto_proto(run).read_bytes())
    its = {a["seq"]: a for track in slices.values() for _, _, n, a in track if n.startswith("rtt #")}
    bd = read_breakdown(run)
    assert len(its) == len(bd)
    for row in bd.itertuples():
        a = its[row.seq]
        for c in ("user", "syscall", "wakeup", "runqueue"):
            assert a.get(f"{c}_ns", 0) == round(getattr(row, c)), (row.seq, c)


def test_the_cpus_show_every_context_switch_with_its_task(run):
    _, _, switches, _ = decode(export.perfetto_proto(run).read_bytes())
    ev = events_mod.read_parquet(run)
    sw = ev[ev["type"].astype(str) == "switch"]
    assert sorted((c, t, p) for c, t, p, _ in switches) == sorted(
        zip(sw["cpu"].astype(int), sw["ts"].astype(int), sw["next_tid"].astype(int))
    )
    assert {comm for *_, comm in switches} >= {"ipcbench", "swapper"}


def test_a_few_bytes_per_event(run):
    # 24 B per kernel event on this run (the JSON export: 86)
    size = export.perfetto_proto(run).stat().st_size
    assert size / len(events_mod.read_parquet(run)) <= 30


@pytest.mark.parametrize("around", ["max", "p99", "7"])
def test_around_writes_an_iteration_and_five_either_side(run, around):
    it = read_iterations(run).sort_values("t_start_ns").reset_index(drop=True)
    slices, _, _, _ = decode(export.perfetto_proto(run, around=around).read_bytes())
    seqs = sorted(a["seq"] for track in slices.values() for _, _, n, a in track if n.startswith("rtt #"))
    k = {"max": int(it["latency_ns"].idxmax()), "7": 7}.get(around)
    assert len(seqs) == 11 and (k is None or int(it["seq"].iloc[k]) in seqs)


def test_window_by_iterations_and_by_time(run):
    it = read_iterations(run).sort_values("t_start_ns").reset_index(drop=True)
    slices, _, _, _ = decode(export.perfetto_proto(run, window="10:19").read_bytes())
    seqs = sorted(a["seq"] for track in slices.values() for _, _, n, a in track if n.startswith("rtt #"))
    assert seqs == sorted(it["seq"].iloc[10:20].tolist())
    assert perfetto_proto.select(it, "rtt", "0us:1ms", None) == (
        it["t_start_ns"].iloc[0],
        it["t_start_ns"].iloc[0] + 1_000_000,
    )


@pytest.mark.parametrize(
    "window, around, says",
    [
        ("5:2", None, "the run has iterations"),
        ("2:x", None, "is not a time"),
        ("7", None, "is not A:B"),
        (None, "p50", "is not p99, max or an iteration"),
        ("1:2", "max", "give one"),
    ],
)
def test_bad_parts_are_usage_errors(window, around, says):
    it = pd.DataFrame({"t_start_ns": [0, 10, 20], "t_end_ns": [5, 15, 25], "latency_ns": [5, 5, 5], "metric": "rtt"})
    with pytest.raises(UsageError, match=says):
        perfetto_proto.select(it, "rtt", window, around)


def counters(data):
    """{counter track's name: [(ts_ns, value)]} of a serialised Trace."""
    trace = pb.Trace.FromString(data)
    names, ts, track, out = {}, {}, {}, defaultdict(list)
    for p in trace.packet:
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            ts[seq], track[seq] = p.timestamp, p.trace_packet_defaults.track_event_defaults.track_uuid
            continue
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("counter"):
            names[p.track_descriptor.uuid] = p.track_descriptor.name
        elif p.HasField("track_event"):
            ts[seq] += p.timestamp
            if p.track_event.type == pb.TrackEvent.TYPE_COUNTER:
                out[p.track_event.track_uuid or track[seq]].append((ts[seq], p.track_event.counter_value))
    return {names[k]: v for k, v in out.items()}


def test_the_records_lost_are_a_counter_track(tmp_path):
    """The tracer's losses (trace.json's drops) as a counter of the records lost so far: 0 at the
    start, each lost span's records added at its end, those lost at times not recorded at the
    end of the trace, so the last value is the tracer's total; a trace without losses has none."""
    import json

    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    assert perfetto.LOST_COUNTER not in counters(export.perfetto_proto(run).read_bytes())  # nothing lost
    it = read_iterations(run).sort_values("t_start_ns").reset_index(drop=True)
    a, b = int(it["t_start_ns"].iloc[10]), int(it["t_start_ns"].iloc[40])
    spans = [[a, a + 2000, 5], [b, b + 3000, 7], [b + 5000, b + 6000, 0]]  # the last: a switch missed
    (run / "trace.json").write_text(json.dumps({"drops": {"total": 20, "lost_spans": spans}}))
    got = counters(export.perfetto_proto(run).read_bytes())[perfetto.LOST_COUNTER]
    end = max(int(it["t_end_ns"].max()), int(events_mod.read_parquet(run)["ts"].max()))
    origin = perfetto.origin_of(it, events_mod.read_parquet(run))
    assert got == [(origin, 0), (a + 2000, 5), (b + 3000, 12), (end, 20)]
    # the JSON export has the same counter ("C" events)
    doc = json.loads(export.perfetto_json(run).read_text())
    json_points = [e["args"]["records"] for e in doc["traceEvents"] if e["ph"] == "C"]
    assert json_points == [0, 5, 12, 20]
