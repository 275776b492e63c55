"""The labs on a busy machine: results built by hand (summary.json's path figures and the explained
iteration's critical-path segments) for three cases — the lab's hog holding the CPU, a task foreign
to the lab holding it, neither — go through the labs' own figure functions and claims. The claims,
their tags and the "busy machine" notes must follow from those figures by the rules the sentences
state; and every percentage a lab prints must be rebuilt from the numbers it prints beside it."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis.model import lab as model
from analysis.model.explain import Segment
from analysis.render import lab as render
from analysis.run import lab as labs
from analysis.store.results import SCHEMA_VERSION
from analysis.store.summaryfile import RunSummary

US = 1000.0
HOG, NEIGHBOUR, TRACER = 7, 99, 5


def summary(median, mean, waits=(0.0, 0.0), holders=(), workload="pipe"):
    """summary.json of a traced run: its median and mean, the path's run queue and preempted
    means, and who held the CPU meanwhile ((comm, tid, ns per round trip, tracer?))."""
    rq, pre = waits
    total = sum(h[2] for h in holders) or 1.0
    return RunSummary.from_json(
        {
            "schema_version": SCHEMA_VERSION,
            "workload": workload,
            "primary_metric": "rtt",
            "metrics": {
                "rtt": {"n": 2000, "median": median, "mean": mean, "ci95_median": [median * 0.99, median * 1.01]}
            },
            "breakdown": {
                "rtt": {
                    "components": {
                        "syscall": {"mean": 10 * US},
                        "wakeup": {"mean": 2 * US},
                        "runqueue": {"mean": rq},
                        "preempted": {"mean": pre},
                    },
                    "preempted_by": [
                        {"tid": t, "comm": c, "pid": t, "tracer": tr, "ns_per_iteration": ns, "share": ns / total}
                        for c, t, ns, tr in holders
                    ],
                }
            },
            "trace": {
                "tasks": {
                    str(HOG): {"comm": "ipcbench", "pid": HOG},
                    str(NEIGHBOUR): {"comm": "python3"},
                    str(TRACER): {"comm": "ipctrace-reader"},
                }
            },
        }
    )


def seg(a, b, component, holder=0):
    return Segment(a, b, "B", 2, component, f"task {holder}" if holder else None, holder)


def done(key, s, path=None, hog=None):
    m = labs.Measure(key, key, "pipe", hog_nice=model.HOG_NICE if hog else None)
    x = SimpleNamespace(path=path, chain=[], how="the slowest of 400") if path is not None else None
    return labs.Done(m, Path("/nonexistent") / key, Path(key), s, x, hog)


def interference(case):
    """The interference lab's four runs in one of the cases."""
    if case == "hog":  # the hog takes the CPU from the peer; nothing else does
        alone = summary(50 * US, 52 * US)
        hog = summary(60 * US, 900 * US, (600 * US, 250 * US), [("ipcbench", HOG, 840 * US, False)])
        path = [
            seg(0, 20_000, "syscall"),
            seg(20_000, 1_820_000, "runqueue", HOG),
            seg(1_820_000, 1_900_000, "runqueue", TRACER),
        ]
    elif case == "foreign":  # a busy loop on the peer's CPU: it holds the CPU, alone and beside the hog
        alone = summary(700 * US, 900 * US, (800 * US, 40 * US), [("python3", NEIGHBOUR, 780 * US, False)])
        hog = summary(
            74 * US,
            300 * US,
            (147 * US, 20 * US),
            [("python3", NEIGHBOUR, 140 * US, False), ("ipcbench", HOG, 86.7, False)],
        )
        path = [
            seg(0, 2_778_000, "runqueue", NEIGHBOUR),
            seg(2_778_000, 2_800_000, "runqueue", HOG),
            seg(2_800_000, 2_900_000, "preempted", HOG),
        ]
    else:  # neither: a quiet machine, the tracer's reader the only other task on the path
        alone = summary(50 * US, 52 * US, (1 * US, 0.0), [("ipctrace-reader", TRACER, 0.9 * US, True)])
        hog = summary(51 * US, 53 * US, (1 * US, 0.0), [("ipctrace-reader", TRACER, 0.9 * US, True)])
        path = [seg(0, 40_000, "syscall"), seg(40_000, 41_000, "runqueue", TRACER)]
    nice = summary(55 * US, 60 * US, (5 * US, 0.0), [("ipcbench", HOG + 1, 4 * US, False)])
    fifo = summary(49 * US, 50 * US, (0.5 * US, 0.0), [("ipcbench", HOG + 2, 0.2 * US, False)])
    return {
        "alone": done("alone", alone),
        "hog": done("hog", hog, path, HOG),
        "nice": done("nice", nice, None, HOG + 1),
        "fifo": done("fifo", fifo, None, HOG + 2),
    }


def answer(lab_name, d):
    """What run_lab computes of the runs: the claims (marked) and the busy-machine notes."""
    lab = labs.by_name(lab_name)
    figures = lab.figures(d)
    found = model.disturbances(
        {k: x.figures() for k, x in d.items()}, {k: {x.hog_tid} for k, x in d.items() if x.hog_tid}
    )
    claims = model.mark_beside(lab.claims(figures), found)
    return claims, [model.disturbance_claim(x) for x in found], found


def test_the_hog_holding_the_cpu():
    claims, notes, found = answer("interference", interference("hog"))
    assert not found and not notes and not any(c.beside for c in claims)
    # 840 us per round trip against a tenth of 50 us: it waits; 4 us at nice 19 < half of 840; 0.2 us < a fifth
    assert [c.holds for c in claims] == [True, True, True, True]
    # explain's path: the hog 1.80 ms in the run queue, the tracer 80 us: the culprit is the hog
    assert (
        "explain names the culprit: the slowest iteration with the hog shows ipcbench (tid 7) holding" in claims[3].text
    )
    assert "1.80 ms in all" in claims[3].text


def test_a_foreign_task_holding_the_cpu():
    claims, notes, found = answer("interference", interference("foreign"))
    # python3 held 780 of the 840 us the alone run waited (93 %), 140 of the hog run's 167 us (84 %)
    assert [(x.run, x.holder.tid) for x in found] == [("alone", NEIGHBOUR), ("hog", NEIGHBOUR)]
    assert "A neighbour took the CPU in run alone: python3 (tid 99), a task foreign to this lab" in notes[0].text
    assert "held it for 780 µs per round trip on average, 93 % of the 840 µs" in notes[0].text
    assert "that run's median is 700 µs" in notes[0].text
    # every claim compares against the disturbed runs and says so
    assert all(c.beside == ("alone", "hog") for c in claims)
    # the hog held 86.7 ns a round trip: under a tenth of the (disturbed) alone median, so not seen
    assert not claims[0].holds and "held the CPU for 86.7 ns" in claims[0].text and "70.0 µs" in claims[0].text
    # explain's path shows python3 holding 2.78 ms in the run queue, the hog 22 us: not the hog
    last = claims[3]
    assert not last.holds and "names the culprit" not in last.text
    assert "shows python3 (tid 99) holding the CPU longest while it waited, 2.78 ms in all" in last.text
    assert "the hog ipcbench (tid 7) 22.0 µs" in last.text
    for c in claims + notes:
        assert_every_percent_rebuilt(c)


def test_neither_a_quiet_machine():
    claims, notes, found = answer("interference", interference("neither"))
    # the tracer's reader held nearly all of the waits, but it is the probe effect, not a neighbour
    assert not found and not notes
    assert [c.holds for c in claims] == [False, False, False, False]
    assert "never waited for a CPU another task held" not in claims[3].text
    assert "ipctrace-reader (tid 5)" in claims[3].text  # the only holder on the path, and not the hog


def test_a_foreign_task_below_the_share_is_not_named():
    # the neighbour held 20 % of the waits: not more than the rule's 20 %
    s = summary(50 * US, 60 * US, (10 * US, 0.0), [("python3", NEIGHBOUR, 2 * US, False)])
    assert model.disturbances({"x": model.run_figures("x", s)}, {}) == []
    s = summary(50 * US, 60 * US, (10 * US, 0.0), [("python3", NEIGHBOUR, 3 * US, False)])
    assert [d.holder.name for d in model.disturbances({"x": model.run_figures("x", s)}, {})] == ["python3 (tid 99)"]
    # 30 % of 100 ns of waits is no disturbance of a 50 us round trip (the floor)
    s = summary(50 * US, 60 * US, (100.0, 0.0), [("python3", NEIGHBOUR, 30.0, False)])
    assert model.disturbances({"x": model.run_figures("x", s)}, {}) == []


def same_cross(foreign):
    holders = [("python3", NEIGHBOUR, 30 * US, False)] if foreign else []
    same = summary(
        40 * US if foreign else 10 * US,
        45 * US if foreign else 11 * US,
        (32 * US if foreign else 0.5 * US, 0.0),
        holders,
    )
    cross = summary(60 * US, 62 * US, (10 * US, 0.0))
    return {"same": done("same", same), "cross": done("cross", cross)}


@pytest.mark.parametrize("foreign", [False, True])
def test_same_vs_cross_beside_a_neighbour(foreign):
    d = same_cross(foreign)
    claims, notes, found = answer("same-vs-cross", d)
    assert [x.run for x in found] == (["same"] if foreign else [])
    outcome = labs.Outcome(labs.by_name("same-vs-cross"), True, None, claims, d, 1.0, Path("lab"), notes)
    text = render.text(outcome)
    words = text.split("Answer", 1)[1].split("Exercises:", 1)[0]
    assert ("neighbour" in words) is foreign
    if foreign:
        assert "busy machine: A neighbour took the CPU in run same: python3 (tid 99)" in words
        assert words.count("; compares run same, which a neighbour disturbed]") == len(claims)
    # one line a claim starts with its tag; the busy-machine notes are not claims
    assert len([x for x in words.splitlines() if x.strip().startswith("[")]) == len(claims)
    # the evidence table says which of its columns are means
    assert "wake-up + run queue (mean)" in text and "syscall time (mean)" in text
    for c in claims + notes:
        assert_every_percent_rebuilt(c)


def test_the_quick_counts_match_the_readme():
    """README says --quick runs 2,000 iterations a run, except the runs it names."""
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    said = re.search(r"`--quick` \(([^)]*)\)", readme.split("### For a course", 1)[1]).group(1)
    said = " ".join(said.split())
    for lab in labs.LABS:
        fewer = [(m.key, labs.options(m, True).iterations) for m in lab.plan(True)]
        fewer = [(k, n) for k, n in fewer if n != labs.QUICK["iterations"]]
        if fewer:
            listed = f"{lab.name} " + ", ".join(f"{k} {n:,}" for k, n in fewer)
            assert listed in said, f"README's --quick does not say {listed!r}: {said!r}"
        else:
            assert lab.name not in said
    assert said.startswith(f"{labs.QUICK['iterations']:,} iterations a run, one run")


# --- every percentage rebuilt from the numbers printed beside it -------------------------

UNITS = {"ns": 1.0, "µs": 1e3, "ms": 1e6, "s": 1e9}


def interval(q):
    """The values a quoted figure may have had, from how it reads (its last digit's half)."""
    text = q.show()
    m = re.match(r"(-?[\d,]+)(?:\.(\d+))?\s*(ns|µs|ms|s|×|%)?", text)
    whole, frac, unit = m.group(1).replace(",", ""), m.group(2) or "", m.group(3)
    v = float(f"{whole}.{frac}" if frac else whole)
    half = 0.5 * 10 ** -len(frac)
    scale = UNITS.get(unit, 1.0) if unit not in ("%",) else 0.01
    return (v - half) * scale, (v + half) * scale


def _div(a, b):
    if b[0] <= 0:
        return None
    lo = min(a[0] / b[0], a[0] / b[1], a[1] / b[0], a[1] / b[1])
    hi = max(a[0] / b[0], a[0] / b[1], a[1] / b[0], a[1] / b[1])
    return lo, hi


CONSTANTS = {"level", "rule", "tolerance"}  # the rule's own figures, not measured ones


def assert_every_percent_rebuilt(c):
    """Each percentage a claim prints is a/b, (a - b)/d or (a + b)/d of figures it prints."""
    nums = [interval(q) for k, q in c.quoted.items() if q.kind in ("time", "count")]
    for name, q in c.quoted.items():
        if q.kind != "percent" or name in CONSTANTS:
            continue
        p = interval(q)
        found = False
        for i, a in enumerate(nums):
            for j, b in enumerate(nums):
                if i == j:
                    continue
                cands = [_div(a, b)]
                for k, d in enumerate(nums):
                    if k not in (i, j):
                        cands += [_div((a[0] - b[1], a[1] - b[0]), d), _div((a[0] + b[0], a[1] + b[1]), d)]
                if any(x and x[0] <= p[1] and p[0] <= x[1] for x in cands):
                    found = True
                    break
            if found:
                break
        assert found, f"{q.show()} ({name}) cannot be rebuilt from the figures printed in {c.text!r}"


def every_lab_claim():
    """The claims of the hand-made figures of tests/unit/model/test_lab.py and of this file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("t_lab", Path(__file__).parents[1] / "model" / "test_lab.py")
    t = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t)
    out = []
    out += model.same_vs_cross_claims(model.SameCross(t.SAME, t.CROSS))
    out += model.same_vs_cross_claims(model.SameCross(t.SAME, t.CROSS_NOISY))
    out += model.primitives_claims(model.Primitives(t.LADDER))
    busy = t.run(median=50 * US, components={"wakeup": 20 * US}, side_time={"peer": (26.5 * US, 50 * US)})
    poll = t.run(median=1 * US, components={"user": 1 * US}, side_time={"peer": (0.0, 1 * US)})
    out += model.idle_and_polling_claims(model.IdlePolling(busy, busy, poll, 1000))
    pipe = t.run(median=50 * US, mean=80 * US, iqr={"mean": 52 * US, "removed": 30})
    out += model.pitfalls_claims(model.Pitfalls(1, 1, 200, 90 * US, 20, 50 * US, pipe))
    for case in ("hog", "foreign", "neither"):
        claims, notes, _ = answer("interference", interference(case))
        out += claims + notes
    for foreign in (False, True):
        claims, notes, _ = answer("same-vs-cross", same_cross(foreign))
        out += claims + notes
    return out


def test_every_printed_percentage_is_rebuilt_from_printed_numbers():
    claims = every_lab_claim()
    assert sum(q.kind == "percent" for c in claims for q in c.quoted.values()) >= 10
    for c in claims:
        assert_every_percent_rebuilt(c)
