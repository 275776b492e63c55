"""The copy cost of a run by every method it has: the breakdown's (probed copy routines, or
the estimate from bytes x the calibrated cost), a size sweep's fit, and the share of the
in-kernel stack samples inside copy routines."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from analysis.model import native
from analysis.model.timeline import DATA_SYSCALLS, Events
from analysis.store import syscalls
from analysis.store.jsonfiles import Workload

if TYPE_CHECKING:
    import pandas as pd

    from analysis.store.jsonfiles import Stats
    from analysis.store.summaryfile import RunSummary

# Kernel routines that move bytes between user and kernel memory.
COPY_FRAME = re.compile(
    r"(?:copy_(?:page_)?(?:to|from)_iter|copy_user|rep_movs|_copy_(?:to|from)_user|memcpy|"
    r"copyin|copyout|csum_and_copy)"
)


def sampled_share(oncpu: pd.Series | None) -> tuple[float | None, int]:
    """(share, kernel samples): the fraction of in-kernel samples inside a copy routine."""
    if oncpu is None or not len(oncpu):
        return None, 0
    stacks = oncpu.index.to_series()
    in_kernel = stacks.str.contains("_[k]", regex=False).to_numpy()
    in_copy = stacks.str.contains(COPY_FRAME).to_numpy() & in_kernel
    k = int(oncpu[in_kernel].sum())
    return (float(oncpu[in_copy].sum()) / k if k else None), k


def estimates(summary: RunSummary, oncpu: pd.Series | None) -> list[tuple[str, str, float, str]]:
    """Rows (method, metric, ns per iteration, how) of every copy-cost figure this run has."""

    def mean_of(comps: dict[str, Stats], name: str) -> float | None:
        c = comps.get(name)
        return c.mean if c is not None else None

    rows = []
    for metric, b in (summary.breakdown or {}).items():
        comps = b.components
        copy = mean_of(comps, "copy")
        source = b.copy_source or ""
        if copy is not None:
            rows.append(
                (
                    "direct (probed copy routines)" if source == "measured" else "breakdown estimate",
                    metric,
                    copy,
                    source,
                )
            )
        est = summary.copy_estimate
        if est is not None and est.ns is not None and est.bytes is not None and est.ns_per_byte is not None:
            ci = est.ns_per_byte_ci95 or [float("nan")] * 2  # the file's interval (the schema lets it out)
            rows.append(
                (
                    "size sweep",
                    metric,
                    est.ns,
                    f"{est.bytes:,.0f} B x {est.ns_per_byte:.4f} ns/byte (95 % CI {ci[0]:.4f}..{ci[1]:.4f})",
                )
            )
        share, k = sampled_share(oncpu)
        kernel = sum(mean_of(comps, c) or 0 for c in ("syscall", "copy"))
        if share is not None and kernel:
            rows.append(
                (
                    "sampling",
                    metric,
                    share * kernel,
                    f"{share * 100:.1f} % of {k} in-kernel samples in copy routines x {kernel:,.0f} ns in syscalls",
                )
            )
    return rows


# Copy estimate without copy-routine probes. The driver times this CPU's copy instruction
# before each run (workload.json copy_calibration: ns per 1-byte copy, ns per byte);
# `ipctrace sweep` replaces the per-byte figure with the slope it measures
# (copy_ns_per_byte). Results written before the calibration existed fall back to these
# assumed figures (a fixed cost per copy, and 10 GB/s), and copy_source says "assumed".
COPY_NS_PER_CALL = 15.0


COPY_NS_PER_BYTE = 0.1


def copy_costs(workload: Workload, copy_ns_per_byte: float | None = None) -> tuple[float, float, str]:
    """(ns per copy call, ns per byte, where each comes from) for the copy estimate."""
    cal = workload.copy_calibration or {}
    if "ns_per_call" in cal:
        per_call, call_src = float(cal["ns_per_call"]), "timed on this CPU"
    else:
        per_call, call_src = COPY_NS_PER_CALL, "assumed"
    if copy_ns_per_byte is not None:
        per_byte, byte_src = float(copy_ns_per_byte), "from the size sweep"
    elif "ns_per_byte" in cal:
        per_byte, byte_src = float(cal["ns_per_byte"]), "timed on this CPU, cache-hot"
    else:
        per_byte, byte_src = COPY_NS_PER_BYTE, "assumed"
    return per_call, per_byte, f"per call {call_src}, per byte {byte_src}"


class CopyBytes:
    """Bytes the data-moving syscalls of each thread returned (sys_exit), for the copy estimate."""

    def __init__(self, ev: Events, arch: str):
        table = syscalls.numbers(arch, DATA_SYSCALLS)
        i = ev.of("sys_exit")
        # A lookup table: np.isin of 3 M values in this list took 0.2 s.
        data = np.zeros(max(table) + 1, bool)
        data[list(table)] = True
        nr = ev.nr[i]
        i = i[(nr < len(data)) & data[np.clip(nr, 0, len(data) - 1)] & (ev.ret[i] > 0)]
        self.ev, self.idx = ev, i
        self.cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def calls_bytes(self, tid: int, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if tid not in self.cache:
            i = self.idx[self.ev.tid[self.idx] == tid]
            self.cache[tid] = self.ev.ts[i], np.concatenate(([0], np.cumsum(self.ev.ret[i])))
        ts, cum = self.cache[tid]
        # side left: the count at or before starts - 1 (integer ns)
        a, b = native.count_upto(ts, starts - 1), native.count_upto(ts, ends)
        return b - a, cum[b] - cum[a]
