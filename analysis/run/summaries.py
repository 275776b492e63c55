"""summary.json of a results directory as its typed result: store/ reads and checks the file,
the model's types take it (model/ reads no file)."""

from __future__ import annotations

from pathlib import Path

from analysis.errors import UsageError
from analysis.model.summary import RunSummary, SweepSummary
from analysis.store import results


def read(resdir: Path | str) -> RunSummary | SweepSummary:
    """summary.json of a results directory as its type (a run's, or a sweep's): checked against
    the schema by store.results.read_summary; what does not fit its type is one UsageError."""
    d = results.read_summary(resdir)
    try:
        return SweepSummary.from_json(d) if d.get("kind") == "sweep" else RunSummary.from_json(d)
    except ValueError as e:
        raise UsageError(f"{Path(resdir) / 'summary.json'}: {e}") from None


def read_run(resdir: Path | str) -> RunSummary:
    """summary.json of one run (not a sweep's: UsageError naming it)."""
    s = read(resdir)
    if isinstance(s, SweepSummary):
        raise UsageError(f"{resdir} is a sweep, not a run: name one of its sizes (size-N)")
    return s
