"""The keeper's CPU budget (run/watch.CpuBudget, --keep-cpu): after a request it sleeps what
keeps its CPU time within its share of one CPU, from a clock injected here (each case worked
out by hand: sleep = cpu / share - wall, none if negative)."""

import pytest

from analysis.run.watch import CpuBudget


class Clock:
    """process_time and monotonic as the case sets them; sleep recorded, and moving monotonic."""

    def __init__(self) -> None:
        self.cpu = self.now = 0.0
        self.slept: list[float] = []

    def process_time(self) -> float:
        return self.cpu

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


@pytest.mark.parametrize(
    "share, cpu, wall, sleep",
    [
        (0.1, 0.145, 0.150, 1.30),  # a kept request of 145 ms of CPU in 150 ms: 1.45 s in all
        (0.25, 0.100, 0.100, 0.30),  # 100 ms of CPU at 25 %: 400 ms in all
        (0.1, 0.010, 0.500, 0.0),  # it waited for its CPU longer than its share asks: no pause
        (0.5, 0.200, 0.400, 0.0),  # exactly its share
        (1.0, 0.300, 0.300, 0.0),  # --keep-cpu 100: no bound
    ],
)
def test_a_pause_keeps_the_share(share, cpu, wall, sleep):
    clock = Clock()
    budget = CpuBudget(share, clock)
    clock.cpu, clock.now = 5.0, 100.0  # before the request
    budget.start()
    clock.cpu += cpu
    clock.now += wall
    assert budget.pause() == pytest.approx(sleep)
    assert clock.slept == ([pytest.approx(sleep)] if sleep else [])
    # over the request and its pause, the CPU time is at most the share of the time passed
    assert cpu <= share * (wall + sum(clock.slept)) + 1e-9


def test_each_request_is_measured_from_its_own_start():
    clock = Clock()
    budget = CpuBudget(0.5, clock)
    for cpu in (0.1, 0.3):
        budget.start()
        clock.cpu += cpu
        clock.now += cpu
        budget.pause()
    # 0.1 s then 0.3 s of CPU at 50 %: a pause as long as each request's work
    assert clock.slept == [pytest.approx(0.1), pytest.approx(0.3)]
