"""The copy cost of a run by every method it has: the breakdown's (probed copy routines, or
the estimate from bytes x the calibrated cost), a size sweep's fit, and the share of the
in-kernel stack samples inside copy routines."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

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


def estimates(summary: dict[str, Any], oncpu: pd.Series | None) -> list[tuple[str, str, float, str]]:
    """Rows (method, metric, ns per iteration, how) of every copy-cost figure this run has."""
    rows = []
    for metric, b in (summary.get("breakdown") or {}).items():
        comps = b.get("components", {})
        copy = (comps.get("copy") or {}).get("mean")
        source = b.get("copy_source", "")
        if copy is not None:
            rows.append(
                (
                    "direct (probed copy routines)" if source == "measured" else "breakdown estimate",
                    metric,
                    copy,
                    source,
                )
            )
        est = summary.get("copy_estimate")
        if est:
            rows.append(
                (
                    "size sweep",
                    metric,
                    est["ns"],
                    f"{est['bytes']:,.0f} B x {est['ns_per_byte']:.4f} ns/byte "
                    f"(95 % CI {est['ns_per_byte_ci95'][0]:.4f}..{est['ns_per_byte_ci95'][1]:.4f})",
                )
            )
        share, k = sampled_share(oncpu)
        kernel = sum((comps.get(c) or {}).get("mean") or 0 for c in ("syscall", "copy"))
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
