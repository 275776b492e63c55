"""Folded-stack files (oncpu.folded, offcpu.folded, breakdown.folded): `frame;frame;frame weight`
lines, root first, as flame graph tools read them."""

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.errors import UsageError
from analysis.store import safeio


def read_folded(path: Path | str) -> pd.Series:
    """A folded-stack file -> Series (index: stack, value: int weight), equal stacks summed."""
    stacks, weights = [], []
    try:
        text = safeio.read_bytes(path).decode()
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not text: not a folded stack file") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, sep, weight = line.rpartition(" ")
        if not sep or not stack or not weight.isdigit():
            raise UsageError(f"{path}:{lineno}: not a folded stack line (`a;b;c count`)")
        stacks.append(stack)
        weights.append(int(weight))
    s = pd.Series(weights, index=stacks, dtype=np.int64)
    return s.groupby(level=0, sort=False).sum()


def write_folded(path: Path | str, folded: pd.Series) -> Path | str:
    """Series stack -> weight, written heaviest first; zero weights are left out."""
    folded = folded[folded > 0].sort_values(ascending=False, kind="stable")
    safeio.write_text(path, "".join(f"{stack} {int(weight)}\n" for stack, weight in folded.items()))
    return path
