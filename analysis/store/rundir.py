"""What model/ computes from, read from one results directory and handed over as data: model/
opens no file and takes no directory (explain, compare and the merged explain read through
here; a breakdown's table is written beside its statistics from here).

The checks a user's directory must pass before it is explained (a suite, a sweep, an untraced
twin, a run not traced or traced without iterations) are here too: each is one UsageError
naming the directory."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from analysis.errors import UsageError
from analysis.store import events as events_mod
from analysis.store import jsonfiles, results, summaryfile
from analysis.store.events import EventsFile, RowGroups

if TYPE_CHECKING:
    import pandas as pd

TAIL_COLUMNS = ["run", "iteration", "metric", "tail"]
T = TypeVar("T")


@dataclass
class ExplainInputs:
    """What explain reads of one traced run: where names the run in messages (the directory
    as the user gave it); summary, workload: summary.json and workload.json as read; iterations:
    iterations.parquet; tails: breakdown.parquet's tail labels (TAIL_COLUMNS; None without the
    file); row_groups: events.parquet's row groups (their rows and time ranges), by which
    model.explain asks for the events it needs. events.parquet itself stays open here, for
    answer: model/ is handed tables, never the file."""

    where: str
    summary: summaryfile.RunSummary
    workload: jsonfiles.Workload
    iterations: pd.DataFrame
    tails: pd.DataFrame | None
    row_groups: RowGroups
    _events: EventsFile = field(repr=False, compare=False)

    def answer(self, walk: Generator[events_mod.Read, Any, T]) -> T:
        """What walk (model.explain.explain, model.leadin.lead_in) returns, the row groups it
        asks for read from events.parquet (store.events.answer)."""
        return events_mod.answer(walk, self._events)


@contextlib.contextmanager
def explain_inputs(resdir: Path | str) -> Iterator[ExplainInputs]:
    """The ExplainInputs of the traced run in resdir, its events.parquet open within the block;
    a directory explain cannot take (see the module's text) is one UsageError."""
    resdir = Path(resdir)
    if (resdir / "suite.json").exists() and not (resdir / "summary.json").exists():
        first = next((d.name for d in sorted(resdir.iterdir()) if (d / "summary.json").exists()), "EXPERIMENT")
        raise UsageError(f"{resdir} is a suite: explain one of its experiments, e.g. {resdir / first}")
    resdir = results.check_results_dir(resdir)
    summary = results.read_summary(resdir)
    if summary.get("kind") == "sweep":
        sizes = sorted(d.name for d in resdir.iterdir() if d.name.startswith("size-"))
        raise UsageError(
            f"{resdir} is a sweep: explain one of its sizes, e.g. {resdir / (sizes[-1] if sizes else 'size-N')}"
        )
    parent = resdir.resolve().parent
    if (
        resdir.name == "untraced"
        and (parent / "summary.json").exists()
        and (results.read_summary(parent).get("probe_effect") or {}).get("untraced_dir") == resdir.name
    ):
        raise UsageError(
            f"{resdir} is the untraced twin of {parent} (the same run without probes, for the probe effect): "
            f"explain {parent}"
        )
    if not (resdir / "events.parquet").exists():
        raise UsageError(
            f"{resdir} was not traced (no events.parquet): explain needs a traced run (ipctrace run without --no-trace)"
        )
    if (summary.get("params") or {}).get("iterations_from") == "none" or not (resdir / "iterations.parquet").exists():
        raise UsageError(
            f"{resdir} is a whole trace without iterations (traced without --rtt, --markers or --iteration-func): "
            f"explain takes one iteration; the threads' time is in its table and in ipctrace report {resdir}"
        )
    typed = results.typed_summary(summary, resdir)
    assert isinstance(typed, summaryfile.RunSummary)  # a sweep was refused above
    workload = results.workload_file(resdir)
    iterations = results.read_iterations(resdir)
    tails = results.read_breakdown(resdir, columns=TAIL_COLUMNS)
    with EventsFile(resdir) as events:
        yield ExplainInputs(str(resdir), typed, workload, iterations, tails, events.row_groups, events)


def read_compared(
    resdir: Path | str, summary: summaryfile.RunSummary
) -> tuple[str, summaryfile.RunSummary, pd.DataFrame, pd.DataFrame | None]:
    """One run as compare takes it (model.compare.Run's fields): its name, its summary as the
    caller read it, iterations.parquet and breakdown.parquet (None without one)."""
    return str(resdir), summary, results.read_iterations(resdir), results.read_breakdown(resdir)


def read_merged(resdir: Path | str) -> tuple[jsonfiles.MergeFile, pd.DataFrame]:
    """A merged directory's (ipctrace merge) merge.json, typed, and breakdown.parquet."""
    resdir = Path(resdir)
    return results.merge_file(resdir), results.read_parquet(resdir / "breakdown.parquet")


@contextlib.contextmanager
def breakdown_written_alongside(frame: pd.DataFrame, resdir: Path | str) -> Iterator[None]:
    """Within the block, resdir/breakdown.parquet is written from frame in a thread of its own
    (results.written_alongside), so that the breakdown's statistics are computed meanwhile; the
    thread is handed an Arrow table and never touches the frame."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    with results.written_alongside(results.write_parquet, table, f"{resdir}/breakdown.parquet"):
        yield
