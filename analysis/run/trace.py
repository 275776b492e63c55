"""Tracing a program ipctrace did not write (`ipctrace trace`): a command started under the
tracer, or running processes (--pid, --comm), into a results directory like a workload's.

The tracer follows the program's threads and children. Iterations come from the program's
own markers (USDT, examples/ipctrace_marker.h), from a function's calls (a uprobe), or from
its request/response system calls (--rtt, analysis/model/rtt.py); they are written as the
iterations a workload's driver gives, with a workload.json naming the threads, so that the
summary, the breakdown, explain, report, export and compare work unchanged. The program's
own output passes through (to stderr with --json, whose stdout is the summary)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import platform
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, Protocol

import numpy as np

from analysis import DRIVER, LOADER
from analysis.errors import Interrupted, IpctraceError, MeasureError, UsageError, unmasked
from analysis.model import decoded, marks, rtt
from analysis.model import summary as summary_mod
from analysis.run import analyse_run, privilege, runner
from analysis.run.progress import Stage, Stages, terminal_size
from analysis.store import events as events_mod
from analysis.store import safeio
from analysis.store.host import host_info
from analysis.store.jsonfiles import TraceFile, Workload
from analysis.store.summaryfile import ProbeCalibration

if TYPE_CHECKING:
    import pandas as pd
from analysis.store.results import INCOMPLETE, write_iterations, write_json

LOADER_PREFIX = "ipctrace-loader: "
LEFT_TRACE_NOTE = "took another user's rights"
TASKSET = shutil.which("taskset") or "/usr/bin/taskset"


@dataclasses.dataclass(frozen=True)
class Target:
    """What to trace and how to find its iterations."""

    command: list[str]  # started under the tracer (empty with --pid/--comm alone)
    pids: list[int]
    comms: list[str]
    duration_s: float  # 0: until the program ends (or Ctrl-C)
    iterations_from: str | None  # "rtt", "markers", "function" or None (the whole-trace view)
    marker_binaries: list[str]  # --markers: where the USDT notes are
    functions: list[str]  # --iteration-func BINARY:FUNCTION
    messages: bool = False  # --messages: MSG records of each message's content (ipctrace merge)
    cpus: list[int] = dataclasses.field(default_factory=list)  # --cpus: the command's CPUs (taskset -c)
    tids: list[int] = dataclasses.field(default_factory=list)  # --tid: only these threads' iterations
    measure: list[int] = dataclasses.field(default_factory=list)  # --measure: the processes that ask (--rtt)
    all_cpus: bool = False  # -a: every task on the machine (the whole-trace view)
    # --syscalls: {nr: name} of the only system calls recorded (empty: all)
    syscalls: dict[int, str] = dataclasses.field(default_factory=dict)
    pid_comm: str = ""  # the first --pid's name, read before the trace (check_target)

    @property
    def label(self) -> str:
        """The program in a sentence: its command's name, the --comm, or "comm (pid N)"."""
        if self.pids and not self.command and not self.comms:
            return f"{self.pid_comm} (pid {self.pids[0]})" if self.pid_comm else f"pid {self.pids[0]}"
        return self.name

    @property
    def name(self) -> str:
        """The program in a results directory's name (trace-NAME-...)."""
        if self.command:
            return Path(self.command[0]).name
        if self.comms:
            return self.comms[0]
        if self.pids:
            # the process's name as a file name can hold it (a comm may have / or spaces)
            comm = re.sub(r"[^A-Za-z0-9._+-]", "_", self.pid_comm)
            return f"{comm}-pid-{self.pids[0]}" if comm else f"pid-{self.pids[0]}"
        return "all"


def check_target(t: Target) -> Target:
    """Refuses what cannot be traced before anything starts; resolves the marker binaries."""
    if t.command:
        exe = shutil.which(t.command[0])
        if exe is None:
            what = "does not exist" if not os.path.lexists(t.command[0]) else "cannot be executed"
            raise UsageError(f"trace: {t.command[0]}: {what} (not found as a file or on PATH)")
    for pid in t.pids:
        try:
            st = os.stat(f"/proc/{pid}")
        except FileNotFoundError:
            raise UsageError(f"trace: pid {pid} does not exist (or has ended)") from None
        if os.geteuid() != 0 and st.st_uid != os.geteuid():
            # the broker refuses it too; said here before anything starts
            raise UsageError(f"trace: pid {pid} is not yours (uid {st.st_uid}): tracing it is not permitted")
    binaries = list(t.marker_binaries)
    if t.iterations_from == "markers" and not binaries:
        if t.command:
            binaries.append(str(Path(shutil.which(t.command[0]) or t.command[0]).resolve()))
        for pid in t.pids:
            try:
                binaries.append(os.readlink(f"/proc/{pid}/exe"))
            except OSError as e:
                raise UsageError(f"trace: cannot read the executable of pid {pid}: {e.strerror}") from None
        if not binaries:
            raise UsageError("trace --markers: name the binary that holds them (--markers BINARY) with --comm")
    for f in t.functions:
        binary, sep, func = f.rpartition(":")
        if not sep or not binary or not func:
            raise UsageError(f"trace --iteration-func {f}: give BINARY:FUNCTION")
    pid_comm = ""
    if t.pids:
        with contextlib.suppress(OSError):
            pid_comm = Path(f"/proc/{t.pids[0]}/comm").read_text().strip()
    return dataclasses.replace(t, marker_binaries=list(dict.fromkeys(binaries)), pid_comm=pid_comm)


def open_binary(path: str, what: str) -> int:
    """A descriptor of the user's binary path for the tracer, opened with our rights (the
    invoking user's under sudo: a file they may not read is refused), never waiting on a
    FIFO (O_NONBLOCK), and only a regular file. The tracer reads and probes the file through
    this descriptor (/proc/self/fd/N), so what it probes is what was checked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(f"trace {what}: {path} does not exist") from None
    except OSError as e:
        raise UsageError(f"trace {what}: cannot read {path}: {safeio.why(e)}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UsageError(f"trace {what}: {path} is {safeio.kind(st.st_mode)}, not a file")
    return fd


def open_binaries(t: Target) -> tuple[Target, dict[str, str], list[int]]:
    """t with each marker binary and --iteration binary named by a path replaced by
    /proc/self/fd/N of a descriptor open_binary() opened; the map back to the user's names,
    and the descriptors (for the tracer to inherit)."""
    fds: list[int] = []
    shown: dict[str, str] = {}

    def by_fd(path: str, what: str) -> str:
        fd = open_binary(path, what)
        fds.append(fd)
        name = safeio.proc_path(fd)
        shown[name] = path
        return name

    try:
        markers = [by_fd(b, "--markers") for b in t.marker_binaries]
        functions = []
        for f in t.functions:
            binary, _, func = f.rpartition(":")
            functions.append(f"{by_fd(binary, '--iteration-func')}:{func}" if "/" in binary else f)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return dataclasses.replace(t, marker_binaries=markers, functions=functions), shown, fds


def loader_command(
    t: Target,
    outdir: Path,
    ringbuf_mb: float,
    sample_hz: int,
    entry_fd: int | None = None,
    live_names: bool = False,
) -> list[str]:
    """The tracer's command line; a command starts through `ipcbench exec`, which calibrates
    the entry path and the iteration probes into entry_fd (the process then becomes the
    command: same tid, traced). live_names: the tasks it names written as it goes (watch)."""
    # (under sudo the broker adds --owner, --user, --comm-uid and --only-uid: the user's)
    cmd = [str(LOADER), "--out", str(outdir)]
    if sample_hz:
        cmd += ["--sample-hz", str(sample_hz)]
    if ringbuf_mb:
        cmd += ["--ringbuf-mb", f"{ringbuf_mb:g}"]
    if t.duration_s and not t.command:
        # (with a command the front end stops it at the deadline as a Ctrl-C would: _Stop)
        cmd += ["--duration", f"{t.duration_s:g}"]
    if t.pids:
        cmd += ["--pid", ",".join(map(str, t.pids))]
    if t.all_cpus:
        # every task but the tracer's: the loader's own and this front end's (its threads)
        cmd += ["--all-cpus", "--exclude-pid", str(os.getpid())]
    if t.syscalls:
        cmd += ["--syscalls", ",".join(map(str, sorted(t.syscalls)))]
    for c in t.comms:
        cmd += ["--comm", c]
    if t.iterations_from == "markers":
        for b in t.marker_binaries:
            cmd += ["--usdt", b]
    for f in t.functions:
        cmd += ["--uprobe", f]
    if t.messages:
        cmd += ["--messages"]
    if live_names:
        cmd += ["--live-names"]
    if entry_fd is not None and t.iterations_from in ("markers", "function"):
        # the same probes on the empty windows `ipcbench exec` runs first (analysis/model/marks.py)
        cmd += ["--calibrate", str(DRIVER)]
    if t.command:
        # the command inherits none of our descriptors but the calibration's
        cmd += ["--close-fds"] + (["--inherit-fd", str(entry_fd)] if entry_fd is not None else [])
        cmd += ["--"]
        if t.cpus:
            # placed before `ipcbench exec`, so that its calibrations run where the command will
            cmd += [TASKSET, "-c", ",".join(map(str, t.cpus))]
        if entry_fd is not None:
            cmd += [str(DRIVER), "exec", "--entry-fd", str(entry_fd), "--"]
        cmd += t.command
    return cmd


RELAY_DRAIN_S = 2.0  # how long the command's stderr may stay open after the tracer ended
RELAY_THREAD = "ipctrace-relay"


class _Relay:
    """The child's stderr, line by line: the program's lines go on to our stderr as they
    come, the tracer's own (ipctrace-loader: ...) are kept for the one line we print."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.tracer_lines: list[str] = []
        self.last: list[str] = []
        self.thread = threading.Thread(target=self._pump, name=RELAY_THREAD, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        for raw in self.stream:
            line = raw.decode(errors="replace")
            if line.startswith(LOADER_PREFIX):
                self.tracer_lines.append(line.rstrip("\n")[len(LOADER_PREFIX) :])
                continue
            self.last = (self.last + [line.rstrip("\n")])[-5:]
            # above the live line (_Live: a row of its own)
            sys.stderr.write(line)
            sys.stderr.flush()

    def join(self, timeout: float | None = None) -> bool:
        """Whether the stream ended within timeout: a process the command left running may
        hold it open for as long as it lives (its lines are then still passed on)."""
        self.thread.join(timeout)
        return not self.thread.is_alive()


class _Stop:
    """A Ctrl-C or SIGTERM while tracing: what a terminal does to a program's foreground
    group, done to the traced command's processes (the tracer's process group, the tracer
    itself left out, so it writes what it traced once they end): SIGINT, then SIGTERM after
    ESCALATE_S, then SIGKILL. Without a command (--pid, --comm) the tracer is told to stop
    (it detaches and leaves the processes running)."""

    ESCALATE_S = 5.0

    def __init__(self, tracer: Any, has_command: bool):
        self.tracer, self.has_command = tracer, has_command
        self.signum, self.since, self.sent = 0, 0.0, 0
        self.saved: dict[int, Any] = {}
        self.by_duration = False

    def __enter__(self) -> _Stop:
        for s in (signal.SIGINT, signal.SIGTERM):
            self.saved[s] = signal.signal(s, self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self.saved.items():
            signal.signal(s, h)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = self.signum or signum
        if not self.since:
            self.since = time.monotonic()
            self._send(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    def _group(self) -> list[int]:
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == self.tracer.pid:
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == self.tracer.pid:  # pgrp
                pids.append(int(entry))
        return pids

    def _send(self, sig: int) -> None:
        self.sent = sig
        if not self.has_command:
            # the tracer: root's under sudo, signalled through the broker
            self.tracer.send_signal(sig)
            return
        for pid in self._group():
            # the command's processes: the user's own (one that took other rights is left to
            # the harder signals of the group: _Stop of the tracer's group below)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def tick(self, deadline: float | None = None) -> None:
        """Called while waiting: at the deadline (--duration) the command is stopped as by a
        Ctrl-C, not counted as one; then the next, harder signal once the last one has had
        its time."""
        if deadline and not self.since and time.monotonic() >= deadline:
            self.by_duration = True
            self.since = time.monotonic()
            self._send(signal.SIGINT)
        if not self.since or not self.has_command:
            return
        waited = time.monotonic() - self.since
        if self.sent == signal.SIGINT and waited > self.ESCALATE_S:
            self._send(signal.SIGTERM)
        elif self.sent == signal.SIGTERM and waited > 2 * self.ESCALATE_S:
            self._send(signal.SIGKILL)


class _Live:
    """The line a terminal shows while tracing, as perf trace and bpftrace show something: the
    time so far, the iterations found so far and their median over the last second (round
    trips, marked windows: a worker process at SCHED_IDLE analyses events.bin as it grows,
    progress.LiveIterations), the kernel events recorded (events.bin's records, and their rate)
    and those lost so far (the header's count, which the tracer rewrites each second), redrawn
    once a second; nothing when stderr is not a terminal.

    The traced program writes to the same terminal whenever it likes, so the line has a row of
    its own, as apt's progress line does: the terminal's last row is taken out of the scrolling
    region (DECSTBM) and the line is drawn there, the cursor saved and put back around it, in
    one write (a tty takes a write of this size whole: the program's bytes never land inside
    it). The program's output scrolls above it and is never glued to the line; the row is
    given back at the end."""

    WHAT = {"rtt": "round trips", "markers": "iterations", "function": "calls"}

    def __init__(
        self,
        events_bin: Path | None,
        on: bool,
        how: str | None = None,
        calibration_fd: int | None = None,
        command: bool = True,
        fds: Sequence[int] = (),
    ) -> None:
        self.path, self.on = events_bin, on and events_bin is not None and sys.stderr.isatty()
        self.started = self.last_t = time.monotonic()
        self.last_n = 0
        self.rows = 0  # the terminal's rows when its last was taken for the line (0: not taken)
        self.how, self.worker, self.found, self.pending = how, None, None, b""
        if self.on and how:
            self.worker = self._start_worker(how, calibration_fd, command, fds)

    def _start_worker(
        self, how: str, calibration_fd: int | None, command: bool, fds: Sequence[int]
    ) -> subprocess.Popen | None:
        """fds: the descriptors events_bin's path goes through (the results directory's)."""
        from analysis import HOME

        argv = [sys.executable, "-m", "analysis.run.progress", str(self.path), how, platform.machine()]
        argv += ["1" if command else "0"] + ([safeio.proc_path(calibration_fd)] if calibration_fd is not None else [])

        try:
            worker = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=HOME,
                process_group=0,  # a terminal's Ctrl-C is for the tracer and the program
                pass_fds=(*fds, *(() if calibration_fd is None else (calibration_fd,))),
            )
        except OSError:
            return None  # the line goes without the iterations
        assert worker.stdout is not None  # stdout=PIPE
        os.set_blocking(worker.stdout.fileno(), False)
        return worker

    def records(self) -> tuple[int, int]:
        """(records in events.bin, records lost so far)."""
        from analysis.store.events import HEADER, REC

        assert self.path is not None  # counted only with an events.bin
        try:
            with open(self.path, "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                head = os.pread(f.fileno(), HEADER.itemsize, 0)
        except OSError:
            return 0, 0
        lost = int(np.frombuffer(head, HEADER)[0]["drops"]) if len(head) == HEADER.itemsize else 0
        return max(0, size - HEADER.itemsize) // REC.itemsize, lost

    def _iterations(self) -> str:
        if self.worker is None:
            return ""
        assert self.worker.stdout is not None  # stdout=PIPE
        try:
            got = os.read(self.worker.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            got = b""
        except OSError:
            got = b""
        lines = (self.pending + got).split(b"\n")
        self.pending = lines[-1]
        for line in lines[:-1]:
            with contextlib.suppress(ValueError):
                self.found = json.loads(line)
        if not self.found:
            return ""
        text = f"{self.found['iterations']:,} {self.WHAT.get(self.how, 'iterations')}"
        if self.found.get("median_ns") is not None:
            text += f", median {self.found['median_ns'] / 1e3:,.1f} us in the last second"
        return text + ", "

    def line(self) -> str:
        now = time.monotonic()
        n, lost = self.records()
        rate = (n - self.last_n) / max(now - self.last_t, 1e-3)
        self.last_n, self.last_t = n, now
        return (
            f"tracing: {now - self.started:.0f} s, {self._iterations()}{n:,} events recorded ({rate:,.0f}/s), "
            f"{lost:,} lost"
        )

    def tracer_started(self, pid: int) -> None:
        pass  # the line counts the events file's records, whoever writes them

    def tick(self) -> None:
        if not self.on or time.monotonic() - self.last_t < 1.0:
            return
        rows, cols = terminal_size(sys.stderr)
        if rows < 3:
            return  # no row to spare for it
        take = ""
        if rows != self.rows:
            # a new line first, so the row the cursor is on stays in the region; the region set
            # puts the cursor home, hence saved and put back (and moved up if it was on the last)
            take = (
                ("\n" if not self.rows else "") + f"\0337\033[1;{rows - 1}r\0338" + ("\033[1A" if not self.rows else "")
            )
            self.rows = rows
        _write_whole(sys.stderr, f"{take}\0337\033[{rows};1H\033[2K{self.line()[: cols - 1]}\0338")

    def close(self) -> None:
        if self.worker is not None:
            # ours alone, its answer no longer wanted: ended now, whatever it was doing
            self.worker.kill()
            self.worker.wait()
            for pipe in (self.worker.stdin, self.worker.stdout):
                if pipe is not None:  # both PIPE
                    pipe.close()
            self.worker = None
        if self.rows:
            # the whole screen scrolls again; the line's row is cleared
            _write_whole(sys.stderr, f"\0337\033[r\033[{self.rows};1H\033[2K\0338")
            self.rows = 0


def _write_whole(stream: IO[str], text: str) -> None:
    """text in one write(2) on stream's descriptor (one the tty takes whole, whatever the
    traced program writes meanwhile); through stream where it has none."""
    stream.flush()
    try:
        fd = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):  # a stream without one (a test's)
        stream.write(text)
        stream.flush()
        return
    data = text.encode()
    while data:
        data = data[os.write(fd, data) :]


class Ticker(Protocol):
    """What _run calls while the tracer runs (_Live, `ipctrace watch`'s Watcher)."""

    def tracer_started(self, pid: int) -> None: ...

    def tick(self) -> None: ...

    def close(self) -> None: ...


def _run(
    cmd: list[str],
    stdout_fd: int,
    fds: Sequence[int],
    has_command: bool,
    duration_s: float = 0,
    live: Ticker | None = None,
) -> tuple[int, int, bool, list[str]]:
    """The tracer in its own process group (a terminal's Ctrl-C reaches only us; _Stop
    passes it on); returns (exit code, signal we received or 0, whether the command was
    stopped at its --duration, the tracer's own lines). live: the line shown while it runs."""
    try:
        child = privilege.popen_root(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=stdout_fd,
            stderr=subprocess.PIPE,
            process_group=0,
            pass_fds=fds,
        )
    except OSError as e:
        raise UsageError(f"cannot start {cmd[0]}: {e.strerror}") from None
    relay = _Relay(child.stderr)
    if live:
        live.tracer_started(child.pid)
    deadline = time.monotonic() + duration_s if duration_s and has_command else None
    with _Stop(child, has_command) as stop:
        try:
            while True:
                try:
                    rc = child.wait(timeout=runner.POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    stop.tick(deadline)
                    if live:
                        live.tick()
        finally:
            if live:
                live.close()
            if child.poll() is None:
                child.terminate()
                child.wait()
    # The tracer's own lines are in the pipe before it exits; what keeps the pipe open after a
    # moment is a process the command left behind, which the trace does not wait for.
    if not relay.join(RELAY_DRAIN_S):
        print(
            "ipctrace: a process the command started still holds its stderr open; it is left running",
            file=sys.stderr,
        )
    return rc, stop.signum, stop.by_duration, list(relay.tracer_lines)


def trace_program(
    t: Target,
    outdir: Path | None,
    quiet: bool,
    stdout_fd: int,
    ringbuf_mb: float = 0,
    sample_hz: int = 0,
    keep_raw: bool = False,
    live_line: bool = True,
) -> Path:
    """Traces t into outdir (a new results/trace-NAME-... by default); returns the directory.
    live_line: the line shown while tracing (on a terminal, not quiet)."""
    if not os.access(LOADER, os.X_OK):
        raise UsageError(f"tracing is not built ({LOADER} is missing): run make")
    if not privilege.has_root():
        raise UsageError("trace loads eBPF programs: run it as root (sudo ./ipctrace trace ...)")
    privilege.check_bounds(ringbuf_mb, t.duration_s)
    t = check_target(t)
    # the user's binaries are opened now, with the user's rights, and probed through these
    # descriptors: whatever their names become meanwhile
    by_fd, binary_names, binary_fds = open_binaries(t)
    try:
        return _trace_into(
            t, by_fd, binary_names, binary_fds, outdir, quiet, stdout_fd, ringbuf_mb, sample_hz, keep_raw, live_line
        )
    finally:
        for fd in binary_fds:
            os.close(fd)


def _shown(text: str, names: dict[str, str]) -> str:
    for proc, name in names.items():
        text = text.replace(proc, name)
    return text


def _trace_into(
    t: Target,
    by_fd: Target,
    binary_names: dict[str, str],
    binary_fds: list[int],
    outdir: Path | None,
    quiet: bool,
    stdout_fd: int,
    ringbuf_mb: float,
    sample_hz: int,
    keep_raw: bool,
    live_line: bool = True,
) -> Path:
    rd = runner.open_new_outdir(outdir, f"trace-{t.name}")
    meta = {
        "command": ["ipctrace", *sys.argv[1:]],
        "command_line": shlex.join(["ipctrace", *sys.argv[1:]]),
        "cwd": os.getcwd(),
        "version": runner.version(),
        "start_time": runner.now_iso(),
        "clock_source": "CLOCK_MONOTONIC",
        "traced": True,
        "status": "running",
    }
    entry_fd = None
    try:
        runner.mark_incomplete(rd, "a trace")
        entry_fd = os.memfd_create("ipctrace-entry", 0) if t.command and os.access(DRIVER, os.X_OK) else None
        cmd = loader_command(by_fd, rd.path, ringbuf_mb, sample_hz, entry_fd)
        meta["driver_command"] = [_shown(rd.show(a), binary_names) for a in cmd]
        write_json(rd.path / "meta.json", meta)
        if not quiet:
            what = (
                shlex.join(t.command)
                if t.command
                else ", ".join([f"pid {p}" for p in t.pids] + [f"comm {c}" for c in t.comms])
            )
            if t.all_cpus:
                what = "every task on the machine" + (f" while {what} runs" if t.command else "")
            if t.syscalls:
                what += f" (system calls {', '.join(t.syscalls.values())} only)"
            until = f"for {t.duration_s:g} s" if t.duration_s else "until it ends"
            sys.stderr.write(f"ipctrace: tracing {what} {until} (Ctrl-C stops and keeps what was traced)\n")
        fds = (rd.fd, *binary_fds) if entry_fd is None else (rd.fd, entry_fd, *binary_fds)
        live = _Live(
            rd.path / "events.bin", live_line and not quiet, t.iterations_from, entry_fd, bool(t.command), (rd.fd,)
        )
        try:
            rc, signum, by_duration, said = _run(cmd, stdout_fd, fds, bool(t.command), t.duration_s, live)
        except UsageError as e:
            # refused before anything started (under sudo, a bound the broker keeps): nothing to keep
            runner._discard(rd)
            e.discarded = True
            raise
        meta["driver_exit"] = rc
        # the tracer's word on a task that took another user's rights is a note (trace.json
        # keeps it, the summary says it), never the reason the trace failed
        said = [_shown(rd.show(x), binary_names) for x in said if LEFT_TRACE_NOTE not in x]
        has_trace = safeio.is_regular(rd.path / "trace.json") and safeio.is_regular(rd.path / "events.bin")
        if not has_trace:
            if signum:
                raise Interrupted(signum, f"interrupted before anything was traced; see {rd.shown}")
            if said:
                # the tracer refused (a pid gone, a function not found, no markers): nothing was traced
                for name in runner.PROGRAM_FILES:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=rd.fd)
                runner._discard(rd)
                raise UsageError(f"trace: {said[-1]}")
            raise MeasureError(f"trace: the tracer ended with exit {rc} before writing its trace; see {rd.shown}")
        tj = analyse_run.read_trace_json(rd.path)
        by_duration = by_duration or tj.stopped_by == "duration"
        if not signum and rc in (130, 143) and not by_duration:
            signum = rc - 128
        if rc and not signum and not by_duration:
            raise MeasureError(
                f"trace: {t.label} exited with status {rc}{': ' + said[-1] if said else ''}; nothing was analysed "
                f"(its trace is in {rd.shown}, marked incomplete)"
            )
        status = "interrupted" if signum else "complete"
        with Stages(f"trace {t.label}: analysing", not quiet and sys.stderr.isatty()) as stage:
            entry, probes = _calibrations(entry_fd)
            analyse(rd.path, t, tj, status, rc, stage, entry, by_duration, probes)
        if not keep_raw:
            with contextlib.suppress(FileNotFoundError):
                os.unlink("events.bin", dir_fd=rd.fd)
        meta.update(status=status, end_time=runner.now_iso())
        write_json(rd.path / "meta.json", meta)
        os.unlink(INCOMPLETE, dir_fd=rd.fd)
    except BaseException as caught:
        exc = unmasked(caught)
        if not getattr(exc, "discarded", False):
            runner._fail(rd.path, meta, exc)
        if isinstance(exc, IpctraceError):
            message = rd.show(str(exc))
            # what was traced stays: a message that does not say where would leave a directory
            # behind unannounced (trace --rtt -- true: no round trips, exit 2)
            if str(rd.shown) not in message and _kept(rd):
                message += f" (the trace is kept in {rd.shown}, marked incomplete)"
            exc.args = (message,)
        if isinstance(exc, OSError):
            raise MeasureError(f"trace: cannot write the results into {rd.shown}: {safeio.why(exc)}") from None
        if exc is not caught:
            raise exc from None
        raise
    finally:
        rd.close()
        if entry_fd is not None:
            os.close(entry_fd)
    if signum:
        err = Interrupted(signum, f"interrupted by {signal.Signals(signum).name}; what was traced is in {rd.shown}")
        err.resdir = rd.shown
        raise err
    return rd.shown


def _kept(rd: runner.RunDir) -> bool:
    """Whether the results directory holds a trace (the tracer wrote its events)."""
    return any(os.path.lexists(rd.path / name) for name in ("events.bin", "events.parquet", "trace.json"))


def _calibrations(fd: int | None) -> tuple[dict | None, dict | None]:
    """What `ipcbench exec` wrote: (the entry path's, workload.json's entry_calibration; the
    iteration probes'), None for what is not there."""
    if fd is None:
        return None, None
    raw = b""
    while chunk := os.pread(fd, 1 << 16, len(raw)):
        raw += chunk
    try:
        cal = json.loads(raw)
    except ValueError:
        return None, None
    if not isinstance(cal, dict):
        return None, None
    entry, probes = cal.get("entry"), cal.get("probes")
    entry = entry if isinstance(entry, dict) and entry.get("calls") else None
    return entry, probes if isinstance(probes, dict) else None


def find_iterations(outdir: Path, t: Target, tj: TraceFile, probes: dict | None = None) -> tuple:
    """(iterations frame, the threads as workload.json names them, the probe calibration or
    None) of the trace in outdir; probes: the calibration `ipcbench exec` ran."""
    rec, _, _ = events_mod.read_events_bin(outdir / "events.bin")
    ev = events_mod.to_frame(rec)
    arch = tj.machine or platform.machine()  # the traced machine's syscall numbers
    cal = None
    if t.iterations_from == "rtt":
        # the threads whose whole life the trace saw: the command's, and those forked in it
        born = set(decoded.forked_tids(ev).tolist())
        if tj.mode == "command" and tj.root_pid:
            born.add(tj.root_pid)
        iters = rtt.round_trips(ev, arch, born=born)
        if not len(iters):
            ended = "".join(f"; {x}" for x in exits(ev, tj))
            raise UsageError(
                f"trace --rtt: no round trips in the trace of {t.label}: no thread sent (write, send, "
                f"mq_timedsend, a futex wake) and then received an answer{ended}; see docs/DESIGN.md for the "
                "pairs it knows"
            )
    else:
        # a function's calls are named after it (one --iteration-func), unnamed marks "iteration"
        functions = [f.rpartition(":")[2] for f in t.functions]
        cal = marks.calibration(ev, tj.marks, probes)
        iters = marks.windows(ev, tj.marks, functions[0] if len(functions) == 1 else marks.UNNAMED, probes, cal)
        if not len(iters):
            how = "its markers (ipctrace:iteration_begin/end)" if t.iterations_from == "markers" else "--iteration-func"
            raise UsageError(f"trace: {t.label} ran no iteration that {how} delimit: nothing to break down")

    def pid_of(tid: int) -> int:
        task = tj.tasks.get(tid)
        if task and task.pid:
            return task.pid
        rows = ev["pid"].to_numpy()[ev["tid"].to_numpy() == tid]
        return int(rows[0]) if len(rows) else 0

    sides = None
    if t.iterations_from == "rtt":
        iters, sides = _one_side(iters, t, ev, pid_of, {pid_of(x) for x in born})
    if t.tids:
        # --tid: the iterations of those threads only (the others' events stay: a peer's time
        # is on the critical path), numbered anew in the order they start
        found = sorted(int(x) for x in iters["tid"].unique())
        iters = iters[iters["tid"].isin(t.tids).to_numpy()].reset_index(drop=True)
        if not len(iters):
            raise UsageError(
                f"trace --tid {','.join(map(str, t.tids))}: none of these threads has an iteration "
                f"(those with iterations: {', '.join(map(str, found[:10]))})"
            )
        iters["iteration"] = np.arange(len(iters), dtype=np.int64)
        iters["seq"] = np.arange(len(iters), dtype=np.int64)
    measuring = sorted(int(x) for x in iters["tid"].unique())
    followed = set(tj.tids)
    span = (int(iters["t_start_ns"].min()), int(iters["t_end_ns"].max())) if len(iters) else None
    peers = rtt.partners(ev, measuring, followed, within=span)
    threads = [{"role": "measuring", "pid": pid_of(x), "tid": x, "cpu": -1} for x in measuring]
    threads += [{"role": "peer", "pid": pid_of(x), "tid": x, "cpu": -1} for x in peers]
    return iters, threads, cal, {"sides": sides, "exits": exits(ev, tj)}


def _one_side(
    iters: pd.DataFrame, t: Target, ev: pd.DataFrame, pid_of: Callable[[int], int], started: set[int]
) -> tuple:
    """(iters, what was done) with each request counted once, from the side that asks
    (model/rtt.py): --measure PID[,PID] keeps the round trips of those processes; otherwise,
    of two threads that answer each other, those of the side rtt.one_side_each chooses by the
    rule of rtt.asker_of. started: the pids of the processes the trace saw begin (the command,
    those forked in it)."""
    if t.measure:
        pids = np.array([pid_of(int(x)) for x in iters["tid"].to_numpy()], np.int64)
        mine = np.isin(pids, t.measure)
        if not mine.any():
            have = ", ".join(f"pid {p}" for p in sorted(set(pids.tolist()))[:10]) or "none"
            raise UsageError(
                f"trace --measure {','.join(map(str, t.measure))}: none of these processes asked a round trip "
                f"(those that did: {have})"
            )
        out = iters[mine].reset_index(drop=True)
        out["iteration"] = np.arange(len(out), dtype=np.int64)
        out["seq"] = np.arange(len(out), dtype=np.int64)
        return out, f"measured from pid {','.join(map(str, t.measure))} (--measure)"
    named = set(t.pids)
    parent = decoded.fork_parents(ev)

    def parent_of(pid: int) -> int | None:
        if pid in parent:
            return int(parent[pid])
        try:
            with open(f"/proc/{pid}/stat") as f:
                return int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            return None

    why = {}

    def choose(a: int, b: int) -> int:
        asker, why[(a, b)] = rtt.asker_of(a, b, pid_of(a), pid_of(b), started, named, parent_of)
        return asker

    out, pairs = rtt.one_side_each(iters, choose)
    if not pairs:
        return iters, None
    said = []
    for asker, answerer in pairs:
        reason = why.get((min(asker, answerer), max(asker, answerer)), "")
        who = (lambda x: f"pid {pid_of(x)}") if pid_of(asker) != pid_of(answerer) else (lambda x: f"thread {x}")
        said.append(
            f"{who(asker)} and {who(answerer)} answer each other (the trace began inside their conversation): "
            f"each request counted once, from {who(asker)}'s side ({reason}; --measure PID chooses)"
        )
    return out, "; ".join(said)


def _tracer_calls(entry: dict | None, recorded: dict[int, str] | None = None) -> tuple[int, int] | None:
    """(tid, start) of the calibrations `ipcbench exec` ran in a command's thread before it
    became the command (analyse_run.OwnCalls), None where it ran none. recorded: the only system
    calls the trace recorded (--syscalls / -e; empty: all): where the exec is not among them, the
    exec's return that ends the tracer's calls is not in the trace, and taking the thread's
    records out up to it would take out the whole command (issue 34: `trace -e read,write --
    python3 pp.py` lost the program's own thread); the calibrations' getppid calls are not
    recorded then either, so nothing is taken out."""
    calls = (entry or {}).get("calls") or []
    if not calls or entry is None or "tid" not in entry:
        return None
    if recorded and not {"execve", "execveat"} & set(recorded.values()):
        return None
    return int(entry["tid"]), int(min(c[0] for c in calls))


def exits(ev: pd.DataFrame, tj: TraceFile) -> list[str]:
    """'comm (pid N) exited S s into the trace' for each process the trace was attached to
    (--pid, --comm: not a command it started, whose end ends the trace) that ended during it."""
    if tj.mode == "command":
        return []
    ts = ev["ts"].to_numpy(np.int64)
    if not len(ts):
        return []
    pid = ev["pid"].to_numpy()
    ended = decoded.process_exits(ev)
    attached = set(tj.pids)
    out = []
    for p, when in sorted(zip(pid[ended].tolist(), ts[ended].tolist())):
        if attached and p not in attached:
            continue
        comm = tj.comm(p)
        name = f"{comm} (pid {p})" if comm else f"pid {p}"
        out.append(f"{name} exited {(when - ts.min()) / 1e9:.3g} s into the trace")
    return out


def analyse(
    outdir: Path,
    t: Target,
    tj: TraceFile,
    status: str,
    exit_code: int,
    stage: Stage,
    entry_calibration: dict | None = None,
    by_duration: bool = False,
    probes: dict | None = None,
    found_iterations: tuple | None = None,
    whole_trace: bool = True,
) -> None:
    """trace.json + events.bin -> workload.json, iterations.parquet, events.parquet,
    breakdown.parquet and summary.json (with the probe calibration of markers and
    functions: summary.json's probe_calibration). found_iterations: what find_iterations
    would find, already found (`ipctrace watch` keeps one request it found as it went);
    whole_trace: also the whole trace per thread (activity.parquet)."""
    stage("finding the iterations")
    cal = None
    if found_iterations is not None:
        iters, threads, cal, found = found_iterations
    elif t.iterations_from:
        iters, threads, cal, found = find_iterations(outdir, t, tj, probes)
    else:
        iters, threads, found = rtt.empty_iterations(), [], {}
    wl = workload_doc(t, tj, iters, threads, cal, found, status, exit_code, entry_calibration, by_duration, probes)
    if wl["metrics"]:  # the whole-trace view alone has no iterations to describe
        write_json(outdir / "workload.json", wl)
        write_iterations(outdir / "iterations.parquet", iters)
    s = summary_mod.build(
        Workload.from_json(wl), iters, {}, wl["params"], status, list(wl["warnings"]), False, host_info()
    )
    s = analyse_run.finish(
        outdir,
        iters,
        s,
        stage,
        whole_trace=whole_trace,
        trace=tj,
        tracer_calls=_tracer_calls(wl["entry_calibration"], t.syscalls) if whole_trace else None,
    )
    typed_cal = None if cal is None else ProbeCalibration.from_json(cal)
    write_json(outdir / "summary.json", dataclasses.replace(s, probe_calibration=typed_cal).to_json())


def workload_doc(
    t: Target,
    tj: TraceFile,
    iters: pd.DataFrame,
    threads: list,
    cal: dict | None,
    found: dict,
    status: str,
    exit_code: int,
    entry_calibration: dict | None = None,
    by_duration: bool = False,
    probes: dict | None = None,
) -> dict:
    """workload.json of a traced program's iterations (iters, threads: find_iterations')."""
    metrics = [str(c) for c in iters["metric"].cat.categories] if t.iterations_from else []
    primary = "rtt" if t.iterations_from == "rtt" else metrics[0] if metrics else None
    params = {
        "traced": True,
        "iterations_from": t.iterations_from or "none",
        "command": t.command,
        "pids": t.pids,
        "comms": t.comms,
        "duration_s": t.duration_s or None,
        "cpus": t.cpus or None,
        "measure": t.measure or None,
        # each request counted once: which side asks, where the trace could not tell (rtt.py)
        "sides": found.get("sides"),
        "all_cpus": t.all_cpus or None,
        "syscalls": list(t.syscalls.values()) or None,
    }
    if entry_calibration is None:
        # why the entry path has no estimate, for the breakdown's "entry is not calibrated: ..."
        entry_calibration = {
            "absent": "the processes were running before the trace (--pid, --comm): the entry path is timed "
            "only before a command the tracer starts (-- CMD)"
            if not t.command
            else "ipcbench exec wrote no calibration before the command"
        }
    # named after what asked (perf's sched-pipe, redis-benchmark), not a wrapper (taskset, sh)
    asker = tj.comm(threads[0]["tid"]) if threads else None
    wl = {
        "workload": f"trace {asker or t.label}",
        "metrics": metrics,
        "primary_metric": primary,
        "params": params,
        "placement": f"cpus {','.join(map(str, t.cpus))}" if t.cpus else "none",
        "threads": threads,
        "runs_completed": 1,
        "iterations_completed": len(iters),
        "status": status,
        "clock": "CLOCK_MONOTONIC",
        "warnings": [f"{x}: the trace holds it up to then" for x in found.get("exits") or []],
        "entry_calibration": entry_calibration,
        "extra": {
            "traced_program": {
                "exit_code": exit_code,
                "stopped_by": "duration" if by_duration else tj.stopped_by,
            },
            "probe_calibration": cal,
            # what `ipcbench exec` measured, for analysing the trace again
            "probe_calibration_raw": probes if cal is not None else None,
        },
    }
    return wl
