"""The shape of every file of a results directory, checked once where it is read.

A spec is a small tree of checkers: check(value, spec, file, field) raises one UsageError
line naming the file and the field ("summary.json: metrics.rtt.median: expected a number,
found "abc""). Dictionaries check the keys they know and let unknown keys pass, so that
newer files with more fields are read by this version; what the code reads must be here.
The parquet files are checked by their columns' types (and events' record types).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from analysis.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

_T = TypeVar("_T")


class Bad(Exception):
    """A field that does not fit its spec: (field, what was expected)."""


def _name(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and abs(v) >= 10**20:
        return f"a {len(str(abs(v)))}-digit number"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return repr(v[:40])
    kinds: dict[type, str] = {dict: "an object", list: "a list"}
    return kinds.get(type(v), type(v).__name__)


class Spec:
    what = "a value"

    def check(self, v: object, at: str) -> None:
        if not self.ok(v):
            raise Bad(at, f"expected {self.what}, found {_name(v)}")

    def ok(self, v: object) -> bool:
        return True


# The largest whole number a file or a dataset's BIGINT column holds: a count beyond it is no
# count ipctrace wrote (collect would fail to store it, the statistics overflow).
INT64_MAX = 2**63 - 1


class Num(Spec):
    """A finite number (not a boolean), at least lo; a whole one (integer) fits 64 bits.
    finite=False: NaN and infinities pass too (a fit that had too few points)."""

    def __init__(self, lo: float | None = None, integer: bool = False, finite: bool = True, hi: int = INT64_MAX):
        self.lo, self.integer, self.finite = lo, integer, finite
        self.hi = hi if integer else None
        if integer:
            self.what = f"a whole number from {-INT64_MAX - 1 if lo is None else lo} to {hi}"
        else:
            self.what = "a number" + (f" >= {lo}" if lo is not None else "")

    def ok(self, v: object) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        if self.integer and not isinstance(v, int):
            return False
        if isinstance(v, float) and not math.isfinite(v):
            return not self.finite and not (self.lo is not None and v < self.lo)
        if self.hi is not None and not -INT64_MAX - 1 <= v <= self.hi:
            return False
        return self.lo is None or v >= self.lo


class Str(Spec):
    what = "a string"

    def __init__(self, choices: Sequence[str] | None = None):
        self.choices = choices
        if choices:
            self.what = "one of " + ", ".join(choices)

    def ok(self, v: object) -> bool:
        return isinstance(v, str) and (not self.choices or v in self.choices)


class Name(Spec):
    """A file name inside the directory that names it: one path component, not . or .."""

    what = "a name inside the directory"

    def ok(self, v: object) -> bool:
        return isinstance(v, str) and v not in ("", ".", "..") and "/" not in v and "\0" not in v


class Bool(Spec):
    what = "true or false"

    def ok(self, v: object) -> bool:
        return isinstance(v, bool)


class Opt(Spec):
    """spec or null."""

    def __init__(self, spec: Spec):
        self.spec = spec

    def check(self, v: object, at: str) -> None:
        if v is not None:
            self.spec.check(v, at)


class ListOf(Spec):
    def __init__(self, item: Spec, min_len: int = 0, max_len: int | None = None):
        self.item, self.min_len, self.max_len = item, min_len, max_len
        n = f"{min_len}" if min_len == max_len else f"at least {min_len}" if min_len else ""
        self.what = f"a list of {n} items".replace("  ", " ") if n else "a list"

    def check(self, v: object, at: str) -> None:
        if not isinstance(v, list) or len(v) < self.min_len or (self.max_len is not None and len(v) > self.max_len):
            raise Bad(at, f"expected {self.what}, found {_name(v) if not isinstance(v, list) else f'{len(v)} items'}")
        for i, x in enumerate(v):
            self.item.check(x, f"{at}[{i}]")


class MapOf(Spec):
    """An object whose every value fits spec (open-ended keys: metrics, components...);
    int_keys: every key a whole number (tids)."""

    what = "an object"

    def __init__(self, value: Spec, min_len: int = 0, int_keys: bool = False, count_keys: bool = False):
        self.value, self.min_len, self.int_keys, self.count_keys = value, min_len, int_keys, count_keys

    def check(self, v: object, at: str) -> None:
        if not isinstance(v, dict):
            raise Bad(at, f"expected an object, found {_name(v)}")
        if len(v) < self.min_len:
            raise Bad(at, "expected at least one entry, found none")
        for k, x in v.items():
            if self.int_keys and not (k.lstrip("-").isascii() and k.lstrip("-").isdigit()):
                raise Bad(f"{at}.{k}" if at else k, "expected a whole number as the key")
            if self.count_keys and not (k.isascii() and k.isdigit() and int(k) <= INT64_MAX):
                raise Bad(f"{at}.{k}" if at else k, "expected a whole number >= 0 as the key")
            self.value.check(x, f"{at}.{k}" if at else k)


class Obj(Spec):
    """An object with known fields (name -> spec; a name ending in "?" may be absent); other
    keys pass unchecked."""

    what = "an object"

    def __init__(self, fields: dict[str, Spec] | None = None, rest: Spec | None = None):
        self.fields = {k.rstrip("?"): (spec, k.endswith("?")) for k, spec in (fields or {}).items()}
        self.rest = rest  # what each key that is none of fields holds (None: unchecked)

    def check(self, v: object, at: str) -> None:
        if not isinstance(v, dict):
            raise Bad(at, f"expected an object, found {_name(v)}")
        for k, (spec, optional) in self.fields.items():
            where = f"{at}.{k}" if at else k
            if k not in v:
                if optional:
                    continue
                raise Bad(where, "missing")
            spec.check(v[k], where)
        if self.rest is not None:
            for k, x in v.items():
                if k not in self.fields:
                    self.rest.check(x, f"{at}.{k}" if at else k)


class Pair(Spec):
    """[lo, hi], two numbers with lo <= hi (an interval)."""

    what = "an interval [lo, hi]"

    def check(self, v: object, at: str) -> None:
        if not (isinstance(v, list) and len(v) == 2 and all(Num().ok(x) for x in v) and v[0] <= v[1]):
            raise Bad(at, f"expected {self.what}, found {_name(v) if not isinstance(v, list) else v!r:.60}")


def check(value: _T, spec: Spec, file: Path | str, at: str = "") -> _T:
    """value against spec; a misfit is one UsageError naming file and field."""
    try:
        spec.check(value, at)
    except Bad as e:
        field, why = e.args
        raise UsageError(
            f"{file}: {'field ' + field + ': ' if field else ''}{why}; the file is damaged or not ipctrace's"
        ) from None
    except RecursionError:
        raise UsageError(f"{file}: nested too deeply; the file is damaged or not ipctrace's") from None
    return value


INT = Num(integer=True)
COUNT = Num(0, integer=True)
ADDRESS = Num(0, integer=True, hi=2**64 - 1)  # a 64-bit address (the vsyscall page: 0xffffffffff600000)
NUM = Opt(Num())
TEXT = Opt(Str())
FLAG = Opt(Bool())

# One metric's (or one component's) statistics: analysis/model/summary.py and stats.py.
STATS = Obj(
    {
        "unit?": TEXT,
        "n": COUNT,
        "mean?": NUM,
        "std?": NUM,
        "min?": NUM,
        "max?": NUM,
        "median?": NUM,
        "p90?": NUM,
        "p95?": NUM,
        "p99?": NUM,
        "p999?": NUM,
        "ci95_mean?": Opt(Pair()),
        "ci95_median?": Opt(Pair()),
        "runs_ci95_mean?": Opt(Pair()),
        "runs?": Opt(COUNT),
        "derived?": FLAG,
        "from?": TEXT,
        "factor?": NUM,
    }
)
# with --iqr each metric repeats its figures without the outliers, and counts them
IQR = Obj()
IQR.fields = {**STATS.fields, "removed": (Opt(COUNT), True)}
STATS.fields["iqr"] = (Opt(IQR), True)
THREAD = Obj({"role": Str(), "pid": INT, "tid": INT, "cpu": INT})
SIDE_STATS = Obj({"n?": Opt(COUNT), "mean?": NUM, "median?": NUM, "p99?": NUM})
# a component's statistics; a derived one (sched_delay) names what it adds up
COMPONENT = Obj()
COMPONENT.fields = {**STATS.fields, "derived": (TEXT, True)}
# who held the CPU while the workload waited preempted (breakdown.holders_table)
HOLDER = Obj({"tid": INT, "comm?": TEXT, "pid?": Opt(INT), "tracer?": FLAG, "ns_per_iteration?": NUM, "share": Num(0)})
BREAKDOWN = Obj(
    {
        "components": MapOf(COMPONENT),
        "closure_residual_pct?": NUM,
        "critical_path?": FLAG,
        "per_side?": Opt(
            MapOf(
                Obj(
                    {
                        "components?": Opt(MapOf(SIDE_STATS)),
                        "wakeups?": Opt(COUNT),
                        "wakeup_delay?": Opt(Obj()),
                        "runqueue_delay?": Opt(Obj()),
                    }
                )
            )
        ),
        "copy_source?": TEXT,
        "copy_bytes_mean?": NUM,
        "copy_costs?": Opt(Obj({"ns_per_call?": NUM, "ns_per_byte?": NUM})),
        "entry_source?": TEXT,
        "entry_calibration?": Opt(
            Obj(
                {
                    "entry_ns?": NUM,
                    "exit_ns?": NUM,
                    "traced_syscall_ns?": NUM,
                    "clock_read_ns?": NUM,
                    "calls?": Opt(COUNT),
                }
            )
        ),
        "steal_ns_mean?": NUM,
        "preempted_by?": Opt(ListOf(HOLDER)),
    }
)
# trace.json's names of the tasks seen ({tid: {comm, pid}}), the tracer's own threads, steal
TASKS = MapOf(Opt(Obj({"comm?": TEXT, "pid?": Opt(INT)})), int_keys=True)
TRACER = Obj(
    {
        "pid?": Opt(INT),
        "tids?": Opt(ListOf(INT)),
        "reader_tid?": Opt(INT),
        "reader_policy?": TEXT,
        "reader_raised?": Opt(COUNT),
    }
)
STEAL = Obj(
    {
        "source?": TEXT,
        "per_cpu_ns?": Opt(ListOf(COUNT)),
        "total_ns?": Opt(COUNT),
        "totals_from?": TEXT,
        "proc_stat_ns?": Opt(ListOf(COUNT)),
        "user_hz?": Opt(COUNT),
    }
)
# --only-uid (trace.json): the user, the calls checked; the tasks that took another user's rights
ONLY_UID = Obj({"uid?": Opt(COUNT), "calls?": Opt(MapOf(COUNT))})
# the tracer's features (loaders/features.c features_json): each feature's name -> {ok, detail},
# beside whether tracing is possible here and why not
FEATURES = Obj({"possible?": FLAG, "why_impossible?": TEXT}, rest=Obj({"ok?": FLAG, "detail?": TEXT}))
# --markers (loaders/marks.c marks_json): the marks' names by address, the probes, the sites
# they sit on, the calibration's binary and probes, and how many mark records were traced
MARKS = Obj(
    {
        "names?": Opt(MapOf(Str(), int_keys=True)),
        "probes?": Opt(ListOf(Str())),
        "sites?": Opt(ListOf(Obj({"kind?": TEXT, "target?": TEXT, "bytes?": Opt(ListOf(Str()))}))),
        "calibration?": Opt(Obj({"binary?": TEXT, "probes?": Opt(ListOf(Str())), "error?": TEXT})),
        "count?": Opt(COUNT),
    }
)
LEFT_TRACE = Obj(
    {
        "count?": Opt(COUNT),
        "tasks?": Opt(ListOf(Obj({"pid": INT, "tid?": Opt(INT), "comm?": TEXT, "why?": TEXT, "ts?": Opt(COUNT)}))),
    }
)
LABELS = MapOf(COUNT)
TAIL_PART = Obj({"threshold_ns?": NUM, "iterations?": Opt(COUNT), "labels?": Opt(LABELS)})
TAIL = Obj(
    {
        "metric?": TEXT,
        "threshold_ns?": NUM,
        "iterations?": Opt(COUNT),
        "long_wakeup_ns?": NUM,
        "labels?": Opt(LABELS),
        "by_metric?": Opt(MapOf(TAIL_PART)),
    }
)
TRACE_SUMMARY = Obj(
    {
        "drops?": Opt(
            Obj(
                {
                    "total?": Opt(COUNT),
                    "per_cpu?": Opt(ListOf(COUNT)),
                    "recursion_misses?": Opt(COUNT),
                    "switches_missed?": Opt(COUNT),
                    "switches_missed_other?": Opt(COUNT),
                }
            )
        ),
        "events?": Opt(MapOf(COUNT)),
        "records?": Opt(COUNT),
        "attach?": Opt(MapOf(Str())),
        "pids?": Opt(ListOf(INT)),
        "tids?": Opt(ListOf(INT)),
        "features?": Opt(FEATURES),
        "status?": TEXT,
        "floor?": FLAG,
        "ringbuf_bytes?": Opt(COUNT),
        "in_iterations?": Opt(COUNT),
        "lost_spans?": Opt(COUNT),
        "iterations_left_out?": Opt(COUNT),
        "partial?": FLAG,
        "tasks?": Opt(TASKS),
        "tracer?": Opt(TRACER),
        "steal?": Opt(STEAL),
        "left_trace?": Opt(LEFT_TRACE),
    }
)
PROBE_EFFECT = Obj(
    {
        "untraced_dir?": TEXT,
        "metrics": MapOf(
            Obj(
                {
                    "traced_median": Num(),
                    "untraced_median": Num(),
                    "ratio": Num(),
                    "ratio_ci95?": Opt(Pair()),
                    "unit?": TEXT,
                }
            )
        ),
    }
)
# A traced program's whole trace (model/activity.py's Activity), ipctrace trace's summary.json.
STATE_TIMES = MapOf(COUNT)
ACTIVITY = Obj(
    {
        "arch": Str(),
        "start_ns": Opt(COUNT),
        "end_ns": Opt(COUNT),
        "threads": ListOf(
            Obj(
                {
                    "tid": INT,
                    "pid": Opt(INT),
                    "comm": TEXT,
                    "start_ns": COUNT,
                    "end_ns": COUNT,
                    "states_ns": STATE_TIMES,
                    "switches_out": COUNT,
                    "preempted_by": ListOf(Obj({"tid": INT, "comm": TEXT, "count": COUNT, "ns": COUNT})),
                }
            )
        ),
        "wake_edges": ListOf(
            Obj(
                {
                    "waker": INT,
                    "waker_comm": TEXT,
                    "wakee": INT,
                    "wakee_comm": TEXT,
                    "count": COUNT,
                    "hardirq": COUNT,
                    "delays": COUNT,
                    "delay_p50_ns": NUM,
                    "delay_p90_ns": NUM,
                    "delay_p99_ns": NUM,
                    "delay_max_ns": NUM,
                }
            )
        ),
        "syscalls": ListOf(
            Obj(
                {
                    "nr": INT,
                    "name": Str(),
                    "count": COUNT,
                    "threads": COUNT,
                    "total_ns": COUNT,
                    "p50_ns": NUM,
                    "p90_ns": NUM,
                    "p99_ns": NUM,
                    "max_ns": COUNT,
                    "states_ns": STATE_TIMES,
                }
            )
        ),
        "unpaired_syscalls": COUNT,
    }
)
# The machine's facts (store/host.py host_info): summary.json's and suite.json's host.
HOST = Obj(
    {
        "kernel?": TEXT,
        "machine?": TEXT,
        "cpu_model?": TEXT,
        "cores?": Opt(COUNT),
        "online_cpus?": TEXT,
        "hostname?": TEXT,
        "clocksource?": TEXT,
        "hypervisor?": TEXT,
        "boot_id?": TEXT,
    }
)
SUMMARY = Obj(
    {
        "schema_version": INT,
        "workload?": TEXT,
        "status?": Opt(Str(("complete", "interrupted", "failed", "stopped"))),
        "params?": Opt(
            Obj(
                {
                    "iterations?": Opt(COUNT),
                    "warmup?": Opt(COUNT),
                    "runs?": Opt(COUNT),
                    "size?": Opt(COUNT),
                    "cpus?": Opt(ListOf(INT)),
                    "traced?": FLAG,
                    "mode?": TEXT,
                }
            )
        ),
        "mode?": TEXT,
        "host?": Opt(HOST),
        "warnings?": Opt(ListOf(Str())),
        "placement?": TEXT,
        "threads?": Opt(ListOf(THREAD)),
        "runs_completed?": Opt(COUNT),
        "iterations_completed?": Opt(COUNT),
        "primary_metric?": TEXT,
        "clock?": TEXT,
        "extra?": Opt(Obj()),
        "metrics": MapOf(STATS),
        "trace?": Opt(TRACE_SUMMARY),
        "breakdown?": Opt(MapOf(BREAKDOWN)),
        "tail?": Opt(TAIL),
        "probe_effect?": Opt(PROBE_EFFECT),
        "copy_estimate?": Opt(
            Obj(
                {
                    "bytes?": NUM,
                    "ns?": NUM,
                    "ns_per_byte?": NUM,
                    "ns_per_byte_ci95?": Opt(Pair()),
                    "estimated?": FLAG,
                    "from?": TEXT,
                }
            )
        ),
        "activity?": Opt(ACTIVITY),
        "probe_calibration?": Opt(
            Obj(
                {
                    "mode?": TEXT,
                    "probe_in_window_ns?": NUM,
                    "begin_tail_ns?": NUM,
                    "end_head_ns?": NUM,
                    "windows?": Opt(COUNT),
                    "source?": TEXT,
                }
            )
        ),
    }
)
# A sweep's summary.json (analysis/run/sweep.py) adds the fit over its sizes and each size's
# directory, a name inside the sweep's; a fit of one size has NaN for its figures.
FIT = Obj({"value": Num(finite=False), "ci95": ListOf(Num(finite=False), 2, 2)})
SWEEP = Obj(
    {
        "kind": Str(("sweep",)),
        "metric?": TEXT,
        "sizes?": Opt(ListOf(COUNT)),
        "x?": TEXT,
        "y?": TEXT,
        "copy": Obj({"ns_per_byte": FIT, "fixed_ns": FIT, "method?": TEXT, "estimated?": FLAG}),
        "per_size": MapOf(
            Obj(
                {
                    "dir": Name(),
                    "bytes_per_iteration": Num(0),
                    "median_ns?": NUM,
                    "metric_median_ns?": NUM,
                    "copy_ns_estimated?": Opt(Num(finite=False)),
                }
            ),
            count_keys=True,
        ),
    }
)
WORKLOAD = Obj(
    {
        "workload": Str(),
        "metrics": ListOf(Str(), 1),
        "primary_metric?": TEXT,
        "derived?": Opt(MapOf(Obj({"from": Str(), "factor": Num()}))),
        "params?": Opt(Obj()),
        "mode?": TEXT,
        "placement?": TEXT,
        "copies?": FLAG,
        "threads": ListOf(THREAD),
        "runs_completed?": Opt(COUNT),
        "iterations_completed?": Opt(COUNT),
        "status?": TEXT,
        "error?": TEXT,
        "warnings?": Opt(ListOf(Str())),
        "copy_calibration?": Opt(Obj({"method?": TEXT, "ns_per_call": Num(), "ns_per_byte": Num()})),
        "entry_calibration?": Opt(
            Obj(
                {
                    "tid?": INT,
                    "cpu?": Opt(INT),
                    "syscall_nr?": INT,
                    "empty_ns?": NUM,
                    "empty_ns_min?": NUM,
                    "tight?": Opt(ListOf(COUNT, 2)),
                    "calls?": Opt(ListOf(ListOf(COUNT, 2, 2))),
                    "absent?": TEXT,
                }
            )
        ),
        "clock?": TEXT,
        "tag?": TEXT,
        "extra?": Opt(Obj()),
    }
)
SPAN = ListOf(COUNT, 3)
TRACE = Obj(
    {
        "machine?": TEXT,
        "boot_id?": TEXT,
        "drops": Obj(
            {
                "total": COUNT,
                "per_cpu?": Opt(ListOf(COUNT)),
                "lost_spans?": ListOf(SPAN),
                "spans_unrecorded?": Opt(COUNT),
                "recursion_misses?": Opt(COUNT),
                "switches_missed?": Opt(COUNT),
                "switches_missed_other?": Opt(COUNT),
                "gaps_unrecorded?": Opt(COUNT),
            }
        ),
        "events?": Opt(MapOf(COUNT)),
        "records?": Opt(COUNT),
        "unknown_records?": Opt(COUNT),
        "attach?": Opt(MapOf(Str())),
        "tids?": Opt(ListOf(INT)),
        "pids?": Opt(ListOf(INT)),
        "features?": Opt(FEATURES),
        "floor?": FLAG,
        "floor_clock?": FLAG,
        "ringbuf_bytes?": Opt(COUNT),
        "root_pid?": Opt(INT),
        "exit_code?": Opt(INT),
        "status?": TEXT,
        "clock?": TEXT,
        "mode?": TEXT,
        "stopped_by?": TEXT,
        "marks?": Opt(MARKS),
        "tasks?": Opt(TASKS),
        "tasks_unnamed?": Opt(COUNT),
        "tracer?": Opt(TRACER),
        "steal?": Opt(STEAL),
        "only_uid?": Opt(ONLY_UID),
        "left_trace?": Opt(LEFT_TRACE),
    }
)
META = Obj(
    {
        "status?": TEXT,
        "command?": Opt(ListOf(Str())),
        "command_line?": TEXT,
        "version?": TEXT,
        "start_time?": TEXT,
        "end_time?": TEXT,
        "traced?": FLAG,
        "error?": TEXT,
    }
)
# A merged directory's merge.json (cli/merge.py; store.jsonfiles.MergeFile): a part's statistics
# (model/crosshost.py's PARTS, open-ended here as breakdown.parquet's columns are), null where
# no round trip was joined.
PART_STATS = Obj({"median": Num(), "mean": Num(), "p99": Num(), "n": COUNT})
PART_INTERVAL = Obj({"median_low_ns": Num(), "median_high_ns": Num(), "mean_low_ns": Num(), "mean_high_ns": Num()})
MERGE = Obj(
    {
        "kind": Str(["merge"]),
        "client": Str(),
        "server": Str(),
        "hosts": Obj({"client": TEXT, "server": TEXT}),
        "clock": Obj(
            {
                "offset_ns": Num(),
                "drift_ppm": Num(),
                "error_bound_ns": Num(0),
                "consistent": Bool(),
                "matched_client_to_server": COUNT,
                "matched_server_to_client": COUNT,
                "span_ns": COUNT,
                "t0_ns": INT,
                "same_clock?": FLAG,
            }
        ),
        "messages": Obj({"client_to_server": COUNT, "server_to_client": COUNT}),
        "round_trips": COUNT,
        "joined": COUNT,
        "parts": MapOf(Opt(PART_STATS)),
        "intervals?": Opt(MapOf(PART_INTERVAL)),
        "latency": Opt(PART_STATS),
    }
)
# One task's stacks in samples.json (loaders/sample.c): addresses, innermost first; count
# samples (oncpu) or switches out (offcpu, with the ns off the CPU).
SAMPLED_STACK = Obj(
    {
        "pid": INT,
        "tid": INT,
        "comm?": TEXT,
        "lost?": FLAG,
        "kstack?": Opt(ListOf(ADDRESS)),
        "ustack?": Opt(ListOf(ADDRESS)),
        "count": COUNT,
        "ns?": Opt(COUNT),
        "blocked?": FLAG,
    }
)
OFFCPU_STACK = Obj()
OFFCPU_STACK.fields = {**SAMPLED_STACK.fields, "ns": (COUNT, False)}
SAMPLES = Obj(
    {
        "boot_id?": TEXT,
        "hz?": Opt(COUNT),
        "event?": TEXT,
        "maps?": Opt(MapOf(ListOf(Obj({"start": ADDRESS, "end": ADDRESS, "offset": ADDRESS, "path": Str()})))),
        "oncpu?": Opt(ListOf(SAMPLED_STACK)),
        "offcpu?": Opt(ListOf(OFFCPU_STACK)),
    }
)
# A suite's suite.json (analysis/run/suite.py): its facts and its table's rows (model/suite.py).
SUITE_ROW = Obj(
    {
        "experiment": Str(),
        "metric": Str(),
        "title?": TEXT,
        "workload?": TEXT,
        "options?": TEXT,
        "status?": TEXT,
        "n?": Opt(COUNT),
        "mean_ns?": NUM,
        "ci95_lo_ns?": NUM,
        "ci95_hi_ns?": NUM,
        "median_ns?": NUM,
        "runs_ci95_lo_ns?": NUM,
        "runs_ci95_hi_ns?": NUM,
        "iqr_mean_ns?": NUM,
        "iqr_ci95_lo_ns?": NUM,
        "iqr_ci95_hi_ns?": NUM,
        "iqr_removed?": Opt(COUNT),
        "measured?": TEXT,
        "traced_median_ns?": NUM,
        "probe_effect?": NUM,
        "report?": TEXT,
        "machine?": TEXT,
        "report_value_ns?": NUM,
        "report_ci95_lo_ns?": NUM,
        "report_ci95_hi_ns?": NUM,
        "report_statistic?": TEXT,
        "note?": TEXT,
    }
)
SUITE = Obj(
    {
        "started?": TEXT,
        "host?": Opt(HOST),
        "placement?": TEXT,
        "iterations?": Opt(COUNT),
        "warmup?": Opt(COUNT),
        "runs?": Opt(COUNT),
        "traced?": FLAG,
        "quick?": FLAG,
        "iqr?": FLAG,
        "interrupted?": FLAG,
        "rows": ListOf(SUITE_ROW),
    }
)


# --- parquet: the kind of each column ----------------------------------------------


def check_columns(df: pd.DataFrame, kinds: dict[str, str], file: Path | str) -> pd.DataFrame:
    """df's columns against kinds {name: "int" | "num" | "str"}: absent ones and wrong types
    are one UsageError naming file and column."""
    import pandas as pd

    missing = [c for c in kinds if c not in df.columns]
    if missing:
        raise UsageError(f"{file} lacks the columns {', '.join(missing)}")
    for c, k in kinds.items():
        col = df[c]
        if k == "str":
            good = (
                isinstance(col.dtype, pd.CategoricalDtype)
                or pd.api.types.is_string_dtype(col.dtype)
                or col.dtype == object
                and col.map(lambda x: isinstance(x, str)).all()
            )
        elif k == "int":
            good = pd.api.types.is_integer_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype)
        else:
            good = pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype)
        if not good:
            word = {"str": "text", "int": "whole numbers", "num": "numbers"}[k]
            raise UsageError(
                f"{file}: column {c}: expected {word}, found {col.dtype}; the file is damaged or not ipctrace's"
            )
    return df


ITERATIONS_COLUMNS = {
    "run": "int",
    "iteration": "int",
    "seq": "int",
    "metric": "str",
    "t_start_ns": "int",
    "t_end_ns": "int",
    "latency_ns": "int",
    "cpu": "int",
    "tid": "int",
}
EVENTS_COLUMNS = {
    "ts": "int",
    "type": "str",
    "cpu": "int",
    "pid": "int",
    "tid": "int",
    "aux": "int",
    "a0": "int",
    "next_tid": "int",
    "next_pid": "int",
    "other_tid": "int",
    "other_pid": "int",
    "run": "int",
    "iteration": "int",
}
BREAKDOWN_COLUMNS = {"run": "int", "iteration": "int", "metric": "str", "latency_ns": "num"}
# breakdown.parquet's other columns are components (open-ended names): numbers, but for these
BREAKDOWN_TEXT = ("metric", "tail")


# The critical path's components, in the order the tables give them: the one list of them (the
# model's breakdown_types.COMPONENTS is this one; heatmaps.COMPONENTS orders the same names as the
# tail is drawn, a test holds the two to the same names). Every iteration has each, a number in
# breakdown.parquet; a side's columns (`measuring.user`...) are NaN where that side took no part.
COMPONENTS = (
    "user",
    "entry",
    "syscall",
    "copy",
    "irq",
    "wakeup",
    "runqueue",
    "blocked",
    "preempted",
    "steal",
    "residual",
)
# A merged round trip's network legs (analysis/model/crosshost.PARTS): each is measured across two
# clocks aligned within an error bound, so one way may come out below zero; they must be finite.
BREAKDOWN_SIGNED = ("network_out", "network_back")


def check_breakdown(
    df: pd.DataFrame, file: Path | str, columns: Collection[str] | None = None, summary: dict | None = None
) -> pd.DataFrame:
    """breakdown.parquet's columns: typed, and every number a time, a count or a size: not
    negative, not infinite, and not NaN in the critical path's components and the latency;
    with the run's summary, every row's metric one of its metrics."""
    check_columns(df, {c: k for c, k in BREAKDOWN_COLUMNS.items() if columns is None or c in columns}, file)
    check_columns(df, {c: "num" for c in df.columns if c not in BREAKDOWN_TEXT}, file)
    for c in df.columns:
        if c in BREAKDOWN_TEXT:
            continue
        v = df[c].to_numpy()
        if v.dtype.kind != "f":
            bad = int(np.count_nonzero(v < 0))
        elif c in BREAKDOWN_SIGNED:
            bad = len(v) - int(np.count_nonzero(np.isfinite(v)))
        elif c in COMPONENTS or c in BREAKDOWN_COLUMNS:
            bad = len(v) - int(np.count_nonzero(np.isfinite(v) & (v >= 0)))
        else:
            bad = int(np.count_nonzero(np.isinf(v) | (v < 0)))
        if bad:
            raise UsageError(
                f"{file}: column {c}: {bad} of {len(v)} rows negative or not a number; "
                f"the file is damaged or not ipctrace's"
            )
    if summary is not None and "metric" in df.columns:
        _known_metrics(df, file, summary)
    return df


def _known_metrics(df: pd.DataFrame, file: Path | str, summary: dict) -> pd.Series:
    """The rows of each metric of df (one UsageError when a row's metric is none of summary's)."""
    metrics = summary.get("metrics") or {}
    counts = df["metric"].value_counts(dropna=False)
    counts = counts[counts > 0]
    unknown = sorted(str(m) for m in counts.index if not isinstance(m, str) or m not in metrics)
    if unknown:
        raise UsageError(
            f"{file}: column metric: {', '.join(unknown)[:80]} is none of the metrics its summary.json names "
            f"({', '.join(metrics)[:80] or 'none'}); the file is damaged or not ipctrace's"
        )
    return counts


# The longest latency an iteration may have, 2^53 ns (104 days): beyond it a double cannot hold
# it exactly, and no run of ipctrace measures one (a latency of INT64_MAX is damage).
LATENCY_MAX = 2**53
BLOCK = 1 << 18  # rows a block: its temporaries a few MB


def check_iterations(df: pd.DataFrame, file: Path | str, summary: dict | None = None) -> pd.DataFrame:
    """iterations.parquet's rows (also a dataset's iterations): typed (ITERATIONS_COLUMNS); each
    latency t_end_ns - t_start_ns, at least 0 and at most LATENCY_MAX; run and iteration numbers
    not negative. With the run's summary (checked): every row's metric one of its metrics, and
    no metric counting more iterations (n) than the rows of it. One UsageError naming file."""
    check_columns(df, ITERATIONS_COLUMNS, file)
    damaged = "; the file is damaged or not ipctrace's"
    start, end, lat = (df[c].to_numpy() for c in ("t_start_ns", "t_end_ns", "latency_ns"))
    bad = 0
    for a in range(0, len(df), BLOCK):  # a block at a time: no 8 bytes an iteration beside the columns
        s, e, x = start[a : a + BLOCK], end[a : a + BLOCK], lat[a : a + BLOCK]
        bad += int(np.count_nonzero((s < 0) | (x < 0) | (x > LATENCY_MAX) | (e - s != x)))
    if bad:
        raise UsageError(
            f"{file}: column latency_ns: {bad} of {len(df)} rows negative, above 2^53 ns or not "
            f"t_end_ns - t_start_ns{damaged}"
        )
    for c in ("run", "iteration"):
        if len(df) and df[c].min() < 0:
            raise UsageError(f"{file}: column {c}: negative numbers{damaged}")
    if summary is None:
        return df
    counts = _known_metrics(df, file, summary)
    for name, m in (summary.get("metrics") or {}).items():
        # a derived metric (one_way = rtt / 2) counts its source's rows
        rows = int(counts.get(name if name in counts.index else m.get("from"), 0))
        if m.get("n", 0) > rows:
            raise UsageError(
                f"{file}: summary.json says {m['n']} iterations of {name}, the file holds {rows}; "
                f"the results directory is damaged"
            )
    return df


def check_events(df: pd.DataFrame, file: Path | str, types: Iterable[str]) -> pd.DataFrame:
    check_columns(df, EVENTS_COLUMNS, file)
    seen = set(df["type"].dropna().unique()) if len(df) else set()
    unknown = sorted(str(t) for t in seen - set(types))
    if unknown or (len(df) and df["type"].isna().any()):
        raise UsageError(
            f"{file}: column type: unknown event types {', '.join(unknown) or 'null'}; "
            f"the file is damaged or not ipctrace's"
        )
    return df
