"""model/compare.py: one rule for `ipctrace compare` and the report's comparison page, worked
out by hand."""

import pytest

from analysis.model.compare import comparison


def summary(**metrics):
    return {"metrics": metrics}


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
    assert a.median_ratio in (1.0, None) and a.label == "a" and b.stats is other


def test_a_metric_the_baseline_lacks_has_no_ratios():
    c = comparison([("a", summary(rtt=m(10, 10))), ("b", summary(rtt=m(20, 20), one_way=m(5, 5)))])
    assert list(c) == ["rtt", "one_way"]
    first, second = c["one_way"]
    assert first.stats is None and second.stats is not None
    assert (second.mean_ratio, second.median_ratio) == (None, None)
