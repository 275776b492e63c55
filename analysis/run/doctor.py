"""What this kernel lets ipctrace trace: the tracer's own answers (`ipctrace-loader
--doctor` tries each feature for real)."""

import json
import os
import subprocess
from typing import Any

from analysis import LOADER
from analysis.errors import UsageError
from analysis.run import privilege


def probe() -> dict[str, Any]:
    """The tracer's --doctor answers: {"features", "attach", "possible", "why_impossible"}."""
    if not os.access(LOADER, os.X_OK):
        raise UsageError(f"the tracer {LOADER} is not built; run 'make'")
    p = privilege.run_as_root([str(LOADER), "--doctor"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    try:
        d = json.loads(p.stdout)
    except ValueError:
        line = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise UsageError(f"ipctrace-loader --doctor failed: {line}") from None
    # trace --iteration-func and --markers need uprobes: the tracer tries one with its rights
    # (root's, under sudo too); an older tracer's answers do not say, then we try
    up = d.pop("uprobe", None) or uprobe_feature()
    d.setdefault("features", {})["uprobe"] = up
    d["features"]["usdt"] = {
        "ok": up["ok"],
        "detail": "USDT markers are uprobes at their notes' addresses: " + ("as above" if up["ok"] else "no uprobes"),
    }
    return d


UPROBE_PMU = "/sys/bus/event_source/devices/uprobe"


def uprobe_feature(binary: str = "/bin/true") -> dict:
    """Whether the kernel takes a uprobe (trace --iteration-func; --markers' USDT probes are
    uprobes too), tried for real as the tracer's answers are: perf_event_open of the uprobe PMU
    on the entry of binary, for this process only, closed at once (never hit: binary is not
    mapped here)."""
    import ctypes
    import struct

    try:
        with open(f"{UPROBE_PMU}/type") as f:
            pmu = int(f.read())
    except (OSError, ValueError):
        return {"ok": False, "detail": f"no uprobe PMU ({UPROBE_PMU}): kernel built without CONFIG_UPROBE_EVENTS"}
    try:
        offset = _entry_offset(binary)
    except (OSError, ValueError, struct.error) as e:
        return {"ok": False, "detail": f"cannot read {binary}'s entry point to try one: {e}"}
    path = ctypes.create_string_buffer(binary.encode())
    attr = bytearray(128)
    struct.pack_into("<IIQ", attr, 0, pmu, len(attr), 0)  # type, size, config (0: entry, not return)
    struct.pack_into("<QQ", attr, 56, ctypes.addressof(path), offset)  # config1 (the path), config2 (offset)
    libc = ctypes.CDLL(None, use_errno=True)
    buf = (ctypes.c_char * len(attr)).from_buffer(attr)
    nr = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
    if nr is None:
        return {"ok": False, "detail": f"not tried on {os.uname().machine}"}
    fd = libc.syscall(nr, buf, 0, -1, -1, 0)
    if fd < 0:
        return {"ok": False, "detail": f"perf_event_open of a uprobe on {binary}: {os.strerror(ctypes.get_errno())}"}
    os.close(fd)
    return {"ok": True, "detail": f"a uprobe on {binary}'s entry opened (uprobe PMU type {pmu})"}


def _entry_offset(binary: str) -> int:
    """The file offset of an ELF64 executable's entry point (through its PT_LOAD segments)."""
    import struct

    with open(binary, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            raise ValueError("not an ELF64 file")
        entry, phoff = struct.unpack_from("<QQ", head, 24)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for k in range(phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", table, k * phentsize)
        if p_type == 1 and p_vaddr <= entry < p_vaddr + p_filesz:
            return entry - p_vaddr + p_offset
    raise ValueError("its entry point is in no loaded segment")
