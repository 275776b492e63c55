"""`ipctrace trace` as perf trace is used (issue 28, point 3): -a/--all-cpus (every task on the
machine, not the tracer's own) and -e/--syscalls LIST (only those system calls recorded)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import HOME, cli_argv, cli_env, needs_tracing

pytestmark = [needs_tracing]

# a ping-pong over a pipe between two processes; the child ends when the parent does
PINGPONG = """
import os, sys
r1, w1 = os.pipe(); r2, w2 = os.pipe()
if os.fork() == 0:
    os.close(w1); os.close(r2)
    while os.read(r1, 1):
        os.write(w2, b"y")
    os._exit(0)
os.close(r1); os.close(w2)
print(os.getpid(), flush=True)
while True:
    os.write(w1, b"x"); os.read(r2, 1)
"""


def ipctrace(*args, timeout=300):
    return subprocess.run(
        cli_argv(*map(str, args)), capture_output=True, text=True, timeout=timeout, env=cli_env(), cwd=HOME
    )


def summary(d):
    return json.loads((d / "summary.json").read_text())


@pytest.fixture
def bystander(tmp_path):
    """A process (and its child) of nobody's trace, ping-ponging: its pid."""
    prog = tmp_path / "pingpong.py"
    prog.write_text(PINGPONG)
    p = subprocess.Popen([sys.executable, str(prog)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        yield int(p.stdout.readline())
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_all_cpus_follows_every_task_but_the_tracers(tmp_path, bystander):
    """-a with --duration: a process nobody named is in the whole-trace view, with its system
    calls; the tracer's own threads are not followed."""
    out = tmp_path / "all"
    r = ipctrace("trace", "-a", "-d", 1, "-q", "-o", out)
    assert r.returncode == 0, r.stderr
    s = summary(out)
    assert s["params"]["all_cpus"] is True and "every task on the machine" in r.stdout
    threads = {t["tid"]: t for t in s["activity"]["threads"]}
    assert bystander in threads and threads[bystander]["states_ns"]["syscall"] > 0
    tj = json.loads((out / "trace.json").read_text())
    assert tj["mode"] == "all"
    assert not set(tj["tracer"]["tids"]) & set(threads)
    assert not set(tj["tracer"]["tids"]) & set(tj["tids"])
    calls = {c["name"] for c in s["activity"]["syscalls"]}
    assert {"read", "write"} <= calls


def test_all_cpus_with_a_command_ends_with_it(tmp_path, bystander):
    out = tmp_path / "cmd"
    r = ipctrace("trace", "-a", "-q", "-o", out, "--", "sleep", "0.5")
    assert r.returncode == 0, r.stderr
    threads = {t["tid"]: t["comm"] for t in summary(out)["activity"]["threads"]}
    assert bystander in threads and "sleep" in threads.values()


def test_syscalls_records_only_those(tmp_path):
    """-e read: the view's system calls are reads only (without it, the same command shows its
    writes, mmap...: not the execve, the tracer's own call); the filter is in the summary and in the table's heading."""
    out = tmp_path / "e"
    r = ipctrace("trace", "-e", "read", "-q", "-o", out, "--", "perf", "bench", "sched", "pipe", "-l", 300)
    assert r.returncode == 0, r.stderr
    s = summary(out)
    assert {c["name"] for c in s["activity"]["syscalls"]} == {"read"}
    assert s["params"]["syscalls"] == ["read"]
    assert "system calls read only (the others count as user time)" in r.stdout
    out = tmp_path / "all"
    r = ipctrace("trace", "-q", "-o", out, "--", "perf", "bench", "sched", "pipe", "-l", 300)
    assert r.returncode == 0, r.stderr
    assert {"read", "write", "mmap"} <= {c["name"] for c in summary(out)["activity"]["syscalls"]}


PP = """
import os
r1, w1 = os.pipe(); r2, w2 = os.pipe()
if os.fork() == 0:
    for _ in range(200):
        os.read(r1, 1); os.write(w2, b"y")
    os._exit(0)
for _ in range(200):
    os.write(w1, b"x"); os.read(r2, 1)
os.wait()
"""


def test_a_filter_without_exec_keeps_the_traced_program_s_own_thread(tmp_path):
    """Issue 34: with -e read,write the exec that ends the tracer's own calls in the command's
    thread is not recorded; the program's own thread (the command itself, the root) must still
    be in the thread table with its reads and writes, beside its child."""
    out = tmp_path / "pp"
    r = ipctrace("trace", "-e", "read,write", "-q", "-o", out, "--", sys.executable, "-c", PP)
    assert r.returncode == 0, r.stderr
    s = summary(out)
    root = s["trace"]["pids"][0]
    threads = {t["tid"]: t for t in s["activity"]["threads"]}
    assert root in threads, f"the command's own thread {root} is not in {sorted(threads)}"
    assert threads[root]["states_ns"]["syscall"] > 0
    assert sum(c["count"] for c in s["activity"]["syscalls"] if c["name"] == "write") >= 400


@pytest.mark.parametrize(
    "args, says",
    [
        (["--syscalls", "wirte", "--", "true"], "'wirte' is not a system call on"),
        (["--syscalls", "wirte", "--", "true"], "did you mean write?"),
        (["-e", "read,99999", "--", "true"], "has no system call number 99999"),
        (["-e", "read", "--rtt", "--", "true"], "an iteration's breakdown needs every system call"),
        (["-a"], "--all-cpus alone needs --duration S"),
        (["-a", "-d", "1", "--rtt"], "no --rtt, --markers or --iteration-func with it"),
        (["-a", "-d", "1", "--pid", "1"], "no --pid or --comm with it"),
    ],
)
def test_bad_filters_are_one_line(args, says, tmp_path):
    t0 = time.monotonic()
    r = ipctrace("trace", "-o", tmp_path / "x", *args, timeout=60)
    assert r.returncode == 2 and says in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "x").exists() and time.monotonic() - t0 < 60


# --- the live line: round trips so far, their median over the last second, events lost ---------


def _pieces(events_bin, how, calibration=None, piece=30_000):
    from analysis.run.progress import LiveIterations

    live = LiveIterations(events_bin, how, "x86_64" if os.uname().machine == "x86_64" else "aarch64", calibration)
    live.PIECE_RECORDS = piece
    steps = 0
    while live.step():
        steps += 1
    return live, steps


@pytest.fixture(scope="module")
def traced_pingpong(tmp_path_factory):
    """A Python ping-pong of 20 000 round trips traced by --rtt, its events.bin kept: (the results
    directory, the round trips the analysis after the trace found)."""
    d = tmp_path_factory.mktemp("pingpong")
    prog = d / "pp.py"
    prog.write_text(PINGPONG.replace("while True:", "for _ in range(20000):") + "\nos.close(w1)\n")
    out = d / "rtt"
    r = ipctrace("trace", "--rtt", "-q", "--keep-raw", "-o", out, "--", sys.executable, prog)
    assert r.returncode == 0, r.stderr
    return out, summary(out)["metrics"]["rtt"]["n"]


def test_live_round_trips_piece_by_piece_are_the_trace_s(traced_pingpong):
    """The live count, taken piece by piece as the tracer writes, finds the round trips the
    analysis after the trace finds (within a few at the pieces' edges), their median too."""
    out, n = traced_pingpong
    live, steps = _pieces(out / "events.bin", "rtt")
    assert steps > 5 and abs(live.count - n) <= max(3, n // 500), (live.count, n)
    assert live.median_last_second_ns() > 0


@pytest.mark.parametrize("held", [100, 1000])
def test_live_round_trips_held_back_to_settle_are_taken_at_the_end(traced_pingpong, held):
    """watch's steps take a round trip once settle_ns of trace follow it; once the tracer ended,
    a last call with nothing new to read takes those held back. settle_ns here holds back the
    last `held` round trips, so each piece holds some back; 1000 of them are more records than
    the context's 2 000 (as 50 ms of a fast ping-pong were more than its 50 000: they were lost)."""
    import numpy as np
    import pandas as pd

    from analysis.run.progress import LiveIterations

    out, n = traced_pingpong
    arch = "x86_64" if os.uname().machine == "x86_64" else "aarch64"
    ends = np.sort(pd.read_parquet(out / "iterations.parquet", columns=["t_end_ns"])["t_end_ns"].to_numpy())
    whole = LiveIterations(out / "events.bin", "rtt", arch)
    while whole.advance(0) is not None:
        pass
    settle_ns = whole.cutoff - int(ends[-held]) + 1  # from the newest event back past that end
    live = LiveIterations(out / "events.bin", "rtt", arch)
    live.PIECE_RECORDS, live.CONTEXT_RECORDS = 30_000, 2_000
    settled = 0
    while (got := live.advance(settle_ns)) is not None:
        settled += len(got[1])
    count = settled
    while (got := live.advance(0)) is not None:
        count += len(got[1])
    edge = max(3, n // 500)
    assert settled <= n - held + edge and abs(count - n) <= edge, (settled, count, n, settle_ns)


def test_live_round_trips_after_a_skip_are_those_past_it(traced_pingpong):
    """A watch that fell behind skips records: it reads on from there with no context, and
    finds the round trips that start after the records it skipped (within a few at the edge);
    skip() tells the first and last time it left unread."""
    import numpy as np
    import pandas as pd

    from analysis.run.progress import LiveIterations
    from analysis.store import events as events_mod

    out, n = traced_pingpong
    arch = "x86_64" if os.uname().machine == "x86_64" else "aarch64"
    its = pd.read_parquet(out / "iterations.parquet", columns=["t_start_ns", "t_end_ns"])
    recs = np.fromfile(out / "events.bin", events_mod.REC, offset=events_mod.HEADER.itemsize)
    live = LiveIterations(out / "events.bin", "rtt", arch)
    live.PIECE_RECORDS = 30_000
    assert live.advance(0) is not None
    k = len(recs) // 2 - 30_000
    assert live.skip(k) == (int(recs["ts"][30_000]), int(recs["ts"][30_000 + k - 1]))
    count = 0
    while (got := live.advance(0)) is not None:
        count += len(got[1])
    past = int((its["t_start_ns"].to_numpy() > int(recs["ts"][30_000 + k])).sum())
    assert abs(count - past) <= max(3, n // 500) and past < n * 0.6, (count, past, n)


def test_live_marked_iterations_leave_the_calibration_out(tmp_path):
    from analysis import OUTPUT

    out = tmp_path / "m"
    r = ipctrace(
        "trace", "--markers", "-q", "--keep-raw", "-o", out, "--", OUTPUT / "examples" / "marked_pingpong", 5000
    )
    assert r.returncode == 0, r.stderr
    n = summary(out)["metrics"]["round_trip"]["n"]
    raw = json.loads((out / "workload.json").read_text())["extra"]["probe_calibration_raw"]
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps({"probes": raw}))
    live, steps = _pieces(out / "events.bin", "markers", cal)
    assert steps > 2 and abs(live.count - n) <= 3, (live.count, n)
    # without the calibration's windows known, nothing is counted (they are not the program's)
    cal.write_text("")
    assert _pieces(out / "events.bin", "markers", cal)[0].count == 0


def test_the_live_line_shows_round_trips_and_losses(tmp_path, monkeypatch):
    """The line itself, from a trace's events.bin: the worker's round trips and median, the
    records, and the header's count of those lost (the tracer rewrites it each second)."""
    import io

    import numpy as np

    from analysis.run import trace as trace_run
    from analysis.store.events import HEADER

    prog = tmp_path / "pp.py"
    prog.write_text(PINGPONG.replace("while True:", "for _ in range(3000):") + "\nos.close(w1)\n")
    out = tmp_path / "rtt"
    r = ipctrace("trace", "--rtt", "-q", "--keep-raw", "-o", out, "--", sys.executable, prog)
    assert r.returncode == 0, r.stderr
    n = summary(out)["metrics"]["rtt"]["n"]
    events = out / "events.bin"
    head = np.frombuffer(events.read_bytes()[: HEADER.itemsize], HEADER).copy()
    head[0]["drops"] = 77
    with open(events, "r+b") as f:
        f.write(head.tobytes())

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Tty())
    live = trace_run._Live(events, True, "rtt")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and f"{n:,} round trips" not in sys.stderr.getvalue():
            live.last_t -= 1
            live.tick()
            time.sleep(0.5)
        line = sys.stderr.getvalue().rpartition("\r")[2]
    finally:
        live.close()
    assert f"{n:,} round trips, median " in line and "us in the last second" in line, line
    assert line.endswith("events recorded (0/s), 77 lost\x1b[K") or "77 lost" in line, line
    assert live.worker is None


def test_the_tracer_says_the_losses_while_it_runs(tmp_path):
    """events.bin's header has the records lost so far while the trace runs (a ring buffer of
    one page cannot hold a busy ping-pong's), not only at its end."""
    import numpy as np

    from analysis.store.events import HEADER
    from conftest import spawn

    out = tmp_path / "lossy"
    tracer = spawn(
        cli_argv("trace", "-q", "--ringbuf-mb", "0.004", "-d", 20, "-o", out, "--")
        + ["perf", "bench", "sched", "pipe", "-l", "100000000"]
    )
    try:
        lost, deadline = 0, time.monotonic() + 120
        while not lost and time.monotonic() < deadline and tracer.poll() is None:
            time.sleep(0.5)
            if (out / "events.bin").exists():
                with open(out / "events.bin", "rb") as f:
                    lost = int(np.frombuffer(f.read(HEADER.itemsize), HEADER)[0]["drops"])
        assert lost > 0 and tracer.poll() is None
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.communicate(timeout=300)


def _on_a_terminal(argv, rows, cols):
    """argv run on a pseudo-terminal of rows x cols, what it wrote played on a terminal emulator
    (pyte): (the bytes written, every line the terminal showed: the scrolled-off ones first)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    import pyte

    pid, fd = pty.fork()
    if pid == 0:  # the child: argv on the terminal, its size set before it starts
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.chdir(HOME)
        os.execvpe(argv[0], argv, cli_env())
    screen = pyte.HistoryScreen(cols, rows, history=10_000)
    stream, raw = pyte.ByteStream(screen), b""
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 1.0)[0]:
                try:
                    got = os.read(fd, 1 << 16)
                except OSError:  # EIO: the terminal's last writer is gone
                    break
                if not got:
                    break
                raw += got
                stream.feed(got)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, raw.decode(errors="replace")
    scrolled = ["".join(line[c].data for c in range(cols)) for line in screen.history.top]
    return raw, [x.rstrip() for x in scrolled + screen.display]


def test_the_live_line_is_never_glued_to_the_programs_output(tmp_path):
    """Issue 34: the program writes to the terminal whenever it likes while the live line is
    drawn each second: on a terminal (a real emulator's reading of the bytes), each of its lines
    is a line of its own, the live line was drawn in between, and nothing of it is left after."""
    talk = tmp_path / "talk.sh"
    talk.write_text('#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8; do echo "line $i of the program"; sleep 0.7; done\n')
    talk.chmod(0o755)
    raw, lines = _on_a_terminal(cli_argv("trace", "-o", str(tmp_path / "t"), "--", str(talk)), 12, 100)
    said = [x for x in lines if "of the program" in x]
    assert said == [f"line {i} of the program" for i in range(1, 9)], lines
    first, last = raw.index(b"line 1 of the program"), raw.index(b"line 8 of the program")
    assert b"tracing: " in raw[first:last], raw  # drawn while the program wrote
    assert not [x for x in lines if x.startswith("tracing: ")], lines
    assert raw.count(b"\x1b[r") == 1  # the whole screen scrolls again


@pytest.mark.parametrize("json_out", [False, True])
def test_the_live_line_is_on_a_terminal_and_not_with_json(tmp_path, json_out):
    """On a terminal (script(1) gives one) the line is drawn each second; --json's stdout is the
    summary alone and its stderr has no live line either."""
    import shlex

    out = tmp_path / "t"
    argv = cli_argv("trace", *(["--json"] if json_out else []), "-o", str(out), "--", "sleep", "2.5")
    p = subprocess.run(
        ["script", "-qec", shlex.join(argv), "/dev/null"],
        capture_output=True,
        text=True,
        timeout=300,
        env=cli_env(),
        cwd=HOME,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    if json_out:
        assert "events recorded" not in p.stdout
    else:
        assert "tracing: " in p.stdout and "events recorded" in p.stdout


@pytest.mark.parametrize("how", ["exec", "fork"])
def test_a_shell_wrapper_s_subshells_are_no_side_of_the_round_trips(tmp_path, how):
    """Issue 34: a pyenv shim is a bash script whose $(...) subshells talk to it through pipes
    before it execs the program (or, here too, forks it and waits): the round trips are the
    program's, and the subshells, ended before its first one, are no peer of them."""
    prog = tmp_path / "pp.py"
    prog.write_text(PINGPONG.replace("while True:", "for _ in range(2000):") + "\nos.close(w1)\nos.wait()\n")
    shim = tmp_path / "python3"
    run = f"exec {sys.executable} {prog}" if how == "exec" else f"{sys.executable} {prog}\nexit $?"
    shim.write_text(
        '#!/bin/bash\nset -e\nprogram="${0##*/}"\nversion=$(echo 3.11 | cut -d. -f1-2)\n'
        f'root=$(dirname "$(readlink -f "$0")")\n[ -n "$version" ] && [ -n "$root" ]\n{run}\n'
    )
    shim.chmod(0o755)
    out = tmp_path / "t"
    r = ipctrace("trace", "--rtt", "-q", "-o", out, "--", shim)
    assert r.returncode == 0, r.stderr
    # the program's round trips, every one: a record the ring buffer dropped takes at most one
    # with it; a switch the sched_switch probe missed none (a CI run lost 76 to 76 missed
    # switches when the system calls' filter trusted the last switch seen)
    s = summary(out)
    assert 2000 - s["trace"]["drops"]["total"] <= s["metrics"]["rtt"]["n"] <= 2000, s["trace"]["drops"]
    threads = json.loads((out / "workload.json").read_text())["threads"]
    tasks = json.loads((out / "trace.json").read_text())["tasks"]
    comm = {t["tid"]: tasks[str(t["tid"])]["comm"] for t in threads}
    assert [t["role"] for t in threads] == ["measuring", "peer"], (threads, comm)
    assert set(comm.values()) <= {"python3", os.path.basename(sys.executable)}, comm


def test_a_breakdown_over_the_events_around_its_requests_is_that_of_all(traced_pingpong):
    """The watch breaks a step's requests down over the events around them alone (each one's
    with a lead and a trail, and the threads' and CPUs' last switches and system calls before
    them: model/streaming.rows_around): its rows and critical paths are those that all the
    events give, for runs of requests and for the slowest ones apart."""
    import numpy as np

    from analysis.model import breakdown as bd
    from analysis.model import decoded, entrycal, rtt, streaming, tracefacts
    from analysis.run import watch
    from analysis.store import events as events_mod
    from analysis.store.jsonfiles import Workload

    out, _ = traced_pingpong
    arch = "x86_64" if os.uname().machine == "x86_64" else "aarch64"
    ev = events_mod.to_frame(np.fromfile(out / "events.bin", events_mod.REC, offset=events_mod.HEADER.itemsize))
    its = rtt.round_trips(ev, arch).reset_index(drop=True)
    its["iteration"] = its["seq"] = np.arange(len(its))
    slowest = np.argsort(-its["latency_ns"].to_numpy(), kind="stable")[:5]
    at = np.union1d(watch.component_sample(len(its)), slowest).astype(np.int64)
    starts, ends = (its[c].to_numpy(np.int64)[at] for c in ("t_start_ns", "t_end_ns"))
    rows = streaming.rows_around(ev, starts, ends, watch.BREAKDOWN_LEAD_RECORDS, watch.BREAKDOWN_TRAIL_RECORDS)
    assert len(rows) < len(ev) // 2
    wl = Workload.from_json(json.loads((out / "workload.json").read_text()))
    # what the breakdown needs of all the events, from all of them (as the watch's step does)
    facts = tracefacts.whole_of(ev, entrycal.entry_costs(decoded.Events(ev), wl), wl)
    got = []
    for frame in (ev, ev.iloc[rows].reset_index(drop=True)):
        events = decoded.Events(frame)
        f, info = bd.compute(its.iloc[at].reset_index(drop=True), events, wl, None, arch=arch, path=True, facts=facts)
        paths = sorted(
            (int(at[w]), int(a), int(b), int(everyone[int(th)][1]), int(st), int(h))
            for everyone, seg in info.path
            for w, a, b, th, st, h in zip(seg.w, seg.a, seg.b, seg.thread, seg.state, seg.holder)
        )
        got.append((f[["iteration", *bd.COMPONENTS]].round(3), paths))
    assert got[0][0].equals(got[1][0])
    assert got[0][1] == got[1][1] and len(got[0][1]) > len(at)
