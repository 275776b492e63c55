"""One round trip across two hosts (`ipctrace merge`): the two traces' messages matched by what
they carry, the server's clock aligned to the client's from that matched traffic, and each of
the client's round trips cut into the client's, the network's and the server's parts.

Messages. The probes record a MSG for each write/sendto (at the system call's entry) and each
read/recvfrom (at its exit) of a followed task: the FNV-1a hash of its first 64 bytes and its
length (bpf/ipctrace.h). A message sent on one host and received on the other is one whose
(hash, length) is sent once on the one side and received once on the other; a key seen more
than once on either side (the same bytes sent twice, a file read on both hosts) matches
nothing: a match is never a guess by timing.

Clocks. On the client's clock a, the server's reads b = a + theta(a), theta(a) = offset +
drift * (a - T0) (T0: the client's first matched message). A message from the client to the
server took a delay >= 0, so theta(t_send) <= recv_b - send_a (an upper bound); one from the
server to the client gives theta(t_recv) >= send_b - recv_a (a lower bound). The offset and
drift are the line with the widest margin between the two sets of bounds (a linear program over
the bounds' convex hulls: only they bind), and the error bound is how far any line that keeps
every bound can be from it over the matched span: no clock consistent with the traffic is
further off. Bounds no line keeps (a clock that stepped, or jumped its drift) make the margin
negative: the alignment is then said to be inconsistent and its error is the largest bound it
breaks. Without matched traffic both ways there is no alignment (UsageError: exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis.errors import UsageError
from analysis.model import decoded
from analysis.store import jsonfiles
from analysis.store import messages as msgs_store
from analysis.store.records import MSG_RECV, MSG_SEND

if TYPE_CHECKING:
    from analysis.store.summaryfile import RunSummary

# The parts of a round trip, in time order on the client's clock (they add up to its latency).
PARTS = (
    "client_before",  # the iteration's start to the client's send: its user code and system calls
    "client_send",  # the client's send system call (entry to exit, or to the server's wake-up inside it)
    "network_out",  # the send's exit to the server's wake-up (or its receive's entry if it did not block);
    # 0 where the server was woken inside the send (round_trips: the parts never overlap)
    "server_runqueue",  # the server's wake-up to its running again
    "server_recv",  # running again to its receive returning the message
    "server_user",  # the receive's return to the answer's send: the server's work
    "server_send",  # the server's send system call (to the client's wake-up where that came first)
    "network_back",  # the server's send's exit to the client's wake-up (0 where it was woken inside it)
    "client_runqueue",  # the client's wake-up to its running again
    "client_recv",  # running again to its receive returning the answer
    "client_after",  # the receive's return to the iteration's end
)


def messages(events: pd.DataFrame) -> pd.DataFrame:
    """The MSG records of a trace whose bytes were read: ts, tid, dir, key (store/messages.py)."""
    return msgs_store.read(events)


def match(sender: pd.DataFrame, receiver: pd.DataFrame) -> pd.DataFrame:
    """The messages sender sent and receiver received: those whose key is sent once by the one
    and received once by the other -> ts_send, tid_send, ts_recv, tid_recv, key."""
    s = sender[sender["dir"] == MSG_SEND]
    r = receiver[receiver["dir"] == MSG_RECV]
    s = s[~s["key"].duplicated(keep=False)]
    r = r[~r["key"].duplicated(keep=False)]
    j = s.merge(r, on="key", suffixes=("_send", "_recv"))
    return j[["ts_send", "tid_send", "ts_recv", "tid_recv", "key"]].sort_values("ts_send", ignore_index=True)


@dataclass(frozen=True)
class Alignment:
    """The server's clock on the client's: b = a + offset_ns + drift * (a - t0_ns)."""

    t0_ns: int
    offset_ns: float
    drift: float  # ns per ns (1e-6 is 1 ppm)
    error_ns: float  # no clock line consistent with the matched traffic is further off (over the span)
    consistent: bool  # some line keeps every bound (else error_ns is the largest bound broken)
    out: int  # messages matched client -> server
    back: int  # and server -> client
    span_ns: int  # the client's time from the first to the last matched message
    same_clock: bool = False  # both traces of one boot of one kernel: one clock, nothing to align

    def to_client(self, ts_b: np.ndarray) -> np.ndarray:
        """Server timestamps on the client's clock."""
        ts_b = np.asarray(ts_b, dtype=np.float64)
        return (ts_b - self.offset_ns + self.drift * self.t0_ns) / (1.0 + self.drift)

    def facts(self) -> jsonfiles.MergeClock:
        """The alignment as merge.json (and a merged summary's extra.merge) holds it."""
        return jsonfiles.MergeClock(
            offset_ns=self.offset_ns,
            drift_ppm=self.drift * 1e6,
            error_bound_ns=self.error_ns,
            consistent=self.consistent,
            matched_client_to_server=self.out,
            matched_server_to_client=self.back,
            span_ns=self.span_ns,
            t0_ns=self.t0_ns,
            same_clock=self.same_clock,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonfiles.as_written(self.facts())
        return out


def _hull(x: np.ndarray, y: np.ndarray, lower: bool) -> tuple[np.ndarray, np.ndarray]:
    """The lower (or upper) convex hull of the points (x sorted): the only ones a line below
    (above) them all can touch."""
    sign = 1.0 if lower else -1.0
    keep: list[int] = []
    for i in range(len(x)):
        while len(keep) >= 2:
            a, b = keep[-2], keep[-1]
            cross = (x[b] - x[a]) * (y[i] - y[a]) - (y[b] - y[a]) * (x[i] - x[a])
            if sign * cross <= 0:
                keep.pop()
            else:
                break
        keep.append(i)
    return x[keep], y[keep]


def align(out: pd.DataFrame, back: pd.DataFrame) -> Alignment:
    """The server's clock from the messages matched both ways (out: client -> server, back:
    server -> client; match's frames, client times on the client's clock)."""
    from scipy.optimize import linprog

    if not len(out) or not len(back):
        raise UsageError(
            f"merge: the clocks cannot be aligned: {len(out)} messages matched from the client to the server and "
            f"{len(back)} back; both ways are needed (is each trace the right side of the same connection?)"
        )
    t0 = int(min(out["ts_send"].min(), back["ts_recv"].min()))
    t1 = int(max(out["ts_send"].max(), back["ts_recv"].max()))
    # times in seconds from t0 and bounds in µs keep the program well scaled
    tu = (out["ts_send"].to_numpy(np.int64) - t0) / 1e9
    u = (out["ts_recv"].to_numpy(np.int64) - out["ts_send"].to_numpy(np.int64)) / 1e3
    tl = (back["ts_recv"].to_numpy(np.int64) - t0) / 1e9
    lo = (back["ts_send"].to_numpy(np.int64) - back["ts_recv"].to_numpy(np.int64)) / 1e3
    ou, ol = np.argsort(tu, kind="stable"), np.argsort(tl, kind="stable")
    hu_t, hu = _hull(tu[ou], u[ou], lower=True)
    hl_t, hl = _hull(tl[ol], lo[ol], lower=False)
    # variables: offset (µs), drift (µs/s = ppm), margin (µs); maximise the margin
    a_ub = np.vstack(
        [
            np.column_stack([np.ones_like(hu_t), hu_t, np.ones_like(hu_t)]),  # line + m <= u
            np.column_stack([-np.ones_like(hl_t), -hl_t, np.ones_like(hl_t)]),  # line - m >= l
        ]
    )
    b_ub = np.concatenate([hu, -hl])
    free = [(None, None)] * 3
    best = linprog([0, 0, -1], A_ub=a_ub, b_ub=b_ub, bounds=free, method="highs")
    if best.status != 0:
        raise UsageError(f"merge: the clocks cannot be aligned ({best.message})")
    offset, drift, margin = best.x
    span = (t1 - t0) / 1e9
    if margin >= 0:
        # how far a line keeping every bound can be from ours, at either end of the span
        # (the difference of two lines is largest at an end)
        a_feasible = a_ub[:, :2]
        worst = 0.0
        for at in (0.0, span):
            for sense in (1, -1):
                r = linprog([sense, sense * at], A_ub=a_feasible, b_ub=b_ub, bounds=free[:2], method="highs")
                if r.status == 0:
                    worst = max(worst, abs(r.x[0] + r.x[1] * at - (offset + drift * at)))
        error, consistent = worst, True
    else:
        error, consistent = -margin, False
    return Alignment(
        t0_ns=t0,
        offset_ns=offset * 1e3,
        drift=drift * 1e-6,
        error_ns=error * 1e3,
        consistent=consistent,
        out=len(out),
        back=len(back),
        span_ns=t1 - t0,
    )


def one_clock(out: pd.DataFrame, back: pd.DataFrame) -> Alignment:
    """Both traces were taken on one boot of one kernel (the same boot id: two network
    namespaces, two containers): they read one CLOCK_MONOTONIC, so the offset and the drift are
    exactly 0 and there is no error to bound. Consistent when every message arrived after it
    was sent (else the error is the largest that did not: a record out of order)."""
    if not len(out) or not len(back):
        raise UsageError(
            f"merge: the clocks cannot be aligned: {len(out)} messages matched from the client to the server and "
            f"{len(back)} back; both ways are needed (is each trace the right side of the same connection?)"
        )
    late = np.concatenate(
        [
            out["ts_send"].to_numpy(np.int64) - out["ts_recv"].to_numpy(np.int64),
            back["ts_send"].to_numpy(np.int64) - back["ts_recv"].to_numpy(np.int64),
        ]
    )
    worst = float(max(late.max(), 0))
    t0 = int(min(out["ts_send"].min(), back["ts_recv"].min()))
    t1 = int(max(out["ts_send"].max(), back["ts_recv"].max()))
    return Alignment(
        t0_ns=t0,
        offset_ns=0.0,
        drift=0.0,
        error_ns=worst,
        consistent=worst == 0,
        out=len(out),
        back=len(back),
        span_ns=t1 - t0,
        same_clock=True,
    )


def _last_before(ts: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Index of the last ts <= at (ts sorted), -1 where none."""
    return np.searchsorted(ts, at, side="right") - 1


@dataclass(frozen=True)
class _Side:
    """What round_trips reads of one trace, from its decoded model's tables (built once). A
    system-call record in no call (its other half lost, or beyond the trace's ends: a thread's
    first exit, its exit_group) bounds no part: a part's ends are the calls on its path."""

    calls: decoded.Calls  # the completed system calls of the threads on the path
    wakeups: decoded.Wakeups
    switches: decoded.Switches

    @classmethod
    def of(cls, events: pd.DataFrame, tids: np.ndarray) -> _Side:
        ev = decoded.Events(events)
        return cls(decoded.calls(ev, tids), decoded.wakeups(ev), decoded.switches(ev))

    def marks(self, tid: int) -> dict[str, np.ndarray]:
        """A thread's system calls' entries and exits, wake-ups and switches in (sorted times)."""
        calls = self.calls.of_thread(tid)
        return {
            "enter": calls.enter,
            "exit": calls.exit,
            "wake": self.wakeups.ts[self.wakeups.wakee == tid],
            "in": self.switches.ts[self.switches.next_tid == tid],
        }


def _blocked_part(marks: dict[str, np.ndarray], done: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For receives that returned at done: (entry, wake-up, switch in) of each; where the thread
    did not sleep in it, the wake-up and the switch in are its entry."""
    ent = marks["enter"][np.clip(_last_before(marks["enter"], done), 0, None)] if len(marks["enter"]) else done.copy()
    wake = np.full(len(done), -1, np.int64)
    if len(marks["wake"]):
        w = _last_before(marks["wake"], done)
        ok = w >= 0
        wake[ok] = marks["wake"][w[ok]]
    slept = wake > ent
    wake = np.where(slept, wake, ent)
    run = ent.copy()
    if len(marks["in"]):
        k = _last_before(marks["in"], done)
        ok = k >= 0
        sw = np.where(ok, marks["in"][np.clip(k, 0, None)], -1)
        run = np.where(slept & (sw >= wake), sw, wake)
    return ent, wake, run


def pairs(iterations: pd.DataFrame, out: pd.DataFrame, back: pd.DataFrame) -> pd.DataFrame:
    """The client's iterations whose request and answer were both matched: the first matched
    send of the iteration's thread inside it and the last matched receive of that thread inside
    it, kept where the server received the request before it sent the answer (on its own clock:
    a match outside a round trip, or one the server could not have caused, never aligns the
    clocks). -> index (the iteration's row), send_a, recv_b, tid_b (the request: client send,
    server receive), send_b, recv_a, tid_b_send (the answer)."""
    it = iterations.reset_index(drop=True)
    start = it["t_start_ns"].to_numpy(np.int64)
    end = it["t_end_ns"].to_numpy(np.int64)
    tids = it["tid"].to_numpy(np.int64)
    o = out.sort_values("ts_send", ignore_index=True)
    b = back.sort_values("ts_recv", ignore_index=True)
    if not len(o) or not len(b):
        return pd.DataFrame(columns=["index", "send_a", "recv_b", "tid_b", "send_b", "recv_a", "tid_b_send"])
    req = np.clip(np.searchsorted(o["ts_send"].to_numpy(np.int64), start, side="left"), 0, len(o) - 1)
    ans = np.clip(np.searchsorted(b["ts_recv"].to_numpy(np.int64), end, side="right") - 1, 0, len(b) - 1)
    r, a = o.iloc[req].reset_index(drop=True), b.iloc[ans].reset_index(drop=True)
    ok = (
        (r["ts_send"].to_numpy() >= start)
        & (r["ts_send"].to_numpy() <= end)
        & (r["tid_send"].to_numpy() == tids)
        & (a["ts_recv"].to_numpy() >= start)
        & (a["ts_recv"].to_numpy() <= end)
        & (a["tid_recv"].to_numpy() == tids)
        & (a["ts_recv"].to_numpy() >= r["ts_send"].to_numpy())
        & (r["ts_recv"].to_numpy() <= a["ts_send"].to_numpy())
    )
    return pd.DataFrame(
        {
            "index": np.flatnonzero(ok),
            "send_a": r["ts_send"].to_numpy(np.int64)[ok],
            "recv_b": r["ts_recv"].to_numpy(np.int64)[ok],
            "tid_b": r["tid_recv"].to_numpy(np.int64)[ok],
            "send_b": a["ts_send"].to_numpy(np.int64)[ok],
            "recv_a": a["ts_recv"].to_numpy(np.int64)[ok],
            "tid_b_send": a["tid_send"].to_numpy(np.int64)[ok],
        }
    )


def round_trips(
    iterations: pd.DataFrame,
    client_events: pd.DataFrame,
    server_events: pd.DataFrame,
    joined: pd.DataFrame,
    clock: Alignment,
) -> pd.DataFrame:
    """The joined round trips (pairs' rows) cut into PARTS (ns, on the client's clock): run,
    iteration, seq, latency_ns and the parts. Across hosts (not one clock) with an error bound
    e, the server's times are on the client's clock only to within e: each part also as the
    interval it lies in for the server's clock anywhere within e of the aligned one (PART_low,
    PART_high: the least and the most it is with the server's times moved by -e, 0 and +e, each
    cut as below). Where the aligned clock makes a part 0 (it would be negative, or a cut from
    the other host's clock came after its start: the clock, not the path), the interval says how
    long it may have been; a part with both ends on one clock and no cut moved has low = high.
    On one kernel the parts are exact and there are no intervals."""
    it = iterations.reset_index(drop=True).iloc[joined["index"].to_numpy()].reset_index(drop=True)
    tids = it["tid"].to_numpy(np.int64)
    start = it["t_start_ns"].to_numpy(np.int64)
    end = it["t_end_ns"].to_numpy(np.int64)
    n = len(it)
    send_c, recv_c = joined["send_a"].to_numpy(np.int64), joined["recv_a"].to_numpy(np.int64)
    recv_s, send_s = joined["recv_b"].to_numpy(np.int64), joined["send_b"].to_numpy(np.int64)
    send_c_exit, wake_c, run_c = (np.empty(n, np.int64) for _ in range(3))
    client = _Side.of(client_events, np.unique(tids))
    for tid in np.unique(tids):
        k = tids == tid
        cm = client.marks(int(tid))
        send_c_exit[k] = _first_after(cm["exit"], send_c[k])
        _, wake_c[k], run_c[k] = _blocked_part(cm, recv_c[k])
    wake_s, run_s, send_s_exit = (np.empty(n, np.int64) for _ in range(3))
    srv_recv, srv_send = joined["tid_b"].to_numpy(), joined["tid_b_send"].to_numpy()
    srv_tids = np.unique(np.concatenate([srv_recv, srv_send]))
    server_side = _Side.of(server_events, srv_tids)
    for stid in srv_tids:
        sm = server_side.marks(int(stid))
        k = srv_recv == stid
        _, wake_s[k], run_s[k] = _blocked_part(sm, recv_s[k])
        k = srv_send == stid
        send_s_exit[k] = _first_after(sm["exit"], send_s[k])
    server = {"wake": wake_s, "run": run_s, "recv": recv_s, "send": send_s, "send_exit": send_s_exit}
    ends = (start, send_c, send_c_exit, wake_c, run_c, recv_c, end)
    parts = _cut(ends, {k: clock.to_client(v) for k, v in server.items()})
    out = pd.DataFrame(
        {
            "run": it["run"].to_numpy(),
            "iteration": it["iteration"].to_numpy(),
            "seq": it["seq"].to_numpy(),
            "latency_ns": end - start,
        }
    )
    for i, name in enumerate(PARTS):
        out[name] = parts[i]
    if not clock.same_clock and clock.error_ns > 0:
        moved = [
            _cut(ends, {k: clock.to_client(v) + shift for k, v in server.items()})
            for shift in (-clock.error_ns, clock.error_ns)
        ]
        for i, name in enumerate(PARTS):
            out[f"{name}_low"] = np.minimum.reduce([parts[i], moved[0][i], moved[1][i]])
            out[f"{name}_high"] = np.maximum.reduce([parts[i], moved[0][i], moved[1][i]])
    return out


def _cut(ends: tuple, server: dict) -> np.ndarray:
    """PARTS (rows) of each round trip from the client's times (ends: start, send, send's exit,
    wake-up, running again, receive's return, end) and the server's on the client's clock."""
    start, send_c, send_c_exit, wake_c, run_c, recv_c, end = ends
    wake_s_c, send_s_exit_c = server["wake"], server["send_exit"]
    # Cut on the path's own events, in the path's order: where the server was woken inside the
    # client's send (the kernel delivers and wakes in the send), the send's part ends at that
    # wake-up and the network's is 0, the rest of the send being off the path; the same for the
    # client woken inside the server's send. Each cut is at or after the one before it (a clock
    # aligned across hosts within its error bound can put an event a little early: that part is
    # then 0, never negative) and at or before the round trip's end, so the parts are
    # sequential, none is negative and they add up to the latency. On one kernel the clock is
    # one (one_clock): only the path's order moves a cut.
    marks = [
        start,
        send_c,
        np.minimum(send_c_exit, wake_s_c),
        wake_s_c,
        server["run"],
        server["recv"],
        server["send"],
        np.minimum(send_s_exit_c, wake_c),
        wake_c,
        run_c,
        recv_c,
        end,
    ]
    cuts = np.vstack([np.asarray(x, np.float64) for x in marks])
    cuts = np.minimum(np.maximum.accumulate(cuts, axis=0), np.asarray(end, np.float64))
    return np.diff(cuts, axis=0)


def _first_after(ts: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The first ts >= at (ts sorted); at itself where there is none."""
    if not len(ts):
        return at.copy()
    k = np.searchsorted(ts, at, side="left")
    return np.where(k < len(ts), ts[np.clip(k, 0, len(ts) - 1)], at)


def summary(client_summary: RunSummary, trips: pd.DataFrame, clock: Alignment, merge_facts: dict) -> dict:
    """summary.json of the merged directory: the client's (its workload, host and the statistics
    of all its round trips), its breakdown the parts of the joined round trips (components in
    summary.json's form, so compare, collect and the report read them as any run's), and the
    merge's facts (the clock, the counts) under extra.merge; the client's own trace sections
    (trace, activity, tail) stay in the client's directory."""
    from analysis.model import stats
    from analysis.model.stats import metric_entry

    s = {k: v for k, v in client_summary.to_json().items() if k not in ("trace", "activity", "tail", "breakdown")}
    metric = s.get("primary_metric") or "rtt"
    runs = trips["run"].to_numpy(np.int64)
    components = {}
    for name in PARTS:
        values = trips[name].to_numpy(np.float64)
        table, _ = stats.describe_groups(values, [(name, slice(None), 1.0)], runs)
        components[name] = metric_entry(table.iloc[0])
    s["workload"] = f"merge of {client_summary.workload}"
    # the parts cut the round trip from its start to its end on the client's clock: they close it
    s["breakdown"] = {metric: {"components": components, "critical_path": True, "closure_residual_pct": 0.0}}
    merge = {**merge_facts, "clock": clock.to_json()}
    if intervals := part_intervals(trips):
        merge["intervals"] = intervals
    s["extra"] = {**(s.get("extra") or {}), "merge": merge}
    return s


def part_intervals(trips: pd.DataFrame) -> dict[str, dict[str, float]]:
    """{part: median_low_ns, median_high_ns, mean_low_ns, mean_high_ns} of round_trips' intervals
    (across hosts), of the parts whose interval is not one point in every round trip; {} where
    there are none (one kernel: the parts are exact)."""
    out = {}
    for name in PARTS:
        if f"{name}_low" in trips and len(trips) and (trips[f"{name}_low"] < trips[f"{name}_high"]).any():
            low, high = trips[f"{name}_low"].to_numpy(np.float64), trips[f"{name}_high"].to_numpy(np.float64)
            out[name] = {
                "median_low_ns": float(np.median(low)),
                "median_high_ns": float(np.median(high)),
                "mean_low_ns": float(np.mean(low)),
                "mean_high_ns": float(np.mean(high)),
            }
    return out


def part_stats(x: np.ndarray) -> jsonfiles.PartStats | None:
    """merge.json's statistics of one part (or the latency) over the joined round trips."""
    if not len(x):
        return None
    return jsonfiles.PartStats(
        median=float(np.median(x)), mean=float(np.mean(x)), p99=float(np.percentile(x, 99)), n=int(len(x))
    )


def merge_file(
    client: str,
    server: str,
    hosts: jsonfiles.MergeHosts,
    clock: Alignment,
    messages: jsonfiles.MergeMessages,
    round_trips: int,
    trips: pd.DataFrame,
) -> jsonfiles.MergeFile:
    """merge.json of a merge: the two directories and their hosts, the clock, the messages
    matched, the client's round trips (its iterations) and the parts of those joined (trips:
    round_trips' frame), with their intervals across hosts (part_intervals)."""
    intervals = {name: jsonfiles.PartInterval(**iv) for name, iv in part_intervals(trips).items()}
    return jsonfiles.MergeFile(
        client=client,
        server=server,
        hosts=hosts,
        clock=clock.facts(),
        messages=messages,
        round_trips=round_trips,
        joined=len(trips),
        parts={p: part_stats(trips[p].to_numpy(np.float64)) for p in PARTS},
        intervals=intervals,
        latency=part_stats(trips["latency_ns"].to_numpy(np.float64)),
    )


# Where each part happens and what it is, for explain.
PART_PLACES = {
    "client_before": ("client", "the client's code and system calls before its send"),
    "client_send": ("client", "the client's send system call"),
    "network_out": ("network", "from the client's send to the server's wake-up"),
    "server_runqueue": ("server", "the server woken, waiting for a CPU"),
    "server_recv": ("server", "the server's receive returning the request"),
    "server_user": ("server", "the server's work between its receive and its send"),
    "server_send": ("server", "the server's send system call"),
    "network_back": ("network", "from the server's send to the client's wake-up"),
    "client_runqueue": ("client", "the client woken, waiting for a CPU"),
    "client_recv": ("client", "the client's receive returning the answer"),
    "client_after": ("client", "the client's code after the answer, to the iteration's end"),
}


def explain_merged(
    doc: jsonfiles.MergeFile,
    bd: pd.DataFrame,
    where: str,
    which: str = "median",
    run: int | None = None,
    iteration: int | None = None,
) -> dict:
    """One joined round trip of a merged directory (doc: its merge.json, typed; bd: its
    breakdown.parquet, store.rundir.read_merged; where: the directory, for messages), part by
    part: the one at the median (or p99, max, percentile:P, slowest:K) of the joined round
    trips' latency, or iteration K of run R -> {run, iteration, latency_ns, rank, of, parts:
    [(name, where, start_ns, ns, what)], clock, hosts}; across hosts also intervals: {part:
    [low_ns, high_ns]} of the parts the clock's bound leaves open in it (round_trips)."""
    if not len(bd):
        raise UsageError(f"{where}: no round trip was joined: nothing to explain")
    lat = bd["latency_ns"].to_numpy(np.int64)
    order = np.argsort(lat, kind="stable")
    if iteration is not None:
        hit = np.flatnonzero((bd["iteration"].to_numpy() == iteration) & (bd["run"].to_numpy() == (run or 0)))
        if not len(hit):
            raise UsageError(f"{where}: iteration {iteration} of run {run or 0} was not joined across the hosts")
        row = int(hit[0])
    else:
        kind, _, arg = which.partition(":")
        n = len(order)
        if kind == "max":
            k = n - 1
        elif kind == "slowest":
            k = max(n - int(arg), 0)
        else:
            q = float(arg) if kind == "percentile" else {"median": 50.0, "p99": 99.0}[kind]
            k = min(int(q / 100.0 * n), n - 1)
        row = int(order[k])
    at, parts = 0.0, []
    for name in PARTS:
        ns = float(bd[name].iloc[row])
        where, what = PART_PLACES[name]
        parts.append((name, where, at, ns, what))
        at += ns
    # across hosts: where each part the clock's bound leaves open lies within it
    intervals = {
        name: [float(bd[f"{name}_low"].iloc[row]), float(bd[f"{name}_high"].iloc[row])]
        for name in PARTS
        if f"{name}_low" in bd and bd[f"{name}_low"].iloc[row] < bd[f"{name}_high"].iloc[row]
    }
    return {
        "intervals": intervals,
        "run": int(bd["run"].iloc[row]),
        "iteration": int(bd["iteration"].iloc[row]),
        "latency_ns": int(lat[row]),
        "rank": int(np.flatnonzero(order == row)[0]) + 1,
        "of": len(order),
        "parts": parts,
        "clock": jsonfiles.as_written(doc.clock),
        "hosts": jsonfiles.as_written(doc.hosts),
    }
