"""The keeper's CPU budget (run/watch.CpuBudget, --keep-cpu): after a request it waits what
keeps its CPU time within its share of one CPU, from a clock injected here (each case worked
out by hand: wait = cpu / share - wall, none if negative), until the budget is lifted (the
program ended)."""

import os
import select

import pytest

from analysis.run.watch import CpuBudget


class Clock:
    """process_time and monotonic as the case sets them; each wait recorded, moving monotonic,
    and answering `lift` (the budget lifted during it)."""

    def __init__(self, lift: bool = False) -> None:
        self.cpu = self.now = 0.0
        self.waits: list[float] = []
        self.lift = lift

    def process_time(self) -> float:
        return self.cpu

    def monotonic(self) -> float:
        return self.now

    def wait(self, s: float) -> bool:
        self.waits.append(s)
        self.now += s
        return self.lift


@pytest.mark.parametrize(
    "share, cpu, wall, waited",
    [
        (0.1, 0.145, 0.150, 1.30),  # a kept request of 145 ms of CPU in 150 ms: 1.45 s in all
        (0.25, 0.100, 0.100, 0.30),  # 100 ms of CPU at 25 %: 400 ms in all
        (0.1, 0.010, 0.500, 0.0),  # it waited for its CPU longer than its share asks: no pause
        (0.5, 0.200, 0.400, 0.0),  # exactly its share
        (1.0, 0.300, 0.300, 0.0),  # --keep-cpu 100: no bound
    ],
)
def test_a_pause_keeps_the_share(share, cpu, wall, waited):
    clock = Clock()
    budget = CpuBudget(share, clock, clock.wait)
    clock.cpu, clock.now = 5.0, 100.0  # before the request
    budget.start()
    clock.cpu += cpu
    clock.now += wall
    assert budget.pause() == pytest.approx(waited)
    assert clock.waits == ([pytest.approx(waited)] if waited else [])
    # over the request and its pause, the CPU time is at most the share of the time passed
    assert cpu <= share * (wall + sum(clock.waits)) + 1e-9


@pytest.mark.parametrize("lift, waits", [(False, [0.1, 0.3]), (True, [0.1])])
def test_each_request_is_measured_from_its_own_start_until_the_budget_is_lifted(lift, waits):
    clock = Clock(lift)
    budget = CpuBudget(0.5, clock, clock.wait)
    for cpu in (0.1, 0.3):
        budget.start()
        clock.cpu += cpu
        clock.now += cpu
        budget.pause()
    # 0.1 s then 0.3 s of CPU at 50 %: a pause as long as each request's work; lifted during
    # the first, none after it
    assert clock.waits == [pytest.approx(w) for w in waits]


def test_closing_the_pipe_lifts_it():
    """The keeper's wait: select on the pipe the watch closes when the program ended. Closed,
    the pause of an hour (36 s of CPU at 1 %) ends at once: select finds the pipe ready."""
    clock = Clock()
    r, w = os.pipe()
    try:
        # at most 5 s a wait here: a pipe left open fails the test instead of holding it an hour
        budget = CpuBudget(0.01, clock, wait=lambda s: bool(select.select([r], [], [], min(s, 5.0))[0]))
        budget.start()
        clock.cpu += 36.0
        os.close(w)
        w = -1
        assert budget.pause() == pytest.approx(3600.0)
        assert budget.lifted
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
