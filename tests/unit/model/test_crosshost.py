"""model/crosshost.py: messages matched by content, the server's clock aligned from the
matched traffic with an error bound that holds, and what cannot be aligned refused."""

import numpy as np
import pandas as pd
import pytest

from analysis.errors import UsageError
from analysis.model import crosshost
from analysis.store.records import MSG_RECV, MSG_SEND, MSG_UNREAD


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
    client = {"schema_version": 1, "workload": "pipe", "metrics": {}, "extra": {"tag": "x"}}
    facts = {"client": "a", "server": "b", "round_trips": 4, "joined": 4}
    merged = crosshost.summary(client, trips, clock, facts)
    got = crosshost.MergeFacts.of(merged["extra"])
    assert got == crosshost.MergeFacts("a", "b", 4, 4, clock.error_ns)
    assert crosshost.MergeFacts.of(client["extra"]) is None
