"""`ipctrace explain`: the chain of one iteration, on hand-made events and on a real traced run
(tests/fixtures/pipe-traced: `ipctrace run pipe --iterations 400 --warmup 100 --runs 1`)."""
import re
import shutil

import pytest

from conftest import HOME
from analysis import breakdown as bd
from analysis import cmd_explain
from test_breakdown import A, B, PING_PONG, WORKLOAD, events

FIXTURE = HOME / "tests" / "fixtures" / "pipe-traced"
LINE = re.compile(r"^\s+\+(\d+\.\d{3}) us  (\S+)\s+(.*)$")


def test_chain_by_hand():
    lines = cmd_explain.chain(bd.Events(events(PING_PONG)), bd.sides_of(WORKLOAD, A), 1000, 2000)
    got = [(rel, who, text) for rel, who, text in lines]
    assert got[0] == (0, "A", "reads the clock: the iteration starts")
    assert (0, "B", "is blocked; off CPU since 0.950 us before the start") in got
    assert (100, "A", "enters write()") in got
    assert (200, "A", "wake-up: wakes B (sched_waking, target CPU 1)") in got
    assert (300, "A", "write() returns 1, 0.200 us after it was entered") in got
    assert (400, "A", "blocks and leaves CPU 0 (switch to idle)") in got
    assert (450, "B", "on CPU 1 after a 0.250 us wake-up delay (sched_waking -> running)") in got
    assert (500, "B", "read() returns 1, 1.480 us after it was entered") in got
    assert (600, "B", "wake-up: wakes A (sched_waking, target CPU 0)") in got
    assert (620, "B", "interrupted by hard IRQ 30 on CPU 1") in got
    assert (720, "A", "on CPU 0 after a 0.120 us wake-up delay (sched_waking -> running)") in got
    assert got[-1] == (1000, "A", "reads the clock: the iteration ends after 1.000 us")
    assert [rel for rel, _, _ in got] == sorted(rel for rel, _, _ in got)


def test_path_segments_by_hand():
    ev = bd.Events(events(PING_PONG))
    tls = [bd.thread_timeline(ev, A), bd.thread_timeline(ev, B)]
    segs = [(p - 1000, q - 1000, who, state) for p, q, who, state in cmd_explain.path_segments(tls, "AB", 1000, 2000)]
    assert segs == [(0, 100, "A", "user"), (100, 300, "A", "syscall"), (300, 350, "A", "user"),
                    (350, 400, "A", "syscall"), (400, 450, "B", "sched_delay"), (450, 500, "B", "syscall"),
                    (500, 550, "B", "user"), (550, 600, "B", "syscall"), (600, 720, "A", "sched_delay"),
                    (720, 800, "A", "syscall"), (800, 1000, "A", "user")]


def chain_lines(out):
    return [LINE.match(line).groups() for line in out.splitlines() if LINE.match(line) and " .. " not in line]


@pytest.mark.parametrize("how", [["--median"], ["--p99"], ["--iteration", "7"], []])
def test_explain_real_run(ipctrace, how):
    r = ipctrace("explain", FIXTURE, *how)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    head = out.splitlines()[0]
    lat_us = float(re.search(r": (\d+\.\d{3}) us$", head).group(1))
    if how[:1] == ["--iteration"]:
        assert "iteration 7 (iteration 7)" in head
    else:
        assert ("99th percentile" if how == ["--p99"] else "median") in head
    assert "A = measuring" in out and "B = peer" in out
    chain = chain_lines(out)
    times = [float(t) for t, _, _ in chain]
    assert times == sorted(times) and times[-1] == lat_us
    texts = [(who, text) for _, who, text in chain]
    # A round trip over two pipes: each side writes, wakes the other, reads.
    for who in "AB":
        assert any(w == who and t.startswith("enters write()") for w, t in texts)
        assert any(w == who and t.startswith("read() returns 1") for w, t in texts)
    assert any(w == "A" and t.startswith("wake-up: wakes B") for w, t in texts)
    assert any(w == "B" and t.startswith("wake-up: wakes A") for w, t in texts)
    # The critical path covers the window exactly once.
    segs = re.findall(r"\+(\d+\.\d{3}) us \.\.\s+\+(\d+\.\d{3}) us", out)
    assert float(segs[0][0]) == 0 and float(segs[-1][1]) == lat_us
    assert all(a[1] == b[0] for a, b in zip(segs, segs[1:]))
    total = re.search(r"^  sum\s+(\d+\.\d{3}) us\s+([\d.]+) %", out, re.M)
    assert 98 <= float(total.group(2)) <= 102


def test_explain_matches_summary_median(ipctrace):
    """The median iteration's components come from the same computation as breakdown.parquet."""
    import pyarrow.parquet as pq
    r = ipctrace("explain", FIXTURE, "--median")
    head = r.stdout.splitlines()[0]
    k = int(re.search(r"iteration (\d+)", head).group(1))
    b = pq.read_table(FIXTURE / "breakdown.parquet").to_pandas()
    row = b[b["iteration"] == k].iloc[0]
    for c in ("user", "syscall", "sched_delay"):
        shown = float(re.search(rf"^  {c}\s+(\d+\.\d{{3}}) us", r.stdout, re.M).group(1))
        assert shown == pytest.approx(row[c] / 1000, abs=0.0015)


def one_line_error(r, code, words):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipctrace: ") and words in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_explain_bad_input(ipctrace, tmp_path):
    one_line_error(ipctrace("explain", tmp_path / "nowhere"), 2, "does not exist")
    one_line_error(ipctrace("explain", tmp_path), 2, "no summary.json")
    untraced = tmp_path / "untraced"
    shutil.copytree(FIXTURE, untraced)
    (untraced / "events.parquet").unlink()
    one_line_error(ipctrace("explain", untraced), 2, "was not traced")
    one_line_error(ipctrace("explain", FIXTURE, "--metric", "nope"), 2, "no metric 'nope'")
    one_line_error(ipctrace("explain", FIXTURE, "--iteration", "400"), 2, "no iteration 400")
    one_line_error(ipctrace("explain", FIXTURE, "--run", "5"), 2, "run 5 has no iterations")
    r = ipctrace("explain", FIXTURE, "--p99", "--median")
    assert r.returncode == 2 and "not allowed" in r.stderr
