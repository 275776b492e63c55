"""The workloads (the seed reports' experiments and the course's IPC primitives),
run for real through .output/ipcbench with small counts: every timed iteration is
recorded, latencies are positive, the expected order holds, and nothing (shared
memory, semaphore, message queue, socket file, FIFO, process holding a network
namespace, BPF program) outlives a run, a refused run, a failed run or a kill."""

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from analysis import DRIVER
from analysis.store.results import read_iterations_bin
from conftest import orphaned_programs

ITERATIONS, WARMUP, RUNS = 2000, 200, 2

# (workload, extra arguments, the metric the run measures)
CASES = [
    ("spin-tas-threads", [], "lock_unlock"),
    ("spin-tas-threads", ["--mode", "handoff"], "rtt"),
    ("spin-tas-procs", [], "lock_unlock"),
    ("spin-tas-procs", ["--mode", "handoff"], "rtt"),
    ("spin-ttas-threads", [], "rtt"),
    ("spin-ttas-threads", ["--mode", "lock"], "lock_unlock"),
    ("sem-threads", [], "rtt"),
    ("sem-threads", ["--mode", "unnamed"], "rtt"),
    ("sem-procs", [], "rtt"),
    ("sem-procs", ["--mode", "unnamed"], "rtt"),
    ("sem-wakeup", [], "wakeup"),
    ("zmq-inproc", [], "rtt"),
    ("zmq-ipc", ["--size", "4096"], "rtt"),
    ("zmq-tcp", [], "rtt"),
    ("zmq-tcp-netns", [], "rtt"),
    ("kspin", [], "lock_unlock"),
    ("futex", [], "rtt"),
    ("futex", ["--procs"], "rtt"),
    ("eventfd", [], "rtt"),
    ("eventfd", ["--procs"], "rtt"),
    ("unix-stream", ["--procs", "--size", "100000"], "rtt"),
    ("unix-dgram", [], "rtt"),
    ("socketpair", [], "rtt"),
    ("tcp", ["--procs"], "rtt"),
    ("udp", ["--size", "65507"], "rtt"),
    ("fifo", ["--procs", "--size", "70000"], "rtt"),
    ("mqueue", [], "rtt"),
    ("mqueue", ["--procs", "--size", "8192"], "rtt"),
    ("signal", [], "rtt"),
    ("signal", ["--procs"], "rtt"),
    ("shm-poll", [], "rtt"),
    ("sched-yield", [], "rtt"),
    ("cond", [], "rtt"),
    ("cond", ["--procs"], "rtt"),
]

pytestmark = [
    pytest.mark.skipif(not DRIVER.exists(), reason="run 'make' first: .output/ipcbench is missing"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the namespace and BPF workloads need root"),
]


def ipcbench(*args, timeout=120, **kw):
    return subprocess.run([str(DRIVER), *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def mqueue_dir():
    """The POSIX message queues of this machine, listed from a mqueue file system of our own.
    Mounted on a directory of its own, not under pytest's numbered base: pytest may rename an
    old base to garbage-* while the module runs, and the unmount by the old name then failed
    (a CI run left the mount behind)."""
    d = Path(tempfile.mkdtemp(prefix="ipctrace-test-mqueue-"))
    if subprocess.run(["mount", "-t", "mqueue", "none", str(d)], capture_output=True).returncode:
        d.rmdir()
        pytest.skip("cannot mount an mqueue file system to list message queues")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)
        d.rmdir()


def our_processes(marker):
    """Processes whose command line holds marker (the driver and its forked peers)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (p / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append((int(p.name), cmd))
    return found


def leftovers(tag, marker, mqueue_dir):
    """Everything an invocation (its tag, its --out path) could leave behind."""
    tmp = os.environ.get("TMPDIR") or "/tmp"
    left = [str(p) for p in Path("/dev/shm").glob(f"*ipctrace-{tag}-*")]
    left += [str(p) for p in mqueue_dir.glob(f"ipctrace-{tag}-*")]
    for d in Path(tmp).glob(f"ipctrace-{tag}"):
        left += [str(d)] + [str(p) for p in d.iterdir()]
    left += [f"process {pid}: {cmd}" for pid, cmd in our_processes(marker)]
    left += [f"BPF program {i} {name}" for i, name in orphaned_programs(["kspin_"])]
    return left


def tag_of(pid):
    """The driver's tag is "<pid>-<8 hex>"; any tag of that pid matches the glob."""
    return f"{pid}-*"


def run_case(tmp_path, name, extra, iterations=ITERATIONS, runs=RUNS):
    out = tmp_path / "out"
    p = ipcbench("run", name, "--out", out, "--iterations", iterations, "--warmup", WARMUP, "--runs", runs, *extra)
    assert p.returncode == 0, p.stderr
    meta = json.loads((out / "workload.json").read_text())
    df, warnings = read_iterations_bin(out / "iterations.bin", meta["metrics"])
    assert warnings == []
    return out, meta, df


@pytest.mark.parametrize("name,extra,metric", CASES, ids=[" ".join([n, *e]) for n, e, _ in CASES])
def test_workload_runs_and_leaves_nothing(tmp_path, mqueue_dir, name, extra, metric):
    out, meta, df = run_case(tmp_path, name, extra)
    assert meta["status"] == "complete" and meta["primary_metric"] == metric
    assert meta["runs_completed"] == RUNS and meta["iterations_completed"] == RUNS * ITERATIONS
    mine = df[df["metric"] == metric]
    assert len(mine) == RUNS * ITERATIONS
    for run, g in mine.groupby("run"):
        assert sorted(g["iteration"]) == list(range(ITERATIONS)), run
    assert (df["t_end_ns"] > df["t_start_ns"]).all(), "a latency of zero or less"
    assert leftovers(meta["tag"], str(out), mqueue_dir) == []


def test_modes_and_metrics_are_listed():
    wl = {w["name"]: w for w in json.loads(ipcbench("list").stdout)["workloads"]}
    for name in {n for n, _, _ in CASES}:
        assert wl[name]["summary"] and wl[name]["primary_metric"], name
    assert wl["spin-tas-threads"]["modes"] == ["lock", "handoff"]
    assert wl["spin-ttas-threads"]["modes"][0] == "handoff"  # 002 measured the handoff
    assert wl["zmq-tcp-netns"]["seed"].startswith("000_")
    assert "procs" in wl["futex"]["flags"] and "procs" not in wl["spin-tas-threads"]["flags"]


@pytest.mark.parametrize("name", ["pipe-bandwidth", "unix-bandwidth"])
def test_bandwidth_times_each_write_to_a_reading_peer(tmp_path, name):
    """1000 writes of 4 KiB, far more than a pipe's or a socket's buffer holds, finish only
    because the peer reads them; each write is one iteration of metric write."""
    out, meta, df = run_case(tmp_path, name, ["--size", "4096"], iterations=1000, runs=1)
    assert meta["status"] == "complete" and meta["primary_metric"] == "write"
    assert set(df["metric"].astype(str)) == {"write"} and len(df) == 1000


def test_spin_on_one_cpu_warns_about_time_slices(tmp_path):
    _, meta, _ = run_case(tmp_path, "spin-tas-threads", ["--same-cpu"], iterations=200, runs=1)
    assert any("time slice" in w for w in meta["warnings"])


def test_sem_wakeup_latency_is_never_negative(tmp_path):
    _, _, df = run_case(tmp_path, "sem-wakeup", [], iterations=3000, runs=1)
    # t_start comes from the poster, t_end from the waiter: a poster that posted
    # before the waiter slept would show up as t_end <= t_start
    assert (df["t_end_ns"] > df["t_start_ns"]).all()
    assert df["latency_ns"].min() > 0


@pytest.mark.timing
def test_expected_order_of_mechanisms(tmp_path):
    def median(name, extra):
        d = tmp_path / name
        d.mkdir()
        _, meta, df = run_case(d, name, extra, iterations=3000, runs=1)
        return df[df["metric"] == meta["primary_metric"]]["latency_ns"].median()

    handoff = median("spin-tas-threads", ["--mode", "handoff"])
    sem = median("sem-threads", [])
    zmq_ipc = median("zmq-ipc", [])
    zmq_inproc = median("zmq-inproc", [])
    assert handoff < sem < zmq_ipc, (handoff, sem, zmq_ipc)
    assert zmq_inproc < zmq_ipc, (zmq_inproc, zmq_ipc)


@pytest.mark.timing
def test_kspin_subtracts_the_unlocked_program(tmp_path):
    _, _, df = run_case(tmp_path, "kspin", [], iterations=500, runs=1)
    med = df.groupby("metric", observed=True)["latency_ns"].median()
    assert med["run_locked"] > med["run_unlocked"]
    # 32 pairs per run: the per-pair figure is the difference over 32
    assert abs(med["lock_unlock"] - (med["run_locked"] - med["run_unlocked"]) / 32) <= 2


BAD = [
    (["mqueue", "--size", "9000"], "msgsize_max"),
    (["udp", "--size", "65508"], "at most 65507"),
    (["unix-dgram", "--size", "1000000"], "unix datagram carries at most"),
    (["eventfd", "--size", "16"], "--size does not apply"),
    (["spin-tas-threads", "--procs"], "no --procs variant"),
    (["sem-wakeup", "--procs"], "no --procs variant"),
    (["shm-poll", "--procs"], "no --procs variant"),
    (["zmq-ipc", "--procs"], "no --procs variant"),
    (["spin-tas-procs", "--mode", "fast"], "no mode 'fast'"),
]


@pytest.mark.parametrize("args,says", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, mqueue_dir, args, says):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [str(DRIVER), "run", *args, "--out", str(out), "--iterations", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    assert leftovers(tag_of(proc.pid), str(out), mqueue_dir) == []


@pytest.mark.parametrize("name", ["zmq-tcp-netns", "kspin"])
def test_root_only_workloads_refuse_other_users(tmp_path, name):
    out = tmp_path / "out"
    os.chmod(tmp_path, 0o777)
    p = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            str(DRIVER),
            "run",
            name,
            "--out",
            str(out),
            "--iterations",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "needs root" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()


def start(tmp_path, name, *extra):
    """A long run in the background; returns once it has timed iterations."""
    out = tmp_path / "out"
    progress = tmp_path / "progress"
    # long enough that the kill lands mid-run, short enough that the arrays stay small
    proc = subprocess.Popen(
        [
            str(DRIVER),
            "run",
            name,
            "--out",
            str(out),
            "--iterations",
            "2000000",
            "--warmup",
            "0",
            "--runs",
            "1",
            "--progress",
            str(progress),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if progress.exists() and progress.stat().st_size >= 8 and int.from_bytes(progress.read_bytes()[:8], "little"):
            return proc, out
        if proc.poll() is not None:
            pytest.fail(f"{name} ended early: {proc.stderr.read()}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"{name} timed nothing within 30 s")


def wait_gone(marker, seconds=5):
    deadline = time.monotonic() + seconds
    while our_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return our_processes(marker)


KILLED = [
    ("shm-poll", []),
    ("zmq-tcp-netns", []),
    ("mqueue", ["--procs"]),
    ("sem-procs", []),
    ("spin-tas-procs", []),
    ("unix-dgram", ["--procs"]),
    ("kspin", []),
]


@pytest.mark.parametrize("name,extra", KILLED, ids=[" ".join([n, *e]) for n, e in KILLED])
def test_sigkill_leaves_no_ipc_object(tmp_path, mqueue_dir, name, extra):
    proc, out = start(tmp_path, name, *extra)
    tag = tag_of(proc.pid)
    proc.kill()
    proc.wait()
    assert wait_gone(str(out)) == []  # peers and namespace holders die with the driver
    left = leftovers(tag, str(out), mqueue_dir)
    tmp = os.environ.get("TMPDIR") or "/tmp"
    privdirs = list(Path(tmp).glob(f"ipctrace-{tag}"))
    # the private directory itself survives a SIGKILL, but empty: its files went at once
    assert left == [str(d) for d in privdirs], left
    for d in privdirs:
        d.rmdir()


@pytest.mark.parametrize(
    "name,extra", [("zmq-tcp-netns", []), ("sem-procs", ["--mode", "unnamed"]), ("mqueue", ["--procs"]), ("signal", [])]
)
def test_sigterm_stops_cleanly(tmp_path, mqueue_dir, name, extra):
    proc, out = start(tmp_path, name, *extra)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    meta = json.loads((out / "workload.json").read_text())
    assert meta["status"] == "interrupted" and meta["iterations_completed"] > 0
    assert leftovers(meta["tag"], str(out), mqueue_dir) == []


@pytest.mark.parametrize("name", ["unix-stream", "fifo", "tcp", "socketpair"])
def test_dead_peer_fails_the_run_and_leaves_nothing(tmp_path, mqueue_dir, name):
    proc, out = start(tmp_path, name, "--procs")
    peers = [pid for pid, _ in our_processes(str(out)) if pid != proc.pid]
    assert peers
    os.kill(peers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "failed" in err and len(err.strip().splitlines()) == 1
    meta = json.loads((out / "workload.json").read_text())
    assert meta["status"] == "failed"
    assert leftovers(meta["tag"], str(out), mqueue_dir) == []
