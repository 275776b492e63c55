"""summary.json's statistics of one run (model/summary.py), and the RunSummary's file form."""

import json

import pytest

from analysis.model import stats, summary
from analysis.store import summaryfile
from analysis.store.host import host_info
from analysis.store.jsonfiles import Drops, Host, Stats, Thread, TraceFile, Workload
from conftest import make_iterations


def test_summary_with_derived_metric(tmp_path):
    lat = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]
    iters = make_iterations(lat, runs=2)
    wl = Workload(
        workload="pipe",
        metrics=["rtt"],
        primary_metric="rtt",
        placement="cross-cpu",
        threads=[Thread(role="measuring", pid=1, tid=1, cpu=0)],
    )
    s = summary.build(
        wl,
        iters,
        {"one_way": {"from": "rtt", "factor": 0.5}},
        {"iterations": 4, "runs": 2},
        "complete",
        [],
        iqr=False,
        host=host_info(),
    )
    written = json.loads(json.dumps(s.to_json(), allow_nan=False))["metrics"]  # summary.json's entries
    rtt, ow = written["rtt"], written["one_way"]
    assert rtt["derived"] is False and ow["derived"] is True and ow["from"] == "rtt" and ow["factor"] == 0.5
    assert rtt["n"] == ow["n"] == 8
    assert rtt["mean"] == 4500 and ow["mean"] == 2250
    assert rtt["median"] == 4500 and ow["median"] == 2250
    assert ow["ci95_mean"] == pytest.approx([v / 2 for v in rtt["ci95_mean"]])
    assert ow["ci95_median"] == [v / 2 for v in rtt["ci95_median"]]
    assert rtt["runs"] == 2 and rtt["runs_ci95_mean"] is None  # no interval below 3 runs
    assert s.schema_version == 1 and s.primary_metric == "rtt"
    assert s.host.kernel and s.host.cores and s.host.cpu_model is not None
    assert list(s.metrics) == ["rtt", "one_way"]
    assert set(stats.STAT_KEYS) <= set(rtt)


def test_summary_keys_follow_stats():

    assert stats.QUANTILE_KEYS == list(stats.QUANTILES)


def test_summary_iqr_keeps_raw_figures():
    iters = make_iterations([100, 101, 102, 103, 104, 105, 106, 10000])
    wl = Workload(workload="x", metrics=["rtt"], threads=[])
    s = summary.build(wl, iters, {}, {}, "complete", [], iqr=True, host=Host())
    m = s.to_json()["metrics"]["rtt"]
    assert m["max"] == 10000 and m["n"] == 8
    assert m["iqr"]["removed"] == 1 and m["iqr"]["n"] == 7 and m["iqr"]["max"] == 106


def test_summary_of_a_metric_without_iterations():
    iters = make_iterations([500, 600], metrics=("write", "read"), metric="write")
    s = summary.build(Workload("x", ["write", "read"], []), iters, {}, {}, "interrupted", [], False, Host())
    assert s.metrics["read"].n == 0 and s.metrics["read"].mean is None
    assert s.metrics["write"].n == 2
    json.dumps(s.to_json(), allow_nan=False)
    assert s.status == "interrupted"


def test_the_file_keeps_its_order_and_leaves_out_what_a_run_lacks():
    iters = make_iterations([100, 200, 300])
    s = summary.build(Workload("x", ["rtt"], []), iters, {}, {}, "complete", ["w"], False, Host())
    d = s.to_json()
    assert list(d)[:3] == ["schema_version", "workload", "status"] and list(d)[-1] == "metrics"
    assert not {"trace", "breakdown", "tail", "probe_effect", "copy_estimate"} & set(d)
    pe = summary.probe_effect(s.metrics, s.metrics, "untraced")
    d2 = summaryfile.RunSummary.from_json(json.loads(json.dumps(d | {"copy_estimate": {"ns": 1}}))).to_json()
    assert d2 == d | {"copy_estimate": {"ns": 1}}
    with_pe = summaryfile.RunSummary.from_json(d)
    assert list(type(with_pe)(**{**with_pe.__dict__, "probe_effect": pe}).to_json())[-1] == "probe_effect"
    with pytest.raises(ValueError, match="not a summary of this version"):
        summaryfile.RunSummary.from_json({k: v for k, v in d.items() if k != "metrics"})


def test_a_sweeps_copy_estimate_is_typed_and_written_back_as_it_was_read():
    """copy_estimate (run/sweep.py writes it into each size's summary) reads as a CopyEstimate,
    writes back to the same JSON, keys in their order, and is what copycost.estimates reads."""
    from analysis.model import copycost

    est = {"bytes": 4096.0, "ns": 409.6, "ns_per_byte": 0.1, "ns_per_byte_ci95": [0.09, 0.11]}
    est |= {"estimated": True, "from": "sweep-dir"}
    bd = {"rtt": {"components": {"copy": {"n": 1, "mean": 50.0}}, "copy_source": "measured"}}
    s = summaryfile.RunSummary.from_json(
        {"schema_version": 1, "metrics": {"rtt": {"n": 1}}, "breakdown": bd} | {"copy_estimate": est}
    )
    assert s.copy_estimate is not None and s.copy_estimate.source == "sweep-dir"
    assert json.dumps(s.to_json()["copy_estimate"]) == json.dumps(est)
    built = summaryfile.CopyEstimate(bytes=4096.0, ns=409.6, ns_per_byte=0.1, ns_per_byte_ci95=[0.09, 0.11])
    assert json.dumps(built.to_json()) == json.dumps(est | {"estimated": None, "from": None})
    rows = copycost.estimates(s, None)
    assert [r[0] for r in rows] == ["direct (probed copy routines)", "size sweep"]
    assert rows[1][2:] == (409.6, "4,096 B x 0.1000 ns/byte (95 % CI 0.0900..0.1100)")


def test_every_file_the_schema_accepts_is_read():
    """What the schema lets a file leave out is read as None or empty: the least summary it
    accepts, and a merged directory's breakdown (model/crosshost.py: components, the critical
    path and the closure only), a probe effect without the twin's directory, a tail of nothing."""
    from analysis.store import schema

    least = {"schema_version": 1, "metrics": {"rtt": {"n": 0}}}
    schema.check(least, schema.SUMMARY, "summary.json")
    s = summaryfile.RunSummary.from_json(least)
    assert (s.status, s.clock, s.params, s.threads, s.warnings, s.trace) == (None, None, {}, [], [], None)
    assert s.stats("rtt") == Stats(n=0) and s.stats("other") is None
    assert s.settings() == summaryfile.Settings()
    given = summaryfile.RunSummary.from_json(least | {"params": {"iterations": 5, "command": ["pp"], "ringbuf_mb": 0}})
    assert given.settings() == summaryfile.Settings(iterations=5, command=["pp"]) and given.params["ringbuf_mb"] == 0
    comp = {"n": 3, "mean": 10.0, "derived": "wait"}
    merged = least | {
        "breakdown": {"rtt": {"components": {"wait": comp}, "critical_path": True, "closure_residual_pct": 0.0}},
        "probe_effect": {"metrics": {}},
        "tail": {},
        "trace": {},
    }
    schema.check(merged, schema.SUMMARY, "summary.json")
    s = summaryfile.RunSummary.from_json(merged)
    b = s.breakdown["rtt"]
    assert b.critical_path and b.copy_source is None and b.per_side == {} and b.preempted_by == []
    assert b.components["wait"] == Stats(n=3, mean=10.0, derived="wait")
    assert s.probe_effect.untraced_dir is None and s.tail.metric is None and s.trace.drops == Drops()
    nulls = least | {"host": None, "params": None, "breakdown": {"rtt": {"components": {}, "per_side": None}}}
    schema.check(nulls, schema.SUMMARY, "summary.json")
    s = summaryfile.RunSummary.from_json(nulls)
    assert s.host == Host() and s.params == {} and s.breakdown["rtt"].per_side == {}


def test_a_stats_entry_is_written_back_as_it_was_read():
    """summary.json read and written again (run/sweep.py's restate_copy) keeps each entry's
    keys, the null ones and their order, whatever the dataclass's field order: the same bytes."""
    entries = {
        "metric": {"unit": "ns", "n": 2, "mean": 1.5, "std": None, "median": 1, "derived": True, "from": "rtt"},
        "iqr": {"n": 2, "iqr": {"unit": "ns", "n": 1, "max": 3, "removed": 1}, "runs": 1},
        "component": {"mean": 4.0, "n": 3, "derived": "wakeup + runqueue"},
        "side": {"n": 3, "mean": 2.0, "median": 2.0, "p99": 7.5},
        "empty": {},
    }
    for name, e in entries.items():
        back = Stats.from_json(e).to_json()
        assert json.dumps(back) == json.dumps(e), name
    assert Stats.from_json(entries["iqr"]).iqr == Stats(unit="ns", n=1, max=3, removed=1)
    # one built, not read: its figures in the order the file has them
    built = Stats(n=2, mean=1.5, source="rtt", derived=True, unit="ns", iqr=Stats(n=1, removed=1))
    assert json.dumps(built.to_json()) == json.dumps(
        {"unit": "ns", "n": 2, "mean": 1.5, "derived": True, "from": "rtt", "iqr": {"n": 1, "removed": 1}}
    )


def test_a_metric_entry_is_read_with_its_derivation_and_iqr():
    iters = make_iterations([100, 200, 300, 400, 500, 600, 700, 10_000])
    s = summary.build(
        Workload("x", ["rtt"], []),
        iters,
        {"one_way": {"from": "rtt", "factor": 0.5}},
        {},
        "complete",
        [],
        True,
        Host(),
    )
    s = summaryfile.RunSummary.from_json(json.loads(json.dumps(s.to_json())))
    one_way = s.stats("one_way")
    assert one_way.derived is True and one_way.source == "rtt" and one_way.factor == 0.5
    assert one_way.median == s.stats("rtt").median / 2 and one_way.n == 8
    assert s.stats("rtt").iqr.removed == 1 and s.stats("rtt").iqr.n == 7


@pytest.mark.parametrize(
    "traced,untraced,ratio,ci",
    [
        # medians 3000 / 2000; intervals [2900, 3100] / [1900, 2100]: far ends 2900/2100, 3100/1900
        (3000, 2000, 1.5, [2900 / 2100, 3100 / 1900]),
        (1000, 1000, 1.0, [900 / 1100, 1100 / 900]),
    ],
)
def test_probe_effect_is_the_ratio_of_medians_with_the_far_ends(traced, untraced, ratio, ci):
    def m(med, derived=False):
        return Stats(median=med, ci95_median=[med - 100, med + 100], unit="ns", derived=derived)

    pe = summary.probe_effect({"rtt": m(traced), "one_way": m(1, derived=True)}, {"rtt": m(untraced)}, "u")
    assert pe.untraced_dir == "u" and list(pe.metrics) == ["rtt"]
    assert pe.metrics["rtt"].ratio == ratio and pe.metrics["rtt"].ratio_ci95 == pytest.approx(ci)


def _switches_missed_warnings(lost_spans, iterations):
    import pandas as pd

    from analysis.model import tracesummary as trace_model

    it = pd.DataFrame(
        {
            "run": 0,
            "seq": range(len(iterations)),
            "t_start_ns": [a for a, _ in iterations],
            "t_end_ns": [b for _, b in iterations],
            "metric": "rtt",
            "latency_ns": [b - a for a, b in iterations],
        }
    )
    drops = {"total": 0, "lost_spans": lost_spans, "switches_missed": len(lost_spans)}
    r = trace_model.summarize(TraceFile.from_json({"drops": drops}), trace_model.Tally.none(), 0, it, [])
    return r.summary.drops.switches_missed, [w for w in r.warnings_first if "sched_switch" in w]


def test_a_missed_context_switch_is_a_warning_only_where_it_left_an_iteration_out():
    """Warnings only when something was left out (issue 28, point 8): a missed switch between
    the iterations is counted in the summary, not warned about."""
    counted, said = _switches_missed_warnings([[500, 600, 0]], [(0, 100), (1000, 1100)])
    assert counted == 1 and said == []
    counted, said = _switches_missed_warnings([[50, 60, 0]], [(0, 100), (1000, 1100)])
    assert counted == 1 and len(said) == 1 and "1 of 2 iterations" in said[0]


def test_steal_over_five_percent_of_the_trace_is_a_warning():
    """Issue 26 part 4: where the hypervisor took a CPU for more than 5 % of the span the trace
    covers (trace.json steal per CPU), the run says so; at or under 5 % it does not."""
    import pandas as pd

    from analysis.model import tracesummary as trace_model

    events = pd.DataFrame({"ts": [1_000_000_000, 3_000_000_000], "type": ["switch", "switch"], "iteration": -1})
    tally = trace_model.Tally.of(events)  # a 2 s span
    assert (tally.first_ns, tally.last_ns) == (1_000_000_000, 3_000_000_000)
    it = pd.DataFrame({"run": [], "seq": [], "t_start_ns": [], "t_end_ns": [], "metric": [], "latency_ns": []})

    def said(per_cpu):
        r = trace_model.summarize(TraceFile.from_json({"steal": {"per_cpu_ns": per_cpu}}), tally, 0, it, [])
        return [w for w in r.warnings_first if w.startswith("steal")]

    assert said([100_000_000, 0]) == []  # 5 % of 2 s: not over
    (w,) = said([1_000_000_000, 100_000_001])
    assert "CPU 0 1 s (50 %)" in w and "CPU 1 0.1 s (5 %)" in w and "2 s traced" in w
    assert said(None) == []


LEFT = {"pid": 41, "tid": 41, "comm": "mount", "why": "setuid exec", "ts": 5}


@pytest.mark.parametrize(
    ("left_trace", "line"),
    [
        (None, None),  # a trace.json of before --only-uid
        ({"count": 0, "tasks": []}, None),
        (
            {"count": 1, "tasks": [LEFT]},
            "tracing: 1 task took another user's rights and was no longer traced (--only-uid): "
            "mount (pid 41, setuid exec)",
        ),
        (
            {"count": 3, "tasks": [LEFT, {**LEFT, "pid": 42, "tid": 43, "comm": "su", "why": "credential change"}]},
            "tracing: 3 tasks took another user's rights and were no longer traced (--only-uid): "
            "mount (pid 41, setuid exec), su (pid 42, credential change) and 1 more",
        ),
    ],
)
def test_tasks_that_left_the_trace_are_one_line_when_there_are_any(left_trace, line):
    """--only-uid: trace.json's left_trace (tasks that took another user's rights) is kept in
    summary.json's trace and said in one warning line, before the run's own, when not empty."""
    import pandas as pd

    from analysis.model import tracesummary as trace_model
    from analysis.store import schema

    tj = {} if left_trace is None else {"left_trace": left_trace}
    schema.check(tj, schema.TRACE_SUMMARY, "summary.json")
    it = pd.DataFrame({"run": [], "seq": [], "t_start_ns": [], "t_end_ns": [], "metric": [], "latency_ns": []})
    r = trace_model.summarize(TraceFile.from_json(tj), trace_model.Tally.none(), 0, it, [])
    said = [w for w in r.warnings_first if "rights" in w]
    assert said == ([] if line is None else [line])
    assert r.summary.to_json()["left_trace"] == (left_trace or {})
