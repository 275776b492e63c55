"""Who ipctrace acts as: the front end is never root for a sudo user.

As plain root (a VM, CI) the front end is root and starts root's programs itself. Under sudo
(euid 0 and SUDO_UID of another user) the launcher execs the broker (tools/broker.c) instead
of Python: the broker starts this front end as the invoking user — every id theirs, no
capabilities, `python -I` — and keeps root for itself alone. What needs root (the tracer, a
workload that needs root, a busy loop below nice 0, the loader's doctor, tracefs, root's
leftovers of dead runs) the front end asks the broker for (analysis/run/broker.py), handing it
the descriptors the program is to use; everything else the front end does with the user's
own rights, since it has no others. docs/DESIGN.md draws the processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from analysis import OUTPUT
from analysis.errors import UsageError
from analysis.run import broker

PR_SET_PDEATHSIG = 1
BROKER = OUTPUT / "ipctrace-broker"
# What the programs we start keep of our environment: nothing of sudo's or of the front end's own.
_NOT_FOR_THE_COMMAND = ("SUDO_",)
_OURS = ("PYTHONPATH", "OPENBLAS_NUM_THREADS", "MAIL", broker.ENV)


def sudo_uid() -> int | None:
    """The invoking user's uid when we run as root for another user through sudo."""
    text = os.environ.get("SUDO_UID")
    if os.geteuid() != 0 or text is None:
        return None
    try:
        uid = int(text)
        int(os.environ.get("SUDO_GID", text))
    except ValueError:
        raise UsageError(
            f"SUDO_UID={text!r}, SUDO_GID={os.environ.get('SUDO_GID', '')!r}: not numeric user and group ids"
        ) from None
    return uid or None


def start(argv: list[str]) -> None:
    """At start-up, before any path is touched or the command line imported. Root for a sudo
    user here means the front end was started without the launcher (`python -m analysis`):
    it becomes the broker's front end now, the user's. `setup` (installing packages) is the
    one command whose Python runs as root."""
    try:
        uid = sudo_uid()
    except UsageError as e:
        os.write(2, f"ipctrace: {e}\n".encode())
        os._exit(2)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command == "setup" or uid is None:
        return
    if not os.access(BROKER, os.X_OK):
        os.write(2, f"ipctrace: {BROKER} is not built: run make (as root) first\n".encode())
        os._exit(2)
    os.execv(BROKER, [str(BROKER), sys.executable, "-I", "-m", "analysis", *argv])


def has_root() -> bool:
    """May we start root's programs (root, or the broker's front end)?"""
    return os.geteuid() == 0 or broker.available()


def brokered() -> bool:
    """True in the front end the broker started for a sudo user."""
    return broker.available()


def check_bounds(ringbuf_mb: float = 0, duration_s: float = 0) -> None:
    """Under sudo, the bounds the broker keeps for a user (tools/broker.h), said before
    anything starts: one line each."""
    if not brokered():
        return
    lim = broker.limits()
    most_mb, most_s = lim.get("SUDO_MAX_RINGBUF_MB", 0), lim.get("SUDO_MAX_DURATION_S", 0)
    if most_mb and ringbuf_mb > most_mb:
        raise UsageError(f"--ringbuf-mb {ringbuf_mb:g}: under sudo at most {most_mb} MiB a trace")
    if most_s and duration_s > most_s:
        raise UsageError(f"--duration {duration_s:g}: under sudo at most {most_s} s a trace")


def _die_with_parent() -> None:
    """SIGTERM when ipctrace dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def child_setup(rtprio: int = 0) -> Callable[[], None]:
    """preexec_fn of a program we start ourselves (as root, or a workload with our rights):
    RLIMIT_RTPRIO for --priority (root's to raise), and it ends with us."""

    def prepare() -> None:
        if rtprio:
            _raise_rtprio(rtprio)
        _die_with_parent()

    return prepare


def _raise_rtprio(priority: int) -> None:
    """RLIMIT_RTPRIO of at least priority, so that the workload may ask for that real-time
    priority (root's to raise)."""
    old = resource.getrlimit(resource.RLIMIT_RTPRIO)
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_RTPRIO, (max(priority, old[0]), max(priority, old[1])))


def _kind(cmd: list[str]) -> str:
    """The broker's name for the program cmd runs."""
    from analysis import DRIVER, LOADER

    if cmd[0] == str(LOADER):
        return "doctor" if cmd[1:] == ["--doctor"] else "tracer"
    if cmd[0] == str(DRIVER) and cmd[1:2] == ["hog"]:
        return "hog"
    if cmd[0] == str(DRIVER) and cmd[1:2] == ["run"]:
        return "driver"
    raise UsageError(f"{Path(cmd[0]).name}: not a program ipctrace runs as root under sudo")


def popen_root(cmd: list[str], rtprio: int = 0, **kw: Any) -> Any:
    """subprocess.Popen of a program that needs root (or, for --priority, root's rlimit): the
    broker's under sudo, ours as root. kw: Popen's stdin, stdout, stderr, pass_fds, text; its
    process_group=0 is the broker's way anyway; env and preexec_fn are not the front end's to
    give a root program."""
    if broker.available():
        for k in ("process_group", "env", "preexec_fn", "start_new_session"):
            kw.pop(k, None)
        kind = _kind(cmd)
        # (the broker adds --doctor itself: that request takes nothing)
        return broker.BrokeredProcess(kind, [] if kind == "doctor" else cmd[1:], rtprio=rtprio, **kw)
    kw.setdefault("env", command_environment())
    return subprocess.Popen(cmd, preexec_fn=child_setup(rtprio), **kw)


def run_as_root(cmd: list[str], timeout: float | None = None, **kw: Any) -> subprocess.CompletedProcess:
    """subprocess.run of a program that needs root (the loader's doctor...)."""
    text = kw.pop("text", False)
    if kw.pop("capture_output", False):
        kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with popen_root(cmd, text=text, **kw) as p:
        out, err = p.communicate(timeout=timeout)
        return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def command_environment() -> dict[str, str]:
    """The environment of the programs we start (the tracer passes it on to the command it
    traces, less IPCTRACE_*): ours without sudo's variables and the front end's own."""
    return {k: v for k, v in os.environ.items() if not k.startswith(_NOT_FOR_THE_COMMAND) and k not in _OURS}
