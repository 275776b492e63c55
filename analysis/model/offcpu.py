"""Each thread's time off CPU as spans, read from its step function (timeline.thread_timeline),
so that a trace view, explain and the breakdown count by one set of rules: from the switch out
to the switch in, blocked (asleep), preempted (runnable, another task had the CPU) or woken
while still on CPU (waiting for it); inside, the wake-up's two phases: being woken (WAKEUP:
sched_waking to sched_wakeup) and the run queue (RUNQUEUE: to the switch in)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from analysis.model import timeline

OFF_CPU = np.array([timeline.BLOCKED, timeline.WAKEUP, timeline.RUNQUEUE, timeline.PREEMPTED], np.int8)
ON_CPU = np.array([timeline.USER, timeline.SYSCALL, timeline.COPY, timeline.IRQ, timeline.ENTRY], np.int8)
PHASES = {timeline.WAKEUP: "being woken (IPI, idle exit)", timeline.RUNQUEUE: "run queue"}
COLUMNS = ["tid", "start_ns", "end_ns", "name", "blocked"]


def spans(ev: timeline.Events, tids: Iterable[int], arch: str = "x86_64") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(off-CPU spans, wake-up phases inside them): frames of COLUMNS, one row per span.
    A span counts only if a switch in ends it (a thread still off CPU when the trace ends, or
    whose switches do not alternate, has none); blocked: the span holds a sleep."""
    off, phases = [], []
    for tid in tids:
        # off CPU by the switches: the hypervisor's steal inside a wait does not split it
        tl = timeline.thread_timeline(ev, int(tid), timeline.StepRules(arch), steal=False)
        if len(tl.ts) < 2:
            continue
        first = np.flatnonzero(np.r_[True, tl.state[1:] != tl.state[:-1]])
        start, state = tl.ts[first], tl.state[first]
        end = np.r_[start[1:], -1]
        is_off = np.isin(state, OFF_CPU)
        # Runs of off-CPU states, each ended by an on-CPU state (the switch in).
        opens = np.flatnonzero(is_off & ~np.r_[False, is_off[:-1]])
        closes = np.flatnonzero(is_off & ~np.r_[is_off[1:], False])
        for a, z in zip(opens, closes):
            if z + 1 >= len(state) or state[z + 1] not in ON_CPU:
                continue
            held = state[a : z + 1]
            blocked = bool((held == timeline.BLOCKED).any())
            how = "blocked" if blocked else "preempted" if held[0] == timeline.PREEMPTED else "woken, waiting for a CPU"
            off.append((int(tid), int(start[a]), int(end[z]), f"off-CPU: {how}", blocked))
            if blocked:
                phases += [
                    (int(tid), int(start[k]), int(end[k]), PHASES[int(state[k])], True)
                    for k in range(a, z + 1)
                    if int(state[k]) in PHASES
                ]
    return pd.DataFrame(off, columns=COLUMNS), pd.DataFrame(phases, columns=COLUMNS)
