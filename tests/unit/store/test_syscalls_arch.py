"""The syscall tables per architecture (tools/gen-syscalls -> analysis/store/syscalls.py): the
arm64 numbers of every call --rtt and the breakdown recognise, worked out by hand from the
kernel's include/uapi/asm-generic/unistd.h, and the calls arm64 does not have refused by name."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.cli.trace import _syscalls
from analysis.model import rtt, timeline
from analysis.store import syscalls
from conftest import HOME

# include/uapi/asm-generic/unistd.h (the table arm64 uses), by hand
ARM64 = {
    "read": 63,
    "write": 64,
    "readv": 65,
    "writev": 66,
    "pread64": 67,
    "pwrite64": 68,
    "preadv": 69,
    "pwritev": 70,
    "futex": 98,
    "clock_gettime": 113,
    "mq_timedsend": 182,
    "mq_timedreceive": 183,
    "sendto": 206,
    "recvfrom": 207,
    "sendmsg": 211,
    "recvmsg": 212,
    "execve": 221,
    "execveat": 281,
}
RECOGNISED = {*rtt.SEND_CALLS, *rtt.RECEIVE_CALLS, *timeline.DATA_SYSCALLS, "futex", "execve", "execveat"}


def test_every_call_the_analysis_recognises_has_its_arm64_number():
    assert RECOGNISED <= ARM64.keys()
    assert syscalls.numbers("aarch64", RECOGNISED) == {nr: name for name, nr in ARM64.items() if name in RECOGNISED}


@pytest.mark.parametrize("name", sorted(ARM64))
def test_arm64_numbers_by_hand(name):
    assert syscalls.name("aarch64", ARM64[name]) == name


@pytest.mark.parametrize(
    "call, instead",
    [("pipe", "pipe2"), ("open", "openat"), ("fork", "clone"), ("poll", "ppoll"), ("epoll_wait", "epoll_pwait")],
)
def test_calls_arm64_lacks_are_refused_by_name(call, instead):
    why = syscalls.missing("aarch64", call)
    assert why == f"{call} is a system call of x86_64 that aarch64 does not have (its programs call {instead})"
    with pytest.raises(argparse.ArgumentTypeError, match=f"^{why}$".replace("(", r"\(").replace(")", r"\)")):
        _syscalls(f"read,{call}", arch="aarch64")
    # on x86_64 the same call is taken, by its x86_64 number
    assert call in _syscalls(call, arch="x86_64").values()


def test_what_no_architecture_has_is_not_called_missing():
    assert syscalls.missing("aarch64", "read") is None
    assert syscalls.missing("aarch64", "nosuchcall") is None
    assert syscalls.missing("x86_64", "pipe") is None
    assert _syscalls("read,write,pipe2", arch="aarch64") == {59: "pipe2", 63: "read", 64: "write"}


@pytest.mark.skipif(
    not Path("/usr/include/asm-generic/unistd.h").exists()
    or not Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h").exists(),
    reason="the kernel's UAPI headers (linux-libc-dev) are not installed",
)
def test_the_committed_tables_are_what_the_generator_writes(tmp_path):
    out = tmp_path / "syscalls.py"
    subprocess.run([sys.executable, str(HOME / "tools" / "gen-syscalls"), str(out)], check=True)
    assert out.read_text() == (HOME / "analysis" / "store" / "syscalls.py").read_text()
