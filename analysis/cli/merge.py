"""ipctrace merge A B --out DIR: two traces of one conversation, taken on two hosts, joined into
one results directory whose iterations are the client's round trips, each cut into the client's,
the network's and the server's parts on one clock.

Both are traced with --messages. The client is the trace with iterations (`trace --rtt`,
--markers or --iteration); the server is traced in any mode (the whole trace is enough). Messages are matched by what they carry (the
probes hash each write/sendto/read/recvfrom's first 64 bytes and keep its length), never by
timing; the server's clock is aligned to the client's from the matched traffic both ways
(model/crosshost.py: offset and drift, and an error bound that no clock consistent with the
traffic exceeds). No matched traffic both ways: exit 2.

DIR gets merge.json (the two traces, the alignment, the joined counts, each part's statistics),
iterations.parquet (the client's), breakdown.parquet (the parts of each joined round trip) and a
summary.json whose breakdown is those parts: compare, collect and report read it as a run."""

import argparse
import os
from pathlib import Path

from analysis.errors import UsageError
from analysis.model import crosshost
from analysis.store import events as events_mod
from analysis.store import jsonfiles, results, safeio


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge",
        description=__doc__,
    )
    p.add_argument("a", metavar="A", help="a trace's results directory (the client's, or the server's)")
    p.add_argument("b", metavar="B", help="the other host's trace")
    p.add_argument("--out", required=True, metavar="DIR", help="the merged results directory (new)")
    p.add_argument("--json", action="store_true", help="print merge.json instead of the table")


def _side(path: str) -> tuple[Path, bool]:
    d = Path(path)
    results.check_results_dir(d)
    if not os.path.lexists(d / "events.parquet"):
        raise UsageError(f"{d} has no events.parquet: merge joins two traces (ipctrace trace on each host)")
    has_iterations = os.path.lexists(d / "iterations.parquet")
    return d, has_iterations


def run(args: argparse.Namespace) -> int:
    (a, a_iter), (b, b_iter) = _side(args.a), _side(args.b)
    if not a_iter and not b_iter:
        raise UsageError("merge: neither trace has iterations: trace the client with --rtt (or --markers, --iteration)")
    client, server = (a, b) if a_iter else (b, a)
    out = Path(args.out)
    if os.path.lexists(out) and (not out.is_dir() or any(os.scandir(out))):
        raise UsageError(f"{out} exists: give a new directory to --out")
    iterations = results.read_iterations(client)
    ce, se = events_mod.read_parquet(client), events_mod.read_parquet(server)
    cm, sm = crosshost.messages(ce), crosshost.messages(se)
    for d, m in ((client, cm), (server, sm)):
        if not len(m):
            raise UsageError(f"merge: {d} has no message records: trace both hosts with ipctrace trace --messages")
    to_server, to_client = crosshost.match(cm, sm), crosshost.match(sm, cm)
    joined = crosshost.pairs(iterations, to_server, to_client)
    # the clocks from the joined round trips' own messages: a match outside them never counts;
    # two traces of one boot of one kernel read one clock (offset exactly 0)
    out_msgs = joined[["send_a", "recv_b"]].set_axis(["ts_send", "ts_recv"], axis=1)
    back_msgs = joined[["send_b", "recv_a"]].set_axis(["ts_send", "ts_recv"], axis=1)
    boots = (_boot_id(client), _boot_id(server))
    one = boots[0] is not None and boots[0] == boots[1]
    clock = crosshost.one_clock(out_msgs, back_msgs) if one else crosshost.align(out_msgs, back_msgs)
    trips = crosshost.round_trips(iterations, ce, se, joined, clock)
    doc = crosshost.merge_file(
        str(client),
        str(server),
        jsonfiles.MergeHosts(client=_host(client), server=_host(server)),
        clock,
        jsonfiles.MergeMessages(client_to_server=len(to_server), server_to_client=len(to_client)),
        len(iterations),
        trips,
    )
    client_summary = results.run_summary_file(client)
    metric = client_summary.primary_metric or "rtt"
    doc_json = doc.to_json()
    facts = {k: doc_json[k] for k in ("client", "server", "hosts", "messages", "round_trips", "joined")}
    summary = crosshost.summary(client_summary, trips, clock, facts)
    safeio.makedirs(out)
    results.write_iterations(out / "iterations.parquet", iterations)
    import pandas as pd
    import pyarrow as pa

    # the breakdown's own columns: the metric, and the tail's causes (none found across hosts)
    bd = trips.assign(metric=pd.Categorical([metric] * len(trips)), tail=pd.Categorical([""] * len(trips)))
    results.write_parquet(pa.Table.from_pandas(bd, preserve_index=False), out / "breakdown.parquet")
    for name in ("workload.json",):
        if os.path.lexists(client / name):
            results.write_json(out / name, results.read_json(client / name))
    results.write_json(out / "summary.json", summary)
    results.write_json(out / "merge.json", doc_json)
    results.write_json(
        out / "meta.json", {"command": ["ipctrace", "merge", str(a), str(b)], "status": "complete", "traced": True}
    )
    if args.json:
        import json

        print(json.dumps(doc_json, indent=2))
    else:
        print(_render(doc, out))
    return 0


def _host(d: Path) -> str | None:
    s = results.read_json(d / "summary.json") if os.path.lexists(d / "summary.json") else {}
    return (s.get("host") or {}).get("hostname")


def _boot_id(d: Path) -> str | None:
    """The boot of the kernel a trace was taken on, as its tracer recorded it (trace.json
    boot_id), None unknown: never the boot of the machine that analysed it (summary.json's
    host), which for two guests' traces analysed on one host is the host's (make vmtest)."""
    return (results.trace_file(d).boot_id or None) if os.path.lexists(d / "trace.json") else None


def _render(doc: jsonfiles.MergeFile, out: Path) -> str:
    c = doc.clock
    pct = 100.0 * doc.joined / doc.round_trips if doc.round_trips else 0.0
    lines = [
        f"merge: client {doc.client} ({doc.hosts.client}), server {doc.server} ({doc.hosts.server})",
        f"messages matched by content: {doc.messages.client_to_server} client -> server, "
        f"{doc.messages.server_to_client} server -> client",
        (
            "clock: one kernel (the same boot id): the two traces read one clock, offset 0"
            + (
                ""
                if c.consistent
                else f"; INCONSISTENT: a message received {c.error_bound_ns / 1e3:.3f} us before it was sent"
            )
        )
        if c.same_clock
        else f"clock: server = client {c.offset_ns / 1e3:+.3f} us, drift {c.drift_ppm:+.2f} ppm; "
        + (
            f"error bound ±{c.error_bound_ns / 1e3:.3f} us"
            if c.consistent
            else f"INCONSISTENT: no clock line keeps every bound (off by up to {c.error_bound_ns / 1e3:.3f} us)"
        ),
        f"round trips joined: {doc.joined} of {doc.round_trips} ({pct:.1f} %)",
        "",
        f"{'part':<16} {'median us':>10} {'mean us':>10} {'share':>7}",
    ]
    total = sum(s.mean for p in crosshost.PARTS if (s := doc.parts.get(p)) is not None) or 1.0
    if doc.intervals:
        lines[-1] += f"  {'median within the clock bound':>30}"
    for p in crosshost.PARTS:
        s = doc.parts.get(p)
        if s is None:
            continue
        line = f"{p:<16} {s.median / 1e3:>10.2f} {s.mean / 1e3:>10.2f} {100 * s.mean / total:>6.1f}%"
        iv = doc.intervals.get(p)
        low, high = (iv.median_low_ns / 1e3, iv.median_high_ns / 1e3) if iv else (0.0, 0.0)
        if f"{low:.2f}" != f"{high:.2f}":  # a range as printed, not one figure twice
            line += f"  {low:>13.2f} .. {high:.2f} us"
        lines.append(line)
    if doc.intervals:
        lines.append(
            f"a part with a range lies in it for any server clock within the error bound "
            f"(±{c.error_bound_ns / 1e3:.3f} us): a 0 beside a range may be the clock's, not the path's"
        )
    lines.append(f"results: {out}")
    return "\n".join(lines)
