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

# a ping-pong over a pipe between two processes the tracer did not start
PINGPONG = """
import os, sys
r1, w1 = os.pipe(); r2, w2 = os.pipe()
if os.fork() == 0:
    while os.read(r1, 1):
        os.write(w2, b"y")
    os._exit(0)
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
    writes, execve, mmap...); the filter is in the summary and in the table's heading."""
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
    assert {"read", "write", "execve"} <= {c["name"] for c in summary(out)["activity"]["syscalls"]}


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
