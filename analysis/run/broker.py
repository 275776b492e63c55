"""The front end's side of tools/broker.c: under sudo, the one process that keeps root.

The front end runs as the invoking user; what needs root (the tracer, a workload that needs
root, a busy loop at a nice value below 0, the loader's doctor, mounting tracefs, removing
root's leftovers of dead runs) it asks the broker for on the socket IPCTRACE_BROKER_FD, with
the descriptors the program is to get (opened here, with the user's rights). A started
program is a BrokeredProcess, which behaves as the subprocess.Popen the front end would have
made itself: wait, poll, send_signal, terminate, kill, its pipes.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from analysis.errors import UsageError

ENV = "IPCTRACE_BROKER_FD"
# tools/broker.h: the bounds the broker keeps for a sudo user (read once, on first use)
_HEADER = Path(__file__).resolve().parents[2] / "tools" / "broker.h"


def available() -> bool:
    """True in a front end the broker started (under sudo)."""
    return bool(os.environ.get(ENV))


def _socket() -> socket.socket:
    try:
        fd = int(os.environ[ENV])
        return socket.socket(fileno=os.dup(fd))
    except (KeyError, ValueError, OSError) as e:
        raise UsageError(f"{ENV}: no broker to ask for root's programs ({e})") from None


def limits() -> dict[str, int]:
    """The bounds of tools/broker.h (#define NAME NUMBER)."""
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in _HEADER.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "#define" and parts[2].isdigit():
                out[parts[1]] = int(parts[2])
    return out


def _send(kind: str, args: list[str], fds: list[int], targets: list[int], rtprio: int = 0) -> socket.socket:
    """The request; returns our end of its reply socket."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    payload = b"\0".join(x.encode() for x in [kind, str(rtprio), ",".join(map(str, targets)), *args])
    with _socket() as s:
        try:
            s.sendmsg([payload], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(_ints([theirs.fileno(), *fds])))])
        except OSError as e:
            mine.close()
            raise UsageError(f"the broker (root's part of ipctrace) is gone: {e.strerror}") from None
        finally:
            theirs.close()
    return mine


def _ints(fds: list[int]) -> bytearray:
    import array

    return bytearray(array.array("i", fds).tobytes())


def _reply(sock: socket.socket, timeout: float | None = None) -> str:
    """The next message on a reply socket ("" when it closed)."""
    if timeout is not None:
        ready, _, _ = select.select([sock], [], [], timeout)
        if not ready:
            raise TimeoutError
    try:
        return sock.recv(4096).decode(errors="replace")
    except OSError:
        return ""


def simple(kind: str) -> list[str]:
    """A request without a program (tracefs, clean): its lines until the end; a refusal is a
    UsageError."""
    sock = _send(kind, [], [], [])
    lines: list[str] = []
    with sock:
        while True:
            msg = _reply(sock)
            if not msg or msg.startswith("X"):
                return lines
            if msg.startswith("E"):
                raise UsageError(msg[1:])
            lines.append(msg)


def clean() -> tuple[list[Path], list[tuple[Path, str]]]:
    """Root's leftovers of dead runs, removed by the broker: (removed, [(path, why) not])."""
    removed: list[Path] = []
    failed: list[tuple[Path, str]] = []
    for line in simple("clean"):
        what, _, rest = line[1:].partition(" ")
        if line.startswith("R"):
            removed.append(Path(rest))
        elif line.startswith("F"):
            path, _, why = rest.partition(": ")
            failed.append((Path(path.removeprefix("remove ")), why))
    return removed, failed


def _std(spec: Any, write: bool, keep: list[int], ours: list[Any]) -> int:
    """A descriptor for stdin/stdout/stderr from Popen's conventions (None, DEVNULL, PIPE, a
    file or a number); PIPE's end for us goes into ours."""
    if spec is None:
        return 1 if write else 0
    if spec == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_WRONLY if write else os.O_RDONLY)
        keep.append(fd)
        return fd
    if spec == subprocess.PIPE:
        r, w = os.pipe()
        mine, child = (r, w) if write else (w, r)
        ours.append(os.fdopen(mine, "rb" if write else "wb", buffering=0))
        keep.append(child)
        return child
    if spec == subprocess.STDOUT:
        return -1
    return spec if isinstance(spec, int) else spec.fileno()


class BrokeredProcess:
    """A program the broker started for us, as subprocess.Popen would show it."""

    def __init__(
        self,
        kind: str,
        args: list[str],
        *,
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        pass_fds: tuple[int, ...] | list[int] = (),
        rtprio: int = 0,
        text: bool = False,
    ) -> None:
        self.args = args
        self.returncode: int | None = None
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        closing: list[int] = []
        try:
            ours: list[Any] = []
            fin = _std(stdin, False, closing, ours)
            self.stdin = ours.pop() if ours else None
            fout = _std(stdout, True, closing, ours)
            self.stdout = ours.pop() if ours else None
            ferr = _std(stderr, True, closing, ours)
            self.stderr = ours.pop() if ours else None
            ferr = fout if ferr == -1 else ferr
            targets = list(pass_fds)
            self._sock = _send(kind, args, [fin, fout, ferr, *targets], targets, rtprio)
        finally:
            for fd in closing:
                os.close(fd)
        if text:
            import io

            if self.stdin is not None:
                self.stdin = io.TextIOWrapper(io.BufferedWriter(self.stdin), line_buffering=True)
            if self.stdout is not None:
                self.stdout = io.TextIOWrapper(io.BufferedReader(self.stdout))
            if self.stderr is not None:
                self.stderr = io.TextIOWrapper(io.BufferedReader(self.stderr))
        msg = _reply(self._sock)
        if msg.startswith("E") or not msg.startswith("P"):
            self._sock.close()
            self._close_pipes()
            raise UsageError(msg[1:] if msg.startswith("E") else f"the broker could not start {kind}")
        self.pid = int(msg[1:])

    def _close_pipes(self) -> None:
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(TimeoutError):
                self._take(_reply(self._sock, 0))
        return self.returncode

    def _take(self, msg: str) -> None:
        if msg.startswith("X"):
            status = int(msg[1:])
            self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        elif not msg:
            # the broker is gone (it ended everything it started)
            self.returncode = -signal.SIGKILL
        if self.returncode is not None:
            with contextlib.suppress(OSError):
                self._sock.close()

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                self._take(_reply(self._sock, left))
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            except InterruptedError:
                continue
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """To the program, as os.kill would."""
        self._signal("S", sig)

    def killpg(self, sig: int) -> None:
        """To the program's process group (it leads one, as process_group=0 makes)."""
        self._signal("G", sig)

    def _signal(self, how: str, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(OSError):
                self._sock.send(f"{how}{int(sig)}".encode())

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Both pipes read to their end at once (a thread for stderr: neither can fill while
        we wait on the other), then the exit."""
        import threading

        err: list[Any] = [None]
        reader = None
        if self.stderr is not None:
            stderr = self.stderr
            reader = threading.Thread(target=lambda: err.__setitem__(0, stderr.read()), daemon=True)
            reader.start()
        out = self.stdout.read() if self.stdout else None
        if reader:
            reader.join()
        self.wait(timeout)
        return out, err[0]

    def __enter__(self) -> BrokeredProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_pipes()
        if self.returncode is None:
            self.wait()
