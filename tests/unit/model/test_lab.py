"""model/lab.py: each lab's claims from figures worked out by hand, one set where the textbook's
effect shows and one where it does not; and every number a claim's text shows is one of the
figures it quotes."""

import re
from types import SimpleNamespace

import pytest

from analysis.model import lab
from analysis.model.lab import Quantity, RunFigures
from analysis.store.results import SCHEMA_VERSION
from analysis.store.summaryfile import RunSummary

US = 1000.0


def typed(d):
    """A RunSummary of the fields of summary.json given."""
    return RunSummary.from_json({"schema_version": SCHEMA_VERSION, **d})


def run(label="r", workload="pipe", median=10 * US, mean=None, ci=None, **kw):
    return RunFigures(label, workload, median, median if mean is None else mean, 1000, ci, **kw)


def numbers(text):
    """The numbers a text shows, as written (thousands separators kept); not digits that are part
    of a name (L41, SCHED_FIFO's priority is given as a number elsewhere)."""
    return re.findall(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?!\w)", text)


def assert_every_number_quoted(claims):
    for c in claims:
        shown = {n for q in c.quoted.values() for n in numbers(q.show())}
        stray = [n for n in numbers(c.text) if n not in shown]
        assert not stray, f"{stray} in {c.text!r} are none of its figures {c.quoted}"


@pytest.mark.parametrize(
    "q, text",
    [
        (Quantity(57_300), "57.3 µs"),
        (Quantity(6_840), "6.84 µs"),
        (Quantity(123), "123 ns"),
        (Quantity(0), "0 ns"),
        (Quantity(2_500_000), "2.50 ms"),
        (Quantity(8.42, "ratio"), "8.4×"),
        (Quantity(0.634, "percent"), "63 %"),
        (Quantity(65536, "bytes"), "64 KiB"),
        (Quantity(1 << 20, "bytes"), "1 MiB"),
        (Quantity(100, "bytes"), "100 B"),
        (Quantity(12345, "count"), "12,345"),
        (Quantity(2.5e9, "rate"), "2.50 GB/s"),
        (Quantity(0.0512, "per_byte"), "0.0512 ns"),
    ],
)
def test_quantities_read_as_written(q, text):
    assert q.show() == text


@pytest.mark.parametrize(
    "share, rule, text",
    [
        (0.54, 0.2, "54 %"),  # far from the rule: whole percents
        (0.2006, 0.2, "20.1 %"),  # "20 %" would read as the rule itself
        (0.20004, 0.2, "20.00 %"),  # two decimals at most
        (0.2, 0.2, "20 %"),  # the rule's own figure
        (0.1996, 0.2, "19.96 %"),  # below it, though it rounds to it
    ],
)
def test_a_share_beside_its_rule_does_not_read_as_the_rule(share, rule, text):
    assert lab.P_against(share, rule).show() == text


# --- same-vs-cross ------------------------------------------------------------------

# one CPU: 10 us, of which 0.5 us waking; two CPUs: 60 us, of which 30 + 10 waking:
# the waking adds 40 - 0.5 = 39.5 of the 50 us difference (79 %)
SAME = run("one CPU", median=10 * US, ci=(9.9 * US, 10.1 * US), components={"syscall": 7 * US, "wakeup": 500})
CROSS = run(
    "two CPUs",
    median=60 * US,
    ci=(59 * US, 61 * US),
    components={"syscall": 15 * US, "wakeup": 30 * US, "runqueue": 10 * US},
)
# two CPUs, but as fast as one and mostly preempted by others
CROSS_NOISY = run(
    "two CPUs",
    median=10.05 * US,
    ci=(9.95 * US, 10.2 * US),
    mean=40 * US,
    components={"syscall": 5 * US, "wakeup": 2 * US, "preempted": 30 * US},
)


def test_same_vs_cross_as_the_textbook_says():
    c = lab.same_vs_cross_claims(lab.SameCross(SAME, CROSS))
    assert [x.holds for x in c] == [True, True, True]
    assert "6.0× slower" in c[0].text and "60.0 µs against 10.0 µs" in c[0].text
    assert "79 %" in c[1].text and "50.0 µs" in c[1].text
    assert "500 ns of its 10.0 µs" in c[2].text
    assert_every_number_quoted(c)


def test_same_vs_cross_says_what_it_saw_instead():
    c = lab.same_vs_cross_claims(lab.SameCross(SAME, CROSS_NOISY))
    assert [x.holds for x in c] == [False, False, True]
    assert "not clearly slower" in c[0].text and "overlap" in c[0].text
    # 30 us difference of the means, waking 2 - 0.5 = 1.5 us of it (5 %); preempted grew by 30 us
    assert "5 %" in c[1].text and "preempted (30.0 µs)" in c[1].text
    assert_every_number_quoted(c)


def test_same_vs_cross_prefers_the_explained_median_iterations():
    """Components of the median iterations add up to them; the means follow the tail."""
    same = run(median=10 * US, components={"preempted": 50 * US}, typical_ns=10 * US, typical={"syscall": 10 * US})
    cross = run(
        median=50 * US,
        components={"preempted": 500 * US},
        typical_ns=50 * US,
        typical={"syscall": 10 * US, "wakeup": 30 * US, "runqueue": 10 * US},
    )
    c = lab.same_vs_cross_claims(lab.SameCross(same, cross))[1]
    assert c.holds and "100 %" in c.text and "median iteration" in c.text


# --- primitives ------------------------------------------------------------------------


def rung(label, workload, median, calls, wake):
    return run(label, workload, median, syscalls=calls, components={"syscall": median - wake, "wakeup": wake})


LADDER = [
    rung("spin", "spin-tas-threads", 0.4 * US, 0, 0),
    rung("futex", "futex", 20 * US, 2, 10 * US),
    rung("pipe", "pipe", 30 * US, 4, 12 * US),
    rung("unix", "unix-stream", 35 * US, 4, 12 * US),
    rung("tcp", "tcp", 60 * US, 4, 15 * US),
]


def test_primitives_as_the_textbook_says():
    c = lab.primitives_claims(lab.Primitives(LADDER))
    assert [x.holds for x in c] == [True, True, True, True]
    assert "400 ns with 0 system calls, against 20.0 µs for futex" in c[0].text
    assert "spin 0, futex 2, pipe 4, unix 4, tcp 4." in c[1].text  # the counts the question asks for
    # ranks of calls 0, 2, 4, 4, 4 are 0, 1, 3, 3, 3; of the medians 0..4: r = 8 / sqrt(8 * 10) = 0.89
    assert "0.89" in c[1].text
    assert "1.7× a UNIX socket" in c[2].text
    # waking shares 0.5, 0.4, 0.343, 0.25: the lower middle is unix's 12 of 35 us, 0.343
    assert "34 % of a typical one's round trip (unix, the middle" in c[3].text and "12.0 µs of 35.0 µs" in c[3].text
    assert_every_number_quoted(c)


def test_primitives_when_the_ladder_is_upside_down():
    upside = [
        rung("spin", "spin-tas-threads", 90 * US, 0, 50 * US),  # a spinner that lost its CPU
        rung("futex", "futex", 50 * US, 2, 5 * US),
        rung("pipe", "pipe", 40 * US, 4, 5 * US),
        rung("unix", "unix-stream", 35 * US, 4, 5 * US),
        rung("tcp", "tcp", 30 * US, 6, 5 * US),
    ]
    c = lab.primitives_claims(lab.Primitives(upside))
    assert [x.holds for x in c] == [False, False, False, False]
    assert "is not the cheapest here: tcp is, at 30.0 µs" in c[0].text
    assert "-1.00" in c[1].text or "-0.9" in c[1].text
    assert_every_number_quoted(c)


# --- size-and-copy ---------------------------------------------------------------------


def sizes(points):
    return [lab.SizePoint(s, t) for s, t in points]


# 10 us up to 4 KiB, then 0.1 ns a byte to 64 KiB, then 0.3 ns a byte beyond
PIPE = sizes([(1, 10 * US), (4096, 10.4 * US), (65536, 16.55 * US), (1 << 20, 327.5 * US)])
UNIX = sizes([(1, 12 * US), (1 << 20, 400 * US)])


def test_size_and_copy_as_the_textbook_says():
    f = lab.SizeCopy(PIPE, UNIX, 65536, ns_per_byte=0.3, ns_per_byte_ci=(0.25, 0.35))
    c = lab.size_and_copy_claims(f)
    assert [x.holds for x in c] == [True, True, True, True]
    assert "of 1 B takes 10.0 µs, of 4 KiB 10.4 µs (1.0×)" in c[0].text
    assert "0.300 ns per round trip" in c[1].text and "13.3 GB/s" in c[1].text  # 4 bytes copied per byte
    # below: (16550 - 10400) / 61440 = 0.1001; above: (327500 - 16550) / 983040 = 0.3163
    assert "0.100 ns below it" not in c[2].text and "a byte adds 0.100 ns, above it 0.316 ns" in c[2].text
    # 1 MiB over half of 327.5 us: 6.40 GB/s; the socket: 5.24 GB/s
    assert "6.40 GB/s" in c[3].text and "5.24 GB/s" in c[3].text and "1.2×" in c[3].text
    assert_every_number_quoted(c)


def test_size_and_copy_without_a_bend_nor_a_slope():
    flat = sizes([(1, 10 * US), (4096, 20 * US), (65536, 30 * US), (1 << 20, 40 * US)])
    f = lab.SizeCopy(
        flat, sizes([(1, 5 * US), (1 << 20, 30 * US)]), 65536, ns_per_byte=0.01, ns_per_byte_ci=(-0.02, 0.04)
    )
    c = lab.size_and_copy_claims(f)
    assert [x.holds for x in c] == [False, False, False, False]
    assert "(2.0×)" in c[0].text and "down to -0.0200 ns" in c[1].text
    assert "unlike L41" in c[3].text and "the socket is 1.3× faster" in c[3].text  # 40 / 30
    assert_every_number_quoted(c)


def streams(points):
    return [lab.StreamPoint(s, t) for s, t in points]


@pytest.mark.parametrize(
    "pipe, unix, holds, said",
    [
        # 4096 B / 4 us = 1.02 GB/s, 65536 B / 32 us = 2.05 GB/s (1 MiB is beyond the buffer: not
        # the pipe's best); the socket's 64 KiB: 65536 / 40 us = 1.64 GB/s
        (
            [(4096, 4 * US), (65536, 32 * US), (1 << 20, 900 * US)],
            [(65536, 40 * US)],
            [True, True],
            [
                "1.02 GB/s in writes of 4 KiB, 2.05 GB/s in writes of 64 KiB",
                "pipe (2.05 GB/s) beats the UNIX socket (1.64 GB/s)",
            ],
        ),
        # 64 KiB writes at 80 us: 819 MB/s, below the 4 KiB writes' rate and the socket's
        (
            [(4096, 4 * US), (65536, 80 * US)],
            [(4096, 5 * US), (65536, 40 * US)],
            [False, False],
            ["1.02 GB/s in writes of 4 KiB and 819 MB/s", "UNIX socket (1.64 GB/s) beats the pipe (819 MB/s)"],
        ),
    ],
)
def test_size_and_copy_bandwidth_mode(pipe, unix, holds, said):
    f = lab.SizeCopy([], [], 65536, pipe_stream=streams(pipe), unix_stream=streams(unix))
    c = lab.size_and_copy_claims(f)
    assert [x.holds for x in c] == holds
    assert all(text in x.text for text, x in zip(said, c))
    assert_every_number_quoted(c)


# --- interference ----------------------------------------------------------------------

ALONE = run("alone", median=50 * US)
HOG = run("hog", median=60 * US, mean=900 * US)
NICE = run("nice", median=80 * US)
FIFO = run("fifo", median=45 * US)


def test_interference_as_the_textbook_says():
    # the hog holds the CPU 850 us a round trip at nice -10, 30 us at nice 19, 1 us against SCHED_FIFO
    f = lab.Interference(
        ALONE, HOG, NICE, FIFO, 850 * US, 30 * US, 1 * US, "ipcbench", 7, True, ("ipcbench", 7, 2000 * US), 2000 * US
    )
    c = lab.interference_claims(f)
    assert [x.holds for x in c] == [True, True, True, True]
    assert "nice -10" in c[0].text and "850 µs of each" in c[0].text and "from 50.0 µs to 900 µs" in c[0].text
    assert "(50.0 µs to 60.0 µs)" in c[0].text
    assert "30.0 µs per round trip instead of 850 µs" in c[1].text and "637× less" in c[1].text  # 9548 / 15
    assert "1.00 µs per round trip" in c[2].text
    assert "explain names the culprit: the slowest iteration with the hog shows ipcbench (tid 7) holding" in c[3].text
    assert_every_number_quoted(c)


def test_interference_when_the_hog_does_not_show():
    f = lab.Interference(
        ALONE, ALONE, HOG, HOG, 2 * US, 2 * US, 2 * US, "ipcbench", 7, False, ("cc1", 9, 300 * US), 1 * US
    )
    c = lab.interference_claims(f)
    assert [x.holds for x in c] == [False, False, False, False]
    assert "did not make the round trip wait here" in c[0].text and "did not make the hog give way" in c[1].text
    assert "still held the CPU for 2.00 µs" in c[2].text
    assert "does not point at the hog: its critical path shows cc1 (tid 9)" in c[3].text
    assert "names the culprit" not in c[3].text
    assert_every_number_quoted(c)


def test_interference_without_an_explained_iteration_says_so():
    f = lab.Interference(ALONE, HOG, NICE, FIFO, 850 * US, 30 * US, 1 * US, "ipcbench", 7, None)
    last = lab.interference_claims(f)[-1]
    assert not last.holds and "could not be explained" in last.text


def test_preempted_ns_finds_the_hog_by_tid():
    holders = [{"tid": 5, "ns_per_iteration": 10.0, "share": 0.7}, {"tid": 7, "ns_per_iteration": 3.5, "share": 0.3}]
    s = typed(
        {
            "primary_metric": "rtt",
            "metrics": {"rtt": {}},
            "breakdown": {"rtt": {"components": {}, "preempted_by": holders}},
        }
    )
    assert lab.preempted_ns(s, 7) == 3.5 and lab.preempted_ns(s, 8) == 0.0


# --- idle-and-polling -------------------------------------------------------------------


def test_idle_and_polling_as_the_textbook_says():
    busy = run(median=50 * US, components={"wakeup": 20 * US}, side_time={"peer": (26.5 * US, 50 * US)})
    paused = run(median=90 * US, components={"wakeup": 60 * US}, side_time={"peer": (81 * US, 90 * US)})
    poll = run(median=1 * US, components={"user": 1 * US}, side_time={"peer": (0.0, 1 * US)})
    c = lab.idle_and_polling_claims(lab.IdlePolling(busy, paused, poll, 1000))
    assert [x.holds for x in c] == [True, True, True]
    assert "pause of 1.00 ms" in c[0].text and "60.0 µs against 20.0 µs" in c[0].text
    assert "50.0× faster" in c[1].text and "asleep 0 % of its time" in c[2].text and "sleeps 53 %" in c[2].text
    assert_every_number_quoted(c)


def test_idle_and_polling_when_the_poller_lost_its_cpu():
    busy = run(median=50 * US, components={"wakeup": 20 * US}, side_time={"peer": (10 * US, 50 * US)})
    poll = run(median=3000 * US, components={"preempted": 2900 * US}, side_time={"peer": (900 * US, 3000 * US)})
    c = lab.idle_and_polling_claims(lab.IdlePolling(busy, busy, poll, 1000))
    assert [x.holds for x in c] == [False, False, False]
    assert "3.00 ms against the pipe's 50.0 µs" in c[1].text and "asleep 30 % of its time here" in c[2].text
    assert_every_number_quoted(c)


# --- probe-effect ----------------------------------------------------------------------


def test_probe_effect_as_the_textbook_says():
    # pipe: 12 us traced, 10 untraced, 4 calls: 500 ns a call; null: 700 ns against 200: 500 ns
    pipe = run(median=12 * US, probe_ratio=1.2, probe_ratio_ci=(1.15, 1.25), untraced_median_ns=10 * US)
    null = run(median=700, probe_ratio=3.5, probe_ratio_ci=(3.4, 3.6), untraced_median_ns=200)
    c = lab.probe_effect_claims(lab.ProbeEffect(pipe, null, 4, 1))
    assert [x.holds for x in c] == [True, True, True]
    assert "1.2× the untraced" in c[0].text and "3.5× slower" in c[1].text
    assert "500 ns on a null call, 500 ns for each of the pipe's 4 calls" in c[2].text
    assert_every_number_quoted(c)


def test_probe_effect_within_the_noise():
    pipe = run(median=10.1 * US, probe_ratio=1.01, probe_ratio_ci=(0.9, 1.1), untraced_median_ns=10 * US)
    null = run(median=210, probe_ratio=1.0, probe_ratio_ci=(0.9, 1.1), untraced_median_ns=210)
    c = lab.probe_effect_claims(lab.ProbeEffect(pipe, null, 4, 1))
    assert [x.holds for x in c] == [False, False, False]
    assert "within the noise" in c[0].text and "0 ns on a null call, 25.0 ns" in c[2].text
    assert "does not cost about the same" in c[2].text and "within 3.0× of each other" in c[2].text
    assert_every_number_quoted(c)


def test_probe_effect_without_a_twin_says_so():
    c = lab.probe_effect_claims(lab.ProbeEffect(run(), run(), 4, 1))
    assert [x.holds for x in c] == [False] and "unknown" in c[0].text


# --- pitfalls --------------------------------------------------------------------------


def test_pitfalls_as_the_textbook_says():
    pipe = run(median=50 * US, mean=80 * US, iqr={"mean": 52 * US, "removed": 30})
    f = lab.Pitfalls(1, 1, 200, first_median_ns=90 * US, first_n=20, rest_median_ns=50 * US, pipe=pipe)
    c = lab.pitfalls_claims(f)
    assert [x.holds for x in c] == [True, True, True, True]
    assert "resolution is 1.00 ns" in c[0].text and "first 20 pipe round trips take 90.0 µs" in c[1].text
    assert "3 % of the 1,000 iterations (30)" in c[2].text and "from 80.0 µs to 52.0 µs" in c[2].text
    assert "(25.0 µs)" in c[3].text and "1.6× the median" in c[3].text
    assert_every_number_quoted(c)


def test_pitfalls_when_nothing_goes_wrong():
    pipe = run(median=50 * US, mean=51 * US, iqr={"mean": 52 * US, "removed": 3})
    f = lab.Pitfalls(1, 40, 200, first_median_ns=50 * US, first_n=20, rest_median_ns=50 * US, pipe=pipe)
    c = lab.pitfalls_claims(f)
    assert [x.holds for x in c] == [False, False, False, False]
    assert "steps of 40.0 ns" in c[0].text and "not slower" in c[1].text and "close to the median" in c[3].text
    assert_every_number_quoted(c)


@pytest.mark.parametrize(
    "with_sleep, holds, words",
    [
        # usleep(50) adding 91.3 us (this VM: timer slack and the wake-up): 1.8x the nominal
        (37.6 * US + 91.3 * US, True, ["adds 91.3 µs", "1.8× its nominal 50.0 µs", "off by the difference"]),
        # adding 52 us: within 10 % of the nominal 50
        (37.6 * US + 52 * US, False, ["adds 52.0 µs", "within 10 % of its nominal 50.0 µs"]),
    ],
)
def test_pitfalls_a_usleep_in_the_loop(with_sleep, holds, words):
    pipe = run(median=50 * US, mean=51 * US, iqr={"mean": 52 * US, "removed": 3})
    f = lab.Pitfalls(
        1, 40, 200, first_median_ns=50 * US, first_n=20, rest_median_ns=50 * US, pipe=pipe,
        sleep_us=50, sem_median_ns=37.6 * US, sem_sleep_median_ns=with_sleep,
    )  # fmt: skip
    c = lab.pitfalls_claims(f)
    sleep = next(x for x in c if "usleep" in x.text)
    assert sleep.holds is holds and all(w in sleep.text for w in words), sleep.text
    assert_every_number_quoted(c)


def test_smallest_step():
    assert lab.smallest_step([100, 105, 105, 103, 110]) == 2
    assert lab.smallest_step([7, 7]) == 0


# --- run_figures ------------------------------------------------------------------------


def test_run_figures_reads_a_summary_and_counts_the_explained_calls():
    summary = typed(
        {
            "workload": "pipe",
            "primary_metric": "rtt",
            "metrics": {"rtt": {"n": 10, "median": 1000.0, "mean": 1200.0, "ci95_median": [900, 1100]}},
            "breakdown": {
                "rtt": {
                    "components": {
                        "user": {"mean": 200.0},
                        "syscall": {"mean": 1000.0},
                        "sched_delay": {"derived": True},
                    },
                    "per_side": {"peer": {"components": {"user": {"mean": 100.0}, "blocked": {"mean": 300.0}}}},
                    "preempted_by": [{"comm": "cc1", "tid": 9, "share": 0.5}],
                }
            },
        }
    )
    x = SimpleNamespace(
        how="the median of 10",
        latency_ns=1000,
        components={"user": 300.0, "syscall": 700.0},
        chain=[
            (0, "A", "enters write()"),
            (1, "A", "wake-up: wakes B (sched_waking, target CPU 1)"),
            (2, "B", "read() returns 1"),
            (3, "B", "enters write()"),
            (4, "cc1 (tid 9)", "enters read()"),  # another task: not the workload's
        ],
    )
    f = lab.run_figures("pipe", summary, x)
    assert (f.median_ns, f.mean_ns, f.median_ci) == (1000.0, 1200.0, (900, 1100))
    assert f.components == {"user": 200.0, "syscall": 1000.0}
    assert f.side_blocked_share == {"peer": 0.75} and f.preempted_by == [("cc1 (tid 9)", 0.5)]
    assert (f.syscalls, f.wakeups, f.typical_ns) == (2, 1, 1000.0)
    slowest = lab.run_figures("pipe", summary, SimpleNamespace(**{**vars(x), "how": "the slowest of 10"}))
    assert slowest.typical == {} and slowest.syscalls == 2
