"""Which of a step's requests the watch breaks down for the minute's mean components
(run/watch.component_sample): all of a small step; of a larger one, runs of requests back to
back spread over it (a breakdown reads the events around what it breaks down)."""

import pytest

from analysis.run.watch import component_sample


@pytest.mark.parametrize(
    "n, size, blocks, want",
    [
        (5, 8, 2, [0, 1, 2, 3, 4]),
        (8, 8, 2, list(range(8))),
        (20, 8, 2, [0, 1, 2, 3, 16, 17, 18, 19]),
        (21, 6, 3, [0, 1, 9, 10, 19, 20]),
        (0, 8, 2, []),
    ],
)
def test_component_sample(n, size, blocks, want):
    assert component_sample(n, size, blocks).tolist() == want
