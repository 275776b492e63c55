"""examples/known_pingpong, the known-answer program `ipctrace validate` traces: every channel
makes its round trips and ends, the spin is spent where asked, each round trip is one pair of
markers (USDT) and one call of round_trip (uprobe), bad usage is one line and exit 2, and the
server does not outlive its client. Needs the built example; the marker tests root and the loader."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from analysis import LOADER, OUTPUT
from analysis.store import events as ev
from analysis.store import records
from conftest import needs_tracing

PROGRAM = OUTPUT / "examples" / "known_pingpong"
CHANNELS = ("pipe", "unix", "tcp", "eventfd", "futex")
MARK = records.TYPES.index("mark") + 1

pytestmark = pytest.mark.skipif(not PROGRAM.exists(), reason=f"{PROGRAM} is not built: run 'make'")


def known_pingpong(*args, timeout=120):
    return subprocess.run([str(PROGRAM), *map(str, args)], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.parametrize("cpus", ["0,0", "0,1"])
def test_each_channel_makes_its_round_trips(channel, cpus):
    r = known_pingpong(channel, "--iterations", 2000, "--cpus", cpus)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


@pytest.mark.parametrize("channel", CHANNELS)
@pytest.mark.timing
def test_the_spin_is_spent(channel, tmp_path):
    """200 round trips with 500 us spun before every other answer take at least 50 ms (a
    lower bound: load only lengthens them); the server's --spun file times each of the 100
    spins, each at least the 500 us asked."""
    start = time.monotonic()
    r = known_pingpong(
        channel, "--iterations", 200, "--spin-ns", 500_000, "--spin-every", 2, "--cpus", "0,1", "--spun", tmp_path / "s"
    )
    spun = time.monotonic() - start
    assert r.returncode == 0, r.stderr
    assert spun >= 0.05
    spins = [tuple(map(int, line.split())) for line in (tmp_path / "s").read_text().splitlines()]
    assert [m for m, _ in spins] == list(range(1, 200, 2))
    assert all(ns >= 500_000 for _, ns in spins)


def test_a_spun_file_it_cannot_write_is_one_line(tmp_path):
    r = known_pingpong("pipe", "--iterations", 2, "--spun", tmp_path / "no" / "s", timeout=10)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"known_pingpong: --spun {tmp_path / 'no' / 's'}: No such file or directory"
    ]


@pytest.mark.parametrize(
    "args, words",
    [
        ([], "name one channel"),
        (["carrier-pigeon"], "the channel is one of pipe, unix, tcp, eventfd, futex"),
        (["pipe", "--iterations", "0"], "--iterations wants a number above 0"),
        (["pipe", "--spin-ns", "-1"], "--spin-ns wants a number of ns, 0 or more"),
        (["pipe", "--spin-every", "x"], "--spin-every wants a number above 0"),
        (["pipe", "--gap-ns", "-5"], "--gap-ns wants a number of ns, 0 or more"),
        (["pipe", "--cpus", "1"], "--cpus wants CLIENT,SERVER (two CPU numbers)"),
        (["pipe", "--cpus", "0,100000"], "--cpus wants CLIENT,SERVER (two CPU numbers)"),
        (["futex", "--cpus", f"0,{os.cpu_count() + 7}"], "--cpus names a CPU this process may not run on"),
        (["pipe", "--bogus"], "--bogus: unknown option or missing value"),
    ],
)
def test_bad_usage_is_one_line(args, words):
    r = known_pingpong(*args, timeout=10)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"known_pingpong: {words} "), r.stderr
    assert "(usage: known_pingpong pipe|unix|tcp|eventfd|futex" in lines[0]


def test_the_client_waits_the_gap_between_round_trips():
    """--gap-ns: the client sleeps between an answer and its next request, so 100 round trips
    with 3 ms gaps take at least 99 x 3 ms (a lower bound: a busy machine only adds to it)."""
    t0 = time.monotonic()
    r = known_pingpong("pipe", "--iterations", 100, "--gap-ns", 3_000_000, timeout=60)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 >= 99 * 0.003


def alive(pid):
    """pid exists and is no zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(what, seconds=30):
    deadline = time.monotonic() + seconds
    while not (got := what()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


@pytest.mark.parametrize("channel", ["eventfd", "futex"])
def test_the_server_ends_with_its_client(channel):
    """eventfd and futex have no end of file: a client killed mid-run takes its server along."""
    p = subprocess.Popen([str(PROGRAM), channel, "--iterations", str(10**9), "--cpus", "0,1"])
    try:
        children = Path(f"/proc/{p.pid}/task/{p.pid}/children")
        server = wait_for(lambda: children.exists() and children.read_text().split())
        assert server, "the server never started"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert wait_for(lambda: not alive(int(server[0]))), "the server outlived its client"


def marks_of(out):
    recs, _, _ = ev.read_events_bin(out / "events.bin")
    m = recs[recs["type"] == MARK]
    return int((m["aux"] == 1).sum()), int((m["aux"] == 2).sum()), json.loads((out / "trace.json").read_text())


@needs_tracing
@pytest.mark.parametrize("channel, how", [*((c, "usdt") for c in CHANNELS), ("unix", "uprobe"), ("futex", "uprobe")])
def test_each_round_trip_is_one_pair_of_marks(tmp_path, channel, how):
    """What `trace --markers` (USDT) and `--iteration-func known_pingpong:round_trip` find:
    one begin and one end per round trip, whatever the channel."""
    probe = ("--usdt", PROGRAM) if how == "usdt" else ("--uprobe", f"{PROGRAM}:round_trip")
    r = subprocess.run(
        [str(LOADER), "--out", str(tmp_path), *map(str, probe), "--", str(PROGRAM), channel, "--iterations", "300"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    begin, end, tj = marks_of(tmp_path)
    assert (begin, end) == (300, 300) and tj["stopped_by"] == "exit"
    if how == "usdt":  # unnamed markers: the iterations' metric is `iteration`
        assert tj["marks"]["names"] == {}
