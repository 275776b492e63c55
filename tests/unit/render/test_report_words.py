"""What the report says in words follows from the figures beside it: a trace that lost no record
to a full buffer but missed context switches is not called one that lost nothing."""

import pytest

from analysis.render import report
from analysis.store.results import SCHEMA_VERSION
from analysis.store.summaryfile import RunSummary


def summary(drops):
    return RunSummary.from_json(
        {"schema_version": SCHEMA_VERSION, "metrics": {}, "trace": {"drops": drops, "attach": {"sys_enter": "tp_btf"}}}
    )


@pytest.mark.parametrize(
    "drops, said, not_said",
    [
        ({"total": 0, "switches_missed": 0, "recursion_misses": 0}, "No events were lost.", "warn"),
        ({"total": 0, "switches_missed": 235}, "235 context switches the probes did not see", "No events were lost"),
        ({"total": 0, "recursion_misses": 3}, "3 runs of the probes the kernel skipped", "No events were lost"),
        ({"total": 12, "per_cpu": [12, 0]}, "12 events were lost", "No events were lost"),
    ],
)
def test_the_trace_section_says_what_was_lost(drops, said, not_said):
    html = report.trace_section(summary(drops))
    assert said in html and not_said not in html
