"""The JSON files of a results directory that the pages and tables read, as typed values:
workload.json (Workload), trace.json (TraceFile; summary.json's trace: SummaryTrace), meta.json
(Meta), samples.json (Samples), a suite's suite.json (SuiteFile), a merged directory's
merge.json (MergeFile) and the machine's facts every summary holds (Host).

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


# The records of trace.json (loaders/tracejson.c writes them) keep the keys they were read with
# (keys): summary.json's trace is written from them, and a file read and written again must be
# the same bytes, a key the writer left out (an older tracer's, the synthetic run's) left out
# again. keys None: built here, every field written.


def _as_read(cls: type[_T], d: Mapping[str, Any], **convert: Callable[[Any], Any]) -> _T:
    """_read, keeping the keys of d that cls has fields for, in their order."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return dataclasses.replace(_read(cls, d, **convert), keys=tuple(k for k in d if k in known))  # type: ignore[type-var]


def as_written(v: Any) -> Any:  # noqa: ANN401 - a record of trace.json or the JSON value of one
    """A record of trace.json (or a value holding some) as JSON data: a record's keys as it was
    read (every field when built), a map's integer keys as text."""
    if isinstance(v, Features):
        return v.to_json()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        names = getattr(v, "keys", None)
        if names is None:
            names = [f.name for f in dataclasses.fields(v) if f.metadata.get("in_file", True)]
        return {k: as_written(getattr(v, k)) for k in names}
    if isinstance(v, dict):
        return {str(k): as_written(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_written(x) for x in v]
    return v


@dataclass(frozen=True)
class Task:
    """A task the tracer saw (trace.json's tasks[tid]): its name and process, where known."""

    comm: str | None = None
    pid: int | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})


# the tasks the tracer saw by tid (TraceFile.tasks), as the model takes them
Tasks = Mapping[int, Task | None]


def tasks_from_json(d: Mapping[str, Any]) -> dict[int, Task | None]:
    """trace.json's (and summary.json's trace) tasks, {"tid": {comm, pid} or null}, by tid; None
    where the file has null (a task seen, not named: written back so)."""
    return {int(tid): None if t is None else _as_read(Task, t) for tid, t in d.items()}


# summary.json's trace.drops: the fields of trace.json's drops the analysis went by
SUMMARY_DROPS = ("total", "per_cpu", "recursion_misses", "switches_missed", "switches_missed_other")


@dataclass(frozen=True)
class Drops:
    """What the tracer lost (trace.json's drops): lost_spans are [start_ns, end_ns, records].
    summary.json's trace.drops has the SUMMARY_DROPS of them."""

    total: int = 0  # trace.json always has it (schema.TRACE); summary.json may leave it out
    per_cpu: list[int] = field(default_factory=list)
    lost_spans: list[list[int]] = field(default_factory=list)
    spans_unrecorded: int | None = None
    recursion_misses: int | None = None
    switches_missed: int | None = None
    switches_missed_other: int | None = None
    gaps_unrecorded: int | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})

    def total_or(self, header_drops: int) -> int:
        """total, or where the file has none the count events.bin's header gives."""
        return self.total if self.keys is None or "total" in self.keys else header_drops

    def spans_given(self) -> bool:
        """Whether the tracer listed its lost spans (a tracer that gave none leaves every loss's time unknown)."""
        return self.keys is None or "lost_spans" in self.keys


@dataclass(frozen=True)
class Tracer:
    """The tracer's own process and threads (its records are probe effect, not the workload's)."""

    pid: int | None = None
    tids: list[int] = field(default_factory=list)
    reader_tid: int | None = None
    reader_policy: str | None = None
    reader_raised: int | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})


@dataclass(frozen=True)
class Steal:
    """Hypervisor steal per CPU over the trace, and where the totals came from (the figures are
    None where the tracer could read none: loaders/steal.c writes null)."""

    source: str | None = None
    per_cpu_ns: list[int] | None = None
    total_ns: int | None = None
    totals_from: str | None = None
    proc_stat_ns: list[int] | None = None
    user_hz: int | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})


@dataclass(frozen=True)
class OnlyUid:
    """--only-uid (trace.json's only_uid): the user whose tasks alone were recorded, and the system
    calls (name: this architecture's number) after whose exit a task's uids were checked again."""

    uid: int | None = None
    calls: dict[str, int] = field(default_factory=dict)
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})


@dataclass(frozen=True)
class LeftTask:
    """A recorded task that took another user's rights (why: "setuid exec" or "credential
    change") at ts and was recorded no more: trace.json's left_trace.tasks[]."""

    pid: int
    tid: int | None = None
    comm: str | None = None
    why: str | None = None
    ts: int | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})


@dataclass(frozen=True)
class LeftTrace:
    """--only-uid: how many times a recorded task took another user's rights (count), and the
    tasks (at most 256 listed), in time order."""

    count: int = 0
    tasks: list[LeftTask] = field(default_factory=list)
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LeftTrace:
        return _as_read(cls, d, tasks=lambda v: [_as_read(LeftTask, t) for t in v])

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
class Feature:
    """One feature the tracer checked (trace.json's features[name]): whether it works here and
    what it found."""

    ok: bool | None = None
    detail: str | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})


# features' own keys; every other key of it names a Feature
_FEATURES_OWN = ("possible", "why_impossible")


@dataclass(frozen=True)
class Features:
    """What the tracer found it can do here (trace.json's features, loaders/features.c): each
    feature by name (checks), whether tracing is possible at all and why not. keys: the file's
    keys in their order, the features' names among them."""

    checks: dict[str, Feature] = field(default_factory=dict, metadata={"in_file": False})
    possible: bool | None = None
    why_impossible: str | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Features:
        checks = {k: _as_read(Feature, v) for k, v in d.items() if k not in _FEATURES_OWN}
        own = _as_read(cls, {k: v for k, v in d.items() if k in _FEATURES_OWN})
        return dataclasses.replace(own, checks=checks, keys=tuple(d))

    def to_json(self) -> dict[str, Any]:
        """As read: its keys in their order (built here: the features, then the two of its own)."""
        keys = self.keys
        if keys is None:
            keys = (*self.checks, *(k for k in _FEATURES_OWN if getattr(self, k) is not None))
        return {k: getattr(self, k) if k in _FEATURES_OWN else as_written(self.checks[k]) for k in keys}


@dataclass(frozen=True)
class MarkSite:
    """A site a marker's probe sits on (trace.json's marks.sites[]): usdt or uprobe, the target
    as given, the first bytes of each of its instructions probed."""

    kind: str | None = None
    target: str | None = None
    bytes: list[str] = field(default_factory=list)
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})


@dataclass(frozen=True)
class MarkCalibration:
    """The markers' calibration (trace.json's marks.calibration): its binary, the probes
    attached to it, and why they could not be (error)."""

    binary: str | None = None
    probes: list[str] = field(default_factory=list)
    error: str | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})


@dataclass(frozen=True)
class Marks:
    """--markers (trace.json's marks, loaders/marks.c): the marks' names by the address of
    their name, the probes given, the sites they sit on, the calibration (None: none ran) and
    how many mark records were traced."""

    names: dict[int, str] = field(default_factory=dict)
    probes: list[str] = field(default_factory=list)
    sites: list[MarkSite] = field(default_factory=list)
    calibration: MarkCalibration | None = None
    count: int | None = None
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Marks:
        return _as_read(
            cls,
            d,
            names=lambda v: {int(k): name for k, name in v.items()},
            sites=lambda v: [_as_read(MarkSite, x) for x in v],
            calibration=lambda v: _as_read(MarkCalibration, v),
        )


def _absent(cls: type[_T]) -> Callable[[], _T]:
    """A record a file left out: empty, written back as nothing ({})."""
    return lambda: cls(keys=())  # type: ignore[call-arg]


@dataclass(frozen=True)
class TraceFile:
    """trace.json: what the tracer attached, saw and lost in one traced run; its fields in the
    order loaders/tracejson.c writes them (tests/integration/test_tracing.py reads the tracer's
    file and writes it back: the same keys, in order, at every depth)."""

    machine: str | None = None  # the traced machine's (its system call numbers)
    boot_id: str | None = None  # the traced kernel's boot (merge: two traces of one clock)
    drops: Drops = field(default_factory=_absent(Drops))
    events: dict[str, int] = field(default_factory=dict)
    records: int | None = None
    unknown_records: int | None = None
    attach: dict[str, str] = field(default_factory=dict)
    tids: list[int] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    tracer: Tracer = field(default_factory=_absent(Tracer))
    tasks: dict[int, Task | None] = field(default_factory=dict)
    tasks_unnamed: int | None = None
    steal: Steal = field(default_factory=_absent(Steal))
    features: Features = field(default_factory=_absent(Features))
    floor: bool | None = None
    floor_clock: bool | None = None
    ringbuf_bytes: int | None = None
    root_pid: int | None = None
    exit_code: int | None = None
    status: str | None = None
    clock: str | None = None
    mode: str | None = None  # "command", "pids", "comm", "all"
    stopped_by: str | None = None
    marks: Marks | None = None  # --markers
    only_uid: OnlyUid | None = None  # --only-uid
    left_trace: LeftTrace = field(default_factory=_absent(LeftTrace))
    keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False, metadata={"in_file": False})

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TraceFile:
        return _as_read(
            cls,
            d,
            drops=lambda v: _as_read(Drops, v),
            tasks=tasks_from_json,
            tracer=lambda v: _as_read(Tracer, v),
            steal=lambda v: _as_read(Steal, v),
            features=Features.from_json,
            marks=Marks.from_json,
            only_uid=lambda v: _as_read(OnlyUid, v),
            left_trace=LeftTrace.from_json,
        )

    def to_json(self) -> dict[str, Any]:
        """The file as read: its keys in their order, at every depth."""
        out: dict[str, Any] = as_written(self)
        return out

    def comm(self, tid: int) -> str | None:
        """The name the tracer saw tid under, None if it saw none."""
        task = self.tasks.get(tid)
        return task.comm if task else None


# summary.json's trace, in the order the analysis writes it (SummaryTrace.to_json), and the keys
# of it that are trace.json's (the other ones are SummaryTrace's own fields)
SUMMARY_TRACE_KEYS = (
    "drops",
    "events",
    "records",
    "attach",
    "pids",
    "tids",
    "features",
    "tasks",
    "tracer",
    "steal",
    "left_trace",
    "status",
    "floor",
    "ringbuf_bytes",
    "in_iterations",
    "lost_spans",
    "iterations_left_out",
    "partial",
)
SUMMARY_FILE_KEYS: tuple[str, ...] = ("drops", "attach", "pids", "tids", "features", "tasks", "tracer", "steal")
SUMMARY_FILE_KEYS += ("left_trace", "status", "floor", "ringbuf_bytes")


@dataclass(frozen=True)
class SummaryTrace:
    """summary.json's trace: of the trace.json a run was analysed from (file), the fields
    SUMMARY_FILE_KEYS names, its drops as the analysis went by them (SUMMARY_DROPS: the total
    the events' header gives where the file has none, a count it lacks 0), beside what the
    analysis counted: the records of each type and in all in events.bin, those inside an
    iteration, the lost spans, the iterations left out of the breakdown, and whether the
    breakdown is partial."""

    # its keys are the summary's own (tests/schema_fields.py checks them so), its drops SUMMARY_DROPS
    file: TraceFile = field(default_factory=TraceFile, metadata={"flat": SUMMARY_FILE_KEYS, "drops": SUMMARY_DROPS})
    events: dict[str, int] = field(default_factory=dict)
    records: int | None = None
    in_iterations: int | None = None
    lost_spans: int | None = None
    iterations_left_out: int | None = None
    partial: bool | None = None

    @property
    def drops(self) -> Drops:
        return self.file.drops

    def to_json(self) -> dict[str, Any]:
        drops = self.file.drops  # of its keys (every one when built here), those SUMMARY_DROPS names
        keys = tuple(k for k in (SUMMARY_DROPS if drops.keys is None else drops.keys) if k in SUMMARY_DROPS)
        file = dataclasses.replace(self.file, drops=dataclasses.replace(drops, keys=keys))
        return {k: as_written(getattr(file if k in SUMMARY_FILE_KEYS else self, k)) for k in SUMMARY_TRACE_KEYS}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SummaryTrace:
        """A summary.json's trace (schema.TRACE_SUMMARY): to_json writes every key of it, absent
        or null as the type's default, its records (drops, tracer...) as read."""
        file = TraceFile.from_json({k: d[k] for k in SUMMARY_FILE_KEYS if k in d})
        return dataclasses.replace(_read(cls, {k: v for k, v in d.items() if k != "file"}), file=file)


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


# --- merge.json (ipctrace merge: cli/merge.py writes it, model/crosshost.py computes it) ------


@dataclass(frozen=True)
class MergeClock:
    """The server's clock on the client's (model.crosshost.Alignment, in the file's units)."""

    offset_ns: float
    drift_ppm: float
    error_bound_ns: float  # no clock line consistent with the matched traffic is further off
    consistent: bool  # some line keeps every bound (else error_bound_ns is the largest broken)
    matched_client_to_server: int
    matched_server_to_client: int
    span_ns: int
    t0_ns: int
    same_clock: bool = False  # one boot of one kernel: one clock, offset exactly 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MergeClock:
        return _read(cls, d)


@dataclass(frozen=True)
class MergeHosts:
    """The two traces' host names (their summaries'), None where one was not recorded."""

    client: str | None = None
    server: str | None = None


@dataclass(frozen=True)
class MergeMessages:
    """Messages matched by content each way (before pairing them into round trips)."""

    client_to_server: int = 0
    server_to_client: int = 0


@dataclass(frozen=True)
class PartStats:
    """One part's (or the latency's) statistics over the joined round trips, ns."""

    median: float
    mean: float
    p99: float
    n: int


@dataclass(frozen=True)
class PartInterval:
    """Across hosts: where a part lies for any server clock within the error bound (ns)."""

    median_low_ns: float
    median_high_ns: float
    mean_low_ns: float
    mean_high_ns: float


@dataclass(frozen=True)
class MergeFile:
    """merge.json: its fields are schema.MERGE's; to_json writes them in the order cli/merge.py
    does, so a file read and written again is the same text."""

    client: str  # the client's results directory
    server: str
    hosts: MergeHosts
    clock: MergeClock
    messages: MergeMessages
    round_trips: int  # the client's iterations
    joined: int  # those whose request and answer were both matched
    parts: dict[str, PartStats | None]  # model.crosshost.PARTS, None where no round trip was joined
    latency: PartStats | None = None
    intervals: dict[str, PartInterval] = field(default_factory=dict)  # across hosts only
    kind: str = "merge"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MergeFile:
        """A merge.json the schema (schema.MERGE) accepted."""
        return _read(
            cls,
            d,
            hosts=lambda v: _read(MergeHosts, v),
            clock=MergeClock.from_json,
            messages=lambda v: _read(MergeMessages, v),
            parts=lambda v: {k: None if x is None else _read(PartStats, x) for k, x in v.items()},
            latency=lambda v: _read(PartStats, v),
            intervals=lambda v: {k: _read(PartInterval, x) for k, x in v.items()},
        )

    def to_json(self) -> dict[str, Any]:
        """The file: its keys in their order, the intervals only where there are some."""
        return {k: as_written(getattr(self, k)) for k in _MERGE_KEYS if k != "intervals" or self.intervals}


# merge.json's keys in the order cli/merge.py writes them (the intervals before the latency)
_MERGE_KEYS: tuple[str, ...] = ("kind", "client", "server", "hosts", "clock", "messages", "round_trips", "joined")
_MERGE_KEYS += ("parts", "intervals", "latency")
