"""The labs of `ipctrace lab`: each lab's figures as typed data, and its claims as functions of
those figures. A claim states what the textbook expects and whether this measurement shows it
(`holds`); where it does not, its text says what was seen instead. Every number a claim's text
shows is one of its `quoted` figures, formatted by Quantity (the tests check it), so no number
reaches the page that was not measured or computed from a measurement.

Times are in ns throughout; Quantity chooses the unit shown."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.store.summaryfile import RunSummary

# --- quoting figures ------------------------------------------------------------------


@dataclass(frozen=True)
class Quantity:
    """A figure as a claim quotes it: its value and how it reads (kind: time in ns, ratio,
    percent of 1, bytes, count, rate in bytes/s)."""

    value: float
    kind: str = "time"
    digits: int = 0  # a percent's decimals

    def show(self) -> str:
        v = float(self.value)
        if self.kind == "time":
            for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
                if abs(v) >= scale:
                    return f"{_sig(v / scale)} {unit}"
            return f"{_sig(v)} ns"
        if self.kind == "ratio":
            return f"{v:.1f}×" if abs(v) < 100 else f"{v:,.0f}×"
        if self.kind == "percent":
            return f"{v * 100:.{self.digits}f} %"
        if self.kind == "bytes":
            b = int(round(v))
            for div, unit in ((1 << 20, "MiB"), (1 << 10, "KiB")):
                if b >= div and b % div == 0:
                    return f"{b // div} {unit}"
            return f"{b:,} B"
        if self.kind == "id":
            return str(int(v))
        if self.kind == "factor":
            return f"{v:g}"
        if self.kind == "plain":
            return f"{v:.2f}"
        if self.kind == "count":
            return f"{v:,.0f}"
        if self.kind == "per_byte":
            return f"{_sig(v)} ns"
        if self.kind == "rate":
            for scale, unit in ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
                if abs(v) >= scale:
                    return f"{_sig(v / scale)} {unit}"
            return f"{_sig(v)} B/s"
        raise ValueError(f"unknown kind {self.kind}")


def _sig(x: float) -> str:
    """Three significant digits, thousands separated, no exponent."""
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    digits = 2 - int(np.floor(np.log10(abs(x))))
    return f"{x:.{max(digits, 0)}f}"


def T(ns: float) -> Quantity:  # noqa: N802 - reads as a unit
    return Quantity(ns, "time")


def X(r: float) -> Quantity:  # noqa: N802
    return Quantity(r, "ratio")


def P(f: float) -> Quantity:  # noqa: N802
    return Quantity(f, "percent")


def P_against(f: float, rule: float) -> Quantity:  # noqa: N802
    """A share quoted beside the rule it is held to: with the decimals (up to two) that keep
    it from reading as the rule's own figure when it is not (20.1 % against "more than 20 %")."""
    digits = 0
    while digits < 2 and f != rule and f"{f * 100:.{digits}f}" == f"{rule * 100:.{digits}f}":
        digits += 1
    return Quantity(f, "percent", digits)


def B(n: float) -> Quantity:  # noqa: N802
    return Quantity(n, "bytes")


def N(n: float) -> Quantity:  # noqa: N802
    return Quantity(n, "count")


@dataclass(frozen=True)
class Claim:
    """One sentence of a lab's answer: holds is whether the measurement shows the textbook
    effect; quoted are the figures its text shows, by name."""

    text: str
    holds: bool
    quoted: dict[str, Quantity] = field(default_factory=dict)
    # the lab's runs a task foreign to it disturbed (disturbances below): a claim that compares
    # runs says so beside its verdict
    beside: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        out = {"text": self.text, "holds": self.holds, "figures": {k: q.value for k, q in self.quoted.items()}}
        if self.beside:
            out["beside_disturbed"] = list(self.beside)
        return out


def claim(holds: bool, text: str, **quoted: Quantity) -> Claim:
    """A Claim whose text is the template filled with the quoted figures as they read."""
    return Claim(text.format(**{k: q.show() for k, q in quoted.items()}), bool(holds), quoted)


# --- the figures of one run --------------------------------------------------------------


@dataclass(frozen=True)
class Holding:
    """A task outside the workload that held the CPU while the run's critical path waited for
    one: its command name, tid, pid, ns per round trip on average, and whether it is the
    tracer's own thread (the probe effect, not a foreign task)."""

    comm: str
    tid: int
    pid: int | None
    ns: float
    tracer: bool = False

    @property
    def name(self) -> str:
        return f"{self.comm} (tid {self.tid})"


@dataclass(frozen=True)
class RunFigures:
    """What a lab reads of one results directory: its primary metric's median with the
    median's 95 % interval, the mean, the critical path's mean components (traced runs),
    the main tasks that preempted it, and what its explained median iteration did."""

    label: str
    workload: str
    median_ns: float
    mean_ns: float
    n: int
    median_ci: tuple[float, float] | None = None
    components: dict[str, float] = field(default_factory=dict)
    preempted_by: list[tuple[str, float]] = field(default_factory=list)  # (command name, share)
    syscalls: int | None = None  # system calls in the explained median iteration
    wakeups: int | None = None  # wake-ups in it
    side_blocked_share: dict[str, float] = field(default_factory=dict)  # role -> share of its time asleep
    side_time: dict[str, tuple[float, float]] = field(default_factory=dict)  # role -> (asleep, all), ns means
    iqr: dict[str, float] | None = None  # mean and removed of the 1.5 IQR figures (--iqr)
    probe_ratio: float | None = None  # traced median / untraced twin's (--calibrate)
    probe_ratio_ci: tuple[float, float] | None = None
    untraced_median_ns: float | None = None
    # the waking on the critical path, mean (wake-up + run queue): the evidence table's column
    waking_ns: float | None = None
    # the explained median iteration: its latency and its components, which add up to it
    typical_ns: float | None = None
    typical: dict[str, float] = field(default_factory=dict)
    # the critical path's waits for a CPU (run queue after a wake-up, preempted), mean per round
    # trip, and the tasks outside the workload that held the CPU meanwhile (summary.json's
    # preempted_by: the path's own segments and their holders)
    waits_ns: float | None = None
    holders: list[Holding] = field(default_factory=list)

    def comp(self, *names: str) -> float:
        return float(sum(self.components.get(c, 0.0) for c in names))

    def differs_from(self, other: RunFigures) -> bool:
        """Whether the medians' 95 % intervals leave each other out (True without intervals)."""
        a, b = self.median_ci, other.median_ci
        if not a or not b:
            return True
        return a[1] < b[0] or b[1] < a[0]


def _figure(v: float | None, what: str) -> float:
    """A figure the summary must have; a KeyError naming it if it has none."""
    if v is None:
        raise KeyError(what)
    return float(v)


def run_figures(label: str, summary: RunSummary, explanation: Any = None) -> RunFigures:  # noqa: ANN401
    """RunFigures of a summary.json (and the Explanation of its median iteration, if any)."""
    metric = summary.primary_metric or next(iter(summary.metrics))
    m = summary.metrics[metric]
    b = (summary.breakdown or {}).get(metric)
    comps = {c: _figure(e.mean, f"{c} mean") for c, e in (b.components if b else {}).items() if not e.derived}
    asleep, side_time = {}, {}
    for role, side in (b.per_side if b else {}).items():
        sc = {c: _figure(e.mean, f"{role} {c} mean") for c, e in side.components.items()}
        total = sum(v for v in sc.values() if v > 0)
        if total > 0:
            asleep[role] = sc.get("blocked", 0.0) / total
            side_time[role] = (sc.get("blocked", 0.0), total)
    pe = summary.probe_effect.metrics.get(metric) if summary.probe_effect else None
    ci = m.ci95_median
    q = m.iqr
    syscalls = wakeups = None
    if explanation is not None and not explanation.how.startswith("the median"):
        explanation_typical = None
    else:
        explanation_typical = explanation
    if explanation is not None:
        # the workload's own threads are A, B, ... in the chain; other tasks go by their names
        steps = [(who, what) for _, who, what in explanation.chain if len(who) == 1 and who.isupper()]
        syscalls = sum(1 for _, what in steps if what.startswith("enters "))
        wakeups = sum(1 for _, what in steps if what.startswith("wake-up: wakes"))
    return RunFigures(
        label=label,
        workload=summary.workload or "",
        median_ns=_figure(m.median, "median"),
        mean_ns=_figure(m.mean, "mean"),
        n=int(m.n),
        median_ci=(float(ci[0]), float(ci[1])) if ci else None,
        components=comps,
        preempted_by=[(f"{p.comm or '?'} (tid {p.tid})", float(p.share or 0)) for p in (b.preempted_by if b else [])][
            :3
        ],
        syscalls=syscalls,
        wakeups=wakeups,
        side_blocked_share=asleep,
        side_time=side_time,
        iqr={"mean": _figure(q.mean, "iqr mean"), "removed": float(q.removed or 0)} if q and q.n else None,
        typical_ns=float(explanation_typical.latency_ns) if explanation_typical is not None else None,
        typical={c: float(v) for c, v in explanation_typical.components.items()} if explanation_typical else {},
        probe_ratio=float(pe.ratio) if pe and pe.ratio else None,
        probe_ratio_ci=(pe.ratio_ci95[0], pe.ratio_ci95[1]) if pe and pe.ratio_ci95 else None,
        untraced_median_ns=float(pe.untraced_median) if pe and pe.untraced_median else None,
        waking_ns=comps.get("wakeup", 0.0) + comps.get("runqueue", 0.0) if comps else None,
        waits_ns=comps.get("runqueue", 0.0) + comps.get("preempted", 0.0) if comps else None,
        holders=[
            Holding(p.comm or "?", int(p.tid), p.pid, float(p.ns_per_iteration or 0.0), bool(p.tracer))
            for p in (b.preempted_by if b else [])
        ],
    )


def smallest_step(latencies_ns: Any) -> float:  # noqa: ANN401
    """The smallest difference between two distinct latencies: the finest step the clock and the
    arithmetic let a measurement show (0 when all are equal)."""
    u = np.unique(np.asarray(latencies_ns, np.float64))
    return float(np.diff(u).min()) if len(u) > 1 else 0.0


def figures_json(fig: Any) -> dict[str, Any]:  # noqa: ANN401
    """A lab's figures as JSON (dataclasses as dicts, tuples as lists)."""
    return dataclasses.asdict(fig)


# --- a busy machine: tasks foreign to the lab -------------------------------------------

# A task foreign to the lab (not the workload's threads, not the lab's own hog, not the tracer's
# thread) disturbed a run when it held the CPU for more than FOREIGN_SHARE of the time the run's
# critical path waited for one (run queue and preempted, per round trip on average), and for at
# least FOREIGN_FLOOR of the run's mean round trip (holding most of 20 ns of waits changes
# nothing). The figures are the path's own: summary.json's preempted_by sums the path's waiting
# segments by the task that held the CPU meanwhile.
FOREIGN_SHARE = 0.2
FOREIGN_FLOOR = 0.05


@dataclass(frozen=True)
class Disturbance:
    """A run of the lab and the foreign task that held the CPU while its path waited."""

    run: str  # the run's key in the lab (its directory)
    holder: Holding
    waits_ns: float  # the run's waits for a CPU on the critical path, mean per round trip
    median_ns: float
    mean_ns: float


def disturbances(runs: Mapping[str, RunFigures], own: Mapping[str, Collection[int]]) -> list[Disturbance]:
    """The runs (by key) a task foreign to the lab disturbed, by the rule above; own: per run,
    the tids of the lab's own tasks beside the workload (its hog)."""
    out = []
    for key, r in runs.items():
        if not r.waits_ns:
            continue
        mine = set(own.get(key, ()))
        for h in r.holders:
            if h.tracer or h.tid in mine:
                continue
            if h.ns > FOREIGN_SHARE * r.waits_ns and h.ns >= FOREIGN_FLOOR * r.mean_ns:
                out.append(Disturbance(key, h, r.waits_ns, r.median_ns, r.mean_ns))
    return out


def disturbance_claim(d: Disturbance) -> Claim:
    """What a foreign task did to a run, in words (holds: the rule found it)."""
    return claim(
        True,
        "A neighbour took the CPU in run "
        + d.run
        + ": "
        + d.holder.comm
        + " (tid {tid}), a task foreign to this lab, held it for {held} per round trip on average, {share} of "
        "the {waits} the critical path waited for a CPU (the rule: more than {rule}); that run's median is "
        "{median}, its mean {mean}, and the claims comparing it say so.",
        tid=Quantity(d.holder.tid, "id"),
        held=T(d.holder.ns),
        share=P_against(d.holder.ns / d.waits_ns, FOREIGN_SHARE),
        waits=T(d.waits_ns),
        rule=P(FOREIGN_SHARE),
        median=T(d.median_ns),
        mean=T(d.mean_ns),
    )


def mark_beside(claims: Sequence[Claim], disturbed: Sequence[Disturbance]) -> list[Claim]:
    """Every claim of a lab compares its runs: each is marked with the runs a foreign task
    disturbed (none: unchanged)."""
    runs = tuple(dict.fromkeys(d.run for d in disturbed))
    return [dataclasses.replace(c, beside=runs) for c in claims] if runs else list(claims)


def path_holders(path: Sequence[Any]) -> tuple[list[tuple[int, float]], str]:
    """Who held the CPU while an explained iteration's critical path waited for one, from its
    segments: (tid, ns) longest first, summed over the path's run-queue segments (woken, waiting
    for the CPU: what explain prints as "CPU held by"), or over its preempted ones where no
    run-queue segment has a holder; and which of the two it is."""
    for state in ("runqueue", "preempted"):
        held: dict[int, float] = {}
        for seg in path:
            tid = getattr(seg, "holder_tid", 0) or 0
            if seg.component == state and tid > 0:
                held[tid] = held.get(tid, 0.0) + float(seg.end_ns - seg.start_ns)
        if held:
            return sorted(held.items(), key=lambda kv: (-kv[1], kv[0])), state
    return [], "runqueue"


# --- 1. same-vs-cross ------------------------------------------------------------------


@dataclass(frozen=True)
class SameCross:
    same: RunFigures
    cross: RunFigures


WAKE = ("wakeup", "runqueue")


def same_vs_cross_claims(f: SameCross) -> list[Claim]:
    s, c = f.same, f.cross
    ratio = c.median_ns / s.median_ns
    out = []
    if c.median_ns > s.median_ns and c.differs_from(s):
        out.append(
            claim(
                True,
                "Across CPUs the round trip is {ratio} slower than on one CPU: {cross} against {same} (medians).",
                ratio=X(ratio),
                cross=T(c.median_ns),
                same=T(s.median_ns),
            )
        )
    else:
        out.append(
            claim(
                False,
                "Across CPUs the round trip is not clearly slower here: {cross} against {same} on one CPU "
                "(medians, {ratio}); their {level} intervals "
                + ("overlap." if not c.differs_from(s) else "leave each other out, the cross-CPU one below."),
                ratio=X(ratio),
                cross=T(c.median_ns),
                same=T(s.median_ns),
                level=P(0.95),
            )
        )
    if c.typical and s.typical and c.typical_ns is not None and s.typical_ns is not None:
        # (typical_ns is set with typical) the explained median iterations: their components add up to a typical round trip each
        ct, st, which = c.typical, s.typical, "median"
        c_total, s_total = c.typical_ns, s.typical_ns
    else:
        ct, st, which = c.components, s.components, "mean"
        c_total, s_total = c.mean_ns, s.mean_ns
    diff = c_total - s_total
    c_wake = sum(ct.get(k, 0.0) for k in WAKE)
    s_wake = sum(st.get(k, 0.0) for k in WAKE)
    wake = c_wake - s_wake
    if ct and st:
        movers = sorted(((k, ct.get(k, 0.0) - st.get(k, 0.0)) for k in ct), key=lambda kv: -kv[1])
        top, top_ns = movers[0]
        # the rule: the waking (wake-up + run queue) makes most of the difference when what it
        # grows by, from one CPU to two, is at least half of what the round trip grows by; the
        # share is that growth over the difference, both printed
        holds = diff > 0 and wake >= 0.5 * diff
        out.append(
            claim(
                holds,
                "Of the cross-CPU round trip's {total} (the " + which + " iteration), {wakeup} are the wake-up of "
                "the peer on the other CPU (the IPI and the idle exit) and {runqueue} the run queue: {c_wake} of "
                "waking against {s_wake} on one CPU (a wake-up there is queued on the waker's own CPU, no IPI). "
                "The {wake} more is {share} of the {diff} the cross-CPU round trip adds: most of it."
                if holds
                else "The waking does not make most of the difference here: the cross-CPU round trip's (the "
                + which
                + " iteration) wake-up of the other CPU (the IPI and the idle exit) and run queue take {c_wake} "
                "({wakeup} + {runqueue}) against {s_wake} on one CPU, {wake} more, {share} of the {diff} it adds "
                "(the rule: at least half); the component that grew most is " + top + " ({top}).",
                total=T(c_total),
                wakeup=T(ct.get("wakeup", 0.0)),
                runqueue=T(ct.get("runqueue", 0.0)),
                c_wake=T(c_wake),
                s_wake=T(s_wake),
                wake=T(wake),
                share=P(wake / diff if diff else 0.0),
                diff=T(diff),
                **({} if holds else {"top": T(top_ns)}),
            )
        )
        same_wake = s.comp(*WAKE)
        holds = same_wake <= 0.1 * s.mean_ns
        out.append(
            claim(
                holds,
                (
                    "On one CPU nobody waits for another CPU to wake: wake-up and run queue take {wake} of its "
                    "{mean} (means; the rule: at most a tenth), while the system calls (the peer's included, on "
                    "the path) take {syscall}."
                )
                if holds
                else (
                    "Even on one CPU, wake-up and run queue take {wake} of its {mean} ({share}, means; the rule: "
                    "at most a tenth) here: the woken side waited for the CPU its waker or another task held "
                    "(system calls: {syscall})."
                ),
                wake=T(same_wake),
                mean=T(s.mean_ns),
                syscall=T(s.comp("syscall")),
                **({} if holds else {"share": P(same_wake / s.mean_ns)}),
            )
        )
    return out


# --- 2. primitives ---------------------------------------------------------------------


@dataclass(frozen=True)
class Primitives:
    rungs: list[RunFigures]  # the ladder, in the order of the textbook (cheapest first)


def primitives_claims(f: Primitives) -> list[Claim]:
    rungs = f.rungs
    out = []
    first = rungs[0]
    cheapest = min(rungs, key=lambda r: r.median_ns)
    if cheapest is first:
        second = sorted(rungs, key=lambda r: r.median_ns)[1]
        out.append(
            claim(
                True,
                "Spinning on shared memory is the cheapest round trip, "
                + first.label
                + ": {first} with {calls} system calls, against {second} for "
                + second.label
                + ", the next cheapest.",
                first=T(first.median_ns),
                calls=N(first.syscalls or 0),
                second=T(second.median_ns),
            )
        )
    else:
        out.append(
            claim(
                False,
                "Spinning on shared memory ("
                + first.label
                + ", {first}) is not the cheapest here: "
                + cheapest.label
                + " is, at {cheapest}.",
                first=T(first.median_ns),
                cheapest=T(cheapest.median_ns),
            )
        )
    with_calls = [r for r in rungs if r.syscalls is not None]
    if len(with_calls) >= 3:
        counts = [int(r.syscalls or 0) for r in with_calls]
        rho = _spearman(counts, [r.median_ns for r in with_calls])
        distinct = len(set(counts))
        tied = max(counts.count(c) for c in set(counts))
        # the rule: the count orders the ladder when the rank correlation is at least 0.5 and the
        # counts take at least three values (rungs tied at one count order nothing between them)
        holds = rho >= 0.5 and distinct >= 3
        listed = ", ".join(r.label + " {calls_" + str(i) + "}" for i, r in enumerate(with_calls))
        out.append(
            claim(
                holds,
                "System calls per round trip (the explained median iteration's, on the critical path): "
                + listed
                + ". The more a round trip makes, the more it costs: their rank correlation with the median is {rho}."
                if holds
                else "System calls per round trip (the explained median iteration's, on the critical path): "
                + listed
                + ". The count does not order the ladder here (the rule: a rank correlation of at least {rule} "
                "over at least three distinct counts): the correlation is {rho}, with {tied} of the {rungs} rungs "
                "at one count; wake-ups and the network stack weigh more than the count.",
                rho=Quantity(rho, "plain"),
                **{f"calls_{i}": N(c) for i, c in enumerate(counts)},
                **({} if holds else {"rule": Quantity(0.5, "plain"), "tied": N(tied), "rungs": N(len(counts))}),
            )
        )
    by = {r.workload: r for r in rungs}
    if "unix-stream" in by and "tcp" in by:
        u, t = by["unix-stream"], by["tcp"]
        holds = t.median_ns > u.median_ns
        out.append(
            claim(
                holds,
                (
                    "Loopback TCP costs {ratio} a UNIX socket's round trip ({tcp} against {unix}): the same "
                    "bytes go through the network stack."
                )
                if holds
                else "Loopback TCP ({tcp}) is not dearer than a UNIX socket ({unix}) here ({ratio}).",
                ratio=X(t.median_ns / u.median_ns),
                tcp=T(t.median_ns),
                unix=T(u.median_ns),
            )
        )
    sleepers = [r for r in rungs if r is not first and r.components]
    if first.components and sleepers:
        # the sleeping rung in the middle of the ladder by its waking's share (the lower of two
        # middles): its share is rebuilt from the two figures the sentence prints
        ranked = sorted((r for r in sleepers if _total(r) > 0), key=lambda r: _waking(r) / _total(r))
        mid = ranked[(len(ranked) - 1) // 2]
        share = _waking(mid) / _total(mid)
        holds = share >= 0.2 and _waking(first) < 0.1 * _total(first)
        out.append(
            claim(
                holds,
                "The primitives that sleep pay for waking the other side: wake-up and run queue are {share} of "
                "a typical one's round trip ("
                + mid.label
                + ", the middle of the ladder by that share: {mid_wake} of {mid_total}), while the spinning one "
                "spends {spin} of its {spin_total} on them."
                if holds
                else "Waking the other side is not what separates the sleeping primitives from spinning here (the "
                "rule: at least {rule} of a typical sleeping one's round trip): wake-up and run queue are {share} "
                "of " + mid.label + "'s ({mid_wake} of {mid_total}, the middle of the ladder by that share), "
                "{spin} of the spinning one's {spin_total}.",
                share=P(share),
                mid_wake=T(_waking(mid)),
                mid_total=T(_total(mid)),
                spin=T(_waking(first)),
                spin_total=T(_total(first)),
                **({} if holds else {"rule": P(0.2)}),
            )
        )
    return out


def _parts(r: RunFigures) -> dict[str, float]:
    """The components of a typical round trip: the explained median iteration's (they add up
    to it), else the means (which the slowest iterations pull)."""
    return r.typical or r.components


def _total(r: RunFigures) -> float:
    return r.typical_ns if r.typical and r.typical_ns else r.mean_ns


def _waking(r: RunFigures) -> float:
    p = _parts(r)
    return float(sum(p.get(k, 0.0) for k in WAKE))


def _spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (ties get their mean rank); 0 when either side is constant."""
    rx, ry = _ranks(np.asarray(x, float)), _ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(a: np.ndarray) -> np.ndarray:
    order = np.argsort(a, kind="stable")
    r = np.empty(len(a))
    r[order] = np.arange(len(a), dtype=float)
    for v in np.unique(a):
        r[a == v] = r[a == v].mean()
    return r


# --- 3. size-and-copy ------------------------------------------------------------------


@dataclass(frozen=True)
class SizePoint:
    size: int
    median_ns: float
    median_ci: tuple[float, float] | None = None

    @property
    def rate(self) -> float:
        """Bytes per second one way: the message's size over half the round trip."""
        return self.size / (self.median_ns / 2) * 1e9


@dataclass(frozen=True)
class StreamPoint:
    """pipe-bandwidth or unix-bandwidth at one size: the mean time of a write of size bytes to a
    peer that only reads."""

    size: int
    mean_write_ns: float

    @property
    def rate(self) -> float:
        """Bytes per second of a stream of such writes."""
        return self.size / self.mean_write_ns * 1e9


@dataclass(frozen=True)
class SizeCopy:
    pipe: list[SizePoint]
    unix: list[SizePoint]
    pipe_buffer: int  # bytes a pipe holds (F_GETPIPE_SZ's default)
    ns_per_byte: float | None = None  # the sweep's fitted slope over the pipe's sizes
    ns_per_byte_ci: tuple[float, float] | None = None
    pipe_stream: list[StreamPoint] = field(default_factory=list)  # pipe-bandwidth, unix-bandwidth
    unix_stream: list[StreamPoint] = field(default_factory=list)


def _slope(a: SizePoint, b: SizePoint) -> float:
    return (b.median_ns - a.median_ns) / (b.size - a.size)


def size_and_copy_claims(f: SizeCopy) -> list[Claim]:
    out = []
    p = sorted(f.pipe, key=lambda s: s.size)
    small = [s for s in p if s.size <= 4096]
    if len(small) >= 2:
        lo, hi = small[0], small[-1]
        ratio = hi.median_ns / lo.median_ns
        holds = ratio < 1.5
        out.append(
            claim(
                holds,
                "Up to a page the size hardly matters: a pipe round trip of {a} takes {ta}, of {b} {tb} ({ratio}): "
                "the fixed cost of the system calls and wake-ups dominates."
                if holds
                else "Even small messages cost by their size here: a pipe round trip of {a} takes {ta}, of {b} "
                "{tb} ({ratio}).",
                a=B(lo.size),
                ta=T(lo.median_ns),
                b=B(hi.size),
                tb=T(hi.median_ns),
                ratio=X(ratio),
            )
        )
    if f.ns_per_byte is not None:
        ci = f.ns_per_byte_ci
        holds = f.ns_per_byte > 0 and (ci is None or ci[0] > 0)
        out.append(
            claim(
                holds,
                "Each further byte of a pipe message costs {slope} per round trip (it is copied twice each way: "
                "into the kernel and out): an effective {rate} for each copy."
                if holds
                else "No cost per byte stands out of the noise here: the fitted slope is {slope} per byte per "
                "round trip, its {level} interval reaching down to {lo}.",
                slope=Quantity(f.ns_per_byte, "per_byte"),
                **(
                    {"rate": Quantity(4e9 / f.ns_per_byte, "rate")}
                    if holds
                    else {"lo": Quantity(ci[0] if ci else f.ns_per_byte, "per_byte"), "level": P(0.95)}
                ),
            )
        )
    below = [s for s in p if s.size <= f.pipe_buffer]
    above = [s for s in p if s.size >= f.pipe_buffer]
    if len(below) >= 2 and len(above) >= 2:
        s_below = _slope(below[-2], below[-1])
        s_above = _slope(above[0], above[-1])
        holds = s_above > 1.2 * s_below
        out.append(
            claim(
                holds,
                "The curve bends at the pipe's buffer ({buf}): below it a byte adds {below}, above it {above}, "
                "since a larger message no longer fits and the two sides take turns filling and draining it."
                if holds
                else "The pipe's buffer ({buf}) does not bend the curve here: a byte adds {below} below it and "
                "{above} above it.",
                buf=B(f.pipe_buffer),
                below=Quantity(s_below, "per_byte"),
                above=Quantity(s_above, "per_byte"),
            )
        )
    ps = sorted(f.pipe_stream, key=lambda x: x.size)
    if len(ps) >= 2:
        smallest_write, largest_write = (
            ps[0],
            max((x for x in ps if x.size <= f.pipe_buffer), key=lambda x: x.size, default=ps[-1]),
        )
        holds = largest_write.rate > smallest_write.rate
        out.append(
            claim(
                holds,
                "Streaming, bigger writes move more per second: a pipe carries {lo_rate} in writes of {lo}, "
                "{hi_rate} in writes of {hi}, since each call's fixed cost is spread over more bytes."
                if holds
                else "Streaming, bigger writes do not move more per second here: a pipe carries {lo_rate} in "
                "writes of {lo} and {hi_rate} in writes of {hi}.",
                lo=B(smallest_write.size),
                hi=B(largest_write.size),
                lo_rate=Quantity(smallest_write.rate, "rate"),
                hi_rate=Quantity(largest_write.rate, "rate"),
            )
        )
    us_ = {x.size: x for x in f.unix_stream}
    both = [x for x in ps if x.size in us_]
    if both:
        x = max(both, key=lambda x: x.size if x.size <= f.pipe_buffer else -1)
        u = us_[x.size]
        holds = x.rate > u.rate
        out.append(
            claim(
                holds,
                "In a stream of {size} writes the pipe ({p_rate}) beats the UNIX socket ({u_rate}), as L41's "
                "students found for the pipe against sockets."
                if holds
                else "In a stream of {size} writes the UNIX socket ({u_rate}) beats the pipe ({p_rate}) here, "
                "unlike L41's measurement.",
                size=B(x.size),
                p_rate=Quantity(x.rate, "rate"),
                u_rate=Quantity(u.rate, "rate"),
            )
        )
    big_p, big_u = (
        (max(p, key=lambda s: s.size) if p else None),
        (max(f.unix, key=lambda s: s.size) if f.unix else None),
    )
    if big_p and big_u and big_p.size == big_u.size:
        holds = big_p.median_ns < big_u.median_ns
        out.append(
            claim(
                holds,
                "At {size} a pipe moves {prate} one way, a UNIX socket {urate}: the pipe is {ratio} faster "
                "(L41's students found pipes ahead too)."
                if holds
                else "At {size} a UNIX socket moves {urate} one way and a pipe {prate}: unlike L41's "
                "measurement, the socket is {ratio} faster here.",
                size=B(big_p.size),
                prate=Quantity(big_p.rate, "rate"),
                urate=Quantity(big_u.rate, "rate"),
                ratio=X(big_u.median_ns / big_p.median_ns if holds else big_p.median_ns / big_u.median_ns),
            )
        )
    return out


# --- 4. interference -------------------------------------------------------------------


@dataclass(frozen=True)
class Interference:
    """A pipe round trip alone, with a CPU hog at nice HOG_NICE on the peer's CPU, with the hog
    at nice NICE, and with the hog at HOG_NICE while the workload runs SCHED_FIFO; per run with
    a hog, how long the hog held the CPU per round trip (the breakdown's preempted-by table)."""

    alone: RunFigures
    hog: RunFigures
    nice_hog: RunFigures
    fifo: RunFigures
    hog_ns: float  # the hog's preemption per round trip, in each run with a hog
    nice_hog_ns: float
    fifo_hog_ns: float
    hog_comm: str  # the hog's command name, as the tracer records it
    hog_tid: int  # the hog of the run explained
    hog_named: bool | None  # whether the culprit below is the hog (None: not explained)
    # the explained slowest iteration with the hog: who held the CPU longest while its critical
    # path waited for one (path_holders: command name, tid, ns), and the hog's own time there
    culprit: tuple[str, int, float] | None = None
    hog_path_ns: float = 0.0


# The plain hog's nice value: it outweighs the workload (at nice 0 a waking sleeper wins the CPU
# anyway; at -20 the workload starved for a minute on the 2-vCPU VM).
HOG_NICE = -10
NICE = 19  # the nice hog's
WEIGHTS = {-10: 9548, 0: 1024, 19: 15}  # kernel/sched/core.c sched_prio_to_weight


def preempted_ns(summary: RunSummary, tid: int | None) -> float:
    """ns per iteration the task tid held the CPU while the critical path waited for it
    (summary.json breakdown preempted_by; 0 when it is not listed)."""
    metric = summary.primary_metric or next(iter(summary.metrics))
    b = (summary.breakdown or {}).get(metric)
    return float(sum(r.ns_per_iteration or 0.0 for r in (b.preempted_by if b else []) if r.tid == tid))


def interference_claims(f: Interference) -> list[Claim]:
    a, h, n, r = f.alone, f.hog, f.nice_hog, f.fifo
    out = []
    # the rule: the hog made the round trip wait when it held the CPU for more than a tenth of
    # the alone run's median per round trip (on the path) and the mean grew
    holds = h.mean_ns > a.mean_ns and f.hog_ns > 0.1 * a.median_ns
    out.append(
        claim(
            holds,
            "A CPU hog at nice {nice} on the peer's CPU makes the round trip wait for the CPU: the hog holds it "
            "for {hog} of each round trip on average, and the mean goes from {a_mean} to {h_mean}. The median "
            "moves less ({a_med} to {h_med}): most wake-ups still win the CPU at once, the scheduler favouring "
            "a task that slept."
            if holds
            else "The hog at nice {nice} on the peer's CPU did not make the round trip wait here: it held the CPU "
            "for {hog} per round trip on average (the rule: more than a tenth of the alone median, {tenth}), "
            "of the {waits} the critical path waited for a CPU; the mean went from {a_mean} to {h_mean}, the "
            "median from {a_med} to {h_med}.",
            nice=N(HOG_NICE),
            hog=T(f.hog_ns),
            a_mean=T(a.mean_ns),
            h_mean=T(h.mean_ns),
            a_med=T(a.median_ns),
            h_med=T(h.median_ns),
            **({} if holds else {"tenth": T(0.1 * a.median_ns), "waits": T(h.waits_ns or 0.0)}),
        )
    )
    holds = f.nice_hog_ns < 0.5 * f.hog_ns
    out.append(
        claim(
            holds,
            "At nice {nice} the same hog gives way: it holds the CPU for {n_hog} per round trip instead of "
            "{hog}, since the fair scheduler weighs it {weight} less; the median is {n_med}."
            if holds
            else "Nice {nice} did not make the hog give way here (the rule: less than half of what it held at "
            "nice {hog_nice}): it held the CPU for {n_hog} per round trip, against {hog} at nice {hog_nice}; the "
            "median is {n_med}.",
            nice=N(NICE),
            n_hog=T(f.nice_hog_ns),
            hog=T(f.hog_ns),
            n_med=T(n.median_ns),
            **({"weight": X(WEIGHTS[HOG_NICE] / WEIGHTS[NICE])} if holds else {"hog_nice": N(HOG_NICE)}),
        )
    )
    holds = f.fifo_hog_ns < 0.2 * f.hog_ns
    out.append(
        claim(
            holds,
            "Under SCHED_FIFO the workload preempts the hog at once: the hog holds the CPU for {f_hog} per round "
            "trip (without SCHED_FIFO: {hog}), and the median is {r_med} (alone: {a_med})."
            if holds
            else "SCHED_FIFO did not keep the hog off here (the rule: less than a fifth of what it held without): "
            "it still held the CPU for {f_hog} per round trip (without SCHED_FIFO: {hog}); the median is {r_med}.",
            f_hog=T(f.fifo_hog_ns),
            hog=T(f.hog_ns),
            r_med=T(r.median_ns),
            **({"a_med": T(a.median_ns)} if holds else {}),
        )
    )
    if f.hog_named is None:
        out.append(claim(False, "The slowest iteration with the hog could not be explained (see the warning)."))
        return out
    if f.culprit is None:
        out.append(
            claim(
                False,
                "The slowest iteration with the hog never waited for a CPU another task held: its time went "
                "elsewhere (see the explained iteration).",
            )
        )
        return out
    # the rule: explain names the culprit when the task its path shows holding the CPU longest
    # while the path waited (path_holders) is the hog
    comm, tid, ns = f.culprit
    out.append(
        claim(
            True,
            "explain names the culprit: the slowest iteration with the hog shows " + comm + " (tid {tid}) holding "
            "the CPU longest while its critical path waited for one, {ns} in all.",
            tid=Quantity(tid, "id"),
            ns=T(ns),
        )
        if f.hog_named
        else claim(
            False,
            "explain of the slowest iteration with the hog does not point at the hog: its critical path shows "
            + comm
            + " (tid {tid}) holding the CPU longest while it waited, {ns} in all, the hog "
            + f.hog_comm
            + " (tid {hog_tid}) {hog_ns}.",
            tid=Quantity(tid, "id"),
            ns=T(ns),
            hog_tid=Quantity(f.hog_tid, "id"),
            hog_ns=T(f.hog_path_ns),
        )
    )
    return out


# --- 5. idle-and-polling ---------------------------------------------------------------


@dataclass(frozen=True)
class IdlePolling:
    busy: RunFigures  # back to back
    paused: RunFigures  # --interval
    poll: RunFigures  # shm-poll
    interval_us: int


def idle_and_polling_claims(f: IdlePolling) -> list[Claim]:
    b, p, q = f.busy, f.paused, f.poll
    out = []
    holds = p.comp("wakeup") > b.comp("wakeup")
    out.append(
        claim(
            holds,
            "A pause of {pause} between round trips lets the CPUs go idle, and waking them is slower: the "
            "wake-up takes {p_wake} against {b_wake} back to back (means); the round trip's median is {p_med} "
            "against {b_med}."
            if holds
            else "Pausing {pause} between round trips did not slow the wake-up here: {p_wake} against {b_wake} back "
            "to back (means); medians {p_med} and {b_med}.",
            pause=T(f.interval_us * 1000),
            p_wake=T(p.comp("wakeup")),
            b_wake=T(b.comp("wakeup")),
            p_med=T(p.median_ns),
            b_med=T(b.median_ns),
        )
    )
    holds = q.median_ns < b.median_ns
    out.append(
        claim(
            holds,
            "Polling shared memory needs no wake-up: its round trip is {q_med}, {ratio} faster than the pipe's {b_med}."
            if holds
            else "Polling is not faster here: {q_med} against the pipe's {b_med}; a polling side that loses its CPU "
            "waits a whole time slice.",
            q_med=T(q.median_ns),
            b_med=T(b.median_ns),
            **({"ratio": X(b.median_ns / q.median_ns)} if holds else {}),
        )
    )
    qt, bt = q.side_time.get("peer"), b.side_time.get("peer")
    if qt is not None and bt is not None:
        qp, bp = qt[0] / qt[1], bt[0] / bt[1]
        holds = qp < 0.05 and bp > qp
        out.append(
            claim(
                holds,
                "The latency is bought with a CPU: the polling peer never sleeps (asleep {q} of its time, {q_a} of "
                "{q_t} a round trip, spinning or waiting for its CPU the rest), where the pipe's peer sleeps {b} of "
                "its time ({b_a} of {b_t}), waiting for the message."
                if holds
                else "The polling peer was asleep {q} of its time here ({q_a} of {q_t} a round trip; the rule for "
                "never: under {rule}), the pipe's peer {b} ({b_a} of {b_t}).",
                q=P(qp),
                b=P(bp),
                q_a=T(qt[0]),
                q_t=T(qt[1]),
                b_a=T(bt[0]),
                b_t=T(bt[1]),
                **({} if holds else {"rule": P(0.05)}),
            )
        )
    return out


# --- 6. probe-effect -------------------------------------------------------------------


@dataclass(frozen=True)
class ProbeEffect:
    pipe: RunFigures  # traced, with its untraced twin
    null: RunFigures  # null-syscall, traced, with its untraced twin
    pipe_syscalls: int  # system calls per round trip on the measured path
    null_syscalls: int


def probe_effect_claims(f: ProbeEffect) -> list[Claim]:
    p, n = f.pipe, f.null
    out = []
    if p.probe_ratio is None or n.probe_ratio is None:
        return [claim(False, "No untraced twin was measured: the probe effect is unknown.")]
    lo = p.probe_ratio_ci[0] if p.probe_ratio_ci else p.probe_ratio
    holds = lo > 1
    out.append(
        claim(
            holds,
            "Tracing slows what it measures: the traced pipe round trip's median is {ratio} the untraced one's "
            "({traced} against {untraced})."
            if holds
            else "The tracer's cost is within the noise for the pipe here: traced {traced}, untraced {untraced} "
            "({ratio}).",
            ratio=X(p.probe_ratio),
            traced=T(p.median_ns),
            untraced=T(p.untraced_median_ns or 0),
        )
    )
    holds = n.probe_ratio > p.probe_ratio
    out.append(
        claim(
            holds,
            "The cheaper the operation, the larger the distortion: a null system call is {n_ratio} slower traced, "
            "the pipe round trip {p_ratio}."
            if holds
            else "The null system call is not distorted more than the pipe here: {n_ratio} against {p_ratio}.",
            n_ratio=X(n.probe_ratio),
            p_ratio=X(p.probe_ratio),
        )
    )
    per_null = (n.median_ns - (n.untraced_median_ns or n.median_ns)) / max(f.null_syscalls, 1)
    per_pipe = (p.median_ns - (p.untraced_median_ns or p.median_ns)) / max(f.pipe_syscalls, 1)
    # the rule: "about the same" is within a factor of 3 either way, both costs positive
    holds = per_null > 0 and per_pipe > 0 and 1 / 3 < per_pipe / per_null < 3
    out.append(
        claim(
            holds,
            "The tracer costs about the same per system call in both (the rule: within {factor} of each other): "
            "{per_null} on a null call, {per_pipe} for each of the pipe's {calls} calls per round trip (its "
            "records of entry and exit)."
            if holds
            else "The tracer does not cost about the same per system call in both here (the rule: within {factor} "
            "of each other): {per_null} on a null call, {per_pipe} for each of the pipe's {calls} calls per round "
            "trip; the pipe's round trip also pays for the scheduler's records (switches and wake-ups).",
            per_null=T(per_null),
            per_pipe=T(per_pipe),
            calls=N(f.pipe_syscalls),
            factor=X(3),
        )
    )
    return out


# --- 7. pitfalls -----------------------------------------------------------------------


@dataclass(frozen=True)
class Pitfalls:
    clock_resolution_ns: float  # clock_getres(CLOCK_MONOTONIC)
    step_ns: float  # the smallest step between two distinct latencies of the null syscall
    null_median_ns: float
    first_median_ns: float  # the first iterations without warm-up
    first_n: int
    rest_median_ns: float
    pipe: RunFigures  # with its 1.5 IQR figures
    # a semaphore ping-pong, then the same with a usleep(sleep_us) in the peer's loop (a report's
    # set-up: it subtracted the nominal sleep from what it timed)
    sleep_us: int = 0
    sem_median_ns: float | None = None
    sem_sleep_median_ns: float | None = None


def pitfalls_claims(f: Pitfalls) -> list[Claim]:
    out = []
    holds = f.step_ns <= 0.1 * f.null_median_ns
    out.append(
        claim(
            holds,
            "The clock is fine enough: CLOCK_MONOTONIC's resolution is {res} and measured latencies differ in steps "
            "of {step}, well below a null system call's {null}."
            if holds
            else "The clock is coarse for this: latencies come in steps of {step} (resolution {res}) against a null "
            "system call of {null}; averaging many iterations is the only way below it.",
            res=T(f.clock_resolution_ns),
            step=T(f.step_ns),
            null=T(f.null_median_ns),
        )
    )
    holds = f.first_median_ns > 1.2 * f.rest_median_ns
    out.append(
        claim(
            holds,
            "Warm-up matters: without it, the first {n} pipe round trips take {first} (median), the rest {rest}: "
            "cold caches, page faults and idle CPUs."
            if holds
            else "The first {n} round trips ({first}, median) are not slower than the rest ({rest}) here: the "
            "warm-up is not what distorts this run.",
            n=N(f.first_n),
            first=T(f.first_median_ns),
            rest=T(f.rest_median_ns),
        )
    )
    p = f.pipe
    if p.iqr:
        removed = p.iqr["removed"] / p.n if p.n else 0.0
        holds = abs(p.iqr["mean"] - p.median_ns) < abs(p.mean_ns - p.median_ns)
        out.append(
            claim(
                holds,
                "Outliers pull the mean: the {k} IQR rule removes {removed} of the {n} iterations ({count}) and the mean "
                "falls from {mean} to {iqr_mean}, nearer the median of {median}; report the median, or say what "
                "was removed."
                if holds
                else "Removing the values beyond {k} IQR ({count} of {n}, {removed}) does not bring the mean ({mean} -> "
                "{iqr_mean}) nearer the median ({median}) here.",
                k=Quantity(1.5, "factor"),
                removed=P(removed),
                count=N(p.iqr["removed"]),
                n=N(p.n),
                mean=T(p.mean_ns),
                iqr_mean=T(p.iqr["mean"]),
                median=T(p.median_ns),
            )
        )
    if f.sleep_us and f.sem_median_ns is not None and f.sem_sleep_median_ns is not None:
        nominal = f.sleep_us * 1000.0
        added = f.sem_sleep_median_ns - f.sem_median_ns
        holds = abs(added - nominal) > 0.1 * nominal
        out.append(
            claim(
                holds,
                "A usleep({us}) in the peer's loop adds {added} to the semaphore round trip (median {with_} against "
                "{without}), {ratio} its nominal {nominal}: the timer's slack and the wake-up from the sleep. A "
                "report that subtracts the nominal sleep from what it timed is off by the difference."
                if holds
                else "A usleep({us}) in the peer's loop adds {added} to the semaphore round trip (median {with_} "
                "against {without}), within {tolerance} of its nominal {nominal} here ({ratio}): subtracting the nominal "
                "sleep would not distort this machine's figures much.",
                us=N(f.sleep_us),
                added=T(added),
                with_=T(f.sem_sleep_median_ns),
                without=T(f.sem_median_ns),
                ratio=X(added / nominal),
                nominal=T(nominal),
                **({} if holds else {"tolerance": P(0.1)}),
            )
        )
    half = p.median_ns / 2
    out.append(
        claim(
            p.mean_ns > 1.1 * p.median_ns,
            "Halving a round trip ({half}) assumes both ways cost the same and that the mean is typical; here the "
            "mean is {ratio} the median, so half the mean ({half_mean}) is no one-way latency."
            if p.mean_ns > 1.1 * p.median_ns
            else "Halving the round trip gives {half}; the mean is close to the median here ({ratio}), so half "
            "the mean ({half_mean}) would read the same.",
            half=T(half),
            ratio=X(p.mean_ns / p.median_ns),
            half_mean=T(p.mean_ns / 2),
        )
    )
    return out
