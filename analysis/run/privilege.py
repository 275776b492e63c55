"""Who ipctrace acts as: root only for what needs it, the invoking user for the rest.

Under sudo (euid 0 and SUDO_UID of another user), at start-up and before any path is touched:
- a command that needs no BPF (report, export, collect, compare, explain, list, ...) gives up
  root for good: the user's groups, gid and uid, real, effective and saved;
- a command that loads BPF or starts workloads (ROOT_COMMANDS) is *lowered*: real and saved
  uid/gid stay 0, the effective ones and the groups become the user's. Every path the front end
  opens, makes or reads is then opened with the user's rights (the file-system ids follow the
  effective ones), the user cannot ptrace or signal it (its real and saved ids are root's, and
  the change of ids made it non-dumpable), and only the programs it starts regain root, in the
  child, between fork and exec (`root_child`): the tracer, a workload that makes namespaces or
  containers, the removal of ipctrace's own IPC objects. A workload that needs no root runs with
  all its ids the user's (`user_child`).
In both cases HOME, USER and LOGNAME are the user's and caches go to a private directory, so
that no library writes where root's rights and a user's links meet.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import resource
import shutil
import signal
import tempfile
from dataclasses import dataclass

from analysis.errors import UsageError

# Commands whose front end keeps the means to start root's programs (lowered, not dropped).
ROOT_COMMANDS = frozenset({"run", "trace", "validate", "bench", "bench-workloads", "sweep", "suite", "lab"})
# Commands that name no path of a user's and do only root's work: they stay root.
ROOT_ONLY = frozenset({"clean", "setup", "doctor"})
PR_SET_PDEATHSIG = 1
# What the programs we start keep of our environment: nothing of sudo's (the tracer removes
# ipctrace's own IPCTRACE_* settings, which it reads, from the command it starts).
_NOT_FOR_THE_COMMAND = ("SUDO_",)
_OURS = ("PYTHONPATH", "OPENBLAS_NUM_THREADS", "MPLCONFIGDIR", "MAIL")


@dataclass(frozen=True)
class Invoker:
    """The user who ran `sudo ipctrace`."""

    uid: int
    gid: int
    name: str
    home: str
    shell: str
    groups: tuple[int, ...]


# Set once by start(): the invoking user when we run for one under sudo, else None.
INVOKER: Invoker | None = None
_private: str | None = None


def invoker_from_env() -> Invoker | None:
    """The invoking user of sudo (SUDO_UID/SUDO_GID) when we are root for another user."""
    if os.geteuid() != 0 or "SUDO_UID" not in os.environ:
        return None
    try:
        uid = int(os.environ["SUDO_UID"])
        gid = int(os.environ.get("SUDO_GID", uid))
    except ValueError:
        raise UsageError(
            f"SUDO_UID={os.environ['SUDO_UID']!r}, SUDO_GID={os.environ.get('SUDO_GID', '')!r}: "
            f"not numeric user and group ids"
        ) from None
    if uid == 0:
        return None
    try:
        pw = pwd.getpwuid(uid)
        name, home, shell = pw.pw_name, pw.pw_dir, pw.pw_shell
        groups = tuple(os.getgrouplist(name, gid))
    except KeyError:
        name, home, shell, groups = str(uid), "/", "/bin/sh", (gid,)
    return Invoker(uid, gid, name, home, shell, groups)


def start(command: str | None) -> Invoker | None:
    """At start-up, before any path is touched: drop or lower our rights for the command."""
    global INVOKER
    inv = invoker_from_env()
    if inv is None or command in ROOT_ONLY:
        return None
    os.setgroups(list(inv.groups))
    if command in ROOT_COMMANDS:
        os.setresgid(0, inv.gid, 0)
        os.setresuid(0, inv.uid, 0)
        INVOKER = inv
    else:
        os.setresgid(inv.gid, inv.gid, inv.gid)
        os.setresuid(inv.uid, inv.uid, inv.uid)
        INVOKER = None
    os.environ.update(HOME=inv.home, USER=inv.name, LOGNAME=inv.name)
    _private_caches()
    return inv


def invoking_user() -> tuple[int, int] | None:
    """(uid, gid) of the user we run for under sudo (their results, their workloads), None as
    plain root or as a user."""
    if INVOKER:
        return INVOKER.uid, INVOKER.gid
    inv = invoker_from_env()
    return (inv.uid, inv.gid) if inv else None


def has_root() -> bool:
    """May we start root's programs (root, or lowered for a user)?"""
    return os.geteuid() == 0 or lowered()


def lowered() -> bool:
    """True while we run for an invoking user with root kept for our children."""
    return INVOKER is not None


def _private_caches() -> None:
    """Caches of the libraries we use (matplotlib's font list...) in a directory of our own,
    removed at exit: never in a HOME whose links another user could have planted."""
    global _private
    import atexit

    _private = tempfile.mkdtemp(prefix="ipctrace-cache-")
    os.environ["MPLCONFIGDIR"] = _private
    os.environ["XDG_CACHE_HOME"] = _private
    os.environ["XDG_CONFIG_HOME"] = _private
    atexit.register(shutil.rmtree, _private, True)


def _die_with_parent() -> None:
    """SIGTERM when ipctrace dies, even by SIGKILL (set after any change of ids, which clears it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def root_child(rtprio: int = 0):
    """preexec_fn of a program that needs root (the tracer, a workload making namespaces):
    in the child, between fork and exec, all ids back to root's (allowed: the real and saved
    ones are still root's). rtprio: RLIMIT_RTPRIO for the workload it starts (--priority)."""

    def become_root() -> None:
        if lowered():
            os.setresuid(0, 0, 0)
            os.setresgid(0, 0, 0)
            os.setgroups([0])
        if rtprio:
            _raise_rtprio(rtprio)
        _die_with_parent()

    return become_root


def user_child(user: tuple[int, int] | None, rtprio: int = 0):
    """preexec_fn of a program that runs as the invoking user: all its ids the user's (real,
    effective, saved), so it can never regain root. user None: ours as they are."""

    def become_user() -> None:
        if user:
            if rtprio:
                if lowered():
                    os.setresuid(0, 0, 0)
                _raise_rtprio(rtprio)
            if os.geteuid() == 0:
                os.setgroups(_groups(user))
            os.setresgid(user[1], user[1], user[1])
            os.setresuid(user[0], user[0], user[0])
        _die_with_parent()

    return become_user


def _groups(user: tuple[int, int]) -> list[int]:
    if INVOKER and (INVOKER.uid, INVOKER.gid) == tuple(user):
        return list(INVOKER.groups)
    try:
        return os.getgrouplist(pwd.getpwuid(user[0]).pw_name, user[1])
    except KeyError:
        return [user[1]]


def _raise_rtprio(priority: int) -> None:
    """RLIMIT_RTPRIO of at least priority: kept across the change of user, so the workload may
    ask for that real-time priority (needs CAP_SYS_RESOURCE: root's, in the child)."""
    old = resource.getrlimit(resource.RLIMIT_RTPRIO)
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_RTPRIO, (max(priority, old[0]), max(priority, old[1])))


def run_as_root(cmd: list[str], **kw):
    """subprocess.run of a program that needs root (mount, bpftrace, the tracer)."""
    import subprocess

    return subprocess.run(cmd, preexec_fn=root_child(), **kw)


def in_child(become, fn, *args):
    """fn(*args) in a forked child after become() (a change of ids): ("ok", what it returned
    as JSON) or ("usage", its UsageError's words), ("exists", "") for a FileExistsError,
    ("error", what else it raised); ("error", "") if the child said nothing."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.close(r)
            become()
            res = ["ok", fn(*args)]
        except UsageError as e:
            res = ["usage", str(e)]
        except FileExistsError:
            res = ["exists", ""]
        except BaseException as e:
            res = ["error", f"{type(e).__name__}: {e}"]
        try:
            os.write(w, json.dumps(res, default=str).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    try:
        kind, value = json.loads(data)
    except ValueError:
        return "error", ""
    return kind, value


def _all_root() -> None:
    os.setresuid(0, 0, 0)
    os.setresgid(0, 0, 0)
    os.setgroups([0])


def as_root(fn, *args):
    """fn(*args) in a forked child with all of root's rights (the removal of ipctrace's own
    objects, giving root-written files to the user): what it returns (JSON), or None if it
    failed. Not lowered: fn(*args) here."""
    if not lowered():
        return fn(*args)
    kind, value = in_child(_all_root, fn, *args)
    return value if kind == "ok" else None


def command_environment() -> dict[str, str]:
    """The environment of the programs we start (the tracer passes it on to the command it
    traces, less IPCTRACE_*), as `sudo -u USER` would give it: ours without sudo's variables
    and the front end's own (PYTHONPATH...), with the user's HOME, USER, LOGNAME and SHELL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_FOR_THE_COMMAND) and k not in _OURS}
    for k in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        if _private and env.get(k) == _private:
            del env[k]
    inv = INVOKER or invoker_from_env()
    if inv:
        env.update(HOME=inv.home, USER=inv.name, LOGNAME=inv.name, SHELL=inv.shell)
    return env
