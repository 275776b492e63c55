"""The tracer's and the driver's side of the sudo policy (issue 33): `ipctrace-loader --only-uid
UID` records only tasks whose real, effective, saved and file-system uids are all UID, and a
followed task that takes another user's rights (a setuid program, a credential call) leaves
the trace, said on stderr and in trace.json; `ipcbench --owner UID:GID` makes every file the
user's as it is made; both write into a results directory passed as an inherited descriptor."""

import json
import os
import platform
import pwd
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from analysis import DRIVER, LOADER
from analysis.store import events as ev
from analysis.store import records, syscalls
from conftest import needs_driver, needs_root, needs_tracing

NOBODY = 65534
SWITCH = records.TYPES.index("switch") + 1
MSG = records.TYPES.index("msg") + 1
SYS_ENTER = records.TYPES.index("sys_enter") + 1
CRED_CALLS = ["setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "capset"]
# a system interpreter: a pyenv or venv one may sit where nobody cannot reach
PYTHON = "/usr/bin/python3"

has_nobody = pytest.mark.skipif(
    not any(p.pw_uid == NOBODY for p in pwd.getpwall()), reason=f"no user {NOBODY} (nobody)"
)
pytestmark = [needs_root, has_nobody]


def loader(out, *args, timeout=120, **kw):
    return subprocess.run(
        [str(LOADER), "--out", str(out), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",  # a directory every user may enter: the traced commands run as nobody
        **kw,
    )


def trace_of(out):
    recs, _, _ = ev.read_events_bin(Path(out) / "events.bin")
    return recs, json.loads((Path(out) / "trace.json").read_text())


def only_switches_to_recorded(recs, tids, tj):
    """The records of tids are at most switches whose other side (the task switched in) is a
    task the trace recorded: a user's task that replaced them on the CPU."""
    mine = recs[np.isin(recs["tid"], list(tids))]
    recorded = set(tj["tids"])
    other = (mine["a0"] & 0xFFFFFFFF).astype(np.int64)
    bad = (mine["type"] != SWITCH) | ~np.isin(other, list(recorded)) | np.isin(other, list(tids))
    return mine[bad]


PINGPONG = """
import os, sys, time
r, w = os.pipe()
print(os.getpid(), flush=True)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    os.write(w, sys.argv[1].encode())
    os.read(r, 64)
    time.sleep(0.0005)
"""


def pipe_writer(text, as_nobody, seconds=6.0):
    """A process writing into (and reading from) a pipe for seconds: root's or nobody's. (Popen, pid)"""
    wrap = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if as_nobody else []
    p = subprocess.Popen(
        [*wrap, PYTHON, "-c", PINGPONG, text, str(seconds)], stdout=subprocess.PIPE, text=True, cwd="/"
    )
    assert p.stdout is not None
    return p, int(p.stdout.readline())


def attach_modes():
    """tp_btf and raw_tp (the classic tracepoints need tracefs mounted)."""
    modes = ["tp_btf", "raw_tp"]
    if Path("/sys/kernel/tracing/events").is_dir() or Path("/sys/kernel/debug/tracing/events").is_dir():
        modes.append("tracepoint")
    return modes


@needs_tracing
@pytest.mark.parametrize("attach", attach_modes())
@pytest.mark.parametrize(
    ("only_uid", "root_recorded"),
    [
        (None, True),  # plain root: every task, as before --only-uid
        (NOBODY, False),  # the sudo user's tasks only: none of root's
    ],
    ids=["all-users", "only-nobody"],
)
def test_all_cpus_records_nothing_of_another_users_task(tmp_path, attach, only_uid, root_recorded):
    """`trace -a --messages` as the broker starts it for a sudo user: while a root process and
    one of the user's write into pipes, the user's writes are recorded (events and message
    hashes) and nothing of root's process is: no system call, no message, no wake-up, no page
    fault; at most a switch where it gave the CPU to one of the user's tasks. Without
    --only-uid both are recorded."""
    root, root_pid = pipe_writer("from-root", as_nobody=False)
    user, user_pid = pipe_writer("from-user", as_nobody=True)
    try:
        extra = ["--only-uid", only_uid] if only_uid is not None else []
        out = tmp_path / "trace"
        r = loader(out, "--all-cpus", "--messages", "--attach", attach, "--duration", "1.5", *extra)
        assert r.returncode == 0, r.stderr
    finally:
        for p in (root, user):
            p.kill()
            p.wait()
    recs, tj = trace_of(out)
    of_root = recs[recs["tid"] == root_pid]
    of_user = recs[recs["tid"] == user_pid]
    # the user's process is traced, messages and all
    assert (of_user["type"] == SYS_ENTER).sum() > 100 and (of_user["type"] == MSG).sum() > 100
    assert user_pid in tj["tids"]
    if root_recorded:
        assert (of_root["type"] == MSG).sum() > 100 and root_pid in tj["tids"]
        assert tj["only_uid"] is None and tj["left_trace"] == {"count": 0, "tasks": []}
        return
    assert len(only_switches_to_recorded(recs, {root_pid}, tj)) == 0
    assert root_pid not in tj["tids"] and root_pid not in tj["pids"]
    assert tj["only_uid"]["uid"] == NOBODY
    # every task the trace says it recorded is nobody's (those still alive)
    for tid in tj["tids"]:
        try:
            uids = next(x for x in Path(f"/proc/{tid}/status").read_text().splitlines() if x.startswith("Uid:"))
        except (FileNotFoundError, ProcessLookupError):
            continue
        assert uids.split()[1:] == [str(NOBODY)] * 4, (tid, uids)
    # no subject of any record (but switches to a recorded task, and idle) is another user's
    subjects = set(recs["tid"].tolist()) - set(tj["tids"]) - {0}
    assert len(only_switches_to_recorded(recs, subjects, tj)) == 0


CASES = [
    # (id, loader options, command, the task that leaves: its comm after, why; a task still traced)
    (
        "setuid-exec",
        ["--user", f"{NOBODY}:{NOBODY}", "--only-uid", NOBODY],
        ["sh", "-c", "mount >/dev/null; cat /etc/hostname"],
        "mount",
        "setuid exec",
        "cat",
    ),
    (
        "credential-call",
        ["--only-uid", 0],
        [
            "sh",
            "-c",
            f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups cat /etc/hostname; cat /etc/hostname",
        ],
        "setpriv",
        "credential change",
        "cat",
    ),
]


@needs_tracing
@pytest.mark.parametrize(
    ("options", "command", "leaves", "why", "traced"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_task_that_takes_another_users_rights_leaves_the_trace(tmp_path, options, command, leaves, why, traced):
    """A followed task that becomes another user's (a setuid program's exec: mount gains euid 0;
    setpriv's setresuid) is recorded up to then and not after; the loader says so in one line
    and trace.json lists it; the command's other children (cat) are still traced."""
    out = tmp_path / "t"
    r = loader(out, *options, "--", *command)
    assert r.returncode == 0, r.stderr
    recs, tj = trace_of(out)
    (left,) = tj["left_trace"]["tasks"]
    assert tj["left_trace"]["count"] == 1 and (left["comm"], left["why"]) == (leaves, why)
    said = [x for x in r.stderr.splitlines() if "another user's rights" in x]
    assert said == [
        f"ipctrace-loader: pid {left['pid']} ({leaves}) took another user's rights ({why}) and is no longer traced"
    ]
    tid, at = left["tid"], left["ts"]
    before, after = recs[(recs["tid"] == tid) & (recs["ts"] < at)], recs[(recs["tid"] == tid) & (recs["ts"] > at)]
    assert (before["type"] == SYS_ENTER).sum() > 0  # it was traced until then
    assert len(only_switches_to_recorded(after, {tid}, tj)) == 0
    # the other child of the command, of the user's, is still traced
    names = {int(t): v["comm"] for t, v in tj["tasks"].items()}
    others = [t for t in tj["tids"] if names.get(t) == traced and t != tid]
    assert others and any((recs[recs["tid"] == t]["type"] == SYS_ENTER).sum() > 10 for t in others)
    # the calls checked are the project's numbers for them on this architecture
    arch = platform.machine()
    assert tj["only_uid"]["calls"] == {n: nr for nr, n in syscalls.numbers(arch, CRED_CALLS).items()}


@needs_tracing
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--user", f"{NOBODY}:{NOBODY}", "--only-uid", 0, "--", "true"], "--only-uid 0 and --user 65534"),
        (["--only-uid", "nobody", "--", "true"], "--only-uid wants a user id, not 'nobody'"),
        (["--only-uid", "-1", "--", "true"], "--only-uid wants a user id"),
        (["--only-uid", "4294967295", "--", "true"], "--only-uid wants a user id"),
    ],
)
def test_only_uid_refuses_what_cannot_hold_in_one_line(tmp_path, args, says):
    r = loader(tmp_path / "t", *args)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1 and says in lines[0], r.stderr
    assert not (tmp_path / "t" / "events.bin").exists()


def _owners(d):
    return {p.name: (p.lstat().st_uid, p.lstat().st_gid) for p in [Path(d), *Path(d).iterdir()]}


@needs_driver
@pytest.mark.parametrize("how", ["path", "/dev/fd", "/proc/self/fd"])
def test_ipcbench_owner_gives_every_file_it_makes(tmp_path, how):
    """ipcbench --owner UID:GID (a workload that runs as root for a sudo user): the files it
    makes are the user's as they are made; through a path (the directory and a new --progress
    file made by it) or through descriptors it inherits (the directory and the progress file
    the front end made, which stay as they were)."""
    run = [str(DRIVER), "run", "pipe", "--iterations", "300", "--warmup", "30", "--runs", "1"]
    owner = ["--owner", f"{NOBODY}:{NOBODY}"]
    if how == "path":
        out, progress = tmp_path / "r", tmp_path / "progress"
        r = subprocess.run([*run, *owner, "--out", out, "--progress", progress], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert _owners(out) == {
            "r": (NOBODY, NOBODY),
            "iterations.bin": (NOBODY, NOBODY),
            "workload.json": (NOBODY, NOBODY),
        }
        assert (progress.stat().st_uid, progress.stat().st_gid) == (NOBODY, NOBODY)
    else:
        out = tmp_path / "r"
        out.mkdir()
        progress = out / ".progress"
        pfd = os.open(progress, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        dfd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
        try:
            r = subprocess.run(
                [*run, *owner, "--out", f"{how}/{dfd}", "--progress", f"{how}/{pfd}"],
                capture_output=True,
                text=True,
                pass_fds=(dfd, pfd),
            )
        finally:
            os.close(dfd)
            os.close(pfd)
        assert r.returncode == 0, r.stderr
        assert _owners(out) == {
            "r": (0, 0),
            ".progress": (0, 0),
            "iterations.bin": (NOBODY, NOBODY),
            "workload.json": (NOBODY, NOBODY),
        }
    assert int.from_bytes(progress.read_bytes()[:8], sys.byteorder) == 300
    assert json.loads((out / "workload.json").read_text())["status"] == "complete"


@needs_tracing
@pytest.mark.parametrize("how", ["/dev/fd", "/proc/self/fd"])
def test_the_tracer_writes_into_an_inherited_directory_descriptor(tmp_path, how):
    """The broker passes the results directory the user opened as /dev/fd/N: the loader makes its
    files there (the user's with --owner), as through a path."""
    out = tmp_path / "r"
    out.mkdir()
    dfd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        r = loader(f"{how}/{dfd}", "--owner", f"{NOBODY}:{NOBODY}", "--", "true", pass_fds=(dfd,))
    finally:
        os.close(dfd)
    assert r.returncode == 0, r.stderr
    assert _owners(out) == {"r": (0, 0), "events.bin": (NOBODY, NOBODY), "trace.json": (NOBODY, NOBODY)}
    assert json.loads((out / "trace.json").read_text())["status"] == "complete"


@needs_tracing
@pytest.mark.parametrize(("as_nobody", "traced"), [(True, True), (False, False)], ids=["users", "roots"])
def test_pid_follows_only_the_users_tasks(tmp_path, as_nobody, traced):
    """--pid with --only-uid: the user's running shell is followed until its child becomes a
    setuid program (mount), which leaves, while its later child (cat) is traced; a root
    process named by --pid is not recorded at all (its pid is the root of the trace)."""
    wrap = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if as_nobody else []
    script = "sleep 1; mount >/dev/null; cat /etc/hostname >/dev/null; sleep 0.3"
    sh = subprocess.Popen([*wrap, "sh", "-c", script], cwd="/")
    try:
        out = tmp_path / "t"
        r = loader(out, "--pid", sh.pid, "--only-uid", NOBODY)
        assert r.returncode == 0, r.stderr
    finally:
        sh.kill()
        sh.wait()
    recs, tj = trace_of(out)
    names = {int(t): v["comm"] for t, v in tj["tasks"].items()}
    if not traced:
        assert len(only_switches_to_recorded(recs, {sh.pid}, tj)) == 0
        assert (recs["type"] == SYS_ENTER).sum() == 0 and tj["left_trace"]["count"] == 0
        return
    assert (recs[recs["tid"] == sh.pid]["type"] == SYS_ENTER).sum() > 0
    (left,) = tj["left_trace"]["tasks"]
    assert (left["comm"], left["why"]) == ("mount", "setuid exec")
    after = recs[(recs["tid"] == left["tid"]) & (recs["ts"] > left["ts"])]
    assert len(only_switches_to_recorded(after, {left["tid"]}, tj)) == 0
    cats = [t for t in tj["tids"] if names.get(t) == "cat"]
    assert cats and (recs[np.isin(recs["tid"], cats)]["type"] == SYS_ENTER).sum() > 10


@needs_tracing
def test_comm_follows_only_the_users_tasks_of_that_name(tmp_path):
    """--comm NAME with --only-uid: of two processes that exec into NAME during the trace, the
    user's is traced and root's is not."""
    nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # cat then waits on its stdin: followed from its exec, or found running by name if the
    # probes attach after it
    script = "sleep 1.5; exec cat /etc/hostname -"
    shells = [
        subprocess.Popen([*wrap, "sh", "-c", script], cwd="/", stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        for wrap in ([], nobody)
    ]
    try:
        out = tmp_path / "t"
        r = loader(out, "--comm", "cat", "--only-uid", NOBODY, "--duration", "3")
        assert r.returncode == 0, r.stderr
    finally:
        for p in shells:
            p.kill()
            p.wait()
            p.stdin.close()
    recs, tj = trace_of(out)
    root_cat, user_cat = (p.pid for p in shells)  # the shells exec into cat: same pids
    assert (recs[recs["tid"] == user_cat]["type"] == SYS_ENTER).sum() > 10 and user_cat in tj["tids"]
    assert len(only_switches_to_recorded(recs, {root_cat}, tj)) == 0 and root_cat not in tj["tids"]
