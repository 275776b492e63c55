"""The MSG records of a trace (bpf/ipctrace.h; `ipctrace trace --messages`) decoded: what each
message a followed task sent or received carries, as ipctrace merge matches it across hosts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from analysis.store.records import MSG_UNREAD

if TYPE_CHECKING:
    import pandas as pd


def read(events: pd.DataFrame) -> pd.DataFrame:
    """The messages whose bytes were read: ts, tid, dir (records.MSG_SEND or MSG_RECV), key
    (the hash of the first 64 bytes | the length << 32)."""
    import pandas as pd

    m = events[events["type"] == "msg"]
    m = m[(m["aux"].to_numpy() & MSG_UNREAD) == 0]
    return pd.DataFrame(
        {
            "ts": m["ts"].to_numpy(np.int64),
            "tid": m["tid"].to_numpy(np.int64),
            "dir": m["aux"].to_numpy(np.int64),
            "key": m["a0"].to_numpy(np.int64),
        }
    )
