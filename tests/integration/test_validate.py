"""`ipctrace validate`: its verdict rule on figures worked out by hand, and the real thing."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.model import breakdown as bd
from analysis.run import validate as cv
from conftest import needs_tracing


def figures(lat, **comps):
    """(latency, {component: ns}) with the components not given at 0."""
    return lat, {c: float(comps.get(c, 0)) for c in bd.COMPONENTS}


SPIN = cv.Case("spin", "", "same", [], ("user",), 20_000)
SYSCALLS = cv.Case("syscalls", "", "same", [], ("syscall", "entry"))
ON_BOUNDARY = cv.Case("syscalls", "", "same", [], ("syscall", "entry"), boundary=("user",))
OVERLAP = cv.Case("overlap", "", "cross", [], (), 500)
HOG = cv.Case("hog", "", "cross", [], ("preempted",), hog=True)

BASE = figures(4000, user=1000, syscall=2500, entry=500)


@pytest.mark.parametrize(
    "case, injected, cost, holds, why",
    [
        # the spin lands in user: +20 000 of +20 100 (tolerance 2 010); syscall +100 < 2 010
        (SPIN, figures(24100, user=21000, syscall=2600, entry=500), None, True, "within 2010 ns"),
        # half of it lands in preempted: user +10 000 against +20 000, preempted +10 000
        (
            SPIN,
            figures(24000, user=11000, syscall=2500, entry=500, preempted=10000),
            None,
            False,
            "user moved +10000 ns against the latency's +20000; preempted moved +10000 ns",
        ),
        # the latency moved by less than half what was injected: the injection did not happen
        (
            SPIN,
            figures(5000, user=2000, syscall=2500, entry=500),
            None,
            False,
            "the latency moved +1000 ns, less than half the 20000 ns injected",
        ),
        # two components together carry it: syscall +2 000 and entry +2 000 of +4 100 (tolerance 410)
        (SYSCALLS, figures(8100, user=1100, syscall=4500, entry=2500), 4000, True, "within 410 ns"),
        (
            SYSCALLS,
            figures(8100, user=1600, syscall=4500, entry=2000),
            4000,
            False,
            "syscall+entry moved +3500 ns against the latency's +4100; user moved +600 ns",
        ),
        # overlap: nothing may move beyond 300 ns
        (OVERLAP, figures(4100, user=1050, syscall=2550, entry=500), None, True, "within 300 ns"),
        (
            OVERLAP,
            figures(4500, user=1500, syscall=2500, entry=500),
            None,
            False,
            "the latency moved +500 ns; user moved +500 ns",
        ),
        # user on the entry boundary: +1 100 of +10 000 (11 %, under 20 %) counts as carried
        (
            ON_BOUNDARY,
            figures(14000, user=2100, syscall=7500, entry=4400),
            9000,
            True,
            "within 1000 ns; user +1100 ns on the entry boundary",
        ),
        # ... but +2 500 of +10 000 (25 %) is more than a calibrated boundary explains
        (
            ON_BOUNDARY,
            figures(14000, user=3500, syscall=7000, entry=3500),
            9000,
            False,
            "user moved +2500 ns, over 20% of the latency's +10000",
        ),
        # what the boundary does not hold still counts: wakeup +1 500 against 1 000
        (
            ON_BOUNDARY,
            figures(13000, user=1500, syscall=7000, entry=3000, wakeup=1500),
            8000,
            False,
            "syscall+entry+user moved +7500 ns against the latency's +9000; wakeup moved +1500 ns",
        ),
        # the hog: no cost known beforehand; moving by less than 1 us is no effect to attribute
        (
            HOG,
            figures(4500, user=1000, syscall=2500, entry=500, preempted=500),
            None,
            False,
            "the latency moved +500 ns: the injection had no effect to attribute",
        ),
        (
            HOG,
            figures(2_004_000, user=1000, syscall=2500, entry=500, preempted=1_900_000, wakeup=100_000),
            None,
            True,
            "within 200000 ns",
        ),
    ],
)
def test_verdict_by_hand(case, injected, cost, holds, why):
    v = cv.verdict(case, [BASE], [injected], cost)
    assert (v.holds, v.why) == (holds, why)
    assert v.latency_delta_ns == injected[0] - BASE[0]
    assert sum(v.component_deltas_ns.values()) == v.latency_delta_ns


def test_verdict_averages_the_rounds():
    v = cv.verdict(
        SPIN,
        [BASE, figures(5000, user=2000, syscall=2500, entry=500)],
        [figures(24000, user=21000, syscall=2500, entry=500), figures(25000, user=22000, syscall=2500, entry=500)],
    )
    assert v.latency_delta_ns == 20000 and v.component_deltas_ns["user"] == 20000 and v.holds


def test_cases_are_those_the_issue_names():
    names = {c.name: c for c in cv.cases()}
    assert set(names) == {
        "peer-spin",
        "peer-spin-cross-pipe",
        "peer-spin-cross-socketpair",
        "peer-spin-cross-unix-stream",
        "peer-spin-cross-tcp",
        "peer-syscalls",
        "measuring-spin",
        "cpu-hog",
        "peer-sleep",
    }
    assert names["measuring-spin"].expected == ()  # overlaps the peer's wake-up
    assert names["peer-sleep"].expected == ("blocked",) and names["cpu-hog"].expected == ("runqueue", "preempted")
    # issue 26: the peer spin across CPUs, where the socket's early write-space wake-up is in flight
    for w in ("pipe", "socketpair", "unix-stream", "tcp"):
        c = names[f"peer-spin-cross-{w}"]
        assert (c.workload, c.placement, c.expected, c.carried) == (w, "cross", ("user",), True)
    assert {c.name for c in cv.cases(quick=True)} == set(names) - {"peer-spin-cross-tcp", "peer-spin-cross-pipe"}


def test_program_cases_cover_every_channel_placement_and_way():
    every = cv.program_cases()
    assert len(every) == len({c.name for c in every}) == 16
    # --rtt where it numbers every round trip (descriptors that return data); markers everywhere
    assert {(c.channel, c.placement, c.iterations_from) for c in every} == {
        (ch, p, how)
        for ch in ("pipe", "unix", "tcp", "eventfd", "futex")
        for p in ("same", "cross")
        for how in ("rtt", "markers")
        if how == "markers" or ch in ("pipe", "unix", "tcp")
    }
    quick = cv.program_cases(quick=True)
    # --quick: both placements, both ways, the UNIX socket across CPUs by --rtt, a futex
    assert {c.placement for c in quick} == {"same", "cross"}
    assert {c.iterations_from for c in quick} == {"rtt", "markers"}
    assert "program-unix-cross-rtt" in {c.name for c in quick} and "futex" in {c.channel for c in quick}
    assert all(c.expected == ("user",) and c.spin_ns == 20_000 for c in every)


CROSS = cv.Case("cross", "", "cross", [], ("user",), 10_000, carried=True)
CROSS_BASE = figures(60_000, user=2500, syscall=7000, wakeup=40_000, runqueue=10_500)


@pytest.mark.parametrize(
    "injected, shares, holds, why",
    [
        # user +10 300 (tolerance 1 000); the latency +20 000: the spin made the waiting side's
        # early wake-up end before the answer, so it was woken again (wakeup +9 700): not judged
        (
            figures(80_000, user=12_800, syscall=7000, wakeup=49_700, runqueue=10_500),
            [0.998, 0.97],
            True,
            "within 1000 ns, 97.0% carry it",
        ),
        # issue 26's socketpair at a4345ca: user +3 700 of 10 000, 23 % of the iterations carried it
        (
            figures(70_000, user=6200, syscall=7000, wakeup=46_300, runqueue=10_500),
            [0.23],
            False,
            "user moved +3700 ns against the 10000 ns spun; 23.0% of the injected iterations hold 90 % of it "
            "(at least 90%)",
        ),
        # the mean recovers it but one run's path lost it in 15 % of its iterations
        (
            figures(70_000, user=12_500, syscall=7000, wakeup=40_000, runqueue=10_500),
            [0.99, 0.85],
            False,
            "85.0% of the injected iterations hold 90 % of it (at least 90%)",
        ),
    ],
)
def test_carried_verdict_by_hand(injected, shares, holds, why):
    v = cv.carried_verdict(CROSS, [CROSS_BASE], [injected], shares)
    assert (v.holds, v.why) == (holds, why)
    assert v.latency_delta_ns == injected[0] - CROSS_BASE[0] and v.tolerance_ns == 1000


PROGRAM = cv.ProgramCase("unix", "cross", "rtt", spin_ns=10_000)
NO_SPIN = figures(30_000, user=2000, syscall=5000, wakeup=20_000, runqueue=3000)


@pytest.mark.parametrize(
    "spun, closures, holds, why",
    [
        # user +10 200 of the 10 000 spun (tolerance 1 000); the waits moved (two runs): not judged
        (
            figures(58_000, user=12_200, syscall=5000, wakeup=37_800, runqueue=3000),
            [0.2, 0.5],
            True,
            "within 1000 ns, closure 0.50 %",
        ),
        # the spin missed: the path took the early wake-up instead of the server's spin
        (
            figures(40_000, user=5000, syscall=5000, wakeup=27_000, runqueue=3000),
            [0.1, 0.3],
            False,
            "user moved +3000 ns against the 10000 ns spun",
        ),
        # closure: on average 1.5 % of a round trip of a trace in no known state
        (
            figures(40_000, user=12_000, syscall=5000, wakeup=20_000, runqueue=2400, residual=600),
            [0.0, 1.5],
            False,
            "on average 1.50 % of a round trip in no known state (at most 1 %)",
        ),
        # a trace without any round trip has no closure to show: it cannot hold
        (
            figures(40_000, user=12_000, syscall=5000, wakeup=20_000, runqueue=3000),
            [0.0, None],
            False,
            "a trace found no round trip",
        ),
    ],
)
def test_program_verdict_by_hand(spun, closures, holds, why):
    v = cv.program_verdict(PROGRAM, [NO_SPIN], [spun], closures)
    assert (v.holds, v.why) == (holds, why)
    assert v.injected_ns == 10_000 and v.expected_component == "user" and v.tolerance_ns == 1000
    assert v.component_deltas_ns["user"] == spun[1]["user"] - 2000 and v.latency_delta_ns == spun[0] - 30_000
    assert v.closure_pct == max(c for c in closures if c is not None)


@needs_tracing
@pytest.mark.timing
def test_validate_quick_real_runs(ipctrace, tmp_path):
    """Every case of --quick, with real traced runs: each injection is found where it belongs,
    and each traced program's breakdown closes and holds its server's spin as user."""
    out = tmp_path / "v.json"
    r = ipctrace("validate", "--quick", "--json", out, "--rounds", "1", timeout=900)
    doc = json.loads(out.read_text())
    cases = {c["name"]: c for c in doc["cases"]}
    assert set(cases) == {c.name for c in [*cv.cases(quick=True), *cv.program_cases(quick=True)]}
    for c in cases.values():
        assert set(c) >= {
            "name",
            "injected_ns",
            "latency_delta_ns",
            "component_deltas_ns",
            "expected_component",
            "holds",
            "closure_pct",
        }
        assert set(c["component_deltas_ns"]) == set(bd.COMPONENTS)
    assert cases["peer-spin"]["latency_delta_ns"] > 15_000
    assert cases["peer-sleep"]["component_deltas_ns"]["blocked"] > 900_000
    hog = cases["cpu-hog"]["component_deltas_ns"]
    assert hog["runqueue"] + hog["preempted"] > 100_000
    for c in cv.program_cases(quick=True):
        # the spin is 20 us of the server's user time: no wait of the machine's makes it; but the
        # hypervisor's steal can take most iterations (a CI run: 1 919 of 2 000), and validate then
        # says so and does not judge: nor does this test
        if "too few to judge" in cases[c.name]["why"]:
            continue
        assert cases[c.name]["closure_pct"] is not None and cases[c.name]["component_deltas_ns"]["user"] > 10_000
    text = r.stdout + r.stderr
    assert "closure" in text and "program-unix-cross-rtt" in text
    # a run the hypervisor took most of is taken again once; where the host's steal took that one
    # too (a CI run's cpu-hog: 140 of 200 iterations), validate says so, does not judge the case
    # and exits 1: this test judges the others
    unjudged = {n for n, c in cases.items() if "too few to judge" in c["why"]}
    failing = [f"{n}: {c['why']}" for n, c in cases.items() if not c["holds"] and n not in unjudged]
    assert not failing and r.returncode == (1 if unjudged else 0), (failing, r.stdout[-2000:], r.stderr[-500:])


def test_validate_bad_options(ipctrace, tmp_path):
    for args, words in (
        (["--rounds", "0"], "--rounds must be at least 1"),
        (["--scale", "0"], "--scale must be at least 1"),
    ):
        r = ipctrace("validate", *args)
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"ipctrace: {words}"], r.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    r = ipctrace("validate", "--out", tmp_path / "full")
    # the same check as run's --out (runner.open_outdir), with the invoking user's rights under sudo
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"ipctrace: --out {tmp_path / 'full'} exists and is not empty; give a new directory"
    ], r.stderr


def test_program_verdict_without_figures():
    """A trace whose round trips could not be numbered gives no figures: the case fails, saying why."""
    why = "the trace found 1998 of 2000 round trips: which were spun is unknown"
    v = cv.program_verdict(PROGRAM, [], [], [0.0], [why])
    assert (v.holds, v.why) == (False, why)


def test_iterations_with_steal_on_their_path_are_left_out(make_results):
    """Four baseline and four spun iterations (20 us): one spun iteration lost 15 us of its spin to
    the hypervisor (steal). Over all, user would move +16.25 us; judged without it, +20 us."""
    d = make_results("r", [4000, 24000] * 4)
    rows = []
    for i in range(8):
        spun, hit = i % 2 == 1, i == 3
        comps = dict.fromkeys(bd.COMPONENTS, 0.0)
        comps.update(user=(6000.0 if hit else 21000.0) if spun else 1000.0, steal=15000.0 if hit else 0.0)
        comps["syscall"] = (24000.0 if spun else 4000.0) - comps["user"] - comps["steal"]
        rows.append({"run": 0, "iteration": i, "latency_ns": 24000 if spun else 4000, **comps})
    pd.DataFrame(rows).to_parquet(d / "breakdown.parquet")
    (lat0, c0), (lat1, c1) = cv.trimmed_means(d, every=2)
    assert (lat1 - lat0, c1["user"] - c0["user"], c1["steal"]) == (20000, 20000, 0)
    assert cv.stolen(d) == (1, 8)


def test_program_verdict_judges_the_components_expected():
    """Where the clock is a system call the spin is user, entry and syscall time: their sum is judged."""
    case = dataclasses.replace(PROGRAM, expected=("user", "entry", "syscall"))
    lat, comps = NO_SPIN
    spun = (lat + 10_000, {**comps, "user": comps["user"] + 6000, "syscall": comps["syscall"] + 4000})
    v = cv.program_verdict(case, [NO_SPIN], [spun], [0.1])
    assert v.holds, v.why
    assert not cv.program_verdict(PROGRAM, [NO_SPIN], [spun], [0.1]).holds


@pytest.mark.parametrize(
    "counts, holds, why",
    [
        ([(0, 2000)], True, "within"),
        ([(455, 2000)], True, "within; 455 of 2000 iterations with hypervisor steal on their path left out"),
        ([(10, 2000), (1001, 2000)], False, "1011 of 4000 iterations"),
    ],
)
def test_steal_left_out_is_said_and_too_much_fails(counts, holds, why):
    v = cv.Verdict("c", "", 20000.0, 20000.0, {}, "user", 2000.0, True, "within")
    cv.note_steal(v, counts)
    assert v.holds == holds and why in v.why
    if not holds:
        assert "too few to judge" in v.why


@pytest.mark.parametrize(
    "first, second, taken",
    [
        ((10, 200), None, ""),  # little steal: taken once
        ((140, 200), (20, 200), "-again"),  # most stolen: taken again, the second kept
        ((140, 200), (160, 200), ""),  # both mostly stolen: the one with less kept, and judged so
    ],
)
def test_a_run_the_hypervisor_took_is_taken_again(tmp_path, first, second, taken):
    steals = iter([first, second])
    took = []

    def take(d: Path) -> None:
        stolen, of = next(steals)
        d.mkdir()
        frame = {"iteration": np.arange(of), "latency_ns": np.full(of, 40_000.0)}
        frame |= {c: np.zeros(of) for c in bd.COMPONENTS}
        frame["steal"] = np.where(np.arange(of) < stolen, 5_000.0, 0.0)
        pd.DataFrame(frame).to_parquet(d / "breakdown.parquet")
        took.append(d.name)

    d = cv.taken_with_little_steal(take, tmp_path / "case-0")
    assert took == (["case-0"] if second is None else ["case-0", "case-0-again"])
    assert d == tmp_path / f"case-0{taken}"
