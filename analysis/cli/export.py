"""ipctrace export DIR --FORMAT...: write a results directory in other formats, next to its files
(or where -o/--out says).

Each format is one entry in FORMATS: --NAME runs its function(resdir: Path, args), which
returns the path (or list of paths) it wrote. A part of the run (--window, --around) goes to a
name of its own, never over the export of the whole; a file that is replaced is said.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.errors import UsageError
from analysis.store import events as events_mod
from analysis.store import safeio
from analysis.store.results import read_iterations, read_summary, was_traced

if TYPE_CHECKING:
    import pandas as pd


def export_csv(resdir: Path | str, args: argparse.Namespace | None = None) -> list[Path]:
    """iterations.csv, and events.csv when the run was traced (in --out DIR if given)."""
    resdir = Path(resdir)
    into = getattr(args, "out", None) or resdir
    df = read_iterations(resdir)
    ev = None
    if os.path.lexists(resdir / "events.parquet"):
        ev = events_mod.read_parquet(resdir)
    elif was_traced(read_summary(resdir)):
        # Said, never left out in silence: the run has events, this directory lost them.
        raise UsageError(f"{resdir} was traced but its events.parquet is missing: events.csv cannot be written")
    written = [_write_csv(df, Path(into) / "iterations.csv")]
    if ev is not None:
        written.append(_write_csv(ev, Path(into) / "events.csv"))
    return written


def _write_csv(df: pd.DataFrame, path: Path) -> Path:
    _say_replaced(path)
    try:
        with safeio.created(path) as p:
            df.to_csv(p, index=False)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    return path


def export_perfetto(resdir: Path | str, args: argparse.Namespace | None = None) -> Path:
    from analysis.render import perfetto  # imported only when chosen
    from analysis.run import export

    window, around = getattr(args, "window", None), getattr(args, "around", None)
    path = getattr(args, "out", None) or Path(resdir) / perfetto.part_name(perfetto.FILE, window, around)
    _say_replaced(path)
    return export.perfetto_json(resdir, window, around, path)


def export_perfetto_proto(resdir: Path | str, args: argparse.Namespace | None = None) -> Path:
    from analysis.render import perfetto, perfetto_proto  # imported only when chosen
    from analysis.run import export

    window, around = getattr(args, "window", None), getattr(args, "around", None)
    path = getattr(args, "out", None) or Path(resdir) / perfetto.part_name(perfetto_proto.FILE, window, around)
    _say_replaced(path)
    return export.perfetto_proto(resdir, window, around, path)


def _say_replaced(path: Path | str) -> None:
    """A file about to be replaced is said, with its size: never overwritten in silence."""
    try:
        size = os.lstat(path).st_size
    except FileNotFoundError:
        return
    except OSError:
        return  # the write says what is wrong with it
    print(f"ipctrace export: replacing {path} ({_size(size)} before)", file=sys.stderr)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


FORMATS = {  # name: (function, help)
    "csv": (export_csv, "iterations.csv (and events.csv when traced)"),
    "perfetto": (export_perfetto, "trace.perfetto.json, for ui.perfetto.dev or chrome://tracing"),
    "perfetto-proto": (
        export_perfetto_proto,
        "trace.perfetto-trace: the binary Perfetto trace (interned names, delta times, CPU tracks, each "
        "iteration's breakdown as arguments), compact for long runs",
    ),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", description=__doc__.split("\n\n")[0])
    p.add_argument("dir", metavar="DIR", type=Path, help="results directory")
    for name, (_, text) in FORMATS.items():
        p.add_argument(f"--{name}", action="store_true", help=text)
    p.add_argument(
        "-o",
        "--out",
        metavar="PATH",
        type=Path,
        help="with one format: the file to write (--perfetto, --perfetto-proto) or the directory (--csv); "
        "default: beside the run's files",
    )
    p.add_argument(
        "--window",
        metavar="A:B",
        help="--perfetto, --perfetto-proto: only iterations A to B (their positions in time order), or a time "
        "span since the first iteration (1.5s:2s, 200ms:250ms); written to trace-window-A-B.*",
    )
    p.add_argument(
        "--around",
        metavar="p99|max|K",
        help="--perfetto, --perfetto-proto: only the iteration at the p99, the slowest one, or iteration K, "
        "with 5 either side; written to trace-around-p99.* (and so on)",
    )


def run(args: argparse.Namespace) -> int:
    chosen = [fn for n, (fn, _) in FORMATS.items() if getattr(args, n.replace("-", "_"))]
    if not chosen:
        raise UsageError("export: say which format: " + " ".join(f"--{n}" for n in FORMATS))
    if (args.window or args.around) and not (args.perfetto or args.perfetto_proto):
        raise UsageError("export: --window and --around choose a part of the run for --perfetto or --perfetto-proto")
    if args.out is not None:
        if len(chosen) > 1:
            raise UsageError("export: --out names one format's output: give one format with it")
        if args.csv and not args.out.is_dir():
            raise UsageError(f"export: --out {args.out}: with --csv, name an existing directory")
        if not args.csv and args.out.is_dir():
            raise UsageError(f"export: --out {args.out} is a directory: name the file to write")
    read_summary(args.dir)
    for fn in chosen:
        written = fn(args.dir, args)
        for path in written if isinstance(written, list) else [written]:
            print(path)
    return 0
