"""Iterations a program marks itself (`ipctrace trace --markers`: the USDT probes of
examples/ipctrace_marker.h) or that a function's calls delimit (`--iteration-func
BINARY:FUNCTION`: a uprobe at its entry, a uretprobe at its return). Both reach the trace
as `mark` records (bpf/ipctrace.h; decoded.marks): MARK_BEGIN (1) begins an iteration,
MARK_END (2) ends one, each with the address of its metric name in the program (0: none),
whose text trace.json's marks.names holds.

On each thread an end closes the latest begin still open (a recursive function's calls
nest); an end without a begin (the trace started inside an iteration) and a begin never
ended (it ended inside one) give no iteration. The metric is the name at the end, else at
the begin, else `iteration`.

Part of the probes' own cost lies inside each window: the begin's program reads the clock
and then records and returns to the program, the end's is entered before it reads the clock
(on x86 6.18: a marker is a call into the kernel, a function's entry a trap with its return
probe a call). `ipcbench exec` runs empty windows under the same programs before it becomes
the traced command (workloads/probecal.c); their median is that in-window cost, and the same
windows with a clock read inside split it between the begin's tail and the end's head
(`calibration`). `windows` then starts each iteration that much later and ends it that much
earlier, so that the latency and every component of the breakdown leave the probes out; it
does so only where the traced probes sit on what the calibration's do (a 5-byte no-op, a
push %rbp), as the kernel handles other instructions at other costs (a trap on a 1-byte
no-op, a single step on endbr64)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from analysis.model import decoded
from analysis.model.rtt import as_iterations
from analysis.store.jsonfiles import Marks
from analysis.store.records import MARK_BEGIN, MARK_END

UNNAMED = "iteration"


# What the calibration's probes sit on (workloads/probecal.c): a marker's 5-byte no-op, which
# the kernel turns into a call, and a function's frame-pointer prologue, push %rbp, emulated.
CAL_SITES = {"usdt": ("0f1f440000", "a 5-byte no-op"), "uprobe": ("55", "push %rbp")}
MODES = {"usdt": "markers", "uprobe": "function"}


def _pairs(ts: np.ndarray, kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(begins, ends) of one thread's marks in time order, each end with the begin before it."""
    starts, ends = [], []
    last = None
    for t, a in zip(ts.tolist(), kind.tolist()):
        if a == MARK_BEGIN:
            last = t
        elif a == MARK_END and last is not None:
            starts.append(last)
            ends.append(t)
            last = None
    return np.array(starts, np.int64), np.array(ends, np.int64)


def _cal_marks(ev: pd.DataFrame, probes: dict[str, Any] | None) -> np.ndarray:
    """Which rows of ev are the calibration's marks (its thread, within its span)."""
    is_mark = decoded.of_type(ev, "mark")
    if not probes or "span" not in probes or "tid" not in probes:
        return np.zeros(len(ev), bool)
    ts = ev["ts"].to_numpy(np.int64)
    lo, hi = (int(x) for x in probes["span"])
    return is_mark & (ev["tid"].to_numpy() == int(probes["tid"])) & (ts >= lo) & (ts <= hi)


def calibration(ev: pd.DataFrame, marks: Marks | None, probes: dict[str, Any] | None) -> dict[str, Any]:
    """The probes' in-window cost for this trace's kind of probe (trace.json marks.sites),
    from the calibration's windows (probes: what `ipcbench exec` wrote). probe_in_window_ns
    is None, with the reason in source, where there is nothing to subtract."""
    sites = marks.sites if marks else []
    kinds = sorted({s.kind for s in sites if s.kind in CAL_SITES})
    out: dict[str, Any] = {"mode": None, "probe_in_window_ns": None, "begin_tail_ns": None, "end_head_ns": None}
    if len(kinds) != 1:
        out["source"] = "not calibrated: " + ("markers and functions together" if kinds else "no probes")
        return out
    kind = kinds[0]
    out["mode"] = MODES[kind]
    want, what = CAL_SITES[kind]
    other = [(s.target, b) for s in sites for b in (s.bytes or [""]) if not b.startswith(want)]
    if other:
        target, got = other[0]
        out["source"] = (
            f"not calibrated: the probe in {target} sits on "
            + (f"bytes {got}" if got else "bytes that could not be read")
            + f", the calibration's on {what} (the kernel's cost differs)"
        )
        return out
    cal = marks.calibration if marks else None
    if not probes or not cal or not cal.probes:
        out["source"] = "not calibrated: " + (
            (cal.error if cal else None)
            or (
                "the probes were not attached to the calibration"
                if probes
                else "no calibration ran (ipcbench exec runs it before a command; --pid, --comm have none)"
            )
        )
        return out
    sel = _cal_marks(ev, probes)
    m = decoded.marks(ev, sel)  # the calibration's thread only: in time order
    b, e = _pairs(m.ts, m.kind)
    phases = np.asarray(probes.get("phases") or [], np.int64).reshape(-1, 2)
    if len(phases) != 4:
        out["source"] = "not calibrated: the calibration has no phases"
        return out
    k = 0 if kind == "usdt" else 2
    empty = (b >= phases[k][0]) & (e <= phases[k][1])
    timed = (b >= phases[k + 1][0]) & (e <= phases[k + 1][1])
    mid = np.sort(np.asarray(probes.get("mid_usdt" if kind == "usdt" else "mid_function") or [], np.int64))
    # each timed window's clock read: the first at or after its begin, if before its end
    j = np.searchsorted(mid, b[timed])
    has = j < len(mid)
    bt, et, mt = b[timed][has], e[timed][has], mid[j[has]]
    inside = mt <= et
    if empty.sum() < 10 or inside.sum() < 10:
        out["source"] = (
            f"not calibrated: {int(empty.sum())} empty and {int(inside.sum())} timed calibration windows traced"
        )
        return out
    whole = float(np.median(e[empty] - b[empty]))
    tail = float(np.median(mt[inside] - bt[inside]))
    head = float(np.median(et[inside] - mt[inside]))
    begin_tail = int(round(whole * tail / (tail + head))) if tail + head > 0 else 0
    out.update(
        probe_in_window_ns=int(round(whole)),
        begin_tail_ns=begin_tail,
        end_head_ns=int(round(whole)) - begin_tail,
        windows=int(empty.sum()),
        source=f"calibrated: the median of {int(empty.sum())} empty windows on CPU {probes.get('cpu', '?')} "
        "at the start, split as the same windows with a clock read inside",
    )
    return out


def windows(
    ev: pd.DataFrame,
    marks: Marks | None,
    unnamed: str = UNNAMED,
    probes: dict[str, Any] | None = None,
    cal: dict[str, Any] | None = None,
) -> pd.DataFrame:
    """The marked iterations of every thread, as the iterations frame a workload gives;
    unnamed: the metric of those without a name (--iteration-func: the function's). probes: the
    calibration `ipcbench exec` ran (its marks are none of the program's); cal: what
    `calibration` made of it (each window shrunk by the probes' share, if it has one)."""
    names = dict(marks.names) if marks else {}
    keep = decoded.of_type(ev, "mark") & ~_cal_marks(ev, probes)
    m = decoded.marks(ev, keep)
    starts, ends, tids, cpus, metric = [], [], [], [], []
    bounds = np.flatnonzero(np.r_[True, m.tid[1:] != m.tid[:-1], True]) if len(m.tid) else np.zeros(1, np.intp)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        tid = m.tid[a]
        open_ = []  # (ts, cpu, name address) of the begins not yet ended, innermost last
        for ts, kind, at, cpu in zip(m.ts[a:b], m.kind[a:b], m.name[a:b], m.cpu[a:b]):
            if kind == MARK_BEGIN:
                open_.append((ts, cpu, at))
            elif kind == MARK_END and open_:
                t0, c0, a_begin = open_.pop()
                starts.append(t0)
                ends.append(ts)
                tids.append(tid)
                cpus.append(c0)
                metric.append(names.get(int(at)) or names.get(int(a_begin)) or unnamed)
    labels = list(dict.fromkeys(metric)) or [unnamed]
    code = np.array([labels.index(x) for x in metric], np.int64)
    start_ts, end_ts = np.array(starts, np.int64), np.array(ends, np.int64)
    if cal and cal.get("probe_in_window_ns") is not None:
        start_ts, end_ts = start_ts + int(cal["begin_tail_ns"]), end_ts - int(cal["end_head_ns"])
        # a window shorter than the probes' share (an empty one, noise): none of it is the program's
        mid = (start_ts + end_ts) // 2
        short = end_ts < start_ts
        start_ts[short], end_ts[short] = mid[short], mid[short]
    return as_iterations(
        start_ts,
        end_ts,
        np.array(tids, np.int64),
        np.array(cpus, np.int64),
        code,
        labels,
    )
