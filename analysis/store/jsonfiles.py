"""The JSON files of a results directory that the pages and tables read, as typed values:
workload.json (Workload), trace.json (TraceFile), meta.json (Meta), samples.json (Samples),
a suite's suite.json (SuiteFile) and the machine's facts every summary holds (Host).

Each type has the fields of its schema (store/schema.py; tests/unit/store/test_jsonfiles.py
holds the two the same) in the order the writers write them; from_json reads a value the
schema accepted, a field absent or null taking its default (empty for a collection, else
None). Keys the schema does not know (a newer file's) are left out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

_T = TypeVar("_T")


def _read(cls: type[_T], d: Mapping[str, Any], **convert: Callable[[Any], Any]) -> _T:
    """cls of the keys of d it has fields for; a null value takes the field's default, and
    convert[name] turns a field's JSON value into its type."""
    kw = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in d and d[f.name] is not None:
            kw[f.name] = convert[f.name](d[f.name]) if f.name in convert else d[f.name]
    return cls(**kw)


@dataclass(frozen=True)
class Stats:
    """One metric's statistics (summary.json's metrics[name]) or one breakdown component's
    (breakdown[metric].components[name], per_side[role].components[name]), as read: every figure but n may be absent (None).
    derived: a metric's is true when it is computed from another (source x factor); a
    component's names what it adds up (sched_delay). iqr: the figures again without the values
    outside 1.5 IQR (--iqr), with how many were removed."""

    n: int = 0
    unit: str | None = None
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    median: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    ci95_mean: list[float] | None = None
    ci95_median: list[float] | None = None
    runs_ci95_mean: list[float] | None = None
    runs: int | None = None
    derived: bool | str | None = None
    source: str | None = field(default=None, metadata={"key": "from"})  # the file's "from"
    factor: float | None = None
    iqr: Stats | None = None
    removed: int | None = None
    # the entry's keys as read, null ones too, in their order: to_json writes them so (None:
    # built here, not read: its figures that are not None, in stats.metric_entry's order)
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Stats:
        """An entry the schema's STATS (or COMPONENT, SIDE_STATS) accepted, or one computed
        (stats.metric_entry); unknown keys are left out."""
        kw = {f: d[f] for f in _STATS_KEYS if f in d}
        if "from" in d:
            kw["source"] = d["from"]
        if d.get("iqr") is not None:
            kw["iqr"] = cls.from_json(d["iqr"])
        kw["keys"] = tuple(k for k in d if k in _STATS_KEYS or k in ("from", "iqr"))
        return cls(**kw)

    def to_json(self) -> dict[str, Any]:
        """The entry as from_json read it: its keys in their order."""
        out: dict[str, Any] = {}
        keys = self.keys
        if keys is None:
            keys = tuple(k for k in _WRITE_ORDER if getattr(self, "source" if k == "from" else k) is not None)
        for k in keys:
            v = getattr(self, "source" if k == "from" else k)
            out[k] = v.to_json() if isinstance(v, Stats) else v
        return out


_STATS_KEYS = [f.name for f in dataclasses.fields(Stats) if f.name not in ("source", "iqr", "keys")]
# a metric's entry as stats.metric_entry and metric_stats write it, a component's as breakdown_stats does
_WRITE_ORDER = ["unit", "n", "mean", "std", "min", "max", "median", "p90", "p95", "p99", "p999"]
_WRITE_ORDER += ["ci95_mean", "ci95_median", "runs_ci95_mean", "runs", "derived", "from", "factor", "iqr", "removed"]


@dataclass(frozen=True)
class Host:
    """The machine a run ran on (store.host.host_info): summary.json's and suite.json's host."""

    kernel: str | None = None
    machine: str | None = None
    cpu_model: str | None = None
    cores: int | None = None
    online_cpus: str | None = None
    hostname: str | None = None
    clocksource: str | None = None
    hypervisor: str | None = None
    boot_id: str | None = None  # /proc/sys/kernel/random/boot_id: two runs of one boot share a clock

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Host:
        return _read(cls, d)

    def facts(self) -> list[tuple[str, str | int]]:
        """(name, value) of each fact known (not null, not empty), in the file's order."""
        out = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v not in (None, ""):
                out.append((f.name, v))
        return out


@dataclass(frozen=True)
class Thread:
    """One thread of a workload (workload.json's and summary.json's threads); cpu -1: not pinned."""

    role: str
    pid: int
    tid: int
    cpu: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Thread:
        return cls(role=d["role"], pid=d["pid"], tid=d["tid"], cpu=d["cpu"])


def threads_from_json(v: list[Mapping[str, Any]]) -> list[Thread]:
    return [Thread.from_json(t) for t in v]


@dataclass(frozen=True)
class Workload:
    """workload.json: what the driver (or ipctrace trace) ran and measured."""

    workload: str
    metrics: list[str]
    threads: list[Thread]
    primary_metric: str | None = None
    derived: dict[str, dict[str, Any]] = field(default_factory=dict)  # {name: {from, factor}}
    params: dict[str, Any] = field(default_factory=dict)
    mode: str | None = None
    placement: str | None = None
    copies: bool | None = None
    runs_completed: int | None = None
    iterations_completed: int | None = None
    status: str | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    copy_calibration: dict[str, Any] | None = None
    entry_calibration: dict[str, Any] | None = None
    clock: str | None = None
    tag: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Workload:
        return _read(cls, d, threads=threads_from_json)


@dataclass(frozen=True)
class Task:
    """A task the tracer saw (trace.json's tasks[tid]): its name and process, where known."""

    comm: str | None = None
    pid: int | None = None


def tasks_from_json(d: Mapping[str, Any]) -> dict[int, Task]:
    """trace.json's (and summary.json's trace) tasks, {"tid": {comm, pid} or null}, by tid."""
    return {int(tid): _read(Task, t or {}) for tid, t in d.items()}


@dataclass(frozen=True)
class Drops:
    """What the tracer lost (trace.json's drops): lost_spans are [start_ns, end_ns, records]."""

    total: int
    per_cpu: list[int] = field(default_factory=list)
    lost_spans: list[list[int]] = field(default_factory=list)
    spans_unrecorded: int | None = None
    recursion_misses: int | None = None
    switches_missed: int | None = None
    switches_missed_other: int | None = None
    gaps_unrecorded: int | None = None


@dataclass(frozen=True)
class Tracer:
    """The tracer's own process and threads (its records are probe effect, not the workload's)."""

    pid: int | None = None
    tids: list[int] = field(default_factory=list)
    reader_tid: int | None = None
    reader_policy: str | None = None
    reader_raised: int | None = None


@dataclass(frozen=True)
class Steal:
    """Hypervisor steal per CPU over the trace, and where the totals came from."""

    source: str | None = None
    per_cpu_ns: list[int] = field(default_factory=list)
    total_ns: int | None = None
    totals_from: str | None = None
    proc_stat_ns: list[int] = field(default_factory=list)
    user_hz: int | None = None


@dataclass(frozen=True)
class OnlyUid:
    """--only-uid (trace.json's only_uid): the user whose tasks alone were recorded, and the system
    calls (name: this architecture's number) after whose exit a task's uids were checked again."""

    uid: int | None = None
    calls: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LeftTask:
    """A recorded task that took another user's rights (why: "setuid exec" or "credential
    change") at ts and was recorded no more: trace.json's left_trace.tasks[]."""

    pid: int
    tid: int | None = None
    comm: str | None = None
    why: str | None = None
    ts: int | None = None


@dataclass(frozen=True)
class LeftTrace:
    """--only-uid: how many times a recorded task took another user's rights (count), and the
    tasks (at most 256 listed), in time order."""

    count: int = 0
    tasks: list[LeftTask] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LeftTrace:
        return _read(cls, d, tasks=lambda v: [_read(LeftTask, t) for t in v])

    def line(self) -> str | None:
        """One line of what left the trace, None when nothing did."""
        if not self.count:
            return None
        shown = ", ".join(
            f"{t.comm} (pid {t.pid}, {t.why})" if t.comm else f"pid {t.pid} ({t.why})" for t in self.tasks[:5]
        )
        more = self.count - min(len(self.tasks), 5)
        return (
            f"{self.count} task{'s' if self.count != 1 else ''} took another user's rights and "
            f"{'were' if self.count != 1 else 'was'} no longer traced (--only-uid): {shown}"
            + (f" and {more} more" if more > 0 else "")
        )


@dataclass(frozen=True)
class TraceFile:
    """trace.json: what the tracer attached, saw and lost in one traced run."""

    drops: Drops
    events: dict[str, int] = field(default_factory=dict)
    records: int | None = None
    unknown_records: int | None = None
    attach: dict[str, str] = field(default_factory=dict)
    tids: list[int] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    features: dict[str, Any] = field(default_factory=dict)
    floor: bool | None = None
    floor_clock: bool | None = None
    ringbuf_bytes: int | None = None
    root_pid: int | None = None
    exit_code: int | None = None
    status: str | None = None
    clock: str | None = None
    tasks: dict[int, Task] = field(default_factory=dict)
    tasks_unnamed: int | None = None
    tracer: Tracer = field(default_factory=Tracer)
    steal: Steal = field(default_factory=Steal)
    only_uid: OnlyUid | None = None  # --only-uid
    left_trace: LeftTrace = field(default_factory=LeftTrace)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TraceFile:
        return _read(
            cls,
            d,
            drops=lambda v: _read(Drops, v),
            tasks=tasks_from_json,
            tracer=lambda v: _read(Tracer, v),
            steal=lambda v: _read(Steal, v),
            only_uid=lambda v: _read(OnlyUid, v),
            left_trace=LeftTrace.from_json,
        )


@dataclass(frozen=True)
class Meta:
    """meta.json: the command that made a results directory, when, and how it ended."""

    status: str | None = None
    command: list[str] = field(default_factory=list)
    command_line: str | None = None
    version: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    traced: bool | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Meta:
        return _read(cls, d)


@dataclass(frozen=True)
class Mapped:
    """One line of a sampled process's /proc/PID/maps: [start, end) of path from offset."""

    start: int
    end: int
    offset: int
    path: str


@dataclass(frozen=True)
class SampledStack:
    """One entry of samples.json's oncpu or offcpu: a task's stacks and how often (oncpu: count
    samples; offcpu: ns off the CPU over count switches). Stacks are addresses, innermost first;
    lost: the kernel could not take one of them."""

    pid: int
    tid: int
    count: int
    comm: str | None = None
    lost: bool = False
    kstack: tuple[int, ...] = ()
    ustack: tuple[int, ...] = ()
    ns: int | None = None
    blocked: bool | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SampledStack:
        return _read(cls, d, kstack=tuple, ustack=tuple)


@dataclass(frozen=True)
class Samples:
    """samples.json (loaders/sample.c): the sampled stacks of a run, on and off the CPU, with the
    processes' memory maps to name user addresses; boot_id: the boot whose kernel they are of."""

    boot_id: str | None = None
    hz: int | None = None
    event: str | None = None
    maps: dict[int, list[Mapped]] = field(default_factory=dict)
    oncpu: list[SampledStack] = field(default_factory=list)
    offcpu: list[SampledStack] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Samples:
        return _read(
            cls,
            d,
            maps=lambda v: {int(pid): [_read(Mapped, m) for m in lines] for pid, lines in v.items()},
            oncpu=lambda v: [SampledStack.from_json(e) for e in v],
            offcpu=lambda v: [SampledStack.from_json(e) for e in v],
        )


@dataclass(frozen=True)
class SuiteRow:
    """One row of a suite's table (suite.json's rows, suite.csv's lines): an experiment's metric,
    this machine's figures and one report's figure of it (report_*: none when no report has one)."""

    experiment: str
    metric: str
    title: str | None = None
    workload: str | None = None
    options: str | None = None
    status: str | None = None
    n: int | None = None
    mean_ns: float | None = None
    ci95_lo_ns: float | None = None
    ci95_hi_ns: float | None = None
    median_ns: float | None = None
    runs_ci95_lo_ns: float | None = None
    runs_ci95_hi_ns: float | None = None
    iqr_mean_ns: float | None = None
    iqr_ci95_lo_ns: float | None = None
    iqr_ci95_hi_ns: float | None = None
    iqr_removed: int | None = None
    measured: str | None = None
    traced_median_ns: float | None = None
    probe_effect: float | None = None
    report: str | None = None
    machine: str | None = None
    report_value_ns: float | None = None
    report_ci95_lo_ns: float | None = None
    report_ci95_hi_ns: float | None = None
    report_statistic: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class SuiteFacts:
    """A suite's facts (suite.json's fields but its rows): when, where, the placement policy,
    the counts and whether it was traced or interrupted."""

    started: str | None = None
    host: Host = field(default_factory=Host)
    placement: str | None = None
    iterations: int | None = None
    warmup: int | None = None
    runs: int | None = None
    traced: bool | None = None
    quick: bool | None = None
    iqr: bool | None = None
    interrupted: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: dataclasses.asdict(self.host) if f.name == "host" else getattr(self, f.name)
            for f in dataclasses.fields(self)
        }


@dataclass(frozen=True)
class SuiteFile:
    """suite.json: the suite's facts and its table's rows."""

    facts: SuiteFacts
    rows: list[SuiteRow]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SuiteFile:
        facts = _read(SuiteFacts, d, host=Host.from_json)
        return cls(facts, [_read(SuiteRow, r) for r in d["rows"]])
