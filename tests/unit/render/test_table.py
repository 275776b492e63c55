"""The terminal table printed after a run (render/table.py): it shows what summary.json holds."""

import dataclasses

import pytest

from analysis.render import table
from analysis.store import results
from analysis.store.jsonfiles import SUMMARY_TRACE_KEYS, Stats
from analysis.store.summaryfile import MetricBreakdown, RunSummary


def breakdown_entry(**fields):
    """summary.json's breakdown[metric] with these fields, the others null."""
    return {f.name: fields.get(f.name) for f in dataclasses.fields(MetricBreakdown)}


def test_table_prints_what_summary_holds(make_results):
    d = make_results("a", [1500] * 50 + [2500] * 50, derived={"one_way": {"from": "rtt", "factor": 0.5}})
    s = results.read_summary(d)
    text = table.table(RunSummary.from_json(s))
    lines = text.splitlines()
    row = next(line for line in lines if line.startswith("rtt "))
    assert " us " in row and "100" in row.split()
    assert row.split()[3] == table.fmt(s["metrics"]["rtt"]["median"], 1000) == "2.00"
    assert any(line.startswith("one_way*") for line in lines)
    assert "one_way = rtt x 0.5" in text


def test_table_shows_the_breakdown_of_a_traced_run(make_results):
    s = results.read_summary(make_results("t", [10_000] * 10))
    comp = dict(s["metrics"]["rtt"], mean=2500.0, median=2400.0, ci95_mean=[2400.0, 2600.0])
    s["breakdown"] = {
        "rtt": breakdown_entry(
            **{
                "components": {"user": comp, "syscall": dict(comp, mean=7500.0)},
                "closure_residual_pct": 0.5,
                "critical_path": True,
                "copy_source": "estimated: calls x 15 ns",
                "copy_bytes_mean": 4.0,
            }
        )
    }
    lines = table.table(RunSummary.from_json(s)).splitlines()
    heading = "where rtt goes (critical path of the round trip, from kernel events; 10 of 10 iterations):"
    assert lines[lines.index(heading) + 1].split() == [
        "component",
        "unit",
        "median",
        "mean",
        "±",
        "95%",
        "CI",
        "share",
        "of",
        "mean",
    ]
    assert next(line for line in lines if line.startswith("user")).split() == [
        "user",
        "us",
        "2.40",
        "2.50",
        "±",
        "0.10",
        "25.0",
        "%",
    ]
    assert next(line for line in lines if line.startswith("syscall")).split()[-2:] == ["75.0", "%"]
    assert any("0.50 %" in line for line in lines) and lines[-1] == "copy is estimated: calls x 15 ns"


@pytest.mark.parametrize(
    "mean,half,scale,text",
    [
        (6570, 11.5, 1000, "6.57 ± 0.01"),
        (86700, 4420, 1000, "86.7 ± 4.4"),
        (6570, 1, 1000, "6.57 ± <0.01"),
        (347, 0, 1, "347 ± 0"),
        (52.25, 1.25, 1, "52.2 ± 1.2"),
        (None, None, 1, "-"),
    ],
)
def test_mean_and_half_width(mean, half, scale, text):
    assert table.fmt_pm(mean, half, scale) == text


@pytest.mark.parametrize(
    "ns,unit", [(None, "ns"), (12, "ns"), (999, "ns"), (1000, "us"), (6710, "us"), (2.5e6, "ms"), (3e9, "s")]
)
def test_units(ns, unit):
    assert table.pick_unit(ns)[1] == unit


def test_the_breakdown_says_how_many_iterations_it_summarises(make_results):
    # 10 iterations measured, 7 in the breakdown (3 overlapped records the tracer lost)
    s = results.read_summary(make_results("t", [10_000] * 10))
    comp = dict(s["metrics"]["rtt"], n=7, mean=2500.0, median=2400.0, ci95_mean=[2400.0, 2600.0])
    s["breakdown"] = {"rtt": breakdown_entry(components={"user": comp}, critical_path=True)}
    assert (
        "where rtt goes (critical path of the round trip, from kernel events; 7 of 10 iterations, 3 left out "
        "(their events may be incomplete: see the warnings)):" in table.table(RunSummary.from_json(s)).splitlines()
    )


@pytest.mark.parametrize(
    "metric, path",
    [
        ("rtt", "critical path of the round trip"),
        ("write_read", "critical path of the round trip"),
        ("lock_unlock", "critical path of the iteration"),
        ("syscall", "critical path of the iteration"),
    ],
)
def test_breakdown_heading_fits_the_metric(metric, path):
    """A lock hand-off or one system call is no round trip (issue 18)."""
    comp = {"n": 4, "mean": 1.0, "median": 1.0}
    b = MetricBreakdown({"user": Stats.from_json(comp)}, None, True, {}, "", 0.0, {}, "", {}, 0.0, [])
    lines = table.breakdown_lines(metric, b, Stats(n=4, mean=1.0, median=1.0))
    heading = next(line for line in lines if line.startswith("where"))
    assert heading.startswith(f"where {metric} goes ({path},"), heading


def test_a_traced_runs_headline_shows_the_untraced_twin_within_80_columns(make_results):
    """The untraced median and the probe effect are read on an 80-column terminal: they stand
    beside the traced median, before the intervals and the tail (issue 28, point 1)."""
    s = results.read_summary(make_results("t", [10_700] * 100))
    s["trace"] = dict.fromkeys(SUMMARY_TRACE_KEYS) | {"attach": {"sys_enter": "tp_btf"}}
    s["probe_effect"] = {
        "untraced_dir": "untraced",
        "metrics": {"rtt": {"traced_median": 10_700, "untraced_median": 7_700, "ratio": 1.3896, "unit": "ns"}},
    }
    lines = table.table(RunSummary.from_json(s)).splitlines()
    assert all(len(line) <= 80 for line in lines[:2]), lines[:2]
    head = next(line for line in lines if line.startswith("metric"))[:80]
    row = next(line for line in lines if line.startswith("rtt "))[:80]
    assert "untraced median" in head and "probe effect" in head
    assert row.split()[3:6] == ["10.7", "7.70", "1.39x"]


def test_a_run_by_duration_says_how_far_it_got(make_results):
    """--duration 3 --iterations 5000 that stopped at 5000 iterations is not '1 runs x 3 s'."""
    s = results.read_summary(make_results("d", [1000] * 50))
    s["params"].update(duration_s=3, iterations=5000, runs=1)
    s["iterations_completed"] = 5000
    head = table.table(RunSummary.from_json(s)).splitlines()[0]
    assert "1 run x at most 3 s or 5,000 iterations (5,000 iterations measured)" in head and "runs" not in head


def test_the_probe_cost_subtracted_from_marked_iterations_is_shown(make_results):
    """summary.json's probe_calibration is printed, not only stored (issue 28, point 9)."""
    s = results.read_summary(make_results("m", [7860] * 50))
    s["probe_calibration"] = {
        "mode": "usdt",
        "probe_in_window_ns": 691,
        "begin_tail_ns": 300,
        "end_head_ns": 391,
        "source": "calibrated: the median of 500 empty windows on CPU 0 at the start",
    }
    line = next(x for x in table.table(RunSummary.from_json(s)).splitlines() if x.startswith("probe cost:"))
    assert "691 ns subtracted from each iteration" in line and "8 % of a window" in line
    s["probe_calibration"] = {"probe_in_window_ns": None, "source": "not calibrated: no probes"}
    assert "probe cost: not subtracted from the iterations (not calibrated: no probes)" in table.table(
        RunSummary.from_json(s)
    )


def test_the_tasks_that_held_the_cpu_are_named(make_results):
    """A breakdown's preempted_by (typed: breakdown.Holder) is printed: the three largest shares
    of 5 % or more, the tracer's own thread said to be probe effect."""
    s = results.read_summary(make_results("h", [1000] * 50))
    holders = [
        {"tid": 9, "comm": "cc1", "pid": 9, "tracer": False, "ns_per_iteration": 5.0, "share": 0.6},
        {"tid": 3, "comm": None, "pid": None, "tracer": True, "ns_per_iteration": 2.5, "share": 0.3},
        {"tid": 4, "comm": "kworker", "pid": 4, "tracer": False, "ns_per_iteration": 0.1, "share": 0.01},
    ]
    user = {"n": 50, "mean": 1000.0, "median": 1000.0}
    s["breakdown"] = {"rtt": {"components": {"user": user}, "critical_path": True, "preempted_by": holders}}
    lines = table.table(RunSummary.from_json(s)).splitlines()
    assert (
        "CPU held by, while the path waited for it: cc1 (tid 9) 60 %, task (tid 3, the tracer: probe effect) 30 %"
        in (lines)
    )
