"""model/compare.py: one rule for `ipctrace compare` and the report's comparison page, and why
two runs differ, worked out by hand or built with a known difference."""

import numpy as np
import pandas as pd
import pytest

from analysis.model import compare
from analysis.model.compare import comparison
from analysis.render import compare as render_compare
from analysis.store.jsonfiles import Stats
from analysis.store.results import SCHEMA_VERSION
from analysis.store.summaryfile import RunSummary


def typed(d):
    """A RunSummary of the fields of summary.json given (threads with made-up pid and tid)."""
    threads = [{"pid": 1, "tid": 1, **t} for t in d.get("threads", [])]
    return RunSummary.from_json({"schema_version": SCHEMA_VERSION, "metrics": {}, **d, "threads": threads})


def summary(**metrics):
    return typed({"metrics": metrics})


def m(median, mean, ci_mean=None, ci_median=None):
    return {"n": 10, "median": median, "mean": mean, "ci95_mean": ci_mean, "ci95_median": ci_median}


@pytest.mark.parametrize(
    "first, other, want",
    [
        # 2000/1000 and 3300/1100; the mean intervals [900, 1100] and [3000, 3600] do not overlap
        (m(1000, 1100, [900, 1100]), m(2000, 3300, [3000, 3600]), (3.0, 2.0, False, None)),
        # overlapping medians' intervals; no mean intervals: not known
        (m(1000, 1000, None, [900, 1100]), m(1050, 1000, None, [1000, 1200]), (1.0, 1.05, None, True)),
        # the baseline has no median: no ratio of medians
        (m(None, 1000), m(1000, 500), (0.5, None, None, None)),
    ],
)
def test_against_the_first(first, other, want):
    c = comparison([("a", summary(rtt=first)), ("b", summary(rtt=other))])
    a, b = c["rtt"]
    assert (b.mean_ratio, b.median_ratio, b.mean_cis_overlap, b.median_cis_overlap) == want
    assert a.median_ratio in (1.0, None) and a.label == "a" and b.stats == Stats.from_json(other)


def test_a_metric_the_baseline_lacks_has_no_ratios():
    c = comparison([("a", summary(rtt=m(10, 10))), ("b", summary(rtt=m(20, 20), one_way=m(5, 5)))])
    assert list(c) == ["rtt", "one_way"]
    first, second = c["one_way"]
    assert first.stats is None and second.stats is not None
    assert (second.mean_ratio, second.median_ratio) == (None, None)


# --- why two runs differ: answers known by construction -------------------------------


def test_a_shifted_sample_differs_by_the_shift():
    rng = np.random.default_rng(3)
    base = rng.gamma(4.0, 1000.0, 5001)  # skewed, like latencies
    d = compare.median_difference(base, base + 750.0)
    assert d.value == pytest.approx(750.0)
    lo, hi = d.ci95
    assert lo < 750.0 < hi and hi - lo < 400  # the replicates of a shifted sample move with it
    assert compare.median_test_p(base, base + 750.0) < 1e-6
    assert compare.median_test_p(base, rng.permutation(base)) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "base, other, want, ci",
    [
        # means 2 and 5; variances 1 and 1 over 3 values: se = sqrt(1/3 + 1/3), Welch dof 4, t 2.776
        ([1, 2, 3], [4, 5, 6], 3.0, 2.7764451 * (2 / 3) ** 0.5),
        # no spread: an interval of no width
        ([7, 7], [9, 9], 2.0, 0.0),
    ],
)
def test_mean_difference_by_hand(base, other, want, ci):
    d = compare.mean_difference(base, other)
    assert d.value == want and d.ci95 == pytest.approx((want - ci, want + ci), rel=1e-6)


def test_few_values_have_no_interval():
    assert compare.median_difference([1, 2, 3], [4, 5, 6]).ci95 is None
    assert compare.mean_difference([1], [2]).ci95 is None
    assert compare.median_test_p([1], [2]) is None


def test_settings_that_differ():
    a = {
        "workload": "pipe",
        "placement": "cross-cpu",
        "params": {"size": 1, "iterations": 100},
        "threads": [{"role": "measuring", "cpu": 0}, {"role": "peer", "cpu": 1}],
        "host": {"kernel": "6.1", "cores": 2},
    }
    b = {
        **a,
        "placement": "same-cpu",
        "params": {"size": 4096, "iterations": 100},
        "host": {"kernel": "6.18", "cores": 2},
    }
    b["threads"] = [{"role": "measuring", "cpu": 0}, {"role": "peer", "cpu": 0}]
    assert compare.settings_difference(typed(a), typed(b)) == {
        "placement": ("cross-cpu", "same-cpu"),
        "cpus": ("measuring@0,peer@1", "measuring@0,peer@0"),
        "size": (1, 4096),
        "host kernel": ("6.1", "6.18"),
    }
    assert compare.settings_difference(typed(a), typed(a)) == {}


def test_each_component_moves_by_what_was_added_to_it():
    rng = np.random.default_rng(5)
    n = 4000
    comps = pd.DataFrame({"user": rng.gamma(2.0, 500.0, n), "wakeup": rng.gamma(3.0, 3000.0, n)})
    slower = comps.assign(wakeup=comps["wakeup"] + 1200.0)
    base = compare.RunData("a", typed({}), (comps["user"] + comps["wakeup"]).to_numpy(), comps)
    other = compare.RunData("b", typed({}), (slower["user"] + slower["wakeup"]).to_numpy(), slower)
    r = compare.differences(base, other, ["user", "wakeup"])
    wake, user = r.components["wakeup"], r.components["user"]
    # the runs are taken as independent samples: intervals of their spread, around the shift
    assert wake.value == pytest.approx(1200.0) and 0 < wake.ci95[0] < 1200 < wake.ci95[1]
    assert user.value == 0.0 and user.ci95[0] < 0 < user.ci95[1]
    assert r.mean.value == pytest.approx(1200.0) and r.n == (n, n) and r.settings == {}
    lines = render_compare.difference_lines("a", {"rtt": [r]})
    at = lines.index("    components that moved, the typical iteration's largest shift first:")
    assert lines[at + 2].split() == ["wakeup", "+1.20", "us", "+1.20", "us", "[+0.97,", "+1.43]"]
    assert "    no difference shown in: user" in lines


def test_the_typical_shift_leads_and_a_tail_only_shift_follows():
    """Cross- vs same-CPU: preemption moves the mean a lot through a few iterations, the
    wake-up moves every iteration; the lesson is the wake-up (issue 28, point 2)."""
    rng = np.random.default_rng(7)
    n = 4000
    preempted = np.where(rng.random(n) < 0.02, 2_000_000.0, 0.0)  # rare and large: mean 40 us
    base = pd.DataFrame({"wakeup": rng.gamma(4.0, 500.0, n) + 18_000, "preempted": preempted})
    other = pd.DataFrame({"wakeup": rng.gamma(4.0, 500.0, n), "preempted": np.zeros(n)})
    a = compare.RunData("a", typed({}), base.sum(axis=1).to_numpy(), base)
    b = compare.RunData("b", typed({}), other.sum(axis=1).to_numpy(), other)
    r = compare.differences(a, b, ["wakeup", "preempted"])
    assert abs(r.components["preempted"].value) > abs(r.components["wakeup"].value)
    typical, tail, rest = r.ranked_components()
    assert typical == ["wakeup"] and tail == ["preempted"] and rest == []
    lines = render_compare.difference_lines("a", {"rtt": [r]})
    lead = next(i for i, line in enumerate(lines) if "typical iteration" in line)
    assert lines[lead + 2].split()[:2] == ["wakeup", "-18.0"] and "preempted" not in "".join(lines[: lead + 3])
    assert lines[lead + 3].startswith("    in the tail only (medians equal, means moved): preempted -")


def _runs_of(medians, per_run=200, seed=3):
    rng = np.random.default_rng(seed)
    lat = np.concatenate([m + rng.normal(0, 50, per_run) for m in medians])
    return lat, np.repeat(np.arange(len(medians)), per_run)


def test_the_effect_is_the_medians_of_run_medians_with_run_to_run_intervals():
    a_lat, a_runs = _runs_of([10_000, 10_400, 9_800])
    b_lat, b_runs = _runs_of([12_000, 12_600, 11_700])
    r = compare.differences(
        compare.RunData("a", typed({}), a_lat, None, a_runs), compare.RunData("b", typed({}), b_lat, None, b_runs), []
    )
    ma, mb = compare.run_medians(a_lat, a_runs), compare.run_medians(b_lat, b_runs)
    assert r.runs == (3, 3) and r.caveat is None
    assert r.run_medians.value == pytest.approx(np.median(mb) - np.median(ma))
    assert r.run_medians.ci95 == pytest.approx(compare.mean_difference(ma, mb).ci95)
    assert r.relative == pytest.approx(r.run_medians.value / np.median(ma))
    line = render_compare.difference_lines("a", {"rtt": [r]})[2]
    assert line.startswith("  b: median +") and "from the run-to-run variance (3 and 3 runs)" in line


def test_two_runs_a_side_state_that_run_to_run_variance_is_unknown():
    a_lat, a_runs = _runs_of([10_000, 10_400])
    b_lat, b_runs = _runs_of([12_000, 12_600])
    r = compare.differences(
        compare.RunData("a", typed({}), a_lat, None, a_runs), compare.RunData("b", typed({}), b_lat, None, b_runs), []
    )
    assert r.runs == (2, 2) and r.run_medians.ci95 is None
    lines = render_compare.difference_lines("a", {"rtt": [r]})
    assert lines[3].startswith("    caveat: 2 and 2 runs: the run-to-run variance is not known")


def test_settings_are_compared_as_they_ran():
    """A default placement that ran cross-CPU is --cross-cpu: no setting differs."""
    threads = [{"role": "measuring", "cpu": 0}, {"role": "peer", "cpu": 1}]
    asked = {"placement": "cross-cpu", "threads": threads, "params": {"placement": "cross-cpu", "cpus": [0, 1]}}
    default = {"placement": "cross-cpu", "threads": threads, "params": {"placement": None, "cpus": None}}
    assert compare.settings_difference(typed(asked), typed(default)) == {}


def test_an_interrupted_side_is_said_so():
    """n 24,636 beside 100,000 is no smaller sample by chance: the run was interrupted."""
    done = typed({"status": "complete", "params": {"iterations": 50000, "runs": 2}, "iterations_completed": 100000})
    cut = typed(
        {
            "status": "interrupted",
            "params": {"iterations": 50000, "runs": 2},
            "iterations_completed": 24636,
            "runs_completed": 0,
        }
    )
    lines = render_compare.incomplete_lines([("a", done), ("b", cut)])
    assert lines == [
        "note: b was interrupted: it measured 24,636 iterations of the 100,000 asked (0 of 2 runs complete); "
        "compare it as such"
    ]


def test_runs_that_share_no_component_are_not_called_untraced():
    """A merged round trip's parts against a run's components: both traced, nothing in common."""
    a = pd.DataFrame({"user": [1.0, 2.0]})
    b = pd.DataFrame({"server_user": [1.0, 2.0]})
    r = compare.differences(
        compare.RunData("a", typed({}), np.array([1.0, 2.0]), a),
        compare.RunData("b", typed({}), np.array([1.0, 2.0]), b),
        ["user", "server_user"],
    )
    lines = render_compare.difference_lines("a", {"rtt": [r]})
    assert r.both_traced and not r.components
    assert any("none in common" in x for x in lines) and not any("not both traced" in x for x in lines)
    r = compare.differences(
        compare.RunData("a", typed({}), np.array([1.0, 2.0]), a),
        compare.RunData("b", typed({}), np.array([1.0, 2.0]), None),
        ["user"],
    )
    assert any("not both traced" in x for x in render_compare.difference_lines("a", {"rtt": [r]}))
