"""The entry path's cost (the time a system call spends between user space and its sys_enter,
and from its sys_exit back), estimated from the driver's entry calibration (workload.json
entry_calibration) joined with its traced calls."""

from __future__ import annotations

from typing import Any

import numpy as np

from analysis.model.timeline import Events
from analysis.store.jsonfiles import Workload


def _where_timed(cpus: list[int], cal: dict[str, Any], workload: Workload) -> str:
    """Where the entry calibration ran and what that says of the program's CPUs: a run's
    measuring thread times it on its own CPU; `ipctrace trace` before the program starts, in
    --cpus if given, else wherever the scheduler put it (a program that places itself, as
    taskset -c in CMD does, runs elsewhere: the path is taken as costing the same there)."""
    cpus = cpus or ([int(cal["cpu"])] if cal.get("cpu") is not None else [])
    on = f"on CPU{'s' if len(cpus) > 1 else ''} {','.join(map(str, cpus))}" if cpus else "on a CPU not known"
    params = workload.params
    if not params.get("iterations_from"):
        measuring = [t.cpu for t in workload.threads if t.role == "measuring"]
        moved = measuring and measuring[0] >= 0 and cpus and cpus != measuring[:1]
        return f"{on} at the run's start" + (f" (the measuring thread's CPU: {measuring[0]})" if moved else "")
    if params.get("cpus"):
        return f"{on} before the program started (within its --cpus {','.join(map(str, params['cpus']))})"
    return (
        f"{on} before the program started, unplaced: a program that places itself (taskset -c in its "
        "command) may run elsewhere; the entry path is taken as costing the same on every CPU"
    )


def entry_costs(ev: Events, workload: Workload) -> tuple[int, int, dict[str, Any]]:
    """(ns of the entry path before sys_enter, after sys_exit, what they rest on) from the
    driver's calibration (workload.json entry_calibration), joined with its traced calls.
    The whole: the mean gap from one call's sys_exit to the next one's sys_enter where the
    calls run back to back ("tight"; gaps over ten times the median left out). Its split: the null syscalls timed by the workload's
    clock, t0 before and t1 after each, as median(sys_enter - t0) against
    median(t1 - sys_exit) (the clock reads overlap the paths: a loop with them runs no
    slower than one without). (0, 0, why) where there is no calibration to join."""
    cal = workload.entry_calibration or {}
    calls = np.asarray(cal.get("calls") or [], np.int64).reshape(-1, 2)
    if not len(calls) or "tid" not in cal or "syscall_nr" not in cal:
        why = cal.get("absent") or "the run has no entry calibration (older driver)"
        return 0, 0, {"source": f"not calibrated: {why}"}
    tid, nr = int(cal["tid"]), int(cal["syscall_nr"])

    def rows(kind: str) -> np.ndarray:
        i = ev.of(kind)
        return i[(ev.tid[i] == tid) & (ev.nr[i] == nr)]

    enter_rows = rows("sys_enter")
    enter, leave = ev.ts[enter_rows], ev.ts[rows("sys_exit")]
    t0, t1 = calls[:, 0], calls[:, 1]
    # The call's sys_enter: the first at or after t0; its sys_exit: the last at or before t1.
    ei = np.searchsorted(enter, t0, side="left")
    xi = np.searchsorted(leave, t1, side="right") - 1
    ok = (ei < len(enter)) & (xi >= 0)
    ei, xi = np.minimum(ei, max(len(enter) - 1, 0)), np.maximum(xi, 0)
    if len(enter) and len(leave):
        ok &= (enter[ei] <= t1) & (leave[xi] >= t0) & (leave[xi] >= enter[ei])
    else:
        ok[:] = False
    if ok.sum() < 10:
        return 0, 0, {"source": f"not calibrated: {int(ok.sum())} of {len(calls)} calibration calls were traced"}
    before = float(np.median(enter[ei[ok]] - t0[ok]))
    after = float(np.median(t1[ok] - leave[xi[ok]]))
    inside = float(np.median(leave[xi[ok]] - enter[ei[ok]]))
    whole, basis = before + after, "clock-bracketed calls"
    tight = cal.get("tight") or []
    if len(tight) >= 2:
        a, b = np.searchsorted(leave, tight[0]), np.searchsorted(leave, tight[1])
        exits = leave[a:b]
        nxt = np.searchsorted(enter, exits, side="right")
        has = nxt < len(enter)
        gaps = enter[nxt[has]] - exits[has]
        gaps = gaps[enter[nxt[has]] <= tight[1]]
        if len(gaps) >= 10:
            # The mean, as many calls add up; a gap over ten times the typical one held
            # something else (an interrupt, the hypervisor).
            gaps = gaps[gaps <= 10 * np.median(gaps)]
            whole, basis = float(gaps.mean()), "calls back to back"
    e_in = max(0, int(round(whole * before / (before + after)))) if before + after > 0 else 0
    e_out = max(0, int(round(whole)) - e_in)
    # where the calls ran, as traced (the driver's sched_getcpu is one look, at the start)
    timed_on = sorted({int(c) for c in ev.cpu[enter_rows[ei[ok]]]}) if len(enter_rows) else []
    return (
        e_in,
        e_out,
        {
            "source": f"estimated: null syscalls timed {_where_timed(timed_on, cal, workload)} ({basis})",
            "cpus": timed_on,
            "entry_ns": e_in,
            "exit_ns": e_out,
            "traced_syscall_ns": inside,
            "clock_read_ns": float(cal.get("empty_ns") or 0),
            "calls": int(ok.sum()),
        },
    )
