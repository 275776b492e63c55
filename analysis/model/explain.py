"""The explanation of one iteration of a traced run, as data (Explanation): the event-by-event
account of the workload's threads (who entered or left which syscall, who woke whom, how long
a woken thread waited for a CPU, interrupts and preemptions), the critical path's segments
and the component totals of breakdown.py, which are the sums of those segments."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.errors import UsageError
from analysis.model import breakdown as bd
from analysis.store import events as events_mod
from analysis.store import records, results, syscalls

if TYPE_CHECKING:
    import pandas as pd

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
    """(row of iters, how it was chosen): iteration K of run R (0 by default), else the one at
    the median or the 99th percentile ("p99") of the run given or of all runs."""
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
    if which == "p99":
        k = min(len(lat) - 1, int(np.ceil(0.99 * len(lat))) - 1)
        return sel.iloc[order[k]], f"the 99th percentile of {len(lat)}"
    return sel.iloc[order[(len(lat) - 1) // 2]], f"the median of {len(lat)}"


class Names:
    """Short names of the workload's threads: A is the measuring one, B, C... its peers; other
    tasks by their command name where the tracer recorded it (trace.json tasks), the tracer's
    own threads marked as such."""

    def __init__(
        self, sides: Iterable[tuple[str, int]], tasks: dict[str, Any] | None = None, tracer: Iterable[int] = ()
    ):
        self.letter = {tid: chr(ord("A") + k) for k, (_, tid) in enumerate(sides)}
        self.tasks = tasks or {}
        self.tracer = set(tracer)

    def __call__(self, tid: int) -> str:
        tid = int(tid)
        if tid in self.letter:
            return self.letter[tid]
        if tid <= 0:
            return "idle"
        comm = (self.tasks.get(str(tid)) or {}).get("comm")
        name = f"{comm} (tid {tid})" if comm else f"task {tid}"
        return f"{name} [the tracer: probe effect]" if tid in self.tracer else name


def chain(
    ev: bd.Events, sides: Sequence[tuple[str, int]], s: int, e: int, name: Names | None = None, arch: str = "x86_64"
) -> list[tuple[int, str, str]]:
    """The lines of the event-by-event account of window [s, e); ev: breakdown.Events
    of events sorted by time; arch names the system calls."""
    name = name or Names(sides)
    tids = np.array([t for _, t in sides])
    kind_of = {code: kind for kind, code in ev.code.items()}
    types = [kind_of.get(c) for c in range(max(kind_of) + 1)]
    ts, tid, nxt, aux, a0, cpu = ev.ts, ev.tid, ev.next_tid, ev.aux, ev.a0, ev.cpu
    mine = np.isin(tid, tids) | ((ev.type == ev.code["switch"]) & np.isin(nxt, tids))
    lo, hi = np.searchsorted(ts, s, side="left"), np.searchsorted(ts, e, side="left")
    # What each thread was doing when the window opened: the last events before it.
    since = {}
    for _, t in sides:
        before = np.flatnonzero(mine[:lo] & ((tid[:lo] == t) | (nxt[:lo] == t)))
        since[t] = {"enter": None, "wake": None, "queued": None, "off": None, "runnable": False}
        for i in before[-8:]:
            _track(since[t], types[ev.type[i]], ts[i], tid[i] == t, aux[i])
    lines = [(0, "A", "reads the clock: the iteration starts")]
    for t in tids[1:]:
        st = since[t]
        if st["off"] is not None:
            how = (
                "is runnable (preempted), waiting for a CPU"
                if st["runnable"]
                else "was woken and waits for a CPU"
                if st["wake"] is not None
                else "is blocked"
            )
            lines.append((0, name(t), f"{how}; off CPU since {us(s - st['off'])} before the start"))
    for i in range(lo, hi):
        if not mine[i]:
            continue
        rel = int(ts[i] - s)
        kind = types[ev.type[i]]
        who = name(tid[i])
        st = since.get(int(tid[i]))
        text = None
        if kind == "sys_enter":
            text = f"enters {_syscall(aux[i], arch)}"
        elif kind == "sys_exit":
            took = f", {us(ts[i] - st['enter'])} after it was entered" if st and st["enter"] is not None else ""
            text = f"{_syscall(aux[i], arch)} returns {a0[i]}{took}"
        elif kind == "switch" and tid[i] in name.letter:
            if st is not None and st["wake"] is not None:
                text = f"leaves CPU {cpu[i]} although already woken: it waits to run again (switch to {name(nxt[i])})"
            elif aux[i] == 0:
                text = f"is preempted on CPU {cpu[i]} by {name(nxt[i])}"
            else:
                text = f"blocks and leaves CPU {cpu[i]} (switch to {name(nxt[i])})"
        elif kind == "waking":
            text = None
            how = "from a hard interrupt (a timer, an IPI) on its CPU " if aux[i] & records.WAKE_IN_HARDIRQ else ""
            lines.append(
                (
                    rel,
                    name(a0[i] & 0xFFFFFFFF),
                    f"wake-up: {how}wakes {who} (sched_waking, target CPU {aux[i] & records.WAKE_CPU_MASK})",
                )
            )
        elif kind in ("wakeup", "wakeup_new"):
            text = f"is queued to run on CPU {aux[i] & records.WAKE_CPU_MASK} (sched_{kind})"
        elif kind == "migrate":
            text = f"migrates from CPU {a0[i]} to CPU {aux[i]}"
        elif kind == "irq_entry":
            text = f"interrupted by hard IRQ {aux[i]} on CPU {cpu[i]}"
        elif kind == "irq_exit":
            text = f"back from hard IRQ {aux[i]}"
        elif kind == "vector_entry":
            text = f"interrupted by the {VECTORS.get(int(aux[i]), f'vector {aux[i]:#x}')} on CPU {cpu[i]}"
        elif kind == "vector_exit":
            text = f"back from the {VECTORS.get(int(aux[i]), f'vector {aux[i]:#x}')}"
        elif kind in ("softirq_entry", "softirq_exit"):
            vec = SOFTIRQS[aux[i]] if aux[i] < len(SOFTIRQS) else str(aux[i])
            text = f"{'runs' if kind == 'softirq_entry' else 'ends'} softirq {vec} on CPU {cpu[i]}"
        elif kind == "page_fault":
            text = f"page fault at {a0[i] & 0xFFFFFFFFFFFFFFFF:#x}"
        elif kind in ("func_entry", "func_exit"):
            fn = records.FUNCS[aux[i] - 1] if 0 < aux[i] <= len(records.FUNCS) else f"function {aux[i]}"
            text = f"{'enters' if kind == 'func_entry' else 'leaves'} {fn}"
        elif kind == "fork":
            text = f"forks task {a0[i] & 0xFFFFFFFF}"
        elif kind == "exit":
            text = "exits"
        if kind == "switch" and nxt[i] in name.letter:
            if text:
                lines.append((rel, who, text))
            w = since[int(nxt[i])]
            if w["wake"] is not None and w["queued"] is not None:
                text = (
                    f"on CPU {cpu[i]} {us(ts[i] - w['wake'])} after its wake-up began: "
                    f"{us(w['queued'] - w['wake'])} being woken (sched_waking -> sched_wakeup), "
                    f"{us(ts[i] - w['queued'])} in the run queue"
                )
            elif w["wake"] is not None:
                text = (
                    f"on CPU {cpu[i]} after {us(ts[i] - w['wake'])} in the run queue "
                    f"(woken at once: sched_waking -> running)"
                )
            elif w["off"] is not None:
                text = f"back on CPU {cpu[i]} after {us(ts[i] - w['off'])} preempted (runnable, off CPU)"
            else:
                text = f"on CPU {cpu[i]}"
            who = name(nxt[i])
            _track(w, kind, ts[i], False, aux[i])
        elif st is not None:
            _track(st, kind, ts[i], True, aux[i])
        if text:
            lines.append((rel, who, text))
    lines.append((e - s, "A", f"reads the clock: the iteration ends after {us(e - s)}"))
    return lines


def _track(st: dict[str, Any], kind: str, t: int, own: bool, aux: int) -> None:
    """Update what a thread is doing: open syscall, pending wake-up, when and how it left the CPU.
    own: the event is the thread's own (for a switch: it is switched out, else in). A wake-up
    may come just before the thread leaves the CPU (it had set itself sleeping): it stays pending."""
    if kind == "sys_enter":
        st["enter"] = t
    elif kind == "sys_exit":
        st["enter"] = None
    elif kind == "switch" and own:
        st["off"], st["runnable"] = t, aux == 0 and st["wake"] is None
    elif kind == "switch":
        st["off"], st["wake"], st["queued"], st["runnable"] = None, None, None, False
    elif kind in ("waking", "wakeup", "wakeup_new") and st["wake"] is None and not st["runnable"]:
        st["wake"] = t
    elif kind == "wakeup" and st["wake"] is not None and st["queued"] is None:
        st["queued"] = t


def explain(
    resdir: Path | str,
    metric: str | None = None,
    run: int | None = None,
    iteration: int | None = None,
    which: str = "median",
) -> Explanation:
    """The Explanation of one iteration of the traced run in resdir: iteration K of run R,
    or the one at the median ("median"), the 99th percentile ("p99")."""
    resdir = results.check_results_dir(resdir)
    if not (resdir / "events.parquet").exists():
        raise UsageError(f"{resdir} was not traced (no events.parquet): run it without --no-trace")
    summary = results.read_summary(resdir)
    workload = results.read_workload(resdir)
    iters = results.read_iterations(resdir)
    metrics = [str(m) for m in workload.get("metrics") or iters["metric"].astype(str).unique()]
    metric = metric or summary.get("primary_metric") or metrics[0]
    if metric not in metrics:
        raise UsageError(f"{resdir} has no metric {metric!r} (it has {', '.join(metrics)})")
    row, how = pick(iters, metric, run, iteration, which)
    ev = bd.Events(events_mod.read_parquet(resdir))
    s, e = int(row["t_start_ns"]), int(row["t_end_ns"])
    trace = summary.get("trace") or {}
    bsum = (summary.get("breakdown") or {}).get(metric) or {}
    costs = bsum.get("copy_costs") or {}
    arch = (summary.get("host") or {}).get("machine") or "x86_64"
    frame, info = bd.compute(iters.loc[[row.name]], ev, workload, costs.get("ns_per_byte"), arch=arch, path=True)
    f = frame.iloc[0]
    everyone, seg = info["path"][0]
    names = Names(everyone, trace.get("tasks"), (trace.get("tracer") or {}).get("tids") or ())
    legend = [
        f"{names(t)} = {'other thread of the workload' if role == 'thread' else role} "
        f"(tid {t}{_comm_of(trace, t)}{_cpu_of(workload, t)})"
        for role, t in everyone
    ]
    path = []
    for a, b, th, st, holder in zip(seg.a, seg.b, seg.thread, seg.state, seg.holder):
        t = everyone[int(th)][1]
        path.append(
            Segment(int(a - s), int(b - s), names(t), t, bd.STATE_NAMES[int(st)], names(holder) if holder > 0 else None)
        )
    path.reverse()
    copy_note = "" if info["copy_measured"] else f"estimated ({int(f['copy_bytes'])} bytes moved in the window)"
    entry = info["entry"]
    entry_note = (
        f"estimated: {entry['entry_ns']} ns before each syscall's entry, {entry['exit_ns']} ns after "
        f"its exit ({entry['source']})"
        if "entry_ns" in entry
        else entry["source"]
    )
    return Explanation(
        workload=str(summary.get("workload")),
        metric=metric,
        run=int(row["run"]),
        iteration=int(row["iteration"]),
        how=how,
        latency_ns=e - s,
        legend=legend,
        chain=chain(ev, everyone, s, e, names, arch),
        path=path,
        components={c: float(f[c]) for c in bd.COMPONENTS},
        sides={role: {c: float(f[f"{role}.{c}"]) for c in bd.COMPONENTS} for role in info["roles"]},
        critical_path=info["critical_path"],
        copy_note=copy_note,
        entry_note=entry_note,
        tail_label=_tail_label(resdir, row),
        steal_ns=float(f["steal_ns"]),
    )


def _comm_of(trace: dict[str, Any], tid: int) -> str:
    comm = ((trace.get("tasks") or {}).get(str(tid)) or {}).get("comm")
    return f", {comm}" if comm else ""


def _cpu_of(workload: dict[str, Any], tid: int) -> str:
    for t in workload.get("threads") or []:
        if int(t.get("tid") or -1) == tid and t.get("cpu", -1) >= 0:
            return f", CPU {t['cpu']}"
    return ""


def _tail_label(resdir: Path, row: pd.Series) -> str:
    """The tail labels breakdown.parquet gave this iteration, "" if none or no file."""
    t = results.read_breakdown(resdir, columns=["run", "iteration", "metric", "tail"])
    if t is None:
        return ""
    hit = t[
        (t["run"] == row["run"])
        & (t["iteration"] == row["iteration"])
        & (t["metric"].astype(str) == str(row["metric"]))
    ]
    return "" if hit.empty else str(hit["tail"].iloc[0])
