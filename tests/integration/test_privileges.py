"""Privileges, for real: without CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN tracing is refused with
one line naming what is missing; under sudo the broker starts the tracer as root while the
front end and the workload run as the invoking user (SUDO_UID/SUDO_GID) and the results are theirs; as plain root everything
stays root; the files of a run live in a private 0700 directory of whoever runs it."""

import contextlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from analysis import OUTPUT
from conftest import cli_argv, cli_env, needs_loader, needs_root, run_argv, spawn

pytestmark = needs_root
traced_only = needs_loader
NOBODY = 65534
SMALL = ["--iterations", "2000", "--warmup", "100", "--runs", "1", "--quiet"]


@pytest.fixture
def shared_tmp():
    """A directory other users can reach (pytest's own is root's 0700)."""
    d = Path(tempfile.mkdtemp(prefix="ipctrace-test-priv."))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def nobody_home(shared_tmp):
    """A directory of the invoking user's own: --out is made there with their rights."""
    home = shared_tmp / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    return home


@pytest.fixture
def reachable_output(shared_tmp):
    """The built programs (IPCTRACE_OUTPUT) where the invoking user can reach them, as in
    their own checkout: one under a directory only root may enter (a 0700 temporary
    directory) would refuse them the driver."""
    out = shared_tmp / "output"
    out.mkdir()
    for p in OUTPUT.iterdir():
        if p.is_file() and os.access(p, os.X_OK):
            shutil.copy2(p, out / p.name)
    out.chmod(0o755)
    return out


def cli(args, env=None, prefix=(), **kw):
    return subprocess.run(
        [*prefix, *cli_argv(*args)],
        capture_output=True,
        text=True,
        env={**cli_env(), **(env or {})},
        timeout=120,
        **kw,
    )


NO_TRACING_CAPS = ["setpriv", "--inh-caps=-all", "--bounding-set=-bpf,-perfmon,-sys_admin"]


@traced_only
@pytest.mark.skipif(not shutil.which("setpriv"), reason="setpriv (util-linux) is missing")
def test_missing_capability_is_named(tmp_path):
    out = tmp_path / "r"
    p = cli(["run", "pipe", *SMALL, "--out", str(out)], prefix=NO_TRACING_CAPS)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "missing CAP_BPF CAP_PERFMON" in lines[0] and "CAP_SYS_ADMIN" in lines[0]
    assert not out.exists()


@pytest.mark.skipif(not shutil.which("setpriv"), reason="setpriv (util-linux) is missing")
def test_untraced_run_needs_no_tracing_capability(tmp_path):
    p = cli(["run", "pipe", "--no-trace", *SMALL, "--out", str(tmp_path / "r")], prefix=NO_TRACING_CAPS)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["metrics"]["rtt"]["n"] == 2000


def uid_of(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[2])  # effective
    except OSError:
        return None


def ours(tops, pid):
    """Whether pid descends from top (the run hands its programs the results directory as
    /proc/self/fd/N, so they are found by ancestry, not by the path in their arguments)."""
    for _ in range(20):
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid in tops:
            return True
        if pid <= 1:
            return False
    return False


def watch(proc, out_pattern, seconds=60, also=()):
    """{comm: {effective uids}} of the run's processes (the front end's own child under the
    name "child"), and the private directories they made."""
    seen, dirs = {}, {}
    end = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < end:
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                comm = (d / "comm").read_text().strip()
            except OSError:
                continue
            if (out_pattern in cmd or ours({proc.pid, *(p.pid for p in also)}, int(d.name))) and comm in (
                "ipcbench",
                "ipctrace-loader",
            ):
                uid = uid_of(int(d.name))
                try:
                    ppid = int((d / "stat").read_text().rpartition(")")[2].split()[1])
                except (OSError, IndexError):
                    continue
                if uid is not None:
                    seen.setdefault(comm, set()).add(uid)
                    if ppid == proc.pid:
                        seen.setdefault("child", set()).add((comm, uid))
                for p in Path("/tmp").glob(f"ipctrace-{d.name}-*"):
                    with contextlib.suppress(OSError):
                        dirs[p] = os.lstat(p)
        time.sleep(0.2)
    return seen, dirs


@pytest.mark.parametrize("traced", [False, pytest.param(True, marks=traced_only)], ids=["untraced", "traced"])
def test_sudo_runs_the_workload_as_the_invoking_user(nobody_home, reachable_output, traced):
    out = nobody_home / "results" / "unix"
    proc = spawn(
        run_argv("unix-stream", str(out), *([] if traced else ["--no-trace"]), iterations="30000", warmup="100"),
        env={**cli_env(), "SUDO_UID": str(NOBODY), "SUDO_GID": str(NOBODY), "IPCTRACE_OUTPUT": str(reachable_output)},
    )
    seen, dirs = watch(proc, str(out))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert seen.get("ipcbench") == {NOBODY}, seen
    # proc is the broker (root's one process): the tracer is its child and keeps root, the
    # workload is the user's; untraced, the broker starts nothing (the front end, the user's,
    # starts the driver itself)
    if traced:
        assert seen["child"] == {("ipctrace-loader", 0)}, seen
    else:
        assert "ipctrace-loader" not in seen and "child" not in seen, seen
    assert dirs, "no private directory seen"
    for st in dirs.values():
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == NOBODY
    for path in [nobody_home / "results", *(nobody_home / "results").rglob("*")]:
        st = path.lstat()
        assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY), path
    names = {p.name for p in out.iterdir()}
    assert {"summary.json", "iterations.parquet", "meta.json"} <= names
    assert not traced or "events.parquet" in names


def test_plain_root_stays_root(shared_tmp):
    out = shared_tmp / "r"
    env = cli_env()
    env.pop("SUDO_UID", None)
    env.pop("SUDO_GID", None)
    proc = spawn(run_argv("pipe", str(out), "--no-trace", iterations="30000", warmup="100"), env=env)
    seen, _ = watch(proc, str(out))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert seen.get("ipcbench") == {0}
    assert all(p.lstat().st_uid == 0 for p in [out, *out.iterdir()])


def test_two_runs_use_distinct_private_directories(shared_tmp):
    procs = [
        spawn(run_argv("unix-stream", str(shared_tmp / k), "--no-trace", iterations="30000", warmup="100"))
        for k in ("a", "b")
    ]
    _, dirs = watch(procs[0], str(shared_tmp), also=procs[1:])
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert len(dirs) >= 2, dirs
    assert all(stat.S_IMODE(st.st_mode) == 0o700 for st in dirs.values())
    assert not any(p.exists() for p in dirs), "a private directory outlived its run"


def test_sudo_keeps_root_for_a_workload_that_needs_it(nobody_home):
    """zmq-tcp-netns makes network namespaces (needs_root): under sudo it stays root, and its
    results are still the invoking user's."""
    out = nobody_home / "netns"
    p = cli(
        [
            "run",
            "zmq-tcp-netns",
            "--no-trace",
            "--iterations",
            "200",
            "--warmup",
            "10",
            "--runs",
            "1",
            "--quiet",
            "--out",
            str(out),
        ],
        env={"SUDO_UID": str(NOBODY), "SUDO_GID": str(NOBODY)},
    )
    assert p.returncode == 0, p.stderr
    assert all(path.lstat().st_uid == NOBODY for path in [out, *out.iterdir()])
