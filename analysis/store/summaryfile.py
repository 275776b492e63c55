"""summary.json, of one run (RunSummary) or of a sweep (SweepSummary), as typed values, and their
parsing: the breakdown's result (MetricBreakdown per metric, Tail), the whole-trace view
(Activity), the probe effect and calibration. model/ computes these values (summary.build,
breakdown_stats, activity); store.results.summary_file reads and checks the file into them.

A value read and written again (to_json) is the same JSON: keys in the file's order, a field
absent or null taking its default (empty for a collection, else None)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from analysis.store import records
from analysis.store.jsonfiles import Host, Stats, SummaryTrace, Thread, threads_from_json

# A thread's states over the whole trace (Activity): the timeline's (records.STATES), the last
# (residual) named for what it is there.
STATES = tuple(records.STATES[:-1]) + ("unknown",)
OFF_CPU = ("blocked", "wakeup", "runqueue", "preempted")
# steal: the hypervisor had the CPU the thread held (as far as the thread knows, it ran)
ON_CPU = ("user", "syscall", "copy", "irq", "entry", "steal")


@dataclass(frozen=True)
class MetricEffect:
    """One metric's probe effect: the traced and the untraced median and traced / untraced,
    with its 95 % interval (None below 6 iterations)."""

    traced_median: float
    untraced_median: float
    ratio: float
    ratio_ci95: list[float] | None = None
    unit: str | None = None


@dataclass(frozen=True)
class ProbeEffect:
    """The traced run against its untraced twin: per metric, the two medians and their ratio."""

    untraced_dir: str | None  # absent from a file that has no directory of the twin
    metrics: dict[str, MetricEffect]


@dataclass(frozen=True)
class Settings:
    """The settings of summary.json's params that the tables and pages say, as read: each None
    where the file has none. A run's (ipctrace run: counts, size, duration) or a traced
    program's (ipctrace trace: how its iterations were found, what it ran and followed)."""

    iterations: int | None = None
    warmup: int | None = None
    runs: int | None = None
    size: int | None = None
    duration_s: float | None = None
    cpus: list[int] | None = None
    traced: bool | None = None
    iterations_from: str | None = None  # rtt, markers, a function, "none": a traced program
    command: list[str] | None = None
    pids: list[int] | None = None
    sides: str | None = None
    all_cpus: bool | None = None
    syscalls: list[str] | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Settings:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass(frozen=True)
class ProbeCalibration:
    """What the probes of a traced program's markers or functions add to each iteration's
    window (model/marks.py calibration; summary.json's probe_calibration): the cost subtracted
    (None: nothing was, source says why), split between the window's begin and end."""

    mode: str | None = None
    probe_in_window_ns: int | None = None
    begin_tail_ns: int | None = None
    end_head_ns: int | None = None
    windows: int | None = None  # absent from the file while None: the calibration windows traced
    source: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ProbeCalibration:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if self.windows is None:
            del out["windows"]
        return out


@dataclass(frozen=True)
class RunSummary:
    """summary.json of one run; its fields in the file's order. The last seven are absent from
    the file while None: an untraced run has no trace, a run without a twin no probe_effect,
    copy_estimate comes from a sweep."""

    schema_version: int
    workload: str | None
    status: str | None
    params: dict[str, Any]
    mode: str | None
    host: Host
    warnings: list[str]
    placement: str | None
    threads: list[Thread]
    runs_completed: int | None
    iterations_completed: int | None
    primary_metric: str | None
    clock: str | None
    extra: dict[str, Any]
    metrics: dict[str, Stats]
    trace: SummaryTrace | None = None
    breakdown: dict[str, MetricBreakdown] | None = None
    tail: Tail | None = None
    probe_effect: ProbeEffect | None = None
    copy_estimate: CopyEstimate | None = None
    activity: Activity | None = None  # a traced program's whole trace (ipctrace trace)
    # a traced program's markers and functions: what each probe adds (run/trace.py)
    probe_calibration: ProbeCalibration | None = None

    def settings(self) -> Settings:
        """params as Settings (params itself keeps every setting given, for the environment table)."""
        return Settings.from_json(self.params)

    def stats(self, metric: str | None) -> Stats | None:
        """metrics[metric] as Stats; None if the run has no such metric."""
        return self.metrics.get(metric) if metric is not None else None

    def with_breakdown(self, bd: Breakdown) -> RunSummary:
        """This summary with a (re)computed breakdown; a tail only if the breakdown has one."""
        return dataclasses.replace(self, breakdown=bd.metrics, tail=bd.tail or self.tail)

    def to_json(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None and f.name in _ABSENT_WHILE_NONE:
                continue
            out[f.name] = _plain(v)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunSummary:
        """A summary.json this version wrote, read back (store.results.read_summary checked it).
        ValueError if it is not one (an earlier version's)."""
        try:
            # what the schema lets a file leave out is read as empty (a collection) or None
            kw = {
                f.name: _or_empty(d.get(f.name), f.name)
                for f in dataclasses.fields(cls)
                if f.name not in _ABSENT_WHILE_NONE
            }
            kw["schema_version"], kw["metrics"] = d["schema_version"], _stats_of(d["metrics"])
            kw["host"] = Host.from_json(kw["host"])
            kw["threads"] = threads_from_json(kw["threads"])
            if d.get("trace") is not None:
                kw["trace"] = SummaryTrace.from_json(d["trace"])
            if d.get("breakdown") is not None:
                kw["breakdown"] = {m: MetricBreakdown.from_json(b) for m, b in d["breakdown"].items()}
            if d.get("tail") is not None:
                kw["tail"] = _known(Tail, d["tail"])
            if d.get("probe_effect") is not None:
                pe = d["probe_effect"]
                effects = {m: _known(MetricEffect, e) for m, e in pe["metrics"].items()}
                kw["probe_effect"] = ProbeEffect(pe.get("untraced_dir"), effects)
            if d.get("copy_estimate") is not None:
                kw["copy_estimate"] = CopyEstimate.from_json(d["copy_estimate"])
            if d.get("probe_calibration") is not None:
                kw["probe_calibration"] = ProbeCalibration.from_json(d["probe_calibration"])
            if d.get("activity") is not None:
                kw["activity"] = Activity.from_json(d["activity"])
            return cls(**kw)
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a summary of this version ({e})") from None


@dataclass(frozen=True)
class CopyEstimate:
    """A size's copy estimate from its sweep (summary.json's copy_estimate, run/sweep.py): the
    bytes copied per iteration and their cost at the sweep's fitted ns per byte, with its 95 %
    interval. Written back with the keys it was read with, in their order (built here: all of them)."""

    bytes: float | None = None
    ns: float | None = None
    ns_per_byte: float | None = None
    ns_per_byte_ci95: list[float] | None = None
    estimated: bool | None = None
    source: str | None = field(default=None, metadata={"key": "from"})  # the sweep's directory
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CopyEstimate:
        known = [k for k in d if k in _ESTIMATE_FIELDS]
        return cls(**{_ESTIMATE_FIELDS[k]: d[k] for k in known}, keys=tuple(known))

    def to_json(self) -> dict[str, Any]:
        keys = _ESTIMATE_FIELDS if self.keys is None else self.keys
        return {k: getattr(self, _ESTIMATE_FIELDS[k]) for k in keys}


# CopyEstimate's fields by the file's keys, in the order the sweep writes them.
_ESTIMATE_FIELDS = {
    f.metadata.get("key", f.name): f.name for f in fields(CopyEstimate) if f.metadata.get("in_file", True)
}


@dataclass(frozen=True)
class Fit:
    """A figure of the sweep's fit with its 95 % interval (NaN with too few sizes)."""

    value: float
    ci95: list[float]


@dataclass(frozen=True)
class CopyFit:
    """The sweep's fit of copy cost over the sizes (summary.json's copy): ns per byte and fixed ns."""

    ns_per_byte: Fit
    fixed_ns: Fit
    method: str | None = None
    estimated: bool | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CopyFit:
        return cls(Fit(**d["ns_per_byte"]), Fit(**d["fixed_ns"]), method=d.get("method"), estimated=d.get("estimated"))


@dataclass(frozen=True)
class SweepSize:
    """One size of a sweep (summary.json's per_size[size]): its directory, the bytes it copies
    an iteration, the fitted y's median, the metric's own median and the copy the fit gives."""

    dir: str
    bytes_per_iteration: float
    median_ns: float | None = None
    metric_median_ns: float | None = None
    copy_ns_estimated: float | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SweepSize:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass(frozen=True)
class SweepSummary:
    """summary.json of a sweep over message sizes (run/sweep.py), its fields in the file's order:
    the fit of copy cost over the sizes (copy) and each size's directory and figures (per_size);
    no metrics of its own (each size's are in its directory)."""

    schema_version: int
    kind: str  # "sweep"
    workload: str | None
    status: str | None
    metric: str | None
    sizes: list[int]
    x: str | None  # what the fit's x and y are
    y: str | None
    params: dict[str, Any]
    host: Host
    copy: CopyFit
    per_size: dict[str, SweepSize]
    metrics: dict[str, Stats]

    def to_json(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SweepSummary:
        """A sweep's summary.json, read back. ValueError if it is not one of this version."""
        try:
            # what the schema lets a file leave out is read as empty (a collection) or None
            kw = {f.name: _or_empty(d.get(f.name), f.name) for f in dataclasses.fields(cls)}
            for name in ("schema_version", "kind"):
                kw[name] = d[name]
            kw["metrics"] = _stats_of(d["metrics"])
            kw["host"] = Host.from_json(kw["host"])
            kw["copy"] = CopyFit.from_json(d["copy"])
            kw["per_size"] = {size: SweepSize.from_json(e) for size, e in d["per_size"].items()}
            return cls(**kw)
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a sweep summary of this version ({e})") from None


_READ_WHEN_ABSENT: dict[str, Callable[[], Any]] = {
    "params": dict,
    "host": dict,
    "warnings": list,
    "threads": list,
    "extra": dict,
    "sizes": list,
}


def _or_empty(v: Any, name: str) -> Any:  # noqa: ANN401 - a JSON value
    """A summary's field as read: absent or null, a collection field is read empty."""
    return _READ_WHEN_ABSENT.get(name, lambda: None)() if v is None else v


def _stats_of(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, Stats]:
    return {name: Stats.from_json(e) for name, e in entries.items()}


_T = TypeVar("_T")


def _known(cls: type[_T], d: Mapping[str, Any]) -> _T:
    """cls of the fields of d it knows (a newer file's other keys are left out); a field that
    is absent or null takes its default (empty for a collection) if it has one."""
    kw = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        v = d.get(f.name)
        if v is None and f.default_factory is not dataclasses.MISSING:
            continue
        if f.name in d:
            kw[f.name] = v
    return cls(**kw)


_ABSENT_WHILE_NONE = {"trace", "breakdown", "tail", "probe_effect", "copy_estimate", "activity", "probe_calibration"}


def _plain(v: Any) -> Any:  # noqa: ANN401 - any JSON value or dataclass of them
    """A field's value as JSON data: dataclasses become objects, in field order (or as their
    to_json has them)."""
    if isinstance(v, (ProbeCalibration, Stats, SummaryTrace, CopyEstimate)):
        return v.to_json()
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


@dataclass(frozen=True)
class MetricBreakdown:
    """Where one metric's time went (summary.json's breakdown[metric])."""

    components: dict[str, Stats]
    # The rest may be absent from a file (the schema's optional fields: a merged directory's
    # breakdown, model/crosshost.py, has components, critical_path and closure only).
    closure_residual_pct: float | None = None
    critical_path: bool | None = None  # the components follow the critical path (else the measuring thread)
    per_side: dict[str, SideView] = field(default_factory=dict)
    copy_source: str | None = None
    copy_bytes_mean: float | None = None
    copy_costs: dict[str, float] = field(default_factory=dict)
    entry_source: str | None = None
    entry_calibration: dict[str, Any] = field(default_factory=dict)
    steal_ns_mean: float | None = None
    preempted_by: list[Holder] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MetricBreakdown:
        """breakdown[metric] of a summary.json (the schema's BREAKDOWN); keys it does not know are
        left out, a field absent or null takes its default."""
        kw = {f.name: d[f.name] for f in fields(cls) if d.get(f.name) is not None}
        kw["components"] = {c: Stats.from_json(e) for c, e in d["components"].items()}
        kw["per_side"] = {role: SideView.from_json(v) for role, v in (d.get("per_side") or {}).items()}
        kw["preempted_by"] = [Holder.from_json(h) for h in d.get("preempted_by") or []]
        return cls(**kw)


@dataclass(frozen=True, kw_only=True)
class Holder:
    """A task outside the workload that held the CPU while the critical path waited for it
    (holders_table; summary.json's breakdown[metric].preempted_by): its share of that time."""

    tid: int
    comm: str | None = None
    pid: int | None = None
    tracer: bool | None = None  # the tracer's own thread: probe effect
    ns_per_iteration: float | None = None
    share: float

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Holder:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass(frozen=True)
class SideView:
    """One side's own view of a metric's iterations (summary.json's breakdown[metric].per_side[role]):
    its components' statistics, and its wake-ups with their delays."""

    components: dict[str, SideStats] = field(default_factory=dict)
    wakeups: int | None = None
    wakeup_delay: dict[str, Any] | None = None
    runqueue_delay: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SideView:
        kw = {f.name: d[f.name] for f in fields(cls) if d.get(f.name) is not None}
        kw["components"] = {c: SideStats.from_json(e) for c, e in (d.get("components") or {}).items()}
        return cls(**kw)


@dataclass(frozen=True)
class SideStats:
    """One component's statistics in one side's own view (per_side[role].components[name]), in
    the file's order: every one the breakdown writes has the four."""

    n: int | None = None
    mean: float | None = None
    median: float | None = None
    p99: float | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SideStats:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass(frozen=True)
class Tail:
    """The slowest iterations of the primary metric and what they share (summary.json's tail)."""

    metric: str | None = None  # every field may be absent from a file (the schema's TAIL)
    threshold_ns: float | None = None
    iterations: int | None = None
    long_wakeup_ns: float | None = None
    labels: dict[str, int] = field(default_factory=dict)
    by_metric: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Breakdown:
    metrics: dict[str, MetricBreakdown]
    tail: Tail | None


@dataclass(frozen=True)
class Preemptor:
    """A task that took the CPU from a thread: how often and for how long in all."""

    tid: int
    comm: str | None
    count: int
    ns: int


class _OnOffCpu:
    """on_cpu_ns / off_cpu_ns of a record with states_ns over STATES."""

    states_ns: dict[str, int]

    @property
    def on_cpu_ns(self) -> int:
        return sum(self.states_ns[s] for s in ON_CPU)

    @property
    def off_cpu_ns(self) -> int:
        return sum(self.states_ns[s] for s in OFF_CPU)


@dataclass(frozen=True)
class ThreadActivity(_OnOffCpu):
    tid: int
    pid: int | None
    comm: str | None
    start_ns: int  # its first record
    end_ns: int  # its last record
    states_ns: dict[str, int]  # STATES -> ns in [start_ns, end_ns); they sum to span_ns
    switches_out: int
    preempted_by: list[Preemptor]  # the top TOP_PREEMPTORS by time

    @property
    def span_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class WakeEdge:
    """waker -> wakee: wake-ups, of them those in a hard interrupt, and the delay from the
    wake-up to the wakee's switch in (ns; over `delays` of them, None if none)."""

    waker: int
    waker_comm: str | None
    wakee: int
    wakee_comm: str | None
    count: int
    hardirq: int
    delays: int
    delay_p50_ns: float | None
    delay_p90_ns: float | None
    delay_p99_ns: float | None
    delay_max_ns: float | None


@dataclass(frozen=True)
class SyscallActivity(_OnOffCpu):
    """One system call over all followed threads: its completed calls' latencies (ns) and
    where that time went (states_ns over STATES)."""

    nr: int
    name: str
    count: int
    threads: int
    total_ns: int
    p50_ns: float
    p90_ns: float
    p99_ns: float
    max_ns: int
    states_ns: dict[str, int]


@dataclass(frozen=True)
class Activity:
    arch: str
    start_ns: int | None  # the first and last record of the followed threads
    end_ns: int | None
    threads: list[ThreadActivity]  # by tid
    wake_edges: list[WakeEdge]  # most wake-ups first
    syscalls: list[SyscallActivity]  # most total time first
    unpaired_syscalls: int  # sys_enter or sys_exit records of no complete call

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data, keys in field order (summary.json "activity")."""
        return _activity_plain(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Activity:
        """to_json's data read back. ValueError if it is not that."""
        try:
            return cls(
                arch=d["arch"],
                start_ns=d["start_ns"],
                end_ns=d["end_ns"],
                threads=[
                    ThreadActivity(
                        **{
                            **t,
                            "states_ns": _every_state(t["states_ns"]),
                            "preempted_by": [Preemptor(**p) for p in t["preempted_by"]],
                        }
                    )
                    for t in d["threads"]
                ],
                wake_edges=[WakeEdge(**e) for e in d["wake_edges"]],
                syscalls=[SyscallActivity(**{**s, "states_ns": _every_state(s["states_ns"])}) for s in d["syscalls"]],
                unpaired_syscalls=d["unpaired_syscalls"],
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not an activity summary of this version ({e})") from None


def _every_state(states_ns: Mapping[str, int]) -> dict[str, int]:
    """states_ns over every one of STATES: a file written before a state existed (steal) has
    none of it."""
    return {s: int(states_ns.get(s, 0)) for s in STATES}


def _activity_plain(v: Any) -> Any:  # noqa: ANN401 - any JSON value or dataclass of them
    if dataclasses.is_dataclass(v):
        return {f.name: _activity_plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): _activity_plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_activity_plain(x) for x in v]
    return v


@dataclass(frozen=True)
class MergeFacts:
    """What a merged directory's summary.json says of the merge (its extra.merge, written by
    summary above): the two directories, the round trips joined, and how far off the server's
    clock may be on the client's (the alignment's error bound)."""

    client: str | None = None
    server: str | None = None
    round_trips: int | None = None
    joined: int | None = None
    error_bound_ns: float | None = None
    # across hosts: {part: (median low, median high) ns} of the parts the clock's bound leaves open
    intervals: dict[str, tuple[float, float]] | None = None

    @classmethod
    def of(cls, extra: Mapping[str, Any]) -> MergeFacts | None:
        """extra.merge of a summary, typed; None when the summary is not a merge's."""
        m = extra.get("merge")
        if not m:
            return None
        clock = m.get("clock") or {}
        intervals = {k: (v["median_low_ns"], v["median_high_ns"]) for k, v in (m.get("intervals") or {}).items()}
        return cls(
            m.get("client"),
            m.get("server"),
            m.get("round_trips"),
            m.get("joined"),
            clock.get("error_bound_ns"),
            intervals or None,
        )
