"""The machine's facts a summary records (summary.json's and suite.json's host): read from
/proc, /sys and the platform here, below the model that only puts them in its results."""

from __future__ import annotations

import os
import platform

from analysis.store.jsonfiles import Host


def host_info() -> Host:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        with open("/sys/devices/system/cpu/online") as f:
            online = f.read().strip()
    except OSError:
        online = ""
    return Host(
        kernel=platform.release(),
        machine=platform.machine(),
        cpu_model=model,
        cores=os.cpu_count(),
        online_cpus=online,
        hostname=platform.node(),
        clocksource=_first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        hypervisor=hypervisor(),
        boot_id=_first_line("/proc/sys/kernel/random/boot_id"),
    )


def _first_line(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.readline().strip() or None
    except OSError:
        return None


def hypervisor() -> str:
    """The hypervisor under this kernel as far as it says: Xen's type, else with the CPU's
    hypervisor flag the firmware's vendor (QEMU, Amazon EC2...) or that one is there; "none"
    without the flag (bare metal)."""
    xen = _first_line("/sys/hypervisor/type")
    if xen:
        return xen
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return "unknown"
    if " hypervisor" not in flags:
        return "none"
    return _first_line("/sys/class/dmi/id/sys_vendor") or "present (the CPU flag; no vendor told)"
