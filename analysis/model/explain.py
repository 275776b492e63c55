"""The explanation of one iteration of a traced run, as data (Explanation): the event-by-event
account of the workload's threads (who entered or left which syscall, who woke whom, how long
a woken thread waited for a CPU, interrupts and preemptions), the critical path's segments
and the component totals of breakdown.py, which are the sums of those segments."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.errors import UsageError
from analysis.model import breakdown as bd
from analysis.model import decoded, leadin, timeline
from analysis.store import events as events_mod
from analysis.store import records, syscalls
from analysis.store.jsonfiles import Workload
from analysis.store.summaryfile import RunSummary

if TYPE_CHECKING:
    import pandas as pd

    from analysis.store.jsonfiles import SummaryTrace, Tasks
    from analysis.store.rundir import ExplainInputs

SOFTIRQS = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
# x86 vectors of the irq_vectors tracepoints (arch/x86/include/asm/irq_vectors.h).
VECTORS = {
    0xEC: "local timer",
    0xFD: "reschedule IPI",
    0xFC: "call-function IPI",
    0xFB: "call-function-single IPI",
    0xF6: "irq_work",
    0xF7: "posted interrupt",
    0xF3: "hypervisor callback",
    0xFA: "thermal",
    0xF9: "threshold",
    0xF4: "deferred error",
    0xFE: "error",
    0xFF: "spurious",
    0xF8: "reboot",
    0xF2: "posted interrupt wake-up",
    0xF1: "nested posted interrupt",
}


@dataclass
class Segment:
    """One piece of the critical path: [start_ns, end_ns) since the iteration's start, the
    thread on the path (its letter and tid), the component it counts to, and for waiting
    time the task that held the CPU (None: idle or none recorded)."""

    start_ns: int
    end_ns: int
    who: str
    tid: int
    component: str
    holder: str | None = None
    holder_tid: int = 0  # the holder's tid (0: idle or none recorded)


@dataclass
class Explanation:
    """Everything `explain` shows of one iteration, computed once: the text, the report and
    the tests read it."""

    workload: str
    metric: str
    run: int
    iteration: int
    how: str
    latency_ns: int
    legend: list
    chain: list  # (ns since the start, who, what)
    path: list  # Segment
    components: dict  # component -> ns, as breakdown.parquet has them
    sides: dict  # role -> {component: ns}
    critical_path: bool
    copy_note: str = ""
    entry_note: str = ""
    tail_label: str = ""
    steal_ns: float = 0.0

    def path_sums(self) -> dict[str, int]:
        """ns per component summed over the path's segments."""
        out = dict.fromkeys(bd.COMPONENTS, 0)
        for seg in self.path:
            out[seg.component] += seg.end_ns - seg.start_ns
        return out


def us(ns: float) -> str:
    return f"{ns / 1000:.3f} us"


def _syscall(nr: int, arch: str) -> str:
    name = syscalls.name(arch, int(nr))
    return name if name.startswith("syscall ") else f"{name}()"


def pick(
    iters: pd.DataFrame, metric: str, run: int | None = None, iteration: int | None = None, which: str = "median"
) -> tuple[pd.Series, str]:
    """(row of iters, how it was chosen): iteration K of run R (0 by default), else by which,
    over the run given or all runs: "median", "p99", "percentile:P", "max" or "slowest:K"
    (the K-th slowest, 1 the slowest). The one iteration of a run of one is named as itself (a
    request the watch kept: not "the median of 1")."""
    row, how = _pick(iters, metric, run, iteration, which)
    if how.endswith(" of 1"):
        how = f"iteration {int(row['iteration'])}"
    return row, how


def _pick(
    iters: pd.DataFrame, metric: str, run: int | None, iteration: int | None, which: str
) -> tuple[pd.Series, str]:
    sel = iters[iters["metric"].astype(str) == metric]
    if run is not None or iteration is not None:
        run = 0 if run is None else run
        sel = sel[sel["run"] == run]
        if sel.empty:
            raise UsageError(f"run {run} has no iterations of {metric} (runs: {sorted(set(iters['run'].tolist()))})")
    if sel.empty:
        raise UsageError(f"no iterations of {metric}")
    if iteration is not None:
        row = sel[sel["iteration"] == iteration]
        if row.empty:
            raise UsageError(
                f"no iteration {iteration} in run {run}: it has iterations "
                f"{int(sel['iteration'].min())}..{int(sel['iteration'].max())}"
            )
        return row.iloc[0], f"iteration {iteration}"
    lat = sel["latency_ns"].to_numpy()
    order = np.argsort(lat, kind="stable")
    n = len(lat)
    if which == "p99":
        which = "percentile:99"
    if which == "max":
        return sel.iloc[order[-1]], f"the slowest of {n}"
    if which.startswith("slowest:"):
        k = int(which.split(":", 1)[1])
        if not 1 <= k <= n:
            raise UsageError(f"--slowest: there are {n} iterations of {metric}")
        return sel.iloc[order[n - k]], (f"the slowest of {n}" if k == 1 else f"the {_ordinal(k)} slowest of {n}")
    if which.startswith("percentile:"):
        q = float(which.split(":", 1)[1])
        if not 0 < q <= 100:
            raise UsageError(f"--percentile {q:g}: give a percentile above 0 and at most 100")
        k = min(n - 1, max(0, int(np.ceil(q / 100 * n)) - 1))
        label = "99th" if q == 99 else f"{q:g}th"
        return sel.iloc[order[k]], f"the {label} percentile of {n}"
    return sel.iloc[order[(n - 1) // 2]], f"the median of {n}"


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


class Names:
    """Short names of the workload's threads: A is the measuring one, B, C... its peers; other
    tasks by their command name where the tracer recorded it (trace.json tasks), the tracer's
    own threads marked as such."""

    def __init__(self, sides: Iterable[tuple[str, int]], tasks: Tasks | None = None, tracer: Iterable[int] = ()):
        self.letter = {tid: chr(ord("A") + k) for k, (_, tid) in enumerate(sides)}
        self.tasks = tasks or {}
        self.tracer = set(tracer)

    def __call__(self, tid: int) -> str:
        tid = int(tid)
        if tid in self.letter:
            return self.letter[tid]
        if tid <= 0:
            return "idle"
        task = self.tasks.get(tid)
        comm = task.comm if task else None
        name = f"{comm} (tid {tid})" if comm else f"task {tid}"
        return f"{name} [the tracer: probe effect]" if tid in self.tracer else name


def _bounds(summary: RunSummary) -> tuple[str, str]:
    """What begins and ends an iteration: the workload's clock reads, or for a traced program
    (ipctrace trace) the events its iterations were found from."""
    how = summary.settings().iterations_from
    if how == "rtt":
        return "the round trip starts (the send's entry, next line)", "the round trip ends (the answer's return)"
    if how in ("markers", "function"):
        return "the iteration starts (its begin probe)", "the iteration ends (its end probe)"
    return "reads the clock: the iteration starts", "reads the clock: the iteration ends"


def chain(
    ev: timeline.Events,
    sides: Sequence[tuple[str, int]],
    s: int,
    e: int,
    name: Names | None = None,
    arch: str = "x86_64",
    timelines: dict[int, timeline.Timeline] | None = None,
    bounds: tuple[str, str] = ("reads the clock: the iteration starts", "reads the clock: the iteration ends"),
) -> list[tuple[int, str, str]]:
    """The lines of the event-by-event account of window [s, e); ev: breakdown.Events
    of events sorted by time; arch names the system calls; bounds: what begins and ends the
    window (a workload reads its clock; a traced program's window is an event of its own). What a thread was doing (blocked,
    being woken, in the run queue, preempted) is read from its step function (timelines:
    timeline.thread_timeline's, made here if not given), the rules the breakdown counts by."""
    name = name or Names(sides)
    tids = np.array([t for _, t in sides])
    timelines = timelines or {}
    tl_of = {
        int(t): timelines.get(int(t)) or timeline.thread_timeline(ev, int(t), timeline.StepRules(arch)) for t in tids
    }
    ts, tid, nxt, cpu = ev.ts, ev.tid, ev.next_tid, ev.cpu
    mine = np.isin(tid, tids) | (ev.mask("switch") & np.isin(nxt, tids))
    lo, hi = np.searchsorted(ts, s, side="left"), np.searchsorted(ts, e, side="left")
    lines = [(0, "A", bounds[0])]
    for t in tids[1:]:
        tl = tl_of[int(t)]
        off = _off_cpu_since(tl, s)
        if off is not None:
            how = {
                timeline.PREEMPTED: "is runnable (preempted), waiting for a CPU",
                timeline.BLOCKED: "is blocked",
            }.get(int(tl.at(s)), "was woken and waits for a CPU")
            lines.append((0, name(t), f"{how}; off CPU since {us(s - off)} before the start"))
    # when the call each sys_exit in the window returns from was entered (decoded.call_pairs)
    sc = decoded.sys_rows(ev, tids)
    sc = sc[sc < hi]
    k = decoded.call_pairs(ev, sc)
    k = k[sc[k + 1] >= lo]
    entered = dict(zip(sc[k + 1].tolist(), ts[sc[k]].tolist()))
    for i in range(lo, hi):
        if not mine[i]:
            continue
        rel = int(ts[i] - s)
        kind = ev.kind_at(i)
        who = name(tid[i])
        text = None
        if kind == "sys_enter":
            text = f"enters {_syscall(ev.nr[i], arch)}"
        elif kind == "sys_exit":
            t0 = entered.get(i)
            took = f", {us(ts[i] - t0)} after it was entered" if t0 is not None else ""
            text = f"{_syscall(ev.nr[i], arch)} returns {ev.ret[i]}{took}"
        elif kind == "switch" and tid[i] in name.letter:
            after = int(tl_of[int(tid[i])].at(ts[i]))
            if after in (timeline.WAKEUP, timeline.RUNQUEUE):
                text = f"leaves CPU {cpu[i]} although already woken: it waits to run again (switch to {name(nxt[i])})"
            elif after == timeline.PREEMPTED:
                text = f"is preempted on CPU {cpu[i]} by {name(nxt[i])}"
            else:
                text = f"blocks and leaves CPU {cpu[i]} (switch to {name(nxt[i])})"
        elif kind == "waking":
            how = "from a hard interrupt (a timer, an IPI) on its CPU " if ev.in_hardirq[i] else ""
            lines.append(
                (
                    rel,
                    name(ev.other_tid[i]),
                    f"wake-up: {how}wakes {who} (sched_waking, target CPU {ev.target_cpu[i]})",
                )
            )
        elif kind in ("wakeup", "wakeup_new"):
            text = f"is queued to run on CPU {ev.target_cpu[i]} (sched_{kind})"
        elif kind == "migrate":
            text = f"migrates from CPU {ev.from_cpu[i]} to CPU {ev.to_cpu[i]}"
        elif kind == "irq_entry":
            text = f"interrupted by hard IRQ {ev.irq[i]} on CPU {cpu[i]}"
        elif kind == "irq_exit":
            text = f"back from hard IRQ {ev.irq[i]}"
        elif kind == "vector_entry":
            vec = ev.vector[i]
            text = f"interrupted by the {VECTORS.get(int(vec), f'vector {vec:#x}')} on CPU {cpu[i]}"
        elif kind == "vector_exit":
            vec = ev.vector[i]
            text = f"back from the {VECTORS.get(int(vec), f'vector {vec:#x}')}"
        elif kind in ("softirq_entry", "softirq_exit"):
            vec = SOFTIRQS[ev.vector[i]] if ev.vector[i] < len(SOFTIRQS) else str(ev.vector[i])
            text = f"{'runs' if kind == 'softirq_entry' else 'ends'} softirq {vec} on CPU {cpu[i]}"
        elif kind == "page_fault":
            text = f"page fault at {int(ev.address[i]) & 0xFFFFFFFFFFFFFFFF:#x}"
        elif kind in ("func_entry", "func_exit"):
            fn_id = ev.func[i]
            fn = records.FUNCS[fn_id - 1] if 0 < fn_id <= len(records.FUNCS) else f"function {fn_id}"
            text = f"{'enters' if kind == 'func_entry' else 'leaves'} {fn}"
        elif kind == "fork":
            text = f"forks task {ev.other_tid[i]}"
        elif kind == "exit":
            text = "exits"
        if kind == "switch" and nxt[i] in name.letter:
            if text:
                lines.append((rel, who, text))
            text = _back_on_cpu(tl_of[int(nxt[i])], ts[i], cpu[i])
            who = name(nxt[i])
        if text:
            lines.append((rel, who, text))
    lines.append((e - s, "A", f"{bounds[1]} after {us(e - s)}"))
    return lines


OFF_CPU = (timeline.BLOCKED, timeline.WAKEUP, timeline.RUNQUEUE, timeline.PREEMPTED)


def _off_cpu_since(tl: timeline.Timeline, t: int) -> int | None:
    """When the thread left the CPU, if it is off CPU at t: the start of the run of off-CPU
    steps that holds at t."""
    i = int(np.searchsorted(tl.ts, t, side="right")) - 1
    if i < 0 or tl.state[i] not in OFF_CPU:
        return None
    while i > 0 and tl.state[i - 1] in OFF_CPU:
        i -= 1
    return int(tl.ts[i])


def _back_on_cpu(tl: timeline.Timeline, t: int, cpu: int) -> str:
    """A thread switched in at t: after a wake-up (being woken, then in the run queue: the
    wake-up delays its step function has), after a preemption, or neither recorded."""
    on, delay, rq = timeline.wakeup_delays(tl)
    k = int(np.searchsorted(on, t))
    if k < len(on) and on[k] == t:
        if delay[k] > rq[k]:
            return (
                f"on CPU {cpu} {us(delay[k])} after its wake-up began: {us(delay[k] - rq[k])} being woken "
                f"(sched_waking -> sched_wakeup), {us(rq[k])} in the run queue"
            )
        return f"on CPU {cpu} after {us(delay[k])} in the run queue (woken at once: sched_waking -> running)"
    off = _off_cpu_since(tl, t - 1)
    if off is not None and int(tl.at(t - 1)) == timeline.PREEMPTED:
        return f"back on CPU {cpu} after {us(t - off)} preempted (runnable, off CPU)"
    return f"on CPU {cpu}"


def explain(
    inputs: ExplainInputs,
    metric: str | None = None,
    run: int | None = None,
    iteration: int | None = None,
    which: str = "median",
    read_all: bool = False,
) -> Generator[events_mod.Read, Any, Explanation]:
    """The Explanation of one iteration of a traced run (inputs: what store.rundir read of it):
    iteration K of run R, or the one pick() chooses by which ("median", "p99", "percentile:P",
    "max", "slowest:K"). Reads no file: a generator that asks for the row groups of
    events.parquet the iteration depends on (leadin.lead_in), all of them with read_all (the
    same Explanation, slower), and returns the Explanation; inputs.answer(explain(inputs, ...))
    reads them and gives it."""
    summary, workload, iters = inputs.summary, inputs.workload, inputs.iterations
    metrics = [str(m) for m in workload.metrics or iters["metric"].astype(str).unique()]
    metric = metric or summary.primary_metric or metrics[0]
    if metric not in metrics:
        raise UsageError(f"{inputs.where} has no metric {metric!r} (it has {', '.join(metrics)})")
    row, how = pick(iters, metric, run, iteration, which)
    s, e = int(row["t_start_ns"]), int(row["t_end_ns"])
    if read_all:
        ev, whole = timeline.Events((yield events_mod.EventsRead())), None
    else:
        part = yield from leadin.lead_in(inputs.row_groups, s, e, workload, int(row["tid"]))
        ev, whole = timeline.Events(part.events), part.whole
    bsum = (summary.breakdown or {}).get(metric)
    costs = bsum.copy_costs if bsum else {}
    arch = summary.host.machine or "x86_64"
    frame, info = bd.compute(
        iters.loc[[row.name]], ev, workload, costs.get("ns_per_byte"), arch=arch, path=True, facts=whole
    )
    everyone, seg = info.path[0]
    return explanation(
        summary, workload, row, how, ev, everyone, path_of(everyone, seg, s), frame.iloc[0], info, inputs.tails
    )


def explanation(
    summary: RunSummary,
    workload: Workload,
    row: pd.Series | dict[str, Any],
    how: str,
    ev: timeline.Events,
    everyone: Sequence[tuple[str, int]],
    path: list[tuple[int, int, int, str, int]],
    f: pd.Series | dict[str, Any],
    info: Any,
    tails: pd.DataFrame | None,
) -> Explanation:
    """The Explanation of row (an iteration) from its breakdown, computed already: everyone (the
    threads its path names, as (role, tid)), path (path_of's), f (its row of breakdown.parquet's
    columns) and info (what BreakdownFacts has: roles, copy_measured, entry, critical_path and
    the threads' timelines); ev: the events around it. `ipctrace watch` gives a kept request's
    from the breakdown its step made of it."""
    s, e = int(row["t_start_ns"]), int(row["t_end_ns"])
    trace = summary.trace
    arch = summary.host.machine or "x86_64"
    names = Names(everyone, trace.file.tasks if trace else None, trace.file.tracer.tids if trace else ())
    legend = [
        f"{names(t)} = {'other thread of the workload' if role == 'thread' else role} "
        f"(tid {t}{_comm_of(trace, t)}{_cpu_of(workload, t)})"
        for role, t in everyone
    ]
    segments = [
        Segment(a, b, names(t), t, component, names(holder) if holder > 0 else None, holder if holder > 0 else 0)
        for a, b, t, component, holder in path
    ]
    copy_note = "" if info.copy_measured else f"estimated ({int(f['copy_bytes'])} bytes moved in the window)"
    entry = info.entry
    entry_note = (
        f"estimated: {entry['entry_ns']} ns before each syscall's entry, {entry['exit_ns']} ns after "
        f"its exit ({entry['source']})"
        if "entry_ns" in entry
        else entry["source"]
    )
    return Explanation(
        workload=str(summary.workload),
        metric=str(row["metric"]),
        run=int(row["run"]),
        iteration=int(row["iteration"]),
        how=how,
        latency_ns=e - s,
        legend=legend,
        chain=chain(ev, everyone, s, e, names, arch, info.timelines, _bounds(summary)),
        path=segments,
        components={c: float(f[c]) for c in bd.COMPONENTS},
        sides={role: {c: float(f[f"{role}.{c}"]) for c in bd.COMPONENTS} for role in info.roles},
        critical_path=info.critical_path,
        copy_note=copy_note,
        entry_note=entry_note,
        tail_label=_tail_label(tails, row),
        steal_ns=float(f["steal_ns"]),
    )


def path_of(everyone: Sequence, seg: Any, start: int, row: int | None = None) -> list[tuple[int, int, int, str, int]]:
    """An iteration's critical path in time order, from what breakdown.compute(path=True)
    gives of it (an entry of info.path: the threads it names and its segments, last first;
    row: the segments of that row of the iterations only, where the entry holds several):
    (start, end in ns since the iteration's start `start`, tid, component, the tid that held
    the CPU or 0). explain and `ipctrace watch` read the path so."""
    out = []
    mine = slice(None) if row is None else np.asarray(seg.w) == row
    cols = (np.asarray(seg.a)[mine], np.asarray(seg.b)[mine], np.asarray(seg.thread)[mine])
    for a, b, th, st, holder in zip(*cols, np.asarray(seg.state)[mine], np.asarray(seg.holder)[mine]):
        out.append(
            (int(a - start), int(b - start), int(everyone[int(th)][1]), timeline.STATE_NAMES[int(st)], int(holder))
        )
    out.reverse()
    return out


def _comm_of(trace: SummaryTrace | None, tid: int) -> str:
    comm = trace.file.comm(tid) if trace else None
    return f", {comm}" if comm else ""


def _cpu_of(workload: Workload, tid: int) -> str:
    for t in workload.threads:
        if t.tid == tid and t.cpu >= 0:
            return f", CPU {t.cpu}"
    return ""


def _tail_label(tails: pd.DataFrame | None, row: pd.Series) -> str:
    """The tail label breakdown.parquet gave this iteration (tails: its TAIL_COLUMNS), "" if
    none or no file."""
    if tails is None:
        return ""
    t = tails
    hit = t[
        (t["run"] == row["run"])
        & (t["iteration"] == row["iteration"])
        & (t["metric"].astype(str) == str(row["metric"]))
    ]
    return "" if hit.empty else str(hit["tail"].iloc[0])
