"""The keeper's CPU share (run/watch.CpuShare, --keep-cpu): a piece of work of c seconds of CPU
moves the moment the next may start c / share on, from that moment or from when the piece began
if later; each case worked out by hand (owed = began + c / share - now, none if negative)."""

import pytest

from analysis.run.watch import CpuShare


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "share, cpu, wall, owed",
    [
        (0.1, 0.145, 0.150, 1.30),  # a request written whole in 145 ms of CPU and 150 ms: 1.45 s in all
        (0.25, 0.100, 0.100, 0.30),  # 100 ms of CPU at 25 %: 400 ms in all
        (0.1, 0.010, 0.500, 0.0),  # it waited for its CPU longer than its share asks: nothing owed
        (0.5, 0.200, 0.400, 0.0),  # exactly its share
        (1.0, 0.300, 0.300, 0.0),  # --keep-cpu 100: no bound
    ],
)
def test_a_piece_of_work_owes_its_share(share, cpu, wall, owed):
    clock = Clock()
    budget = CpuShare(share, clock)
    clock.now = 100.0
    budget.spend(cpu, began=100.0)
    clock.now += wall
    assert budget.owed_s() == pytest.approx(owed)
    # over the piece and what it owes, the CPU time is at most the share of the time passed
    assert cpu <= share * (wall + budget.owed_s()) + 1e-9


def test_pieces_back_to_back_owe_their_sum_and_a_lifted_share_nothing():
    clock = Clock()
    budget = CpuShare(0.5, clock)
    budget.spend(0.1, began=0.0)  # owed until 0.2
    clock.now = 0.1
    budget.spend(0.3, began=0.1)  # began while owing: from 0.2 on, 0.6 more
    assert budget.owed_s() == pytest.approx(0.7)  # 0.4 s of CPU in 0.8 s: 50 %
    clock.now = 5.0
    assert budget.owed_s() == 0.0
    budget.spend(0.1, began=5.0)  # from when it began, not from the past owed moment
    assert budget.owed_s() == pytest.approx(0.2)
    budget.lifted = True  # the program ended
    assert budget.owed_s() == 0.0
    budget.spend(10.0, began=5.0)
    assert budget.owed_s() == 0.0
