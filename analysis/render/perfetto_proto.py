"""A traced run as a binary Perfetto trace (trace.perfetto-trace), written with Perfetto's own
protobuf definitions (the `perfetto` package): the slices of the JSON export (perfetto.build:
iterations, syscalls, off-CPU time and its wake-up phases, lost spans and the records lost so
far as a counter, wake-up flows), each
iteration slice carrying its breakdown as arguments, and the CPUs' context switches as the
kernel's sched records in Perfetto's compact form (the UI's CPU tracks: what ran on each CPU).

Compact for long runs: names are interned (each string sent once per sequence), times are
deltas on an incremental clock (ClockSnapshot: clock 64 starts at the trace's origin on
CLOCK_MONOTONIC), and --window / --around write only a part of the run."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from analysis.model import decoded
from analysis.render import perfetto
from analysis.render.perfetto import CONTEXT, select  # noqa: F401 - --around's context; the part to write
from analysis.store.jsonfiles import Tasks

FILE = "trace.perfetto-trace"
SEQUENCE = 1
CLOCK = 64  # sequence-scoped, incremental: each packet's timestamp is ns since the previous one
MONOTONIC = 3  # BUILTIN_CLOCK_MONOTONIC
BOOTTIME = 6  # BUILTIN_CLOCK_BOOTTIME


BUNDLE = 10_000  # switches per ftrace bundle
IDLE_PRIO, TASK_PRIO = 120, 120  # not recorded; the kernel's default


def cpu_bundles(events: pd.DataFrame, tasks: Tasks | None) -> list[pb.FtraceEventBundle]:
    """What ran on each CPU as the kernel's own sched_switch records in Perfetto's compact form
    (the UI's CPU tracks, with the tasks' names): per CPU, bundles of switch times (the first
    absolute, then deltas), the previous task's state, and the next task's pid and name
    (interned per bundle)."""
    sw = decoded.switches(decoded.Events(events))
    comm = {tid: (task.comm if task else None) or f"task {tid}" for tid, task in (tasks or {}).items()}
    out = []
    by_cpu = np.argsort(sw.cpu, kind="stable")  # each CPU's in time order
    cpus, first = np.unique(sw.cpu[by_cpu], return_index=True)
    for c, rows in zip(cpus.tolist(), np.split(by_cpu, first[1:])):
        ts, state, nxt = sw.ts[rows], sw.prev_state[rows], sw.next_tid[rows]
        for lo in range(0, len(ts), BUNDLE):
            hi = min(lo + BUNDLE, len(ts))
            bundle = pb.FtraceEventBundle(cpu=int(c))
            cs = bundle.compact_sched
            names: dict[str, int] = {}
            deltas = np.diff(ts[lo:hi], prepend=0)
            cs.switch_timestamp.extend(int(d) for d in deltas)
            cs.switch_prev_state.extend(int(x) for x in state[lo:hi])
            cs.switch_next_pid.extend(int(t) for t in nxt[lo:hi])
            cs.switch_next_prio.extend([TASK_PRIO] * (hi - lo))
            for t in nxt[lo:hi]:
                name = "swapper" if t <= 0 else comm.get(int(t), f"task {t}")
                cs.switch_next_comm_index.append(names.setdefault(name, len(names)))
            cs.intern_table.extend(names)
            out.append(bundle)
    return out


class _Writer:
    """TracePackets on one sequence: interned names, incremental timestamps; events on the
    sequence's own track (one sequence per track) name no track (2 bytes a packet)."""

    def __init__(self, origin: int, sequence: int = SEQUENCE, track: int = 0):
        self.trace = pb.Trace()
        self.sequence, self.own_track = sequence, track
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.arg_names: dict[str, int] = {}
        self.last = origin
        first = self.trace.packet.add()
        first.trusted_packet_sequence_id = sequence
        first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        first.trace_packet_defaults.timestamp_clock_id = CLOCK
        if track:
            first.trace_packet_defaults.track_event_defaults.track_uuid = track
        first.timestamp_clock_id = MONOTONIC
        first.timestamp = origin
        # The run's times are CLOCK_MONOTONIC; the sched records are taken as on BOOTTIME (the
        # clock ftrace records use), the same times: only differences matter within the trace.
        for clock_id, incremental in ((MONOTONIC, False), (BOOTTIME, False), (CLOCK, True)):
            c = first.clock_snapshot.clocks.add()
            c.clock_id, c.timestamp, c.is_incremental = clock_id, origin, incremental

    def _packet(self, ts: int | None = None) -> pb.TracePacket:
        # No SEQ_NEEDS_INCREMENTAL_STATE: it only lets a reader drop packets after lost data,
        # and a file written whole has none (2 bytes a packet).
        p = self.trace.packet.add()
        p.trusted_packet_sequence_id = self.sequence
        if ts is not None:
            p.timestamp = ts - self.last
            self.last = ts
        return p

    def _iid(self, table: dict[str, int], field: str, packet: pb.TracePacket, name: str) -> int:
        iid = table.get(name)
        if iid is None:
            iid = table[name] = len(table) + 1
            entry = getattr(packet.interned_data, field).add()
            entry.iid, entry.name = iid, name
        return iid

    def track(
        self,
        uuid: int,
        name: str,
        pid: int | None = None,
        tid: int | None = None,
        parent: int = 0,
        counter: bool = False,
    ) -> None:
        p = self._packet()
        d = p.track_descriptor
        d.uuid = uuid
        if parent:
            d.parent_uuid = parent
        if counter:
            d.counter.unit = pb.CounterDescriptor.UNIT_COUNT
        if tid is not None:
            d.thread.pid, d.thread.tid, d.thread.thread_name = pid, tid, name
        elif pid is not None:
            d.process.pid, d.process.process_name = pid, name
        else:
            d.name = name

    def sched(self, bundles: list[pb.FtraceEventBundle]) -> None:
        for b in bundles:
            p = self.trace.packet.add()
            p.trusted_packet_sequence_id = SEQUENCE
            p.ftrace_events.CopyFrom(b)

    def event(
        self,
        ts: int,
        kind: int,
        track: int,
        name: str = "",
        cat: str = "",
        args: dict[str, Any] | float | None = None,
        flow: int | None = None,
        ends_flow: int | None = None,
    ) -> None:
        p = self._packet(ts)
        e = p.track_event
        e.type = kind
        if track != self.own_track:
            e.track_uuid = track
        if name:
            e.name_iid = self._iid(self.names, "event_names", p, name)
        if cat and cat not in ("syscall", "sched", "wakeup"):  # the common ones go without (bytes)
            e.category_iids.append(self._iid(self.cats, "event_categories", p, cat))
        named = args if isinstance(args, dict) else {}
        if kind == pb.TrackEvent.TYPE_COUNTER:
            if isinstance(args, dict) or args is None:
                raise TypeError("a counter event takes its value as args")
            e.counter_value = int(args)  # a counter's value, in place of arguments
            named = {}
        for key, value in named.items():
            a = e.debug_annotations.add()
            a.name_iid = self._iid(self.arg_names, "debug_annotation_names", p, key)
            if isinstance(value, (int, np.integer)):
                a.int_value = int(value)
            elif isinstance(value, (float, np.floating)):
                a.double_value = float(value)
            else:
                a.string_value = str(value)
        if flow is not None:
            e.flow_ids.append(flow)
        if ends_flow is not None:
            e.terminating_flow_ids.append(ends_flow)


def encode(trace_events: list[dict], origin: int, sched: list[pb.FtraceEventBundle], iteration_args: dict) -> bytes:
    """perfetto.build's trace-event dicts (µs since origin), the CPUs' sched records and each
    iteration's arguments ({(run, seq): {name: value}}) as one serialised Trace."""
    w = _Writer(origin)
    w.sched(sched)

    def ns(us: float) -> int:
        return origin + int(round(us * 1000))

    threads, processes = {}, {}
    for e in trace_events:
        if e["ph"] == "M" and e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif e["ph"] == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    # ("p", pid) a process's track, (pid, tid) a thread's, ("C", pid, name) a counter's
    uuid: dict[tuple[Any, ...], int] = {}
    for pid, name in processes.items():
        uuid[("p", pid)] = len(uuid) + 1
        w.track(uuid[("p", pid)], name, pid=pid)
    for (pid, tid), name in threads.items():
        uuid[(pid, tid)] = len(uuid) + 1
        if tid == perfetto.LOST_TID:
            w.track(uuid[(pid, tid)], name)
        else:
            w.track(uuid[(pid, tid)], name, pid=pid, tid=tid, parent=uuid.get(("p", pid), 0))

    def track_of(pid: int, tid: int) -> int:
        key = (pid, tid)
        if key not in uuid:
            uuid[key] = len(uuid) + 1
            w.track(uuid[key], f"thread {tid}", pid=pid, tid=tid)
        return uuid[key]

    # (time, rank, order, ...): at one time ends come before begins, inner ends before outer
    # ones (later start first) and outer begins before inner ones (longer first).
    BEGIN, END, INSTANT = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END, pb.TrackEvent.TYPE_INSTANT
    COUNTER = pb.TrackEvent.TYPE_COUNTER
    todo: list[tuple[Any, ...]] = []
    for e in trace_events:
        if e["ph"] == "X":
            t0, t1 = ns(e["ts"]), ns(e["ts"] + e["dur"])
            tr = track_of(e["pid"], e["tid"])
            args = e.get("args")
            args = args if isinstance(args, dict) else {}  # slices made from frames: NaN where none
            # every slice and flow has its category (perfetto.build); an iteration's args its run and seq
            if e["cat"] == "iteration":
                args = {**args, **iteration_args.get((args["run"], args["seq"]), {})}
            elif e["cat"] == "syscall":
                args = {"ret": args["ret"]}  # its number is in its name
            todo.append((t0, 1, -(t1 - t0), BEGIN, tr, e["name"], e["cat"], args, None, None))
            todo.append((t1, 0, -t0, END, tr, "", "", None, None, None))
        elif e["ph"] in ("s", "f"):
            start = e["ph"] == "s"
            todo.append(
                (
                    ns(e["ts"]),
                    2,
                    0,
                    INSTANT,
                    track_of(e["pid"], e["tid"]),
                    e["name"],
                    e["cat"],
                    None,
                    e["id"] if start else None,
                    None if start else e["id"],
                )
            )
        elif e["ph"] == "C":
            # a counter (perfetto.LOST_COUNTER): a track of its own, under the process's
            key = ("C", e["pid"], e["name"])
            if key not in uuid:
                uuid[key] = len(uuid) + 1
                w.track(uuid[key], e["name"], parent=uuid.get(("p", e["pid"]), 0), counter=True)
            value = next(iter(e["args"].values()))
            todo.append((ns(e["ts"]), 2, 0, COUNTER, uuid[key], "", "", value, None, None))
    todo.sort(key=lambda x: x[:3])
    per_track: dict[int, _Writer] = {}
    for t, _, _, kind, tr, name, cat, args, flow, ends in todo:
        if tr not in per_track:
            per_track[tr] = _Writer(origin, SEQUENCE + 1 + len(per_track), tr)
        per_track[tr].event(t, kind, tr, name, cat, args, flow, ends)
    # Traces concatenated are one Trace (its packets are a repeated field).
    return w.trace.SerializeToString() + b"".join(x.trace.SerializeToString() for x in per_track.values())
