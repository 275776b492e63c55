"""The text of `ipctrace explain` on a merged directory (ipctrace merge): one round trip across
two hosts, part by part on the client's clock, each part where it happened."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from analysis.store.jsonfiles import MergeFile


def explain_text(x: dict) -> str:
    c = x["clock"]
    lines = [
        f"round trip {x['iteration']} of repetition {x['run']}: {x['latency_ns'] / 1e3:.2f} us "
        f"(rank {x['rank']} of the {x['of']} joined), client {x['hosts']['client']}, server {x['hosts']['server']}",
        (
            "on the client's clock, which the server's trace shares (one kernel: the same boot id, offset 0)"
            if c.get("same_clock")
            else f"on the client's clock; the server's is aligned to within ±{c['error_bound_ns'] / 1e3:.3f} us"
        )
        + ("" if c["consistent"] else " (INCONSISTENT: no clock line keeps every bound)"),
        "",
        f"{'at us':>10}  {'where':<8} {'part':<16} {'us':>10}  what",
    ]
    # where each part the clock's bound leaves open lies for any server clock within it (as printed)
    bound = defaultdict(
        str,
        {
            name: f" [{low / 1e3:.2f}..{high / 1e3:.2f} us within the ±{c['error_bound_ns'] / 1e3:.3f} us clock bound]"
            for name, (low, high) in x["intervals"].items()
            if f"{low / 1e3:.2f}" != f"{high / 1e3:.2f}"
        },
    )
    for name, where, start, ns, what in x["parts"]:
        lines.append(f"{start / 1e3:>10.2f}  {where:<8} {name:<16} {ns / 1e3:>10.2f}  {what}{bound[name]}")
    lines.append(f"{x['latency_ns'] / 1e3:>10.2f}  the answer is back: the round trip ends")
    return "\n".join(lines)


# The tracks of a merged directory's Perfetto trace: one process (track group) per host and
# one for the network between them.
_GROUPS = {"client": 1, "server": 2, "network": 3}


def perfetto_events(doc: MergeFile, iterations: pd.DataFrame, breakdown: pd.DataFrame) -> list[dict]:
    """Chrome JSON trace events of a merged directory (doc: its merge.json): each joined round trip a slice on the
    client's track, each of its parts a slice on its host's (or the network's) track, on the
    client's clock in µs from the first round trip."""
    import numpy as np

    from analysis.model.crosshost import PART_PLACES, PARTS

    it = iterations.set_index(["run", "iteration"])["t_start_ns"]
    start = it.reindex(list(zip(breakdown["run"], breakdown["iteration"], strict=True))).to_numpy(np.float64)
    origin = float(np.nanmin(start)) if len(start) else 0.0
    names = {
        "client": f"client {doc.hosts.client or ''}".strip(),
        "server": f"server {doc.hosts.server or ''}".strip(),
        "network": f"network (clock error ±{doc.clock.error_bound_ns / 1e3:.3f} us)",
    }
    out = []
    for where, pid in _GROUPS.items():
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": names[where]}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": pid, "args": {"name": where}})
    out.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 10, "args": {"name": "round trips"}})
    lat = breakdown["latency_ns"].to_numpy(np.float64)
    cols = {p: breakdown[p].to_numpy(np.float64) for p in PARTS}
    lows = {p: breakdown[f"{p}_low"].to_numpy(np.float64) for p in PARTS if f"{p}_low" in breakdown}
    highs = {p: breakdown[f"{p}_high"].to_numpy(np.float64) for p in lows}
    for i in range(len(breakdown)):
        if not np.isfinite(start[i]):
            continue
        t0 = (start[i] - origin) / 1e3
        args = {"run": int(breakdown["run"].iloc[i]), "iteration": int(breakdown["iteration"].iloc[i])}
        out.append({"ph": "X", "name": "round trip", "pid": 1, "tid": 10, "ts": t0, "dur": lat[i] / 1e3, "args": args})
        at = t0
        for p in PARTS:
            dur = cols[p][i] / 1e3
            where = PART_PLACES[p][0]
            # never negative (crosshost.round_trips); across hosts, each part carries the
            # interval the clock's bound leaves it
            e = {"ph": "X", "name": p, "pid": _GROUPS[where], "tid": _GROUPS[where], "ts": at, "dur": max(dur, 0.0)}
            if p in lows:
                e["args"] = {"low_us": lows[p][i] / 1e3, "high_us": highs[p][i] / 1e3}
            out.append(e)
            at += dur
    return out
