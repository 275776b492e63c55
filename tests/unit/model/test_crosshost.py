"""model/crosshost.py: messages matched by content, the server's clock aligned from the
matched traffic with an error bound that holds, and what cannot be aligned refused."""

import numpy as np
import pandas as pd
import pytest

from analysis.errors import UsageError
from analysis.model import crosshost
from analysis.store import summaryfile
from analysis.store.records import MSG_RECV, MSG_SEND, MSG_UNREAD
from analysis.store.summaryfile import RunSummary


def msgs(rows):
    return pd.DataFrame(rows, columns=["ts", "tid", "dir", "key"]).astype(np.int64)


def conversation(n, offset_ns, drift, seed=1, t0=10**12):
    """n round trips on the client's clock a; the server's clock reads a + offset + drift * (a - t0).
    One-way delays of 20..80 µs; the server answers after 100 µs."""
    rng = np.random.default_rng(seed)
    send_a = t0 + np.arange(n) * 1_000_000 + rng.integers(0, 1000, n)
    recv_true = send_a + rng.integers(20_000, 80_000, n)  # the server's receive, on a's clock
    reply_true = recv_true + 100_000
    recv_a = reply_true + rng.integers(20_000, 80_000, n)

    def on_b(a):
        return (a + offset_ns + drift * (a - t0)).astype(np.int64)

    out = pd.DataFrame({"ts_send": send_a, "ts_recv": on_b(recv_true)})
    back = pd.DataFrame({"ts_send": on_b(reply_true), "ts_recv": recv_a})
    return out, back


@pytest.mark.parametrize("offset_ns, drift", [(0, 0.0), (5_000_000_000, 0.0), (-3_000_000_000, 50e-6), (7e9, -200e-6)])
def test_the_true_clock_is_within_the_error_bound(offset_ns, drift):
    out, back = conversation(2000, offset_ns, drift)
    c = crosshost.align(out, back)
    assert c.consistent and c.out == c.back == 2000
    # the true clock at any matched message is within the bound of the fitted one
    a = np.concatenate([out["ts_send"], back["ts_recv"]]).astype(np.float64)
    true = offset_ns + drift * (a - 10**12)
    fitted = c.offset_ns + c.drift * (a - c.t0_ns)
    assert np.max(np.abs(fitted - true)) <= c.error_ns + 1.0
    # and the bound is no wider than the fastest round trip's network time allows (40 µs here)
    assert c.error_ns < 40_000
    # the server's times put back on the client's clock
    back_on_a = c.to_client(back["ts_send"].to_numpy())
    assert np.all(back_on_a <= back["ts_recv"].to_numpy() + c.error_ns)


def test_a_clock_that_steps_is_said_inconsistent():
    out, back = conversation(400, 0, 0.0)
    late = out.index >= 200
    out.loc[late, "ts_recv"] += 10_000_000  # the server's clock stepped 10 ms midway
    back.loc[late, "ts_send"] += 10_000_000
    c = crosshost.align(out, back)
    # a single step of 10 ms over a 0.4 s trace is no line: the bounds cannot all hold
    assert not c.consistent and c.error_ns > 0


def test_no_traffic_both_ways_is_refused():
    out, back = conversation(10, 0, 0.0)
    with pytest.raises(UsageError, match="cannot be aligned: 10 messages matched from the client to the server and 0"):
        crosshost.align(out, back.iloc[:0])


def test_messages_match_by_content_once_and_never_by_time():
    a = msgs(
        [
            (100, 1, MSG_SEND, 11),  # matched
            (200, 1, MSG_SEND, 22),  # sent twice: matches nothing
            (300, 1, MSG_SEND, 22),
            (400, 1, MSG_RECV, 33),  # a receive on both sides (a file both read): no send, no match
            (500, 1, MSG_SEND, 44),  # never received
        ]
    )
    b = msgs([(9_000, 7, MSG_RECV, 11), (9_100, 7, MSG_RECV, 22), (9_200, 7, MSG_RECV, 33), (9_300, 7, MSG_SEND, 55)])
    got = crosshost.match(a, b)
    assert got[["ts_send", "tid_send", "ts_recv", "tid_recv", "key"]].values.tolist() == [[100, 1, 9_000, 7, 11]]
    events = pd.DataFrame(
        {
            "type": ["msg", "msg", "sys_enter"],
            "ts": [1, 2, 3],
            "tid": [5, 5, 5],
            "aux": [MSG_SEND, MSG_RECV | MSG_UNREAD, 0],
            "a0": [11, 22, 0],
        }
    )
    assert crosshost.messages(events)["key"].tolist() == [11]  # the unread receive is no message


def test_pairs_keep_only_the_round_trips_own_messages():
    it = pd.DataFrame(
        {"run": 0, "iteration": [0, 1], "seq": [0, 1], "tid": 1, "t_start_ns": [100, 1000], "t_end_ns": [500, 1400]}
    )
    out = pd.DataFrame(
        {
            "ts_send": [110, 50, 1010],
            "tid_send": [1, 1, 1],
            "ts_recv": [7000, 6000, 8000],
            "tid_recv": 9,
            "key": [1, 2, 3],
        }
    )
    back = pd.DataFrame({"ts_send": [7100, 7900], "tid_send": 9, "ts_recv": [490, 1390], "tid_recv": 1, "key": [4, 5]})
    j = crosshost.pairs(it, out, back)
    # iteration 1's answer was sent (7900) before its request arrived (8000): not a round trip
    assert j[["index", "send_a", "recv_b", "send_b", "recv_a"]].values.tolist() == [[0, 110, 7000, 7100, 490]]


def test_the_merge_facts_are_read_from_what_the_merged_summary_holds():
    """A merged directory's summary.json keeps the merge under extra.merge (crosshost.summary);
    MergeFacts.of reads it back typed, the clock's error bound among it (the report's header
    says it); a run's summary has none."""
    out, back = conversation(50, 5_000_000, 0.0)
    clock = crosshost.align(out, back)
    trips = pd.DataFrame({p: np.full(4, 10.0) for p in crosshost.PARTS} | {"run": 0})
    client = RunSummary.from_json({"schema_version": 1, "workload": "pipe", "metrics": {}, "extra": {"tag": "x"}})
    facts = {"client": "a", "server": "b", "round_trips": 4, "joined": 4}
    merged = crosshost.summary(client, trips, clock, facts)
    got = summaryfile.MergeFacts.of(merged["extra"])
    assert got == summaryfile.MergeFacts("a", "b", 4, 4, clock.error_ns)
    assert summaryfile.MergeFacts.of(client.extra) is None


# --- the parts of a round trip: sequential, never negative -------------------------------


def events(rows):
    """(type, ts, tid, next_tid) rows as an events frame (system call number 0, one CPU) that
    round_trips reads through its decoded model."""
    f = pd.DataFrame(rows, columns=["type", "ts", "tid", "next_tid"])
    return f.assign(aux=0, a0=0, cpu=0, pid=f["tid"], other_tid=-1)


# One kernel, worked out by hand. The client (tid 1) sends at 1100..1600; the kernel wakes the
# server (tid 9, asleep in its receive since 500) inside that send, at 1300; the server runs at
# 1400, its receive returns at 1500, it answers at 2000..2500 and wakes the client (asleep in its
# receive since 1700) inside that send, at 2200; the client runs at 2300, its receive returns at
# 2400, the iteration ends at 2600.
CLIENT = events(
    [
        ("sys_enter", 1100, 1, 0),
        ("sys_exit", 1600, 1, 0),
        ("sys_enter", 1700, 1, 0),
        ("waking", 2200, 1, 0),
        ("switch", 2300, 5, 1),
        ("sys_exit", 2400, 1, 0),
    ]
)
SERVER = events(
    [
        ("sys_enter", 500, 9, 0),
        ("waking", 1300, 9, 0),
        ("switch", 1400, 6, 9),
        ("sys_exit", 1500, 9, 0),
        ("sys_enter", 2000, 9, 0),
        ("sys_exit", 2500, 9, 0),
    ]
)
ITER = pd.DataFrame({"run": [0], "iteration": [0], "seq": [0], "tid": [1], "t_start_ns": [1000], "t_end_ns": [2600]})
JOINED = pd.DataFrame(
    {
        "index": [0],
        "send_a": [1100],
        "recv_b": [1500],
        "tid_b": [9],
        "send_b": [2000],
        "recv_a": [2400],
        "tid_b_send": [9],
    }
)


def test_one_kernel_one_clock_offset_exactly_zero():
    out = pd.DataFrame({"ts_send": [1100], "ts_recv": [1500]})
    back = pd.DataFrame({"ts_send": [2000], "ts_recv": [2400]})
    c = crosshost.one_clock(out, back)
    assert (c.offset_ns, c.drift, c.error_ns, c.consistent, c.same_clock) == (0.0, 0.0, 0.0, True, True)
    assert c.to_json()["same_clock"] is True
    assert crosshost.one_clock(out, back).to_client(np.array([1234])).tolist() == [1234.0]


def test_a_wake_up_inside_the_send_is_the_send_s_never_the_network_s_too():
    clock = crosshost.one_clock(
        pd.DataFrame({"ts_send": [1100], "ts_recv": [1500]}), pd.DataFrame({"ts_send": [2000], "ts_recv": [2400]})
    )
    t = crosshost.round_trips(ITER, CLIENT, SERVER, JOINED, clock).iloc[0]
    want = {
        "client_before": 100,  # 1000 .. 1100
        "client_send": 200,  # 1100 .. the server's wake-up at 1300, inside the send
        "network_out": 0,  # the send woke the server itself
        "server_runqueue": 100,
        "server_recv": 100,
        "server_user": 500,
        "server_send": 200,  # 2000 .. the client's wake-up at 2200, inside it
        "network_back": 0,
        "client_runqueue": 100,
        "client_recv": 100,
        "client_after": 200,
    }
    assert {p: float(t[p]) for p in crosshost.PARTS} == want
    assert sum(want.values()) == t["latency_ns"] == 1600


@pytest.mark.parametrize("early_ns", [0, 300, 5000])
def test_a_clock_off_within_its_bound_makes_a_part_zero_never_negative(early_ns):
    """Across hosts the server's events may land early on the client's clock (the alignment's
    error): no part goes below 0 and they still add up to the latency."""
    clock = crosshost.Alignment(0, float(early_ns), 0.0, float(early_ns), True, 1, 1, 1)
    t = crosshost.round_trips(ITER, CLIENT, SERVER, JOINED, clock)
    parts = t[list(crosshost.PARTS)].to_numpy()
    assert (parts >= 0).all()
    assert parts.sum() == t["latency_ns"].iloc[0] == 1600


def test_a_merged_directory_is_a_traced_run():
    """summary.json of a merge (extra.merge) counts as traced for collect and export; the
    report draws its parts, says where its tracing is and explains it; its flame graph puts each
    part on its host or the network, none under '-'."""
    from analysis.render import flame, report
    from analysis.store import results
    from analysis.store.summaryfile import RunSummary

    clock = crosshost.one_clock(
        pd.DataFrame({"ts_send": [1], "ts_recv": [2]}), pd.DataFrame({"ts_send": [3], "ts_recv": [4]})
    )
    trips = pd.DataFrame({p: np.full(4, 10.0 + i) for i, p in enumerate(crosshost.PARTS)} | {"run": 0})
    client = {
        "schema_version": results.SCHEMA_VERSION,
        "workload": "x",
        "primary_metric": "rtt",
        "metrics": {"rtt": {}},
    }
    facts = {"client": "C", "server": "S", "round_trips": 4, "joined": 4}
    merged = crosshost.summary(RunSummary.from_json(client), trips, clock, facts)
    assert results.was_traced(merged) and results.is_merged(merged) and not results.is_merged(client)
    s = RunSummary.from_json(merged)
    bar = report.breakdown_bar(report.component_means(s.breakdown["rtt"].components))
    assert bar.count("<div title=") == len(crosshost.PARTS) and "server_runqueue" in bar
    assert "Not traced" not in report.trace_section(s) and "C" in report.trace_section(s)
    totals = {"rtt": {p: 10.0 for p in crosshost.PARTS}}
    folded = flame.folded_from_totals(totals, crosshost.PARTS)
    assert not any(";-;" in k for k in folded.index)
    assert "rtt;network;network_out" in folded.index and "rtt;server;server_user" in folded.index


def test_explain_of_a_merge_on_one_kernel_says_one_clock():
    from analysis.render.crosshost import explain_text

    clock = crosshost.one_clock(
        pd.DataFrame({"ts_send": [1100], "ts_recv": [1500]}), pd.DataFrame({"ts_send": [2000], "ts_recv": [2400]})
    )
    trips = crosshost.round_trips(ITER, CLIENT, SERVER, JOINED, clock)
    text = explain_text(crosshost.explain_merged(_merge_file(clock, trips), trips, "m"))
    assert "round trip 0 of repetition 0: 1.60 us" in text
    assert "which the server's trace shares (one kernel: the same boot id, offset 0)" in text and "±" not in text


@pytest.mark.parametrize("early_ns", [300, 5000])
def test_across_hosts_a_part_the_bound_leaves_open_is_an_interval(early_ns):
    """The server's clock aligned early_ns too early, with that as its error bound: the aligned
    cuts make parts 0 (the client's send, the server's run queue: their time put elsewhere), and
    each part is the interval it lies in for any clock within the bound, which holds the true
    part (the one-kernel figures above); explain says the ranges, the summary has them."""
    from analysis.render.crosshost import explain_text

    clock = crosshost.Alignment(0, float(early_ns), 0.0, float(early_ns), True, 1, 1, 1)
    t = crosshost.round_trips(ITER, CLIENT, SERVER, JOINED, clock).iloc[0]
    true = {
        "client_before": 100,
        "client_send": 200,
        "network_out": 0,
        "server_runqueue": 100,
        "server_recv": 100,
        "server_user": 500,
        "server_send": 200,
        "network_back": 0,
        "client_runqueue": 100,
        "client_recv": 100,
        "client_after": 200,
    }
    for name, v in true.items():
        assert t[f"{name}_low"] <= v <= t[f"{name}_high"], (name, t[f"{name}_low"], t[f"{name}_high"])
        assert 0 <= t[f"{name}_low"] <= t[name] <= t[f"{name}_high"]
    assert t["client_send"] == 0 < t["client_send_high"]  # the send's time, made 0 by the clock, is in its range
    assert t["client_before_low"] == t["client_before_high"] == 100  # on the client's clock, no cut moved
    trips = crosshost.round_trips(ITER, CLIENT, SERVER, JOINED, clock)
    x = crosshost.explain_merged(_merge_file(clock, trips), trips, "m")
    low, high = x["intervals"]["client_send"]
    line = next(s for s in explain_text(x).splitlines() if " client_send " in s)
    assert f"[{low / 1e3:.2f}..{high / 1e3:.2f} us within the ±{early_ns / 1e3:.3f} us clock bound]" in line
    merged = crosshost.summary(_client_summary(primary_metric="rtt"), trips, clock, {})
    assert "client_send" in merged["extra"]["merge"]["intervals"]
    assert "client_before" not in merged["extra"]["merge"]["intervals"]


def test_one_kernel_has_exact_parts_and_no_intervals():
    clock = crosshost.one_clock(
        pd.DataFrame({"ts_send": [1100], "ts_recv": [1500]}), pd.DataFrame({"ts_send": [2000], "ts_recv": [2400]})
    )
    trips = crosshost.round_trips(ITER, CLIENT, SERVER, JOINED, clock)
    assert not [c for c in trips.columns if c.endswith(("_low", "_high"))]
    assert "intervals" not in crosshost.summary(_client_summary(), trips, clock, {})["extra"]["merge"]
    assert crosshost.explain_merged(_merge_file(clock, trips), trips, "m")["intervals"] == {}


@pytest.mark.parametrize("early_ns", [None, 300])
def test_merge_json_is_read_back_as_merge_wrote_it(tmp_path, early_ns):
    """merge.json as cli/merge.py writes it (crosshost.merge_file, results.write_json), on one
    kernel and across hosts (intervals): the schema accepts it, and read back typed
    (results.merge_file) it is the same value and, written again, the same text."""
    from analysis.store import jsonfiles, results

    if early_ns is None:
        clock = crosshost.one_clock(
            pd.DataFrame({"ts_send": [1100], "ts_recv": [1500]}), pd.DataFrame({"ts_send": [2000], "ts_recv": [2400]})
        )
    else:
        clock = crosshost.Alignment(0, float(early_ns), 0.0, float(early_ns), True, 1, 1, 1)
    trips = crosshost.round_trips(ITER, CLIENT, SERVER, JOINED, clock)
    doc = _merge_file(clock, trips)
    results.write_json(tmp_path / "merge.json", doc.to_json())
    back = results.merge_file(tmp_path)
    assert back == doc
    assert bool(back.intervals) == (early_ns is not None)
    results.write_json(tmp_path / "again.json", back.to_json())
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "merge.json").read_bytes()
    # a part no round trip gave is null, and read so
    empty = crosshost.merge_file("c", "s", jsonfiles.MergeHosts(), clock, jsonfiles.MergeMessages(), 0, trips.iloc[:0])
    results.write_json(tmp_path / "merge.json", empty.to_json())
    assert results.merge_file(tmp_path) == empty and empty.latency is None and empty.parts["server_user"] is None


def test_a_damaged_merge_json_is_one_line(tmp_path):
    from analysis.store import results

    clock = crosshost.Alignment(0, 300.0, 0.0, 300.0, True, 1, 1, 1)
    d = _merge_file(clock, crosshost.round_trips(ITER, CLIENT, SERVER, JOINED, clock)).to_json()
    d["clock"]["consistent"] = "yes"
    results.write_json(tmp_path / "merge.json", d)
    with pytest.raises(UsageError, match=r"merge.json: field clock.consistent: expected true or false"):
        results.merge_file(tmp_path)


def _merge_file(clock, trips):
    """merge.json of the round trips above (crosshost.merge_file, as cli/merge.py makes it)."""
    from analysis.store import jsonfiles

    hosts, messages = jsonfiles.MergeHosts("a", "b"), jsonfiles.MergeMessages(1, 1)
    return crosshost.merge_file("client-dir", "server-dir", hosts, clock, messages, len(ITER), trips)


def _client_summary(**fields: str) -> RunSummary:
    """The least client summary crosshost.summary copies (workload x)."""
    return RunSummary.from_json({"schema_version": 1, "workload": "x", "metrics": {}, **fields})
