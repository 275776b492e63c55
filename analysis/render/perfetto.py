"""Chrome trace-event JSON of a traced run, as the Perfetto UI opens it.

One track per thread of the workload (process and thread names from
workload.json), with nested complete ("X") slices: timed iterations on the
measuring thread, syscalls inside them, off-CPU time inside those; flow
arrows ("s" -> "f") from the thread that woke a task to the moment that task
ran again. Timestamps are µs of CLOCK_MONOTONIC, as recorded.
Format: the Trace Event Format document (traceEvents, ph, ts, dur, pid, tid,
id, bp, displayTimeUnit) that Perfetto's JSON importer follows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis.errors import UsageError
from analysis.model import decoded, offcpu
from analysis.model.lost import overlaps_lost
from analysis.store import syscalls as syscall_names
from analysis.store.jsonfiles import Tasks, Workload

if TYPE_CHECKING:
    import numpy.typing as npt

FILE = "trace.perfetto.json"


CONTEXT = 5  # iterations either side of the one --around picks


def _parse_time(text: str) -> int:
    """'1.5s', '250ms', '40us', '1200ns' (or a bare number of ns) -> ns."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(s|ms|us|ns)?\s*", text)
    if not m:
        raise UsageError(f"--window: {text!r} is not a time (e.g. 1.5s, 250ms, 40us)")
    return int(float(m.group(1)) * {"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1, None: 1}[m.group(2)])


def select(
    iterations: pd.DataFrame, metric: str | None, window: str | None, around: str | None
) -> tuple[int, int] | None:
    """The part of the run to write, [lo, hi] ns, or None for all of it.

    window "A:B": iterations A to B (their positions in time order, B included), or times
    since the first iteration with a unit ("1.5s:2s"). around "p99", "max" or an iteration's
    position K: that iteration of metric and CONTEXT iterations either side."""
    it = iterations.sort_values("t_start_ns", kind="stable").reset_index(drop=True)
    if not len(it):
        raise UsageError("the run has no iterations to export")
    if window and around:
        raise UsageError("--window and --around choose the same thing: give one")
    if window:
        a, sep, b = window.partition(":")
        if not sep:
            raise UsageError(f"--window: {window!r} is not A:B")
        if re.fullmatch(r"\s*\d+\s*", a) and re.fullmatch(r"\s*\d+\s*", b):
            lo, hi = int(a), int(b)
            if not 0 <= lo <= hi < len(it):
                raise UsageError(f"--window {window}: the run has iterations 0..{len(it) - 1}")
            return int(it["t_start_ns"].iloc[lo]), int(it["t_end_ns"].iloc[hi])
        t0 = int(it["t_start_ns"].iloc[0])
        lo, hi = t0 + _parse_time(a), t0 + _parse_time(b)
        if hi <= lo:
            raise UsageError(f"--window {window}: the end is not after the start")
        return lo, hi
    if around:
        of = it[it["metric"].astype(str) == metric]
        if not len(of):
            raise UsageError(f"--around: the run has no iterations of {metric}")
        if around == "max":
            k = int(of["latency_ns"].idxmax())
        elif around == "p99":
            target = np.percentile(of["latency_ns"], 99)
            k = int((of["latency_ns"] - target).abs().idxmin())
        elif around.isdigit() and int(around) < len(it):
            k = int(around)
        else:
            raise UsageError(f"--around: {around!r} is not p99, max or an iteration 0..{len(it) - 1}")
        lo, hi = max(k - CONTEXT, 0), min(k + CONTEXT, len(it) - 1)
        return int(it["t_start_ns"].iloc[lo]), int(it["t_end_ns"].iloc[hi])
    return None


def part_name(file: str, window: str | None = None, around: str | None = None) -> str:
    """The file name of an export of a part of the run: FILE with the part in it
    (trace-around-p99.perfetto-trace), so that it never replaces the export of the whole."""
    if not (window or around):
        return file
    stem, dot, ext = file.partition(".")
    part = f"around-{around}" if around else "window-" + re.sub(r"[^0-9A-Za-z.]+", "-", window or "").strip("-")
    return f"{stem}-{part}{dot}{ext}"


def _us(ns: npt.ArrayLike, origin: int) -> np.ndarray:
    return (np.asarray(ns, dtype=np.int64) - origin) / 1000.0


def _nested(tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of the slices (one thread's track each, ns) that nest: taken by start, longest
    first, a slice that begins inside another and ends after it is left out."""
    keep = np.ones(len(tid), bool)
    order = np.lexsort((-(end - start), start, tid))
    stack: list[int] = []
    track = None
    for i in order:
        if tid[i] != track:
            stack, track = [], tid[i]
        while stack and start[i] >= stack[-1]:
            stack.pop()
        if stack and end[i] > stack[-1]:
            keep[i] = False
        else:
            stack.append(end[i])
    return keep


def origin_of(iterations: pd.DataFrame, events: pd.DataFrame) -> int:
    """The trace's time zero (ns): its first iteration or event."""
    return int(
        min(
            iterations["t_start_ns"].min() if len(iterations) else np.iinfo(np.int64).max,
            events["ts"].min() if len(events) else np.iinfo(np.int64).max,
        )
    )


def build(
    iterations: pd.DataFrame,
    events: pd.DataFrame,
    workload: Workload | None,
    tids: Iterable[int] | None = None,
    lost: Sequence[Sequence[int]] = (),
    tasks: Tasks | None = None,
    arch: str = "x86_64",
    lost_total: int | None = None,
) -> list[dict[str, Any]]:
    """DataFrames in, a list of trace-event dicts out.

    tids: the workload's threads (summary trace.tids); only they get tracks. By
    default the threads that made syscalls, which only followed threads record.
    lost: trace.json's lost spans ([start, end, records], ns). Syscall and off-CPU
    slices that overlap one are left out (their open and close may belong to different
    calls, or a switch between them went unseen), each span is drawn on a track of its
    own, and a slice that still would not nest in its thread's track (records lost at
    unknown times) is left out too: the Trace Event Format wants them nested. tasks:
    trace.json's (TraceFile.tasks), for the tracks' names. lost_total: trace.json's count of the
    records lost (drops.total), those at times not recorded too: the lost records as a counter
    (LOST_COUNTER) as well, the records lost so far. Inside a blocked slice, the wake-up
    that ended it as two nested slices: being woken (sched_waking -> sched_wakeup) and in
    the run queue (sched_wakeup -> running).
    """
    ev = events
    origin = origin_of(iterations, ev)
    out: list[dict[str, Any]] = []
    roles = {t.tid: (t.role or "thread", t.pid) for t in (workload.threads if workload else [])}
    if tids is None:
        tids = decoded.calling_tids(ev)
    tids = set(int(t) for t in tids) | set(roles)
    known = ev[ev["tid"].isin(tids)].drop_duplicates("tid")
    pid_of: dict[Any, Any] = dict(zip(known["tid"].astype(np.int64), known["pid"].astype(np.int64)))
    pid_of.update({tid: pid for tid, (_, pid) in roles.items()})
    comm = {tid: task.comm if task else None for tid, task in (tasks or {}).items()}
    for tid, pid in pid_of.items():
        role = roles.get(tid, ("thread",))[0]
        name = f"{role} {tid}" + (f" ({comm[tid]})" if comm.get(tid) else "")
        out.append({"ph": "M", "name": "thread_name", "pid": int(pid), "tid": int(tid), "args": {"name": name}})
    for pid in sorted(set(pid_of.values())):
        out.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": int(pid),
                "tid": int(pid),
                "args": {"name": f"{workload.workload if workload else 'workload'} {pid}"},
            }
        )

    def pid_of_tid(tid: Any) -> int:  # noqa: ANN401 - a tid column's value
        return int(pid_of.get(int(tid), tid))

    # Iterations on the measuring thread.
    it = iterations

    out += pd.DataFrame(
        {
            "ph": "X",
            "cat": "iteration",
            "name": it["metric"].astype(str) + " #" + it["iteration"].astype(str),
            "ts": _us(it["t_start_ns"], origin),
            "dur": (it["t_end_ns"] - it["t_start_ns"]) / 1000.0,
            "pid": it["tid"].map(pid_of_tid).astype(np.int64),
            "tid": it["tid"].astype(np.int64),
            "args": [
                {"run": int(r), "seq": int(s), "latency_ns": int(lat)}
                for r, s, lat in zip(it["run"], it["seq"], it["latency_ns"])
            ],
        }
    ).to_dict("records")

    # Syscalls: the decoded model's calls (by thread, then time).
    decoded_ev = decoded.Events(ev)
    calls = decoded.calls(decoded_ev)
    syscalls = pd.DataFrame(
        {
            "ph": "X",
            "cat": "syscall",
            "name": [syscall_names.name(arch, int(n)) for n in calls.nr],
            "ts": _us(calls.enter, origin),
            "dur": (calls.exit - calls.enter) / 1000.0,
            "pid": calls.pid,
            "tid": calls.tid,
            "args": [{"nr": int(n), "ret": int(r)} for n, r in zip(calls.nr, calls.ret)],
            "start_ns": calls.enter,
            "end_ns": calls.exit,
        }
    )

    # Off CPU, and the wake-up's phases inside a sleep: the threads' step functions' states.
    ours = np.fromiter(pid_of, np.int64)
    off, phases = offcpu.spans(decoded_ev, ours, arch)
    off_cpu, waits = (_sched_slices(f, pid_of, origin) for f in (off, phases))
    kept, left_out = _kept_slices(iterations, [syscalls, off_cpu, waits], lost)
    out += kept
    pid = min(pid_of.values(), default=0)
    out += _lost_track(lost, left_out, origin, pid)
    end = max(
        int(iterations["t_end_ns"].max()) if len(iterations) else origin, int(ev["ts"].max()) if len(ev) else origin
    )
    out += _lost_counter(lost, lost_total, origin, end, pid)

    # Wake-ups: the waker's sched_waking -> the wakee's next switch-in.
    sw = decoded.switches(decoded_ev)
    came = np.isin(sw.next_tid, ours)
    in_ts, in_tid = sw.ts[came], sw.next_tid[came]
    wk = decoded.wakeups(decoded_ev, ("waking",))
    if len(wk.ts) == 0:
        wk = decoded.wakeups(decoded_ev, ("wakeup",))
    waker, wakee, wake_ts = wk.waker, wk.wakee, wk.ts
    # The first switch-in of the wakee at or after the wake-up: one sorted key (thread, time).
    tids = np.unique(np.concatenate([in_tid, wakee]))
    both = np.concatenate([in_ts, wake_ts])
    t0 = both.min() if len(both) else 0
    span = both.max() - t0 + 1 if len(both) else 1
    run_key = np.sort(np.searchsorted(tids, in_tid) * span + (in_ts - t0))
    wake_key = np.searchsorted(tids, wakee) * span + (wake_ts - t0)
    pos = np.searchsorted(run_key, wake_key)
    hi = np.searchsorted(run_key, (np.searchsorted(tids, wakee) + 1) * span)
    r_ts = run_key % span + t0
    # A wake-up taken in a hard interrupt (a timer, an IPI) is not the interrupted task's doing.
    in_irq = wk.in_hardirq
    ok = (pos < hi) & np.isin(waker, ours) & ~in_irq
    flows: list[dict[str, Any]] = []
    for k, (w, t_wake, e, p) in enumerate(zip(waker[ok], wake_ts[ok], wakee[ok], pos[ok])):
        common = {"cat": "wakeup", "name": "wake-up", "id": k + 1}
        flows.append({**common, "ph": "s", "ts": float(_us(t_wake, origin)), "pid": pid_of_tid(w), "tid": int(w)})
        flows.append(
            {
                **common,
                "ph": "f",
                "bp": "e",
                "ts": float(_us(r_ts[p], origin)),
                "pid": pid_of_tid(e),
                "tid": int(e),
            }
        )
    out += flows
    for e in out:
        for key in ("pid", "tid"):
            e[key] = int(e[key])
    return out


def _kept_slices(
    iterations: pd.DataFrame, frames: list[pd.DataFrame], lost: Sequence[Sequence[int]]
) -> tuple[list[dict[str, Any]], int]:
    """(the slices of frames (columns start_ns, end_ns) that overlap no lost span and nest
    among each other and the iterations, as trace-event dicts; how many were left out)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return [], 0
    slices = pd.concat(frames, ignore_index=True)
    total = len(slices)
    slices = slices[
        ~overlaps_lost(slices.rename(columns={"start_ns": "t_start_ns", "end_ns": "t_end_ns"}), lost, False)
    ]
    # The iterations come first: a slice that does not nest is left out, never an iteration.
    n_it = len(iterations)
    tid = np.concatenate([iterations["tid"].to_numpy(np.int64), slices["tid"].to_numpy(np.int64)])
    start = np.concatenate([iterations["t_start_ns"].to_numpy(np.int64), slices["start_ns"].to_numpy(np.int64)])
    end = np.concatenate([iterations["t_end_ns"].to_numpy(np.int64), slices["end_ns"].to_numpy(np.int64)])
    keep = _nested(tid, start, end)[n_it:]
    return slices[keep].drop(columns=["start_ns", "end_ns"]).to_dict("records"), total - int(keep.sum())


# The track of the spans in which the tracer lost records: above the largest pid Linux
# gives (PID_MAX_LIMIT, 2^22), so no task's.
LOST_TID = (1 << 22) + 1


def _lost_track(lost: Sequence[Sequence[int]], left_out: int, origin: int, pid: int) -> list[dict[str, Any]]:
    """A track of the lost spans, named with the count of slices left out; none if nothing was lost."""
    if not len(lost) and not left_out:
        return []
    spans = np.asarray([s[:2] for s in lost], np.int64).reshape(-1, 2)
    name = f"records lost by the tracer ({left_out} syscall and off-CPU slices left out)"
    return [{"ph": "M", "name": "thread_name", "pid": int(pid), "tid": LOST_TID, "args": {"name": name}}] + [
        {
            "ph": "X",
            "cat": "lost",
            "name": "records lost",
            "ts": float(_us(max(s, origin), origin)),
            "dur": (e - max(s, origin)) / 1000.0,
            "pid": int(pid),
            "tid": LOST_TID,
            "args": {"records": int(n)},
        }
        for (s, e), n in zip(spans, [x[2] if len(x) > 2 else 0 for x in lost])
        if e >= origin
    ]


LOST_COUNTER = "records lost by the tracer, so far"


def _lost_counter(
    lost: Sequence[Sequence[int]], total: int | None, origin: int, end: int, pid: int
) -> list[dict[str, Any]]:
    """The records lost so far as counter ("C") events, from origin to end (a part of the run:
    those lost before it are its first value): at the end of each lost span its records added,
    and the records lost at times not recorded (total beyond the spans') at end. None when
    nothing was lost."""
    spans = sorted((int(x[1]), int(x[2]) if len(x) > 2 else 0) for x in lost)
    unknown = max(int(total or 0) - sum(n for _, n in spans), 0)
    so_far = sum(n for t, n in spans if t < origin)
    if not so_far and not unknown and not any(n for t, n in spans if origin <= t <= end):
        return []

    def point(ts: int, n: int) -> dict[str, Any]:
        return {
            "ph": "C",
            "name": LOST_COUNTER,
            "ts": float(_us(ts, origin)),
            "pid": pid,
            "tid": pid,
            "args": {"records": n},
        }

    out = [point(origin, so_far)]
    for t, n in spans:
        if n and origin <= t <= end:
            so_far += n
            out.append(point(t, so_far))
    if unknown:
        out.append(point(end, so_far + unknown))
    return out


def _sched_slices(spans: pd.DataFrame, pid_of: Mapping[int, int], origin: int) -> pd.DataFrame:
    """offcpu.spans' rows as trace-event slices (with start_ns, end_ns for _kept_slices)."""
    start, end = spans["start_ns"].to_numpy(np.int64), spans["end_ns"].to_numpy(np.int64)
    return pd.DataFrame(
        {
            "ph": "X",
            "cat": "sched",
            "name": spans["name"].to_numpy(),
            "ts": _us(start, origin),
            "dur": (end - start) / 1000.0,
            "pid": [int(pid_of.get(int(t), t)) for t in spans["tid"]],
            "tid": spans["tid"].to_numpy(np.int64),
            "start_ns": start,
            "end_ns": end,
        }
    )
