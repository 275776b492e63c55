"""The labs of `ipctrace lab`: each lab's figures as typed data, and its claims as functions of
those figures. A claim states what the textbook expects and whether this measurement shows it
(`holds`); where it does not, its text says what was seen instead. Every number a claim's text
shows is one of its `quoted` figures, formatted by Quantity (the tests check it), so no number
reaches the page that was not measured or computed from a measurement.

Times are in ns throughout; Quantity chooses the unit shown."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.model.summary import RunSummary, Stats

# --- quoting figures ------------------------------------------------------------------


@dataclass(frozen=True)
class Quantity:
    """A figure as a claim quotes it: its value and how it reads (kind: time in ns, ratio,
    percent of 1, bytes, count, rate in bytes/s)."""

    value: float
    kind: str = "time"

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
            return f"{v * 100:.0f} %"
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

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "holds": self.holds, "figures": {k: q.value for k, q in self.quoted.items()}}


def claim(holds: bool, text: str, **quoted: Quantity) -> Claim:
    """A Claim whose text is the template filled with the quoted figures as they read."""
    return Claim(text.format(**{k: q.show() for k, q in quoted.items()}), bool(holds), quoted)


# --- the figures of one run --------------------------------------------------------------


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
    iqr: dict[str, float] | None = None  # mean and removed of the 1.5 IQR figures (--iqr)
    probe_ratio: float | None = None  # traced median / untraced twin's (--calibrate)
    probe_ratio_ci: tuple[float, float] | None = None
    untraced_median_ns: float | None = None
    # the waking on the critical path, mean (wake-up + run queue): the evidence table's column
    waking_ns: float | None = None
    # the explained median iteration: its latency and its components, which add up to it
    typical_ns: float | None = None
    typical: dict[str, float] = field(default_factory=dict)

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
    m = Stats.from_json(summary.metrics[metric])
    b = (summary.breakdown or {}).get(metric)
    comps = {c: float(e["mean"]) for c, e in (b.components if b else {}).items() if not e.get("derived")}
    asleep = {}
    for role, side in (b.per_side if b else {}).items():
        sc = {c: float(e["mean"]) for c, e in side.components.items()}
        total = sum(v for v in sc.values() if v > 0)
        if total > 0:
            asleep[role] = sc.get("blocked", 0.0) / total
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
        iqr={"mean": _figure(q.mean, "iqr mean"), "removed": float(q.removed or 0)} if q and q.n else None,
        typical_ns=float(explanation_typical.latency_ns) if explanation_typical is not None else None,
        typical={c: float(v) for c, v in explanation_typical.components.items()} if explanation_typical else {},
        probe_ratio=float(pe.ratio) if pe and pe.ratio else None,
        probe_ratio_ci=(pe.ratio_ci95[0], pe.ratio_ci95[1]) if pe and pe.ratio_ci95 else None,
        untraced_median_ns=float(pe.untraced_median) if pe and pe.untraced_median else None,
        waking_ns=comps.get("wakeup", 0.0) + comps.get("runqueue", 0.0) if comps else None,
    )


def smallest_step(latencies_ns: Any) -> float:  # noqa: ANN401
    """The smallest difference between two distinct latencies: the finest step the clock and the
    arithmetic let a measurement show (0 when all are equal)."""
    u = np.unique(np.asarray(latencies_ns, np.float64))
    return float(np.diff(u).min()) if len(u) > 1 else 0.0


def figures_json(fig: Any) -> dict[str, Any]:  # noqa: ANN401
    """A lab's figures as JSON (dataclasses as dicts, tuples as lists)."""
    return dataclasses.asdict(fig)


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
    if c.typical and s.typical:
        # the explained median iterations: their components add up to a typical round trip each
        ct, st, which = c.typical, s.typical, "median"
        c_total, s_total = c.typical_ns, s.typical_ns
    else:
        ct, st, which = c.components, s.components, "mean"
        c_total, s_total = c.mean_ns, s.mean_ns
    diff = c_total - s_total
    wake = sum(ct.get(k, 0.0) for k in WAKE) - sum(st.get(k, 0.0) for k in WAKE)
    if ct and st:
        movers = sorted(((k, ct.get(k, 0.0) - st.get(k, 0.0)) for k in ct), key=lambda kv: -kv[1])
        top, top_ns = movers[0]
        if diff > 0 and wake >= 0.5 * diff:
            out.append(
                claim(
                    True,
                    "Of the cross-CPU round trip's {total} (the " + which + " iteration), {wakeup} are the wake-ups "
                    "of the other CPU (the IPI and the idle exit) and {runqueue} the run queue: the waking accounts "
                    "for {share} of the {diff} it adds to one CPU's round trip.",
                    total=T(c_total),
                    wakeup=T(ct.get("wakeup", 0.0)),
                    runqueue=T(ct.get("runqueue", 0.0)),
                    share=P(wake / diff),
                    diff=T(diff),
                )
            )
        else:
            out.append(
                claim(
                    False,
                    "The wake-ups (the IPI and the idle exit, {wakeup}) and the run queue ({runqueue}) do not "
                    "make most of the difference here: of the {diff} the cross-CPU round trip adds (the "
                    + which
                    + " iterations), they account for {share}; the component that grew most is "
                    + top
                    + " ({top}).",
                    wakeup=T(ct.get("wakeup", 0.0)),
                    runqueue=T(ct.get("runqueue", 0.0)),
                    diff=T(diff),
                    share=P(wake / diff if diff else 0.0),
                    top=T(top_ns),
                )
            )
        same_wake = s.comp(*WAKE)
        holds = same_wake <= 0.1 * s.mean_ns
        out.append(
            claim(
                holds,
                (
                    "On one CPU nobody waits for another CPU to wake: wake-up and run queue take {wake} of its "
                    "{mean} (means), while the system calls (the peer's included, on the path) take {syscall}."
                )
                if holds
                else (
                    "Even on one CPU, wake-up and run queue take {wake} of its {mean} ({share}) here: other tasks "
                    "shared the CPU (system calls: {syscall})."
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
        rho = _spearman([r.syscalls for r in with_calls], [r.median_ns for r in with_calls])
        most = max(with_calls, key=lambda r: (r.syscalls, r.median_ns))
        least = min(with_calls, key=lambda r: (r.syscalls, r.median_ns))
        holds = rho >= 0.5
        out.append(
            claim(
                holds,
                (
                    "The more system calls a round trip makes, the more it costs: the ladder's rank correlation "
                    "of system calls with the median is {rho} ("
                    + least.label
                    + " {least_calls} calls, "
                    + most.label
                    + " {most_calls})."
                )
                if holds
                else (
                    "The count of system calls does not order the ladder here: their rank correlation with the "
                    "median is only {rho} ("
                    + least.label
                    + " {least_calls} calls at {least}, "
                    + most.label
                    + " {most_calls} at {most}); wake-ups and the network stack weigh more than the count."
                ),
                rho=Quantity(rho, "plain"),
                least_calls=N(least.syscalls),
                most_calls=N(most.syscalls),
                **({} if holds else {"least": T(least.median_ns), "most": T(most.median_ns)}),
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
        share = float(np.median([_waking(r) / _total(r) for r in sleepers if _total(r) > 0]))
        holds = share >= 0.2 and _waking(first) < 0.1 * _total(first)
        out.append(
            claim(
                holds,
                "The primitives that sleep pay for waking the other side: wake-up and run queue are {share} of "
                "their typical round trip (the median over the ladder), while the spinning one spends {spin} of "
                "its {spin_total} on them."
                if holds
                else "Waking the other side is not what separates the sleeping primitives from spinning here: "
                "wake-up and run queue are {share} of their typical round trip (median over the ladder), {spin} "
                "of the spinning one's {spin_total}.",
                share=P(share),
                spin=T(_waking(first)),
                spin_total=T(_total(first)),
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
        lo, hi = ps[0], max((x for x in ps if x.size <= f.pipe_buffer), key=lambda x: x.size, default=ps[-1])
        holds = hi.rate > lo.rate
        out.append(
            claim(
                holds,
                "Streaming, bigger writes move more per second: a pipe carries {lo_rate} in writes of {lo}, "
                "{hi_rate} in writes of {hi}, since each call's fixed cost is spread over more bytes."
                if holds
                else "Streaming, bigger writes do not move more per second here: a pipe carries {lo_rate} in "
                "writes of {lo} and {hi_rate} in writes of {hi}.",
                lo=B(lo.size),
                hi=B(hi.size),
                lo_rate=Quantity(lo.rate, "rate"),
                hi_rate=Quantity(hi.rate, "rate"),
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
    hog_named: bool | None  # whether explain of that run's slowest iteration names the hog (None: not explained)


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
    holds = h.mean_ns > a.mean_ns and f.hog_ns > 0.1 * a.median_ns
    out.append(
        claim(
            holds,
            "A CPU hog at nice {nice} on the peer's CPU makes the round trip wait for the CPU: the hog holds it "
            "for {hog} of each round trip on average, and the mean goes from {a_mean} to {h_mean}. The median "
            "moves less ({a_med} to {h_med}): most wake-ups still win the CPU at once, the scheduler favouring "
            "a task that slept."
            if holds
            else "The hog at nice {nice} on the peer's CPU barely shows here: it held the CPU for {hog} per round "
            "trip on average; the mean went from {a_mean} to {h_mean}, the median from {a_med} to {h_med}.",
            nice=N(HOG_NICE),
            hog=T(f.hog_ns),
            a_mean=T(a.mean_ns),
            h_mean=T(h.mean_ns),
            a_med=T(a.median_ns),
            h_med=T(h.median_ns),
        )
    )
    holds = f.nice_hog_ns < 0.5 * f.hog_ns
    out.append(
        claim(
            holds,
            "At nice {nice} the same hog gives way: it holds the CPU for {n_hog} per round trip instead of "
            "{hog}, since the fair scheduler weighs it {weight} less; the median is {n_med}."
            if holds
            else "Nice {nice} did not make the hog give way here: it held the CPU for {n_hog} per round trip, "
            "against {hog} at nice {hog_nice}; the median is {n_med}.",
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
            else "SCHED_FIFO did not keep the hog off here: it still held the CPU for {f_hog} per round trip "
            "(without SCHED_FIFO: {hog}); the median is {r_med}.",
            f_hog=T(f.fifo_hog_ns),
            hog=T(f.hog_ns),
            r_med=T(r.median_ns),
            **({"a_med": T(a.median_ns)} if holds else {}),
        )
    )
    if f.hog_named is None:
        out.append(claim(False, "The slowest iteration with the hog could not be explained (see the warning)."))
        return out
    out.append(
        claim(
            f.hog_named,
            "explain names the culprit: the slowest iteration with the hog shows " + f.hog_comm + " (tid {tid}) "
            "holding the CPU."
            if f.hog_named
            else "explain of the slowest iteration with the hog does not name " + f.hog_comm + " (tid {tid}): "
            "something else made it slow (see the explained iteration).",
            tid=Quantity(f.hog_tid, "id"),
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
    qp, bp = q.side_blocked_share.get("peer"), b.side_blocked_share.get("peer")
    if qp is not None and bp is not None:
        holds = qp < 0.05 and bp > qp
        out.append(
            claim(
                holds,
                "The latency is bought with a CPU: the polling peer never sleeps (asleep {q} of its time, spinning "
                "or waiting for its CPU the rest), where the pipe's peer sleeps {b} of its time, waiting for the "
                "message."
                if holds
                else "The polling peer was asleep {q} of its time here (the pipe's peer: {b}).",
                q=P(qp),
                b=P(bp),
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
    holds = per_null > 0 and per_pipe > 0 and 0.33 < per_pipe / per_null < 3
    out.append(
        claim(
            holds,
            "The tracer costs about the same per system call in both: {per_null} on a null call, {per_pipe} for "
            "each of the pipe's {calls} calls per round trip (its records of entry and exit)."
            if holds
            else "The cost per system call differs between the two: {per_null} on a null call, {per_pipe} for each "
            "of the pipe's {calls} calls: the pipe also pays for the scheduler's records (switches and wake-ups).",
            per_null=T(per_null),
            per_pipe=T(per_pipe),
            calls=N(f.pipe_syscalls),
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
                "Outliers pull the mean: the {k} IQR rule removes {removed} of the iterations ({count}) and the mean "
                "falls from {mean} to {iqr_mean}, nearer the median of {median}; report the median, or say what "
                "was removed."
                if holds
                else "Removing the values beyond {k} IQR ({count}, {removed}) does not bring the mean ({mean} -> "
                "{iqr_mean}) nearer the median ({median}) here.",
                k=Quantity(1.5, "factor"),
                removed=P(removed),
                count=N(p.iqr["removed"]),
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
