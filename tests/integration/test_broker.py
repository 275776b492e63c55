"""Issue 33: under sudo, root lives in the broker (tools/broker.c) alone. An adversary's front
end — a Python program the broker starts as the invoking user, as it starts ipctrace's own —
speaks the broker's protocol directly: every request outside what the broker accepts is
refused with one line and starts nothing; what it accepts starts with the user's bounds and
ids forced. Then the front end as a whole, through the launcher: no Python holds uid 0, nothing
of the user's directory or git configuration runs as root, bounds and clean keep to the user."""

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from analysis import DRIVER, OUTPUT
from conftest import HOME, cli_env, needs_loader, needs_root

pytestmark = needs_root
NOBODY = 65534
BROKER = OUTPUT / "ipctrace-broker"
LAUNCHER = HOME / "ipctrace"


def reachable_by_nobody():
    """The front end under sudo is the user: it must read the checkout (as from /opt)."""
    p = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "test", "-r", str(HOME / "analysis")]
    )
    return p.returncode == 0


needs_reachable = pytest.mark.skipif(
    not reachable_by_nobody(), reason=f"{HOME} is not readable by another user (a course server's checkout is)"
)


@pytest.fixture
def shared():
    d = Path(tempfile.mkdtemp(prefix="ipctrace-test-broker."))
    d.chmod(0o755)
    home = d / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def sudo_env(**extra):
    return {**cli_env(), "SUDO_UID": str(NOBODY), "SUDO_GID": str(NOBODY), "SUDO_USER": "nobody", **extra}


# The adversary's front end: sends one request (kind, args, descriptors from paths it opens)
# and prints the broker's first answer, then the last one if it started something.
ADVERSARY = textwrap.dedent(
    """
    import json, os, socket, sys, array
    kind, args, opened = json.loads(sys.argv[1])
    fds = [os.open(p, os.O_RDONLY | (os.O_DIRECTORY if p.endswith('/') else 0)) for p in opened]
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    null = os.open(os.devnull, os.O_RDWR)
    targets = ",".join(map(str, fds))
    args = [a.replace("FD0", str(fds[0]) if fds else "") for a in args]
    payload = b"\\0".join(x.encode() for x in [kind, "0", targets, *args])
    s = socket.socket(fileno=int(os.environ["IPCTRACE_BROKER_FD"]))
    s.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [theirs.fileno(), null, null, null, *fds]).tobytes())])
    theirs.close()
    first = mine.recv(4096).decode()
    last = first
    while last.startswith("P"):
        last = mine.recv(4096).decode() or "closed"
    print(json.dumps([first, last, os.getresuid()]))
    """
)


def ask(shared, kind, args, opened=()):
    """The broker's answers to one request of the adversary's front end: (first, last, its uids)."""
    script = shared / "adversary.py"
    script.write_text(ADVERSARY)
    p = subprocess.run(
        [str(BROKER), "/usr/bin/python3", "-I", str(script), json.dumps([kind, args, list(opened)])],
        capture_output=True,
        text=True,
        env=sudo_env(),
        cwd=shared,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    first, last, uids = json.loads(p.stdout)
    return first, last, uids


REFUSED = [
    # (what, kind, args, descriptors opened by the adversary)
    ("unknown request", "shell", ["/bin/sh"], ()),
    ("tracer --out a path", "tracer", ["--out", "/etc", "--all-cpus"], ()),
    ("tracer --out a descriptor not passed", "tracer", ["--out", "/proc/self/fd/7", "--all-cpus"], ()),
    ("tracer --user root", "tracer", ["--out", "/proc/self/fd/FD0", "--user", "0:0", "--", "id"], ("/tmp/",)),
    ("tracer --owner root", "tracer", ["--out", "/proc/self/fd/FD0", "--owner", "0:0", "--all-cpus"], ("/tmp/",)),
    ("tracer --only-uid of another", "tracer", ["--out", "/proc/self/fd/FD0", "--only-uid", "0", "-A"], ("/tmp/",)),
    ("tracer --comm-uid root", "tracer", ["--out", "/proc/self/fd/FD0", "--comm-uid", "0", "--comm", "x"], ("/tmp/",)),
    ("tracer --pid of root's", "tracer", ["--out", "/proc/self/fd/FD0", "--pid", "1"], ("/tmp/",)),
    (
        "tracer --calibrate a shell",
        "tracer",
        ["--out", "/proc/self/fd/FD0", "--calibrate", "/bin/sh", "--", "true"],
        ("/tmp/",),
    ),
    (
        "tracer --uprobe by path",
        "tracer",
        ["--out", "/proc/self/fd/FD0", "--uprobe", "/root/x:main", "--", "true"],
        ("/tmp/",),
    ),
    ("tracer ring buffer 4 GiB", "tracer", ["--out", "/proc/self/fd/FD0", "--ringbuf-mb", "4096", "-A"], ("/tmp/",)),
    ("tracer a day long", "tracer", ["--out", "/proc/self/fd/FD0", "--duration", "86400", "-A"], ("/tmp/",)),
    ("tracer --doctor among options", "tracer", ["--doctor"], ()),
    ("driver of another program", "driver", ["exec", "--", "/bin/sh"], ()),
    (
        "driver --owner of its own",
        "driver",
        ["run", "kspin", "--owner", "0:0", "--out", "/proc/self/fd/FD0"],
        ("/tmp/",),
    ),
    ("driver --out a path", "driver", ["run", "kspin", "--out", "/etc"], ()),
    ("hog with a command", "hog", ["hog", "--cpu", "0", "--", "sh"], ()),
    ("doctor with options", "doctor", ["--out", "/etc"], ()),
    ("tracer with an option abbreviated", "tracer", ["--out", "/proc/self/fd/FD0", "--use", "0:0", "-A"], ("/tmp/",)),
    ("tracer with a short option", "tracer", ["--out", "/proc/self/fd/FD0", "-u", "0:0", "--", "id"], ("/tmp/",)),
    ("tracer --pid list too long", "tracer", ["--out", "/proc/self/fd/FD0", "--pid", "1," * 600 + "1"], ("/tmp/",)),
    ("too many arguments", "hog", ["hog"] * 400, ()),
]


@pytest.mark.parametrize("what,kind,args,opened", REFUSED, ids=[r[0] for r in REFUSED])
def test_the_broker_refuses_what_it_does_not_accept(shared, what, kind, args, opened):
    first, _, uids = ask(shared, kind, args, opened)
    assert first.startswith("E") and "\n" not in first, first
    assert uids == [NOBODY] * 3  # the front end it started is the user, every id


@needs_loader
def test_the_broker_forces_the_users_ids_on_the_tracer(shared):
    """An accepted tracer request runs the loader with --only-uid, --owner and --user the
    user's: the command it traces runs as the user (id -u prints it into the results)."""
    out = shared / "home" / "t"
    out.mkdir()
    os.chown(out, NOBODY, NOBODY)
    first, last, _ = ask(shared, "tracer", ["--out", "/proc/self/fd/FD0", "--", "true"], (f"{out}/",))
    assert first.startswith("P") and last == "X0", (first, last)
    for f in out.iterdir():
        assert f.lstat().st_uid == NOBODY, f


def test_the_root_workloads_are_those_of_the_driver():
    """tools/broker.h names the workloads the broker runs as root: exactly those flagged
    needs_root by the driver."""
    listing = json.loads(subprocess.run([str(DRIVER), "list"], capture_output=True, text=True, check=True).stdout)
    flagged = sorted(w["name"] for w in listing["workloads"] if "needs_root" in w.get("flags", []))
    header = (HOME / "tools" / "broker.h").read_text()
    line = next(x for x in header.splitlines() if x.startswith("#define SUDO_ROOT_WORKLOADS "))
    assert sorted(json.loads("[" + line.split(None, 2)[2] + "]")) == flagged


def python_root_ids(proc, seconds):
    """pids of Python processes below proc that held uid 0 in any id, sampled until it ends."""
    root_pid, seen = proc.pid, set()
    end = time.monotonic() + seconds
    while time.monotonic() < end and proc.poll() is None:
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                exe = os.readlink(d / "exe")
                status = (d / "status").read_text()
                ppids = _ancestors(int(d.name))
            except OSError:
                continue
            if root_pid in ppids and "python" in exe:
                uids = next(x for x in status.splitlines() if x.startswith("Uid:")).split()[1:]
                if "0" in uids:
                    seen.add((d.name, tuple(uids)))
        time.sleep(0.02)
    return seen


def _ancestors(pid):
    out = []
    for _ in range(30):
        pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        out.append(pid)
        if pid <= 1:
            break
    return out


@needs_reachable
@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["run", "--help"],
        ["run", "pipe", "-n", "3000", "-w", "100", "-r", "1", "--no-trace", "-q", "-o", "OUT"],
    ],
    ids=["list", "run-help", "run"],
)
def test_no_python_of_the_front_end_holds_root_under_sudo(shared, args):
    """Findings 1 and 2: the front end is the user's from its first instruction; a planted
    analysis/__init__.py in the current directory and a git on PATH never run (no git runs at
    all: the version is recorded at build time)."""
    canary = shared / "canary"
    planted = shared / "home" / "analysis"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(canary)!r}, 'w').write('planted')\n")
    fakebin = shared / "bin"
    fakebin.mkdir()
    (fakebin / "git").write_text(f'#!/bin/sh\necho git >>{canary}\nexec /usr/bin/git "$@"\n')
    (fakebin / "git").chmod(0o755)
    shared.chmod(0o777)
    args = [str(shared / "home" / "o") if a == "OUT" else a for a in args]
    env = sudo_env(PATH=f"{fakebin}:{os.environ['PATH']}")
    p = subprocess.Popen(
        [str(LAUNCHER), *args], cwd=shared / "home", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    held = python_root_ids(p, 60)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert not held, held
    assert not canary.exists(), canary.read_text()
    assert not (shared / "home" / "analysis" / "__pycache__").exists()


@needs_reachable
def test_clean_under_sudo_leaves_other_users_files(shared):
    """Finding 7: clean removes neither another user's file named like ours in /tmp, nor
    leaves a directory of its own there."""
    other = Path(f"/tmp/ipctrace-99994-deadbeef-other{os.getpid()}")
    other.write_text("not ours")
    os.chown(other, 1, 1)  # daemon's
    before = set(Path("/tmp").glob("ipctrace-*"))
    try:
        p = subprocess.run(
            [str(LAUNCHER), "clean"], env=sudo_env(), cwd=shared / "home", capture_output=True, text=True
        )
        assert p.returncode == 0, p.stderr
        assert other.exists()
        assert set(Path("/tmp").glob("ipctrace-*")) == before
    finally:
        other.unlink(missing_ok=True)


@needs_reachable
@needs_loader
def test_a_trace_beyond_the_bounds_is_refused_in_one_line(shared):
    """Finding 6: a 4 GiB ring buffer and a day-long trace are refused before anything
    starts (exit 2, one line)."""
    for extra in (["--ringbuf-mb", "4096"], ["-d", "86400"]):
        p = subprocess.run(
            [str(LAUNCHER), "trace", "--comm", "nosuchproc", "-d", "1", *extra, "-q", "-o", str(shared / "home" / "x")],
            env=sudo_env(),
            cwd=shared / "home",
            capture_output=True,
            text=True,
        )
        assert p.returncode == 2, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "under sudo at most" in p.stderr, p.stderr
        assert not (shared / "home" / "x").exists()


@needs_reachable
@needs_loader
def test_bench_under_sudo_writes_the_users_json_without_nan(shared):
    """Finding 7: bench works under sudo (its tracer through the broker), and two rounds, too
    few for an interval, give null intervals in valid JSON, not NaN; perf and bpftrace, which
    would run as root with the user's choice, are refused in one line."""
    out = shared / "home" / "bench.json"
    p = subprocess.run(
        [str(LAUNCHER), *"bench --placement same-cpu --rounds 2 --iterations 500 --warmup 50".split()]
        + [*"--syscall-iterations 0 --storm-iterations 0 --configs untraced,ipctrace --json-file".split(), str(out)],
        env=sudo_env(),
        cwd=shared / "home",
        capture_output=True,
        text=True,
    )
    assert p.returncode in (0, 1) and "internal error" not in p.stderr, p.stderr  # 1: a target missed
    result = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in bench's JSON"))
    row = result["cases"]["same-cpu"]["ipctrace"]
    assert row["ratio"] > 0 and row["ratio_ci95"] is None
    assert out.lstat().st_uid == NOBODY
    p = subprocess.run(
        [str(LAUNCHER), "bench", "--configs", "untraced,bpftrace", "--rounds", "1"],
        env=sudo_env(),
        cwd=shared / "home",
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr


ROOT_WRITER = """
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.close(w)
    while os.read(r, 16): pass
    os._exit(0)
os.close(r)
print(os.getpid(), flush=True)
for _ in range(600):
    os.write(w, b"0046"); time.sleep(0.01)
"""


@needs_reachable
@needs_loader
@pytest.mark.parametrize("mode", [["--messages"], ["-e", "write", "--sample-hz", "99"]], ids=["messages", "samples"])
def test_a_system_wide_trace_under_sudo_records_nothing_of_roots(shared, mode):
    """Finding 3: `trace -a` for a sudo user keeps to the user's tasks: a root process writing
    a secret into a pipe meanwhile has no record, no message hash, no sample."""
    import pyarrow.parquet as pq

    writer = subprocess.Popen(["/usr/bin/python3", "-c", ROOT_WRITER], stdout=subprocess.PIPE, text=True)
    try:
        root_pid = int(writer.stdout.readline())
        out = shared / "home" / "a"
        p = subprocess.run(
            [str(LAUNCHER), "trace", "-a", "-d", "2", *mode, "-q", "-o", str(out)],
            env=sudo_env(),
            cwd=shared / "home",
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        writer.kill()
        writer.wait()
    assert p.returncode == 0, p.stderr
    pids = pq.read_table(out / "events.parquet", columns=["pid"]).column("pid").to_pylist()
    assert pids and root_pid not in pids
    for f in out.glob("*.json"):
        assert f'"pid": {root_pid},' not in f.read_text(), f


@needs_reachable
@needs_loader
def test_a_setuid_program_a_traced_command_runs_leaves_the_trace(shared):
    """Finding 5: the user's command execs a setuid program (mount): from its exec on nothing
    of it is recorded, the trace says so in one line, and the trace succeeds."""
    out = shared / "home" / "s"
    p = subprocess.run(
        [str(LAUNCHER), "trace", "-q", "-o", str(out), "--", "sh", "-c", "mount >/dev/null; cat /etc/hostname"],
        env=sudo_env(),
        cwd=shared / "home",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    left = json.loads((out / "summary.json").read_text())["trace"]["left_trace"]
    assert left["count"] >= 1 and any(t["comm"] == "mount" for t in left["tasks"]), left


@needs_reachable
@pytest.mark.parametrize("name", ["samples.json", "workload.json", "iterations.bin"])
def test_a_root_file_moved_into_a_run_stays_roots(shared, name):
    """Finding 4: nothing is handed to the user after a run: a root-only file the user moves
    into the results directory while the run is going, under a name the run writes, stays
    root's and unreadable to them."""
    home = shared / "home"
    secret = home / "grades.txt"
    secret.write_text("secret\n")
    secret.chmod(0o600)  # root's, in the user's directory: the user may rename it
    out = home / "h"
    runner = subprocess.Popen(
        [
            str(LAUNCHER),
            "run",
            "pipe",
            "-n",
            "50000",
            "-w",
            "100",
            "-r",
            "1",
            "--sample-hz",
            "99",
            "-q",
            "-o",
            str(out),
        ],
        env=sudo_env(),
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "INCOMPLETE").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "mv", str(secret), str(out / name)]
    )
    runner.communicate(timeout=300)
    for f in [out / name, out / "untraced" / name]:
        if f.exists() and f.read_text(errors="replace").startswith("secret"):
            assert f.lstat().st_uid == 0, f


@needs_reachable
@needs_loader
def test_a_third_trace_at_once_is_refused(shared):
    """Finding 6: a sudo user runs at most two traces at once; the third is refused, one line."""
    env, home = sudo_env(), shared / "home"
    args = ["trace", "--comm", "nosuchproc", "-d", "20", "-q", "-o"]
    held = [subprocess.Popen([str(LAUNCHER), *args, str(home / f"t{i}")], env=env, cwd=home) for i in range(2)]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(1 for i in range(2) if (home / f"t{i}" / "events.bin").exists()) < 2:
            time.sleep(0.1)
        p = subprocess.run([str(LAUNCHER), *args, str(home / "t2")], env=env, cwd=home, capture_output=True, text=True)
        assert p.returncode == 2 and "2 traces at once" in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
        assert not (home / "t2").exists()  # refused before anything started: nothing left
    finally:
        for h in held:
            h.send_signal(2)
        for h in held:
            h.wait(timeout=120)
